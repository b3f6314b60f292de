import Tsffi
import Foundation
import Testing
import SpeculationPreview

/// The C boundary itself: the header as Swift imports it, the ABI version,
/// the options object, and the one error type.
@Suite struct BoundaryTests {
    @Test func headerNullabilityImportsAsNonOptionalParameters() {
        // TSFFI_NONNULL pointers import as non-optional, TSFFI_NULLABLE ones as
        // optional. Compared as exact types at run time (a C function used as
        // a value is `@Sendable (...) -> R`), since function conversions would
        // let a looser signature through an assignment. Without the
        // annotations every pointer imports as `T!`, i.e. Optional, and the
        // non-optional ones below fail.
        typealias In = UnsafePointer<CChar>
        typealias Out = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
        typealias WithDir = @Sendable (In, In?, Out) -> Int32
        func same<A, B>(_ a: A, _ b: B.Type) -> Bool { ObjectIdentifier(type(of: a)) == ObjectIdentifier(B.self) }
        #expect(same(tsffi_speculation_plan, WithDir.self))
        #expect(same(tsffi_resolve_drafter, WithDir.self))
        #expect(same(tsffi_draft_policies, WithDir.self))
        #expect(same(tsffi_resolve_speculation, (@Sendable (In?, Out) -> Int32).self))
        #expect(same(tsffi_install_info_json, (@Sendable (In, Out) -> Int32).self))
        #expect(same(tsffi_build_info_json, (@Sendable (Out) -> Int32).self))
        #expect(same(tsffi_last_error, (@Sendable (UnsafeMutablePointer<CChar>?, Int) -> Int).self))
        #expect(same(tsffi_string_free, (@Sendable (UnsafeMutablePointer<CChar>?) -> Void).self))
        #expect(same(tsffi_abi_version, (@Sendable () -> UInt32).self))
        // And the negative control: an optional model_dir is a different type.
        #expect(!same(tsffi_speculation_plan, (@Sendable (In?, In?, Out) -> Int32).self))
    }

    @Test func abiVersionAndBuildInfo() throws {
        #expect(Tsffi.abiVersion == Tsffi.headerABIVersion)
        #expect(Tsffi.headerABIVersion == TSFFI_ABI_VERSION)
        let info = try Tsffi.buildInfo()
        #expect(info.abiVersion == Tsffi.abiVersion)
        #expect(!info.version.isEmpty)
        #expect(info.library.hasSuffix("/libtsffi.so") || info.library.hasSuffix("/libtsffi.dylib"))
        // A Swift process has no Python of its own: the library owns its interpreter.
        #expect(info.ownsInterpreter == true)
        #expect(info.engine == Fixtures.engine && info.engineVersion == Fixtures.engineVersion)
        let raw = try Tsffi.buildInfoJSON()
        #expect(try JSONDecoder().decode(BuildInfo.self, from: Data(raw.utf8)) == info)
    }

    @Test func optionsProduceTheEnginesKeys() throws {
        #expect(try Options().json() == #"{"speculation":"auto","speculativeDrafter":"auto"}"#)
        #expect(try Options.default.json() == Options().json())
        #expect(try Options(drafter: .dflash, speculation: .block(2)).json()
                == #"{"speculation":2,"speculativeDrafter":"dflash"}"#)
        // The preview's inputs go into the tsffi object, never beside the engine's keys.
        #expect(try Options(drafter: .mtp, speculation: .off, temperature: 0.7).json()
                == #"{"speculation":"off","speculativeDrafter":"mtp","tsffi":{"temperature":0.7}}"#)
        #expect(try Options(temperature: 0).json()
                == #"{"speculation":"auto","speculativeDrafter":"auto","tsffi":{"temperature":0}}"#)
        // engineBlocker: absent (no key, and no tsffi object), none (null), a reason (verbatim).
        #expect(try Options(engineBlocker: .absent).json() == Options().json())
        #expect(try Options(engineBlocker: .none).json()
                == #"{"speculation":"auto","speculativeDrafter":"auto","tsffi":{"engineBlocker":null}}"#)
        #expect(try Options(engineBlocker: .reason(#"says "no" / ok"#)).json()
                == #"{"speculation":"auto","speculativeDrafter":"auto","tsffi":{"engineBlocker":"says \"no\" / ok"}}"#)
        #expect(try Options(temperature: 1.5, engineBlocker: .reason("r")).json()
                == #"{"speculation":"auto","speculativeDrafter":"auto","tsffi":{"engineBlocker":"r","temperature":1.5}}"#)
        // The two ways to set the preview's inputs are one value.
        #expect(Options(temperature: 0.7) == Options(preview: PreviewOptions(temperature: 0.7)))
        #expect(Options.Key.engineKeys.map(\.rawValue)
                == ["maxContext", "expertCacheSlots", "expertResidency", "powerProfile", "loadGuard",
                    "minAutoContext", "maxTokensPerSec", "speculation", "speculativeDrafter", "steering",
                    "steeringMode", "steeringScale", "steeringLayers", "steeringTarget", "steeringGate",
                    "visionSidecar", "kvBits", "prefixReuse"])
        #expect(Options.Key.allCases.map(\.rawValue) == Options.Key.engineKeys.map(\.rawValue) + ["tsffi"])
        #expect(PreviewOptions.Key.allCases.map(\.rawValue) == ["engineBlocker", "lowPowerMode", "temperature"])
        // lowPowerMode is sent only when true (false is the library's default).
        #expect(try Options(preview: PreviewOptions(lowPowerMode: false)).json() == Options().json())
        #expect(try Options(preview: PreviewOptions(lowPowerMode: true)).json()
                == #"{"speculation":"auto","speculativeDrafter":"auto","tsffi":{"lowPowerMode":true}}"#)
    }

    /// Every typed field, written out: the JSON each value sends is the JSON
    /// the engine's open reads for it.
    @Test func everyEngineKeyEncodesAsTheEngineReadsIt() throws {
        let base = #""speculation":"auto","speculativeDrafter":"auto""#
        let cases: [(Options, String)] = [
            (Options(maxContext: .auto), #"{"maxContext":"auto",\#(base)}"#),
            (Options(maxContext: .tokens(32768)), #"{"maxContext":32768,\#(base)}"#),
            (Options(expertCacheSlots: .auto), #"{"expertCacheSlots":"auto",\#(base)}"#),
            (Options(expertCacheSlots: .slots(48)), #"{"expertCacheSlots":48,\#(base)}"#),
            (Options(powerProfile: .efficiency), #"{"powerProfile":"efficiency",\#(base)}"#),
            (Options(loadGuard: .strict), #"{"loadGuard":"strict",\#(base)}"#),
            (Options(loadGuard: .off), #"{"loadGuard":"off",\#(base)}"#),
            (Options(loadGuard: .byteCeiling(17_179_869_184)), #"{"loadGuard":17179869184,\#(base)}"#),
            (Options(minAutoContext: 4096), #"{"minAutoContext":4096,\#(base)}"#),
            (Options(maxTokensPerSec: 12.5), #"{"maxTokensPerSec":12.5,\#(base)}"#),
            (Options(steering: "/v/honest.safetensors", steeringMode: .add, steeringScale: -0.5,
                     steeringLayers: 10...20, steeringTarget: 2, steeringGate: 0.25),
             #"{\#(base),"steering":"/v/honest.safetensors","steeringGate":0.25,"steeringLayers":"10:20","#
                + #""steeringMode":"add","steeringScale":-0.5,"steeringTarget":2}"#),
            (Options(visionSidecar: "/m/vision"), #"{\#(base),"visionSidecar":"/m/vision"}"#),
            (Options(kvBits: .threeAndAHalf), #"{"kvBits":"3.5",\#(base)}"#),
            (Options(kvBits: .off), #"{"kvBits":"off",\#(base)}"#),
            (Options(expertResidency: .streamed), #"{"expertResidency":"streamed",\#(base)}"#),
            (Options(prefixReuse: false), #"{"prefixReuse":false,\#(base)}"#),
        ]
        for (options, expected) in cases {
            #expect(try options.json() == expected)
        }
        #expect(Options.KVBits.allCases.map(\.rawValue) == ["off", "2", "3", "3.5", "4"])
        #expect(Options.ExpertResidency.allCases.map(\.rawValue) == ["auto", "streamed", "mapped"])
        #expect(Options.PowerProfile.allCases.map(\.rawValue) == ["performance", "balanced", "efficiency"])
        #expect(Options.SteeringMode.allCases.map(\.rawValue) == ["ablate", "add", "clamp", "renorm"])
        #expect(Options.ExpertCacheSlots.allowed == [8, 16, 24, 32, 48, 64, 96, 128])
        #expect(Options.LoadGuard.tiers.map(\.description) == ["off", "relaxed", "balanced", "strict"])
    }

    @Test func speculationDecodesTheEnginesSpellings() throws {
        func decode(_ json: String) throws -> Speculation {
            try JSONDecoder().decode([Speculation].self, from: Data("[\(json)]".utf8))[0]
        }
        #expect(try decode(#""auto""#) == .auto)
        #expect(try decode(#""Off""#) == .off)
        #expect(try decode("null") == .auto)
        #expect(try decode("4") == .block(4))
        #expect(try decode(#""12""#) == .block(12))
        #expect(throws: DecodingError.self) { try decode(#""fast""#) }
        let encoded = try JSONEncoder().encode([Speculation.auto, .off, .block(5)])
        #expect(String(decoding: encoded, as: UTF8.self) == #"["auto","off",5]"#)
    }

    @Test func engineBlockerTriState() throws {
        // Without an install: a reason turns auto off with that reason...
        let blocked = try Tsffi.resolveSpeculation(options: Options(engineBlocker: .reason("busy GPU")))
        #expect(blocked == SpeculationPlan(block: nil, drafter: nil, reason: "busy GPU"))
        // ...and none / absent leave it on, at the drafter's default block.
        #expect(try Tsffi.resolveSpeculation(options: Options(engineBlocker: .none))
                == SpeculationPlan(block: 2, drafter: .mtp, reason: nil))
        #expect(try Tsffi.resolveSpeculation()
                == SpeculationPlan(block: 2, drafter: .mtp, reason: nil))
        #expect(try Tsffi.resolveSpeculation(options: Options(drafter: .dflash, speculation: .block(4)))
                == SpeculationPlan(block: 4, drafter: .dflash, reason: nil))
        // Off is off, with no reason.
        #expect(try Tsffi.resolveSpeculation(options: Options(speculation: .off, engineBlocker: .reason("x")))
                == SpeculationPlan(block: nil, drafter: nil, reason: nil))
        let error = thrownError { () throws(TsffiError) in
            try Tsffi.resolveSpeculation(options: Options(speculation: .block(2), engineBlocker: .reason("busy GPU")))
        }
        #expect(error == TsffiError(status: TsffiStatus.refused,
                                         message: Fixtures.refusalPrefix + "busy GPU",
                                         function: "tsffi_resolve_speculation"))

        // On an install, an explicit blocker outranks the preview, and null
        // means "the engine reported none".
        try Fixtures.withInstalls(["none": ""]) { dirs in
            let preview = try Tsffi.speculationPlan(modelDir: dirs["none"]!)
            #expect(preview.speculation.reason == Fixtures.noHead)
            let none = try Tsffi.speculationPlan(modelDir: dirs["none"]!, options: Options(engineBlocker: .none))
            #expect(none.speculation == SpeculationPlan(block: 2, drafter: .mtp, reason: nil))
            let reason = try Tsffi.speculationPlan(modelDir: dirs["none"]!, options: Options(engineBlocker: .reason("r")))
            #expect(reason.speculation == SpeculationPlan(block: nil, drafter: nil, reason: "r"))
        }
    }

    @Test func badValuesAreRefusedWithTheLibrarysOwnMessage() throws {
        func failure(_ body: () throws -> SpeculationPlan) -> TsffiError? {
            if case .failed(let error) = Outcome(body) { return error }
            return nil
        }
        // The tsffi object is the library's own: status 1, naming the key.
        let temperatureAccepts = "accepts a finite number >= 0, or null (the engine binding's default temperature, 0.2)"
        let negative = failure { try Tsffi.resolveSpeculation(options: Options(temperature: -1)) }
        #expect(negative == TsffiError(status: .invalidArgument,
                                       message: "tsffi.temperature: got -1; \(temperatureAccepts)",
                                       function: "tsffi_resolve_speculation"))

        let nan = failure { try Tsffi.resolveSpeculation(options: Options(temperature: .nan)) }
        #expect(nan?.status == TsffiStatus.invalidArgument)
        #expect(nan?.message == #"tsffi.temperature: got "nan"; "# + temperatureAccepts)

        // Outside 1...15: the engine's open refuses it in its mapping (status 2).
        let zero = failure { try Tsffi.resolveSpeculation(options: Options(speculation: .block(0))) }
        #expect(zero?.status == TsffiStatus.refused)
        #expect(zero?.message == "speculation block must be in 1..=15, got 0")

        let huge = failure { try Tsffi.resolveSpeculation(options: Options(speculation: .block(Int.max))) }
        #expect(huge?.status == TsffiStatus.refused)
        #expect(huge?.message == "speculation block must be in 1..=15, got 9223372036854775807")

        let emptyBlocker = failure {
            try Tsffi.resolveSpeculation(options: Options(engineBlocker: .reason("")))
        }
        #expect(emptyBlocker?.status == TsffiStatus.invalidArgument)
        #expect(emptyBlocker?.message == #"tsffi.engineBlocker: got ""; accepts a non-empty string "#
                + "without NUL characters or lone surrogates (the engine's reason), or null (the "
                + "engine reported none)")

        // What the engine's decoder refuses: status 4, serde's text with its position.
        let json = failure { try Tsffi.speculationPlan(modelDir: "/nonexistent", optionsJSON: "{nope").speculation }
        #expect(json?.status == TsffiStatus.json)
        #expect(json?.message == "options: key must be a string at line 1 column 2")

        // A near-miss key is ignored, as the open ignores it, with a warning
        // (on an install: since ABI 4 the open refuses a path that is not a
        // directory, after the options).
        let notADirectory = failure { try Tsffi.speculationPlan(modelDir: "/nonexistent").speculation }
        #expect(notADirectory == TsffiError(status: .refused,
                                            message: "/nonexistent is not a directory (and matched no installed alias)",
                                            function: "tsffi_speculation_plan"))
        let nearMiss = try Fixtures.withInstalls(["none": ""]) { dirs in
            try Tsffi.speculationPlan(modelDir: dirs["none"]!, optionsJSON: #"{"speculativDrafter": "dflash"}"#)
        }
        #expect(nearMiss.ignoredKeys == ["speculativDrafter"])
        #expect(nearMiss.warnings == [#""speculativDrafter" is not a key the engine's open reads, so it "#
                                      + #"ignores it (and so does this preview); did you mean "speculativeDrafter"?"#])
        #expect(nearMiss.drafter.drafter == .mtp)  // auto: the key changed nothing

        let empty = failure { try Tsffi.speculationPlan(modelDir: "").speculation }
        #expect(empty?.status == TsffiStatus.invalidArgument)
        #expect(empty?.message.hasPrefix("model_dir is empty") == true)

        // A NUL would make C read a different, shorter path: refused before the call.
        let nul = failure { try Tsffi.speculationPlan(modelDir: "/tmp\u{0}/x").speculation }
        #expect(nul?.status == TsffiStatus.invalidArgument)
        #expect(nul?.message.hasPrefix("model_dir contains a NUL character") == true)

        let badChoice = thrownError { () throws(TsffiError) in
            try Tsffi.draftPoliciesJSON(choiceJSON: #"{"drafter": "mtp"}"#, optionsJSON: nil)
        }
        #expect(badChoice?.status == TsffiStatus.invalidArgument)
        #expect(badChoice?.message.hasPrefix("choice_json: missing key") == true)
    }

    @Test func aNULIsRefusedNamingItsArgumentAndFunction() {
        func failure(_ body: () throws(TsffiError) -> String) -> TsffiError? {
            do throws(TsffiError) { _ = try body() } catch { return error }
            return nil
        }
        let nul = "{}\u{0}x"
        // Each raw call, with a NUL in each of its string arguments in turn:
        // refused before the call, naming the argument and the C function.
        let calls: [(String, String, () throws(TsffiError) -> String)] = [
            ("options_json", "tsffi_speculation_plan", { () throws(TsffiError) in
                try Tsffi.speculationPlanJSON(modelDir: "/m", optionsJSON: nul) }),
            ("model_dir", "tsffi_speculation_choices", { () throws(TsffiError) in
                try Tsffi.speculationChoicesJSON(modelDir: nul, optionsJSON: nul) }),
            ("options_json", "tsffi_resolve_drafter", { () throws(TsffiError) in
                try Tsffi.resolveDrafterJSON(modelDir: "/m", optionsJSON: nul) }),
            ("choice_json", "tsffi_draft_policies", { () throws(TsffiError) in
                try Tsffi.draftPoliciesJSON(choiceJSON: nul, optionsJSON: nil) }),
            ("options_json", "tsffi_draft_policies", { () throws(TsffiError) in
                try Tsffi.draftPoliciesJSON(choiceJSON: "{}", optionsJSON: nul) }),
            ("options_json", "tsffi_resolve_speculation", { () throws(TsffiError) in
                try Tsffi.resolveSpeculationJSON(optionsJSON: nul) }),
            ("model_dir", "tsffi_install_info_json", { () throws(TsffiError) in
                try Tsffi.installInfoJSON(modelDir: nul) }),
        ]
        for (argument, function, call) in calls {
            let error = failure(call)
            #expect(error?.status == .invalidArgument)
            #expect(error?.function == function)
            #expect(error?.message.hasPrefix("\(argument) contains a NUL character") == true, "\(function)")
        }
    }

    @Test func aSuccessAfterAFailureLeavesNoStaleMessage() throws {
        #expect(throws: TsffiError.self) { try Tsffi.resolveSpeculation(options: Options(temperature: -1)) }
        _ = try Tsffi.resolveSpeculation()
        #expect(tsffi_last_error(nil, 0) == 0)
    }
}
