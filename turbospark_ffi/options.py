"""Options text to a typed request, exactly as the engine's open reads the
same text (TURBOSPARK_FACTS.md section 10): the same acceptance, refusal,
status and message, so a preview never disagrees with the open.

The open's option stage, in the order a text meets it:

1. NULL or "" = all defaults; text that is not UTF-8: status 1.
2. serde's decoding into the open's `#[derive(Deserialize)]
   #[serde(default, rename_all = "camelCase")]` struct of the 18 keys of
   `OPTION_TABLE` (typed_json: unknown keys skipped at any depth and size, a
   known key twice refused, null = absent, a top-level array read
   positionally): any failure is status 4, "options: " + serde's text.
3. The mapping, key by key in `MAPPING_ORDER`, then the steering-without-path
   rule: the first failure is the answer, status 2 (OptionRefused), with the
   engine's bare message. The library uses only `speculation` and
   `speculativeDrafter`; it checks the rest because the open does.

Then this library's own inputs, which the open never reads, come from one
namespaced object the engine ignores like any unknown key:

    "tsffi": {"engineBlocker": string | null, "temperature": number | null,
              "lowPowerMode": bool | null}

read strictly (an unknown key, a wrong type, a key twice: status 1, the
message naming the key, what it got and what it accepts). `engineBlocker`:
a non-empty string without NUL or lone surrogate (the engine's reason),
null (the engine reported none), absent (preview the install).
`temperature`: the TURN's temperature, a finite number >= 0, absent or null =
the engine binding's default 0.2 (the session is decided as the open decides
it, greedy assumed, whatever this says: turn.py). `lowPowerMode`: the OS's Low
Power Mode, which an absent `powerProfile` resolves from (absent: false).

Every other top-level key is ignored, as the open ignores it, and listed in
`ignored_keys` (serde refuses a key holding a lone surrogate; one that got
through would be shown as U+FFFD, so every result stays text Swift's
decoders accept); a near-miss of one of the 18 keys, and a top-level
`temperature` or `engineBlocker` (which moved into "tsffi" in ABI 3), gets a
warning string too -- a hint, never a refusal, since the open accepts them.
"""

from __future__ import annotations

from ._value import Value
from .errors import InvalidArgument, JsonArgumentError, OptionRefused
from .policy import U32_MAX, Speculation, SpeculativeDrafter

__all__ = ["OPTION_TABLE", "OPTION_KEYS", "MAPPING_ORDER", "TSFFI_KEY", "TSFFI_KEYS",
           "MAX_OPTIONS_BYTES", "ABSENT", "DEFAULT_OPTIONS", "Options", "parse_options",
           "allowed_block", "decode_text", "near_miss", "map_options", "read_tsffi",
           "replace_lone_surrogates"]

# The open has no size cap; this library's own bound, far above any real
# options object (a few hundred bytes), so a runaway argument is refused
# (status 1) before any of it is decoded.
MAX_OPTIONS_BYTES = 16 << 20
TSFFI_KEY = "tsffi"
TSFFI_KEYS = ("engineBlocker", "temperature", "lowPowerMode")

_EXPERT_CACHE_SLOTS = (8, 16, 24, 32, 48, 64, 96, 128)
_LOAD_GUARD_TIERS = ("off", "relaxed", "balanced", "strict")
_STEERING_MODES = ("ablate", "add", "clamp", "renorm")
_POWER_PROFILES = ("performance", "balanced", "efficiency")
_KV_BITS = ("off", "2", "3", "3.5", "4")
_DRAFTERS = ("auto", "mtp", "dflash")


# ---------------------------------------------------------------------------
# Rust's texts for values (rust_text; imported when a message is worded:
# a text the open accepts never needs them).

def _v(value: object) -> str:
    from .rust_text import compact
    return compact(value)


def _s(text: str) -> str:
    from .rust_text import rust_debug_str
    return rust_debug_str(text)


def _x(number: float) -> str:
    from .rust_text import rust_display_f64
    return rust_display_f64(number)


def _refuse(template: str, **values: str) -> OptionRefused:
    return OptionRefused(template.format(**values))


# ---------------------------------------------------------------------------
# The mappers: each takes the decoded value (never None: null is absent and
# absent keys are not mapped) and returns what the request keeps, or raises
# OptionRefused in the engine's words. `messages` is the key's row of
# OPTION_TABLE: every message is written there, once.

def _is_auto(value: object) -> bool:
    # Rust's eq_ignore_ascii_case: only ASCII letters fold.
    return type(value) is str and value.isascii() and value.lower() == "auto"


def _count(value: object, messages: tuple[str, ...]) -> int | None:
    """maxContext's rules (and expertCacheSlots' first two)."""
    if _is_auto(value):
        return None
    if type(value) is int and 0 <= value <= U32_MAX:
        return value
    if type(value) in (int, float):
        raise _refuse(messages[0], v=_v(value))
    raise _refuse(messages[1], v=_v(value))


def _map_max_context(value: object, messages: tuple[str, ...]) -> None:
    # A resolved 0 is refused since 0a45c54 (an absent or "auto" context is
    # never 0).
    if _count(value, messages) == 0:
        raise _refuse(messages[2])


def _map_expert_cache_slots(value: object, messages: tuple[str, ...]) -> None:
    n = _count(value, messages)
    if n is not None and n not in _EXPERT_CACHE_SLOTS:
        raise _refuse(messages[2], n="%d" % n)


def _map_load_guard(value: object, messages: tuple[str, ...]) -> None:
    if type(value) is str:
        if value.lower() not in _LOAD_GUARD_TIERS:
            raise _refuse(messages[0], s=value)
    elif type(value) in (int, float):
        if not (type(value) is int and value > 0):
            raise _refuse(messages[1], v=_v(value))
    else:
        raise _refuse(messages[2], v=_v(value))


def _u64(text: str) -> int | None:
    """Rust's `str::parse::<u64>`: ASCII digits after an optional "+",
    leading zeros allowed, nothing else; None when it does not parse."""
    digits = text[1:] if text[:1] == "+" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    # Length first: int() refuses more than 4,300 digits.
    stripped = digits.lstrip("0") or "0"
    if len(stripped) > 20:
        return None
    n = int(stripped)
    return n if n < 1 << 64 else None


def _map_speculation(value: object, messages: tuple[str, ...]) -> Speculation:
    if type(value) is str:
        if value.isascii():
            folded = value.lower()
            if folded == "auto":
                return Speculation.AUTO
            if folded == "off":
                return Speculation.OFF
        n = _u64(value)
        if n is None:
            raise _refuse(messages[1], s=_s(value))
        return _block(n, messages)
    if type(value) is int and value >= 0:
        return _block(value, messages)
    if type(value) in (int, float):
        raise _refuse(messages[0], n=_v(value))
    raise _refuse(messages[1], s=_v(value))


def _block(n: int, messages: tuple[str, ...]) -> Speculation:
    if 1 <= n <= 15:
        return Speculation.block(n)
    raise _refuse(messages[0], n="%d" % n)


def _map_drafter(value: object, messages: tuple[str, ...]) -> SpeculativeDrafter:
    if value in _DRAFTERS:
        return SpeculativeDrafter(value)
    raise _refuse(messages[0], s=_s(value))


def _one_of(choices: tuple[str, ...], fold: bool):
    def check(value: object, messages: tuple[str, ...]) -> None:
        if (value.lower() if fold else value) not in choices:
            raise _refuse(messages[0], s=_s(value))
    return check


def _finite(at_least_zero: bool):
    def check(value: object, messages: tuple[str, ...]) -> None:
        number = float(value)
        # NaN fails both comparisons (no `math` import: cold start).
        if not (-_INF < number < _INF) or (at_least_zero and not number >= 0):
            raise _refuse(messages[0], x=_x(number))
    return check


_INF = float("inf")


def _map_steering_layers(value: object, messages: tuple[str, ...]) -> None:
    start, colon, end = value.partition(":")
    # Each side trimmed, then Rust's usize parse (u64 on the engine's Macs).
    first, last = _u64(start.strip()), _u64(end.strip()) if colon else None
    if first is None or last is None or last < first:
        raise _refuse(messages[0], s=_s(value))


class _Key:
    """One row of OPTION_TABLE: the key as the open spells it, its serde
    type's name in typed_json, its mapper (None: only the type is checked)
    and its messages, written once."""

    __slots__ = ("name", "serde_type", "mapper", "messages")

    def __init__(self, name: str, serde_type: str, mapper, *messages: str) -> None:
        self.name = name
        self.serde_type = serde_type
        self.mapper = mapper
        self.messages = messages

    def __repr__(self) -> str:
        return f"_Key({self.name!r}, {self.serde_type!r})"


_COUNT_MESSAGES = ("{name} must be a non-negative integer, got {{v}}",
                   '{name} must be a number or "auto", got {{v}}')
_EXPERT_RESIDENCIES = ("auto", "streamed", "mapped")


def _counted(name: str) -> tuple[str, ...]:
    return tuple(message.format(name=name) for message in _COUNT_MESSAGES)


# The open's 18 keys (revision 0a45c54) in declaration order, which is also
# the positional order of a top-level array (TURBOSPARK_FACTS.md section 10).
OPTION_TABLE = (
    _Key("maxContext", "ANY", _map_max_context, *_counted("maxContext"),
         'maxContext must be at least 1, or "auto"'),
    _Key("expertCacheSlots", "ANY", _map_expert_cache_slots, *_counted("expertCacheSlots"),
         'expertCacheSlots must be "auto" or one of [8, 16, 24, 32, 48, 64, 96, 128], '
         "got {n}"),
    # Exact spellings: whether the engine forgives case or whitespace is not
    # established (FACTS section 10), so nothing is forgiven.
    _Key("expertResidency", "STRING", _one_of(_EXPERT_RESIDENCIES, False),
         "expertResidency must be auto, streamed or mapped, got {s}"),
    _Key("powerProfile", "STRING", _one_of(_POWER_PROFILES, False),
         "powerProfile must be performance, balanced or efficiency, got {s}"),
    _Key("loadGuard", "ANY", _map_load_guard,
         "loadGuard must be off, relaxed, balanced, strict or a byte count, got {s}",
         "loadGuard as a byte ceiling must be positive, got {v}",
         "loadGuard must be a tier name or a byte count, got {v}"),
    _Key("minAutoContext", "U32", None),
    _Key("maxTokensPerSec", "F64", None),
    _Key("speculation", "ANY", _map_speculation,
         "speculation block must be in 1..=15, got {n}",
         'speculation must be "off", "auto" or a block in 1..=15, got {s}'),
    _Key("speculativeDrafter", "STRING", _map_drafter,
         "speculativeDrafter must be auto, mtp or dflash, got {s}"),
    _Key("steering", "STRING", None),
    _Key("steeringMode", "STRING", _one_of(_STEERING_MODES, False),
         'steeringMode must be one of ["ablate", "add", "clamp", "renorm"], got {s}'),
    _Key("steeringScale", "F64", _finite(False),
         "steeringScale must be a finite number, got {x}"),
    _Key("steeringLayers", "STRING", _map_steering_layers,
         "steeringLayers must be START:END, inclusive and 0-based, got {s}"),
    _Key("steeringTarget", "F64", _finite(False),
         "steeringTarget must be a finite number, got {x}"),
    _Key("steeringGate", "F64", _finite(True),
         "steeringGate must be a finite number >= 0, got {x}"),
    _Key("visionSidecar", "STRING", None),
    _Key("kvBits", "STRING", _one_of(_KV_BITS, True),
         "kvBits must be off, 2, 3, 3.5 or 4, got {s}"),
    _Key("prefixReuse", "BOOL", None),
)
OPTION_KEYS = tuple(key.name for key in OPTION_TABLE)
_BY_NAME = {key.name: key for key in OPTION_TABLE}
# The open maps its options in this order (FACTS section 10 item 4); the
# first failure is its answer, so with two bad options this names the same.
MAPPING_ORDER = ("maxContext", "expertCacheSlots", "expertResidency", "loadGuard", "speculation",
                 "speculativeDrafter", "steeringMode", "steeringScale", "steeringTarget",
                 "steeringGate", "steeringLayers", "powerProfile", "kvBits")
_STEERING_EXTRAS = ("steeringMode", "steeringScale", "steeringLayers", "steeringTarget",
                    "steeringGate")
STEERING_WITHOUT_PATH = "steering options given without a steering vector path"


def map_options(fields: dict) -> tuple[Speculation, SpeculativeDrafter]:
    """The open's mapping of decoded `fields` (typed_json's StructValue.fields:
    present, non-null keys): the speculation and drafter asked for, or
    OptionRefused with the first failure's message. (What else the preview
    reads of the open's keys -- the turn's rate control, the vision sidecar
    -- `Options` takes from `fields` as decoded.)"""
    mapped: dict[str, object] = {}
    for name in MAPPING_ORDER:
        value = fields.get(name)
        if value is not None:
            key = _BY_NAME[name]
            mapped[name] = key.mapper(value, key.messages)
    if "steering" not in fields and any(name in fields for name in _STEERING_EXTRAS):
        raise OptionRefused(STEERING_WITHOUT_PATH)
    return (mapped.get("speculation", Speculation.AUTO),
            mapped.get("speculativeDrafter", SpeculativeDrafter.AUTO))


_struct = None


def _open_options():
    """The open's struct as typed_json declares it, made on first use."""
    global _struct
    if _struct is None:
        from . import typed_json
        _struct = typed_json.Struct("OpenOptions", tuple(
            typed_json.Field(key.name, typed_json.Option(getattr(typed_json, key.serde_type)))
            for key in OPTION_TABLE))
    return _struct


# ---------------------------------------------------------------------------
# The library's own inputs: the "tsffi" object.

class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self):
        return "ABSENT"


ABSENT = _Absent()
"""`tsffi.engineBlocker` not given at all (as opposed to null)."""

_TSFFI_ACCEPTS = ('an object with the keys "engineBlocker", "temperature" and "lowPowerMode", '
                  'or null')
_BLOCKER_ACCEPTS = ("a non-empty string without NUL characters or lone surrogates (the "
                    "engine's reason), or null (the engine reported none)")
_TEMPERATURE_ACCEPTS = ("a finite number >= 0, or null (the engine binding's default "
                        "temperature, 0.2)")
_LOW_POWER_ACCEPTS = "true or false (the OS's Low Power Mode), or null (false)"


def _show(value: object) -> str:
    from .jsontext import show_value
    return show_value(replace_lone_surrogates(value) if type(value) is str else value)


def read_tsffi(raw: str | None) -> tuple[float | None, object, bool]:
    """(temperature, engine blocker, low power mode) from the raw text of the
    "tsffi" value (None: not given), or InvalidArgument naming what was wrong."""
    if raw is None:
        return None, ABSENT, False
    if raw.strip(" \t\n\r") == "null":
        return None, ABSENT, False
    from .jsontext import parse_json_object
    try:
        value = parse_json_object(raw, TSFFI_KEY)
    except JsonArgumentError as exc:
        raise InvalidArgument(f"{exc}; accepts {_TSFFI_ACCEPTS}", option=TSFFI_KEY) from None
    given: dict[str, object] = {}
    for key, item in value:
        if key not in TSFFI_KEYS:
            raise InvalidArgument(f"{TSFFI_KEY}: unknown key {_show(key)}; accepts "
                                  f"{_TSFFI_ACCEPTS}", option=TSFFI_KEY)
        if key in given:
            raise InvalidArgument(f"{TSFFI_KEY}.{key}: given more than once; accepts one value",
                                  option=f"{TSFFI_KEY}.{key}")
        given[key] = item
    return (_temperature(given.get("temperature")),
            _engine_blocker(given["engineBlocker"]) if "engineBlocker" in given else ABSENT,
            _low_power_mode(given.get("lowPowerMode")))


def _low_power_mode(value: object) -> bool:
    if value is None:
        return False
    if value is True or value is False:
        return value
    raise InvalidArgument(f"{TSFFI_KEY}.lowPowerMode: got {_show(value)}; accepts "
                          f"{_LOW_POWER_ACCEPTS}", option=f"{TSFFI_KEY}.lowPowerMode")


def _temperature(value: object) -> float | None:
    if value is None:
        return None
    if type(value) in (int, float):
        try:
            number = float(value)
        except OverflowError:
            number = _INF
        if 0 <= number < _INF:
            return number
    raise InvalidArgument(f"{TSFFI_KEY}.temperature: got {_show(value)}; accepts "
                          f"{_TEMPERATURE_ACCEPTS}", option=f"{TSFFI_KEY}.temperature")


def _engine_blocker(value: object) -> str | None:
    if value is None:
        return None
    # No NUL: the reason ends up in a refusal message, which a C host reads
    # as a NUL-terminated string; no lone surrogate: it ends up in a result,
    # which Swift's JSON decoders then refuse whole.
    from .jsontext import is_utf8_text
    if type(value) is str and value and "\x00" not in value and is_utf8_text(value):
        return value
    raise InvalidArgument(f"{TSFFI_KEY}.engineBlocker: got {_show(value)}; accepts "
                          f"{_BLOCKER_ACCEPTS}", option=f"{TSFFI_KEY}.engineBlocker")


def replace_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD (`text` itself when it has
    none), so it can be written as UTF-8 JSON that Swift accepts."""
    from .jsontext import is_utf8_text
    if is_utf8_text(text):
        return text
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)


# ---------------------------------------------------------------------------
# Ignored keys and the hints about them.

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


# Keys longer than the longest option key plus two edits cannot be near
# misses: skipped before any distance is computed.
_NEAR_MISS_MAX_LEN = max(map(len, OPTION_KEYS)) + 2


def _letter_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    return counts


def _bag_distance(a: dict[str, int], b: dict[str, int]) -> int:
    """A lower bound of the edit distance: every insertion, deletion or
    substitution moves the letter counts by at most one on each side, and a
    transposition not at all."""
    extra = sum(n - b.get(ch, 0) for ch, n in a.items() if n > b.get(ch, 0))
    missing = sum(n - a.get(ch, 0) for ch, n in b.items() if n > a.get(ch, 0))
    return max(extra, missing)


# (key, folded, its letter counts) once: the bag distance turns most of the
# 16 edit-distance tables away unbuilt. Measured: an unseen options text with
# one unknown 8-letter key cost 145 us to parse with the tables alone (40 us
# before ABI 3, with 4 keys to compare), most of a first plan's 330 us.
_FOLDED_KEYS = tuple((known, known.lower(), _letter_counts(known.lower())) for known in OPTION_KEYS)


def near_miss(key: str) -> str | None:
    """The option key `key` is a likely typo of (same letters in another
    case, or within two edits), or None."""
    if len(key) > _NEAR_MISS_MAX_LEN:
        return None
    folded = key.lower()
    counts = _letter_counts(folded)
    best = None
    best_distance = 3
    for known, known_folded, known_counts in _FOLDED_KEYS:
        if folded == known_folded:
            return known
        if abs(len(folded) - len(known_folded)) > 2 or _bag_distance(counts, known_counts) > 2:
            continue
        distance = _osa_distance(folded, known_folded, 2)
        if distance < best_distance:
            best, best_distance = known, distance
    return best


def _near_tsffi(key: str) -> str | None:
    """TSFFI_KEY for "Tsffi", "tsfi", "tsffi_"...: this library's own object
    misspelled, whose inputs would otherwise be silently dropped. One edit
    only: two would hint at ordinary short words ("stiff")."""
    folded = key.lower()
    if len(folded) >= 4 and (folded == TSFFI_KEY or _osa_distance(folded, TSFFI_KEY, 1) <= 1):
        return TSFFI_KEY
    return None


# Hints are for a person reading a settings pane's diagnostics: past this
# many ignored keys no more are looked at, so 1 MiB of ignored keys costs no
# more than a few hundred distance checks (the list itself is still whole).
MAX_HINTED_KEYS = 256
_MOVED_KEYS = frozenset(TSFFI_KEYS)


def _warnings(ignored: tuple[str, ...]) -> tuple[str, ...]:
    hints = []
    for key in ignored[:MAX_HINTED_KEYS]:
        if key in _MOVED_KEYS:
            hints.append(f'"{key}" at the top level is ignored, as the engine\'s open ignores '
                         f'it; since ABI 3 this library reads it inside the "{TSFFI_KEY}" '
                         f'object: {{"{TSFFI_KEY}": {{"{key}": ...}}}}')
            continue
        resembles = near_miss(key) or _near_tsffi(key)
        if resembles is not None:
            hints.append(f"{_show(key)} is not a key the engine's open reads, so it ignores it "
                         f"(and so does this preview); did you mean \"{resembles}\"?")
    return tuple(hints)


def _context_warnings(context: object) -> tuple[str, ...]:
    """A context window the host names: whether the machine's memory holds it
    is the open's to say (its refusals depend on the machine), and the
    preview, which cannot know, says so rather than guess."""
    if type(context) is not int:  # absent, or "auto": the open fits the machine
        return ()
    return (f"maxContext {context}: whether this machine's memory holds that context window is "
            "the open's to decide, and this preview cannot know; it takes the window to fit",)


def _sidecar_warnings(sidecar: str | None) -> tuple[str, ...]:
    """What the preview cannot know of a vision sidecar, said rather than
    guessed silently: the open attaches it after reading the install."""
    if sidecar is None:
        return ()
    if sidecar == "auto":
        return ('visionSidecar "auto": the open looks in the store for an installed vision '
                "tower that pairs with this trunk, which this preview does not; it previews "
                "a text-only session (a tower that attaches makes the verify pass "
                "vision-blind, and speculation off)",)
    return (f"visionSidecar {_show(sidecar)}: this preview takes the tower to attach (the "
            "open loads it after the install, and fails if it cannot), so the verify pass "
            "is vision-blind and speculation off",)


# ---------------------------------------------------------------------------
# The request.

class Options(Value):
    """What one options text asks, as far as the preview reads it: the open's
    `speculation` and `speculativeDrafter`; what the turn's gate reads of the
    open's keys (`maxTokensPerSec` given at all, `powerProfile`) and of the
    "tsffi" object (the turn's `temperature`, None: not given; the OS's
    `low_power_mode`); `vision_sidecar`; the engine's blocker when the host
    has it; and what the text said beside them (ignored keys, warnings)."""

    __slots__ = ("speculation", "drafter", "temperature", "engine_blocker", "ignored_keys",
                 "warnings", "rate_capped", "power_profile", "low_power_mode",
                 "vision_sidecar")

    def __init__(self, speculation: Speculation = Speculation.AUTO,
                 drafter: SpeculativeDrafter = SpeculativeDrafter.AUTO,
                 temperature: float | None = None, engine_blocker: object = ABSENT,
                 ignored_keys: tuple[str, ...] = (), warnings: tuple[str, ...] = (), *,
                 rate_capped: bool = False, power_profile: str | None = None,
                 low_power_mode: bool = False, vision_sidecar: str | None = None) -> None:
        self._init(speculation=speculation, drafter=drafter, temperature=temperature,
                   engine_blocker=engine_blocker, ignored_keys=ignored_keys,
                   warnings=warnings, rate_capped=rate_capped, power_profile=power_profile,
                   low_power_mode=low_power_mode, vision_sidecar=vision_sidecar)

    @property
    def deterministic(self) -> bool:
        """The original module's `deterministic` for `tsffi_resolve_speculation`
        (the engine CLI's rule): an absent temperature is the open-time
        decision, which assumes greedy. The open itself always assumes it."""
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


def allowed_block(n: int) -> Speculation:
    """`Speculation.block(n)` for a block in 1..=15, else OptionRefused in the
    open's words (for a Python caller's `Speculation.block(16)`)."""
    return _block(n, _BY_NAME["speculation"].messages)


def parse_options(raw: bytes | str | None, what: str = "options_json") -> Options:
    """The typed request in `raw` (UTF-8 JSON text); None or empty = defaults.

    Parsed at every call that reaches Python, not remembered: a warm C
    host's repeated text never reaches it (the C warm path answers), and the
    bench's options text parses in ~11 us, under 5% of a first plan
    (docs/performance.md, the issue 41 round).

    The open's order: size and UTF-8 (status 1), serde's decoding (4), the
    mapping (2), then this library's "tsffi" object (1)."""
    if raw is None or len(raw) == 0:
        return DEFAULT_OPTIONS
    if len(raw) > MAX_OPTIONS_BYTES:
        raise InvalidArgument(f"{what} is {len(raw)} bytes; accepts at most "
                              f"{MAX_OPTIONS_BYTES} bytes (this library's bound; the engine "
                              "has none)")
    text = decode_text(raw, what) if isinstance(raw, bytes) else raw
    from .typed_json import TypedJsonError, decode
    try:
        decoded = decode(text, _open_options(), capture=_CAPTURE)
    except TypedJsonError as exc:
        raise JsonArgumentError(f"options: {exc.text}") from None
    fields = decoded.fields
    speculation, drafter = map_options(fields)
    temperature, engine_blocker, low_power_mode = read_tsffi(decoded.captured.get(TSFFI_KEY))
    ignored = tuple(map(replace_lone_surrogates, decoded.unknown_keys))
    return Options(speculation, drafter, temperature, engine_blocker, ignored,
                   _warnings(ignored) + _context_warnings(fields.get("maxContext"))
                   + _sidecar_warnings(fields.get("visionSidecar")),
                   rate_capped="maxTokensPerSec" in fields,
                   power_profile=fields.get("powerProfile"), low_power_mode=low_power_mode,
                   vision_sidecar=fields.get("visionSidecar"))


_CAPTURE = frozenset({TSFFI_KEY})
