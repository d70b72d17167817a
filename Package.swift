// swift-tools-version: 6.1
import PackageDescription

/// What signs and checks App Store data: DER, X.509 chains, P-256 and RSA.
let certificatesAndCrypto: [Target.Dependency] = [
    .product(name: "SwiftASN1", package: "swift-asn1"),
    .product(name: "X509", package: "swift-certificates"),
    .product(name: "Crypto", package: "swift-crypto"),
    .product(name: "_CryptoExtras", package: "swift-crypto"),
]

let package = Package(
    name: "IAPKit",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "AppStoreFormats", targets: ["AppStoreFormats"]),
        .library(name: "AppStoreTrust", targets: ["AppStoreTrust"]),
        .library(name: "StoreSimulator", targets: ["StoreSimulator"]),
        .library(name: "AppStoreClient", targets: ["AppStoreClient"]),
        .library(name: "PurchaseAPI", targets: ["PurchaseAPI"]),
        .library(name: "PurchaseLedger", targets: ["PurchaseLedger"]),
        .library(name: "PurchaseServer", targets: ["PurchaseServer"]),
        .library(name: "IAPKit", targets: ["IAPKit"]),
        .executable(name: "iap", targets: ["iap"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The environment layer of `iap serve`'s configuration; Hummingbird builds it already. No traits: the
        // file is not read through it (docs/CONFIGURATION.md).
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: []),
        // `swift package generate-documentation` for the DocC catalogs (Sources/IAPKit/IAPKit.docc,
        // Sources/PurchaseServer/PurchaseServer.docc); scripts/docs builds the same from the modules already built.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .target(
            name: "AppStoreFormats",
            dependencies: [.product(name: "SwiftASN1", package: "swift-asn1")]
        ),
        .target(
            name: "AppStoreTrust",
            dependencies: [
                "AppStoreFormats",
            ] + certificatesAndCrypto,
            // Apple's two roots, byte for byte as Apple publishes them, trusted by default (TrustRoots.apple()).
            // Copied, not processed: their bytes are checked against the pinned fingerprints.
            resources: [.copy("Resources/AppleRootCA-G3.pem"), .copy("Resources/AppleIncRootCertificate.cer")]
        ),
        .target(
            name: "StoreSimulator",
            dependencies: [
                "AppStoreFormats",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + certificatesAndCrypto
        ),
        .target(
            name: "AppStoreClient",
            dependencies: [
                "AppStoreFormats",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The contract between apps and the purchase server: every request and answer body, the error body and its codes,
        // the entitlement model. Foundation only, so that the iOS SDK depends on it as the server does.
        .target(name: "PurchaseAPI"),
        // The server's OpenAPI document, generated from PurchaseAPI's endpoint table and types (`iap openapi`,
        // docs/API.md). Apart from PurchaseAPI so that the SDK does not carry the generator.
        .target(name: "PurchaseAPIDocument", dependencies: ["PurchaseAPI"]),
        // SQLite's C API from the system library (libsqlite3-dev): prepared statements on one writer thread.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // glibc's allocator settings (<malloc.h>), which the `iap` server sets once before it starts.
        .systemLibrary(name: "CAllocator", path: "Sources/CAllocator"),
        .target(
            name: "PurchaseLedger",
            dependencies: [
                "AppStoreFormats",
                "PurchaseAPI",
                "CSQLite",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "PurchaseServer",
            dependencies: [
                "AppStoreFormats",
                "PurchaseAPI",
                "AppStoreTrust",
                "AppStoreClient",
                "PurchaseLedger",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Configuration", package: "swift-configuration"),
                // The connection limits' channel handlers (ConnectionLimits.swift).
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            // What GET /openapi.json answers, as `iap openapi` writes it.
            resources: [.copy("Resources/openapi.json")]
        ),
        // The app-side SDK: Foundation (URLSession) and StoreKit only, so it builds for iOS; no NIO, no server code.
        // It checks the server's signed entitlements with CryptoKit on Apple platforms; swift-crypto (the same API)
        // stands in for CryptoKit only where it does not exist.
        .target(
            name: "IAPKit",
            dependencies: [
                "AppStoreFormats",
                "PurchaseAPI",
                .product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: [.linux])),
            ]
        ),
        .executableTarget(
            name: "iap",
            dependencies: [
                "CAllocator",
                "AppStoreFormats",
                "AppStoreTrust",
                "StoreSimulator",
                "PurchaseLedger",
                "PurchaseServer",
                "IAPKit",
                "PurchaseAPI",
                "PurchaseAPIDocument",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "AppStoreFormatsTests",
            dependencies: ["AppStoreFormats"]
        ),
        .target(name: "IAPTestSupport", dependencies: [
            "AppStoreFormats",
            "PurchaseAPI",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdTesting", package: "hummingbird"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
        ], path: "Tests/Support"),
        // The seeded history explorer: the real simulator, server, ledger and SDK in one process (docs/EXPLORER.md).
        .target(
            name: "HistoryExplorer",
            dependencies: [
                "StoreSimulator", "PurchaseServer", "PurchaseLedger", "IAPKit", "PurchaseAPI", "AppStoreTrust", "AppStoreFormats", "AppStoreClient",
                "IAPTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/Explorer"
        ),
        .executableTarget(
            name: "explore",
            dependencies: ["HistoryExplorer", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tests/ExplorerCommand"
        ),
        .testTarget(
            name: "HistoryExplorerTests",
            dependencies: ["HistoryExplorer"]
        ),
        .testTarget(
            name: "StoreSimulatorTests",
            dependencies: [
                "StoreSimulator", "AppStoreTrust", "AppStoreFormats", "IAPTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
        .testTarget(
            name: "AppStoreClientTests",
            dependencies: [
                "AppStoreClient", "AppStoreFormats",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "PurchaseLedgerTests",
            dependencies: ["PurchaseLedger", "PurchaseAPI", "AppStoreFormats", "IAPTestSupport", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(
            name: "PurchaseServerTests",
            dependencies: [
                "PurchaseServer", "PurchaseLedger", "StoreSimulator", "AppStoreTrust", "AppStoreFormats", "AppStoreClient", "IAPKit",
                "PurchaseAPI", "IAPTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "PurchaseAPIDocumentTests",
            dependencies: ["PurchaseAPIDocument", "PurchaseAPI"]
        ),
        .testTarget(
            name: "IAPKitTests",
            dependencies: ["IAPKit", "PurchaseAPI", "AppStoreFormats", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "IAPCommandTests",
            dependencies: ["iap", "IAPTestSupport", "PurchaseServer", "PurchaseAPI", "StoreSimulator"]
        ),
        .testTarget(
            name: "AppStoreTrustTests",
            dependencies: [
                "AppStoreTrust",
                "IAPTestSupport",
                "AppStoreFormats",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
