// swift-tools-version:6.0
//
// SpeculationPreview: the Swift host of libtsffi, the speculation preview a
// settings pane shows beside the engine's own package.
//
// Names. An app imports this package next to the engine's (module
// `TurboSpark` over C module `CTurboSpark`, docs/ENGINE.md section 7) and
// uses the engine's names unqualified, so nothing here is one of them: the
// module says what it is for (`SpeculationPreview`), and the names that
// mirror the C library carry its prefix (C module `Tsffi` over tsffi.h, `Tsffi`
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
// Finding the library, one C module name (`Tsffi`) on both systems, chosen
// by the system that evaluates this manifest (SwiftPM compiles it for the
// host, so `#if os(macOS)` is the host's OS):
// - macOS: `Tsffi.xcframework` beside this file, a binary target, which
//   `turbospark-ffi bundle` writes from a macOS build (docs/swift.md, "Add the
//   package"; the folder is not in the repository: it is built). Xcode embeds
//   and signs its framework with the app; the framework carries libtsffi and
//   its Python, and its module map is `framework module Tsffi`.
// - elsewhere (Linux): the system library over tsffi.h that pkg-config finds,
//   from the tsffi.pc that `turbospark-ffi config --pkg-config-dir DIR` (or
//   `python3 -m turbospark_ffi config --pkg-config-dir DIR`) writes, with DIR
//   on PKG_CONFIG_PATH. run-tests.sh does exactly that.
// No unsafeFlags either way: SwiftPM refuses them in a package that is not
// the root, which this one never is in an app.
//
// Identity: SwiftPM names a local package by its folder. This folder is
// `swift`; the repository's top-level `SpeculationPreview` is a link to it,
// so a package that depends on `.package(path: ".../SpeculationPreview")`
// names it `package: "SpeculationPreview"` (swift/Fixtures/EngineApp does).
import PackageDescription

#if os(macOS)
let hostIsMac = true
#else
let hostIsMac = false
#endif

let cModule: Target = hostIsMac
    ? .binaryTarget(name: "Tsffi", path: "Tsffi.xcframework")
    : .systemLibrary(name: "Tsffi", path: "Sources/CTsffi", pkgConfig: "tsffi")

let package = Package(
    name: "SpeculationPreview",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "SpeculationPreview", targets: ["SpeculationPreview"]),
    ],
    targets: [
        // The C ABI as a Clang module. On Linux: module.modulemap + a shim
        // that includes <tsffi.h> from the -I pkg-config gives, and
        // `link "tsffi"` so importing the module links the library.
        cModule,
        .target(
            name: "SpeculationPreview",
            dependencies: ["Tsffi"]
        ),
        .testTarget(
            name: "SpeculationPreviewTests",
            dependencies: ["SpeculationPreview", "Tsffi"]
        ),
    ]
)
