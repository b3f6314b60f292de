import Tsffi
import Foundation
import Testing
import SpeculationPreview

/// The status as a type: its numbers and names are the header's, and a thrown
/// ``TsffiError`` is caught by naming its status.
@Suite struct StatusTests {
    @Test func rawValuesAreTheHeadersMacros() {
        #expect(TsffiStatus.ok.rawValue == TSFFI_OK)
        #expect(TsffiStatus.invalidArgument.rawValue == TSFFI_ERR_INVALID_ARGUMENT)
        #expect(TsffiStatus.refused.rawValue == TSFFI_ERR_REFUSED)
        #expect(TsffiStatus.json.rawValue == TSFFI_ERR_JSON)
        #expect(TsffiStatus.internal.rawValue == TSFFI_ERR_INTERNAL)
        #expect(TsffiStatus.runtime.rawValue == TSFFI_ERR_RUNTIME)
        // The former spellings are the same values.
        #expect(TsffiError.refused == TsffiStatus.refused)
        #expect(TsffiError.runtime == TsffiStatus.runtime)
    }

    @Test func everyMacroOfTheHeaderHasItsNameAsDescription() {
        // The header's numbers as the project's one reader of them read the
        // header file (exported by run-tests.sh), against the Swift table.
        let header = Fixtures.table.statuses
        #expect(header.count == 6)
        for (name, value) in header {
            #expect(TsffiStatus(rawValue: value).description == name)
        }
        #expect(Dictionary(uniqueKeysWithValues: TsffiStatus.named.map { ($0.name, $0.status.rawValue) })
                == header)
        #expect(TsffiStatus.runtime.description == "TSFFI_ERR_RUNTIME")
        #expect(TsffiStatus.internal.description == "TSFFI_ERR_INTERNAL")
        // A value the header does not name (a newer library's) still prints.
        #expect(TsffiStatus(rawValue: 7).description == "status 7")
        #expect("\(TsffiStatus.refused)" == "TSFFI_ERR_REFUSED")
    }

    @Test func theErrorsDescriptionNamesTheStatus() {
        let error = TsffiError(status: .json, message: "options_json: m", function: "tsffi_resolve_speculation")
        #expect(error.description == "tsffi_resolve_speculation: TSFFI_ERR_JSON (4): options_json: m")
        #expect(error.statusName == "TSFFI_ERR_JSON")
        let unknown = TsffiError(status: TsffiStatus(rawValue: 7), message: "m", function: "f")
        #expect(unknown.description == "f: status 7 (7): m")
    }

    @Test func statusesRoundTripAsTheirNumber() throws {
        let encoded = try JSONEncoder().encode([TsffiStatus.ok, .refused])
        #expect(String(decoding: encoded, as: UTF8.self) == "[0,2]")
        #expect(try JSONDecoder().decode([TsffiStatus].self, from: Data("[9,4]".utf8)) == [.runtime, .json])
    }

    /// The status `body` was caught by, naming each status in its own
    /// `catch` clause (typed throws, as every call of this package throws).
    private func caughtBy(_ body: () throws(TsffiError) -> Void) -> String {
        do {
            try body()
            return "nothing"
        } catch TsffiStatus.refused {
            return "refused"
        } catch TsffiStatus.invalidArgument {
            return "invalidArgument"
        } catch TsffiStatus.json {
            return "json"
        } catch TsffiStatus.internal {
            return "internal"
        } catch TsffiStatus.runtime {
            return "runtime"
        } catch {
            return "other \(error.status)"
        }
    }

    @Test func aCatchClauseMatchesEachStatusByName() {
        #expect(caughtBy { () throws(TsffiError) in
            _ = try Tsffi.resolveSpeculation(options: Options(speculation: .block(2), engineBlocker: .reason("x")))
        } == "refused")
        #expect(caughtBy { () throws(TsffiError) in
            _ = try Tsffi.resolveSpeculation(options: Options(temperature: -1))
        } == "invalidArgument")
        #expect(caughtBy { () throws(TsffiError) in
            _ = try Tsffi.resolveSpeculationJSON(optionsJSON: "{nope")
        } == "json")
        #expect(caughtBy { () throws(TsffiError) in
            _ = try Tsffi.resolveSpeculation()
        } == "nothing")
        // A status the header does not name falls through to the last clause.
        #expect(caughtBy { () throws(TsffiError) in
            throw TsffiError(status: TsffiStatus(rawValue: 7), message: "", function: "f")
        } == "other status 7")
    }

    @Test func anUntypedCatchMatchesToo() throws {
        func refusal() throws {
            _ = try Tsffi.resolveSpeculationJSON(optionsJSON: #"{"speculation": 2, "tsffi": {"engineBlocker": "busy"}}"#)
        }
        do {
            try refusal()
            Issue.record("not refused")
        } catch TsffiStatus.json {
            Issue.record("a refusal matched TsffiStatus.json")
        } catch TsffiError.refused {
            // The former spelling matches as well: it is the same value.
        }
        // The bound error is still there for its message.
        do {
            try refusal()
        } catch let error as TsffiError where TsffiStatus.refused ~= error {
            #expect(error.message == Fixtures.refusalPrefix + "busy")
        }
        // Any other error matches no status.
        struct Other: Error {}
        #expect(!(TsffiStatus.internal ~= Other() as any Error))
        #expect(TsffiStatus.refused ~= (TsffiError(status: .refused, message: "", function: "f") as any Error))
    }

    @Test func anAsyncCallIsCaughtByName() async {
        do {
            _ = try await Tsffi.Background.speculationPlan(modelDir: "", options: .default)
            Issue.record("an empty model_dir was accepted")
        } catch TsffiStatus.invalidArgument {
            // model_dir is empty
        } catch {
            Issue.record("caught \(error), not invalidArgument")
        }
    }
}
