/// The body of every refusal: `{"error": {"code": "…", "message": "…", "class": "final"|"operator"|"retry"}}`.
public struct ErrorBody: Codable, Hashable, Sendable {
    public struct Detail: Codable, Hashable, Sendable {
        public var code: ErrorCode
        public var message: String
        /// Absent from servers older than the class; ``RefusalClass/of(code:status:)`` decides then.
        public var `class`: RefusalClass?

        public init(code: ErrorCode, message: String, class refusal: RefusalClass?) {
            self.code = code
            self.message = message
            self.class = refusal
        }

        /// Lenient where old servers were: a body without a message still names its code.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            code = try container.decode(ErrorCode.self, forKey: .code)
            message = try container.decodeIfPresent(String.self, forKey: .message) ?? ""
            self.class = try? container.decodeIfPresent(RefusalClass.self, forKey: .class)
        }
    }

    public var error: Detail

    public init(code: ErrorCode, message: String, class refusal: RefusalClass?) {
        error = Detail(code: code, message: message, class: refusal)
    }
}
