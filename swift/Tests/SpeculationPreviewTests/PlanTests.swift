import Tsffi
import Foundation
import Testing
import SpeculationPreview

/// The main job, as a GUI does it, against real installs in the engine's layout.
@Suite struct PlanTests {
    @Test func dflashOnlyInstallUnderAutoReturnsTheNoteVerbatim() throws {
        try Fixtures.withInstalls(["dflash": "dflash=True"]) { dirs in
            let plan = try Tsffi.speculationPlan(modelDir: dirs["dflash"]!)
            #expect(plan.drafter == DrafterChoice(drafter: .mtp, installHasMtpHead: false,
                                                  installHasDflash: true, note: Fixtures.dflashAutoNote))
            #expect(plan.drafter.note == Fixtures.dflashAutoNote)
            // A note means the decision is made: neither drafter is asked for.
            #expect(plan.draftPolicies == DraftPolicies(mtp: .off, dflash: .off))
            #expect(plan.speculation == SpeculationPlan(block: nil, drafter: nil, reason: Fixtures.dflashAutoNote))
            #expect(!plan.speculation.isEnabled)
            #expect(plan.ignoredKeys == [])

            let choice = try Tsffi.resolveDrafter(modelDir: dirs["dflash"]!)
            // Both name the directory they read: the install's own path.
            #expect(plan.modelDir == dirs["dflash"]!)
            #expect(choice.modelDir == dirs["dflash"]!)
            var fromPlan = plan.drafter
            fromPlan.modelDir = plan.modelDir
            #expect(choice == fromPlan)
        }
    }

    @Test func namedBlockOnDflashOnlyInstallThrowsTheSeedsRefusal() throws {
        try Fixtures.withInstalls(["dflash": "dflash=True"]) { dirs in
            let error = thrownError { () throws(TsffiError) in
                try Tsffi.speculationPlan(modelDir: dirs["dflash"]!, options: Options(speculation: .block(2)))
            }
            #expect(error?.status.rawValue == 2)
            #expect(error?.status == TsffiStatus.refused)
            #expect(error?.status.rawValue == TSFFI_ERR_REFUSED)
            #expect(error?.isRefused == true)
            #expect(error?.message == Fixtures.refusalPrefix + Fixtures.dflashAutoNote)
            #expect(error?.localizedDescription == Fixtures.refusalPrefix + Fixtures.dflashAutoNote)
            #expect(error?.function == "tsffi_speculation_plan")

            // The same refusal through the step-by-step calls: the policies
            // leave the head alone, and speculation refuses with the note.
            let choice = try Tsffi.resolveDrafter(modelDir: dirs["dflash"]!, options: Options(speculation: .block(2)))
            #expect(try Tsffi.draftPolicies(choice: choice, options: Options(speculation: .block(2)))
                    == DraftPolicies(mtp: .off, dflash: .off))
            let stepError = thrownError { () throws(TsffiError) in
                try Tsffi.resolveSpeculation(options: Options(
                    drafter: choice.drafter, speculation: .block(2), engineBlocker: .reason(choice.note!)))
            }
            #expect(stepError?.status == TsffiStatus.refused)
            #expect(stepError?.message == Fixtures.refusalPrefix + Fixtures.dflashAutoNote)
            #expect(stepError?.function == "tsffi_resolve_speculation")
        }
    }

    @Test func explicitDflashDrafterGetsItsPolicies() throws {
        try Fixtures.withInstalls(["dflash": "dflash=True", "both": "mtp=True, dflash=True"]) { dirs in
            for name in ["dflash", "both"] {
                let dir = dirs[name]!
                let auto = try Tsffi.speculationPlan(modelDir: dir, options: Options(drafter: .dflash))
                #expect(auto.drafter.drafter == .dflash)
                #expect(auto.drafter.note == nil)
                #expect(auto.drafter.installHasDflash == true)
                #expect(auto.draftPolicies == DraftPolicies(mtp: .off, dflash: .auto))
                #expect(auto.speculation == SpeculationPlan(block: 2, drafter: .dflash, reason: nil))

                let fixed = try Tsffi.speculationPlan(
                    modelDir: dir, options: Options(drafter: .dflash, speculation: .block(2)))
                #expect(fixed.draftPolicies == DraftPolicies(mtp: .off, dflash: .fixed(2)))
                #expect(fixed.draftPolicies.dflash.mode == .fixed)
                #expect(fixed.draftPolicies.dflash.block == 2)
                #expect(fixed.draftPolicies.mtp.mode == .off)
                #expect(fixed.speculation == SpeculationPlan(block: 2, drafter: .dflash, reason: nil))

                // Step by step gives the same policies.
                let choice = try Tsffi.resolveDrafter(modelDir: dir, options: Options(drafter: .dflash))
                #expect(try Tsffi.draftPolicies(choice: choice, options: Options(speculation: .block(2)))
                        == fixed.draftPolicies)
                #expect(try Tsffi.draftPolicies(choice: choice) == auto.draftPolicies)
            }
        }
    }

    /// ABI 4: the temperature is the TURN's. The session is the open's
    /// answer, greedy assumed, whatever it says (DFlash2 at 0.7 drafts); the
    /// turn says the turns will not speculate. Only the original module's own step
    /// function, tsffi_resolve_speculation, keeps the engine CLI's sampled
    /// rule.
    @Test func aSampledTurnLeavesTheSessionAsTheOpenDecidesIt() throws {
        try Fixtures.withInstalls(["both": "mtp=True, dflash=True"]) { dirs in
            for drafter in [SpeculativeDrafter.dflash, .mtp] {
                let sampled = try Tsffi.speculationPlan(modelDir: dirs["both"]!, options: Options(
                    drafter: drafter, speculation: .block(2), temperature: 0.7))
                #expect(sampled.speculation == SpeculationPlan(block: 2, drafter: drafter, reason: nil))
                #expect(sampled.turn == Turn(temperature: 0.7, speculates: false, reason: Self.sampledTurn07))
                #expect(sampled.sessionSummary == "\(drafter.rawValue) x2, greedy only")
            }
            let greedy = try Tsffi.speculationPlan(modelDir: dirs["both"]!, options: Options(
                drafter: .dflash, speculation: .block(3), temperature: 0))
            #expect(greedy.speculation == SpeculationPlan(block: 3, drafter: .dflash, reason: nil))
            #expect(greedy.turn == Turn(temperature: 0, speculates: true, reason: nil))
            let step = thrownError { () throws(TsffiError) in
                try Tsffi.resolveSpeculation(options: Options(
                    drafter: .dflash, speculation: .block(2), temperature: 0.7))
            }
            #expect(step?.status == TsffiStatus.refused)
            #expect(step?.message == Fixtures.refusalPrefix + Fixtures.sampledReason)
        }
    }

    static let sampledTurn07 = "this session drafts, but a turn speculates only at temperature 0 and "
        + "this turn's temperature is 0.7: it decodes sequentially (send temperature 0 to speculate)"
    static let rateControl = "and a turn under rate control decodes sequentially"

    /// Whether a turn speculates (turn.py), written out: only at temperature
    /// 0 with rate control off; the reason names the cause when the session
    /// drafts; nil when it does not draft.
    static let turns: [(String, Options, Turn)] = [
        ("mtp", Options(), Turn(temperature: 0.2, speculates: false, reason:
            "this session drafts, but a turn speculates only at temperature 0 and this turn's "
            + "temperature is 0.2 (the engine binding's default): it decodes sequentially (send "
            + "temperature 0 to speculate)")),
        ("mtp", Options(temperature: 0), Turn(temperature: 0, speculates: true, reason: nil)),
        ("mtp", Options(temperature: 0.7), Turn(temperature: 0.7, speculates: false, reason: sampledTurn07)),
        ("mtp", Options(preview: PreviewOptions(temperature: 0, lowPowerMode: true)),
         Turn(temperature: 0, speculates: false, reason:
            "this session drafts, but Low Power Mode resolves the absent powerProfile to "
            + "\"efficiency\", which turns the engine's rate control on, " + rateControl
            + " (set powerProfile \"performance\" to speculate)")),
        // A power profile given outranks Low Power Mode.
        ("mtp", Options(powerProfile: .performance, preview: PreviewOptions(temperature: 0, lowPowerMode: true)),
         Turn(temperature: 0, speculates: true, reason: nil)),
        ("mtp", Options(powerProfile: .efficiency, preview: PreviewOptions(temperature: 0)),
         Turn(temperature: 0, speculates: false, reason:
            "this session drafts, but powerProfile \"efficiency\" turns the engine's rate control on, "
            + rateControl + " (powerProfile \"performance\" speculates)")),
        // Any maxTokensPerSec, 0 included.
        ("mtp", Options(maxTokensPerSec: 0, preview: PreviewOptions(temperature: 0)),
         Turn(temperature: 0, speculates: false, reason:
            "this session drafts, but maxTokensPerSec turns the engine's rate control on, "
            + rateControl + " (leave maxTokensPerSec unset to speculate)")),
        // The session does not draft: no turn reason (the session's says why).
        ("none", Options(temperature: 0), Turn(temperature: 0, speculates: false, reason: nil)),
        ("mtp", Options(speculation: .off, temperature: 0), Turn(temperature: 0, speculates: false, reason: nil)),
    ]

    @Test func theTurnSaysWhetherATurnSpeculates() throws {
        try Fixtures.withInstalls(["mtp": "mtp=True", "none": ""]) { dirs in
            for (name, options, turn) in Self.turns {
                let plan = try Tsffi.speculationPlan(modelDir: dirs[name]!, options: options)
                let sent = try options.json()
                #expect(plan.turn == turn, "\(name) \(sent)")
                // The table's item for the same options says the same.
                let table = try Tsffi.speculationChoices(modelDir: dirs[name]!, options: options)
                #expect(table.selected?.plan?.turn == turn)
            }
        }
    }

    @Test func unreadableIndexYieldsNilInstallFlags() throws {
        try Fixtures.withInstalls([:], garbage: ["garbage"]) { dirs in
            let root = URL(fileURLWithPath: dirs["garbage"]!).deletingLastPathComponent()
            // Two more ways to be unreadable: too short for a header, and empty.
            var unreadable = [dirs["garbage"]!]
            let manifest = try Data(contentsOf: URL(fileURLWithPath: dirs["garbage"]!)
                .appendingPathComponent("manifest.json"))
            for (name, bytes) in [("short", [UInt8](repeating: 1, count: 10)), ("empty", [])] {
                let dir = root.appendingPathComponent(name)
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                try Data(bytes).write(to: dir.appendingPathComponent("model_weights.bin"))
                try manifest.write(to: dir.appendingPathComponent("manifest.json"))
                unreadable.append(dir.path)
            }
            for dir in unreadable {
                for drafter in SpeculativeDrafter.allCases {
                    let choice = try Tsffi.resolveDrafter(modelDir: dir, options: Options(drafter: drafter))
                    #expect(choice.installHasMtpHead == nil, "\(dir) \(drafter)")
                    #expect(choice.installHasDflash == nil, "\(dir) \(drafter)")
                    #expect(choice.note == nil)
                    #expect(choice.drafter == (drafter == .dflash ? .dflash : .mtp))
                }
                let info = try Tsffi.installInfo(modelDir: dir)
                #expect(info.indexReadable == false)
                #expect(info.installHasMtpHead == nil)
                #expect(info.installHasDflash == nil)
                #expect(info.indexError != nil)
                #expect(info.modelDir == dir)

                // The open refuses an unreadable index (ABI 4): status 2, the
                // reader's text, which install info gives as openError too.
                let refused = thrownError { () throws(TsffiError) in try Tsffi.speculationPlan(modelDir: dir) }
                #expect(refused?.status == .refused)
                #expect(refused?.message == info.indexError)
                #expect(info.openError == info.indexError)
                #expect(info.arch != nil && info.manifestError == nil)

                // nil is "nobody looked", not "absent": a named block still asks
                // the open for the head, so a broken install fails at open with
                // the engine's own message. The nils survive the round trip
                // through Swift (encoded as JSON null, which the C side requires).
                let choice = try Tsffi.resolveDrafter(modelDir: dir)
                #expect(try Tsffi.draftPolicies(choice: choice, options: Options(speculation: .block(2)))
                        == DraftPolicies(mtp: .fixed(2), dflash: .off))
            }
        }
    }

    @Test func installInfoDescribesAReadableInstall() throws {
        try Fixtures.withInstalls(["dflash": "dflash=True", "moe": "experts=8, dflash=True"]) { dirs in
            let info = try Tsffi.installInfo(modelDir: dirs["dflash"]!)
            #expect(info.indexReadable)
            #expect(info.installHasMtpHead == false)
            #expect(info.installHasDflash == true)
            #expect(info.dflashDrafter?.complete == true)
            #expect(info.dflashDrafter?.tensors == 81)
            #expect(info.mtpHead?.present == false)
            #expect(info.probe?.verifyCovers == true)
            #expect(info.blockerPreview?.dflash == nil)
            #expect(info.blockerPreview?.mtp == Fixtures.noHead)

            let moe = try Tsffi.installInfo(modelDir: dirs["moe"]!)
            #expect(moe.experts?.expertsPerLayer == 8)
            // The manifest's arch, which the blockers read (ABI 4).
            #expect(info.arch == InstallInfo.Arch(family: "qwen35", hiddenSize: 5120, vocabSize: 248320,
                                                  numLayers: 4, numExperts: 0,
                                                  fullAttentionLayerMask: [2, 2, 2, 1], visionDepth: 0,
                                                  firstFullAttentionLayer: 3))
            #expect(moe.arch?.numExperts == 8)
            #expect(info.manifestError == nil && info.openError == nil)
            // The raw JSON is the same document.
            let raw = try Tsffi.installInfoJSON(modelDir: dirs["moe"]!)
            #expect(try JSONDecoder().decode(InstallInfo.self, from: Data(raw.utf8)) == moe)
        }
    }

    @Test func typedOptionsAndRawJSONGiveTheSameAnswer() throws {
        try Fixtures.withInstalls(["dflash": "dflash=True", "mtp": "mtp=True"]) { dirs in
            let pairs: [(Options, String)] = [
                (Options(), "{}"),
                (Options(), ""),
                (Options(speculation: .block(2)), #"{"speculation": 2}"#),
                (Options(speculation: .block(2)), #"{"speculation": "2"}"#),
                (Options(speculation: .off), #"{"speculation": "OFF"}"#),
                (Options(drafter: .dflash, speculation: .block(3)),
                 #"{"speculativeDrafter": "dflash", "speculation": 3}"#),
                (Options(drafter: .mtp, engineBlocker: .reason("the engine says no")),
                 #"{"speculativeDrafter": "mtp", "tsffi": {"engineBlocker": "the engine says no"}}"#),
                (Options(speculation: .block(2), temperature: 0.7),
                 #"{"speculation": 2, "tsffi": {"temperature": 0.7}}"#),
                (Options(maxContext: .tokens(8192), loadGuard: .strict, kvBits: .four),
                 #"{"maxContext": 8192, "loadGuard": "STRICT", "kvBits": "4"}"#),
                (Options(expertCacheSlots: .slots(12)), #"{"expertCacheSlots": 12}"#),
                (Options(steeringMode: .add), #"{"steeringMode": "add"}"#),
            ]
            for dir in [dirs["dflash"]!, dirs["mtp"]!] {
                for (options, raw) in pairs {
                    let typed = Outcome { try Tsffi.speculationPlan(modelDir: dir, options: options) }
                    let viaRaw = Outcome { try Tsffi.speculationPlan(modelDir: dir, optionsJSON: raw) }
                    #expect(typed == viaRaw, "\(dir) \(raw)")
                }
                #expect(Outcome { try Tsffi.speculationPlan(modelDir: dir, optionsJSON: nil) }
                        == Outcome { try Tsffi.speculationPlan(modelDir: dir) })
            }
        }
    }

    @Test func hostKeysTheLibraryDoesNotUseAreListedBack() throws {
        try Fixtures.withInstalls(["mtp": "mtp=True"]) { dirs in
            let plan = try Tsffi.speculationPlan(
                modelDir: dirs["mtp"]!,
                optionsJSON: #"{"contextLength": 8192, "speculation": "auto", "temperature": 0.7, "#
                    + #""windowWidth": 1200, "tsffi": {}}"#)
            // The open ignores them, and so does the plan: a top-level
            // temperature changes nothing (the block stays on), with a hint.
            #expect(plan.ignoredKeys == ["contextLength", "temperature", "windowWidth"])
            #expect(plan.warnings == [#""temperature" at the top level is ignored, as the engine's open "#
                                      + #"ignores it; since ABI 3 this library reads it inside the "tsffi" "#
                                      + #"object: {"tsffi": {"temperature": ...}}"#])
            #expect(plan.speculation == SpeculationPlan(block: 2, drafter: .mtp, reason: nil))
            // powerProfile is one of the engine's keys: checked as the open checks it.
            let refused = thrownError { () throws(TsffiError) in
                try Tsffi.speculationPlan(modelDir: dirs["mtp"]!, optionsJSON: #"{"powerProfile": "quiet"}"#)
            }
            #expect(refused == TsffiError(status: .refused,
                                          message: #"powerProfile must be performance, balanced or efficiency, got "quiet""#,
                                          function: "tsffi_speculation_plan"))
        }
    }

    @Test func resultsEncodeBackToTheWireShape() throws {
        try Fixtures.withInstalls(["dflash": "dflash=True", "mtp": "mtp=True"]) { dirs in
            for dir in [dirs["dflash"]!, dirs["mtp"]!] {
                for options in [Options(), Options(drafter: .dflash), Options(speculation: .off)] {
                    let raw = try Tsffi.speculationPlanJSON(modelDir: dir, optionsJSON: options.json())
                    let decoded = try JSONDecoder().decode(PlanResult.self, from: Data(raw.utf8))
                    let reencoded = try JSONEncoder().encode(decoded)
                    let a = try JSONSerialization.jsonObject(with: Data(raw.utf8)) as? NSDictionary
                    let b = try JSONSerialization.jsonObject(with: reencoded) as? NSDictionary
                    #expect(a != nil)
                    #expect(a == b, "\(raw)\n\(String(decoding: reencoded, as: UTF8.self))")
                }
                // The raw choice, exactly as returned, is what draft_policies takes.
                let choiceJSON = try Tsffi.resolveDrafterJSON(modelDir: dir, optionsJSON: nil)
                let policies = try Tsffi.draftPoliciesJSON(choiceJSON: choiceJSON, optionsJSON: #"{"speculation":"off"}"#)
                #expect(try JSONDecoder().decode(DraftPolicies.self, from: Data(policies.utf8))
                        == DraftPolicies(mtp: .off, dflash: .off))
            }
        }
    }
}

/// One call's outcome, comparable: the decoded result or the error.
enum Outcome<T: Hashable & Sendable>: Hashable, Sendable {
    case ok(T)
    case failed(TsffiError)

    init(_ body: () throws -> T) {
        do {
            self = .ok(try body())
        } catch let error as TsffiError {
            self = .failed(error)
        } catch {
            self = .failed(TsffiError(status: TsffiStatus(rawValue: -1), message: "not a TsffiError: \(error)",
                                           function: "?"))
        }
    }
}
