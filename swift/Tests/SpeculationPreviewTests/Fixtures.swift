import Foundation
import SpeculationPreview
import Testing

/// Installs in the engine's real layout, written by the project's own writer
/// (turbospark_ffi.install_writer.write_install) into a fresh temp directory.
///
/// The repository root comes from TURBOSPARK_ROOT, else from this file's
/// place in the tree (swift/Tests/SpeculationPreviewTests/ -> ../../..). The Python
/// is TURBOSPARK_PYTHON, else the first `python3` on PATH.
enum Fixtures {
    static let repoRoot: String = {
        if let root = ProcessInfo.processInfo.environment["TURBOSPARK_ROOT"], !root.isEmpty {
            return root
        }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // SpeculationPreviewTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // swift
            .deletingLastPathComponent()  // the repository
            .path
    }()

    static let python: String = ProcessInfo.processInfo.environment["TURBOSPARK_PYTHON"] ?? "python3"

    /// The shared ABI case table (tests/abi_cases.py), as swift/run-tests.sh
    /// exports it to the file TURBOSPARK_ABI_CASES names: the original module's texts,
    /// the header's status codes and every case the C and ctypes hosts run.
    static let table: ABITable = {
        guard let path = ProcessInfo.processInfo.environment["TURBOSPARK_ABI_CASES"], !path.isEmpty else {
            fatalError("TURBOSPARK_ABI_CASES is not set: run the Swift tests through swift/run-tests.sh, "
                       + "which exports tests/abi_cases.py as JSON and names the file there")
        }
        do {
            return try JSONDecoder().decode(ABITable.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            fatalError("cannot read the ABI case table \(path): \(error)")
        }
    }()

    /// The original module's note, verbatim (turbospark-runtime 0.3.0, resolve_drafter).
    static var dflashAutoNote: String { table.originalModule.dflashNote }

    /// The original module's refusal prefix for a named block that cannot be served.
    static var refusalPrefix: String { table.originalModule.refusalPrefix }

    /// The original module's reason the block drafter cannot serve a sampled run.
    static var sampledReason: String { table.originalModule.sampledReason }

    /// The engine's MTP runner's text for an install without a head, verbatim.
    static var noHead: String { table.engine.noHead }

    /// The engine whose words the library speaks, and its version.
    static var engine: String { table.engine.engine }
    static var engineVersion: String { table.engine.engineVersion }

    struct PythonFailed: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `python3 -c script` with PYTHONPATH = the repository root.
    static func runPython(_ script: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [python, "-c", script]
        var environment = ProcessInfo.processInfo.environment
        let existing = environment["PYTHONPATH"].map { ":" + $0 } ?? ""
        environment["PYTHONPATH"] = repoRoot + existing
        process.environment = environment
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let errorText = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw PythonFailed(description: "\(python) -c ... (PYTHONPATH=\(repoRoot)) exited "
                                   + "\(process.terminationStatus):\n\(script)\n\(errorText)")
        }
    }

    /// A fresh temp directory holding the named installs, removed afterwards.
    /// `shapes` maps an install name to write_install keyword arguments
    /// (Python source, e.g. "dflash=True"); `garbage` names installs whose
    /// model_weights.bin is not an index at all, beside a valid manifest.json
    /// (so the open gets past the manifest and refuses the index, ABI 4).
    static func withInstalls<R>(
        _ shapes: [String: String],
        garbage: [String] = [],
        _ body: ([String: String]) throws -> R
    ) throws -> R {
        let root = FileManager.default.temporaryDirectory
            .appendingPathComponent("turbospark-swift-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        var dirs: [String: String] = [:]
        var lines = ["from turbospark_ffi.install_writer import write_install"]
        for (name, kwargs) in shapes.sorted(by: { $0.key < $1.key }) {
            let dir = root.appendingPathComponent(name).path
            dirs[name] = dir
            lines.append("write_install(\(pythonString(dir))\(kwargs.isEmpty ? "" : ", " + kwargs))")
        }
        for name in garbage {
            lines.append("write_install(\(pythonString(root.appendingPathComponent(name).path)))")
        }
        if lines.count > 1 {
            try runPython(lines.joined(separator: "\n"))
        }
        for name in garbage {
            let dir = root.appendingPathComponent(name)
            // Not an index: a header whose entry count overflows, then noise.
            var bytes = [UInt8](repeating: 0xA5, count: 4096)
            for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 131 &+ 7) }
            try Data(bytes).write(to: dir.appendingPathComponent("model_weights.bin"))
            dirs[name] = dir.path
        }
        return try body(dirs)
    }

    private static func pythonString(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }
}

/// The error `body` throws, or nil -- recorded as a failed expectation --
/// when it returns. (`#expect(throws:)` returns the error only from Swift
/// Testing 6.1; these tests build with Swift 6.0.)
func thrownError<T>(_ body: () throws(TsffiError) -> T,
                    sourceLocation: SourceLocation = #_sourceLocation) -> TsffiError? {
    do {
        let result = try body()
        Issue.record("expected a TsffiError, got \(result)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}
