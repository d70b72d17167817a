/// What a type's `init(from:)` cannot tell the OpenAPI document: fields it reads leniently, because servers before them
/// did not send them, that this server always sends. The document marks them required, so that schemathesis holds the
/// server to sending them while old answers still decode.
public protocol APISchemaHints {
    /// The JSON keys the server always writes although `init(from:)` decodes them if present.
    static var alwaysSent: Set<String> { get }
}

extension PurchaseReply.Refused: APISchemaHints {
    public static var alwaysSent: Set<String> { ["class"] }
}

extension OfferSignReply: APISchemaHints {
    public static var alwaysSent: Set<String> { ["kind"] }
}

extension PurchaseReply: APISchemaHints {
    public static var alwaysSent: Set<String> { ["transactions", "refused"] }
}

extension ErrorBody.Detail: APISchemaHints {
    public static var alwaysSent: Set<String> { ["message", "class"] }
}

extension Entitlements.Item: APISchemaHints {
    public static var alwaysSent: Set<String> { ["environment"] }
}
