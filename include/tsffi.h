/*
 * tsffi.h -- the turbospark-runtime speculation policy, as a C ABI.
 *
 * Which speculative drafter an install carries, the draft policies to open it
 * with, whether the session will speculate -- and when it will not, the reason
 * or note to show the user, verbatim -- and whether a turn the host sends on
 * it will. The same decisions, in the same order, with the same messages as
 * the engine's open: turbospark-runtime 0.3.0's speculation policy, and the
 * parts of the engine around it at the revisions tsffi_build_info_json
 * reports ("engineRevisions"; docs/ENGINE.md lists each rule's source).
 *
 * This header is the contract: what is not declared here is not public. The
 * library's build reads this file for its declarations, so the two cannot
 * disagree.
 *
 * CONVENTIONS (those of the engine's own C ABI, which GUI hosts already speak)
 *
 *  - Functions are prefixed tsffi_, macros TSFFI_. Calls that can fail return an
 *    int32_t status code (TSFFI_OK or a TSFFI_ERR_* below).
 *  - OPTIONS. Every options_json is the very text the host gives the
 *    engine's ts_session_open, and is read exactly as that open reads it
 *    (docs/c-api.md, "Options", lists the rules): NULL or "" = all defaults;
 *    the text is decoded as the open's serde struct of 18 keys (unknown keys
 *    ignored at any depth and size, a known key twice or of the wrong JSON
 *    type refused, null = absent, a top-level array read positionally), and
 *    then every key is mapped in the open's order. The same text gets the
 *    open's status and the open's message byte for byte:
 *      not UTF-8                      TSFFI_ERR_INVALID_ARGUMENT
 *      a decoding failure             TSFFI_ERR_JSON, "options: " + serde's
 *                                     text (" at line L column C")
 *      a mapping failure              TSFFI_ERR_REFUSED, the engine's bare
 *                                     message (e.g. "speculation block must
 *                                     be in 1..=15, got 0")
 *    Keys the open does not read are ignored (listed back as "ignoredKeys";
 *    no result ever holds a lone surrogate); a near-miss of one of the 18 keys
 *    (or of "tsffi"),
 *    and a top-level "temperature" or "engineBlocker", also get a hint in
 *    "warnings" -- never a refusal, since the open accepts them.
 *    This library's own inputs, which the open never reads, are one object
 *    the engine ignores: "tsffi": {"engineBlocker": string | null,
 *    "temperature": number | null, "lowPowerMode": bool | null}, read
 *    strictly (an unknown key, a wrong type, a key twice:
 *    TSFFI_ERR_INVALID_ARGUMENT naming the key, what it got and what it
 *    accepts). engineBlocker: a non-empty string without NUL or lone
 *    surrogate (the engine's reason), null (it reported none), absent
 *    (preview the install's files). temperature: the TURN's temperature, a
 *    finite number >= 0; absent = the engine binding's default, 0.2 (the
 *    session is decided as the open decides it, greedy decoding assumed,
 *    whatever this says). lowPowerMode: the OS's Low Power Mode, from which
 *    an absent "powerProfile" resolves (absent = false). Checks run in this
 *    order, the open's answer first: UTF-8, decoding, mapping, the "tsffi"
 *    object, then the install (directory, manifest, index, drafter) and the
 *    policy.
 *  - LIMITS. The open has no size cap; this library refuses an options_json
 *    of more than 16 MiB (16,777,216 bytes) with TSFFI_ERR_INVALID_ARGUMENT
 *    before any of it is decoded (its own bound, far above any real options
 *    object), and a choice_json of more than 16 MiB the same way. Nesting
 *    inside ignored keys is skipped to any depth, as the open skips it; a
 *    known "any"-typed key nesting past serde's limit of 128 is the open's
 *    TSFFI_ERR_JSON "recursion limit exceeded"; a choice_json nesting more
 *    than 64 levels deep is TSFFI_ERR_JSON.
 *  - Every const char * argument is borrowed for the duration of the call and
 *    must be NUL-terminated UTF-8.
 *  - MODEL NAMES. Every model_dir is what the engine's open takes: the path of
 *    an install directory, or an installed alias, resolved at each call by
 *    the engine's rule (docs/c-api.md, "Model names"). Each result names the
 *    directory it read as "modelDir", an absolute path in UTF-8; a name that
 *    resolves to no such path is TSFFI_ERR_INVALID_ARGUMENT saying why: a
 *    relative name (".", too) once the working directory was removed, or a
 *    path holding bytes that are not UTF-8 (from the working directory,
 *    TURBOSPARK_HOME or HOME), shown escaped as \xNN in the message.
 *  - ENVIRONMENT. TURBOSPARK_HOME and HOME, which name the store, are copied
 *    once, at the library's first call (the first of any function but
 *    tsffi_abi_version, tsffi_last_error and tsffi_string_free), and the
 *    live environment is never read again: POSIX leaves getenv() racing
 *    another thread's setenv() undefined (a crash, seen), and no lock of the
 *    library's can stop a host's setenv(). Set them before the first call;
 *    a later setenv() is not seen. The first call also starts the embedded
 *    interpreter, whose start copies the whole environment as CPython does:
 *    do not setenv() while the first call runs; after it, at any time. A
 *    Python host (the library loaded into a running interpreter) is read
 *    through that interpreter's os.environ, at each call.
 *  - Results come back as NUL-terminated UTF-8 JSON through a char **
 *    out-parameter. *out is set to NULL on entry; on TSFFI_OK it points to a
 *    string the CALLER owns and must release with tsffi_string_free(); on any
 *    other status it stays NULL. Nothing returns a pointer into the
 *    library's own state.
 *  - The last error is per thread: every call that returns a status clears
 *    it on entry, and on failure sets it to a message that names what was
 *    wrong, what was received and what is accepted. Read it with
 *    tsffi_last_error().
 *
 * NAMESPACE: tsffi_ / TSFFI_ are this library's, and every symbol it exports
 * is declared below. The engine's own library, which a GUI holds in the same
 * process, owns ts_ / TS_ / Ts; the two headers compile in one translation
 * unit and the two libraries load in either order. The library's own calls
 * are bound inside it at link time, so a library loaded earlier that exports
 * the same names cannot take them over.
 *
 * THREADS: every function may be called from any thread, concurrently. The
 * first calls may race; the embedded runtime starts exactly once.
 *
 * A HOST'S OWN PYTHON: when the process already runs a Python interpreter
 * before the first call (the host embeds or is Python), the library runs in
 * it, provided it is the X.Y the library was built for; one of another X.Y
 * makes every call TSFFI_ERR_RUNTIME at once, naming both (nothing of it is
 * touched, nothing written to stderr). Each call needs that interpreter's
 * GIL: a call from a thread not holding it waits at most 2 seconds for the
 * GIL to be free, then returns TSFFI_ERR_RUNTIME saying the host holds it
 * (a host that calls Py_Initialize keeps the GIL until PyEval_SaveThread);
 * a later call works as soon as the host releases it.
 *
 * FORK: a child forked while NO other thread is inside a call of this library
 * (a fork before the first call, or any fork of a single-threaded host) keeps
 * using it normally. A child forked while another thread was inside a call
 * cannot use the runtime it inherited (its locks may be held by a thread that
 * does not exist in the child): there, every call that needs the runtime
 * returns TSFFI_ERR_RUNTIME at once, with a message saying so -- never a
 * hang. The parent is not affected. To use the library from a helper
 * process, start it with exec (posix_spawn) so it loads the library afresh.
 *
 * RUNTIME: the policy runs in an embedded Python interpreter that starts on
 * the first call that needs it (tsffi_abi_version, tsffi_last_error and
 * tsffi_string_free never start it). The library writes nothing to the host's
 * stdout or stderr and installs no signal handlers. It cannot be unloaded:
 * dlclose() leaves it resident.
 */
#ifndef TSFFI_H
#define TSFFI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nullability for compilers that read it (clang, and through it Swift: a
 * TSFFI_NONNULL pointer imports as non-optional). Empty elsewhere. A TSFFI_NONNULL
 * argument must not be NULL; the library still checks, and answers NULL with
 * TSFFI_ERR_INVALID_ARGUMENT rather than crashing. */
#if defined(__has_feature)
#if __has_feature(nullability)
#define TSFFI_NONNULL  _Nonnull
#define TSFFI_NULLABLE _Nullable
#endif
#endif
#ifndef TSFFI_NONNULL
#define TSFFI_NONNULL
#define TSFFI_NULLABLE
#endif

/* Nullability is a clang extension; say so once here, so that hosts building
 * with -pedantic -Werror under clang are not asked to. */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wnullability-extension"
#endif

/* POSIX only (the engine runs on macOS; CI builds on Linux): no Windows
 * export spelling. */
#if defined(__GNUC__)
#define TSFFI_API __attribute__((visibility("default")))
#else
#define TSFFI_API
#endif

/* The ABI this header describes. Bumped when a wire shape, an option key or
 * a function's meaning changes in a way an older host could misread. Compare
 * with tsffi_abi_version() at run time; unsigned, as that function returns
 * (Swift imports it as UInt32). ABI 2: every name moved from ts_/TS_ (the
 * engine's namespace) to tsffi_/TSFFI_; a block outside 1..=15 is an invalid
 * option; model_dir may be an installed alias and results carry "modelDir";
 * tsffi_speculation_choices is new. ABI 3: options are read as the engine's
 * open reads them (OPTIONS above), with its statuses and messages (a block
 * outside 1..=15 is TSFFI_ERR_REFUSED, a decoding failure TSFFI_ERR_JSON);
 * "temperature" and "engineBlocker" moved into the "tsffi" object (at the
 * top level they are ignored keys); a near-miss key is a warning, not a
 * refusal; the plan gains "warnings"; a choices table holds "ignoredKeys",
 * "warnings" and "modelDir" once, not in each item's plan. The migration:
 * docs/CHANGELOG.md. Also in ABI 3: tsffi_store_json is new (the store's
 * aliases with their drafter badges), and installed.json is decoded as the
 * engine decodes it (all or nothing; a later row of an alias wins; an empty
 * TURBOSPARK_HOME is the current directory). ABI 4: the install is read as
 * the engine's open reads it -- manifest.json's "arch" first, the index-wide
 * dtype gates, the drafter state the open builds -- and every failure of the
 * open the files show is TSFFI_ERR_REFUSED with the open's message (a path
 * that is not a directory, no valid "arch", an unreadable index, a partial
 * MTP head, a mis-shaped DFlash2 drafter), not a disabled speculation with a
 * reason; the blockers are revision 22f47a2's (a vision arm first; probe
 * dtypes 4, 15 and 16 covered); the options are 0a45c54's 18 keys; the plan
 * and each choices item gain "turn"; "tsffi"."temperature" is the turn's
 * (the session no longer depends on it) and "tsffi"."lowPowerMode" is new;
 * build info gains "engineRevisions"; tsffi_reconcile is new (the preview
 * checked against the real open, and the engine's words after a
 * disagreement: the plan gains "source"). The migration: docs/CHANGELOG.md. */
#define TSFFI_ABI_VERSION 4u

/* Status codes. Stable: never renumbered; new codes are only appended. Where
 * a meaning is the engine's, so is the number. */
/* success */
#define TSFFI_OK 0
/* a NULL pointer, text that is not UTF-8, a bad "tsffi" object, an
 * argument past LIMITS, an empty model_dir (the engine's open returns 1 for
 * a NULL pointer and text that is not UTF-8) */
#define TSFFI_ERR_INVALID_ARGUMENT 1
/* the engine's open fails (its message, bare): an option its mapping
 * refuses, an install it refuses (not a directory, manifest.json's "arch",
 * the resident index, the dtype gates, the drafter state it builds), or a
 * named speculation block in 1..=15 that cannot be served: the engine's
 * open returns 2 for these same failures */
#define TSFFI_ERR_REFUSED 2
/* an options_json the open's decoder refuses ("options: " + serde's text,
 * as the open), or a choice_json that does not parse */
#define TSFFI_ERR_JSON 4
/* anything unexpected, caught at the boundary */
#define TSFFI_ERR_INTERNAL 6
/* the embedded Python runtime could not start (the last error says what is
 * missing), or this process is a child forked while another thread was inside
 * the library (see FORK). Every later call returns it too. */
#define TSFFI_ERR_RUNTIME 9

/* Return TSFFI_ABI_VERSION of the library that is loaded. Never fails, never
 * starts the runtime, leaves the last error as it is. */
TSFFI_API uint32_t tsffi_abi_version(void);

/* Write the build information as a JSON object to *out_json:
 *   {"abiVersion": 4, "version": "0.1.0", "python": "3.11.7",
 *    "library": path of this shared library, "package": path of the Python
 *    package, "pythonHome": the embedded interpreter's home,
 *    "pythonExecutable": what the interpreter reports as sys.executable
 *    (this library's own path when it started the interpreter) | null,
 *    "sysPath": [the directories Python imports from], "ownsInterpreter":
 *    bool (false when the host is itself a Python process),
 *    "engine": "turbospark-runtime", "engineVersion": "0.3.0",
 *    "engineRevisions": {"policy": "0.3.0", "open": "0a45c54",
 *      "manifest": "54bc43a", "residentIndex": "08aaf13",
 *      "dtypeGates": "0a45c54", "drafterBuild": "22f47a2",
 *      "blockers": "22f47a2", "turn": "0a45c54"}}
 * "engine" and "engineVersion" name the engine whose speculation policy this
 * library transcribes; "engineRevisions" the engine revision (commit) each
 * other rule it follows was read at. Every text a plan, a preview or a
 * refusal shows is that revision's, byte for byte, and a change to those
 * texts or decisions changes this table: a host that matches on the
 * engine's messages reads here which ones it will see.
 * Returns TSFFI_OK; TSFFI_ERR_INVALID_ARGUMENT if out_json is NULL; TSFFI_ERR_RUNTIME;
 * or TSFFI_ERR_INTERNAL. */
TSFFI_API int32_t tsffi_build_info_json(char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

/* Copy the calling thread's last error message into buf as NUL-terminated
 * UTF-8, truncated to cap - 1 bytes (at a character boundary), and return the
 * message's FULL length in bytes, without the NUL, whatever cap is. With
 * buf == NULL (or cap == 0) nothing is written and only the length is
 * returned. 0 means no error. Never starts the runtime and leaves the message
 * as it is. */
TSFFI_API size_t tsffi_last_error(char *TSFFI_NULLABLE buf, size_t cap);

/* Release a string this library returned through an out-parameter. NULL is a
 * no-op. Leaves the last error as it is. */
TSFFI_API void tsffi_string_free(char *TSFFI_NULLABLE s);

/* Decide which drafter to open for the install in model_dir (a directory
 * holding model_weights.bin), reading only its resident index.
 *
 * model_dir: an install directory or an installed alias (MODEL NAMES above).
 * options_json: read as the open reads it (OPTIONS above), every key checked
 *   as the open checks it; uses "speculativeDrafter" ("auto" | "mtp" |
 *   "dflash" | null). NULL or "" = defaults.
 * On TSFFI_OK, *out_json is the drafter choice:
 *   {"drafter": "mtp" | "dflash", "installHasMtpHead": true | false | null,
 *    "installHasDflash": true | false | null, "note": string | null,
 *    "modelDir": the directory read, an absolute path}
 *   null flags mean the index could not be read ("unknown", never "absent");
 *   "note" is set only when auto found a DFlash2 drafter and NO MTP head, and
 *   left the drafter off (an install with both has no note: auto opens its
 *   MTP head).
 * An unreadable install is not an error here (the engine's open is the one
 * that refuses a broken install).
 * Returns TSFFI_OK; TSFFI_ERR_INVALID_ARGUMENT (NULL model_dir or out_json, an
 * empty or non-UTF-8 model_dir, non-UTF-8 options, a bad "tsffi" object);
 * TSFFI_ERR_JSON (options the open's decoder refuses); TSFFI_ERR_REFUSED (an
 * option the open's mapping refuses); TSFFI_ERR_RUNTIME; or TSFFI_ERR_INTERNAL. */
TSFFI_API int32_t tsffi_resolve_drafter(const char *TSFFI_NONNULL model_dir,
                                        const char *TSFFI_NULLABLE options_json,
                                        char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

/* Derive the draft policies to open a runner with.
 *
 * choice_json: exactly what tsffi_resolve_drafter returned ("modelDir" may
 *   be left out).
 * options_json: read as the open reads it (OPTIONS above); uses
 *   "speculation" ("auto" | "off" | a block in 1..=15 | null); a block
 *   outside 1..=15 is the open's TSFFI_ERR_REFUSED.
 * On TSFFI_OK, *out_json is
 *   {"mtp": {"mode": "off" | "auto" | "fixed", "block": n | null},
 *    "dflash": {"mode": ..., "block": ...}}   ("block" only for "fixed")
 * Returns TSFFI_OK; TSFFI_ERR_INVALID_ARGUMENT (a NULL pointer, a choice_json
 * that is not that shape, non-UTF-8 options, a bad "tsffi" object);
 * TSFFI_ERR_JSON (a choice_json that does not parse, options the open's
 * decoder refuses); TSFFI_ERR_REFUSED (an option the open's mapping
 * refuses); TSFFI_ERR_RUNTIME; or TSFFI_ERR_INTERNAL. */
TSFFI_API int32_t tsffi_draft_policies(const char *TSFFI_NONNULL choice_json,
                                       const char *TSFFI_NULLABLE options_json,
                                       char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

/* Decide speculation without an install to look at.
 *
 * options_json: read as the open reads it (OPTIONS above); uses
 *   "speculation" (a block outside 1..=15 is the open's TSFFI_ERR_REFUSED,
 *   before any engine blocker is considered); "speculativeDrafter" = the
 *   RESOLVED drafter (absent or "auto" takes the non-DFlash2 arms and
 *   reports "mtp"); "tsffi": {"engineBlocker": the engine's reason, or null;
 *   absent means none here: with no install to look at there is nothing to
 *   preview; "temperature": absent = deterministic, as the open assumes}.
 * On TSFFI_OK, *out_json is the engine's own sessionInfo shape:
 *   {"block": n | null, "drafter": "mtp" | "dflash" | null,
 *    "reason": string | null}
 *   block null is the "is it on" test; drafter is non-null exactly when block
 *   is; reason says why it is off when the caller might have expected it on.
 * Returns TSFFI_OK; TSFFI_ERR_REFUSED (an option the open's mapping refuses,
 * or a named block in 1..=15 that cannot be served: the last error is the
 * message to show, verbatim); TSFFI_ERR_INVALID_ARGUMENT (NULL out_json,
 * non-UTF-8 options, a bad "tsffi" object); TSFFI_ERR_JSON (options the
 * open's decoder refuses); TSFFI_ERR_RUNTIME; or TSFFI_ERR_INTERNAL. */
TSFFI_API int32_t tsffi_resolve_speculation(const char *TSFFI_NULLABLE options_json,
                                            char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

/* The whole decision for the install in model_dir, in one call, in the
 * order of the engine's open: the options; the directory; manifest.json's
 * "arch"; the resident index and its dtype gates; resolve the drafter and
 * derive the draft policies; build the drafter state they name (a partial
 * MTP head, a mis-shaped DFlash2 drafter or a DFlash2 drafter on a MoE
 * install fails here); take the blocker (the DFlash2 note, else
 * "tsffi"."engineBlocker" when given, else the engine's blocker function
 * asked of the install's arch, index and built drafter) and resolve
 * speculation as the open does, greedy decoding assumed; then the turn.
 *
 * model_dir: an install directory or an installed alias (MODEL NAMES above).
 * options_json: the host's whole open-options object, read as the open
 *   reads it (OPTIONS above); uses "speculation", "speculativeDrafter" and
 *   the "tsffi" object; keys the open does not read are listed back. Every
 *   option is checked before any install is read, so the open's refusal (a
 *   block outside 1..=15: TSFFI_ERR_REFUSED, "speculation block must be in
 *   1..=15, got 0") comes first whatever the install and whatever blocker
 *   stands.
 * On TSFFI_OK, *out_json is
 *   {"drafter": {...as tsffi_resolve_drafter, without "modelDir"...},
 *    "draftPolicies": {...as tsffi_draft_policies...},
 *    "speculation": {...as tsffi_resolve_speculation...}, the SESSION's
 *      answer, as ts_session_info_json reports it after the open,
 *    "turn": {"temperature": number, "speculates": bool,
 *      "reason": string | null}: whether a turn the host sends at
 *      "tsffi"."temperature" (absent: 0.2) speculates through the engine's
 *      C ABI -- only at temperature 0, with no "maxTokensPerSec" and a power
 *      profile resolving to performance; "reason" names the cause, in words
 *      a settings pane can show, when the session drafts and the turn will
 *      not (null when it speculates or the session does not draft),
 *    "ignoredKeys": [string, ...], the top-level keys the open ignores,
 *    "warnings": [string, ...], a hint per near-miss or moved key,
 *    "modelDir": the directory read, an absolute path}
 *   with "source": "preview" after "turn", or "engine" when
 *   tsffi_reconcile remembered the engine's own outcome for this install
 *   and options text (its "speculation" is then the engine's, its "turn"
 *   follows that session, and a failed open is refused with the engine's
 *   status and message, whatever number the engine gave it).
 * Returns TSFFI_OK; TSFFI_ERR_REFUSED (the open fails: an option its mapping
 * refuses, an install it refuses, a drafter it cannot build, or a named
 * block in 1..=15 that cannot be served; the last error is the open's
 * message); TSFFI_ERR_INVALID_ARGUMENT
 * (NULL model_dir or out_json, an empty or non-UTF-8 model_dir, non-UTF-8
 * options, a bad "tsffi" object); TSFFI_ERR_JSON (options the open's decoder
 * refuses); TSFFI_ERR_RUNTIME; or TSFFI_ERR_INTERNAL.
 * A warm call on an unchanged install named by its absolute path costs four
 * stat() calls and no reading. What is compared is what stat() shows of
 * model_weights.bin, packed_experts/layout.json and manifest.json: whether each exists, and
 * its device, inode, size, mode, modification time and change time. A change
 * that moves any of them (a write, a replace, a truncation, a touch, a
 * removal) is seen on the next call, and a file changed within 100 ms of
 * being read is read again on every call. A change that moves none of them
 * is NOT seen: a store through a shared memory mapping (MAP_SHARED) into a
 * page already written through that mapping leaves every field as it was
 * (the kernel sets the times on a mapping's first write to a page), and the
 * remembered answer stands until a field moves. Any other name (an alias, a
 * relative path) is resolved afresh on every call, so a re-pointed alias, a
 * changed environment or a new directory under the name is seen on the next
 * call. */
TSFFI_API int32_t tsffi_speculation_plan(const char *TSFFI_NONNULL model_dir,
                                         const char *TSFFI_NULLABLE options_json,
                                         char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

/* Every item of a settings pane's two pickers for the install in model_dir,
 * in one call: what tsffi_speculation_plan answers for each combination of
 * "speculation" ("auto", "off", 1, 2, ..., 15: the outer order) and
 * "speculativeDrafter" ("auto", "mtp", "dflash": the inner order), 51 items,
 * with the other keys of options_json (the "tsffi" object, and the ignored
 * ones) held as given. The index is read once for the table.
 *
 * options_json: as tsffi_speculation_plan; its own "speculation" and
 *   "speculativeDrafter" (absent or null = "auto") only choose which item is
 *   "selected", and are validated as that call validates them, so options a
 *   plan call would refuse as the open refuses them make this call fail
 *   with the same status and message (a block outside 1..=15 there is
 *   TSFFI_ERR_REFUSED: no item has it).
 * On TSFFI_OK, *out_json is
 *   {"modelDir": string,
 *    "install": {"installHasMtpHead": bool | null, "installHasDflash": bool | null},
 *    "choices": [{"speculation": "auto" | "off" | n,
 *                 "speculativeDrafter": "auto" | "mtp" | "dflash",
 *                 "status": 0 | 2, "plan": {...} | null, "error": string | null,
 *                 "selected": bool}, ... 51 items],
 *    "ignoredKeys": [string, ...], "warnings": [string, ...]}
 *   Each item's "status" and "plan" are exactly what tsffi_speculation_plan
 *   returns for options_json with that item's two keys (the plan object byte
 *   for byte without its "ignoredKeys", "warnings" and "modelDir", which the
 *   table holds once, so its size is bounded by its input's; null when the
 *   status is TSFFI_ERR_REFUSED: a drafter the open cannot build, a named
 *   block it cannot serve), and "error" is
 *   exactly the last error that call leaves (the refusal to show, verbatim;
 *   null on TSFFI_OK). A refused item is not a failure of this call; an
 *   install the open refuses whatever is asked (not a directory, its
 *   manifest, its index, its dtype gates) fails the call with
 *   TSFFI_ERR_REFUSED and the open's message, as every item would.
 * Returns TSFFI_OK; TSFFI_ERR_INVALID_ARGUMENT (NULL model_dir or out_json, an
 * empty or non-UTF-8 model_dir, non-UTF-8 options, a bad "tsffi" object);
 * TSFFI_ERR_JSON (options the open's decoder refuses); TSFFI_ERR_REFUSED (an
 * option the open's mapping refuses, a block outside 1..=15 included, or an
 * install the open refuses); TSFFI_ERR_RUNTIME; or TSFFI_ERR_INTERNAL.
 * Warm, like tsffi_speculation_plan: a repeated call on an unchanged install
 * named by its absolute path costs four stat() calls and a copy of the
 * table. As there, what is compared is what stat() shows of the three files
 * (whether each exists, its device, inode, size, mode, modification time and
 * change time): a change that moves any of them is seen on the next call; one
 * that moves none, such as a store through a shared memory mapping into a
 * page already written through it, is not. */
TSFFI_API int32_t tsffi_speculation_choices(const char *TSFFI_NONNULL model_dir,
                                            const char *TSFFI_NULLABLE options_json,
                                            char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

/* Describe what the install's files say, so a GUI can show why an answer is
 * "unknown" or why the open would fail. model_dir: an install directory or
 * an installed alias (MODEL NAMES above). *out_json: {"modelDir" (the
 * directory read, an absolute path), "arch": {"family", "hiddenSize",
 * "vocabSize", "numLayers", "numExperts", "fullAttentionLayerMask",
 * "visionDepth", "firstFullAttentionLayer"} | null (the manifest facts the
 * decision uses), "manifestError": the open's refusal of manifest.json |
 * null, "openError": the open's first refusal of the install (manifest,
 * index, dtype gates) | null, "indexReadable", "indexError", "indexCheck", "entryCount",
 * "indexBytes", "residentBytes", "installHasMtpHead", "installHasDflash",
 * "mtpHead": {"present", "tensors", "expected", "complete", "missing"},
 * "dflashDrafter": {...}, "probe": {"layer", "tensor", "present", "dtype",
 * "dtypeName", "verifyCovers"} | null (the probe of the manifest's first
 * full-attention layer; "verifyCovers" is true for dtypes 4, 15 and 16,
 * INT4 affine and the 1-bit / 2-bit affine pair), "experts":
 * {"layoutPresent", "expertsPerLayer", "numLayers", "error"} (layoutPresent
 * null when the layout could not be read; the decision takes the expert
 * count from the manifest), "blockerPreview": {"mtp", "dflash"} (what each
 * drafter's own blocker function in the engine would say at speculation
 * "auto", in its words, or the open's message when building that drafter
 * fails; null when nothing stands in the way or the open fails first)}. An unreadable index is TSFFI_OK with "indexReadable": false,
 * "indexError" and "indexCheck" saying which check failed, and null for
 * "entryCount", "indexBytes", "residentBytes", both install flags, "mtpHead",
 * "dflashDrafter" and "probe".
 * Returns TSFFI_OK; TSFFI_ERR_INVALID_ARGUMENT; TSFFI_ERR_RUNTIME; or TSFFI_ERR_INTERNAL. */
TSFFI_API int32_t tsffi_install_info_json(const char *TSFFI_NONNULL model_dir,
                                          char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

/* List the store as a model picker shows it: each installed alias a model_dir
 * may name (MODEL NAMES above), with the badges of its install. *out_json:
 * {"root": the store root as the environment gives it ("" is the current
 * directory) | null (neither TURBOSPARK_HOME nor HOME is set),
 * "storeFile": the absolute path of <root>/installed.json | null,
 * "storeRead": true when that file was read and decoded as the engine decodes
 * it, "reason": why there are no rows when storeRead is false (missing, not a
 * regular file, over 1 MiB, or failing the engine's all-or-nothing decode:
 * the engine's own reading names no installs then) | null,
 * "aliases": [{"alias", "path" (as recorded), "modelDir" (the absolute
 * directory a plan of the alias reads), "installHasMtpHead",
 * "installHasDflash" (null when its index cannot be read)}, ...]: each alias
 * whose last text row names an existing directory, in first-appearance
 * order}. The store file is read once per identity (stat()'s device, inode,
 * size and times), never blocking, at most 1 MiB; each install as a plan
 * reads it. Caller frees with tsffi_string_free.
 * Returns TSFFI_OK (also when there is no store: "aliases" is empty and
 * "reason" says why); TSFFI_ERR_INVALID_ARGUMENT if out_json is NULL;
 * TSFFI_ERR_RUNTIME; or TSFFI_ERR_INTERNAL. */
TSFFI_API int32_t tsffi_store_json(char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

/* Compare the preview with what the engine's real open reported for the same
 * model_dir and options, and answer in the engine's words after they
 * disagree.
 *
 * A host calls this right after ts_session_open with the very model_dir and
 * options_json it opened with. engine_json is what the engine reported:
 * ts_session_info_json's text, verbatim (an object of many keys; only its
 * "speculation": {"block", "drafter", "reason"} is read, and it must be there:
 * block null or an integer in 1..=15, drafter null, "mtp" or "dflash" and
 * non-null exactly when block is, reason null or a string), or, for an open
 * that failed, {"status": n, "message": "..."} with the open's nonzero status
 * and ts_last_error's text. The reason and the message are kept verbatim, at
 * most 65,536 characters each (this library's bound).
 *
 * model_dir: as tsffi_speculation_plan (MODEL NAMES above).
 * options_json: as tsffi_speculation_plan (OPTIONS above).
 * engine_json: as above; at most 16 MiB.
 * On TSFFI_OK, *out_json is
 *   {"agrees": bool,
 *    "preview": OUTCOME, "engine": OUTCOME,
 *    "differences": [string, ...],
 *    "revision": {"engine": "turbospark-runtime", "engineVersion": "0.3.0"}}
 *   where OUTCOME is {"status": 0, "speculation": {"block", "drafter",
 *   "reason"}} for an open, or {"status": n, "message": string} for a failed
 *   one. "preview" is exactly what tsffi_speculation_plan answers for the
 *   same arguments, without any remembered outcome: its "speculation", or
 *   its refusal where that is the open's own (TSFFI_ERR_REFUSED, and
 *   TSFFI_ERR_JSON for options the open's decoder refuses). "differences"
 *   names each field that differs ("status"; "message" when both failed;
 *   "speculation.block", "speculation.drafter", "speculation.reason"), empty
 *   exactly when "agrees". "revision" is the engine revision the preview
 *   mirrors, as tsffi_build_info_json reports it.
 * After a disagreement, the library remembers the engine's outcome for this
 * install (what stat() shows of its files, as the warm path compares them)
 * and this options_json text, for the life of the process (at most 256
 * pairs and 16 MiB of options text; the oldest is forgotten first): a later
 * tsffi_speculation_plan of the same model_dir and text answers the
 * engine's speculation with "source": "engine" and a warning saying how the
 * preview disagreed, or, when the engine's open failed, refuses with the
 * engine's status and message. An agreement forgets the pair; a change to the install's files
 * forgets the install. tsffi_speculation_choices stays the preview. Across
 * launches, pass the engine's reason back as "tsffi"."engineBlocker".
 * Returns TSFFI_OK (whether or not they agree); TSFFI_ERR_INVALID_ARGUMENT
 * (NULL model_dir, engine_json or out_json, an empty or non-UTF-8 model_dir,
 * non-UTF-8 options, a bad "tsffi" object, a malformed engine_json: the
 * message names what was wrong, what it got and what it accepts);
 * TSFFI_ERR_RUNTIME; or TSFFI_ERR_INTERNAL. */
TSFFI_API int32_t tsffi_reconcile(const char *TSFFI_NONNULL model_dir,
                                  const char *TSFFI_NULLABLE options_json,
                                  const char *TSFFI_NONNULL engine_json,
                                  char *TSFFI_NULLABLE *TSFFI_NONNULL out_json);

#if defined(__clang__)
#pragma clang diagnostic pop
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TSFFI_H */
