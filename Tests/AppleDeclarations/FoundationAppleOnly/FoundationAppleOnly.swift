// Foundation's members that Apple's Foundation declares (iOS 26 / macOS 26 SDKs) and Linux's lacks, reduced to what the
// SDK and the README's snippets use. Re-exported by the UIKit and AppKit declarations, so that code compiled against
// them sees Foundation as an app does. Test support for scripts/typecheck-apple: bodies trap.
@_exported import Foundation

@available(macOS 13.0, iOS 16.0, tvOS 16.0, watchOS 9.0, *)
extension URL {
    public static var cachesDirectory: URL { fatalError() }
}
