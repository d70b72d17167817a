// swift-tools-version:6.0
// Coverage-guided fuzzing (libFuzzer) of every format IAPKit reads from outside: a separate package, so that the main
// build and the test suite never compile it. Build and run with ../scripts/fuzz (release, -sanitize=fuzzer,address).
import PackageDescription

let harnesses = ["fuzz-receipt", "fuzz-jws", "fuzz-verifyreceipt", "fuzz-storekit", "fuzz-text", "fuzz-trust", "fuzz-retention", "fuzz-advanced-commerce"]

let package = Package(
    name: "IAPKitFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "IAPKit", path: "..")],
    targets: [
        .target(name: "FuzzSupport", dependencies: [.product(name: "AppStoreFormats", package: "IAPKit")]),
    ] + harnesses.map { name in
        .executableTarget(name: name, dependencies: [
            "FuzzSupport",
            .product(name: "AppStoreFormats", package: "IAPKit"),
            .product(name: "AppStoreTrust", package: "IAPKit"),
        ], swiftSettings: [.unsafeFlags(["-parse-as-library"])])
    },
    swiftLanguageModes: [.v6]
)
