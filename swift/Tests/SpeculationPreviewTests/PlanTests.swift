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

    @Test func sampledRunRefusesTheBlockDrafterButNotTheStepDrafter() throws {
        try Fixtures.withInstalls(["both": "mtp=True, dflash=True"]) { dirs in
            let error = thrownError { () throws(TsffiError) in
                try Tsffi.speculationPlan(modelDir: dirs["both"]!, options: Options(
                    drafter: .dflash, speculation: .block(2), temperature: 0.7))
            }
            #expect(error?.status == TsffiStatus.refused)
            #expect(error?.message == Fixtures.refusalPrefix + Fixtures.sampledReason)
            let mtp = try Tsffi.speculationPlan(modelDir: dirs["both"]!, options: Options(
                drafter: .mtp, speculation: .block(2), temperature: 0.7))
            #expect(mtp.speculation == SpeculationPlan(block: 2, drafter: .mtp, reason: nil))
            let greedy = try Tsffi.speculationPlan(modelDir: dirs["both"]!, options: Options(
                drafter: .dflash, speculation: .block(3), temperature: 0))
            #expect(greedy.speculation == SpeculationPlan(block: 3, drafter: .dflash, reason: nil))
        }
    }

    @Test func unreadableIndexYieldsNilInstallFlags() throws {
        try Fixtures.withInstalls([:], garbage: ["garbage"]) { dirs in
            let root = URL(fileURLWithPath: dirs["garbage"]!).deletingLastPathComponent()
            // Two more ways to be unreadable: too short for a header, and empty.
            var unreadable = [dirs["garbage"]!]
            for (name, bytes) in [("short", [UInt8](repeating: 1, count: 10)), ("empty", [])] {
                let dir = root.appendingPathComponent(name)
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                try Data(bytes).write(to: dir.appendingPathComponent("model_weights.bin"))
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

                let plan = try Tsffi.speculationPlan(modelDir: dir)
                #expect(plan.drafter.installHasMtpHead == nil)
                #expect(plan.drafter.installHasDflash == nil)
                #expect(plan.speculation.block == nil)
                #expect(plan.speculation.reason == info.indexError)

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
        try Fixtures.withInstalls(["dflash": "dflash=True"], garbage: ["garbage"]) { dirs in
            for dir in [dirs["dflash"]!, dirs["garbage"]!] {
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
