"""Option keys to typed requests: the same JSON object a host gives the engine's
open (docs/ENGINE.md section 5), read strictly.

The grammar, in one place:

    speculation         "auto" | "off" (ASCII, any case) | a block in 1..=15:
                        a JSON integer or a string of ASCII digits | null
                        (= auto). A block outside 1..=15 (0 included) is an
                        invalid option, refused here before any install is
                        read, as the engine's options parser refuses it: 0
                        proposes nothing, and block B verifies B+1 rows
                        against the batched verify's cap of 16. (The original module's
                        own range arm in `resolve_speculation` stays, for a
                        Python caller who builds `Speculation.block(16)`.)
    speculativeDrafter  "auto" | "mtp" | "dflash" (exact) | null (= auto)
    temperature         a finite number >= 0 | null (= absent: the open-time
                        decision, which assumes deterministic decoding)
    engineBlocker       a non-empty string (the engine's reason) | null (the
                        engine reported none) | absent (preview the install)

Any other key is ignored -- a host passes its whole open-options object -- and
reported back, EXCEPT a near-miss of a key above (same letters in another
case, or within two edits): that is a typo that would otherwise silently
become a default, so it is refused naming the key it resembles. A key above
given twice is refused. Every refusal names the key, the value it got and
what it accepts.
"""

from __future__ import annotations

from ._value import Value
from .errors import InvalidArgument, JsonArgumentError
from .jsontext import parse_json_object, show_value as _show
from .policy import (ALLOWED_SPECULATION_BLOCKS, ALLOWED_SPECULATION_BLOCKS_TEXT,
                     DRAFTER_SPELLINGS, U32_MAX, Speculation, SpeculativeDrafter)

__all__ = ["OPTION_KEYS", "MAX_OPTIONS_BYTES", "ABSENT", "DEFAULT_OPTIONS", "Options",
           "parse_options", "allowed_block", "decode_text", "near_miss"]

OPTION_KEYS = ("speculation", "speculativeDrafter", "temperature", "engineBlocker")
# A GUI's open-options object is a few hundred bytes; this refuses a 10 MB
# argument before any of it is parsed.
MAX_OPTIONS_BYTES = 1 << 20

_SPECULATION_ACCEPTS = (f'"auto", "off" (any case), null, or a block in '
                        f'{ALLOWED_SPECULATION_BLOCKS_TEXT} as a JSON integer or a string of '
                        'ASCII digits')
_DRAFTER_ACCEPTS = ", ".join(f'"{s}"' for s in DRAFTER_SPELLINGS) + " (exact spelling) or null"
_TEMPERATURE_ACCEPTS = "a finite number >= 0, or null"
_BLOCKER_ACCEPTS = ("a non-empty string without NUL characters (the engine's reason), or null "
                    "(the engine reported none)")


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self):
        return "ABSENT"


ABSENT = _Absent()
"""`engineBlocker` not given at all (as opposed to null)."""


class Options(Value):
    __slots__ = ("speculation", "drafter", "temperature", "engine_blocker", "ignored_keys")

    def __init__(self, speculation: Speculation = Speculation.AUTO,
                 drafter: SpeculativeDrafter = SpeculativeDrafter.AUTO,
                 temperature: float | None = None, engine_blocker: object = ABSENT,
                 ignored_keys: tuple[str, ...] = ()) -> None:
        self._init(speculation=speculation, drafter=drafter, temperature=temperature,
                   engine_blocker=engine_blocker, ignored_keys=ignored_keys)

    @property
    def deterministic(self) -> bool:
        """Absent temperature is the open-time decision, which assumes greedy."""
        return self.temperature is None or self.temperature == 0


DEFAULT_OPTIONS = Options()


def decode_text(raw: bytes, what: str) -> str:
    """`raw` as UTF-8, or InvalidArgument naming `what` and the bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(
            f"{what} is not UTF-8 (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "accepts UTF-8 text") from None


def _osa_distance(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment edit distance, stopping early past `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = ca != cb
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def near_miss(key: str) -> str | None:
    """The option key `key` is a likely typo of, or None."""
    folded = key.lower()
    best = None
    best_distance = 3
    for known in OPTION_KEYS:
        distance = 0 if folded == known.lower() else _osa_distance(folded, known.lower(), 2)
        if distance < best_distance:
            best, best_distance = known, distance
    return best


def allowed_block(n: int, value: object = None) -> Speculation:
    """`Speculation.block(n)` for a block in 1..=15, else InvalidArgument in
    the grammar's words (`value`: the option value as given, `n` by default)."""
    if value is None:
        value = n
    if n in ALLOWED_SPECULATION_BLOCKS:
        return Speculation.block(n)
    why = ("0 proposes nothing" if n == 0 else
           "block B verifies B+1 rows and the batched verify kernel's cap is 16 rows")
    raise InvalidArgument(f"speculation: got {_show(value)}, a block outside the allowed range "
                          f"{ALLOWED_SPECULATION_BLOCKS_TEXT} ({why}); accepts "
                          f"{_SPECULATION_ACCEPTS}", option="speculation")


def _speculation(value: object) -> Speculation:
    if value is None:
        return Speculation.AUTO
    if type(value) is int:
        if 0 <= value <= U32_MAX:
            return allowed_block(value)
        raise InvalidArgument(f"speculation: got {_show(value)}, which is not a block (blocks "
                              f"are {ALLOWED_SPECULATION_BLOCKS_TEXT}); accepts "
                              f"{_SPECULATION_ACCEPTS}", option="speculation")
    if isinstance(value, str):
        if value.isascii():
            folded = value.lower()
            if folded == "auto":
                return Speculation.AUTO
            if folded == "off":
                return Speculation.OFF
            if value.isdigit():
                # Length first: int() refuses more than 4,300 digits, and no
                # u32 needs more than 10 once leading zeros are gone.
                digits = value.lstrip("0") or "0"
                if len(digits) <= 10 and int(digits) <= U32_MAX:
                    return allowed_block(int(digits), value)
                raise InvalidArgument(
                    f"speculation: got {_show(value)}, which is not a block (blocks are "
                    f"{ALLOWED_SPECULATION_BLOCKS_TEXT}); accepts {_SPECULATION_ACCEPTS}",
                    option="speculation")
    raise InvalidArgument(f"speculation: got {_show(value)}; accepts {_SPECULATION_ACCEPTS}",
                          option="speculation")


def _drafter(value: object) -> SpeculativeDrafter:
    if value is None:
        return SpeculativeDrafter.AUTO
    if isinstance(value, str) and value in DRAFTER_SPELLINGS:
        return SpeculativeDrafter(value)
    raise InvalidArgument(f"speculativeDrafter: got {_show(value)}; accepts {_DRAFTER_ACCEPTS}",
                          option="speculativeDrafter")


_INFINITY = float("inf")


def _temperature(value: object) -> float | None:
    if value is None:
        return None
    if type(value) in (int, float):
        try:
            number = float(value)
        except OverflowError:
            number = _INFINITY
        # NaN fails both comparisons. (No `math` import: 0.4 ms of cold start.)
        if 0 <= number < _INFINITY:
            return number
    raise InvalidArgument(f"temperature: got {_show(value)}; accepts {_TEMPERATURE_ACCEPTS}",
                          option="temperature")


def _engine_blocker(value: object) -> str | None:
    if value is None:
        return None
    # No NUL: the reason ends up in a refusal message, which a C host reads
    # as a NUL-terminated string.
    if isinstance(value, str) and value and "\x00" not in value:
        return value
    raise InvalidArgument(f"engineBlocker: got {_show(value)}; accepts {_BLOCKER_ACCEPTS}",
                          option="engineBlocker")


_READERS = {"speculation": _speculation, "speculativeDrafter": _drafter,
            "temperature": _temperature, "engineBlocker": _engine_blocker}
_FIELDS = {"speculation": "speculation", "speculativeDrafter": "drafter",
           "temperature": "temperature", "engineBlocker": "engine_blocker"}


_parsed: dict = {}
MAX_PARSED_OPTIONS = 256
# Only options texts up to this size are remembered (as the C warm path's
# TSFFI_CACHE_MAX_ARG), so the memo holds at most 256 x 4 KiB of keys.
MAX_PARSED_OPTIONS_BYTES = 4096


def parse_options(raw: bytes | str | None, what: str = "options_json") -> Options:
    """The typed request in `raw` (UTF-8 JSON text); None or empty = defaults.

    Remembered per text (a GUI sends the same few objects over and over; the
    answer is an immutable value), a refusal too, raised anew each time."""
    if raw is None or len(raw) == 0:
        return DEFAULT_OPTIONS
    if what != "options_json" or len(raw) > MAX_PARSED_OPTIONS_BYTES:
        return _parse(raw, what)
    parsed = _parsed.get(raw)
    if parsed is None:
        try:
            parsed = _parse(raw, what)
        except (InvalidArgument, JsonArgumentError) as exc:
            parsed = exc.with_traceback(None)  # its frames need not live on
        if len(_parsed) >= MAX_PARSED_OPTIONS:
            _parsed.clear()
        _parsed[raw] = parsed
    if isinstance(parsed, Exception):
        raise parsed.again()
    return parsed


def _parse(raw: bytes | str, what: str) -> Options:
    if len(raw) > MAX_OPTIONS_BYTES:
        raise InvalidArgument(f"{what} is {len(raw)} bytes; accepts at most "
                              f"{MAX_OPTIONS_BYTES} bytes")
    text = decode_text(raw, what) if isinstance(raw, bytes) else raw
    pairs = parse_json_object(text, what)
    fields: dict[str, object] = {}
    ignored: dict[str, None] = {}
    for key, value in pairs:
        reader = _READERS.get(key)
        if reader is None:
            resembles = near_miss(key)
            if resembles is not None:
                raise InvalidArgument(
                    f"{what}: unknown key {_show(key)} looks like a misspelling of "
                    f"{_show(resembles)}; accepts the keys {', '.join(OPTION_KEYS)} "
                    "(other keys are ignored)")
            ignored[key] = None
            continue
        field = _FIELDS[key]
        if field in fields:
            raise InvalidArgument(f"{key}: given more than once in {what}; accepts one value",
                                  option=key)
        fields[field] = reader(value)
    return Options(ignored_keys=tuple(ignored), **fields)
