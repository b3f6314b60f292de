import Observation

/// The model behind a speculation settings pane: set ``modelDir`` and
/// ``options``; read ``plan``, ``choices`` and ``error``.
///
/// Every change recomputes off the caller's actor (through
/// ``TurboSpark/Background``, one `tsffi_speculation_choices` call: the plan is
/// the table's selected item, so the two can never disagree) and publishes on
/// the main actor. A result is published only if no newer change was made
/// after the one it answers: changes that race never show a superseded answer,
/// and the answer shown is always for ``answered``.
@MainActor
@Observable
public final class SpeculationSettings {
    /// The inputs one answer is for.
    public struct Request: Sendable, Hashable {
        public var modelDir: String?
        public var options: Options

        public init(modelDir: String?, options: Options) {
            self.modelDir = modelDir
            self.options = options
        }
    }

    /// What one computation found: the table, or the error the call threw.
    public typealias Answer = Result<SpeculationChoices, TurboSparkError>

    /// The install directory (nil: none chosen; every answer is nil).
    public var modelDir: String? {
        didSet { if modelDir != oldValue { recompute() } }
    }

    /// The options the host gives the engine's open.
    public var options: Options {
        didSet { if options != oldValue { recompute() } }
    }

    /// The plan for ``options``: nil while there is no answer, and when the
    /// selected item is refused or the call failed (then ``error`` says why).
    public private(set) var plan: PlanResult?
    /// Every item of both pickers, for greying out refused ones; nil while
    /// there is no answer and when the call failed.
    public private(set) var choices: SpeculationChoices?
    /// The refusal of the selected item (status ``TurboSparkStatus/refused``),
    /// or why the call failed (bad options, a bad directory); nil otherwise.
    public private(set) var error: TurboSparkError?
    /// The inputs the published ``plan``, ``choices`` and ``error`` answer
    /// (nil before the first answer).
    public private(set) var answered: Request?
    /// True while the inputs have changed since the last published answer.
    public private(set) var isUpdating = false

    /// Answers that came back, published or dropped as superseded (tests
    /// wait on it to know a held-back answer has come back).
    @ObservationIgnored private(set) var answersReturned = 0
    @ObservationIgnored private var generation: UInt64 = 0
    @ObservationIgnored private var latest: Task<Void, Never>?
    @ObservationIgnored private let compute: @Sendable (Request) async -> Answer

    /// A model computing through the library.
    public convenience init(modelDir: String? = nil, options: Options = .default) {
        self.init(modelDir: modelDir, options: options) { request in
            guard let dir = request.modelDir else {
                return .failure(TurboSparkError(status: .invalidArgument,
                                                message: "no model directory", function: "SpeculationSettings"))
            }
            do throws(TurboSparkError) {
                return .success(try await TurboSpark.Background.speculationChoices(
                    modelDir: dir, options: request.options))
            } catch {
                return .failure(error)
            }
        }
    }

    /// A model with its own computation (tests: to make answers arrive in a
    /// chosen order). `compute` must not run on the main actor.
    init(modelDir: String?, options: Options,
         compute: @escaping @Sendable (Request) async -> Answer) {
        self.modelDir = modelDir
        self.options = options
        self.compute = compute
        recompute()
    }

    /// The current inputs.
    public var request: Request { Request(modelDir: modelDir, options: options) }

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

    private func recompute() {
        generation &+= 1
        let mine = generation
        let request = self.request
        guard request.modelDir != nil else {
            latest = nil
            publish(request, nil)
            return
        }
        isUpdating = true
        let compute = self.compute
        latest = Task { [weak self] in
            let answer = await compute(request)
            // Back on the main actor. A newer change owns the model now:
            // this answer is superseded and never shown.
            guard let self else { return }
            self.answersReturned += 1
            guard self.generation == mine else { return }
            self.publish(request, answer)
        }
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
                error = TurboSparkError(status: .internal,
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
