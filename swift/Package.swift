// swift-tools-version:6.0
//
// SpeculationPreview: the Swift host of libtsffi, the speculation preview a
// settings pane shows beside the engine's own package.
//
// Names. An app imports this package next to the engine's (module
// `TurboSpark` over C module `CTurboSpark`, docs/ENGINE.md section 7) and
// uses the engine's names unqualified, so nothing here is one of them: the
// module says what it is for (`SpeculationPreview`), and the names that
// mirror the C library carry its prefix (`CTsffi` over tsffi.h, `Tsffi`
// for its calls, `TsffiError`, `TsffiStatus`), as its C functions carry
// `tsffi_`. No type is named after the module, so `SpeculationPreview.X`
// still picks this package's X should a later engine declare an X too.
// Fixtures/EngineApp is such an app, built against a stand-in of the
// engine's package (Fixtures/TurboSparkEngine) by tests/test_engine_app.py.
//
// Toolchains. Tools version 6.0: the oldest with typed throws, which the
// sources use. Anything newer than Swift 6.0 is behind `#if compiler(>=...)`
// (`@concurrent`, Swift 6.2). macOS 14 is what `@Observable` needs. Only
// Swift 6.3 on Linux builds and runs this here; 6.0-6.2 and macOS are
// checked by reading (README, "From Swift").
//
// Finding the library: the C module reads the header and the library the way
// any native host does, through pkg-config, from the tsffi.pc that
// `turbospark-ffi config --pkg-config-dir DIR` (or `python3 -m turbospark_ffi
// config --pkg-config-dir DIR`) writes, with DIR on PKG_CONFIG_PATH.
// run-tests.sh does exactly that.
import PackageDescription

let package = Package(
    name: "SpeculationPreview",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "SpeculationPreview", targets: ["SpeculationPreview"]),
    ],
    targets: [
        // The C ABI as a Clang module: module.modulemap + a shim that includes
        // <tsffi.h> from the -I pkg-config gives, and `link "tsffi"` so
        // importing the module links the library.
        .systemLibrary(
            name: "CTsffi",
            path: "Sources/CTsffi",
            pkgConfig: "tsffi"
        ),
        .target(
            name: "SpeculationPreview",
            dependencies: ["CTsffi"]
        ),
        .testTarget(
            name: "SpeculationPreviewTests",
            dependencies: ["SpeculationPreview", "CTsffi"]
        ),
    ]
)
