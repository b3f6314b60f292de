import Tsffi
import Foundation

/// The C ABI of libtsffi, called from Swift.
///
/// Every function here is synchronous and may be called from any thread or
/// task, concurrently; ``Tsffi/Background`` has each one as `async`,
/// running off the caller's actor (a first call starts the embedded runtime,
/// ~15 ms; a first plan of a large install reads its index: never on the
/// main actor). Each one makes ONE C call and, on failure, reads
/// `tsffi_last_error` on the same thread before returning (the message is per
/// thread, and a synchronous function has no suspension point at which a task
/// could move to another thread), then throws it as a ``TsffiError``.
/// Every string the library returns is released with `tsffi_string_free`.
///
/// The typed functions take ``Options`` and decode the result; the `...JSON`
/// functions take and return the JSON text as it crosses the C boundary, for
/// a host that already holds its open-options object (keys the engine's open
/// does not read are ignored and listed back in ``PlanResult/ignoredKeys``,
/// with hints in ``PlanResult/warnings``).
public enum Tsffi {
    /// `TSFFI_ABI_VERSION` of the header this package was compiled against.
    public static let headerABIVersion: UInt32 = TSFFI_ABI_VERSION

    /// `tsffi_abi_version()`: the ABI of the library that is loaded. Compare
    /// with ``headerABIVersion``. Never starts the embedded runtime.
    public static var abiVersion: UInt32 { tsffi_abi_version() }

    /// The loaded library's ABI against the header's, checked once: the
    /// statuses and option rules this package reads are its header's (ABI 3
    /// moved a block outside 1...15 from status 1 to 2, the preview's inputs
    /// into the `tsffi` object), so a library of another ABI would answer in
    /// terms this package misreads. Every call throws this instead.
    private static let loadedABIMismatch = abiMismatch(loaded: tsffi_abi_version(),
                                                       header: TSFFI_ABI_VERSION)

    /// The error for a library of ABI `loaded` under a header of ABI
    /// `header`, nil when they agree.
    static func abiMismatch(loaded: UInt32, header: UInt32) -> TsffiError? {
        guard loaded != header else {
            return nil
        }
        return TsffiError(status: .internal,
                          message: "the loaded libtsffi has ABI \(loaded), but SpeculationPreview was "
                              + "built against tsffi.h ABI \(header): its statuses and option rules "
                              + "differ (docs/CHANGELOG.md); load the library this package was built with",
                          function: "tsffi_abi_version")
    }

    // MARK: typed

    /// The whole decision for the install in `modelDir` (`tsffi_speculation_plan`):
    /// the drafter, the draft policies, and whether speculation will run.
    /// `modelDir` is a directory or an installed alias, resolved as the
    /// engine's open resolves it (``PlanResult/modelDir`` says which directory
    /// was read).
    /// Throws ``TsffiError`` with the engine's open's status and message for
    /// options it refuses (``TsffiStatus/json``, ``TsffiStatus/refused``),
    /// and ``TsffiStatus/refused`` for a named block that cannot be served;
    /// its message is the one to show.
    public static func speculationPlan(modelDir: String, options: Options = .default)
        throws(TsffiError) -> PlanResult
    {
        try decode(PlanResult.self, speculationPlanJSON(modelDir: modelDir, optionsJSON: options.json()),
                   from: "tsffi_speculation_plan")
    }

    /// ``speculationPlan(modelDir:options:)`` with the options as JSON text
    /// (nil = all defaults).
    public static func speculationPlan(modelDir: String, optionsJSON: String?)
        throws(TsffiError) -> PlanResult
    {
        try decode(PlanResult.self, speculationPlanJSON(modelDir: modelDir, optionsJSON: optionsJSON),
                   from: "tsffi_speculation_plan")
    }

    /// What every item of the speculation and drafter pickers would do for the
    /// install in `modelDir` (`tsffi_speculation_choices`): 51 items, each
    /// the plan ``speculationPlan(modelDir:options:)`` returns for `options`
    /// with that item's speculation and drafter, or its refusal. The item
    /// matching `options` is ``SpeculationChoice/selected``. A refused item
    /// is not an error; options the plan call would refuse (a block outside
    /// 1...15 among them) throw what it throws.
    public static func speculationChoices(modelDir: String, options: Options = .default)
        throws(TsffiError) -> SpeculationChoices
    {
        try decode(SpeculationChoices.self,
                   speculationChoicesJSON(modelDir: modelDir, optionsJSON: options.json()),
                   from: "tsffi_speculation_choices")
    }

    /// ``speculationChoices(modelDir:options:)`` with the options as JSON text
    /// (nil = all defaults).
    public static func speculationChoices(modelDir: String, optionsJSON: String?)
        throws(TsffiError) -> SpeculationChoices
    {
        try decode(SpeculationChoices.self,
                   speculationChoicesJSON(modelDir: modelDir, optionsJSON: optionsJSON),
                   from: "tsffi_speculation_choices")
    }

    /// Which drafter to open for the install in `modelDir` (`tsffi_resolve_drafter`).
    /// Uses `options.drafter`. An unreadable index is not an error: its flags
    /// come back nil.
    public static func resolveDrafter(modelDir: String, options: Options = .default)
        throws(TsffiError) -> DrafterChoice
    {
        try decode(DrafterChoice.self, resolveDrafterJSON(modelDir: modelDir, optionsJSON: options.json()),
                   from: "tsffi_resolve_drafter")
    }

    /// The draft policies to open a runner with (`tsffi_draft_policies`), for a
    /// choice ``resolveDrafter(modelDir:options:)`` returned. Uses
    /// `options.speculation`.
    public static func draftPolicies(choice: DrafterChoice, options: Options = .default)
        throws(TsffiError) -> DraftPolicies
    {
        let choiceJSON = try encode(choice, what: "the drafter choice")
        return try decode(DraftPolicies.self,
                          draftPoliciesJSON(choiceJSON: choiceJSON, optionsJSON: options.json()),
                          from: "tsffi_draft_policies")
    }

    /// Whether speculation will run, without an install (`tsffi_resolve_speculation`).
    /// `options.drafter` is the RESOLVED drafter (`.auto` takes the MTP arms);
    /// `options.engineBlocker` (sent as `tsffi.engineBlocker`) the engine's
    /// reason. Throws status ``TsffiStatus/refused`` for what the engine's
    /// open refuses and for a named block that cannot be served.
    public static func resolveSpeculation(options: Options = .default)
        throws(TsffiError) -> SpeculationPlan
    {
        try decode(SpeculationPlan.self, resolveSpeculationJSON(optionsJSON: options.json()),
                   from: "tsffi_resolve_speculation")
    }

    /// What the install's files say (`tsffi_install_info_json`). An unreadable
    /// index is a result (`indexReadable == false`), not an error.
    public static func installInfo(modelDir: String) throws(TsffiError) -> InstallInfo {
        try decode(InstallInfo.self, installInfoJSON(modelDir: modelDir), from: "tsffi_install_info_json")
    }

    /// The store's aliases with their drafter badges (`tsffi_store_json`):
    /// what a model picker offers. No store is a result (`aliases` empty,
    /// `reason` saying why), not an error.
    public static func store() throws(TsffiError) -> Store {
        try decode(Store.self, storeJSON(), from: "tsffi_store_json")
    }

    /// The preview held against what the engine's real open reported for
    /// the same install and options (`tsffi_reconcile`): call it right after
    /// `ts_session_open` with the very `modelDir` and options JSON the open
    /// was given, and the session's info (or the failed open's status and
    /// message). After a disagreement, later plans of the same install and
    /// options text answer the engine's outcome (``PlanResult/source`` is
    /// ``PlanSource/engine``) for the life of the process; an agreement
    /// forgets it. Throws ``TsffiStatus/invalidArgument`` for a malformed
    /// report, naming what was wrong.
    public static func reconcile(modelDir: String, optionsJSON: String?, engine: EngineReport)
        throws(TsffiError) -> Reconciliation
    {
        try decode(Reconciliation.self,
                   reconcileJSON(modelDir: modelDir, optionsJSON: optionsJSON, engineJSON: engine.json()),
                   from: "tsffi_reconcile")
    }

    /// ``reconcile(modelDir:optionsJSON:engine:)`` with this package's typed
    /// options (sent as ``Options/json()``, the text the open must have been
    /// given for the memory to apply to its plans).
    public static func reconcile(modelDir: String, options: Options = .default, engine: EngineReport)
        throws(TsffiError) -> Reconciliation
    {
        try reconcile(modelDir: modelDir, optionsJSON: try options.json(), engine: engine)
    }

    /// The library's build information (`tsffi_build_info_json`).
    public static func buildInfo() throws(TsffiError) -> BuildInfo {
        try decode(BuildInfo.self, buildInfoJSON(), from: "tsffi_build_info_json")
    }

    // MARK: raw JSON

    /// `tsffi_speculation_plan`, JSON in and out.
    public static func speculationPlanJSON(modelDir: String, optionsJSON: String?)
        throws(TsffiError) -> String
    {
        try callJSON("tsffi_speculation_plan", (modelDir, "model_dir"), (optionsJSON, "options_json")) {
            tsffi_speculation_plan($0[0]!, $0[1], $1)
        }
    }

    /// `tsffi_speculation_choices`, JSON in and out.
    public static func speculationChoicesJSON(modelDir: String, optionsJSON: String?)
        throws(TsffiError) -> String
    {
        try callJSON("tsffi_speculation_choices", (modelDir, "model_dir"), (optionsJSON, "options_json")) {
            tsffi_speculation_choices($0[0]!, $0[1], $1)
        }
    }

    /// `tsffi_resolve_drafter`, JSON in and out.
    public static func resolveDrafterJSON(modelDir: String, optionsJSON: String?)
        throws(TsffiError) -> String
    {
        try callJSON("tsffi_resolve_drafter", (modelDir, "model_dir"), (optionsJSON, "options_json")) {
            tsffi_resolve_drafter($0[0]!, $0[1], $1)
        }
    }

    /// `tsffi_draft_policies`, JSON in and out. `choiceJSON` is exactly what
    /// ``resolveDrafterJSON(modelDir:optionsJSON:)`` returned.
    public static func draftPoliciesJSON(choiceJSON: String, optionsJSON: String?)
        throws(TsffiError) -> String
    {
        try callJSON("tsffi_draft_policies", (choiceJSON, "choice_json"), (optionsJSON, "options_json")) {
            tsffi_draft_policies($0[0]!, $0[1], $1)
        }
    }

    /// `tsffi_resolve_speculation`, JSON in and out.
    public static func resolveSpeculationJSON(optionsJSON: String?) throws(TsffiError) -> String {
        try callJSON("tsffi_resolve_speculation", (optionsJSON, "options_json")) {
            tsffi_resolve_speculation($0[0], $1)
        }
    }

    /// `tsffi_reconcile`, JSON in and out.
    public static func reconcileJSON(modelDir: String, optionsJSON: String?, engineJSON: String)
        throws(TsffiError) -> String
    {
        try callJSON("tsffi_reconcile", (modelDir, "model_dir"), (optionsJSON, "options_json"),
                     (engineJSON, "engine_json")) {
            tsffi_reconcile($0[0]!, $0[1], $0[2]!, $1)
        }
    }

    /// `tsffi_install_info_json`: the JSON text.
    public static func installInfoJSON(modelDir: String) throws(TsffiError) -> String {
        try callJSON("tsffi_install_info_json", (modelDir, "model_dir")) {
            tsffi_install_info_json($0[0]!, $1)
        }
    }

    /// `tsffi_store_json`: the JSON text.
    public static func storeJSON() throws(TsffiError) -> String {
        try callJSON("tsffi_store_json") { tsffi_store_json($1) }
    }

    /// `tsffi_build_info_json`: the JSON text.
    public static func buildInfoJSON() throws(TsffiError) -> String {
        try callJSON("tsffi_build_info_json") { tsffi_build_info_json($1) }
    }

    // MARK: the boundary

    /// The C functions' out-parameter: `char **out_json`.
    private typealias Out = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>

    /// One C call whose last parameter is the `char **` out-parameter: the
    /// result string, copied and released with `tsffi_string_free`, or the
    /// calling thread's last error thrown.
    ///
    /// `arguments` are the call's string arguments in the C order, each with
    /// the header's name of its parameter (which a NUL refusal names); nil is
    /// a NULL pointer. Every one is checked for a NUL, in order, before the
    /// call. `body` makes the C call with their C strings, in the same order
    /// (an argument given as a non-optional String is never NULL there), and
    /// the out-parameter.
    private static func callJSON(
        _ function: String,
        _ arguments: (text: String?, name: String)...,
        body: ([UnsafePointer<CChar>?], Out) -> Int32
    ) throws(TsffiError) -> String {
        if let mismatch = loadedABIMismatch {
            throw mismatch
        }
        for argument in arguments {
            try checkNoNUL(argument.text, argument.name, function)
        }
        var out: UnsafeMutablePointer<CChar>? = nil
        let status = withCStrings(arguments.map(\.text)[...]) { pointers in body(pointers, &out) }
        // Released on every path; the header says *out stays NULL on failure,
        // and tsffi_string_free(NULL) is a no-op.
        defer { tsffi_string_free(out) }
        guard status == TSFFI_OK else {
            // Same thread, nothing in between: this is the call's own message.
            throw TsffiError.last(status: status, function: function)
        }
        guard let out else {
            throw TsffiError(status: .internal,
                                  message: "\(function) returned TSFFI_OK but left its result NULL",
                                  function: function)
        }
        return String(cString: out)
    }

    /// `body` with a C string for each of `texts` (nil for nil), valid for
    /// the whole of `body`: each String.withCString scope is nested inside
    /// the previous one.
    private static func withCStrings<R>(
        _ texts: ArraySlice<String?>, _ pointers: [UnsafePointer<CChar>?] = [],
        _ body: ([UnsafePointer<CChar>?]) -> R
    ) -> R {
        guard let first = texts.first else {
            return body(pointers)
        }
        guard let text = first else {
            return withCStrings(texts.dropFirst(), pointers + [nil], body)
        }
        return text.withCString { withCStrings(texts.dropFirst(), pointers + [$0], body) }
    }

    /// A Swift String may hold NUL characters, which C would silently cut the
    /// text at (a model_dir "a\0b" would become "a"). Refused here instead,
    /// with the library's status for it.
    private static func checkNoNUL(_ text: String?, _ what: String, _ function: String)
        throws(TsffiError)
    {
        if let text, text.utf8.contains(0) {
            throw TsffiError(status: .invalidArgument,
                                  message: "\(what) contains a NUL character; accepts text without one "
                                      + "(C would cut it short there)",
                                  function: function)
        }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ json: String, from function: String)
        throws(TsffiError) -> T
    {
        do {
            return try JSONDecoder().decode(T.self, from: Data(json.utf8))
        } catch {
            throw TsffiError(status: .internal,
                                  message: "SpeculationPreview could not decode what \(function) returned as "
                                      + "\(T.self): \(error); the JSON was: \(json)",
                                  function: function)
        }
    }

    private static func encode<T: Encodable>(_ value: T, what: String) throws(TsffiError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        } catch {
            throw TsffiError(status: .internal,
                                  message: "SpeculationPreview could not encode \(what) as JSON: \(error)",
                                  function: "JSONEncoder")
        }
    }
}

/// What the engine reported after `ts_session_open`, as
/// ``Tsffi/reconcile(modelDir:optionsJSON:engine:)`` sends it.
public enum EngineReport: Sendable, Hashable {
    /// `ts_session_info_json`'s text, verbatim (only its "speculation" is read).
    case sessionInfo(String)
    /// The open failed: its status and `ts_last_error`'s text.
    case openFailed(status: Int32, message: String)

    /// The `engine_json` text the library is sent.
    public func json() -> String {
        switch self {
        case .sessionInfo(let text):
            return text
        case .openFailed(let status, let message):
            let quoted = String(decoding: (try? JSONEncoder().encode(message)) ?? Data("\"\"".utf8),
                                as: UTF8.self)
            return #"{"status": \#(status), "message": \#(quoted)}"#
        }
    }
}
