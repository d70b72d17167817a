// Security's keychain calls as Apple declares them (iOS 26 / macOS 26 SDKs), reduced to what KeychainJournal uses.
// Test support for scripts/typecheck-apple: values trap.
//
// CoreFoundation's types come with them, as Security's headers bring them: Linux's Foundation has no CFString or
// CFDictionary, so they stand for the Foundation classes Apple toll-free bridges them to (`as CFDictionary`,
// `kSecClass as String` compile the same way).
@_exported import Foundation

public typealias CFTypeRef = AnyObject
public typealias CFString = NSString
public typealias CFDictionary = NSDictionary
public typealias OSStatus = Int32

public var errSecSuccess: OSStatus { fatalError() }
public var errSecItemNotFound: OSStatus { fatalError() }

public let kSecClass: CFString = { fatalError() }()
public let kSecClassGenericPassword: CFString = { fatalError() }()
public let kSecAttrService: CFString = { fatalError() }()
public let kSecAttrAccount: CFString = { fatalError() }()
public let kSecAttrAccessible: CFString = { fatalError() }()
@available(iOS 4.0, macOS 10.9, *)
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = { fatalError() }()
@available(iOS 13.0, macOS 10.15, *)
public let kSecUseDataProtectionKeychain: CFString = { fatalError() }()
public let kSecValueData: CFString = { fatalError() }()
public let kSecReturnData: CFString = { fatalError() }()
public let kSecReturnAttributes: CFString = { fatalError() }()
public let kSecMatchLimit: CFString = { fatalError() }()
public let kSecMatchLimitOne: CFString = { fatalError() }()
public let kSecMatchLimitAll: CFString = { fatalError() }()

@available(iOS 2.0, macOS 10.6, *)
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { fatalError() }

@available(iOS 2.0, macOS 10.6, *)
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { fatalError() }

@available(iOS 2.0, macOS 10.6, *)
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus { fatalError() }

@available(iOS 2.0, macOS 10.6, *)
public func SecItemDelete(_ query: CFDictionary) -> OSStatus { fatalError() }
