import CTurboSparkFFI
import Foundation

/// The C ABI of libturbospark_ffi, called from Swift.
///
/// Every function here is synchronous and may be called from any thread or
/// task, concurrently; ``TurboSpark/Background`` has each one as `async`,
/// running off the caller's actor (a first call starts the embedded runtime,
/// ~15 ms; a first plan of a large install reads its index: never on the
/// main actor). Each one makes ONE C call and, on failure, reads
/// `tsffi_last_error` on the same thread before returning (the message is per
/// thread, and a synchronous function has no suspension point at which a task
/// could move to another thread), then throws it as a ``TurboSparkError``.
/// Every string the library returns is released with `tsffi_string_free`.
///
/// The typed functions take ``Options`` and decode the result; the `...JSON`
/// functions take and return the JSON text as it crosses the C boundary, for
/// a host that already holds its open-options object (unused keys are
/// ignored and listed back in ``PlanResult/ignoredKeys``).
public enum TurboSpark {
    /// `TSFFI_ABI_VERSION` of the header this package was compiled against.
    public static let headerABIVersion: UInt32 = TSFFI_ABI_VERSION

    /// `tsffi_abi_version()`: the ABI of the library that is loaded. Compare
    /// with ``headerABIVersion``. Never starts the embedded runtime.
    public static var abiVersion: UInt32 { tsffi_abi_version() }

    // MARK: typed

    /// The whole decision for the install in `modelDir` (`tsffi_speculation_plan`):
    /// the drafter, the draft policies, and whether speculation will run.
    /// `modelDir` is a directory or an installed alias, resolved as the
    /// engine's open resolves it (``PlanResult/modelDir`` says which directory
    /// was read).
    /// Throws ``TurboSparkError`` with status ``TurboSparkError/refused`` for a
    /// named block that cannot be served; its message is the one to show.
    public static func speculationPlan(modelDir: String, options: Options = .default)
        throws(TurboSparkError) -> PlanResult
    {
        try decode(PlanResult.self, speculationPlanJSON(modelDir: modelDir, optionsJSON: options.json()),
                   from: "tsffi_speculation_plan")
    }

    /// ``speculationPlan(modelDir:options:)`` with the options as JSON text
    /// (nil = all defaults).
    public static func speculationPlan(modelDir: String, optionsJSON: String?)
        throws(TurboSparkError) -> PlanResult
    {
        try decode(PlanResult.self, speculationPlanJSON(modelDir: modelDir, optionsJSON: optionsJSON),
                   from: "tsffi_speculation_plan")
    }

    /// What every item of the speculation and drafter pickers would do for the
    /// install in `modelDir` (`tsffi_speculation_choices`): 51 items, each
    /// the plan ``speculationPlan(modelDir:options:)`` returns for `options`
    /// with that item's speculation and drafter, or its refusal. The item
    /// matching `options` is ``SpeculationChoice/selected``. A refused item
    /// is not an error; options the plan call would refuse as invalid (and a
    /// block outside 1...15) throw.
    public static func speculationChoices(modelDir: String, options: Options = .default)
        throws(TurboSparkError) -> SpeculationChoices
    {
        try decode(SpeculationChoices.self,
                   speculationChoicesJSON(modelDir: modelDir, optionsJSON: options.json()),
                   from: "tsffi_speculation_choices")
    }

    /// ``speculationChoices(modelDir:options:)`` with the options as JSON text
    /// (nil = all defaults).
    public static func speculationChoices(modelDir: String, optionsJSON: String?)
        throws(TurboSparkError) -> SpeculationChoices
    {
        try decode(SpeculationChoices.self,
                   speculationChoicesJSON(modelDir: modelDir, optionsJSON: optionsJSON),
                   from: "tsffi_speculation_choices")
    }

    /// Which drafter to open for the install in `modelDir` (`tsffi_resolve_drafter`).
    /// Uses `options.drafter`. An unreadable index is not an error: its flags
    /// come back nil.
    public static func resolveDrafter(modelDir: String, options: Options = .default)
        throws(TurboSparkError) -> DrafterChoice
    {
        try decode(DrafterChoice.self, resolveDrafterJSON(modelDir: modelDir, optionsJSON: options.json()),
                   from: "tsffi_resolve_drafter")
    }

    /// The draft policies to open a runner with (`tsffi_draft_policies`), for a
    /// choice ``resolveDrafter(modelDir:options:)`` returned. Uses
    /// `options.speculation`.
    public static func draftPolicies(choice: DrafterChoice, options: Options = .default)
        throws(TurboSparkError) -> DraftPolicies
    {
        let choiceJSON = try encode(choice, what: "the drafter choice")
        return try decode(DraftPolicies.self,
                          draftPoliciesJSON(choiceJSON: choiceJSON, optionsJSON: options.json()),
                          from: "tsffi_draft_policies")
    }

    /// Whether speculation will run, without an install (`tsffi_resolve_speculation`).
    /// `options.drafter` is the RESOLVED drafter (`.auto` takes the MTP arms);
    /// `options.engineBlocker` the engine's reason. Throws status
    /// ``TurboSparkError/refused`` for a named block that cannot be served.
    public static func resolveSpeculation(options: Options = .default)
        throws(TurboSparkError) -> SpeculationPlan
    {
        try decode(SpeculationPlan.self, resolveSpeculationJSON(optionsJSON: options.json()),
                   from: "tsffi_resolve_speculation")
    }

    /// What the install's files say (`tsffi_install_info_json`). An unreadable
    /// index is a result (`indexReadable == false`), not an error.
    public static func installInfo(modelDir: String) throws(TurboSparkError) -> InstallInfo {
        try decode(InstallInfo.self, installInfoJSON(modelDir: modelDir), from: "tsffi_install_info_json")
    }

    /// The library's build information (`tsffi_build_info_json`).
    public static func buildInfo() throws(TurboSparkError) -> BuildInfo {
        try decode(BuildInfo.self, buildInfoJSON(), from: "tsffi_build_info_json")
    }

    // MARK: raw JSON

    /// `tsffi_speculation_plan`, JSON in and out.
    public static func speculationPlanJSON(modelDir: String, optionsJSON: String?)
        throws(TurboSparkError) -> String
    {
        let function = "tsffi_speculation_plan"
        return try withCString(modelDir, "model_dir", function) { (dir) throws(TurboSparkError) in
            try withOptionalCString(optionsJSON, "options_json", function) { (opts) throws(TurboSparkError) in
                try call(function) { tsffi_speculation_plan(dir, opts, $0) }
            }
        }
    }

    /// `tsffi_speculation_choices`, JSON in and out.
    public static func speculationChoicesJSON(modelDir: String, optionsJSON: String?)
        throws(TurboSparkError) -> String
    {
        let function = "tsffi_speculation_choices"
        return try withCString(modelDir, "model_dir", function) { (dir) throws(TurboSparkError) in
            try withOptionalCString(optionsJSON, "options_json", function) { (opts) throws(TurboSparkError) in
                try call(function) { tsffi_speculation_choices(dir, opts, $0) }
            }
        }
    }

    /// `tsffi_resolve_drafter`, JSON in and out.
    public static func resolveDrafterJSON(modelDir: String, optionsJSON: String?)
        throws(TurboSparkError) -> String
    {
        let function = "tsffi_resolve_drafter"
        return try withCString(modelDir, "model_dir", function) { (dir) throws(TurboSparkError) in
            try withOptionalCString(optionsJSON, "options_json", function) { (opts) throws(TurboSparkError) in
                try call(function) { tsffi_resolve_drafter(dir, opts, $0) }
            }
        }
    }

    /// `tsffi_draft_policies`, JSON in and out. `choiceJSON` is exactly what
    /// ``resolveDrafterJSON(modelDir:optionsJSON:)`` returned.
    public static func draftPoliciesJSON(choiceJSON: String, optionsJSON: String?)
        throws(TurboSparkError) -> String
    {
        let function = "tsffi_draft_policies"
        return try withCString(choiceJSON, "choice_json", function) { (choice) throws(TurboSparkError) in
            try withOptionalCString(optionsJSON, "options_json", function) { (opts) throws(TurboSparkError) in
                try call(function) { tsffi_draft_policies(choice, opts, $0) }
            }
        }
    }

    /// `tsffi_resolve_speculation`, JSON in and out.
    public static func resolveSpeculationJSON(optionsJSON: String?) throws(TurboSparkError) -> String {
        let function = "tsffi_resolve_speculation"
        return try withOptionalCString(optionsJSON, "options_json", function) { (opts) throws(TurboSparkError) in
            try call(function) { tsffi_resolve_speculation(opts, $0) }
        }
    }

    /// `tsffi_install_info_json`: the JSON text.
    public static func installInfoJSON(modelDir: String) throws(TurboSparkError) -> String {
        let function = "tsffi_install_info_json"
        return try withCString(modelDir, "model_dir", function) { (dir) throws(TurboSparkError) in
            try call(function) { tsffi_install_info_json(dir, $0) }
        }
    }

    /// `tsffi_build_info_json`: the JSON text.
    public static func buildInfoJSON() throws(TurboSparkError) -> String {
        try call("tsffi_build_info_json") { tsffi_build_info_json($0) }
    }

    // MARK: the boundary

    /// One C call with a `char **` out-parameter: the result string, copied
    /// and released with `tsffi_string_free`, or the last error thrown.
    private static func call(
        _ function: String,
        _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32
    ) throws(TurboSparkError) -> String {
        var out: UnsafeMutablePointer<CChar>? = nil
        let status = body(&out)
        // Released on every path; the header says *out stays NULL on failure,
        // and tsffi_string_free(NULL) is a no-op.
        defer { tsffi_string_free(out) }
        guard status == TSFFI_OK else {
            // Same thread, nothing in between: this is the call's own message.
            throw TurboSparkError.last(status: status, function: function)
        }
        guard let out else {
            throw TurboSparkError(status: TurboSparkError.internal,
                                  message: "\(function) returned TSFFI_OK but left its result NULL",
                                  function: function)
        }
        return String(cString: out)
    }

    /// A Swift String may hold NUL characters, which C would silently cut the
    /// text at (a model_dir "a\0b" would become "a"). Refused here instead,
    /// with the library's status for it.
    private static func checkNoNUL(_ text: String, _ what: String, _ function: String)
        throws(TurboSparkError)
    {
        if text.utf8.contains(0) {
            throw TurboSparkError(status: TurboSparkError.invalidArgument,
                                  message: "\(what) contains a NUL character; accepts text without one "
                                      + "(C would cut it short there)",
                                  function: function)
        }
    }

    private static func withCString<R>(
        _ text: String, _ what: String, _ function: String,
        _ body: (UnsafePointer<CChar>) throws(TurboSparkError) -> R
    ) throws(TurboSparkError) -> R {
        try checkNoNUL(text, what, function)
        let result: Result<R, TurboSparkError> = text.withCString { pointer in
            do throws(TurboSparkError) { return .success(try body(pointer)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private static func withOptionalCString<R>(
        _ text: String?, _ what: String, _ function: String,
        _ body: (UnsafePointer<CChar>?) throws(TurboSparkError) -> R
    ) throws(TurboSparkError) -> R {
        guard let text else {
            return try body(nil)
        }
        return try withCString(text, what, function) { (pointer) throws(TurboSparkError) in try body(pointer) }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ json: String, from function: String)
        throws(TurboSparkError) -> T
    {
        do {
            return try JSONDecoder().decode(T.self, from: Data(json.utf8))
        } catch {
            throw TurboSparkError(status: TurboSparkError.internal,
                                  message: "TurboSparkFFI could not decode what \(function) returned as "
                                      + "\(T.self): \(error); the JSON was: \(json)",
                                  function: function)
        }
    }

    private static func encode<T: Encodable>(_ value: T, what: String) throws(TurboSparkError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
        } catch {
            throw TurboSparkError(status: TurboSparkError.internal,
                                  message: "TurboSparkFFI could not encode \(what) as JSON: \(error)",
                                  function: "JSONEncoder")
        }
    }
}
