// AppKit as Apple declares it (macOS 26 SDK), reduced to what IAPKit's Apple-only code uses: the view controller and
// window a StoreKit sheet is shown from on macOS. Test support for scripts/typecheck-apple: bodies trap.
@_exported import Foundation
@_exported import FoundationAppleOnly

@available(macOS 10.0, *)
@MainActor open class NSResponder: NSObject {
}

@available(macOS 10.5, *)
@MainActor open class NSViewController: NSResponder {
}

@available(macOS 10.0, *)
@MainActor open class NSWindow: NSResponder {
    @available(macOS 10.10, *)
    open var contentViewController: NSViewController?
}
