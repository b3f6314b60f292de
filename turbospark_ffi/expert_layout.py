"""`packed_experts/layout.json`: how many routed experts the install has.

The blocker preview needs two numbers from a file that is about 22 MB on a
real MoE install (40 layers x 256 experts). Parsing all of it in Python takes
a few hundred milliseconds, and even one pass over 25 MB (reading it, or
checking it is UTF-8) costs more than the rest of a first plan (measured:
3-40 ms on this machine against a target of 10x a dense first plan, ~5 ms).
So the answer is defined by a rule that can be decided from the file's head
when the engine's writer wrote it, and BOTH ways of reading apply that one
rule to the same bytes -- the head alone when it is enough, else the whole
file -- so the size of the file changes the cost and never the answer:

1. The HEAD MEMBERS: the top-level members before the first array or object
   value (the engine's writer puts `expertStride`, `numLayers` and
   `expertsPerLayer` there, before the large `layers` array). When both
   counts are among them, they decide, and nothing after them is read:
   those members must be UTF-8 and valid JSON (else rule 2 decides, and
   refuses), and a count given twice among them is refused. Damage after
   them -- in `layers`, or a count repeated after it -- is the engine's open
   to refuse, not the preview's (as with an unreadable index, the preview
   does not stand in for the open).
2. Otherwise the WHOLE FILE: UTF-8, one JSON object, each count once at its
   top level (the engine's typed parse refuses a duplicate field).
"""

from __future__ import annotations

import os

from ._value import Value
from .errors import TurbosparkError

__all__ = ["LAYOUT_PATH", "MAX_LAYOUT_BYTES", "ExpertLayout", "ExpertLayoutError",
           "load_expert_layout"]

LAYOUT_PATH = os.path.join("packed_experts", "layout.json")
# The engine refuses a layout over 64 MiB.
MAX_LAYOUT_BYTES = 64 << 20
_HEAD_BYTES = 64 << 10


class ExpertLayoutError(TurbosparkError):
    """`packed_experts/layout.json` exists but cannot be used."""


class ExpertLayout(Value):
    """`present` is False when the install has no layout file (nothing routed)."""

    __slots__ = ("present", "experts_per_layer", "num_layers")

    def __init__(self, present: bool, experts_per_layer: int, num_layers: int) -> None:
        self._init(present=present, experts_per_layer=experts_per_layer, num_layers=num_layers)


NO_LAYOUT = ExpertLayout(False, 0, 0)


def load_expert_layout(model_dir: str) -> ExpertLayout:
    # regular_file: non-blocking, a regular file only, at most the engine's
    # own 64 MiB (a larger layout is one the engine's open refuses).
    from .regular_file import NotReadable, open_regular
    try:
        fd, info = open_regular(os.path.join(model_dir, LAYOUT_PATH), MAX_LAYOUT_BYTES)
    except NotReadable as exc:
        import errno
        if exc.check == "open" and exc.errno == errno.ENOENT:
            return NO_LAYOUT  # a dense install has no layout
        raise _refusal(exc) from None
    try:
        data = os.pread(fd, _HEAD_BYTES, 0)
        fields = _head_members(data)
        if fields is None and len(data) < info.st_size:
            # The same rule on the whole file: it decides when the first
            # nested value starts past the head.
            data = _read_all(fd, info.st_size)
            fields = _head_members(data)
        if fields is None:
            fields = _all_scalars(_decode(data))
    except OSError as exc:
        raise ExpertLayoutError(f"{LAYOUT_PATH} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return ExpertLayout(True, _count(fields, "expertsPerLayer"), _count(fields, "numLayers"))


def _refusal(exc) -> Exception:
    """The layout's words for a file regular_file would not read."""
    if exc.check == "open":
        return ExpertLayoutError(f"{LAYOUT_PATH} cannot be opened: {exc.text}")
    if exc.check == "not_regular_file":
        return ExpertLayoutError(f"{LAYOUT_PATH} is not a regular file")
    if exc.check == "too_large":
        return ExpertLayoutError(f"{LAYOUT_PATH} is {exc.size} bytes; the engine refuses a layout "
                                 f"over {MAX_LAYOUT_BYTES} bytes (64 MiB)")
    return ExpertLayoutError(f"{LAYOUT_PATH} cannot be read: {exc.text}")


def _count(fields: dict, key: str) -> int:
    if key not in fields:
        raise ExpertLayoutError(f"{LAYOUT_PATH} has no top-level {key!r}")
    value = fields[key]
    if type(value) is not int or value < 0:
        raise ExpertLayoutError(f"{LAYOUT_PATH} {key} is {value!r}; accepts an integer >= 0")
    return value


def _read_all(fd: int, size: int) -> bytes:
    """The whole file (rule 2's read), through regular_file's one reader."""
    from .regular_file import read_all
    return read_all(fd, size)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpertLayoutError(f"{LAYOUT_PATH} is not UTF-8 (byte {exc.start})") from None


_COUNTS = ("numLayers", "expertsPerLayer")


def _refuse_repeats(keys) -> None:
    seen: set = set()
    for key in keys:
        if key in _COUNTS:
            if key in seen:
                raise ExpertLayoutError(f"{LAYOUT_PATH} gives {key} more than once; accepts "
                                        "it once (the engine refuses a duplicate field)")
            seen.add(key)


def _all_scalars(text: str) -> dict:
    """Rule 2: the whole layout, parsed, its top-level members kept in order
    so that a repeated count is seen. Nested objects are dicts built in C; a
    Python hook per object would cost seconds on the ~40,000 objects of a
    real MoE layout. Not the `json` package: it imports `re` and `enum`, 7 ms
    of a cold start."""
    from .errors import JsonArgumentError
    from .jsontext import parse_json_document_members
    try:
        members = parse_json_document_members(text, LAYOUT_PATH)
    except JsonArgumentError as exc:
        raise ExpertLayoutError(str(exc)) from None
    if members is None:
        raise ExpertLayoutError(f"{LAYOUT_PATH} is not a JSON object")
    _refuse_repeats(key for key, _ in members)
    return dict(members)


_JSON_WHITESPACE = b" \t\n\r"


def _head_members(data: bytes) -> dict | None:
    """Rule 1 on `data` (the file's first bytes, or all of them): the head
    members when they decide, else None (rule 2 decides). Depends only on
    the bytes before the first nested value, so any `data` holding those
    gives the same answer."""
    from .jsontext import parse_json_value
    start = 0
    while start < len(data) and data[start] in _JSON_WHITESPACE:
        start += 1
    if data[start:start + 1] != b"{":
        return None
    # A bracket byte is never part of a multi-byte UTF-8 sequence, so the
    # first one is found in the raw bytes; one inside a string among the
    # head members makes the members below fail to parse, and rule 2 decides.
    cut = min((i for i in (data.find(b"[", start), data.find(b"{", start + 1)) if i >= 0),
              default=-1)
    if cut < 0:
        return None
    try:
        prefix = data[start:cut].decode("utf-8")
    except UnicodeDecodeError:
        return None
    last_comma = prefix.rfind(",")
    if last_comma < 0:
        return None
    try:
        members = parse_json_value(prefix[:last_comma] + "}", LAYOUT_PATH)
        # What follows the last comma must be the nested value's key and colon.
        key = parse_json_value("{" + prefix[last_comma + 1:] + "0}", LAYOUT_PATH)
    except Exception:
        return None
    if not isinstance(members, list) or not isinstance(key, list) or len(key) != 1:
        return None
    keys = [name for name, _ in members]
    if not all(name in keys for name in _COUNTS):
        return None
    _refuse_repeats(keys)
    return dict(members)
