extension AppReceipt {
    /// Decodes a receipt payload: the `SET OF ReceiptAttribute` inside the PKCS#7 container (also accepted wrapped in
    /// one more OCTET STRING, as Apple's own verifier does). Unknown attributes are kept in ``otherAttributes``.
    public init(payload: [UInt8], limits: InputLimits = .default) throws {
        guard payload.count <= limits.maxReceiptBytes else {
            throw AppStoreError(.tooLarge, "receipt payload is \(payload.count) bytes; the limit is \(limits.maxReceiptBytes)")
        }
        var walker = TLVWalker(bytes: payload[...])
        var root = try walker.root()
        if root.tag == TLVWalker.octetString || root.tag == TLVWalker.constructedOctetString {
            walker = TLVWalker(bytes: try walker.octets(root))
            root = try walker.root()
        }
        guard root.tag == TLVWalker.set else { throw AppStoreError.malformed("receipt payload is not a SET") }

        var receiptType: ReceiptType?
        var bundleId: String?
        var bundleIdData: [UInt8] = []
        var applicationVersion: String?
        self.init(bundleId: "", bundleIdData: [], applicationVersion: "")
        try Self.forEachAttribute(in: root, walker) { type, version, value in
            let inner = { try InnerValue(value) }
            let name = "receipt attribute \(type)"
            switch type {
            case 0: receiptType = ReceiptType(rawValue: try inner().string(name))
            case 1: appItemId = try inner().integer(name)
            case 2: bundleId = try inner().string(name); bundleIdData = Array(value)
            case 3: applicationVersion = try inner().string(name)
            case 4: opaqueValue = Array(value)
            case 5: sha1Hash = Array(value)
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
            default: otherAttributes.append(ReceiptAttribute(type: type, version: version, value: Array(value)))
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

    /// Walks a `SET OF SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`.
    static func forEachAttribute(
        in set: TLVWalker.Element, _ walker: TLVWalker, _ body: (Int64, Int64, ArraySlice<UInt8>) throws -> Void
    ) throws {
        try walker.forEachChild(of: set) { attribute in
            guard attribute.tag == TLVWalker.sequence else { throw AppStoreError.malformed("receipt attribute is not a SEQUENCE") }
            var fields: [TLVWalker.Element] = []
            fields.reserveCapacity(3)
            try walker.forEachChild(of: attribute, depth: 2) { field in
                guard fields.count < 3 else { throw AppStoreError.malformed("receipt attribute has more than 3 fields") }
                fields.append(field)
            }
            guard fields.count == 3 else { throw AppStoreError.malformed("receipt attribute has \(fields.count) fields") }
            try body(walker.integer(fields[0]), walker.integer(fields[1]), walker.octets(fields[2], depth: 2))
        }
    }
}

extension InAppPurchaseReceipt {
    /// Decodes attribute 17's value: a DER `SET OF ReceiptAttribute` with types 1701–1722.
    init(value: ArraySlice<UInt8>) throws {
        let walker = TLVWalker(bytes: value)
        let root = try walker.root()
        guard root.tag == TLVWalker.set else { throw AppStoreError.malformed("in-app purchase record is not a SET") }
        var productId: String?
        var transactionId: String?
        self.init(quantity: nil, productId: "", transactionId: "")
        try AppReceipt.forEachAttribute(in: root, walker) { type, version, value in
            let inner = { try InnerValue(value) }
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
            default: otherAttributes.append(ReceiptAttribute(type: type, version: version, value: Array(value)))
            }
        }
        guard let productId, let transactionId else {
            throw AppStoreError.malformed("in-app purchase record lacks its product id (1702) or transaction id (1703)")
        }
        self.productId = productId
        self.transactionId = transactionId
    }
}
