import Foundation
import PurchaseAPI

/// Reads an answer's body as one of the contract's types (``PurchaseAPI``: dates in milliseconds since 1970). A body
/// that does not decode fails the test with the decoder's error, which names the field.
public func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
    try APIJSON.decoder().decode(type, from: data)
}

/// Encodes a request body as the contract writes it.
public func encodeRequest(_ body: any Encodable) throws -> Data {
    try APIJSON.encoder().encode(body)
}
