import Foundation
import SpeculationPreview
import Testing

/// `Tsffi.reconcile`: the preview against what the engine's real open
/// reported, and the plans after a disagreement, in the engine's words. Each
/// test writes installs of its own, so the library's memory (one per
/// process) never mixes tests that run at once.
@Suite struct ReconcileTests {
    static let vision = "the vision tower is active"
    static let on2 = SpeculationPlan(block: 2, drafter: .mtp, reason: nil)

    /// `ts_session_info_json`'s text: the speculation among the session's
    /// other keys.
    static func sessionInfo(_ speculation: String) -> EngineReport {
        .sessionInfo(#"{"modelDir": "/Users/me/models/qwen-27b.gturbo", "contextWindow": 32768, "#
            + #""speculation": \#(speculation), "kvBits": "off", "status": "ready"}"#)
    }

    static var revision: EngineRevision {
        EngineRevision(engine: Fixtures.engine, engineVersion: Fixtures.engineVersion,
                       engineRevisions: ["policy": "0.3.0", "open": "0a45c54", "manifest": "54bc43a",
                                         "residentIndex": "08aaf13", "dtypeGates": "0a45c54",
                                         "drafterBuild": "22f47a2", "blockers": "22f47a2",
                                         "turn": "0a45c54"])
    }

    @Test func anAgreeingSessionAgrees() throws {
        try Fixtures.withInstalls(["mtp": "mtp=True"]) { dirs in
            let dir = dirs["mtp"]!
            let result = try Tsffi.reconcile(
                modelDir: dir, optionsJSON: "{}",
                engine: Self.sessionInfo(#"{"block": 2, "drafter": "mtp", "reason": null}"#))
            #expect(result.agrees)
            #expect(result.preview == OpenOutcome(status: 0, speculation: Self.on2))
            #expect(result.engine == result.preview)
            #expect(result.differences == [])
            #expect(result.revision == Self.revision)
            #expect(try Tsffi.speculationPlan(modelDir: dir, optionsJSON: "{}").source == .preview)
        }
    }

    /// (the engine's speculation, the differences, its typed value)
    static let disagreements: [(String, [String], SpeculationPlan)] = [
        (#"{"block": 3, "drafter": "mtp", "reason": null}"#, ["speculation.block"],
         SpeculationPlan(block: 3, drafter: .mtp, reason: nil)),
        (#"{"block": 2, "drafter": "dflash", "reason": null}"#, ["speculation.drafter"],
         SpeculationPlan(block: 2, drafter: .dflash, reason: nil)),
        (#"{"block": null, "drafter": null, "reason": "the vision tower is active"}"#,
         ["speculation.block", "speculation.drafter", "speculation.reason"],
         SpeculationPlan(block: nil, drafter: nil, reason: vision)),
    ]

    @Test(arguments: 0..<3) func aDisagreementIsAnsweredInTheEnginesWords(_ row: Int) throws {
        let (speculation, differences, typed) = Self.disagreements[row]
        try Fixtures.withInstalls(["mtp": "mtp=True"]) { dirs in
            let dir = dirs["mtp"]!
            let before = try Tsffi.speculationPlan(modelDir: dir, optionsJSON: "{}")
            #expect(before.source == .preview && before.speculation == Self.on2)
            let result = try Tsffi.reconcile(modelDir: dir, optionsJSON: "{}",
                                             engine: Self.sessionInfo(speculation))
            #expect(!result.agrees)
            #expect(result.differences == differences)
            #expect(result.engine == OpenOutcome(status: 0, speculation: typed))
            let after = try Tsffi.speculationPlan(modelDir: dir, optionsJSON: "{}")
            #expect(after.source == .engine)
            #expect(after.speculation == typed)
            #expect(after.warnings.count == 1)
            // An agreement forgets it.
            _ = try Tsffi.reconcile(modelDir: dir, optionsJSON: "{}",
                                    engine: Self.sessionInfo(#"{"block": 2, "drafter": "mtp", "reason": null}"#))
            #expect(try Tsffi.speculationPlan(modelDir: dir, optionsJSON: "{}") == before)
        }
    }

    @Test func aFailedOpenIsTheNextPlansRefusal() throws {
        try Fixtures.withInstalls(["mtp": "mtp=True"]) { dirs in
            let dir = dirs["mtp"]!
            let said = #"failed to load a tokenizer from "/m": no tokenizer.json"#
            let result = try Tsffi.reconcile(modelDir: dir, optionsJSON: "{}",
                                             engine: .openFailed(status: 2, message: said))
            #expect(result.differences == ["status"])
            #expect(result.engine == OpenOutcome(status: 2, message: said))
            #expect(!result.engine.opened && result.preview.opened)
            let error = thrownError { () throws(TsffiError) in
                try Tsffi.speculationPlan(modelDir: dir, optionsJSON: "{}")
            }
            #expect(error?.status == .refused)
            #expect(error?.message == said)
        }
    }

    @Test func aPreviewRefusalAgainstAnOpen() throws {
        try Fixtures.withInstalls(["mtp": "mtp=True"]) { dirs in
            let dir = dirs["mtp"]!
            let options = #"{"speculation": 2, "tsffi": {"engineBlocker": "the vision tower is active"}}"#
            let result = try Tsffi.reconcile(
                modelDir: dir, optionsJSON: options,
                engine: Self.sessionInfo(#"{"block": 2, "drafter": "mtp", "reason": null}"#))
            #expect(result.preview == OpenOutcome(status: 2,
                                                  message: Fixtures.refusalPrefix + Self.vision))
            #expect(result.differences == ["status"])
            let after = try Tsffi.speculationPlan(modelDir: dir, optionsJSON: options)
            #expect(after.source == .engine && after.speculation == Self.on2)
        }
    }

    static let malformed: [(String, String)] = [
        (#"{"contextWindow": 32768}"#,
         #"engine_json: the object: got neither "speculation" nor "status" among its keys; "#
            + #"accepts ts_session_info_json's text (an object whose "speculation" is {"block", "#
            + #""drafter", "reason"}) or, for an open that failed, {"status": n, "message": "..."} "#
            + "with the open's nonzero status and ts_last_error's text"),
        (#"{"speculation": {"block": 16, "drafter": "mtp", "reason": null}}"#,
         "engine_json: speculation.block: got 16; accepts null (speculation off) or an integer in 1..=15"),
        (#"{"status": 0, "message": "ok"}"#,
         "engine_json: status: got 0; accepts the failed open's status, an integer in "
            + "1..=2147483647 (a successful open is reported by ts_session_info_json's text)"),
    ]

    @Test(arguments: 0..<3) func aMalformedReportIsAnInvalidArgument(_ row: Int) throws {
        let (text, message) = Self.malformed[row]
        try Fixtures.withInstalls(["mtp": "mtp=True"]) { dirs in
            let error = thrownError { () throws(TsffiError) in
                try Tsffi.reconcile(modelDir: dirs["mtp"]!, optionsJSON: "{}", engine: .sessionInfo(text))
            }
            #expect(error?.status == .invalidArgument)
            #expect(error?.message == message)
        }
    }

    @Test func aFailedOpensReportIsWrittenAsJSON() {
        #expect(EngineReport.openFailed(status: 4, message: #"a "quoted" \ text"#).json()
                == #"{"status": 4, "message": "a \"quoted\" \\ text"}"#)
    }

    @MainActor
    @Test func theSettingsModelShowsTheEnginesOutcome() async throws {
        try await withInstallsAsync(["mtp": "mtp=True"]) { dirs in
            let dir = dirs["mtp"]!
            let model = SpeculationSettings(modelDir: dir, options: Options())
            await model.settled()
            #expect(model.plan?.speculation == Self.on2)
            #expect(model.engineOutcome == nil && model.disagreement == nil)

            let result = try await model.reconcile(
                engine: Self.sessionInfo(#"{"block": null, "drafter": null, "reason": "the vision tower is active"}"#))
            #expect(model.reconciliation == result && model.reconciled == model.request)
            #expect(model.engineOutcome == OpenOutcome(
                status: 0, speculation: SpeculationPlan(block: nil, drafter: nil, reason: Self.vision)))
            #expect(model.disagreement?.differences
                    == ["speculation.block", "speculation.drafter", "speculation.reason"])

            // An agreeing report: the outcome stays, the disagreement goes.
            try await model.reconcile(engine: Self.sessionInfo(#"{"block": 2, "drafter": "mtp", "reason": null}"#))
            #expect(model.engineOutcome == OpenOutcome(status: 0, speculation: Self.on2))
            #expect(model.disagreement == nil)

            // New inputs: the report was for the old ones.
            model.options = Options(speculation: .off)
            await model.settled()
            #expect(model.reconciliation == nil && model.engineOutcome == nil)
        }
    }
}
