"""`packed_experts/layout.json`: how many routed experts the install has.

The blocker preview needs two numbers from a file that is about 22 MB on a
real MoE install (40 layers x 256 experts). Parsing all of it in Python takes
a few hundred milliseconds, so the reader takes the top-level scalars from the
head of the file -- the engine's writer puts `expertStride`, `numLayers` and
`expertsPerLayer` before the large `layers` array -- and falls back to parsing
the whole file only when a layout is ordered otherwise. Either way the answer
is the same; only the cost differs.
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

    @property
    def is_moe(self) -> bool:
        return self.experts_per_layer > 0


NO_LAYOUT = ExpertLayout(False, 0, 0)


def load_expert_layout(model_dir: str) -> ExpertLayout:
    path = os.path.join(model_dir, LAYOUT_PATH)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return NO_LAYOUT
    except (OSError, ValueError) as exc:
        raise ExpertLayoutError(f"{LAYOUT_PATH} cannot be opened: "
                                f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        import stat
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ExpertLayoutError(f"{LAYOUT_PATH} is not a regular file")
        if info.st_size > MAX_LAYOUT_BYTES:
            raise ExpertLayoutError(f"{LAYOUT_PATH} is {info.st_size} bytes; the engine "
                                    f"refuses a layout over {MAX_LAYOUT_BYTES} bytes (64 MiB)")
        head = os.pread(fd, _HEAD_BYTES, 0)
        fields = _leading_scalars(head) if len(head) < info.st_size else None
        if fields is None:
            fields = _all_scalars(_read_all(fd, info.st_size))
    except OSError as exc:
        raise ExpertLayoutError(f"{LAYOUT_PATH} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return ExpertLayout(True, _count(fields, "expertsPerLayer"), _count(fields, "numLayers"))


def _count(fields: dict, key: str) -> int:
    if key not in fields:
        raise ExpertLayoutError(f"{LAYOUT_PATH} has no top-level {key!r}")
    value = fields[key]
    if type(value) is not int or value < 0:
        raise ExpertLayoutError(f"{LAYOUT_PATH} {key} is {value!r}; accepts an integer >= 0")
    return value


def _read_all(fd: int, size: int) -> str:
    chunks = []
    got = 0
    while got < size:
        chunk = os.pread(fd, size - got, got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpertLayoutError(f"{LAYOUT_PATH} is not UTF-8 (byte {exc.start})") from None


def _all_scalars(text: str) -> dict:
    """The whole layout, parsed: for a small layout (it fits in the head), or
    one whose scalars do not lead. Objects are dicts built in C; the options
    parser's duplicate-aware pairs would call back into Python for each of
    the ~40,000 objects of a real MoE layout (seconds, measured). Not the
    `json` package: it imports `re` and `enum`, 7 ms of a cold start."""
    from .errors import JsonArgumentError
    from .wire import parse_json_document
    try:
        value = parse_json_document(text, LAYOUT_PATH)
    except JsonArgumentError as exc:
        raise ExpertLayoutError(str(exc)) from None
    if not isinstance(value, dict):
        raise ExpertLayoutError(f"{LAYOUT_PATH} is not a JSON object")
    return value


def _leading_scalars(head: bytes) -> dict | None:
    """`numLayers` and `expertsPerLayer` from the top-level keys that precede
    the first array or object value; None when they are not both there."""
    from .wire import parse_json_value
    text = head.decode("utf-8", "ignore")
    start = text.find("{")
    if start < 0 or text[:start].strip():
        return None
    fields: dict = {}
    # Split off the prefix up to the first nested value: the scalars before it
    # parse as an ordinary object once it is closed.
    cut = min((i for i in (text.find("[", start), text.find("{", start + 1)) if i >= 0),
              default=-1)
    if cut < 0:
        return None
    prefix = text[start:cut]
    last_comma = prefix.rfind(",")
    if last_comma < 0:
        return None
    try:
        pairs = parse_json_value(prefix[:last_comma] + "}", LAYOUT_PATH)
    except Exception:
        return None
    fields.update(pairs)
    if "numLayers" in fields and "expertsPerLayer" in fields:
        return fields
    return None
