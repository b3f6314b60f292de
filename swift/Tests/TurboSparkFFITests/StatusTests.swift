import CTurboSparkFFI
import Foundation
import Testing
import TurboSparkFFI

/// The status as a type: its numbers and names are the header's, and a thrown
/// ``TurboSparkError`` is caught by naming its status.
@Suite struct StatusTests {
    @Test func rawValuesAreTheHeadersMacros() {
        #expect(TurboSparkStatus.ok.rawValue == TSFFI_OK)
        #expect(TurboSparkStatus.invalidArgument.rawValue == TSFFI_ERR_INVALID_ARGUMENT)
        #expect(TurboSparkStatus.refused.rawValue == TSFFI_ERR_REFUSED)
        #expect(TurboSparkStatus.json.rawValue == TSFFI_ERR_JSON)
        #expect(TurboSparkStatus.internal.rawValue == TSFFI_ERR_INTERNAL)
        #expect(TurboSparkStatus.runtime.rawValue == TSFFI_ERR_RUNTIME)
        // The former spellings are the same values.
        #expect(TurboSparkError.refused == TurboSparkStatus.refused)
        #expect(TurboSparkError.runtime == TurboSparkStatus.runtime)
    }

    @Test func everyMacroOfTheHeaderHasItsNameAsDescription() {
        // The header's numbers as the project's one reader of them read the
        // header file (exported by run-tests.sh), against the Swift table.
        let header = Fixtures.table.statuses
        #expect(header.count == 6)
        for (name, value) in header {
            #expect(TurboSparkStatus(rawValue: value).description == name)
        }
        #expect(Dictionary(uniqueKeysWithValues: TurboSparkStatus.named.map { ($0.name, $0.status.rawValue) })
                == header)
        #expect(TurboSparkStatus.runtime.description == "TSFFI_ERR_RUNTIME")
        #expect(TurboSparkStatus.internal.description == "TSFFI_ERR_INTERNAL")
        // A value the header does not name (a newer library's) still prints.
        #expect(TurboSparkStatus(rawValue: 7).description == "status 7")
        #expect("\(TurboSparkStatus.refused)" == "TSFFI_ERR_REFUSED")
    }

    @Test func theErrorsDescriptionNamesTheStatus() {
        let error = TurboSparkError(status: .json, message: "options_json: m", function: "tsffi_resolve_speculation")
        #expect(error.description == "tsffi_resolve_speculation: TSFFI_ERR_JSON (4): options_json: m")
        #expect(error.statusName == "TSFFI_ERR_JSON")
        let unknown = TurboSparkError(status: TurboSparkStatus(rawValue: 7), message: "m", function: "f")
        #expect(unknown.description == "f: status 7 (7): m")
    }

    @Test func statusesRoundTripAsTheirNumber() throws {
        let encoded = try JSONEncoder().encode([TurboSparkStatus.ok, .refused])
        #expect(String(decoding: encoded, as: UTF8.self) == "[0,2]")
        #expect(try JSONDecoder().decode([TurboSparkStatus].self, from: Data("[9,4]".utf8)) == [.runtime, .json])
    }

    /// The status `body` was caught by, naming each status in its own
    /// `catch` clause (typed throws, as every call of this package throws).
    private func caughtBy(_ body: () throws(TurboSparkError) -> Void) -> String {
        do {
            try body()
            return "nothing"
        } catch TurboSparkStatus.refused {
            return "refused"
        } catch TurboSparkStatus.invalidArgument {
            return "invalidArgument"
        } catch TurboSparkStatus.json {
            return "json"
        } catch TurboSparkStatus.internal {
            return "internal"
        } catch TurboSparkStatus.runtime {
            return "runtime"
        } catch {
            return "other \(error.status)"
        }
    }

    @Test func aCatchClauseMatchesEachStatusByName() {
        #expect(caughtBy { () throws(TurboSparkError) in
            _ = try TurboSpark.resolveSpeculation(options: Options(speculation: .block(2), engineBlocker: .reason("x")))
        } == "refused")
        #expect(caughtBy { () throws(TurboSparkError) in
            _ = try TurboSpark.resolveSpeculation(options: Options(temperature: -1))
        } == "invalidArgument")
        #expect(caughtBy { () throws(TurboSparkError) in
            _ = try TurboSpark.resolveSpeculationJSON(optionsJSON: "{nope")
        } == "json")
        #expect(caughtBy { () throws(TurboSparkError) in
            _ = try TurboSpark.resolveSpeculation()
        } == "nothing")
        // A status the header does not name falls through to the last clause.
        #expect(caughtBy { () throws(TurboSparkError) in
            throw TurboSparkError(status: TurboSparkStatus(rawValue: 7), message: "", function: "f")
        } == "other status 7")
    }

    @Test func anUntypedCatchMatchesToo() throws {
        func refusal() throws {
            _ = try TurboSpark.resolveSpeculationJSON(optionsJSON: #"{"speculation": 2, "engineBlocker": "busy"}"#)
        }
        do {
            try refusal()
            Issue.record("not refused")
        } catch TurboSparkStatus.json {
            Issue.record("a refusal matched TurboSparkStatus.json")
        } catch TurboSparkError.refused {
            // The former spelling matches as well: it is the same value.
        }
        // The bound error is still there for its message.
        do {
            try refusal()
        } catch let error as TurboSparkError where TurboSparkStatus.refused ~= error {
            #expect(error.message == Fixtures.refusalPrefix + "busy")
        }
        // Any other error matches no status.
        struct Other: Error {}
        #expect(!(TurboSparkStatus.internal ~= Other() as any Error))
        #expect(TurboSparkStatus.refused ~= (TurboSparkError(status: .refused, message: "", function: "f") as any Error))
    }

    @Test func anAsyncCallIsCaughtByName() async {
        do {
            _ = try await TurboSpark.Background.speculationPlan(modelDir: "", options: .default)
            Issue.record("an empty model_dir was accepted")
        } catch TurboSparkStatus.invalidArgument {
            // model_dir is empty
        } catch {
            Issue.record("caught \(error), not invalidArgument")
        }
    }
}
