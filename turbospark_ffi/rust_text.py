"""Rust's texts for values, so that a message quoting a value reads as the
engine's does: serde_json's compact JSON of a `Value` (`compact`), Rust's
`{:?}` of a str (`rust_debug_str`), Rust's `{}` of an f64
(`rust_display_f64`), and serde_json 1.0.151's text of an f64 (`json_f64`,
what it writes for a float and shows in `floating point `x``).

serde_json 1.0.151 writes floats with the zmij crate, not ryu as older
releases (Debian's 1.0.87) did: the same digits and the same switch to an
exponent (below 1e-5, from 1e16), but a positive exponent carries its sign:
`1.8446744073709552e+19` where ryu wrote `1.8446744073709552e19` (the
engine's sample measures exactly that text).

The digits of every float form come from `repr`: Python, zmij, ryu and
core's Display all give the shortest digit string that reads back as the same
double, so only the layout differs, and the layout rules are zmij's and
core::fmt's.
"""

from __future__ import annotations

__all__ = ["compact", "rust_debug_str", "rust_display_f64", "json_f64", "json_string"]

# Other_Grapheme_Extend (Unicode 15): characters Rust's str Debug escapes as
# \u{..} although they are not combining marks (Mn/Me), which are escaped too.
# (The emoji modifiers U+1F3FB..F are not: Rust prints them, the oracle saw.)
# Characters assigned after the Unicode of this Python (14.0 for 3.11) are
# escaped here and printed by Rust: a gap no table here closes.
_OTHER_GRAPHEME_EXTEND = frozenset(
    [0x09BE, 0x09D7, 0x0B3E, 0x0B57, 0x0BBE, 0x0BD7, 0x0CC2, 0x0CD5, 0x0CD6,
     0x0D3E, 0x0D57, 0x0DCF, 0x0DDF, 0x1B35, 0x200C, 0x302E, 0x302F, 0xFF9E,
     0xFF9F, 0x1133E, 0x11357, 0x114B0, 0x114BD, 0x115AF, 0x11930, 0x1D165,
     0x1D16E, 0x1D16F, 0x1D170, 0x1D171, 0x1D172]
    + list(range(0xE0020, 0xE0080)))
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
    import unicodedata  # only for non-ASCII text (0.3 ms of start-up otherwise)
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


def json_f64(x: float) -> str:
    """serde_json 1.0.151's float text (zmij's `format_finite`): `1.5`, `2.0`,
    `-0.0`, `0.00001`, `1e-6`, `12340000000.0`, `1e+16`, `1.5e+300`."""
    sign = "-" if str(x).startswith("-") else ""
    if x == 0:
        return sign + "0.0"
    digits, point = _digits(x)
    exp = point - 1  # x = d.ddd * 10**exp
    length = len(digits)
    if -5 <= exp <= 15:
        if length - 1 <= exp:
            return sign + digits + "0" * (exp + 1 - length) + ".0"
        if exp >= 0:
            return sign + digits[:exp + 1] + "." + digits[exp + 1:]
        return sign + "0." + "0" * (-exp - 1) + digits
    mantissa = digits if length == 1 else digits[0] + "." + digits[1:]
    return sign + mantissa + ("e-" if exp < 0 else "e+") + str(abs(exp))


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
        return json_f64(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, list):
        return "[" + ",".join(compact(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json_string(k) + ":" + compact(v) for k, v in value.items()) + "}"
    raise TypeError(f"compact: not a JSON value: {type(value).__name__}")
