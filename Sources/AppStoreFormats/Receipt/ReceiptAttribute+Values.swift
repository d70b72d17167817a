import Foundation

extension ReceiptAttribute {
    /// The value as an INTEGER, when it is one (e.g. undocumented attributes 9, 11, 13, 1710, 1722).
    public var integerValue: Int64? { try? InnerValue(value[...]).integer("attribute \(type)") }

    /// The value as a UTF8String or IA5String, when it is one (e.g. attributes 20, 1709, 1714–1718).
    public var stringValue: String? { try? InnerValue(value[...]).string("attribute \(type)") }

    /// The value as an RFC 3339 date, when it is one (e.g. attribute 8); `nil` for an empty date too.
    public var dateValue: Date? { (try? InnerValue(value[...]).date("attribute \(type)")) ?? nil }
}

extension AppReceipt {
    /// The first uninterpreted attribute of `type` (IAPKit names only the documented ones).
    public func otherAttribute(_ type: Int64) -> ReceiptAttribute? { otherAttributes.first { $0.type == type } }
}
