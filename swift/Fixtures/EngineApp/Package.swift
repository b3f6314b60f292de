// swift-tools-version:5.9
//
// An app built the way the engine's Mac app would adopt this library (tests
// only; tests/test_engine_app.py builds and runs it): it depends on the
// engine's Swift package (here its stand-in, ../TurboSparkEngine) and on
// SpeculationPreview (../../../SpeculationPreview, the repository's link to swift/: the
// package identity an app names), imports both Swift modules and both C
// modules into one file, uses the engine's names unqualified next to
// ours, and links the engine's static libturbospark_ffi.a beside libtsffi.
// Tools 5.9 and macOS 14, as the engine's app declares (docs/ENGINE.md
// section 7): a Swift 5 language-mode app depending on this Swift 6 package.
//
// EngineAppFormerNames is the SAME main.swift (a symlink) importing, besides,
// FormerNames: the two public names this package used to declare
// (`enum TurboSpark`, `TurboSparkError`). It must fail to compile, which
// shows that the app exercises exactly the clashes the rename removed.
import PackageDescription

let package = Package(
    name: "EngineApp",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: "../TurboSparkEngine"),
        .package(path: "../../../SpeculationPreview"),
    ],
    targets: [
        .executableTarget(
            name: "EngineApp",
            dependencies: [
                .product(name: "TurboSpark", package: "TurboSparkEngine"),
                .product(name: "SpeculationPreview", package: "SpeculationPreview"),
            ]
        ),
        .target(name: "FormerNames"),
        .executableTarget(
            name: "EngineAppFormerNames",
            dependencies: [
                .product(name: "TurboSpark", package: "TurboSparkEngine"),
                .product(name: "SpeculationPreview", package: "SpeculationPreview"),
                "FormerNames",
            ],
            swiftSettings: [.define("FORMER_NAMES")]
        ),
    ]
)
