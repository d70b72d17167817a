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
        .executable(name: "iap", targets: ["iap"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
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
            ] + certificatesAndCrypto
        ),
        .target(
            name: "StoreSimulator",
            dependencies: [
                "AppStoreFormats",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + certificatesAndCrypto
        ),
        .executableTarget(
            name: "iap",
            dependencies: [
                "AppStoreFormats",
                "AppStoreTrust",
                "StoreSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "AppStoreFormatsTests",
            dependencies: ["AppStoreFormats"]
        ),
        .target(name: "IAPTestSupport", path: "Tests/Support"),
        .testTarget(
            name: "StoreSimulatorTests",
            dependencies: [
                "StoreSimulator", "AppStoreTrust", "AppStoreFormats", "IAPTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
        .testTarget(
            name: "IAPCommandTests",
            dependencies: ["iap", "IAPTestSupport"]
        ),
        .testTarget(
            name: "AppStoreTrustTests",
            dependencies: [
                "AppStoreTrust",
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
