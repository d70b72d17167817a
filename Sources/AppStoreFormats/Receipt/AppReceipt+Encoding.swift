import Foundation

extension ASN1Writer {
    /// A DER INTEGER, minimal two's complement.
    public static func integer(_ value: Int64) -> [UInt8] {
        var bytes = withUnsafeBytes(of: value.bigEndian) { Array($0) }
        while bytes.count > 1, (bytes[0] == 0 && bytes[1] & 0x80 == 0) || (bytes[0] == 0xFF && bytes[1] & 0x80 != 0) {
            bytes.removeFirst()
        }
        return tlv(0x02, bytes)
    }

    /// A DER IA5String (receipt dates).
    public static func ia5String(_ string: String) -> [UInt8] { tlv(0x16, Array(string.utf8)) }
}

extension AppReceipt {
    /// The receipt payload in Apple's layout: a `SET OF ReceiptAttribute`, with every documented slot present (empty
    /// strings and zeros for "absent", as App Store receipts do) and ``otherAttributes`` written back as they came.
    public func payloadDER() -> [UInt8] {
        var attributes: [(Int64, [UInt8])] = [
            (0, ASN1Writer.utf8String(receiptType?.rawValue ?? "")),
            (1, ASN1Writer.integer(appItemId ?? 0)),
            (2, bundleIdData),
            (3, ASN1Writer.utf8String(applicationVersion)),
            (4, opaqueValue),
            (5, sha1Hash),
            (12, Self.date(receiptCreationDate)),
            (19, ASN1Writer.utf8String(originalApplicationVersion ?? "")),
        ]
        if let ageRating { attributes.append((10, ASN1Writer.utf8String(ageRating))) }
        if let downloadId { attributes.append((15, ASN1Writer.integer(downloadId))) }
        if let versionExternalIdentifier { attributes.append((16, ASN1Writer.integer(versionExternalIdentifier))) }
        if let originalPurchaseDate { attributes.append((18, Self.date(originalPurchaseDate))) }
        if let expirationDate { attributes.append((21, Self.date(expirationDate))) }
        attributes += inAppPurchases.map { (17, $0.recordDER()) }
        return Self.attributeSet(attributes, others: otherAttributes)
    }

    static func date(_ date: Date?) -> [UInt8] { ASN1Writer.ia5String(date.map(ReceiptDate.rfc3339) ?? "") }

    static func attributeSet(_ attributes: [(Int64, [UInt8])], others: [ReceiptAttribute]) -> [UInt8] {
        var all = attributes.map { ReceiptAttribute(type: $0.0, version: 1, value: $0.1) } + others
        all.sort { $0.type < $1.type }
        let content = all.flatMap { attribute in
            ASN1Writer.tlv(0x30, ASN1Writer.integer(attribute.type) + ASN1Writer.integer(attribute.version) + ASN1Writer.tlv(0x04, attribute.value))
        }
        return ASN1Writer.tlv(0x31, content)
    }
}

extension InAppPurchaseReceipt {
    /// One purchase record (attribute 17's value) with every documented slot present.
    func recordDER() -> [UInt8] {
        let attributes: [(Int64, [UInt8])] = [
            (1701, ASN1Writer.integer(Int64(quantity ?? 1))),
            (1702, ASN1Writer.utf8String(productId)),
            (1703, ASN1Writer.utf8String(transactionId)),
            (1704, AppReceipt.date(purchaseDate)),
            (1705, ASN1Writer.utf8String(originalTransactionId ?? transactionId)),
            (1706, AppReceipt.date(originalPurchaseDate ?? purchaseDate)),
            (1707, ASN1Writer.integer(productTypeCode ?? -1)),
            (1708, AppReceipt.date(expiresDate)),
            (1711, ASN1Writer.integer(webOrderLineItemId ?? 0)),
            (1712, AppReceipt.date(cancellationDate)),
            (1713, ASN1Writer.integer(isTrialPeriod == true ? 1 : 0)),
            (1719, ASN1Writer.integer(isInIntroOfferPeriod == true ? 1 : 0)),
            (1721, ASN1Writer.utf8String(promotionalOfferId ?? "")),
        ]
        return AppReceipt.attributeSet(attributes, others: otherAttributes)
    }

    /// The receipt's product type code (attribute 1707) for a product type.
    public static func productTypeCode(_ type: ProductType) -> Int64 {
        switch type {
        case .nonConsumable: 0
        case .consumable: 1
        case .nonRenewingSubscription: 2
        case .autoRenewableSubscription: 3
        default: -1
        }
    }
}
