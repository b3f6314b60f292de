"""The Python behind include/tsffi.h: C's arguments to api.py's calls,
their bytes back to C, errors to status codes, and an answer offered to the
C warm path. Nothing else: what to answer is plan.py's, in wire.py's shapes.

Only this module (with the init code in ffi_build.py) touches cffi objects:
the reader gets the C pass of its check 7 and the install snapshots the
library's stat key as plain callables (bind). An error's status is its own
(errors.py: the header's numbers); the codes only C can give -- an internal
error, a JSON argument nested too deeply to parse -- come from the header
through the cffi `lib`.
"""

from __future__ import annotations

from .errors import TurbosparkError

_ffi = None
_lib = None
_string = None
_emit = None
_set_error = None
_handlers: dict = {}


def bind(ffi, lib) -> None:
    """Attach to the embedded module: called once by the init code."""
    global _ffi, _lib, _string, _emit, _set_error
    _ffi, _lib = ffi, lib
    _string = ffi.string
    _emit = lib.tsffi_emit
    _set_error = lib.tsffi_set_error
    _handlers.update({
        lib.TSFFI__FN_BUILD_INFO: _build_info,
        lib.TSFFI__FN_RESOLVE_DRAFTER: _resolve_drafter,
        lib.TSFFI__FN_DRAFT_POLICIES: _draft_policies,
        lib.TSFFI__FN_RESOLVE_SPECULATION: _resolve_speculation,
        lib.TSFFI__FN_SPECULATION_PLAN: _speculation_plan,
        lib.TSFFI__FN_INSTALL_INFO: _install_info,
        lib.TSFFI__FN_SPECULATION_CHOICES: _speculation_choices,
        lib.TSFFI__FN_STORE: _store,
        lib.TSFFI__FN_RECONCILE: _reconcile,
    })
    # Every call but build info reads an index, so this import is paid
    # anyway; with it the reader's check 7 runs in C (tsffi_index_scan.c).
    from . import resident_index
    resident_index.use_native_scan(lib.tsffi_index_names_end, _index_scan(ffi, lib))
    # The snapshot's key is the warm path's own (snapshots.py).
    from . import snapshots
    snapshots.use_native_keys(_install_keys(ffi, lib))
    # The store root's variables. In the library's own interpreter: the
    # values the library copied at its first call (tsffi_getenv says why
    # never the live environment: a host's setenv() racing a getenv() is a
    # crash). In a host's interpreter (a Python program, an app embedding
    # Python): that interpreter's os.environ, as any Python code there reads
    # it (model_names' default).
    if lib.tsffi_get_owns_interpreter():
        from . import model_names
        model_names.use_getenv(_loaded_environment(ffi, lib))
    # A remembered engine outcome changes what a plan answers without
    # changing the install's files: the warm path must forget its answers.
    from . import reconcile_memory
    reconcile_memory.use_on_change(lib.tsffi_cache_new_epoch)
    # The calls' modules, imported here, on the start-up thread's 8 MiB stack
    # (src/tsffi_embed.c): nested imports use the C stack, and a first plan
    # from a host thread of 16 KiB importing them itself died with SIGSEGV
    # (tests/test_runtime_start.py). Every call but build info needs them.
    from . import api, plan, wire  # noqa: F401


def _loaded_environment(ffi, lib):
    """tsffi_getenv as `model_names.use_getenv` wants it."""
    getenv_c, string, null = lib.tsffi_getenv, ffi.string, ffi.NULL

    def getenv(name: str):
        value = getenv_c(name.encode("ascii"))
        if value == null:
            return None
        return string(value).decode("utf-8", "surrogateescape")
    return getenv


def bound_library() -> str | None:
    """The path of the library this module is bound to (None: not bound):
    a second copy of the library asks it to say which copy came first."""
    if _lib is None:
        return None
    return _string(_lib.tsffi_get_library_path()).decode("utf-8", "surrogateescape")


def _install_keys(ffi, lib):
    """tsffi_install_keys as `snapshots.file_keys` wants it: the key's bytes."""
    new, buffer, keys_of = ffi.new, ffi.buffer, lib.tsffi_install_keys
    from .snapshots import python_file_keys

    def keys(model_dir: str) -> bytes:
        try:
            path = model_dir.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # not a path C can be handed: no file has it
            return python_file_keys(model_dir)
        out = new("struct tsffi_file_key[]", lib.TSFFI_INSTALL_FILES)
        keys_of(path, out)
        return buffer(out)[:]
    return keys


def _index_scan(ffi, lib):
    """The C pass of the resident index's check 7 as a plain callable for the
    reader (resident_index.use_native_scan says what it returns), or None
    from it to let the Python pass decide and word the failure."""
    new, buffer, scan = ffi.new, ffi.buffer, lib.tsffi_index_scan
    # The names' buffer is written whole by the pass before any of it is
    # read: not zeroed first (4 MB at 100,000 entries).
    uncleared = ffi.new_allocator(should_clear_after_alloc=False)
    ok, too_small = lib.TSFFI__SCAN_OK, lib.TSFFI__SCAN_JOINED_TOO_SMALL

    def check(head: bytes, tail: bytes, count: int, index_size: int, resident_end: int,
              queries: bytes, names_asked: int):
        # Distinct names inside the string table fit in it, plus one "\n"
        # each; names sharing bytes or lying in the entry table may need
        # more: asked for once.
        capacity = len(tail) + count
        facts = new("int64_t[]", 2 + names_asked)
        for _attempt in range(2):
            joined = uncleared("char[]", capacity + 1)
            verdict = scan(head, tail, len(tail), count, index_size, resident_end, queries,
                           joined + 1, capacity, facts)
            if verdict == ok:
                joined[0] = b"\n"
                return (buffer(joined, facts[0] + 1)[:], facts[1],
                        [facts[2 + k] for k in range(names_asked)])
            if verdict != too_small:
                return None
            capacity = facts[0]
        return None  # pragma: no cover - the second attempt has the room it asked for
    return check


def _fail(status: int, message: str) -> int:
    # The last error is a NUL-terminated string: a NUL inside a message (a
    # tensor name the open quotes from a hostile index) would cut it short
    # for every C host, so it is written as the two characters "\0".
    if "\x00" in message:
        message = message.replace("\x00", "\\0")
    data = message.encode("utf-8", "backslashreplace")
    _set_error(data, len(data))
    return status


def dispatch(fn: int, a, b, c, out) -> int:
    """One C call. `a` and `b` are non-NULL `const char *` (C passes "" for
    an absent options string); `c` is the third argument of a call that
    takes three (tsffi_reconcile's engine_json), else NULL; `out` is the
    caller's `char **`."""
    try:
        if c == _ffi.NULL:
            outcome = _handlers[fn](_string(a), _string(b))
        else:
            outcome = _handlers[fn](_string(a), _string(b), _string(c))
    except RecursionError:
        return _fail(_lib.TSFFI_ERR_JSON, "a JSON argument nests too deeply to parse")
    except MemoryError:
        return _fail(_lib.TSFFI_ERR_INTERNAL, "internal error: out of memory")
    except Exception as exc:  # the boundary: nothing crosses it
        status = exc.status if isinstance(exc, TurbosparkError) else None
        if status is None:
            return _fail(_lib.TSFFI_ERR_INTERNAL,
                         f"internal error: {type(exc).__name__}: {exc}")
        return _fail(status, str(exc))
    return _emit(out, outcome, len(outcome))


def _answered(fn: int, a: bytes, b: bytes, answer, request) -> bytes:
    """`answer(request)`, offered to the C warm path when it may remember it:
    keyed by the bytes stat() gave when the snapshot read the install's files
    (snapshots.py: the warm path's own key), only when the request's name IS
    the directory read, and only from a trusted snapshot -- a file modified
    within the racy window is re-read by Python on every call, so it must
    not be answered from C either. The epoch is read before the answer is
    computed: a remembered engine outcome that arrives meanwhile starts a
    new one, and the warm path then refuses this (older) answer."""
    epoch = _lib.tsffi_cache_epoch_now()
    outcome = answer(request)
    snap = request.snapshot
    if snap.trusted and request.names_the_directory:
        keys = _ffi.from_buffer("struct tsffi_file_key[]", snap.key)
        _lib.tsffi_cache_put(fn, a, b, keys, epoch, outcome, len(outcome))
    return outcome


def _speculation_plan(model_dir: bytes, options: bytes) -> bytes:
    from .api import plan_json, request
    return _answered(_lib.TSFFI__FN_SPECULATION_PLAN, model_dir, options, plan_json,
                     request(model_dir, options))


def _speculation_choices(model_dir: bytes, options: bytes) -> bytes:
    from .api import choices_json, request
    return _answered(_lib.TSFFI__FN_SPECULATION_CHOICES, model_dir, options, choices_json,
                     request(model_dir, options))


def _resolve_drafter(model_dir: bytes, options: bytes) -> bytes:
    from .api import drafter_json, request
    return _answered(_lib.TSFFI__FN_RESOLVE_DRAFTER, model_dir, options, drafter_json,
                     request(model_dir, options))


def _install_info(model_dir: bytes, unused: bytes) -> bytes:
    from .api import install_info_json, request
    return _answered(_lib.TSFFI__FN_INSTALL_INFO, model_dir, unused, install_info_json,
                     request(model_dir))


def _reconcile(model_dir: bytes, options: bytes, engine_json: bytes) -> bytes:
    # Never offered to the warm path: each call compares and may change what
    # the library remembers.
    from .api import reconcile_json
    return reconcile_json(model_dir, options, engine_json)


def _draft_policies(choice_json: bytes, options: bytes) -> bytes:
    from .api import policies_json
    return policies_json(choice_json, options)


def _resolve_speculation(options: bytes, unused: bytes) -> bytes:
    from .api import speculation_json
    return speculation_json(options)


def _store(unused_a: bytes, unused_b: bytes) -> bytes:
    # Never offered to the C warm path: the store's answer depends on the
    # environment, the working directory and every listed directory.
    from .api import store_json
    return store_json()


def _build_info(unused_a: bytes, unused_b: bytes) -> bytes:
    from .api import build_info_json
    return build_info_json(_lib.TSFFI_ABI_VERSION, bound_library(),
                           bool(_lib.tsffi_get_owns_interpreter()))
