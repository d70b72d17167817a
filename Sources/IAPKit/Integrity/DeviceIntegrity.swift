import Foundation

/// Signs that the device may be jailbroken, reported with each order and each purchase upload so the server can record
/// them and its policy decide: under a `refuse` policy an order from a suspicious device is refused before the payment
/// sheet opens (``PurchaseFailure/Code/deviceRefused``). Heuristics only: a determined attacker hides all of them, so
/// the SDK itself never blocks a purchase on them.
public struct DeviceIntegrity: Codable, Sendable, Hashable {
    /// Which checks fired: `known-paths`, `dyld-insert`, `writable-outside-sandbox`, `url-schemes`.
    public var signals: [String]
    /// Whether the checks apply on this platform (iOS devices only).
    public var applicable: Bool

    /// A report of the app's own checks (another detector's signals), sent as the SDK's are.
    public init(signals: [String], applicable: Bool) {
        self.signals = signals
        self.applicable = applicable
    }

    /// Whether any check fired.
    public var suspicious: Bool { !signals.isEmpty }

    /// What goes to the server with an order and an upload: nothing where the checks do not apply.
    var report: DeviceIntegrityReport? { applicable ? DeviceIntegrityReport(signals: signals, applicable: applicable) : nil }

    /// Runs the checks. `canOpenURL` asks whether a URL scheme is handled (UIKit's `UIApplication.canOpenURL`,
    /// passed in so this file needs no UIKit).
    public static func check(canOpenURL: (URL) -> Bool = { _ in false }) -> DeviceIntegrity {
        // The iOS branch is type-checked on Linux too (scripts/typecheck-apple sets IAPKIT_APPLE_DECLARATIONS).
        #if (os(iOS) && !targetEnvironment(simulator)) || IAPKIT_APPLE_DECLARATIONS
        var signals: [String] = []
        let paths = ["/Applications/Cydia.app", "/Library/MobileSubstrate/MobileSubstrate.dylib", "/bin/bash", "/usr/sbin/sshd",
                     "/etc/apt", "/private/var/lib/apt/", "/var/jb", "/usr/lib/libhooker.dylib"]
        if paths.contains(where: { FileManager.default.fileExists(atPath: $0) }) { signals.append("known-paths") }
        if ProcessInfo.processInfo.environment["DYLD_INSERT_LIBRARIES"] != nil { signals.append("dyld-insert") }
        let probe = "/private/iapkit-integrity-\(UUID().uuidString)"
        if FileManager.default.createFile(atPath: probe, contents: Data()) {
            try? FileManager.default.removeItem(atPath: probe)
            signals.append("writable-outside-sandbox")
        }
        if ["cydia://", "sileo://", "zbra://", "filza://"].compactMap(URL.init(string:)).contains(where: canOpenURL) { signals.append("url-schemes") }
        return DeviceIntegrity(signals: signals, applicable: true)
        #else
        return DeviceIntegrity(signals: [], applicable: false)
        #endif
    }
}
