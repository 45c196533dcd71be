// swift-tools-version:6.1
import PackageDescription

/// libFuzzer targets over groupd's parsers (`make fuzz`, docs/FUZZING.md). A package of its own so
/// that `swift build --build-tests` of groupd never meets an executable without `main` (libFuzzer
/// provides it); built with `--sanitize=fuzzer --sanitize=address` in `.build-fuzz`.
let fuzzTarget: [SwiftSetting] = [.unsafeFlags(["-parse-as-library"])]

let package = Package(
    name: "groupd-fuzz",
    platforms: [.macOS(.v15)],
    products: [
        /// The scripted plugin FuzzPolicyHost loads (dlopen, as groupd loads plugins).
        .library(name: "FuzzPolicyPlugin", type: .dynamic, targets: ["FuzzPolicyPlugin"]),
    ],
    dependencies: [
        .package(name: "groupd", path: "../.."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
    ],
    targets: [
        /// What the fuzz targets share: the input as a buffer, chunking.
        .target(name: "FuzzSupport"),
        /// The connection targets' driver (a client's bytes into an `EmbeddedChannel`, then the
        /// close) and their echo router.
        .target(
            name: "FuzzChannel",
            dependencies: [
                "FuzzSupport", .product(name: "GRPCProtocol", package: "groupd"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]),
        .executableTarget(
            name: "FuzzDeframer",
            dependencies: ["FuzzSupport", .product(name: "GRPCProtocol", package: "groupd"), .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: fuzzTarget),
        .executableTarget(
            name: "FuzzProtoDecode",
            dependencies: ["FuzzSupport", .product(name: "GroupAPI", package: "groupd")],
            swiftSettings: fuzzTarget),
        .executableTarget(
            name: "FuzzJSON",
            dependencies: ["FuzzSupport", .product(name: "GroupAPI", package: "groupd")],
            swiftSettings: fuzzTarget),
        .executableTarget(
            name: "FuzzHTTP2",
            dependencies: [
                "FuzzSupport", "FuzzChannel", .product(name: "GRPCProtocol", package: "groupd"), .product(name: "GRPCServer", package: "groupd"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: fuzzTarget),
        .executableTarget(
            name: "FuzzHTTP1",
            dependencies: [
                "FuzzSupport", "FuzzChannel", .product(name: "GRPCProtocol", package: "groupd"), .product(name: "GRPCServer", package: "groupd"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: fuzzTarget),
        .executableTarget(
            name: "FuzzToken",
            dependencies: ["FuzzSupport", .product(name: "GroupdConfig", package: "groupd"), .product(name: "JWTKit", package: "jwt-kit")],
            swiftSettings: fuzzTarget),
        .executableTarget(
            name: "FuzzConfig",
            dependencies: ["FuzzSupport", .product(name: "GroupdConfig", package: "groupd")],
            swiftSettings: fuzzTarget),
        .executableTarget(
            name: "FuzzPolicyHost",
            dependencies: ["FuzzSupport", .product(name: "PolicyHost", package: "groupd"), .product(name: "Logging", package: "swift-log")],
            swiftSettings: fuzzTarget),
        .target(name: "FuzzPolicyPlugin", dependencies: [.product(name: "PolicyABI", package: "groupd")]),
    ]
)
