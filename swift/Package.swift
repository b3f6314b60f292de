// swift-tools-version:6.0
//
// The Swift host of libtsffi. The C module finds the header and the
// library the way any native host does: through pkg-config, from the
// tsffi.pc that `turbospark-ffi config --pkg-config-dir DIR` (or
// `python3 -m turbospark_ffi config --pkg-config-dir DIR`) writes, with DIR on
// PKG_CONFIG_PATH. run-tests.sh does exactly that.
import PackageDescription

let package = Package(
    name: "TurboSparkFFI",
    products: [
        .library(name: "TurboSparkFFI", targets: ["TurboSparkFFI"]),
    ],
    targets: [
        // The C ABI as a Clang module: module.modulemap + a shim that includes
        // <tsffi.h> from the -I pkg-config gives, and `link
        // "tsffi"` so importing the module links the library.
        .systemLibrary(
            name: "CTurboSparkFFI",
            path: "Sources/CTurboSparkFFI",
            pkgConfig: "tsffi"
        ),
        .target(
            name: "TurboSparkFFI",
            dependencies: ["CTurboSparkFFI"]
        ),
        // A stand-in of the ENGINE's C module (same module name, same header
        // name, every name it exports), for tests only: a GUI imports both,
        // and the test binary links both, the engine's first.
        .target(
            name: "CTurboSpark",
            path: "Tests/CTurboSpark"
        ),
        .testTarget(
            name: "TurboSparkFFITests",
            dependencies: ["TurboSparkFFI", "CTurboSparkFFI", "CTurboSpark"]
        ),
    ]
)
