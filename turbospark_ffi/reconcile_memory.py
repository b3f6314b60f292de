"""What the engine's real open said, held against the preview: the two
outcomes as one value, the engine's report read from the host's text, where
they differ, and what the library remembers after a disagreement.

This library is a second copy of the engine's decision, and the engine keeps
moving (TURBOSPARK_FACTS.md section 14: no version it reports names the
revision). The one check that cannot drift is the real open's own report,
which a host holds right after `ts_session_open`: `ts_session_info_json`'s
`"speculation"` or the open's status and message. `reconcile.py` compares;
this module keeps the engine's outcome per install and options text, so that
later plans of the same pair answer in the engine's words (plan.py asks
`reported`).

The memory is keyed by the install's identity as the snapshot knows it
(snapshots.py: what stat() says of its files) and by the options text as the
host sent it -- the text, not the parsed options: the engine reads keys this
library does not model (visionSidecar arms a blocker), so two texts that
preview alike may open differently. When the files change, the key no longer
matches and the install's entries are dropped. Bounded: the oldest entry
goes past MAX_REMEMBERED pairs or MAX_REMEMBERED_BYTES of options texts
(and each remembered reason or message is at most MAX_ENGINE_TEXT). Held for
the life of the process only: a host that wants it across launches passes
the engine's reason back as `tsffi.engineBlocker`.
"""

from __future__ import annotations

import _thread

from ._value import Value
from .engine_revision import ENGINE, ENGINE_VERSION
from .errors import InvalidArgument, JsonArgumentError
from .policy import ALLOWED_SPECULATION_BLOCKS

__all__ = ["Outcome", "Reconciliation", "read_engine_json", "differences",
           "disagreement_warning", "remember", "forget", "reported",
           "use_on_change", "options_key", "clear", "MAX_REMEMBERED", "MAX_REMEMBERED_BYTES",
           "MAX_ENGINE_TEXT", "MAX_ENGINE_JSON_BYTES"]

MAX_REMEMBERED = 256
# And at most this many bytes of options texts (one may be 16 MiB): the
# oldest go first to make room.
MAX_REMEMBERED_BYTES = 16 * 1024 * 1024
# The engine's reason or message is remembered verbatim, 256 times at most:
# bounded far above any real one (the engine's longest texts are ~600
# characters), so the memory is too.
MAX_ENGINE_TEXT = 65536
# What a warning quotes of each side's text: the whole texts are in the
# reconcile result; the warning says how they differ.
_QUOTED = 300
# As the options' bound (options.MAX_OPTIONS_BYTES): far above any real
# session info, refused before any of it is decoded.
MAX_ENGINE_JSON_BYTES = 16 * 1024 * 1024
# A status as int32_t carries it.
_STATUS_MAX = (1 << 31) - 1
_DRAFTERS = ("mtp", "dflash")

_FORMS = ("ts_session_info_json's text (an object whose \"speculation\" is "
          "{\"block\", \"drafter\", \"reason\"}) or, for an open that failed, "
          "{\"status\": n, \"message\": \"...\"} with the open's nonzero status and "
          "ts_last_error's text")
_ACCEPTS = "accepts " + _FORMS


class Outcome(Value):
    """One side of a reconcile: an open that succeeded (`status` 0, with the
    session's `block`, `drafter` and `reason`) or failed (`status`, `message`)."""

    __slots__ = ("status", "block", "drafter", "reason", "message")

    def __init__(self, status: int, block: int | None = None, drafter: str | None = None,
                 reason: str | None = None, message: str | None = None) -> None:
        self._init(status=status, block=block, drafter=drafter, reason=reason, message=message)

    @classmethod
    def opened(cls, block: int | None, drafter: str | None, reason: str | None) -> Outcome:
        return cls(0, block, drafter, reason)

    @classmethod
    def failed(cls, status: int, message: str) -> Outcome:
        return cls(status, message=message)


class Reconciliation(Value):
    """What `tsffi_reconcile` answers: whether the two outcomes agree, both
    of them, the fields that differ, and the engine revision the preview
    mirrors (held as its (key, value) pairs, in order: a value is hashable)."""

    __slots__ = ("agrees", "preview", "engine", "differences", "revision")

    def __init__(self, preview: Outcome, engine: Outcome, found: tuple[str, ...],
                 revision: dict) -> None:
        self._init(agrees=not found, preview=preview, engine=engine, differences=found,
                   revision=tuple(revision.items()))


# ---------------------------------------------------------------------------
# The engine's report, as the host hands it over

def _refuse(what: str, got: str, accepts: str) -> InvalidArgument:
    return InvalidArgument(f"engine_json: {what}: got {got}; accepts {accepts}")


def _clean_string(value: object) -> bool:
    """A string that UTF-8 can carry (no lone surrogate), so the answer can,
    within MAX_ENGINE_TEXT characters."""
    from .jsontext import is_utf8_text
    return isinstance(value, str) and len(value) <= MAX_ENGINE_TEXT and is_utf8_text(value)


def _members(pairs: list, what: str, wanted: tuple[str, ...]) -> dict:
    """The members of `pairs` named in `wanted`, each at most once."""
    found: dict = {}
    for key, value in pairs:
        if key in wanted:
            if key in found:
                raise InvalidArgument(f"engine_json: {what}{key} is given more than once; "
                                      f"{_ACCEPTS}")
            found[key] = value
    return found


def _is_object(value: object) -> bool:
    # The argument parser's objects are (key, value) pair lists (jsontext).
    return isinstance(value, list) and type(value) is not list


def read_engine_json(raw: bytes | str) -> Outcome:
    """The engine's outcome from `engine_json`: `ts_session_info_json`'s text
    verbatim (only its "speculation" is read, and it must be there and
    well-typed), or `{"status": n, "message": "..."}` for a failed open.
    Anything else is InvalidArgument naming what was wrong."""
    from .jsontext import parse_json_value, show_value
    from .options import decode_text
    if len(raw) > MAX_ENGINE_JSON_BYTES:
        raise InvalidArgument(f"engine_json is {len(raw)} bytes; accepts at most "
                              f"{MAX_ENGINE_JSON_BYTES} bytes (this library's bound)")
    text = decode_text(raw, "engine_json") if isinstance(raw, bytes) else raw
    try:
        value = parse_json_value(text, "engine_json")
    except JsonArgumentError as exc:  # a bad argument of this call, not the open's JSON
        said = str(exc)
        raise InvalidArgument(f"{said} ({_FORMS})" if "; accepts " in said
                              else f"{said}; {_ACCEPTS}") from None
    if not _is_object(value):
        raise _refuse("the whole text", show_value(value), "an object: " + _FORMS)
    # Session info's other keys are the engine's to add to: never read.
    if any(key == "speculation" for key, _ in value):
        return _session_info(_members(value, "", ("speculation",))["speculation"])
    if any(key == "status" for key, _ in value):
        return _failed_open(value, _members(value, "", ("status", "message")))
    raise _refuse("the object", "neither \"speculation\" nor \"status\" among its keys",
                  _FORMS)


def _shown(value: object) -> str:
    from .jsontext import show_value
    if isinstance(value, str) and len(value) > MAX_ENGINE_TEXT:
        return "a string of %d characters" % len(value)
    return show_value(value)


def _session_info(speculation: object) -> Outcome:
    from .jsontext import show_value
    if not _is_object(speculation):
        raise _refuse("speculation", show_value(speculation),
                      "an object {\"block\", \"drafter\", \"reason\"}, as ts_session_info_json "
                      "writes it")
    fields = _members(speculation, "speculation.", ("block", "drafter", "reason"))
    missing = [k for k in ("block", "drafter", "reason") if k not in fields]
    if missing:
        raise _refuse("speculation", "no " + ", ".join(missing),
                      "an object holding all of \"block\", \"drafter\" and \"reason\", as "
                      "ts_session_info_json writes it")
    block, drafter, reason = fields["block"], fields["drafter"], fields["reason"]
    if block is not None and (type(block) is not int or block not in ALLOWED_SPECULATION_BLOCKS):
        raise _refuse("speculation.block", show_value(block),
                      "null (speculation off) or an integer in 1..=15")
    if drafter is not None and drafter not in _DRAFTERS:
        raise _refuse("speculation.drafter", show_value(drafter),
                      "null, \"mtp\" or \"dflash\"")
    if (drafter is None) != (block is None):
        raise _refuse("speculation.drafter", show_value(drafter) + " with block "
                      + show_value(block), "a drafter exactly when block is not null, as the "
                      "engine reports it")
    if reason is not None and not _clean_string(reason):
        raise _refuse("speculation.reason", _shown(reason),
                      "null or a string of at most 65536 characters (without a lone surrogate)")
    return Outcome.opened(block, drafter, reason)


def _failed_open(pairs: list, top: dict) -> Outcome:
    from .jsontext import show_value
    extra = [key for key, _ in pairs if key not in ("status", "message")]
    if extra:
        raise _refuse("a failed open's object", "the key " + show_value(extra[0]),
                      "exactly \"status\" and \"message\" (or ts_session_info_json's text, "
                      "which holds \"speculation\")")
    status, message = top["status"], top.get("message")
    if type(status) is not int or not 1 <= status <= _STATUS_MAX:
        raise _refuse("status", show_value(status),
                      "the failed open's status, an integer in 1..=2147483647 (a successful "
                      "open is reported by ts_session_info_json's text)")
    if "message" not in top:
        raise _refuse("a failed open's object", "no \"message\"",
                      "\"message\": ts_last_error's text after the failed open")
    if not _clean_string(message) or "\0" in message:
        raise _refuse("message", _shown(message),
                      "ts_last_error's text after the failed open (a string of at most 65536 "
                      "characters, without NUL or lone surrogate)")
    return Outcome.failed(status, message)


# ---------------------------------------------------------------------------
# Where two outcomes differ

_FIELDS = ("block", "drafter", "reason")


def differences(preview: Outcome, engine: Outcome) -> tuple[str, ...]:
    """The fields the two outcomes disagree on, in a fixed order: "status"
    (and "message" when both failed with other words), or for two opens the
    "speculation.*" fields that differ. Empty: they agree."""
    if preview.status != engine.status:
        both_failed = preview.status != 0 and engine.status != 0
        return ("status", "message") if both_failed and preview.message != engine.message \
            else ("status",)
    if preview.status != 0:
        return ("message",) if preview.message != engine.message else ()
    return tuple("speculation." + name for name in _FIELDS
                 if getattr(preview, name) != getattr(engine, name))


def _said(value: object) -> str:
    if value is None:
        return "null"
    if not isinstance(value, str):
        return "%d" % value
    return '"%s"' % value if len(value) <= _QUOTED else '"%s..."' % value[:_QUOTED]


def _summary(outcome: Outcome) -> str:
    if outcome.status != 0:
        return "a failed open, status %d: %s" % (outcome.status, _said(outcome.message))
    if outcome.block is None:
        return "an open with speculation off"
    return "an open speculating %d tokens a round with %s" % (outcome.block, outcome.drafter)


def disagreement_warning(preview: Outcome, engine: Outcome, found: tuple[str, ...]) -> str:
    """What a plan answered in the engine's words says in its "warnings":
    that the preview disagreed, on which fields, and what each side said."""
    parts = []
    for name in found:
        if name == "status":
            parts.append("status (the preview: %s; the engine: %s)"
                         % (_summary(preview), _summary(engine)))
        else:
            attr = name.rpartition(".")[2]
            parts.append("%s (the preview: %s; the engine: %s)"
                         % (name, _said(getattr(preview, attr)), _said(getattr(engine, attr))))
    return ("this answer is the engine's own: its open of this install with these options, "
            "reported to tsffi_reconcile, disagreed with the preview (which mirrors %s %s) on "
            "%s" % (ENGINE, ENGINE_VERSION, "; ".join(parts)))


# ---------------------------------------------------------------------------
# The memory

# (model_dir, options text) -> (the install's key, the engine's Outcome, the
# warning), oldest first; _held counts the texts' bytes. Every compound step
# is under _guard: eight host threads may reconcile and plan at once.
_memory: dict = {}
_held = 0
_guard = _thread.allocate_lock()
_on_change = None


def use_on_change(callback) -> None:
    """Call `callback()` after each change of what a plan would answer
    (`_abi.bind` hands in the warm path's new epoch)."""
    global _on_change
    _on_change = callback


def _changed() -> None:
    if _on_change is not None:
        _on_change()


def options_key(options: bytes | str | None) -> bytes:
    """The options text as the memory keys it: the bytes a host passed
    (NULL and "" are both the defaults, as for the open)."""
    if options is None:
        return b""
    return options.encode("utf-8", "surrogatepass") if isinstance(options, str) else options


def _drop(pair: tuple) -> None:
    global _held
    del _memory[pair]
    _held -= len(pair[1])


def _drop_install(model_dir: str, key: bytes) -> None:
    """Forget what was remembered of `model_dir` under other files than `key`."""
    for pair in [p for p, v in _memory.items() if p[0] == model_dir and v[0] != key]:
        _drop(pair)


def remember(model_dir: str, key: bytes, options: bytes, engine: Outcome, warning: str) -> None:
    """After a disagreement: plans of this install (as `key` identifies its
    files) with this options text answer `engine`, with `warning`."""
    global _held
    pair, entry = (model_dir, options), (key, engine, warning)
    with _guard:
        changed = _memory.get(pair) != entry
        _drop_install(model_dir, key)
        if pair in _memory:
            _drop(pair)
        while _memory and (len(_memory) >= MAX_REMEMBERED
                           or _held + len(options) > MAX_REMEMBERED_BYTES):
            _drop(next(iter(_memory)))
        _memory[pair] = entry
        _held += len(options)
    if changed:
        _changed()


def forget(model_dir: str, options: bytes) -> None:
    """After an agreement: plans of the pair are the preview's again."""
    with _guard:
        had = (model_dir, options) in _memory
        if had:
            _drop((model_dir, options))
    if had:
        _changed()


def reported(model_dir: str, key: bytes, options: bytes) -> tuple[Outcome, str] | None:
    """The engine's outcome and the warning remembered for the pair, while
    the install's files are still `key`; None otherwise."""
    if not _memory:  # the common case: nothing ever disagreed
        return None
    with _guard:
        entry = _memory.get((model_dir, options))
        if entry is None:
            return None
        if entry[0] != key:
            _drop_install(model_dir, key)
            return None
        return entry[1], entry[2]


def clear() -> None:
    """Forget every engine outcome (tests; a host never needs it: an
    agreement forgets its own pair)."""
    global _held
    with _guard:
        had = bool(_memory)
        _memory.clear()
        _held = 0
    if had:
        _changed()
