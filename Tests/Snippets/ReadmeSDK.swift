import IAPKit
import UIKit

/// At launch, once the app knows who is signed in (nil: nobody).
func startPurchases(serverURL: URL, serverKeyPEM: String, userId: String?,
                    token: @escaping @Sendable () async throws -> String) async throws -> PurchaseClient {
    let client = PurchaseClient(
        store: StoreKitStore(),                  // SimulatorStore(baseURL:account:device:) against `iap dev`
        server: PurchaseServerClient(baseURL: serverURL, verifier: try EntitlementsVerifier(publicKeyPEM: serverKeyPEM), token: token),
        journal: KeychainJournal(),              // try FileJournal(directory:) where there is no keychain
        accountId: userId,
        offlineCache: try FileEntitlementsCache(directory: URL.cachesDirectory.appendingPathComponent("entitlements")),
        log: .debug)                             // .off in release builds
    await client.start()                         // listens for transactions first, then resumes unfinished work
    return client
}

/// Another user signs in: the account and its token change together; the answer is what it owns.
func signIn(_ userId: String, client: PurchaseClient, token: @escaping @Sendable () async throws -> String) async -> Entitlements? {
    do { return try await client.logIn(userId, token: token) } catch {
        print(error.code, error.message)         // e.g. networkUnreachable: shown from the offline copy meanwhile
        return nil
    }
}

/// The Buy button of a UIKit screen: StoreKit confirms the purchase in this scene.
@MainActor func buy(_ productId: String, client: PurchaseClient, scene: UIWindowScene) async -> String {
    switch await client.purchase(productId, confirmIn: .scene(scene)) {
    case .granted(let owned): "Thank you! You now own \(owned.entitlements.map(\.name)), balances \(owned.balances)."
    case .paidPendingDelivery, .paidNotJournaled: "Paid: it is on its way."
    case .paidDeliveryDelayed: "Paid: we will deliver it shortly."
    case .deliveredToOwner: "Paid with another account's order: it went to that account."
    case .pendingApproval: "Waiting for approval (Ask to Buy)."
    case .cancelled: ""
    case .failed(let failure) where failure.code == .networkUnreachable: "Our server cannot be reached: nothing was charged."
    case .failed(let failure): failure.message
    }
}
