import AppStoreFormats
import Foundation
import HummingbirdTesting
import NIOCore

/// The simulator's answer as `T`: Apple's bodies (Server API, verifyReceipt, Retention Messaging, Advanced Commerce) as
/// AppStoreFormats types, its own device endpoints as the small types below. Apple's JSON conventions (dates in
/// milliseconds since 1970).
func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
    try AppStoreJSON.decoder().decode(T.self, from: Data(response.body.readableBytesView))
}

/// Apple's error body (`errorCode`, `errorMessage`) of an answer; nil when the answer is not one.
func apiError(_ response: TestResponse) -> Int? {
    (try? decode(APIErrorBody.self, response))?.errorCode.rawValue
}

/// A request body, encoded as Apple encodes it (dates in milliseconds, UUIDs in lower case).
func encoded(_ value: some Encodable) throws -> ByteBuffer {
    ByteBuffer(bytes: try AppStoreJSON.encoder().encode(value))
}

// MARK: The simulator's device endpoints (`/sim/…`), which have no Apple type

/// `GET /sim/products?ids=…`.
struct SimProducts: Decodable {
    struct Product: Decodable {
        struct Offer: Decodable { var id: String? }
        var productId: String
        var familyShareable: Bool
        var promotionalOffers: [Offer]
        var offerCodes: [Offer]
    }

    var products: [Product]
    var invalidProductIds: [String]
}

/// `GET /sim/accounts/{account}/receipt`.
struct SimReceipt: Decodable { var receipt: String }

/// `POST /sim/transactions/{id}/finish`.
struct SimFinished: Decodable { var finished: Bool }

/// `POST /sim/requests/{id}/approve`.
struct SimApproved: Decodable { var transactionId: String }

// MARK: What Apple's Python library answered (scripts/apple_library_*.py)

/// One call of Apple's library as the scripts print it: what it returned, or the error it raised — Apple's
/// (`apiError`, the code the simulator answered) or any other (`exception`: the library could not read an answer).
enum LibraryCall<Value: Decodable>: Decodable, CustomStringConvertible {
    struct Failure: Decodable {
        var httpStatus: Int?
        var apiError: Int?
        var message: String?
        var exception: String?
    }

    case value(Value)
    case failure(Failure)

    init(from decoder: any Decoder) throws {
        if let failure = try? Failure(from: decoder), failure.apiError != nil || failure.exception != nil {
            self = .failure(failure)
        } else {
            self = .value(try Value(from: decoder))
        }
    }

    var value: Value? {
        if case .value(let value) = self { return value }
        return nil
    }

    /// Apple's error code, when the call raised one.
    var apiError: Int? {
        if case .failure(let failure) = self { return failure.apiError }
        return nil
    }

    var description: String {
        switch self {
        case .value(let value): "\(value)"
        case .failure(let failure): "\(failure)"
        }
    }
}

/// scripts/apple_library_api.py's output: Apple's App Store Server API client against the simulator.
struct AppleAPIResults: Decodable {
    struct Signed: Decodable { var signed: String }
    struct History: Decodable { var pages: [Int] }
    struct Group: Decodable { var statuses: [Int] }
    struct AppTransaction: Decodable { var signed: String; var byAppTransactionId: String }
    struct MassExtend: Decodable { var requestIdentifier: Bool?; var complete: Bool?; var completeDate: Bool?; var succeeded: Int?; var failed: Int? }
    /// A call whose answer the test reads only as Apple's error: any value.
    struct Ignored: Decodable { init(from decoder: any Decoder) throws {} }

    var transaction: LibraryCall<Signed>?
    var missingTransaction: LibraryCall<Ignored>?
    var history: LibraryCall<History>?
    var historyConsumables: LibraryCall<Int>?
    var statuses: LibraryCall<[Group]>?
    var refunds: LibraryCall<Int>?
    var extend: LibraryCall<Bool>?
    var badExtend: LibraryCall<Ignored>?
    var setToken: LibraryCall<String>?
    var lookup: LibraryCall<Int>?
    var historyV1: LibraryCall<Int>?
    var historyRevoked: LibraryCall<Int>?
    var historyNotRevoked: LibraryCall<Int>?
    var setTokenOnRenewal: LibraryCall<String>?
    var setTokenOnFamilyCopy: LibraryCall<String>?
    var extendFamilyCopy: LibraryCall<Bool>?
    var appTransaction: LibraryCall<AppTransaction>?
    var missingAppTransaction: LibraryCall<Ignored>?
    var consumption: LibraryCall<String>?
    var consumptionWithoutConsent: LibraryCall<String>?
    var consumptionPercentageOfSubscription: LibraryCall<String>?
    var consumptionOfFamilyCopy: LibraryCall<String>?
    var consumptionOfAppTransaction: LibraryCall<String>?
    var finish: LibraryCall<String>?
    var missingFinish: LibraryCall<String>?
    var historyV1AfterFinish: LibraryCall<Int>?
    var massExtend: LibraryCall<MassExtend>?
    var missingMassExtendStatus: LibraryCall<Ignored>?
    var badMassExtend: LibraryCall<Ignored>?
}

/// scripts/apple_library_retention.py's output: Apple's Retention Messaging client against the simulator. Every call by
/// name (`calls`: "ok" or Apple's error), and what the test reads of the ones that return content.
struct AppleRetentionResults: Decodable {
    struct Image: Decodable { var id: String?; var state: String?; var size: String? }
    struct Message: Decodable { var id: String?; var state: String? }
    struct Started: Decodable { var requestId: Bool?; var threshold: Int?; var total: Int? }
    struct Finished: Decodable, CustomStringConvertible {
        var result: String?
        var successRate: Int?
        var numPending: Int?
        var target: String?
        var p50: Int?
        var p99: Int?
        var average: Int?
        var failures: [String: Int]?
        var description: String {
            "\(result ?? "-"), \(numPending.map(String.init) ?? "-") pending, failures \(failures ?? [:]), target \(target ?? "-")"
        }
    }

    var imageList: LibraryCall<[Image]>?
    var messageList: LibraryCall<[Message]>?
    var getDefault: LibraryCall<String>?
    var getRealtimeURL: LibraryCall<String>?
    var initiatePerformanceTest: LibraryCall<Started>?
    var performanceTestResults: LibraryCall<Finished>?
    /// Every call, by name.
    var calls: [String: LibraryCall<AppStoreJSONValue>] = [:]

    private enum CodingKeys: String, CodingKey { case imageList, messageList, getDefault, getRealtimeURL, initiatePerformanceTest, performanceTestResults }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        imageList = try container.decodeIfPresent(LibraryCall<[Image]>.self, forKey: .imageList)
        messageList = try container.decodeIfPresent(LibraryCall<[Message]>.self, forKey: .messageList)
        getDefault = try container.decodeIfPresent(LibraryCall<String>.self, forKey: .getDefault)
        getRealtimeURL = try container.decodeIfPresent(LibraryCall<String>.self, forKey: .getRealtimeURL)
        initiatePerformanceTest = try container.decodeIfPresent(LibraryCall<Started>.self, forKey: .initiatePerformanceTest)
        performanceTestResults = try container.decodeIfPresent(LibraryCall<Finished>.self, forKey: .performanceTestResults)
        calls = try [String: LibraryCall<AppStoreJSONValue>](from: decoder)
    }
}

/// `POST /sim/subscriptions/{id}/retention-message`: what the customer who may cancel is shown.
struct RetentionShown: Decodable {
    /// `REALTIME`, `DEFAULT` or `NONE`.
    var source: String
    var messageIdentifier: String?
    /// Why the developer's answer was not shown.
    var problem: String?
    var sendAttemptResult: String?
}

/// An answer of Apple's API read as its error body when it is one, its text kept for a failure's message.
struct APIAnswer: CustomStringConvertible {
    let text: String
    let error: APIErrorBody?

    init(_ response: TestResponse) {
        text = String(decoding: response.body.readableBytesView, as: UTF8.self)
        error = try? decode(APIErrorBody.self, response)
    }

    /// Apple's `errorCode`, nil when the answer is no error body.
    var errorCode: Int? { error?.errorCode.rawValue }
    var description: String { text }
}

/// `POST /sim/purchases`: a purchase on the simulated device.
struct SimPurchaseRequest: Encodable {
    var account: String
    var device = "d"
    var productId: String
    var withReceipt: Bool?
    /// An Advanced Commerce purchase: the signed request, bare or in StoreKit's `{"signatureInfo": {"token": …}}`.
    var advancedCommerceData: String?
}

/// Apple's library's output (scripts/apple_library_verify.py): each decoded payload as the library's own model printed
/// it, a free-form object kept as JSON.
extension AppStoreJSONValue {
    var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var int: Int? {
        if case .number(let value) = self, let exact = Int(exactly: value) { return exact }
        return nil
    }

    var array: [AppStoreJSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }
}
