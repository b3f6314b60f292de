// swift-tools-version:5.9
//
// A STAND-IN of the engine's Swift package (docs/ENGINE.md section 7), for
// tests only: the same package, product and module names (`TurboSpark` over
// the C module `CTurboSpark`), the same tools version and platform, the same
// link line (`linkedLibrary("turbospark_ffi")`: the engine's FFI crate is a
// static library, libturbospark_ffi.a), and every public name the engine's
// package declares. The archive is built by the tests from
// Sources/CTurboSpark/engine_standin.c (tests/engine_standin.py) and found
// through the -L they pass. Fixtures/EngineApp builds an app against it.
import PackageDescription

let package = Package(
    name: "TurboSpark",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "TurboSpark", targets: ["TurboSpark"]),
    ],
    targets: [
        .systemLibrary(name: "CTurboSpark", path: "Sources/CTurboSpark"),
        .target(
            name: "TurboSpark",
            dependencies: ["CTurboSpark"],
            linkerSettings: [.linkedLibrary("turbospark_ffi")]
        ),
    ]
)
