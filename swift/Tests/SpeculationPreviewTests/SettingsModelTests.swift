import Foundation
import Testing
// A plain import, as an app has it: everything this file uses of the model
// (its init(compute:) included) is public.
import SpeculationPreview

/// The settings model following the host: one call for the install and the
/// options, the options as the app holds them, the engine's spellings read
/// into this package's values, and a computation of the caller's own.
@Suite struct SettingsModelTests {
    // MARK: the engine's spellings

    /// Every spelling with the value it names (nil: not a spelling), written
    /// out; the library is asked the same text and must agree.
    static let speculationSpellings: [(String, Speculation?)] = [
        ("auto", .auto), ("AUTO", .auto), ("Auto", .auto), ("aUtO", .auto),
        ("off", .off), ("OFF", .off), ("Off", .off),
        ("1", .block(1)), ("2", .block(2)), ("4", .block(4)), ("8", .block(8)), ("15", .block(15)),
        ("02", .block(2)), ("0015", .block(15)), ("000000000000000000000007", .block(7)),
        ("0", nil), ("00", nil), ("16", nil), ("99", nil), ("4294967295", nil), ("99999999999999999999", nil),
        // Rust's u64 parse, as the open reads a string: one leading "+" is part of it.
        ("+2", .block(2)), ("+02", .block(2)), ("+15", .block(15)), ("+", nil), ("++2", nil), ("+-2", nil),
        ("+0", nil), ("+16", nil),
        ("-1", nil), (" 2", nil), ("2 ", nil), ("2.0", nil), ("1e1", nil), ("0x2", nil),
        ("", nil), ("null", nil), ("none", nil), ("on", nil), ("block(2)", nil), ("auto ", nil),
        ("\u{0662}", nil),            // ARABIC-INDIC DIGIT TWO
        ("\u{FF12}", nil),            // FULLWIDTH DIGIT TWO
        ("\u{FF41}uto", nil),         // FULLWIDTH a
        ("autö", nil), ("o\u{FB00}", nil),  // "off" with the ff ligature
    ]

    static let drafterSpellings: [(String, SpeculativeDrafter?)] = [
        ("auto", .auto), ("mtp", .mtp), ("dflash", .dflash),
        ("AUTO", nil), ("Auto", nil), ("MTP", nil), ("Mtp", nil), ("DFlash", nil), ("DFLASH", nil),
        ("dflash2", nil), ("DFlash2", nil), (" mtp", nil), ("mtp ", nil), ("", nil), ("null", nil),
        ("off", nil), ("\u{FF4D}tp", nil),
    ]

    static func jsonString(_ text: String) throws -> String {
        String(decoding: try JSONEncoder().encode(text), as: UTF8.self)
    }

    @Test func speculationSpellingsAreTheEnginesGrammar() throws {
        for (spelling, expected) in Self.speculationSpellings {
            #expect(Speculation(spelling) == expected, "\(spelling.debugDescription)")
            // The library, sent the same text, accepts exactly these and
            // reads them as the same value.
            let asked = Outcome {
                try Tsffi.resolveSpeculation(options: Options(speculation: Speculation(spelling) ?? .block(99)))
            }
            let json = #"{"speculation": \#(try Self.jsonString(spelling))}"#
            let sent = Outcome {
                try JSONDecoder().decode(SpeculationPlan.self,
                                         from: Data(try Tsffi.resolveSpeculationJSON(optionsJSON: json).utf8))
            }
            if expected == nil {
                guard case .failed(let error) = sent else {
                    Issue.record("the library accepts \(spelling.debugDescription), Speculation(_:) does not")
                    continue
                }
                // The open's mapping refuses it: status 2, one of its two messages.
                #expect(error.status == TsffiStatus.refused)
                #expect(error.message.hasPrefix("speculation block must be in 1..=15, got ")
                        || error.message == #"speculation must be "off", "auto" or a block in 1..=15, got "#
                            + "\(spelling.debugDescription)", "\(error.message)")
            } else {
                #expect(sent == asked, "\(spelling.debugDescription)")
            }
        }
    }

    @Test func everyValueSpellsItselfBack() {
        let values: [Speculation] = [.auto, .off] + Speculation.allowedBlocks.map { .block($0) }
        #expect(values.map(\.description) == ["auto", "off"] + (1...15).map { String($0) })
        for value in values {
            #expect(Speculation(value.description) == value)
        }
        for drafter in SpeculativeDrafter.allCases {
            #expect(SpeculativeDrafter(drafter.description) == drafter)
        }
    }

    @Test func drafterSpellingsAreTheEnginesGrammar() throws {
        for (spelling, expected) in Self.drafterSpellings {
            #expect(SpeculativeDrafter(spelling) == expected, "\(spelling.debugDescription)")
            let json = #"{"speculativeDrafter": \#(try Self.jsonString(spelling))}"#
            let sent = Outcome { try Tsffi.resolveDrafterJSON(modelDir: "/nonexistent-install", optionsJSON: json) }
            if expected == nil {
                guard case .failed(let error) = sent else {
                    Issue.record("the library accepts \(spelling.debugDescription), SpeculativeDrafter(_:) does not")
                    continue
                }
                #expect(error.status == TsffiStatus.refused)
                #expect(error.message == "speculativeDrafter must be auto, mtp or dflash, got "
                        + "\(spelling.debugDescription)", "\(error.message)")
            } else {
                #expect(sent == Outcome {
                    try Tsffi.resolveDrafterJSON(modelDir: "/nonexistent-install",
                                                 optionsJSON: try Options(drafter: expected!).json())
                })
            }
        }
    }

    // MARK: one call, one computation

    @MainActor
    @Test func oneUpdateIsOneComputation() async {
        let asked = Asked()
        let model = SpeculationSettings { request in
            await asked.note(request)
            return .success(fakeTable(request))
        }
        await model.settled()
        #expect(await asked.requests == [])  // no install: answered without a call

        model.update(modelDir: "/install", options: Options(drafter: .mtp, speculation: .block(3)))
        await model.settled()
        let first = SpeculationSettings.Request(modelDir: "/install",
                                                options: Options(drafter: .mtp, speculation: .block(3)))
        #expect(await asked.requests == [first])
        #expect(model.answered == first && model.request == first)
        #expect(model.plan?.speculation.block == 3)
        #expect(model.modelDir == "/install" && model.options == Options(drafter: .mtp, speculation: .block(3)))

        // The same inputs again: nothing to compute.
        model.update(modelDir: "/install", options: Options(drafter: .mtp, speculation: .block(3)))
        await model.settled()
        #expect(await asked.requests.count == 1)

        // The host's JSON: one call, sent as it is.
        model.update(modelDir: "/other", optionsJSON: #"{"speculation": 4, "contextLength": 8192}"#)
        await model.settled()
        let second = SpeculationSettings.Request(modelDir: "/other",
                                                 optionsJSON: #"{"speculation": 4, "contextLength": 8192}"#)
        #expect(await asked.requests == [first, second])
        #expect(model.answered == second && model.plan?.speculation.block == 4)
        #expect(model.options == Options())  // no typed view of JSON options

        // Setting the two properties one by one is two computations: what
        // update(modelDir:options:) is for.
        model.modelDir = "/third"
        model.options = Options(speculation: .block(5))
        await model.settled()
        #expect(await asked.requests.count == 4)
        #expect(model.answered == SpeculationSettings.Request(modelDir: "/third", options: Options(speculation: .block(5))))
    }

    // MARK: the options as the app holds them

    /// The app's own options struct, with its own raw values and a key the
    /// library does not use, as the engine's app persists it.
    struct AppRuntimeOptions: Encodable {
        var speculation = "2"
        var speculativeDrafter = "mtp"
        var contextLength = 8192
    }

    @MainActor
    @Test func theHostsOwnOptionsAreReadByTheLibrary() async throws {
        try await withInstallsAsync(["mtp": "mtp=True"]) { dirs in
            let dir = dirs["mtp"]!
            let sent = #"{"contextLength":8192,"speculation":"2","speculativeDrafter":"mtp"}"#
            let expected = try Tsffi.speculationPlan(modelDir: dir, optionsJSON: sent)
            #expect(expected.speculation == SpeculationPlan(block: 2, drafter: .mtp, reason: nil))
            #expect(expected.ignoredKeys == ["contextLength"])

            // Any Encodable, as JSONEncoder writes it (keys sorted).
            let model = SpeculationSettings()
            model.update(modelDir: dir, options: AppRuntimeOptions())
            await model.settled()
            #expect(model.answered == SpeculationSettings.Request(modelDir: dir, optionsJSON: sent))
            #expect(model.plan == expected && model.error == nil)

            // The same object as text, as bytes and as a JSONSerialization
            // object: the same answer.
            let others: [(String, (SpeculationSettings) -> Void)] = [
                ("text", { $0.update(modelDir: dir, optionsJSON: #"{"speculation": "2", "speculativeDrafter": "mtp", "contextLength": 8192}"#) }),
                ("bytes", { $0.update(modelDir: dir, optionsJSON: Data(sent.utf8)) }),
                ("object", { $0.update(modelDir: dir, optionsObject: ["speculation": "2", "speculativeDrafter": "mtp", "contextLength": 8192]) }),
                ("typed", { $0.update(modelDir: dir, options: Options(drafter: SpeculativeDrafter("mtp")!, speculation: Speculation("2")!)) }),
            ]
            for (how, give) in others {
                let other = SpeculationSettings()
                give(other)
                await other.settled()
                #expect(other.plan?.speculation == expected.speculation, "\(how)")
                #expect(other.plan?.drafter == expected.drafter, "\(how)")
                #expect(other.error == nil, "\(how)")
            }

            // A value outside the grammar: the library's own refusal, verbatim.
            var fast = AppRuntimeOptions()
            fast.speculation = "fast"
            model.update(modelDir: dir, options: fast)
            await model.settled()
            let refusal = thrownError { () throws(TsffiError) in
                try Tsffi.speculationChoicesJSON(
                    modelDir: dir, optionsJSON: #"{"contextLength":8192,"speculation":"fast","speculativeDrafter":"mtp"}"#)
            }
            #expect(model.error == refusal && model.plan == nil && model.choices == nil)
            #expect(model.error?.message == #"speculation must be "off", "auto" or a block in 1..=15, got "fast""#)

            // JSON that is neither an object nor an array (the open reads an
            // array positionally), and a non-finite number in the tsffi object.
            model.update(modelDir: dir, optionsJSON: "1")
            await model.settled()
            #expect(model.error == TsffiError(status: .json,
                                              message: "options: invalid type: integer `1`, expected struct "
                                                  + "OpenOptions at line 1 column 1",
                                              function: "tsffi_speculation_choices"))
            struct Hot: Encodable { var tsffi = ["temperature": Double.nan] }
            model.update(modelDir: dir, options: Hot())
            await model.settled()
            #expect(model.answered == SpeculationSettings.Request(modelDir: dir,
                                                                  optionsJSON: #"{"tsffi":{"temperature":"nan"}}"#))
            #expect(model.error?.status == TsffiStatus.invalidArgument)
            #expect(model.error?.message
                    == #"tsffi.temperature: got "nan"; accepts a finite number >= 0, or null (the engine binding's default temperature, 0.2)"#)
        }
    }

    @MainActor
    @Test func optionsThatCannotBeJSONAreRefusedAtOnceWithNothingComputed() async {
        let asked = Asked()
        let model = SpeculationSettings { request in
            await asked.note(request)
            return .success(fakeTable(request))
        }
        model.update(modelDir: "/install", options: Options(speculation: .block(3)))
        await model.settled()
        let good = model.request

        struct Broken: Encodable {
            func encode(to encoder: Encoder) throws {
                throw EncodingError.invalidValue(0, .init(codingPath: [], debugDescription: "broken on purpose"))
            }
        }
        let refusals: [(String, String, (SpeculationSettings) -> Void)] = [
            ("SpeculationSettings.update(modelDir:optionsJSON:)", "options: the 2 JSON bytes given are not UTF-8; accepts UTF-8 text",
             { $0.update(modelDir: "/install", optionsJSON: Data([0x7B, 0xFF])) }),
            ("SpeculationSettings.update(modelDir:optionsObject:)",
             "options: the object given holds a value JSONSerialization cannot write; accepts strings, "
                + "numbers, booleans, NSNull, arrays and dictionaries",
             { $0.update(modelDir: "/install", optionsObject: ["speculation": Date()]) }),
            ("SpeculationSettings.update(modelDir:options:)", "options: JSONEncoder could not encode the Broken given (",
             { $0.update(modelDir: "/install", options: Broken()) }),
        ]
        for (function, message, give) in refusals {
            give(model)
            #expect(model.error?.status == TsffiStatus.invalidArgument)
            #expect(model.error?.function == function)
            #expect(model.error?.message.hasPrefix(message) == true, "\(model.error?.message ?? "")")
            #expect(model.plan == nil && model.choices == nil && model.answered == nil && !model.isUpdating)
            #expect(model.request == good)  // the inputs stay what they were
            // The inputs given again are computed again, and answered.
            model.update(good)
            await model.settled()
            #expect(model.error == nil && model.plan?.speculation.block == 3)
        }
        #expect(await asked.requests == Array(repeating: good, count: 1 + refusals.count))
    }

    @MainActor
    @Test func theLibrarysComputationCanBeWrapped() async throws {
        // A preview's compute: the library's answer, counted.
        try await withInstallsAsync(["dflash": "dflash=True"]) { dirs in
            let asked = Asked()
            let model = SpeculationSettings(modelDir: dirs["dflash"]!) { request in
                await asked.note(request)
                return await SpeculationSettings.computeWithLibrary(request)
            }
            await model.settled()
            let direct = try Tsffi.speculationPlan(modelDir: dirs["dflash"]!)
            #expect(model.plan == direct)
            #expect(model.plan?.speculation.reason == Fixtures.dflashAutoNote)
            #expect(await asked.requests.count == 1)
        }
    }

    /// The pane's status line after open, as the engine's app shows it
    /// ("mtp x2, greedy only"), and whether the host's own turns speculate:
    /// left at the binding's default temperature (0.2) a session that drafts
    /// never does, and the model says why (ABI 4).
    @MainActor
    @Test func theModelSaysWhetherTheHostsTurnsSpeculate() async throws {
        try await withInstallsAsync(["mtp": "mtp=True", "none": ""]) { dirs in
            let model = SpeculationSettings(modelDir: dirs["mtp"]!)
            await model.settled()
            #expect(model.sessionSummary == "mtp x2, greedy only")
            #expect(model.turnOutcome == .sequential(reason:
                "this session drafts, but a turn speculates only at temperature 0 and this turn's "
                + "temperature is 0.2 (the engine binding's default): it decodes sequentially (send "
                + "temperature 0 to speculate)"))
            #expect(model.turn == Turn(temperature: 0.2, speculates: false, reason: model.plan?.turn.reason))

            model.options = Options(temperature: 0)
            await model.settled()
            #expect(model.turnOutcome == .speculates)
            #expect(model.sessionSummary == "mtp x2, greedy only")

            // Low Power Mode, with no power profile given: efficiency's rate control.
            model.options = Options(preview: PreviewOptions(temperature: 0, lowPowerMode: true))
            await model.settled()
            #expect(model.turnOutcome == .sequential(reason:
                "this session drafts, but Low Power Mode resolves the absent powerProfile to "
                + "\"efficiency\", which turns the engine's rate control on, and a turn under rate "
                + "control decodes sequentially (set powerProfile \"performance\" to speculate)"))

            model.update(modelDir: dirs["none"]!, options: Options(temperature: 0))
            await model.settled()
            #expect(model.turnOutcome == .sessionOff)
            #expect(model.sessionSummary == nil)
            #expect(model.plan?.speculation.reason == Fixtures.noHead)

            model.modelDir = nil
            await model.settled()
            #expect(model.turnOutcome == nil && model.turn == nil && model.sessionSummary == nil)
        }
    }
}

/// The requests a compute function was called with, in order.
actor Asked {
    private(set) var requests: [SpeculationSettings.Request] = []
    func note(_ request: SpeculationSettings.Request) { requests.append(request) }
}
