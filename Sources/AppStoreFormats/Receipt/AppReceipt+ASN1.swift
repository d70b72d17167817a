import SwiftASN1

extension AppReceipt {
    /// Decodes a receipt payload: the `SET OF ReceiptAttribute` inside the PKCS#7 container (also accepted wrapped in
    /// one more OCTET STRING, as Apple's own verifier does). Unknown attributes are kept in ``otherAttributes``.
    public init(payload: [UInt8], limits: InputLimits = .default) throws {
        guard payload.count <= limits.maxReceiptBytes else {
            throw AppStoreError(.tooLarge, "receipt payload is \(payload.count) bytes; the limit is \(limits.maxReceiptBytes)")
        }
        var root = try ASN1Reader.parse(payload[...], "receipt payload")
        if root.identifier == .octetString {
            root = try ASN1Reader.parse(try ASN1Reader.octets(root, "payload wrapper")[...], "receipt payload")
        }
        try ASN1Reader.expect(root, .set, "receipt payload")

        var receiptType: ReceiptType?
        var bundleId: String?
        var bundleIdData: [UInt8] = []
        var applicationVersion: String?
        self.init(bundleId: "", bundleIdData: [], applicationVersion: "")
        for attribute in try ASN1Reader.children(root, "receipt payload") {
            let (type, version, value) = try Self.attribute(attribute)
            let inner = { try InnerValue(value[...]) }
            let name = "receipt attribute \(type)"
            switch type {
            case 0: receiptType = ReceiptType(rawValue: try inner().string(name))
            case 1: appItemId = try inner().integer(name)
            case 2: bundleId = try inner().string(name); bundleIdData = value
            case 3: applicationVersion = try inner().string(name)
            case 4: opaqueValue = value
            case 5: sha1Hash = value
            case 10: ageRating = try inner().optionalString(name)
            case 12: receiptCreationDate = try inner().date(name)
            case 15: downloadId = try inner().integer(name)
            case 16: versionExternalIdentifier = try inner().integer(name)
            case 17:
                guard inAppPurchases.count < limits.maxInAppPurchases else {
                    throw AppStoreError(.tooLarge, "receipt holds more than \(limits.maxInAppPurchases) purchases")
                }
                inAppPurchases.append(try InAppPurchaseReceipt(value: value))
            case 18: originalPurchaseDate = try inner().date(name)
            case 19: originalApplicationVersion = try inner().optionalString(name)
            case 21: expirationDate = try inner().date(name)
            default: otherAttributes.append(ReceiptAttribute(type: type, version: version, value: value))
            }
        }
        guard let bundleId, let applicationVersion else {
            throw AppStoreError.malformed("receipt payload lacks the bundle id (2) or app version (3)")
        }
        self.receiptType = receiptType
        self.bundleId = bundleId
        self.bundleIdData = bundleIdData
        self.applicationVersion = applicationVersion
    }

    /// `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`
    static func attribute(_ node: ASN1Node) throws -> (type: Int64, version: Int64, value: [UInt8]) {
        try ASN1Reader.expect(node, .sequence, "receipt attribute")
        let fields = try ASN1Reader.children(node, "receipt attribute")
        guard fields.count == 3 else { throw AppStoreError.malformed("receipt attribute has \(fields.count) fields") }
        return (try ASN1Reader.integer(fields[0], "attribute type"), try ASN1Reader.integer(fields[1], "attribute version"),
                try ASN1Reader.octets(fields[2], "attribute value"))
    }
}

extension InAppPurchaseReceipt {
    /// Decodes attribute 17's value: a DER `SET OF ReceiptAttribute` with types 1701–1722.
    init(value: [UInt8]) throws {
        let root = try ASN1Reader.parse(value[...], "in-app purchase record")
        try ASN1Reader.expect(root, .set, "in-app purchase record")
        var productId: String?
        var transactionId: String?
        self.init(quantity: nil, productId: "", transactionId: "")
        for attribute in try ASN1Reader.children(root, "in-app purchase record") {
            let (type, version, value) = try AppReceipt.attribute(attribute)
            let inner = { try InnerValue(value[...]) }
            let name = "in-app attribute \(type)"
            switch type {
            case 1701: quantity = Int(try inner().integer(name))
            case 1702: productId = try inner().string(name)
            case 1703: transactionId = try inner().string(name)
            case 1704: purchaseDate = try inner().date(name)
            case 1705: originalTransactionId = try inner().optionalString(name)
            case 1706: originalPurchaseDate = try inner().date(name)
            case 1707: productTypeCode = try inner().integer(name)
            case 1708: expiresDate = try inner().date(name)
            case 1711: webOrderLineItemId = try inner().integer(name)
            case 1712: cancellationDate = try inner().date(name)
            case 1713: isTrialPeriod = try inner().integer(name) != 0
            case 1719: isInIntroOfferPeriod = try inner().integer(name) != 0
            case 1721: promotionalOfferId = try inner().optionalString(name)
            default: otherAttributes.append(ReceiptAttribute(type: type, version: version, value: value))
            }
        }
        guard let productId, let transactionId else {
            throw AppStoreError.malformed("in-app purchase record lacks its product id (1702) or transaction id (1703)")
        }
        self.productId = productId
        self.transactionId = transactionId
    }
}
