import Foundation
import Observation

/// The model behind a speculation settings pane: give it the install and the
/// options; read ``plan``, ``choices`` and ``error``.
///
/// Two ways to drive it:
///
/// - **Following the host's own settings** (the app keeps its pickers in its
///   own model and persists them): call
///   `update(modelDir:options:)` with the install and the options exactly as
///   the app holds them -- any `Encodable` (its options struct, whose JSON is
///   what it gives the engine's open) -- or `update(modelDir:optionsJSON:)`
///   with the JSON text or bytes, or `update(modelDir:optionsObject:)` with a
///   JSON object. One call is one computation. Keys
///   the engine's open does not read are ignored (``PlanResult/ignoredKeys``
///   lists them, ``PlanResult/warnings`` hints at likely typos) and values it
///   refuses come back as ``error`` with the open's status and message.
/// - **Bound by a pane**: set ``modelDir`` and ``options`` (typed); each set
///   is one computation.
///
/// Every change recomputes off the caller's actor (through
/// ``Tsffi/Background``, one `tsffi_speculation_choices` call: the plan is the
/// table's selected item, so the two can never disagree) and publishes on the
/// main actor. A result is published only if no newer change was made after
/// the one it answers: changes that race never show a superseded answer, and
/// the answer shown is always for ``answered``.
///
/// After the host opens the session with the same install and options, it
/// hands the model what the engine reported (``reconcile(engine:)``):
/// ``engineOutcome`` is then the engine's own outcome to show, and
/// ``disagreement`` the reconcile result when the preview disagreed with it
/// (for a diagnostics log or a bug report). Both are for ``reconciled`` and
/// are cleared when the inputs change.
@MainActor
@Observable
public final class SpeculationSettings {
    /// The options of one request, as the host gave them.
    public enum OptionsSource: Sendable, Hashable {
        /// This package's typed options (sent as ``Options/json()``).
        case typed(Options)
        /// A JSON object's text, sent as it is: the host's own keys and
        /// values, in the engine's grammar (docs/ENGINE.md section 5).
        case json(String)

        /// The typed options, when they were given typed.
        public var typed: Options? {
            if case .typed(let options) = self {
                return options
            }
            return nil
        }

        /// The JSON text the library is sent.
        public func json() throws(TsffiError) -> String {
            switch self {
            case .typed(let options): return try options.json()
            case .json(let text): return text
            }
        }
    }

    /// The inputs one answer is for.
    public struct Request: Sendable, Hashable {
        public var modelDir: String?
        public var options: OptionsSource

        public init(modelDir: String?, options: OptionsSource) {
            self.modelDir = modelDir
            self.options = options
        }

        public init(modelDir: String?, options: Options) {
            self.init(modelDir: modelDir, options: .typed(options))
        }

        public init(modelDir: String?, optionsJSON: String) {
            self.init(modelDir: modelDir, options: .json(optionsJSON))
        }
    }

    /// What one computation found: the table, or the error the call threw.
    public typealias Answer = Result<SpeculationChoices, TsffiError>

    #if compiler(>=6.2)
    /// How a request is answered. `@concurrent`: it never runs on the main
    /// actor, whatever the module that writes the closure enables.
    public typealias Compute = @concurrent @Sendable (Request) async -> Answer
    #else
    /// How a request is answered. A nonisolated `async` function type: it
    /// runs on the global concurrent executor, never on the main actor.
    public typealias Compute = @Sendable (Request) async -> Answer
    #endif

    /// The inputs: set through ``update(_:)`` and the other setters, each
    /// change one computation.
    public private(set) var request: Request

    /// The install directory (nil: none chosen; every answer is nil).
    /// Setting it keeps the options and is one computation.
    public var modelDir: String? {
        get { request.modelDir }
        set { update(Request(modelDir: newValue, options: request.options)) }
    }

    /// The typed options the host gives the engine's open; setting them keeps
    /// the install and is one computation. While the options in effect are
    /// the host's JSON (``request`` `.options` is `.json`), this reads the
    /// defaults: the typed view is only of options given typed.
    public var options: Options {
        get { request.options.typed ?? Options() }
        set { update(Request(modelDir: request.modelDir, options: .typed(newValue))) }
    }

    /// The plan for the options: nil while there is no answer, and when the
    /// selected item is refused or the call failed (then ``error`` says why).
    public private(set) var plan: PlanResult?
    /// What a turn the host sends does on the session (``PlanResult/turn``):
    /// nil while there is no plan.
    public var turn: Turn? { plan?.turn }
    /// The session as the engine's app shows it after open, `"mtp x2, greedy
    /// only"`; nil while there is no plan and when the session does not draft.
    public var sessionSummary: String? { plan?.sessionSummary }
    /// Whether the host's turns will speculate: `.speculates`, `.sequential`
    /// with the reason to show (the session drafts, the turn will not), or
    /// `.sessionOff` (the session does not draft: ``PlanResult/speculation``'s
    /// reason says why); nil while there is no plan.
    public var turnOutcome: TurnOutcome? {
        guard let plan else { return nil }
        if plan.turn.speculates {
            return .speculates
        }
        if let reason = plan.turn.reason {
            return .sequential(reason: reason)
        }
        return .sessionOff
    }

    /// What a turn the host sends does, for the pane's status line.
    public enum TurnOutcome: Sendable, Hashable {
        /// The session drafts and the turn speculates (temperature 0, no
        /// rate control).
        case speculates
        /// The session drafts but the turn decodes sequentially, silently in
        /// the engine: `reason` says why and what would change it.
        case sequential(reason: String)
        /// The session does not draft, so no turn speculates.
        case sessionOff
    }

    /// Every item of both pickers, for greying out refused ones; nil while
    /// there is no answer and when the call failed.
    public private(set) var choices: SpeculationChoices?
    /// The refusal of the selected item (status ``TsffiStatus/refused``),
    /// why the call failed (bad options, a bad directory), or why the options
    /// given could not be made into JSON; nil otherwise.
    public private(set) var error: TsffiError?
    /// The inputs the published ``plan``, ``choices`` and ``error`` answer
    /// (nil before the first answer, and after options that could not be
    /// made into JSON).
    public private(set) var answered: Request?
    /// True while the inputs have changed since the last published answer.
    public private(set) var isUpdating = false
    /// The preview held against what the engine's open reported for
    /// ``reconciled`` (nil before ``reconcile(engine:)``, and after the inputs
    /// change).
    public private(set) var reconciliation: Reconciliation?
    /// The inputs ``reconciliation`` is for.
    public private(set) var reconciled: Request?

    /// What the engine's open decided (or that it failed), as it reported it:
    /// the outcome to show after the open. Nil before ``reconcile(engine:)``.
    public var engineOutcome: OpenOutcome? { reconciliation?.engine }

    /// The reconcile result when the preview disagreed with the engine's
    /// open: what each side said and the fields that differ. Nil when they
    /// agree, and before ``reconcile(engine:)``.
    public var disagreement: Reconciliation? {
        guard let reconciliation, !reconciliation.agrees else {
            return nil
        }
        return reconciliation
    }

    /// Answers that came back, published or dropped as superseded (tests
    /// wait on it to know a held-back answer has come back).
    @ObservationIgnored private(set) var answersReturned = 0
    @ObservationIgnored private var generation: UInt64 = 0
    @ObservationIgnored private var latest: Task<Void, Never>?
    @ObservationIgnored private let compute: Compute

    /// A model computing through the library.
    public convenience init(modelDir: String? = nil, options: Options = .default) {
        self.init(modelDir: modelDir, options: options, compute: SpeculationSettings.computeWithLibrary)
    }

    /// A model with its own computation: previews, tests, or the library's
    /// own (``computeWithLibrary(_:)``) wrapped. `compute` is called once per
    /// change with the new inputs (never with a nil ``Request/modelDir``:
    /// that answer is nil without a call), off the main actor.
    public init(modelDir: String? = nil, options: Options = .default, compute: @escaping Compute) {
        self.request = Request(modelDir: modelDir, options: options)
        self.compute = compute
        start(request)
    }

    /// The library's answer for `request`: `tsffi_speculation_choices` for
    /// its install and options, off the caller's actor.
    #if compiler(>=6.2)
    @concurrent
    #endif
    public nonisolated static func computeWithLibrary(_ request: Request) async -> Answer {
        guard let dir = request.modelDir else {
            return .failure(TsffiError(status: .invalidArgument, message: "no model directory",
                                       function: "SpeculationSettings"))
        }
        do throws(TsffiError) {
            switch request.options {
            case .typed(let options):
                return .success(try await Tsffi.Background.speculationChoices(modelDir: dir, options: options))
            case .json(let text):
                return .success(try await Tsffi.Background.speculationChoices(modelDir: dir, optionsJSON: text))
            }
        } catch {
            return .failure(error)
        }
    }

    // MARK: following the host

    /// The install and the options together: one computation (none when they
    /// are what the model already answers or is computing).
    public func update(_ new: Request) {
        if new == request && (isUpdating || answered == request) {
            return
        }
        start(new)
    }

    /// The install and this package's typed options together: one computation.
    public func update(modelDir: String?, options: Options) {
        update(Request(modelDir: modelDir, options: options))
    }

    /// The install and the host's own options together: one computation.
    /// `options` is encoded with `JSONEncoder` (a non-finite number as the
    /// string "nan", "inf" or "-inf", which the library refuses naming it, as
    /// ``Options/json()`` does) and sent as that JSON text: give the value
    /// whose JSON the app gives the engine's open. JSON text or bytes go to
    /// `update(modelDir:optionsJSON:)` instead (a `String` or
    /// `Data` passed here would be encoded as a JSON string).
    public func update(modelDir: String?, options: some Encodable) {
        if let typed = options as? Options {
            update(modelDir: modelDir, options: typed)
            return
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let data: Data
        do {
            data = try encoder.encode(options)
        } catch {
            fail(TsffiError(status: .invalidArgument,
                            message: "options: JSONEncoder could not encode the \(type(of: options)) "
                                + "given (\(error)); accepts a value that encodes as a JSON object",
                            function: "SpeculationSettings.update(modelDir:options:)"))
            return
        }
        update(modelDir: modelDir, optionsJSON: data)
    }

    /// The install and the options as JSON text (the object the app gives
    /// the engine's open) together: one computation.
    public func update(modelDir: String?, optionsJSON: String) {
        update(Request(modelDir: modelDir, optionsJSON: optionsJSON))
    }

    /// The install and the options as UTF-8 JSON bytes (as the app persists
    /// them) together: one computation.
    public func update(modelDir: String?, optionsJSON: Data) {
        guard let text = String(data: optionsJSON, encoding: .utf8) else {
            fail(TsffiError(status: .invalidArgument,
                            message: "options: the \(optionsJSON.count) JSON bytes given are not UTF-8; "
                                + "accepts UTF-8 text",
                            function: "SpeculationSettings.update(modelDir:optionsJSON:)"))
            return
        }
        update(modelDir: modelDir, optionsJSON: text)
    }

    /// The install and the options as a JSON object (what `JSONSerialization`
    /// reads and writes) together: one computation.
    public func update(modelDir: String?, optionsObject: [String: Any]) {
        // JSONSerialization raises (an Objective-C exception on Apple
        // platforms, which no Swift catch stops) for a value it cannot
        // write: checked first.
        guard JSONSerialization.isValidJSONObject(optionsObject),
              let data = try? JSONSerialization.data(withJSONObject: optionsObject, options: [.sortedKeys])
        else {
            fail(TsffiError(status: .invalidArgument,
                            message: "options: the object given holds a value JSONSerialization cannot "
                                + "write; accepts strings, numbers, booleans, NSNull, arrays and "
                                + "dictionaries",
                            function: "SpeculationSettings.update(modelDir:optionsObject:)"))
            return
        }
        update(modelDir: modelDir, optionsJSON: data)
    }

    /// Returns once the answer for the current inputs is published (at once
    /// when it is).
    public func settled() async {
        while let task = latest {
            await task.value
            if task == latest {
                return
            }
        }
    }

    // MARK: after the open

    /// What the engine reported after the host opened the session with
    /// ``request``'s install and options (the session's info, or the failed
    /// open's status and message), held against the preview off the main
    /// actor (`tsffi_reconcile`). The result is published as
    /// ``reconciliation`` when the inputs are still the same, and a
    /// disagreement makes the library's later plans of the same install and
    /// options answer in the engine's words. Throws what the call throws (a
    /// malformed report is ``TsffiStatus/invalidArgument``).
    @discardableResult
    public func reconcile(engine: EngineReport) async throws(TsffiError) -> Reconciliation {
        let asked = request
        guard let dir = asked.modelDir else {
            throw TsffiError(status: .invalidArgument,
                             message: "no model directory: reconcile after opening an install",
                             function: "SpeculationSettings.reconcile(engine:)")
        }
        let optionsJSON = try asked.options.json()
        let result = try await Tsffi.Background.reconcile(modelDir: dir, optionsJSON: optionsJSON,
                                                          engine: engine)
        if request == asked {
            reconciliation = result
            reconciled = asked
        }
        return result
    }

    // MARK: the computation

    private func start(_ new: Request) {
        request = new
        if reconciled != new {
            reconciliation = nil
            reconciled = nil
        }
        generation &+= 1
        let mine = generation
        guard new.modelDir != nil else {
            latest = nil
            publish(new, nil)
            return
        }
        isUpdating = true
        let compute = self.compute
        latest = Task { [weak self] in
            let answer = await compute(new)
            // Back on the main actor. A newer change owns the model now:
            // this answer is superseded and never shown.
            guard let self else { return }
            self.answersReturned += 1
            guard self.generation == mine else { return }
            self.publish(new, answer)
        }
    }

    /// Options that could not be made into JSON: shown as the error at once,
    /// nothing computed, the inputs left as they were; an answer still in
    /// flight is superseded.
    private func fail(_ failure: TsffiError) {
        generation &+= 1
        latest = nil
        answered = nil
        isUpdating = false
        plan = nil
        choices = nil
        error = failure
    }

    private func publish(_ request: Request, _ answer: Answer?) {
        answered = request
        isUpdating = false
        switch answer {
        case nil:
            plan = nil
            choices = nil
            error = nil
        case .success(let table)?:
            choices = table
            switch table.selected?.result {
            case .success(let selected)?:
                plan = selected
                error = nil
            case .failure(let refusal)?:
                plan = nil
                error = refusal
            case nil:
                plan = nil
                error = TsffiError(status: .internal,
                                   message: "the table has no selected item",
                                   function: "tsffi_speculation_choices")
            }
        case .failure(let failure)?:
            plan = nil
            choices = nil
            error = failure
        }
    }
}
