// swift-tools-version: 6.1
import PackageDescription

// Benchmarks live in their own package so the main build and test suite never compile the benchmark harness.
let package = Package(
    name: "IAPKitBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "IAPKit", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
    ],
    targets: [
        .executableTarget(
            name: "TrustBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "AppStoreFormats", package: "IAPKit"),
                .product(name: "AppStoreTrust", package: "IAPKit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            path: "Benchmarks/TrustBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "MintBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "AppStoreFormats", package: "IAPKit"),
                .product(name: "StoreSimulator", package: "IAPKit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Benchmarks/MintBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
