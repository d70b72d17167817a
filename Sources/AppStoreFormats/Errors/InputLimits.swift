/// Size limits for everything that arrives from outside. Parsers check them before doing any work.
public struct InputLimits: Sendable, Hashable {
    /// Largest app receipt accepted, in bytes of DER (base64 text may be 4/3 of this plus line breaks).
    /// Apple's largest receipts (years of renewals) stay well below a megabyte.
    public var maxReceiptBytes: Int
    /// Largest compact JWS accepted, in bytes. A notification with nested transaction and renewal JWS is ~15 KB.
    public var maxJWSBytes: Int
    /// Most certificates accepted in a receipt's PKCS#7 container or a JWS `x5c` header.
    public var maxCertificates: Int
    /// Most in-app purchase records accepted in one receipt.
    public var maxInAppPurchases: Int

    public init(maxReceiptBytes: Int = 4 << 20, maxJWSBytes: Int = 256 << 10, maxCertificates: Int = 8, maxInAppPurchases: Int = 100_000) {
        self.maxReceiptBytes = maxReceiptBytes
        self.maxJWSBytes = maxJWSBytes
        self.maxCertificates = maxCertificates
        self.maxInAppPurchases = maxInAppPurchases
    }

    /// The defaults: generous for real App Store traffic, small enough that hostile input costs little.
    public static let `default` = InputLimits()
}
