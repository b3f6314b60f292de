"""The Python behind include/tsffi.h: decode the C arguments, call the
policy, encode the result, map errors to status codes. Nothing else.

Only this module (with the init code in ffi_build.py) touches cffi objects:
the reader gets the C pass of its check 7 as plain callables (bind). The
status numbers come from the header (through the cffi `lib`), so they have
one source.
"""

from __future__ import annotations

from .errors import InvalidArgument, JsonArgumentError, SpeculationRefused

_ffi = None
_lib = None
_string = None
_emit = None
_set_error = None
_handlers: dict = {}
_STATUS: dict = {}


def bind(ffi, lib) -> None:
    """Attach to the embedded module: called once by the init code."""
    global _ffi, _lib, _string, _emit, _set_error
    _ffi, _lib = ffi, lib
    _string = ffi.string
    _emit = lib.tsffi_emit
    _set_error = lib.tsffi_set_error
    _STATUS.update({
        InvalidArgument: lib.TSFFI_ERR_INVALID_ARGUMENT,
        JsonArgumentError: lib.TSFFI_ERR_JSON,
        SpeculationRefused: lib.TSFFI_ERR_REFUSED,
    })
    _handlers.update({
        lib.TSFFI__FN_BUILD_INFO: _build_info,
        lib.TSFFI__FN_RESOLVE_DRAFTER: _resolve_drafter,
        lib.TSFFI__FN_DRAFT_POLICIES: _draft_policies,
        lib.TSFFI__FN_RESOLVE_SPECULATION: _resolve_speculation,
        lib.TSFFI__FN_SPECULATION_PLAN: _speculation_plan,
        lib.TSFFI__FN_INSTALL_INFO: _install_info,
        lib.TSFFI__FN_SPECULATION_CHOICES: _speculation_choices,
    })
    # Every call but build info reads an index, so this import is paid
    # anyway; with it the reader's check 7 runs in C (tsffi_index_scan.c).
    from . import resident_index
    resident_index.use_native_scan(lib.tsffi_index_names_end, _index_scan(ffi, lib))
    # The store root is read from the environment at each resolution, as the
    # engine reads it. This interpreter's os.environ is a copy made when it
    # started, so a host's setenv() after its first call would be missed:
    # read the process's live environment instead.
    from . import model_names
    getenv_c, string, null = lib.tsffi_getenv, ffi.string, ffi.NULL

    def getenv(name: str):
        value = getenv_c(name.encode("ascii"))
        if value == null:
            return None
        return string(value).decode("utf-8", "surrogateescape")
    model_names.use_getenv(getenv)


def _index_scan(ffi, lib):
    """The C pass of the resident index's check 7 as a plain callable for the
    reader: the names "\n"-joined (with a leading "\n"), or None to let the
    Python passes decide and word the failure."""
    new, buffer, scan = ffi.new, ffi.buffer, lib.tsffi_index_scan
    ok, too_small = lib.TSFFI__SCAN_OK, lib.TSFFI__SCAN_JOINED_TOO_SMALL

    def check(head: bytes, tail: bytes, count: int, index_size: int,
              resident_end: int) -> bytes | None:
        # Distinct names inside the string table fit in it, plus one "\n"
        # each; names sharing bytes or lying in the entry table may need
        # more: asked for once.
        capacity = len(tail) + count
        needed = new("uint64_t *")
        for _attempt in range(2):
            joined = new("char[]", capacity + 1)
            verdict = scan(head, tail, len(tail), count, index_size, resident_end,
                           joined + 1, capacity, needed)
            if verdict == ok:
                joined[0] = b"\n"
                return buffer(joined, needed[0] + 1)[:]
            if verdict != too_small:
                return None
            capacity = needed[0]
        return None  # pragma: no cover - the second attempt has the room it asked for
    return check


def _fail(status: int, message: str) -> int:
    data = message.encode("utf-8", "backslashreplace")
    _set_error(data, len(data))
    return status


def dispatch(fn: int, a, b, out) -> int:
    """One C call. `a` and `b` are non-NULL `const char *` (C passes "" for
    an absent options string); `out` is the caller's `char **`."""
    try:
        outcome = _handlers[fn](_string(a), _string(b))
    except RecursionError:
        return _fail(_lib.TSFFI_ERR_JSON, "a JSON argument nests too deeply to parse")
    except MemoryError:
        return _fail(_lib.TSFFI_ERR_INTERNAL, "internal error: out of memory")
    except Exception as exc:  # the boundary: nothing crosses it
        status = _STATUS.get(type(exc))
        if status is None:
            return _fail(_lib.TSFFI_ERR_INTERNAL,
                         f"internal error: {type(exc).__name__}: {exc}")
        return _fail(status, str(exc))
    if type(outcome) is bytes:
        return _emit(out, outcome, len(outcome))
    status, message = outcome
    return _fail(status, message)


def _encode(value) -> bytes:
    from .jsontext import dumps
    return dumps(value).encode("ascii")


def _model_dir(raw: bytes) -> str:
    """The model_dir argument checked (model_names.check_model_dir, the one
    check every entry point makes); not yet resolved."""
    from .model_names import check_model_dir
    return check_model_dir(raw)


_parsed: dict = {}
MAX_PARSED_OPTIONS = 256
# Only options texts up to this size are remembered (as the C warm path's
# TSFFI_CACHE_MAX_ARG), so the memo holds at most 256 x 4 KiB of keys.
MAX_PARSED_OPTIONS_BYTES = 4096


def _options(raw: bytes):
    """`parse_options(raw)`, remembered per options text (a GUI sends the same
    few objects over and over); a refusal is remembered too and raised anew.
    Parsed before any install is read, so a bad option is refused whatever
    the install or the blocker."""
    try:
        parsed = _parsed[raw]
    except KeyError:
        from .options import parse_options
        try:
            parsed = parse_options(raw)
        except (InvalidArgument, JsonArgumentError) as exc:
            parsed = exc
        if len(raw) <= MAX_PARSED_OPTIONS_BYTES:
            if len(_parsed) >= MAX_PARSED_OPTIONS:
                _parsed.clear()
            _parsed[raw] = parsed
    if isinstance(parsed, Exception):
        # A fresh instance per raise: re-raising one object keeps growing
        # its traceback.
        raise type(parsed)(str(parsed))
    return parsed


def _install(text: str):
    """The snapshot of the install that `text` (a checked model_dir: a
    directory or an installed alias) names, resolved as the engine resolves
    it, and whether the C warm path may remember answers about it: only when
    the name IS the directory read -- an absolute path that was an existing
    directory, which rule 1 of the resolution answers without the
    environment or the working directory (tsffi_embed.c checks the same at
    every lookup and store)."""
    from .install import snapshot
    from .model_names import resolve_model_name
    resolved = resolve_model_name(text)
    return snapshot(resolved), resolved == text


def _memo(snap, key, compute):
    """Answers memoised on the install snapshot they were computed from, so
    they live and die with it and can never outlive a change to the files.
    A refusal is an answer too, remembered as (status, message)."""
    def outcome():
        try:
            return compute()
        except SpeculationRefused as exc:
            return (_lib.TSFFI_ERR_REFUSED, str(exc))
    return snap.memo(key, outcome)


_I64 = 1 << 63


def _offer_to_c(fn: int, snap, a: bytes, b: bytes, outcome) -> None:
    """Let the C warm path remember a successful answer, keyed by what stat()
    said of the install's files when this snapshot read them (see
    tsffi_embed.c). Only trusted snapshots: a file modified within the racy
    window is re-read by Python on every call, so it must not be answered
    from C either."""
    if type(outcome) is not bytes or not snap.trusted:
        return
    keys = _ffi.new("struct tsffi_file_key[2]")
    for key, part in zip(keys, snap.key):
        if len(part) == 6:
            key.ok = 1
            # C compares the same bits as int64 (st_ino/st_dev may exceed 2**63).
            (key.dev, key.ino, key.size, key.mtime_ns, key.ctime_ns,
             key.mode) = (v - (_I64 << 1) if v >= _I64 else v for v in part)
        elif part[0] == "error" and part[1] is not None:
            key.dev = part[1]  # ok stays 0: the errno stat() gave
        else:
            return
    _lib.tsffi_cache_put(fn, a, b, keys, outcome, len(outcome))


def _speculation_plan(model_dir: bytes, options: bytes):
    text = _model_dir(model_dir)
    opts = _options(options)
    snap, keyable = _install(text)
    outcome = _memo(snap, ("plan", options), lambda: _plan_json(snap, opts))
    if keyable:
        _offer_to_c(_lib.TSFFI__FN_SPECULATION_PLAN, snap, model_dir, options, outcome)
    return outcome


def _plan_json(snap, opts) -> bytes:
    from .plan import plan_for_snapshot
    from .wire import plan_to_dict
    return _encode(plan_to_dict(plan_for_snapshot(snap, opts)))


def _speculation_choices(model_dir: bytes, options: bytes):
    # The order of _speculation_plan (model_dir checked, options parsed, the
    # name resolved), so a bad argument is refused exactly as the plan call
    # refuses it. One snapshot answers all 51 items: the index is read once.
    text = _model_dir(model_dir)
    opts = _options(options)
    snap, keyable = _install(text)

    def compute() -> bytes:
        from .plan import choices_for_snapshot
        from .wire import choices_to_dict
        return _encode(choices_to_dict(choices_for_snapshot(snap, opts)))
    outcome = _memo(snap, ("choices", options), compute)
    if keyable:
        _offer_to_c(_lib.TSFFI__FN_SPECULATION_CHOICES, snap, model_dir, options, outcome)
    return outcome


def _resolve_drafter(model_dir: bytes, options: bytes):
    text = _model_dir(model_dir)
    opts = _options(options)
    snap, keyable = _install(text)

    def compute() -> bytes:
        from .plan import choice_for_snapshot
        from .wire import resolved_choice_to_dict
        return _encode(resolved_choice_to_dict(choice_for_snapshot(snap, opts.drafter),
                                               snap.model_dir))
    outcome = _memo(snap, ("drafter", options), compute)
    if keyable:
        _offer_to_c(_lib.TSFFI__FN_RESOLVE_DRAFTER, snap, model_dir, options, outcome)
    return outcome


def _draft_policies(choice_json: bytes, options: bytes) -> bytes:
    from .options import MAX_OPTIONS_BYTES, decode_text
    from .policy import draft_policies
    from .wire import choice_from_json, policies_to_dict
    if len(choice_json) > MAX_OPTIONS_BYTES:
        raise InvalidArgument(f"choice_json is {len(choice_json)} bytes; accepts at most "
                              f"{MAX_OPTIONS_BYTES} bytes (what tsffi_resolve_drafter returns)")
    choice = choice_from_json(decode_text(choice_json, "choice_json"))
    return _encode(policies_to_dict(draft_policies(choice, _options(options).speculation)))


def _resolve_speculation(options: bytes, _unused: bytes):
    from .options import ABSENT
    from .policy import SpeculativeDrafter, resolve_speculation
    from .wire import speculation_to_dict
    opts = _options(options)
    # An absent or auto drafter takes the seed's non-DFlash2 arms, which is
    # the MTP drafter's, and is reported as such.
    drafter = SpeculativeDrafter.MTP if opts.drafter is SpeculativeDrafter.AUTO else opts.drafter
    blocker = None if opts.engine_blocker is ABSENT else opts.engine_blocker
    plan = resolve_speculation(opts.speculation, drafter, blocker, opts.deterministic)
    return _encode(speculation_to_dict(plan, drafter))


def _install_info(model_dir: bytes, _unused: bytes) -> bytes:
    from .wire import install_info_to_dict
    snap, keyable = _install(_model_dir(model_dir))
    outcome = _memo(snap, ("info",), lambda: _encode(install_info_to_dict(snap)))
    if keyable:
        _offer_to_c(_lib.TSFFI__FN_INSTALL_INFO, snap, model_dir, _unused, outcome)
    return outcome


def _build_info(_a: bytes, _b: bytes) -> bytes:
    from .wire import build_info_to_dict
    library = _string(_lib.tsffi_get_library_path()).decode("utf-8", "surrogateescape")
    return _encode(build_info_to_dict(_lib.TSFFI_ABI_VERSION, library,
                                      bool(_lib.tsffi_get_owns_interpreter())))
