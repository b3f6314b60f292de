"""JSON text in and out: every JSON argument is parsed here, and every
result is written here (`dumps`). The bottom layer: it knows no shape.

Built on the C accelerator `_json` directly rather than the `json` package:
`json` imports `re` and `enum` (10 ms of the embedded interpreter's start-up
here) for features these small, fixed shapes never use. The `json` package is
imported only on the error path, to word a parse failure exactly.

Output is ASCII-only JSON (non-ASCII escaped as \\uXXXX): always valid UTF-8
for a C host, whatever text -- a lone surrogate in an ignored key, say -- a
host sent in.
"""

from __future__ import annotations

import _json

from .errors import JsonArgumentError

__all__ = ["parse_json_object", "parse_json_value", "parse_json_document",
           "parse_json_document_members", "dumps", "encode_string", "show_value",
           "is_utf8_text", "MAX_JSON_DEPTH"]

# A GUI's options object is flat; 64 leaves room for anything a host nests in
# its open-options while refusing the 100,000-deep input that would otherwise
# run the recursive parser into the recursion limit (or a small host thread's
# C stack).
MAX_JSON_DEPTH = 64
_WHITESPACE = " \t\n\r"


class _DuplicateAwarePairs(list):
    """The parsed object's (key, value) pairs in order, duplicates kept, so
    that the options layer can refuse a key it uses given twice."""

    __slots__ = ()


def _refuse_constant(name: str):
    # JSON has no NaN or Infinity; Python's parser accepts them by default.
    raise ValueError(f"{name} is not JSON")


class _Context:
    strict = True
    object_hook = None
    object_pairs_hook = _DuplicateAwarePairs
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_refuse_constant)


_scan_once = _json.make_scanner(_Context)


def _depth_exceeds(text: str, limit: int) -> int | None:
    """The nesting depth if it is over `limit`, else None. Cheap unless the
    text holds more than `limit` openers at all."""
    if text.count("[") + text.count("{") <= limit:
        return None
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in "]}":
            depth -= 1
    return deepest if deepest > limit else None


def parse_json_value(text: str, what: str):
    """Parse `text` as one JSON value; objects come back as `_DuplicateAwarePairs`.

    Raises `JsonArgumentError` naming `what` (the argument) and the position.
    """
    too_deep = _depth_exceeds(text, MAX_JSON_DEPTH)
    if too_deep is not None:
        raise JsonArgumentError(
            f"{what} nests {too_deep} levels deep; accepts at most {MAX_JSON_DEPTH}")
    return _scan_whole(_scan_once, _Context, text, what)


def _scan_whole(scan, context: type, text: str, what: str):
    """`text` as exactly one JSON value (surrounding whitespace allowed),
    scanned by `scan`, the C scanner made from `context`."""
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = scan(text, start)
        if text[end:].strip(_WHITESPACE):
            raise ValueError("trailing data")
    except Exception:  # any failure, RecursionError too: reparse with `json` for an exact message
        raise JsonArgumentError(f"{what} is not valid JSON: {_explain(text)}") from None
    return value


class _DocumentContext(_Context):
    # Objects as dicts built in C (the last of duplicate keys wins, as in
    # `json.loads`): a 22 MB expert layout holds ~40,000 objects, and a
    # Python hook per object costs seconds.
    object_pairs_hook = None


_scan_document = _json.make_scanner(_DocumentContext)


def parse_json_document(text: str, what: str):
    """Parse a file's `text` as one JSON value, objects as plain dicts.

    For documents rather than arguments: no depth pre-scan (it would walk a
    22 MB layout character by character in Python); the C scanner's own
    recursion guard answers a hostile nesting as RecursionError, which is
    reported like any other parse failure. Raises `JsonArgumentError`
    naming `what`.
    """
    return _scan_whole(_scan_document, _DocumentContext, text, what)


_scanstring = _json.scanstring


def parse_json_document_members(text: str, what: str) -> list | None:
    """The top-level members of a document that is a JSON object, as (key,
    value) pairs in order, DUPLICATES KEPT, each value parsed as
    `parse_json_document` parses (dicts, built in C); None for a valid
    document that is not an object. Raises `JsonArgumentError` naming `what`.

    The top level is walked here and each value scanned by the C scanner:
    an object-pairs hook on every object would see duplicates too, but costs
    2.5x the dict parse of a 25 MB layout (measured: 600 ms against 240 ms),
    for the sake of the few top-level keys."""
    n = len(text)
    i = 0
    while i < n and text[i] in _WHITESPACE:
        i += 1
    if not text.startswith("{", i):
        parse_json_document(text, what)
        return None
    members: list = []
    try:
        i += 1
        while text[i] in _WHITESPACE:
            i += 1
        if text[i] == "}":
            i += 1
        else:
            while True:
                if text[i] != '"':
                    raise ValueError("a key")
                key, i = _scanstring(text, i + 1, True)
                while text[i] in _WHITESPACE:
                    i += 1
                if text[i] != ":":
                    raise ValueError("a colon")
                i += 1
                while text[i] in _WHITESPACE:
                    i += 1
                value, i = _scan_document(text, i)
                members.append((key, value))
                while text[i] in _WHITESPACE:
                    i += 1
                if text[i] == ",":
                    i += 1
                    while text[i] in _WHITESPACE:
                        i += 1
                    continue
                if text[i] != "}":
                    raise ValueError("a comma or a brace")
                i += 1
                break
        if text[i:].strip(_WHITESPACE):
            raise ValueError("trailing data")
    except Exception:  # any failure, RecursionError too, as _scan_whole
        raise JsonArgumentError(f"{what} is not valid JSON: {_explain(text)}") from None
    return members


def parse_json_object(text: str, what: str) -> list[tuple[str, object]]:
    """Parse `text` as a JSON object: its (key, value) pairs in order."""
    value = parse_json_value(text, what)
    if not isinstance(value, _DuplicateAwarePairs):
        raise JsonArgumentError(
            f"{what} must be a JSON object, got {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "null"


def _explain(text: str) -> str:
    import json

    def refuse(name: str):
        raise json.JSONDecodeError(f"{name} is not JSON", text, text.find(name))

    try:
        json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno} column {exc.colno} (char {exc.pos})"
    except RecursionError:
        return "nested too deeply"
    except Exception as exc:  # pragma: no cover - json raised something unexpected
        return f"{type(exc).__name__}: {exc}"
    return "the value could not be read"  # pragma: no cover


# A str as a JSON string, ASCII-escaped: exactly what `dumps` writes for it.
encode_string = _json.encode_basestring_ascii


def _refuse_type(value: object):
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


# The C encoder of `_json` (what `json.dumps` runs), without the `json`
# package: compact separators, ASCII escapes by `encode_basestring_ascii`,
# no circular-reference markers (these shapes are trees), NaN refused.
# Measured on a plan object: 2.8 us against 8.0 us for the recursive Python
# encoder it replaces, which matters for the 51 plans of a choices table.
_encode_tree = _json.make_encoder(None, _refuse_type, encode_string, None, ":", ",",
                                  False, False, False)


def is_utf8_text(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (it holds no lone surrogate):
    dumps escapes one as valid JSON, which Swift's decoders still refuse,
    and a C host cannot be handed it as a path."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def dumps(value: object) -> str:
    """Compact ASCII JSON of dicts, lists, tuples, str, int, bool and None."""
    return "".join(_encode_tree(value, 0))


# ---------------------------------------------------------------------------
# The shapes. camelCase keys; the speculation shape is the engine's own
# sessionInfo `"speculation"` object, so a host decodes both with one type.

def show_value(value: object) -> str:
    """A parsed JSON value as a refusal message quotes it: scalars as JSON
    (cut at 80 characters), containers by kind."""
    if isinstance(value, list):
        return "an object" if type(value) is not list else "an array"
    if isinstance(value, float) and value != value:
        return "a non-finite number"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "a number too large for a double"
    text = dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
