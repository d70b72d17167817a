// UIKit as Apple declares it (iOS 26 SDK), reduced to what IAPKit's Apple-only code uses: the scene and view controller
// a StoreKit sheet is shown in. Test support for scripts/typecheck-apple, never linked into anything: bodies trap.
@_exported import Foundation
@_exported import FoundationAppleOnly

@available(iOS 2.0, *)
@MainActor open class UIResponder: NSObject {
}

@available(iOS 13.0, *)
@MainActor open class UIScene: UIResponder {
}

@available(iOS 13.0, *)
@MainActor open class UIWindowScene: UIScene {
}

@available(iOS 2.0, *)
@MainActor open class UIView: UIResponder {
    open var window: UIWindow? { fatalError() }
}

@available(iOS 2.0, *)
@MainActor open class UIWindow: UIView {
    @available(iOS 13.0, *)
    weak open var windowScene: UIWindowScene?
}

@available(iOS 2.0, *)
@MainActor open class UIViewController: UIResponder {
    @available(iOS 9.0, *)
    open var viewIfLoaded: UIView? { fatalError() }
}
