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
            switch type {
            case 0: receiptType = ReceiptType(rawValue: try inner().string("receipt attribute \(type)"))
            case 1: appItemId = try inner().integer("receipt attribute \(type)")
            case 2: bundleId = try inner().string("receipt attribute \(type)"); bundleIdData = Array(value)
            case 3: applicationVersion = try inner().string("receipt attribute \(type)")
            case 4: opaqueValue = Array(value)
            case 5: sha1Hash = Array(value)
            case 10: ageRating = try inner().optionalString("receipt attribute \(type)")
            case 12: receiptCreationDate = try inner().date("receipt attribute \(type)")
            case 15: downloadId = try inner().integer("receipt attribute \(type)")
            case 16: versionExternalIdentifier = try inner().integer("receipt attribute \(type)")
            case 17:
                guard inAppPurchases.count < limits.maxInAppPurchases else {
                    throw AppStoreError(.tooLarge, "receipt holds more than \(limits.maxInAppPurchases) purchases")
                }
                inAppPurchases.append(try InAppPurchaseReceipt(value: value))
            case 18: originalPurchaseDate = try inner().date("receipt attribute \(type)")
            case 19: originalApplicationVersion = try inner().optionalString("receipt attribute \(type)")
            case 21: expirationDate = try inner().date("receipt attribute \(type)")
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
            // Three fields exactly, held without an array: this runs for every attribute of every purchase.
            var type: Int64?, version: Int64?, value: ArraySlice<UInt8>?
            try walker.forEachChild(of: attribute, depth: 2) { field in
                if type == nil { type = try walker.integer(field) } else if version == nil { version = try walker.integer(field) } else if value == nil {
                    value = try walker.octets(field, depth: 2)
                } else { throw AppStoreError.malformed("receipt attribute has more than 3 fields") }
            }
            guard let type, let version, let value else { throw AppStoreError.malformed("receipt attribute has fewer than 3 fields") }
            try body(type, version, value)
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
            switch type {
            case 1701: quantity = Int(try inner().integer("in-app attribute \(type)"))
            case 1702: productId = try inner().string("in-app attribute \(type)")
            case 1703: transactionId = try inner().string("in-app attribute \(type)")
            case 1704: purchaseDate = try inner().date("in-app attribute \(type)")
            case 1705: originalTransactionId = try inner().optionalString("in-app attribute \(type)")
            case 1706: originalPurchaseDate = try inner().date("in-app attribute \(type)")
            case 1707: productTypeCode = try inner().integer("in-app attribute \(type)")
            case 1708: expiresDate = try inner().date("in-app attribute \(type)")
            case 1711: webOrderLineItemId = try inner().integer("in-app attribute \(type)")
            case 1712: cancellationDate = try inner().date("in-app attribute \(type)")
            case 1713: isTrialPeriod = try inner().integer("in-app attribute \(type)") != 0
            case 1719: isInIntroOfferPeriod = try inner().integer("in-app attribute \(type)") != 0
            case 1721: promotionalOfferId = try inner().optionalString("in-app attribute \(type)")
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
