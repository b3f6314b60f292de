"""Rust's texts for values, so that a message quoting a value reads as the
engine's does: serde_json's compact JSON of a `Value` (`compact`), Rust's
`{:?}` of a str (`rust_debug_str`), Rust's `{}` of an f64
(`rust_display_f64`), and ryu's shortest form of an f64 (`ryu_f64`, what
serde_json 1.0.151 writes for a float and shows in `floating point `x``).

The digits of every float form come from `repr`: Python and Rust (ryu, and
core's Display) both give the shortest digit string that reads back as the
same double, so only the layout differs, and the layout rules are ryu's and
core::fmt's.
"""

from __future__ import annotations

import unicodedata

__all__ = ["compact", "rust_debug_str", "rust_display_f64", "ryu_f64", "json_string"]

# Other_Grapheme_Extend (Unicode 15): characters Rust's str Debug escapes as
# \u{..} although they are not combining marks (Mn/Me), which are escaped too.
_OTHER_GRAPHEME_EXTEND = frozenset(
    [0x09BE, 0x09D7, 0x0B3E, 0x0B57, 0x0BBE, 0x0BD7, 0x0CC2, 0x0CD5, 0x0CD6,
     0x0D3E, 0x0D57, 0x0DCF, 0x0DDF, 0x1B35, 0x200C, 0x302E, 0x302F, 0xFF9E,
     0xFF9F, 0x1133E, 0x11357, 0x114B0, 0x114BD, 0x115AF, 0x11930, 0x1D165,
     0x1D16E, 0x1D16F, 0x1D170, 0x1D171, 0x1D172]
    + list(range(0x1F3FB, 0x1F400)) + list(range(0xE0020, 0xE0080)))
_DEBUG_SHORT = {"\0": "\\0", "\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"'}
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n",
               "\r": "\\r", "\t": "\\t"}


def _debug_char(ch: str) -> str:
    short = _DEBUG_SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if " " <= ch <= "~":
        return ch
    if (unicodedata.category(ch) in ("Mn", "Me") or code in _OTHER_GRAPHEME_EXTEND
            or not ch.isprintable()):
        # Python's isprintable and Rust's is_printable refuse the same classes
        # (Cc Cf Cs Co Cn Zl Zp, Zs but the space).
        return "\\u{%x}" % code
    return ch


def rust_debug_str(s: str) -> str:
    """Rust's `{:?}` of a str: `"x"` with \\" \\\\ \\n \\t \\r \\0 and \\u{..}."""
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    return '"' + "".join(_debug_char(ch) for ch in s) + '"'


def _digits(x: float) -> tuple[str, int]:
    """The shortest round-trip digits of a finite, non-zero |x| and the decimal
    exponent e such that x = 0.DIGITS * 10**e (so 10**(e-1) <= |x| < 10**e)."""
    text = repr(abs(x))
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    lead_zeros = len(whole + frac) - len((whole + frac).lstrip("0"))
    point = len(whole) - lead_zeros + (int(exp) if exp else 0)
    return digits.rstrip("0") or "0", point


def ryu_f64(x: float) -> str:
    """ryu's `format_finite` (serde_json's float text): `1.5`, `2.0`, `-0.0`,
    `1e300`, `1.5e-7`, `12340000000.0`."""
    sign = "-" if str(x).startswith("-") else ""
    if x == 0:
        return sign + "0.0"
    digits, kk = _digits(x)
    length = len(digits)
    if length <= kk <= 16:
        return sign + digits + "0" * (kk - length) + ".0"
    if 0 < kk <= 16:
        return sign + digits[:kk] + "." + digits[kk:]
    if -5 < kk <= 0:
        return sign + "0." + "0" * (-kk) + digits
    exp = "e" + str(kk - 1)
    if length == 1:
        return sign + digits + exp
    return sign + digits[0] + "." + digits[1:] + exp


def rust_display_f64(x: float) -> str:
    """Rust's `{}` of an f64: never an exponent, no `.0` on a whole number
    (`2`, `-0`, `0.0000001`, `1000...0`), `inf`, `-inf`, `NaN`."""
    if x != x:
        return "NaN"
    sign = "-" if str(x).startswith("-") else ""
    if x in (float("inf"), float("-inf")):
        return sign + "inf"
    if x == 0:
        return sign + "0"
    digits, point = _digits(x)
    if point <= 0:
        return sign + "0." + "0" * (-point) + digits
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return sign + digits[:point] + "." + digits[point:]


def json_string(s: str) -> str:
    """serde_json's string text: only `"`, `\\` and control characters escaped
    (\\b \\f \\n \\r \\t short, the rest \\u00xx), everything else raw."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    out = []
    for ch in s:
        if ch in _JSON_SHORT:
            out.append(_JSON_SHORT[ch])
        elif ch < " ":
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def compact(value: object) -> str:
    """serde_json::to_string of a Value decoded by typed_json (None, bool, int,
    float, str, list, dict): `1.5`, `[]`, `{"a":1}`, `"x"`."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ryu_f64(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, list):
        return "[" + ",".join(compact(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json_string(k) + ":" + compact(v) for k, v in value.items()) + "}"
    raise TypeError(f"compact: not a JSON value: {type(value).__name__}")
