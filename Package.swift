// swift-tools-version:6.0
//
// The repository as a Swift package an app fetches by URL: SwiftPM reads
// only a Package.swift at a repository's root. Its product and modules are
// swift/Package.swift's (the sources stay in swift/, which is also the
// package Linux builds and tests: swift/run-tests.sh, tests/test_engine_app.py);
// tests/test_swift_manifest.py holds the two manifests' targets equal.
//
//   .package(url: "https://.../turbospark_ffi.git", from: "0.1.0")
//   .product(name: "SpeculationPreview", package: "turbospark_ffi")
//
// The C module `Tsffi`, chosen by the system that evaluates this manifest
// (SwiftPM compiles it for the host, so `#if os(macOS)` is the host's OS):
// - macOS, a release (releaseChecksum set): the binary target as the
//   release's asset, Tsffi.xcframework.zip by URL and checksum. The release
//   writes both lines: `make release-zip` (`turbospark-ffi bundle DIR
//   --release-zip`) prints the checksum, SHA-256 of the zip, which is what
//   `swift package compute-checksum` prints.
// - macOS, development (no checksum yet, or TSFFI_LOCAL_XCFRAMEWORK set):
//   the binary target at swift/Tsffi.xcframework, which `make xcframework`
//   writes (and `make test` on a Mac, before `swift test`).
// - elsewhere (Linux): the pkg-config system library over tsffi.h, as in
//   swift/Package.swift.
import PackageDescription

#if os(macOS)
let hostIsMac = true
#else
let hostIsMac = false
#endif

// The release's asset; empty between releases (docs/shipping.md, "Publishing").
let releaseURL = ""
let releaseChecksum = ""

let useLocalFramework = releaseChecksum.isEmpty
    || Context.environment["TSFFI_LOCAL_XCFRAMEWORK"] != nil

let cModule: Target = !hostIsMac
    ? .systemLibrary(name: "Tsffi", path: "swift/Sources/CTsffi", pkgConfig: "tsffi")
    : useLocalFramework
    ? .binaryTarget(name: "Tsffi", path: "swift/Tsffi.xcframework")
    : .binaryTarget(name: "Tsffi", url: releaseURL, checksum: releaseChecksum)

let package = Package(
    name: "SpeculationPreview",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "SpeculationPreview", targets: ["SpeculationPreview"]),
    ],
    targets: [
        cModule,
        .target(
            name: "SpeculationPreview",
            dependencies: ["Tsffi"],
            path: "swift/Sources/SpeculationPreview"
        ),
    ]
)
