"""JSON text decoded straight into a declared type, as serde_json 1.0.151
decodes it into a `#[derive(Deserialize)]` Rust type: the same acceptance,
the same values and, for a refusal, serde_json's own error text with its
` at line L column C` (TypedJsonError.text), byte for byte.

The engine's open decodes its options text this way, and a host compares our
answer with the open's, so every rule below is serde_json's, read from its
source (de.rs, read.rs, error.rs of 1.0.151) and checked against an oracle
built from serde's sources (tests/oracle/) and the engine's measured sample:

- a position is the byte count read so far on the current line: `error`
  reports the index after the last byte read, `peek_error` one byte further
  (the byte looked at); errors raised by a visitor (invalid type, duplicate
  field, ...) take the index at the moment they leave the innermost
  deserialize call, which for a struct is after `}`/`]` and the whitespace
  before it were consumed;
- whitespace is space, \\t, \\n, \\r only (no BOM, no U+00A0);
- a known value is decoded as its type (Value for ANY: 128 levels at most,
  counting the struct itself); an unknown key's value is skipped by
  `ignore_value`: any depth, any size, numbers never converted, strings'
  escapes checked but never decoded;
- numbers as serde_json without `float_roundtrip`: an integer is u64, a
  negative one i64, anything else (fraction, exponent, `-0`, past the
  64-bit range) f64 computed as significand * 10^exp in double arithmetic
  (`_f64_from_parts`), which Python's float operations reproduce exactly.

Types are values: ANY, STRING, BOOL, U32, U64, F64, Option(T), Seq(T),
Enum(name, variants), Struct(name, fields of Field(name, type, required)).
`decode(text, root)` returns Python values (StructValue for a Struct).

One path: serde's steps in Python. Measured (the 2-core shared VM of
docs/performance.md, CPython 3.11, best of 5 timeit runs): the bench's
2-key options text in 5.2 us, `{}` in 1.5 us, a 7-key text in 14.7 us. A
fast path through the C scanner of `_json` saved 2 us on the bench's text
(under 1% of a first plan) and 8 us on the 7-key one, once per call that
reaches Python: not worth a second implementation of every rule. Import:
no regex, no json package.

`fast_float` and `shallow` serve a C scan of a document whose values are
then checked by their reader (manifest_arch.py's; its tests hold it equal to
`decode` over generated texts).
"""

from __future__ import annotations

__all__ = ["TypedJsonError", "ANY", "STRING", "BOOL", "U32", "U64", "F64",
           "fast_float", "shallow",
           "Option", "Seq", "Enum", "Field", "Struct", "StructValue", "decode",
           "RECURSION_LIMIT"]

RECURSION_LIMIT = 128  # serde_json's remaining_depth at the start
_U64_MAX = (1 << 64) - 1
_DIGITS = "0123456789"
_WS = " \t\n\r"
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f",
                   "n": "\n", "r": "\r", "t": "\t"}

# serde_json's ErrorCode texts. Its "invalid unicode code point" is not
# among them: from_str reads a &str, whose bytes are UTF-8 already, and a
# \u escape pair always makes a valid character.
EOF_VALUE = "EOF while parsing a value"
EOF_LIST = "EOF while parsing a list"
EOF_OBJECT = "EOF while parsing an object"
EOF_STRING = "EOF while parsing a string"
EXPECTED_COLON = "expected `:`"
EXPECTED_LIST_COMMA = "expected `,` or `]`"
EXPECTED_OBJECT_COMMA = "expected `,` or `}`"
EXPECTED_IDENT = "expected ident"
EXPECTED_VALUE = "expected value"
INVALID_ESCAPE = "invalid escape"
INVALID_NUMBER = "invalid number"
OUT_OF_RANGE = "number out of range"
CONTROL_CHAR = "control character (\\u0000-\\u001F) found while parsing a string"
KEY_NOT_STRING = "key must be a string"
LONE_SURROGATE = "lone leading surrogate in hex escape"
END_OF_HEX = "unexpected end of hex escape"
TRAILING_COMMA = "trailing comma"
TRAILING_CHARACTERS = "trailing characters"
RECURSION = "recursion limit exceeded"


class TypedJsonError(ValueError):
    """serde_json's error: `.text` is its Display (message + ` at line L
    column C`), `.message` the part before the position, `.line`/`.column`
    serde's numbers (1-based line, column = bytes read on that line)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.text = f"{message} at line {line} column {column}" if line else message
        super().__init__(self.text)

    def __str__(self) -> str:
        return self.text


class _Unpositioned(Exception):
    """A visitor's error (serde's de::Error::custom): it takes its position
    where it leaves the innermost deserialize call (serde_json's fix_position)."""


# ---------------------------------------------------------------- the types

class _Type:
    __slots__ = ()
    kind = ""

    def _key(self) -> tuple:
        return (self.kind,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Type) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")


class _Scalar(_Type):
    __slots__ = ("kind", "expecting")

    def __init__(self, kind: str, expecting: str) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "expecting", expecting)

    def __repr__(self) -> str:
        return self.kind


ANY = _Scalar("ANY", "any valid JSON value")
STRING = _Scalar("STRING", "a string")
BOOL = _Scalar("BOOL", "a boolean")
U32 = _Scalar("U32", "u32")
U64 = _Scalar("U64", "u64")
F64 = _Scalar("F64", "f64")


class _Wrapper(_Type):
    """A type around one inner type (Option, Seq)."""

    __slots__ = ("inner",)

    def __init__(self, inner: _Type) -> None:
        object.__setattr__(self, "inner", inner)

    def _key(self) -> tuple:
        return (self.kind, self.inner)

    def __repr__(self) -> str:
        return f"{self.kind}({self.inner!r})"


class Option(_Wrapper):
    """Rust's Option<T>: `null` is None, anything else a T."""

    __slots__ = ()
    kind = "Option"


class Seq(_Wrapper):
    """Rust's Vec<T>: a JSON array of T."""

    __slots__ = ()
    kind = "Seq"


class Enum(_Type):
    """A derive(Deserialize) enum of unit variants, given as a JSON string
    (or serde's `{"variant": null}` form); decodes to the variant's name."""

    __slots__ = ("name", "variants")
    kind = "Enum"

    def __init__(self, name: str, variants: tuple[str, ...]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "variants", tuple(variants))

    def _key(self) -> tuple:
        return (self.kind, self.name, self.variants)

    def __repr__(self) -> str:
        return f"Enum({self.name!r}, {self.variants!r})"


class Field:
    """One field of a Struct: its JSON name, its type, and whether serde
    refuses its absence (`missing field`); a field that is not required
    takes its default (left out of StructValue.fields)."""

    __slots__ = ("name", "type", "required")

    def __init__(self, name: str, type: _Type, required: bool = False) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "required", required)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Field is frozen")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Field) and (self.name, self.type, self.required) == (
            other.name, other.type, other.required)

    def __hash__(self) -> int:
        return hash((self.name, self.type, self.required))

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, required={self.required})"


class Struct(_Type):
    """A derive(Deserialize) struct without deny_unknown_fields: an object
    (unknown keys skipped) or an array read positionally in field order."""

    __slots__ = ("name", "fields", "by_name")
    kind = "Struct"

    def __init__(self, name: str, fields: tuple[Field, ...]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fields", tuple(fields))
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})

    def _key(self) -> tuple:
        return (self.kind, self.name, self.fields)

    @property
    def expecting(self) -> str:
        return "struct " + self.name

    def __repr__(self) -> str:
        return f"Struct({self.name!r}, {self.fields!r})"


class StructValue:
    """A decoded Struct. `fields`: the fields given and not null, in the
    text's order; `unknown_keys`: the keys skipped (first occurrence order,
    each once); `captured`: for a root struct, the raw text of the last value
    of each captured unknown key (those keys are not in unknown_keys)."""

    __slots__ = ("fields", "unknown_keys", "captured")

    def __init__(self, fields: dict, unknown_keys: tuple[str, ...],
                 captured: dict[str, str]) -> None:
        self.fields = fields
        self.unknown_keys = unknown_keys
        self.captured = captured

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StructValue) and (
            self.fields, self.unknown_keys, self.captured) == (
            other.fields, other.unknown_keys, other.captured)

    def __repr__(self) -> str:
        return (f"StructValue(fields={self.fields!r}, unknown_keys={self.unknown_keys!r},"
                f" captured={self.captured!r})")


def _unexpected_float(x: float) -> str:
    from .rust_text import json_f64
    return f"floating point `{json_f64(x)}`"


def _unexpected_str(s: str) -> str:
    from .rust_text import rust_debug_str
    return "string " + rust_debug_str(s)


def _one_of(names: tuple[str, ...]) -> str:
    if len(names) == 1:
        return f"`{names[0]}`"
    if len(names) == 2:
        return f"`{names[0]}` or `{names[1]}`"
    return "one of " + ", ".join(f"`{n}`" for n in names)


def _unknown_variant(value: str, variants: tuple[str, ...]) -> _Unpositioned:
    if not variants:
        return _Unpositioned(f"unknown variant `{value}`, there are no variants")
    return _Unpositioned(f"unknown variant `{value}`, expected {_one_of(variants)}")


# ------------------------------------------------------------ the decoder

class _Decoder:
    """serde_json's Deserializer over a str: `i` is the index of the next
    character (serde's `index`, in characters; positions are turned into
    serde's byte columns only when an error is raised)."""

    __slots__ = ("text", "i", "n", "depth")

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.n = len(text)
        self.depth = RECURSION_LIMIT

    # -- positions and errors
    def _offset(self, i: int) -> int:
        text = self.text
        return i if text.isascii() else len(text[:i].encode("utf-8", "surrogatepass"))

    def _fail(self, message: str, offset: int) -> TypedJsonError:
        data = self.text.encode("utf-8", "surrogatepass")
        offset = min(offset, len(data))
        line_start = data.rfind(b"\n", 0, offset) + 1
        return TypedJsonError(message, data.count(b"\n", 0, line_start) + 1,
                              offset - line_start)

    def at(self, i: int, message: str) -> TypedJsonError:
        """serde's `error`: everything before character i was read."""
        return self._fail(message, self._offset(i))

    def after(self, i: int, message: str) -> TypedJsonError:
        """serde's `peek_error`, or `error` after next() read character i:
        one byte of character i was read too."""
        return self._fail(message, self._offset(i) + 1)

    # -- bytes
    def ws(self) -> str:
        """parse_whitespace: skip space, \\t, \\n, \\r; the next character or ''."""
        text, i, n = self.text, self.i, self.n
        if i < n and text[i] not in _WS:
            return text[i]
        while i < n and text[i] in _WS:
            i += 1
        self.i = i
        return text[i] if i < n else ""

    def parse_ident(self, rest: str) -> None:
        text, n = self.text, self.n
        for expected in rest:
            i = self.i
            if i >= n:
                raise self.at(i, EOF_VALUE)
            self.i = i + 1
            if text[i] != expected:
                raise self.after(i, EXPECTED_IDENT)

    def enter(self) -> None:
        """check_recursion: one more level of array/object being decoded."""
        self.depth -= 1
        if self.depth == 0:
            raise self.after(self.i, RECURSION)

    def end(self) -> None:
        if self.ws():
            raise self.after(self.i, TRAILING_CHARACTERS)

    def colon(self) -> None:
        c = self.ws()
        if c == ":":
            self.i += 1
        elif c:
            raise self.after(self.i, EXPECTED_COLON)
        else:
            raise self.after(self.i, EOF_OBJECT)

    def seq_next(self, first: bool) -> bool:
        """SeqAccess::next_element up to the element: True if one follows."""
        c = self.ws()
        if c == "]":
            return False
        if c == "," and not first:
            self.i += 1
            c = self.ws()
            if c == "]":
                raise self.after(self.i, TRAILING_COMMA)
            if not c:
                raise self.after(self.i, EOF_VALUE)
            return True
        if not c:
            raise self.after(self.i, EOF_LIST)
        if first:
            return True
        raise self.after(self.i, EXPECTED_LIST_COMMA)

    def end_seq(self) -> None:
        c = self.ws()
        if c == "]":
            self.i += 1
            return
        if c == ",":
            self.i += 1
            after = self.ws()
            raise self.after(self.i, TRAILING_COMMA if after == "]" else TRAILING_CHARACTERS)
        raise self.after(self.i, EOF_LIST if not c else TRAILING_CHARACTERS)

    def map_next_key(self, first: bool) -> str | None:
        """MapAccess::next_key: the next key (unescaped), or None at `}`."""
        c = self.ws()
        if c == "}":
            return None
        if c == "," and not first:
            self.i += 1
            c = self.ws()
        elif not c:
            raise self.after(self.i, EOF_OBJECT)
        elif not first:
            raise self.after(self.i, EXPECTED_OBJECT_COMMA)
        if c == '"':
            self.i += 1
            return self.parse_str()
        if c == "}":
            raise self.after(self.i, TRAILING_COMMA)
        raise self.after(self.i, KEY_NOT_STRING if c else EOF_VALUE)

    def end_map(self) -> None:
        c = self.ws()
        if c == "}":
            self.i += 1
            return
        if c == ",":
            raise self.after(self.i, TRAILING_COMMA)
        raise self.after(self.i, EOF_OBJECT if not c else TRAILING_CHARACTERS)

    # -- numbers (serde_json's parse_integer and friends, without float_roundtrip)
    def parse_integer(self, positive: bool) -> tuple[str, object]:
        """('u', int) for a u64, ('i', int) for a negative i64, ('f', float)."""
        text, i, n = self.text, self.i, self.n
        if i >= n:
            raise self.at(i, EOF_VALUE)
        c = text[i]
        if c == "0":
            self.i = i + 1
            if i + 1 < n and text[i + 1] in _DIGITS:
                raise self.after(i + 1, INVALID_NUMBER)
            return self.parse_number(positive, 0)
        if c not in "123456789":
            self.i = i + 1
            raise self.after(i, INVALID_NUMBER)
        j = i + 1
        while j < n and text[j] in _DIGITS:
            j += 1
        # The significand grows while it fits a u64 (at most 20 digits); the
        # digits past that only count as a power of ten.
        fits = j - i if j - i < 20 else (20 if int(text[i:i + 20]) <= _U64_MAX else 19)
        self.i = i + fits
        significand = int(text[i:i + fits])
        if fits == j - i:
            return self.parse_number(positive, significand)
        return "f", self.parse_long_integer(positive, significand)

    def parse_number(self, positive: bool, significand: int) -> tuple[str, object]:
        c = self.text[self.i] if self.i < self.n else ""
        if c == ".":
            return "f", self.parse_decimal(positive, significand, 0)
        if c == "e" or c == "E":
            return "f", self.parse_exponent(positive, significand, 0)
        if positive:
            return "u", significand
        if significand == 0:
            return "f", -0.0  # serde_json reads `-0` as the float -0.0
        if significand <= 1 << 63:
            return "i", -significand
        return "f", -float(significand)

    def parse_long_integer(self, positive: bool, significand: int) -> float:
        text, i, n = self.text, self.i, self.n
        j = i
        while j < n and text[j] in _DIGITS:
            j += 1
        self.i = j
        c = text[j] if j < n else ""
        if c == ".":
            return self.parse_decimal(positive, significand, j - i)
        if c == "e" or c == "E":
            return self.parse_exponent(positive, significand, j - i)
        return self.f64_from_parts(positive, significand, j - i)

    def parse_decimal(self, positive: bool, significand: int, exponent: int) -> float:
        text, n = self.text, self.n
        j = start = self.i + 1
        while j < n and text[j] in _DIGITS:
            grown = significand * 10 + ord(text[j]) - 48
            if grown > _U64_MAX:
                self.i = j
                return self.parse_decimal_overflow(positive, significand,
                                                   exponent - (j - start))
            significand = grown
            j += 1
        self.i = j
        if j == start:
            raise self.after(j, INVALID_NUMBER if j < n else EOF_VALUE)
        exponent -= j - start
        if j < n and text[j] in "eE":
            return self.parse_exponent(positive, significand, exponent)
        return self.f64_from_parts(positive, significand, exponent)

    def parse_decimal_overflow(self, positive: bool, significand: int, exponent: int) -> float:
        text, j, n = self.text, self.i, self.n
        while j < n and text[j] in _DIGITS:
            j += 1
        self.i = j
        if j < n and text[j] in "eE":
            return self.parse_exponent(positive, significand, exponent)
        return self.f64_from_parts(positive, significand, exponent)

    def parse_exponent(self, positive: bool, significand: int, starting: int) -> float:
        text, n = self.text, self.n
        i = self.i + 1
        sign = text[i] if i < n else ""
        if sign == "+" or sign == "-":
            i += 1
        if i >= n:
            self.i = i
            raise self.at(i, EOF_VALUE)
        self.i = i + 1
        if text[i] not in _DIGITS:
            raise self.after(i, INVALID_NUMBER)
        exp = ord(text[i]) - 48
        j = i + 1
        while j < n and text[j] in _DIGITS:
            j += 1
            exp = exp * 10 + ord(text[j - 1]) - 48
            if exp > 0x7FFFFFFF:  # i32 overflow: 0 or out of range, digits skipped
                self.i = j
                return self.parse_exponent_overflow(positive, significand == 0, sign != "-")
        self.i = j
        final = starting - exp if sign == "-" else starting + exp
        final = max(-0x80000000, min(0x7FFFFFFF, final))  # i32 saturating
        return self.f64_from_parts(positive, significand, final)

    def parse_exponent_overflow(self, positive: bool, zero: bool, positive_exp: bool) -> float:
        if not zero and positive_exp:
            raise self.at(self.i, OUT_OF_RANGE)
        text, j, n = self.text, self.i, self.n
        while j < n and text[j] in _DIGITS:
            j += 1
        self.i = j
        return 0.0 if positive else -0.0

    def f64_from_parts(self, positive: bool, significand: int, exponent: int) -> float:
        # serde_json's f64_from_parts, operation for operation: IEEE double
        # multiply/divide round the same in Python as in Rust, and
        # float("1eK") is serde's POW10[K], the correctly rounded 10**K (a
        # table of them cost 0.25 ms of import).
        f = float(significand)
        while True:
            if abs(exponent) <= 308:
                if exponent >= 0:
                    f *= float("1e%d" % exponent)
                    if f == float("inf"):
                        raise self.at(self.i, OUT_OF_RANGE)
                else:
                    f /= float("1e%d" % -exponent)
                break
            if f == 0.0:
                break
            if exponent >= 0:
                raise self.at(self.i, OUT_OF_RANGE)
            f /= 1e308
            exponent += 308
        return f if positive else -f

    def ignore_integer(self) -> None:
        text, i, n = self.text, self.i, self.n
        if i >= n:
            raise self.at(i, INVALID_NUMBER)
        c = text[i]
        j = i + 1
        if c == "0":
            if j < n and text[j] in _DIGITS:
                self.i = j
                raise self.after(j, INVALID_NUMBER)
        elif c in "123456789":
            while j < n and text[j] in _DIGITS:
                j += 1
        else:
            self.i = j
            raise self.after(i, INVALID_NUMBER)
        self.i = j
        c = text[j] if j < n else ""
        if c == ".":
            self.ignore_decimal()
        elif c == "e" or c == "E":
            self.ignore_exponent()

    def ignore_decimal(self) -> None:
        text, n = self.text, self.n
        j = start = self.i + 1
        while j < n and text[j] in _DIGITS:
            j += 1
        self.i = j
        if j == start:
            raise self.after(j, INVALID_NUMBER)
        if j < n and text[j] in "eE":
            self.ignore_exponent()

    def ignore_exponent(self) -> None:
        text, n = self.text, self.n
        i = self.i + 1
        if i < n and text[i] in "+-":
            i += 1
        if i >= n:
            self.i = i
            raise self.at(i, INVALID_NUMBER)
        self.i = i + 1
        if text[i] not in _DIGITS:
            raise self.after(i, INVALID_NUMBER)
        j = i + 1
        while j < n and text[j] in _DIGITS:
            j += 1
        self.i = j

    # -- strings (read.rs: parse_str, ignore_str and the escapes)
    def _string_run(self, i: int, ignoring: bool) -> int:
        """The index of the first `"`, backslash or control character from
        i; raises at a control character or the end of the text."""
        text, n = self.text, self.n
        quote = text.find('"', i)
        end = quote if quote >= 0 else n
        backslash = text.find("\\", i, end)
        if backslash >= 0:
            end = backslash
        if end > i and min(text[i:end]) < " ":
            k = i
            while text[k] >= " ":
                k += 1
            # parse_str reads the control byte before failing, ignore_str does not
            self.i = k if ignoring else k + 1
            raise self.at(self.i, CONTROL_CHAR)
        if end == n:
            self.i = n
            raise self.at(n, EOF_STRING)
        return end

    def parse_str(self) -> str:
        """The string whose opening quote was just read, unescaped."""
        text = self.text
        start = self.i
        quote = text.find('"', start)
        if quote > start:  # the common case: no escape, no control character
            run = text[start:quote]
            if "\\" not in run and min(run) >= " ":
                self.i = quote + 1
                return run
        end = self._string_run(start, False)
        if text[end] == '"':
            self.i = end + 1
            return text[start:end]
        parts = []
        while True:
            parts.append(text[start:end])
            if text[end] == '"':
                self.i = end + 1
                return "".join(parts)
            self.i = end + 1
            parts.append(self.parse_escape())
            start = self.i
            end = self._string_run(start, False)

    def ignore_str(self) -> None:
        text = self.text
        end = self._string_run(self.i, True)
        while text[end] != '"':
            self.i = end + 1
            self.ignore_escape()
            end = self._string_run(self.i, True)
        self.i = end + 1

    def parse_escape(self) -> str:
        text, i = self.text, self.i
        if i >= self.n:
            raise self.at(i, EOF_STRING)
        c = text[i]
        self.i = i + 1
        simple = _SIMPLE_ESCAPES.get(c)
        if simple is not None:
            return simple
        if c == "u":
            return self.parse_unicode_escape()
        raise self.after(i, INVALID_ESCAPE)

    def ignore_escape(self) -> None:
        text, i = self.text, self.i
        if i >= self.n:
            raise self.at(i, EOF_STRING)
        c = text[i]
        self.i = i + 1
        if c == "u":
            self.decode_hex_escape()
        elif c not in _SIMPLE_ESCAPES:
            raise self.after(i, INVALID_ESCAPE)

    def decode_hex_escape(self) -> int:
        """Four hex digits; serde reads four BYTES before judging them."""
        i = self.i
        digits = self.text[i:i + 4]
        if len(digits) == 4 and _HEX.issuperset(digits):
            self.i = i + 4
            return int(digits, 16)
        if self._offset(self.n) - self._offset(i) < 4:
            self.i = self.n
            raise self.at(self.n, EOF_STRING)
        self.i = i + 4
        raise self._fail(INVALID_ESCAPE, self._offset(i) + 4)

    def parse_unicode_escape(self) -> str:
        text, n = self.text, self.n
        code = self.decode_hex_escape()
        if 0xDC00 <= code <= 0xDFFF:
            raise self.at(self.i, LONE_SURROGATE)
        if not 0xD800 <= code <= 0xDBFF:
            return chr(code)
        for expected in "\\u":  # a leading surrogate must be followed by \u
            i = self.i
            if i >= n:
                raise self.at(i, EOF_STRING)
            self.i = i + 1
            if text[i] != expected:
                raise self.after(i, END_OF_HEX)
        low = self.decode_hex_escape()
        if not 0xDC00 <= low <= 0xDFFF:
            raise self.at(self.i, LONE_SURROGATE)
        return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))

    # -- values
    def ignore_scalar(self, c: str) -> bool:
        """One scalar of ignore_value; False if c opens an array or object."""
        if c == '"':
            self.i += 1
            self.ignore_str()
        elif c in _DIGITS:
            self.ignore_integer()
        elif c == "-":
            self.i += 1
            self.ignore_integer()
        elif c == "n" or c == "t" or c == "f":
            self.i += 1
            self.parse_ident("ull" if c == "n" else "rue" if c == "t" else "alse")
        elif c == "[" or c == "{":
            return False
        else:
            raise self.after(self.i, EXPECTED_VALUE)
        return True

    def ignore_value(self) -> None:
        """serde_json's ignore_value (IgnoredAny): iterative, no depth limit."""
        stack: list[str] = []
        enclosing = ""
        while True:
            c = self.ws()
            if not c:
                raise self.after(self.i, EOF_VALUE)
            if self.ignore_scalar(c):
                if enclosing:
                    frame, enclosing = enclosing, ""
                elif stack:
                    frame = stack.pop()
                else:
                    return
                accept_comma = True
            else:
                if enclosing:
                    stack.append(enclosing)
                    enclosing = ""
                self.i += 1
                frame, accept_comma = c, False
            while True:
                c = self.ws()
                if c == "," and accept_comma:
                    self.i += 1
                    break
                if (c == "]" and frame == "[") or (c == "}" and frame == "{"):
                    self.i += 1
                    if not stack:
                        return
                    frame, accept_comma = stack.pop(), True
                    continue
                if not c:
                    raise self.after(self.i, EOF_LIST if frame == "[" else EOF_OBJECT)
                if accept_comma:
                    raise self.after(self.i, EXPECTED_LIST_COMMA if frame == "["
                                     else EXPECTED_OBJECT_COMMA)
                break
            if frame == "{":
                self.ignore_key()
            enclosing = frame

    def ignore_key(self) -> None:
        c = self.ws()
        if c != '"':
            raise self.after(self.i, KEY_NOT_STRING if c else EOF_OBJECT)
        self.i += 1
        self.ignore_str()
        c = self.ws()
        if c != ":":
            raise self.after(self.i, EXPECTED_COLON if c else EOF_OBJECT)
        self.i += 1

    def any_value(self) -> object:
        """deserialize_any into serde_json::Value, as Python values."""
        c = self.ws()
        if c == '"':
            self.i += 1
            return self.parse_str()
        if c in _DIGITS and c:
            return self.parse_integer(True)[1]
        if c == "-":
            self.i += 1
            return self.parse_integer(False)[1]
        if c == "[":
            self.enter()
            self.i += 1
            items = []
            first = True
            while self.seq_next(first):
                first = False
                items.append(self.any_value())
            self.depth += 1
            self.end_seq()
            return items
        if c == "{":
            return self.any_map()
        if c == "n" or c == "t" or c == "f":
            self.i += 1
            self.parse_ident("ull" if c == "n" else "rue" if c == "t" else "alse")
            return None if c == "n" else c == "t"
        raise self.after(self.i, EXPECTED_VALUE if c else EOF_VALUE)

    def any_map(self) -> dict:
        self.enter()
        self.i += 1
        members: dict = {}
        first = True
        while True:
            key = self.map_next_key(first)
            if key is None:
                break
            first = False
            self.colon()
            # serde_json's Map keeps a repeated key at its first place, last value
            members[key] = self.any_value()
        self.depth += 1
        self.end_map()
        return members

    def invalid_type(self, expecting: str) -> TypedJsonError:
        """peek_invalid_type: reads the value to name it in serde's words."""
        c = self.text[self.i] if self.i < self.n else ""
        if c == "n" or c == "t" or c == "f":
            self.i += 1
            self.parse_ident("ull" if c == "n" else "rue" if c == "t" else "alse")
            what = "null" if c == "n" else "boolean `true`" if c == "t" else "boolean `false`"
        elif c == "-" or (c and c in _DIGITS):
            if c == "-":
                self.i += 1
            tag, number = self.parse_integer(c != "-")
            what = _unexpected_float(number) if tag == "f" else f"integer `{number}`"
        elif c == '"':
            self.i += 1
            what = _unexpected_str(self.parse_str())
        elif c == "[" or c == "{":
            what = "sequence" if c == "[" else "map"
        else:
            return self.after(self.i, EXPECTED_VALUE)
        return self.at(self.i, f"invalid type: {what}, expected {expecting}")

    # -- declared types
    def typed(self, tp: _Type) -> object:
        kind = tp.kind
        if kind == "ANY":
            return self.any_value()
        if kind == "Option":
            if self.ws() == "n":
                self.i += 1
                self.parse_ident("ull")
                return None
            return self.typed(tp.inner)
        if kind == "Struct":
            return self.struct_value(tp, None)
        c = self.ws()
        if not c:
            raise self.after(self.i, EOF_VALUE)
        if kind == "STRING":
            if c != '"':
                raise self.invalid_type(tp.expecting)
            self.i += 1
            return self.parse_str()
        if kind == "BOOL":
            if c != "t" and c != "f":
                raise self.invalid_type(tp.expecting)
            self.i += 1
            self.parse_ident("rue" if c == "t" else "alse")
            return c == "t"
        if kind == "Seq":
            return self.seq_value(tp, c)
        if kind == "Enum":
            return self.enum_value(tp, c)
        return self.number_value(tp, c)

    def number_value(self, tp: _Scalar, c: str) -> object:
        """deserialize_number, then the primitive visitor of u32/u64/f64."""
        if c == "-":
            self.i += 1
            tag, number = self.parse_integer(False)
        elif c in _DIGITS:
            tag, number = self.parse_integer(True)
        else:
            raise self.invalid_type(tp.expecting)
        if tp.kind == "F64":
            return float(number)
        if tag == "f":
            raise self.at(self.i, f"invalid type: {_unexpected_float(number)},"
                                  f" expected {tp.expecting}")
        if tag == "i" or number > (0xFFFFFFFF if tp.kind == "U32" else _U64_MAX):
            raise self.at(self.i, f"invalid value: integer `{number}`, expected {tp.expecting}")
        return number

    def seq_value(self, tp: Seq, c: str) -> list:
        if c != "[":
            raise self.invalid_type("a sequence")
        self.enter()
        self.i += 1
        items = []
        first = True
        while self.seq_next(first):
            first = False
            items.append(self.typed(tp.inner))
        self.depth += 1
        self.end_seq()
        return items

    def variant(self, tp: Enum) -> str:
        """A variant identifier: deserialize_str, then the variant visitor."""
        c = self.ws()
        if c != '"':
            if not c:
                raise self.after(self.i, EOF_VALUE)
            raise self.invalid_type("variant identifier")
        self.i += 1
        name = self.parse_str()
        if name not in tp.variants:
            raise self.at(self.i, str(_unknown_variant(name, tp.variants)))
        return name

    def enum_value(self, tp: Enum, c: str) -> str:
        """deserialize_enum of unit variants: `"name"` or `{"name": null}`."""
        if c == '"':
            return self.variant(tp)
        if c != "{":
            raise self.after(self.i, EXPECTED_VALUE)
        self.enter()
        self.i += 1
        name = self.variant(tp)
        self.colon()
        c = self.ws()  # unit_variant: deserialize_unit
        if c != "n":
            if not c:
                raise self.after(self.i, EOF_VALUE)
            raise self.invalid_type("unit")
        self.i += 1
        self.parse_ident("ull")
        self.depth += 1
        c = self.ws()
        if c != "}":
            raise self.at(self.i, EXPECTED_VALUE if c else EOF_OBJECT)
        self.i += 1
        return name

    def struct_value(self, tp: Struct, capture: frozenset | None) -> StructValue:
        """deserialize_struct: an object, or an array in field order."""
        c = self.ws()
        if c != "{" and c != "[":
            if not c:
                raise self.after(self.i, EOF_VALUE)
            raise self.invalid_type(tp.expecting)
        self.enter()
        self.i += 1
        end = self.end_map if c == "{" else self.end_seq
        try:
            value = self.struct_map(tp, capture) if c == "{" else self.struct_seq(tp)
        except _Unpositioned as refusal:
            # serde_json ends the map/array before it places a visitor's error
            self.depth += 1
            try:
                end()
            except TypedJsonError:
                pass
            raise self.at(self.i, str(refusal)) from None
        self.depth += 1
        end()
        return value

    def struct_map(self, tp: Struct, capture: frozenset | None) -> StructValue:
        by_name = tp.by_name
        fields: dict = {}
        given: set = set()
        unknown: dict = {}
        captured: dict = {}
        first = True
        while True:
            key = self.map_next_key(first)
            if key is None:
                break
            first = False
            field = by_name.get(key)
            if field is None:
                self.colon()
                if capture and key in capture:
                    self.ws()
                    start = self.i
                    self.ignore_value()
                    captured[key] = self.text[start:self.i]
                else:
                    unknown[key] = None
                    self.ignore_value()
                continue
            if key in given:
                raise _Unpositioned(f"duplicate field `{key}`")
            given.add(key)
            if self.i < self.n and self.text[self.i] == ":":
                self.i += 1
            else:
                self.colon()
            value = self.typed(field.type)
            if value is not None:
                fields[key] = value
        for field in tp.fields:
            if field.required and field.name not in given and field.type.kind != "Option":
                raise _Unpositioned(f"missing field `{field.name}`")
        return StructValue(fields, tuple(unknown), captured)

    def struct_seq(self, tp: Struct) -> StructValue:
        fields: dict = {}
        count = len(tp.fields)
        first = True
        for index, field in enumerate(tp.fields):
            if self.seq_next(first):
                first = False
                value = self.typed(field.type)
                if value is not None:
                    fields[field.name] = value
            elif field.required:
                raise _Unpositioned(
                    f"invalid length {index}, expected struct {tp.name} with {count}"
                    f" element{'' if count == 1 else 's'}")
        return StructValue(fields, (), {})


_CAPTURE = frozenset({"tsffi"})


def decode(text: str, root: _Type, capture: frozenset = _CAPTURE) -> object:
    """`text` decoded as serde_json::from_str::<root> decodes it; raises
    TypedJsonError with serde_json's text. For a Struct root, the raw text of
    each key in `capture` the struct does not declare is kept in .captured."""
    if not isinstance(text, str):
        raise TypeError(f"decode: text must be str, got {type(text).__name__}")
    if not isinstance(root, _Type):
        raise TypeError(f"decode: root must be a typed_json type, got {root!r}")
    decoder = _Decoder(text)
    if root.kind == "Struct":
        value = decoder.struct_value(root, capture)
    else:
        value = decoder.typed(root)
    decoder.end()
    return value


# ------------------------------------------- helpers of a C scan (manifest_arch)

_REFUSED = object()   # a number serde_json refuses (out of range): fine only when ignored


def fast_float(literal: str) -> object:
    """serde_json's f64 of a number literal (without `float_roundtrip`), or
    _REFUSED for one it refuses (out of range)."""
    if len(literal) <= 16 and "e" not in literal and "E" not in literal:
        # At most 15 digits: serde's significand is exact in a double and
        # so is the 10**k it divides by; one rounding, the one float() does.
        return float(literal)
    decoder = _Decoder(literal)
    positive = literal[0] != "-"
    decoder.i = 0 if positive else 1
    try:
        return decoder.parse_integer(positive)[1]
    except TypedJsonError:
        return _REFUSED


# The C scanner recurses on the C stack, one frame per level: a host thread
# may have 16 KiB of it (docs/c-api.md). A text nesting deeper goes through
# `decode`, whose Python frames take no C stack.
_FAST_MAX_DEPTH = 64


def shallow(text: str) -> bool:
    """No array or object in `text` nests more than _FAST_MAX_DEPTH deep
    (False too for a text whose strings do not close: `decode` words that). Cheap for a flat text: only brackets outside strings are
    walked one by one."""
    if text.count("[") + text.count("{") <= _FAST_MAX_DEPTH:
        return True
    parts = text.replace("\\\\", "").replace('\\"', "").split('"')
    if len(parts) % 2 == 0:
        return False
    depth = 0
    for c in "".join(parts[0::2]):
        if c == "[" or c == "{":
            depth += 1
            if depth > _FAST_MAX_DEPTH:
                return False
        elif c == "]" or c == "}":
            depth -= 1
    return True
