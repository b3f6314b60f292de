import Foundation
import Testing
@testable import SpeculationPreview

/// tsffi_speculation_choices from Swift: the table against per-item plan calls,
/// the async calls off the caller's actor, and the settings model.
@Suite struct ChoicesTests {
    static let shapes = ["none": "", "mtp": "mtp=True", "dflash": "dflash=True",
                         "both": "mtp=True, dflash=True", "moe": "mtp=True, experts=8",
                         // A partial MTP head: the open cannot build it (ABI 4).
                         "partial": "mtp_tensors=('mtp.fc.weight',)"]
    static let optionSets: [Options] = [
        Options(),
        Options(temperature: 0.7),
        Options(engineBlocker: .reason("the vision tower is active")),
        Options(engineBlocker: .none),
        Options(drafter: .dflash, speculation: .off),
    ]
    static let speculations: [Speculation] = [.auto, .off] + (1...15).map { .block($0) }
    static let drafters: [SpeculativeDrafter] = [.auto, .mtp, .dflash]

    @Test func theTableIsThePlanCallForEveryItem() throws {
        try Fixtures.withInstalls(Self.shapes, garbage: ["garbage"]) { dirs in
            var refused = 0, planned = 0
            for (name, dir) in dirs.sorted(by: { $0.key < $1.key }) {
                for options in Self.optionSets {
                    // An install the open refuses whatever is asked (garbage:
                    // its index) fails the table as it fails the plan (ABI 4).
                    guard case .ok(let table) = Outcome({ try Tsffi.speculationChoices(modelDir: dir, options: options) })
                    else {
                        let table = thrownError { () throws(TsffiError) in
                            try Tsffi.speculationChoices(modelDir: dir, options: options)
                        }
                        let plan = thrownError { () throws(TsffiError) in
                            try Tsffi.speculationPlan(modelDir: dir, options: options)
                        }
                        #expect(name == "garbage")
                        #expect(table?.status == .refused && table?.message == plan?.message)
                        continue
                    }
                    #expect(table.choices.map { [$0.speculation, $0.speculativeDrafter] as [AnyHashable] }
                            == Self.speculations.flatMap { s in Self.drafters.map { [s, $0] as [AnyHashable] } })
                    #expect(table.modelDir == dir)
                    for item in table.choices {
                        var asked = options
                        asked.speculation = item.speculation
                        asked.drafter = item.speculativeDrafter
                        let direct = Outcome { try Tsffi.speculationPlan(modelDir: dir, options: asked) }
                        let fromTable: Outcome<PlanResult> = Outcome { try item.result.get() }
                        #expect(fromTable == direct, "\(name) \(options) \(item.speculation) \(item.speculativeDrafter)")
                        if item.isRefused { refused += 1 } else { planned += 1 }
                        #expect(item.selected == (item.speculation == options.speculation
                                                  && item.speculativeDrafter == options.drafter))
                    }
                    #expect(table.selected?.speculation == options.speculation)
                    let flags = table.choices.compactMap(\.plan).first?.drafter
                    #expect(table.install.installHasMtpHead == flags?.installHasMtpHead)
                    #expect(table.install.installHasDflash == flags?.installHasDflash)
                }
            }
            // Both kinds of item occur, so both comparisons ran.
            #expect(refused > 100 && planned > 100)
            // The open's failure to build the partial head is an item's refusal,
            // in the open's words (no "--speculative" prefix).
            let partial = try Tsffi.speculationChoices(modelDir: dirs["partial"]!)
            #expect(partial.choice(speculation: .auto, drafter: .mtp)?.error
                    == "missing resident tensor: mtp.pre_fc_norm_embedding.weight")
            #expect(partial.choice(speculation: .off, drafter: .mtp)?.isRefused == false)
        }
    }

    @Test func theRawTableDecodesAndEncodesBackToItsShape() throws {
        try Fixtures.withInstalls(["dflash": "dflash=True"]) { dirs in
            // The second has an ignored key and a warning, which the table says once.
            for text in [#"{"tsffi":{"temperature":0.5}}"#, #"{"temperature":0.5,"hostKey":1}"#] {
                let raw = try Tsffi.speculationChoicesJSON(modelDir: dirs["dflash"]!, optionsJSON: text)
                let decoded = try JSONDecoder().decode(SpeculationChoices.self, from: Data(raw.utf8))
                let a = try JSONSerialization.jsonObject(with: Data(raw.utf8)) as? NSDictionary
                let b = try JSONSerialization.jsonObject(with: JSONEncoder().encode(decoded)) as? NSDictionary
                #expect(a != nil && a == b, "\(text)")
                #expect(decoded.choice(speculation: .block(2), drafter: .auto)?.error
                        == Fixtures.refusalPrefix + Fixtures.dflashAutoNote)
                // Each item's plan is given the table's keys back.
                let plan = decoded.choice(speculation: .auto, drafter: .auto)?.plan
                #expect(plan?.ignoredKeys == decoded.ignoredKeys && plan?.warnings == decoded.warnings)
                #expect(plan?.modelDir == decoded.modelDir)
            }
        }
    }

    @Test func anInvalidPickThrowsAsThePlanCallWould() throws {
        try Fixtures.withInstalls(["mtp": "mtp=True"]) { dirs in
            let error = thrownError { () throws(TsffiError) in
                try Tsffi.speculationChoices(modelDir: dirs["mtp"]!, options: Options(speculation: .block(16)))
            }
            // The engine's open refuses it (no item has it): its status and message.
            #expect(error == TsffiError(status: .refused, message: "speculation block must be in 1..=15, got 16",
                                        function: "tsffi_speculation_choices"))
            for text in [#"{"tsffi": {"temperature": -1}}"#, #"{"kvBits": "5"}"#, #"{"speculation": 1, "speculation": 2}"#] {
                let bad = thrownError { () throws(TsffiError) in
                    try Tsffi.speculationChoices(modelDir: dirs["mtp"]!, optionsJSON: text)
                }
                let plan = thrownError { () throws(TsffiError) in
                    try Tsffi.speculationPlan(modelDir: dirs["mtp"]!, optionsJSON: text)
                }
                #expect(bad != nil && bad?.status == plan?.status && bad?.message == plan?.message, "\(text)")
            }
        }
    }

    // MARK: async, off the caller's actor

    @MainActor
    @Test func backgroundCallsFromTheMainActorGiveTheSynchronousAnswers() async throws {
        let dirs = try ConcurrencyTests.writeInstalls()
        defer { ConcurrencyTests.remove(dirs) }
        for dir in dirs.values.sorted() {
            for options in Self.optionSets {
                // Background asserts it is not on the main queue: run from
                // the main actor, a call made there would stop the test.
                let plan = await AsyncOutcome { () async throws(TsffiError) in
                    try await Tsffi.Background.speculationPlan(modelDir: dir, options: options)
                }
                #expect(plan == Outcome { try Tsffi.speculationPlan(modelDir: dir, options: options) })
                let table = await AsyncOutcome { () async throws(TsffiError) in
                    try await Tsffi.Background.speculationChoices(modelDir: dir, options: options)
                }
                #expect(table == Outcome { try Tsffi.speculationChoices(modelDir: dir, options: options) })
            }
            let drafter = try await Tsffi.Background.resolveDrafter(modelDir: dir)
            #expect(drafter == (try Tsffi.resolveDrafter(modelDir: dir)))
            #expect(try await Tsffi.Background.draftPolicies(choice: drafter, options: Options(speculation: .block(3)))
                    == (try Tsffi.draftPolicies(choice: drafter, options: Options(speculation: .block(3)))))
            #expect(try await Tsffi.Background.installInfo(modelDir: dir) == (try Tsffi.installInfo(modelDir: dir)))
            #expect(try await Tsffi.Background.installInfoJSON(modelDir: dir) == (try Tsffi.installInfoJSON(modelDir: dir)))
            // (Refused for the garbage install, as the open refuses it.)
            #expect(await AsyncOutcome { () async throws(TsffiError) in
                        try await Tsffi.Background.speculationPlanJSON(modelDir: dir, optionsJSON: nil)
                    } == Outcome { try Tsffi.speculationPlanJSON(modelDir: dir, optionsJSON: nil) })
            #expect(await AsyncOutcome { () async throws(TsffiError) in
                        try await Tsffi.Background.speculationChoicesJSON(modelDir: dir, optionsJSON: "{}")
                    } == Outcome { try Tsffi.speculationChoicesJSON(modelDir: dir, optionsJSON: "{}") })
            #expect(try await Tsffi.Background.resolveDrafterJSON(modelDir: dir, optionsJSON: nil)
                    == (try Tsffi.resolveDrafterJSON(modelDir: dir, optionsJSON: nil)))
        }
        let blocked = Options(speculation: .block(2), engineBlocker: .reason("busy GPU"))
        let refused = await AsyncOutcome { () async throws(TsffiError) in
            try await Tsffi.Background.resolveSpeculation(options: blocked)
        }
        #expect(refused == Outcome { try Tsffi.resolveSpeculation(options: blocked) })
        if case .failed(let error) = refused {
            #expect(error.isRefused)  // the message was read on the thread that failed
            #expect(error.message == Fixtures.refusalPrefix + "busy GPU")
        } else {
            Issue.record("a named block under an engine blocker was not refused")
        }
        #expect(try await Tsffi.Background.resolveSpeculationJSON(optionsJSON: nil)
                == (try Tsffi.resolveSpeculationJSON(optionsJSON: nil)))
        #expect(try await Tsffi.Background.draftPoliciesJSON(choiceJSON: Tsffi.resolveDrafterJSON(modelDir: dirs["mtp"]!, optionsJSON: nil), optionsJSON: nil)
                == (try Tsffi.draftPoliciesJSON(choiceJSON: Tsffi.resolveDrafterJSON(modelDir: dirs["mtp"]!, optionsJSON: nil), optionsJSON: nil)))
        #expect(try await Tsffi.Background.buildInfo() == (try Tsffi.buildInfo()))
        #expect(try await Tsffi.Background.buildInfoJSON() == (try Tsffi.buildInfoJSON()))
        // The store is shared by the run (ModelNameTests records into it in
        // parallel): its root is what stays put.
        #expect(try await Tsffi.Background.store().root == (try Tsffi.store().root))
        #expect(try await Tsffi.Background.storeJSON().contains(#""storeRead":"#))
    }

    // MARK: the settings model

    @MainActor
    @Test func theModelAnswersWhatTheCallsAnswer() async throws {
        try await withInstallsAsync(["dflash": "dflash=True", "mtp": "mtp=True"]) { dirs in
            let model = SpeculationSettings()
            #expect(model.plan == nil && model.choices == nil && model.error == nil && !model.isUpdating)

            model.modelDir = dirs["dflash"]!
            #expect(model.isUpdating)  // the setter returned before the answer
            await model.settled()
            #expect(model.answered == SpeculationSettings.Request(modelDir: dirs["dflash"]!, options: Options()))
            let plan = try Tsffi.speculationPlan(modelDir: dirs["dflash"]!)
            let table = try Tsffi.speculationChoices(modelDir: dirs["dflash"]!)
            #expect(model.plan == plan)
            #expect(model.plan?.speculation.reason == Fixtures.dflashAutoNote)
            #expect(model.choices == table)
            #expect(model.error == nil && !model.isUpdating)

            // A refused pick: no plan, the refusal as the error, the table kept.
            model.options = Options(speculation: .block(2))
            await model.settled()
            #expect(model.plan == nil)
            #expect(model.error?.status == TsffiStatus.refused)
            #expect(model.error?.message == Fixtures.refusalPrefix + Fixtures.dflashAutoNote)
            #expect(model.choices?.selected?.speculation == .block(2))

            // Invalid options: the call's own error, nothing else.
            model.options = Options(temperature: -1)
            await model.settled()
            #expect(model.plan == nil && model.choices == nil)
            #expect(model.error?.status == TsffiStatus.invalidArgument)
            #expect(model.error?.message
                    == "tsffi.temperature: got -1; accepts a finite number >= 0, or null (the engine binding's default temperature, 0.2)")

            model.modelDir = dirs["mtp"]!
            model.options = Options(drafter: .mtp, speculation: .block(3))
            await model.settled()
            let block3 = try Tsffi.speculationPlan(modelDir: dirs["mtp"]!,
                                                        options: Options(drafter: .mtp, speculation: .block(3)))
            #expect(model.plan == block3)
            #expect(model.plan?.speculation == SpeculationPlan(block: 3, drafter: .mtp, reason: nil))

            model.modelDir = nil
            await model.settled()
            #expect(model.plan == nil && model.choices == nil && model.error == nil)
        }
    }

    @MainActor
    @Test func aSupersededAnswerIsNeverPublished() async throws {
        // The first change's answer is held back until a newer change has
        // been answered, then let through: it must be dropped.
        let gate = Gate()
        let published = Recorder()
        let model = SpeculationSettings(modelDir: nil, options: Options()) { request in
            if request.options.typed?.speculation == .block(3) {
                await gate.wait()
            }
            return .success(fakeTable(request))
        }
        model.modelDir = "/install"
        model.options = Options(speculation: .block(3))      // held at the gate
        #expect(model.isUpdating)
        model.options = Options(speculation: .block(5))      // answered at once
        await model.settled()
        published.note(model)
        #expect(model.plan?.speculation.block == 5)
        #expect(model.answered?.options.typed?.speculation == .block(5))

        await gate.open()
        // The held answer comes back (three changes, three answers), and
        // is dropped.
        while model.answersReturned < 3 {
            await Task.yield()
        }
        published.note(model)
        #expect(model.plan?.speculation.block == 5)
        #expect(model.answered?.options.typed?.speculation == .block(5))
        #expect(published.blocks == [5, 5])
        #expect(!model.isUpdating)
    }

    @MainActor
    @Test func twoRapidUpdatesEndOnTheLastOnesAnswer() async {
        // The first update's answer is held until the second's is published,
        // then let through: it must be dropped, whichever way each update
        // gave its options.
        let gate = Gate()
        let model = SpeculationSettings { request in
            if request.modelDir == "/first" {
                await gate.wait()
            }
            return .success(fakeTable(request))
        }
        model.update(modelDir: "/first", optionsJSON: #"{"speculation": 3}"#)
        model.update(modelDir: "/second", options: Options(speculation: .block(5)))
        #expect(model.isUpdating)
        await model.settled()
        #expect(model.plan?.speculation.block == 5)
        #expect(model.answered == SpeculationSettings.Request(modelDir: "/second", options: Options(speculation: .block(5))))

        await gate.open()
        while model.answersReturned < 2 {
            await Task.yield()
        }
        #expect(model.plan?.speculation.block == 5)
        #expect(model.answered?.modelDir == "/second")
        #expect(!model.isUpdating)
    }

    @MainActor
    @Test func racingChangesEndOnTheLastOnesAnswer() async throws {
        try await withInstallsAsync(["dflash": "dflash=True", "mtp": "mtp=True", "both": "mtp=True, dflash=True"]) { dirs in
            let model = SpeculationSettings()
            let names = ["dflash", "mtp", "both"]
            var last = SpeculationSettings.Request(modelDir: nil, options: Options())
            for i in 0..<40 {
                model.modelDir = dirs[names[i % 3]]!
                model.options = Options(drafter: Self.drafters[i % 3], speculation: Self.speculations[i % 17],
                                        temperature: i % 4 == 0 ? 0.7 : nil)
                last = model.request
                if i % 7 == 0 {
                    await Task.yield()  // let some answers land mid-stream
                }
            }
            await model.settled()
            #expect(model.answered == last)
            let direct = Outcome { try Tsffi.speculationChoices(modelDir: last.modelDir!, options: last.options.typed!) }
            #expect(Outcome { () throws(TsffiError) in
                if let choices = model.choices { return choices }
                throw model.error!
            } == direct)
            #expect(model.plan == (try? Tsffi.speculationPlan(modelDir: last.modelDir!, options: last.options.typed!)))
        }
    }

    @MainActor
    @Test func theMainActorRunsWhileAnAnswerIsComputed() async throws {
        // The computation cannot finish until the main actor opens the gate:
        // were it computed on the main actor, or the setter waited for it,
        // the gate would never open.
        let gate = Gate()
        let model = SpeculationSettings(modelDir: nil, options: Options()) { request in
            await gate.wait()
            return .success(fakeTable(request))
        }
        model.modelDir = "/install"
        #expect(model.isUpdating && model.plan == nil)
        await gate.open()
        await model.settled()
        #expect(model.plan?.speculation.block == 2)
        #expect(!model.isUpdating)
    }
}

/// A table with one selected item whose plan speculates at the request's
/// block (2 for auto), so answers to different requests differ. JSON options
/// are read for their `speculation` (an integer, or a spelling) only.
func fakeTable(_ request: SpeculationSettings.Request) -> SpeculationChoices {
    var options = request.options.typed ?? Options()
    if case .json(let text) = request.options,
       let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] {
        if let n = object["speculation"] as? Int {
            options.speculation = .block(n)
        } else if let spelling = object["speculation"] as? String, let value = Speculation(spelling) {
            options.speculation = value
        }
    }
    let block: Int
    if case .block(let n) = options.speculation { block = n } else { block = 2 }
    let plan = PlanResult(drafter: DrafterChoice(drafter: .mtp, installHasMtpHead: true, installHasDflash: false, note: nil),
                          draftPolicies: DraftPolicies(mtp: .fixed(block), dflash: .off),
                          speculation: SpeculationPlan(block: block, drafter: .mtp, reason: nil),
                          turn: Turn(temperature: options.temperature ?? 0.2,
                                     speculates: options.temperature == 0, reason: nil))
    let item = SpeculationChoice(speculation: options.speculation, speculativeDrafter: options.drafter,
                                 status: .ok, plan: plan, error: nil, selected: true)
    return SpeculationChoices(modelDir: request.modelDir ?? "", install: .init(installHasMtpHead: true, installHasDflash: false),
                              choices: [item])
}

/// Opens once; every waiter before and after goes through.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        waiters.forEach { $0.resume() }
        waiters.removeAll()
    }
}

/// The blocks of the plans a model showed, in order.
@MainActor final class Recorder {
    private(set) var blocks: [Int?] = []
    func note(_ model: SpeculationSettings) { blocks.append(model.plan?.speculation.block) }
}

/// `Outcome` of an async call, awaited from the main actor.
@MainActor
func AsyncOutcome<T: Hashable & Sendable>(_ body: () async throws(TsffiError) -> T) async -> Outcome<T> {
    do {
        return .ok(try await body())
    } catch {
        return .failed(error)
    }
}

/// Fixtures.withInstalls for an async body.
@MainActor
func withInstallsAsync(_ shapes: [String: String], _ body: ([String: String]) async throws -> Void) async throws {
    var kept: [String: String] = [:]
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("turbospark-swift-\(UUID().uuidString)")
    var lines = ["from turbospark_ffi.install_writer import write_install"]
    for (name, kwargs) in shapes.sorted(by: { $0.key < $1.key }) {
        let dir = root.appendingPathComponent(name).path
        kept[name] = dir
        lines.append("write_install('\(dir)'\(kwargs.isEmpty ? "" : ", " + kwargs))")
    }
    try Fixtures.runPython(lines.joined(separator: "\n"))
    defer { try? FileManager.default.removeItem(at: root) }
    try await body(kept)
}
