// SwiftUI as Apple declares it (iOS 26 / macOS 26 SDKs), reduced to what IAPKit uses: `View`, which StoreKit's view
// modifiers extend. Test support for scripts/typecheck-apple: bodies trap.

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@MainActor @preconcurrency public protocol View {
    associatedtype Body: View
    @MainActor @preconcurrency var body: Self.Body { get }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension Never: View {
    public typealias Body = Never
    public var body: Never { fatalError() }
}
