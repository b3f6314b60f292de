import Tsffi
import Foundation
import Testing
import SpeculationPreview

/// Model names as the engine's open resolves them, and the block range the
/// engine's options parser enforces, from Swift.
@Suite struct ModelNameTests {
    /// The store the library reads: swift/run-tests.sh points TURBOSPARK_HOME
    /// at an empty directory of its own for the whole run (the environment is
    /// the process's, shared by every test, so no test changes it).
    static func store() throws -> String {
        guard let root = ProcessInfo.processInfo.environment["TURBOSPARK_HOME"], !root.isEmpty else {
            throw Fixtures.PythonFailed(description: "TURBOSPARK_HOME is not set: run the Swift "
                                            + "tests through swift/run-tests.sh, which sets it")
        }
        return root
    }

    @Test func anAliasResolvesThroughTheStore() throws {
        let root = try Self.store()
        // Unique names: the store is shared by the run.
        let tag = UUID().uuidString.prefix(8).lowercased()
        let recorded = "recorded-\(tag)", byPath = "default-\(tag)", unknown = "unknown-\(tag)"
        try Fixtures.withInstalls(["elsewhere": "dflash=True"]) { dirs in
            let defaultDir = root + "/models/text/\(byPath).gturbo"
            try Fixtures.runPython("""
                from turbospark_ffi.install_writer import record_install, write_install
                write_install('\(defaultDir)', mtp=True)
                record_install('\(root)', '\(recorded)', '\(dirs["elsewhere"]!)')
                """)
            // A recorded alias: the row's directory (the DFlash2-only install).
            let plan = try Tsffi.speculationPlan(modelDir: recorded)
            #expect(plan.modelDir == dirs["elsewhere"]!)
            #expect(plan.drafter.note == Fixtures.dflashAutoNote)
            let choice = try Tsffi.resolveDrafter(modelDir: recorded)
            #expect(choice.modelDir == dirs["elsewhere"]!)
            #expect(choice.installHasDflash == true)
            #expect(try Tsffi.installInfo(modelDir: recorded).modelDir == dirs["elsewhere"]!)
            // The store's listing offers the alias with its badges (a name
            // with only a default install path is not a recorded alias).
            let store = try Tsffi.store()
            #expect(store.root == root)
            #expect(store.storeRead == true)
            let listed = store.aliases.first { $0.alias == recorded }
            #expect(listed == Store.Alias(alias: recorded, path: dirs["elsewhere"]!,
                                          modelDir: dirs["elsewhere"]!, installHasMtpHead: false,
                                          installHasDflash: true))
            #expect(store.aliases.contains { $0.alias == byPath } == false)
            // The default install path of a name with no row.
            let byDefault = try Tsffi.speculationPlan(modelDir: byPath)
            #expect(byDefault.modelDir == defaultDir)
            #expect(byDefault.drafter.installHasMtpHead == true)
            #expect(byDefault.speculation == SpeculationPlan(block: 2, drafter: .mtp, reason: nil))
            // An unknown name comes back as itself (in the working directory):
            // the drafter choice reads no install (unknown flags), and the
            // plan is the open's refusal naming the name as given (ABI 4).
            let none = try Tsffi.resolveDrafter(modelDir: unknown)
            #expect(none.modelDir == FileManager.default.currentDirectoryPath + "/" + unknown)
            #expect(none.installHasMtpHead == nil)
            let refused = thrownError { () throws(TsffiError) in try Tsffi.speculationPlan(modelDir: unknown) }
            #expect(refused == TsffiError(status: .refused,
                                          message: "\(unknown) is not a directory (and matched no installed alias)",
                                          function: "tsffi_speculation_plan"))
            // Re-pointing the alias is seen on the next call.
            try Fixtures.runPython("""
                from turbospark_ffi.install_writer import record_install
                record_install('\(root)', '\(recorded)', '\(defaultDir)')
                """)
            let again = try Tsffi.speculationPlan(modelDir: recorded)
            #expect(again.modelDir == defaultDir)
            #expect(again.drafter.note == nil)
        }
    }

    @Test func aBlockOutsideTheRangeIsTheOpensRefusalWhateverTheInstall() throws {
        try Fixtures.withInstalls(["moe": "mtp=True, experts=8", "dflash": "dflash=True"]) { dirs in
            for dir in [dirs["moe"]!, dirs["dflash"]!, dirs["moe"]! + "/missing"] {
                for (options, shown) in [(Options(speculation: .block(16)), "16"),
                                         (Options(speculation: .block(0)), "0"),
                                         (Options(speculation: .block(4294967295)), "4294967295")] {
                    let error = thrownError { () throws(TsffiError) in
                        try Tsffi.speculationPlan(modelDir: dir, options: options)
                    }
                    // The engine's open refuses it in its mapping, before any install is read.
                    #expect(error == TsffiError(status: .refused,
                                                message: "speculation block must be in 1..=15, got \(shown)",
                                                function: "tsffi_speculation_plan"))
                }
                let fromString = thrownError { () throws(TsffiError) in
                    try Tsffi.speculationPlan(modelDir: dir, optionsJSON: #"{"speculation": "+16"}"#)
                }
                #expect(fromString?.status.rawValue == TSFFI_ERR_REFUSED)
                #expect(fromString?.message == "speculation block must be in 1..=15, got 16")
            }
            let step = thrownError { () throws(TsffiError) in
                try Tsffi.resolveSpeculation(options: Options(
                    speculation: .block(16), engineBlocker: .reason("a vision tower is active")))
            }
            #expect(step?.status == TsffiStatus.refused)
            #expect(step?.message == "speculation block must be in 1..=15, got 16")
        }
    }
}
