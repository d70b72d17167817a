import AppStoreClient
import AppStoreFormats
import Crypto
import Hummingbird
import NIOCore
import PurchaseAPI
import PurchaseLedger

/// What IAPKit's routes need of a request's context. A host app serving them from its own router (``PurchaseServices/routes(_:context:)``)
/// makes its context conform with two stored properties:
///
/// ```swift
/// struct AppContext: PurchaseRequestContext {
///     var coreContext: CoreRequestContextStorage
///     var purchaseAccountId: String?
///     let peerAddress: String?
///     init(source: ApplicationRequestContextSource) {
///         coreContext = .init(source: source)
///         peerAddress = source.channel.remoteAddress?.ipAddress
///     }
/// }
/// ```
public protocol PurchaseRequestContext: RequestContext {
    /// The account the app API's bearer token proved, set by its authentication (`AccountAuthenticationMiddleware`);
    /// nil on every other route.
    var purchaseAccountId: String? { get set }
    /// The address of the connection's peer, or nil when it is not known: the dashboard's sign-in throttle counts wrong
    /// keys per client (`ClientAddress`), and with nil every client counts as one.
    var peerAddress: String? { get }
}

extension PurchaseRequestContext {
    /// The account the route's authentication proved. A route outside the authenticated group has none: answered 401,
    /// never served for nobody.
    func authenticatedAccount() throws -> String {
        guard let account = purchaseAccountId else { throw APIError.unauthorized }
        return account
    }
}

/// The request context `iap serve` uses (``buildRouter(_:logger:)``).
public struct BasicPurchaseRequestContext: PurchaseRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var purchaseAccountId: String?
    public let peerAddress: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
    }
}

/// The app API's authentication: the bearer token names the account (``AccountAuthenticator``), which the routes read
/// from the context; without a valid one, 401 before any route reads a byte of the body.
struct AccountAuthenticationMiddleware<Context: PurchaseRequestContext>: RouterMiddleware {
    let authenticator: AccountAuthenticator

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let account = await authenticator.account(fromAuthorization: request.headers[.authorization]) else {
            throw APIError.unauthorized
        }
        var context = context
        context.purchaseAccountId = account
        return try await next(request, context)
    }
}

/// The admin API's key, as `Authorization: Bearer <key>`: 403 `admin_disabled` when none is configured, 401 for
/// another. Compares digests, so the comparison takes the same time however much of a wrong key matches.
struct AdminKeyMiddleware<Context: RequestContext>: RouterMiddleware {
    let adminKey: String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let key = adminKey, !key.isEmpty else { throw APIError(.forbidden, code: .adminDisabled, "no admin key is configured") }
        let given = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil } ?? ""
        guard SHA256.hash(data: Array(given.utf8)) == SHA256.hash(data: Array(key.utf8)) else { throw APIError.unauthorized }
        return try await next(request, context)
    }
}

/// The one place where the errors of the layers below become answers: a ledger refusal (a storage failure as 503
/// `storage`), a proof that did not verify, Apple refusing or away — each as its ``APIError``, on every IAPKit route, so
/// that no handler can forget it and answer a bare 500.
struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as LedgerError {
            throw APIError(error)
        } catch let error as AppStoreError {
            throw APIError(error)
        } catch let error as AppStoreClientError {
            throw APIError(error)
        }
    }
}
