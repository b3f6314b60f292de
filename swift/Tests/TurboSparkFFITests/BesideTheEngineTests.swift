import CTurboSpark
import CTurboSparkFFI
import Foundation
import Testing
import TurboSparkFFI

/// A GUI imports the engine's C module (`CTurboSpark`) and this library's in
/// one file, and its binary links both. Here `CTurboSpark` is a stand-in with
/// every name the engine exports (swift/Tests/CTurboSpark), linked into this
/// test binary, so its names come first in the process.
@Suite struct BesideTheEngineTests {
    @Test func bothModulesImportAndEachKeepsItsOwnErrorsAndVersion() throws {
        var session: OpaquePointer? = nil
        #expect(ts_session_open("some-model", "{}", &session) == TS_STANDIN_STATUS)
        #expect(TS_ABI_VERSION != TSFFI_ABI_VERSION)

        try Fixtures.withInstalls(["dflash": "dflash=True"]) { dirs in
            // Ours answers (the refusal included) with its own message...
            let plan = try TurboSpark.speculationPlan(modelDir: dirs["dflash"]!)
            #expect(plan.drafter.note == Fixtures.dflashAutoNote)
            do {
                _ = try TurboSpark.speculationPlan(modelDir: dirs["dflash"]!,
                                                   options: Options(speculation: .block(2)))
                Issue.record("a named block on a DFlash2-only install must be refused")
            } catch let error as TurboSparkError {
                #expect(error.status == TurboSparkStatus.refused)
                #expect(error.message.hasPrefix(Fixtures.refusalPrefix))
            }
        }
        // ...and the engine's last error is still the engine's own.
        var buffer = [CChar](repeating: 0, count: 256)
        let length = ts_last_error(&buffer, buffer.count)
        let message = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #expect(message == "stand-in engine: ts_session_open")
        #expect(ts_abi_version() == UInt32(TS_ABI_VERSION))
        #expect(TurboSpark.abiVersion == TSFFI_ABI_VERSION)
    }
}
