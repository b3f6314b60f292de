"""The options text as the engine's open reads it (options.py docstring, TURBOSPARK_FACTS.md
section 10): valid inputs to typed Options, refusals with the open's status and message asserted
(OptionRefused 2, JsonArgumentError 4), the library's own "tsffi" object (InvalidArgument 1);
and wire.choice_from_json's strictness. tests/test_option_rules.py holds every rule of section 10
as one table; this file holds the grammar's edges."""

from __future__ import annotations

import json
import math

import pytest

from turbospark_ffi.errors import InvalidArgument, JsonArgumentError, OptionRefused
from turbospark_ffi.options import ABSENT, MAX_OPTIONS_BYTES, Options, parse_options
from turbospark_ffi.policy import DrafterChoice, Speculation, SpeculativeDrafter
from turbospark_ffi.wire import choice_from_json, choice_text

AUTO, OFF, B = Speculation.AUTO, Speculation.OFF, Speculation.block
D = SpeculativeDrafter

RANGE = "speculation block must be in 1..=15, got {}"
OTHER = 'speculation must be "off", "auto" or a block in 1..=15, got {}'
DRAFTER = "speculativeDrafter must be auto, mtp or dflash, got {}"
TEMP_ACCEPTS = "a finite number >= 0, or null (the engine binding's default temperature, 0.2)"
BLOCKER_ACCEPTS = ("a non-empty string without NUL characters or lone surrogates (the engine's "
                   "reason), or null (the engine reported none)")
NEAR = ('"{0}" is not a key the engine\'s open reads, so it ignores it (and so does this '
        'preview); did you mean "{1}"?')
MOVED = ('"{0}" at the top level is ignored, as the engine\'s open ignores it; since ABI 3 this '
         'library reads it inside the "tsffi" object: {{"tsffi": {{"{0}": ...}}}}')


def tsffi(**keys) -> str:
    return json.dumps({"tsffi": keys})


# --------------------------------------------------------------------------
# Valid inputs.

VALID = [
    (None, Options()),
    ("", Options()),
    (b"", Options()),
    ("{}", Options()),
    (" \n{ }\t", Options()),
    ('{"speculation": "auto"}', Options(speculation=AUTO)),
    ('{"speculation": "AUTO"}', Options(speculation=AUTO)),
    ('{"speculation": "Auto"}', Options(speculation=AUTO)),
    ('{"speculation": "off"}', Options(speculation=OFF)),
    ('{"speculation": "Off"}', Options(speculation=OFF)),
    ('{"speculation": "OFF"}', Options(speculation=OFF)),
    ('{"speculation": null}', Options(speculation=AUTO)),
    ('{"speculation": 2}', Options(speculation=B(2))),
    ('{"speculation": "2"}', Options(speculation=B(2))),
    ('{"speculation": "0002"}', Options(speculation=B(2))),
    ('{"speculation": "+2"}', Options(speculation=B(2))),     # Rust's u64 parse takes a "+"
    ('{"speculation": 15}', Options(speculation=B(15))),
    ('{"speculation": 1}', Options(speculation=B(1))),
    ('{"speculation": "015"}', Options(speculation=B(15))),
    ('{"speculativeDrafter": "auto"}', Options(drafter=D.AUTO)),
    ('{"speculativeDrafter": "mtp"}', Options(drafter=D.MTP)),
    ('{"speculativeDrafter": "dflash"}', Options(drafter=D.DFLASH)),
    ('{"speculativeDrafter": null}', Options(drafter=D.AUTO)),
    (tsffi(temperature=0), Options(temperature=0.0)),
    (tsffi(temperature=0.7), Options(temperature=0.7)),
    (tsffi(temperature=2), Options(temperature=2.0)),
    (tsffi(temperature=1e300), Options(temperature=1e300)),
    (tsffi(temperature=None), Options(temperature=None)),
    (tsffi(engineBlocker="a vision tower is active"),
     Options(engine_blocker="a vision tower is active")),
    (tsffi(engineBlocker=None), Options(engine_blocker=None)),
    (tsffi(engineBlocker=" "), Options(engine_blocker=" ")),
    ('{"speculation": 3, "speculativeDrafter": "dflash", '
     '"tsffi": {"temperature": 0, "engineBlocker": null}}',
     Options(speculation=B(3), drafter=D.DFLASH, temperature=0.0, engine_blocker=None)),
    # Keys the open does not read: ignored, listed in order, each once; the
    # open's other keys are read (and checked), so they are not listed.
    ('{"contextLength": 4096, "speculation": 2, "theme": "max", '
     '"contextLength": 8, "layout": {"a": [1, 2]}, "kvBits": "4"}',
     Options(speculation=B(2), ignored_keys=("contextLength", "theme", "layout"))),
    ('{"seed": 1, "maxTokens": 10, "draft": 2, "blocker": "x"}',
     Options(ignored_keys=("seed", "maxTokens", "draft", "blocker"))),
    ('{"x": "\\ud800"}', Options(ignored_keys=("x",))),   # skipped unchecked, as serde does
    ('{"x": "' + "[" * 200 + '"}', Options(ignored_keys=("x",))),   # brackets in a string
    # Ignored values nest and grow without a bound, as the open skips them.
    ('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}", Options(ignored_keys=("x",))),
    ('{"x": ' + '{"y": ' * 100_000 + "1" + "}" * 100_000 + "}", Options(ignored_keys=("x",))),
    ('{"x": ' + "9" * 5000 + ', "speculation": 4}', Options(B(4), ignored_keys=("x",))),
    ('{"speculation": "auto"}'.encode(), Options(speculation=AUTO)),
]


@pytest.mark.parametrize("raw, expected", VALID, ids=[repr(r)[:60] for r, _ in VALID])
def test_valid_options(raw, expected):
    assert parse_options(raw) == expected


def test_absent_blocker_is_distinct_from_null():
    assert parse_options("{}").engine_blocker is ABSENT
    assert parse_options(tsffi(engineBlocker=None)).engine_blocker is None
    assert parse_options(tsffi(temperature=None)).temperature is None


@pytest.mark.parametrize("raw, deterministic", [
    ("{}", True), (tsffi(temperature=None), True), (tsffi(temperature=0), True),
    ('{"tsffi": {"temperature": 0.0}}', True), ('{"tsffi": {"temperature": -0.0}}', True),
    ('{"tsffi": {"temperature": 5e-324}}', False), (tsffi(temperature=0.7), False),
    # At the top level it is an ignored key: the open's deterministic assumption.
    ('{"temperature": 0.7}', True)])
def test_deterministic(raw, deterministic):
    options = parse_options(raw)
    assert options.deterministic is deterministic


def test_negative_zero_temperature_is_accepted_as_zero():
    t = parse_options('{"tsffi": {"temperature": -0.0}}').temperature
    assert t == 0 and math.copysign(1, t) == -1


# --------------------------------------------------------------------------
# Values the open's mapping refuses: status 2, the engine's bare message.

REFUSED = [
    ('{"speculation": " 2"}', OTHER.format('" 2"')),
    ('{"speculation": "2 "}', OTHER.format('"2 "')),
    ('{"speculation": "-2"}', OTHER.format('"-2"')),
    ('{"speculation": "2.0"}', OTHER.format('"2.0"')),
    ('{"speculation": "0x2"}', OTHER.format('"0x2"')),
    ('{"speculation": "2_0"}', OTHER.format('"2_0"')),
    ('{"speculation": ""}', OTHER.format('""')),
    ('{"speculation": "++2"}', OTHER.format('"++2"')),
    ('{"speculation": "\\u0662"}', OTHER.format('"\u0662"')),   # a digit, not ASCII
    ('{"speculation": "\\u00b2"}', OTHER.format('"\u00b2"')),
    ('{"speculation": "on"}', OTHER.format('"on"')),
    ('{"speculation": "auto "}', OTHER.format('"auto "')),
    ('{"speculation": "\\u212aUTO"}', OTHER.format('"\u212aUTO"')),  # Kelvin sign: not ASCII
    ('{"speculation": "tab\\there"}', OTHER.format('"tab\\there"')),
    ('{"speculation": 2.0}', RANGE.format("2.0")),
    ('{"speculation": 2e0}', RANGE.format("2.0")),
    ('{"speculation": -0}', RANGE.format("-0.0")),
    ('{"speculation": true}', OTHER.format("true")),
    ('{"speculation": false}', OTHER.format("false")),
    ('{"speculation": [2]}', OTHER.format("[2]")),
    ('{"speculation": {}}', OTHER.format("{}")),
    ('{"speculation": -1}', RANGE.format("-1")),
    ('{"speculation": 4294967296}', RANGE.format("4294967296")),
    ('{"speculation": 18446744073709551616}', RANGE.format("1.8446744073709552e+19")),
    ('{"speculation": "4294967296"}', RANGE.format("4294967296")),
    ('{"speculation": "18446744073709551616"}', OTHER.format('"18446744073709551616"')),
    ('{"speculation": 0}', RANGE.format("0")),
    ('{"speculation": "000"}', RANGE.format("0")),
    ('{"speculation": 16}', RANGE.format("16")),
    ('{"speculation": "16"}', RANGE.format("16")),
    ('{"speculation": 4294967295}', RANGE.format("4294967295")),
    ('{"speculativeDrafter": "MTP"}', DRAFTER.format('"MTP"')),
    ('{"speculativeDrafter": "Dflash"}', DRAFTER.format('"Dflash"')),
    ('{"speculativeDrafter": "dflash2"}', DRAFTER.format('"dflash2"')),
    ('{"speculativeDrafter": ""}', DRAFTER.format('""')),
    ('{"speculativeDrafter": "m\\ntp"}', DRAFTER.format('"m\\ntp"')),
]


@pytest.mark.parametrize("raw, message", REFUSED, ids=[r[:50] for r, _ in REFUSED])
def test_refused_values(raw, message):
    with pytest.raises(OptionRefused) as info:
        parse_options(raw)
    assert (info.value.status, str(info.value)) == (2, message)


@pytest.mark.parametrize("digits", ["9" * 5000, "1" + "0" * 20], ids=["9x5000", "1e20"])
def test_huge_decimal_string_block_is_refused_as_the_open_refuses_it(digits):
    # Past u64 Rust's parse fails, so it is the string arm, not the range's;
    # and int()'s 4,300-digit limit is never reached (no bare ValueError,
    # which the C ABI would report as an internal error).
    with pytest.raises(OptionRefused) as info:
        parse_options('{"speculation": "' + digits + '"}')
    assert str(info.value) == OTHER.format(f'"{digits}"')


def test_leading_zeros_do_not_change_a_block():
    # As the engine's u64 parse reads it: zeros in front are the same number,
    # however many there are.
    assert parse_options('{"speculation": "' + "0" * 5000 + '2"}').speculation == \
        Speculation.block(2)


# --------------------------------------------------------------------------
# The decoder's refusals: status 4, "options: " + serde's text.

DECODING = [
    ('{"speculativeDrafter": 1}', "invalid type: integer `1`, expected a string at line 1 "
                                  "column 24"),
    ('{"speculativeDrafter": true}', "invalid type: boolean `true`, expected a string at line 1 "
                                     "column 27"),
    ('{"speculation": 2, "speculation": 3}', "duplicate field `speculation` at line 1 column 32"),
    ('{"speculation": null, "speculation": null}',
     "duplicate field `speculation` at line 1 column 35"),
    ("3", "invalid type: integer `3`, expected struct OpenOptions at line 1 column 1"),
    ('"speculation"', 'invalid type: string "speculation", expected struct OpenOptions at line 1 '
                      "column 13"),
    ("null", "invalid type: null, expected struct OpenOptions at line 1 column 4"),
    ("true", "invalid type: boolean `true`, expected struct OpenOptions at line 1 column 4"),
    ('{"speculation": NaN}', "expected value at line 1 column 17"),
    ("{} x", "trailing characters at line 1 column 4"),
    ("{", "EOF while parsing an object at line 1 column 1"),
    ('{"\\ud800": 1}', "unexpected end of hex escape at line 1 column 9"),
    ("   ", "EOF while parsing a value at line 1 column 3"),
]


@pytest.mark.parametrize("raw, message", DECODING, ids=[r[:40] for r, _ in DECODING])
def test_decoding_refusals(raw, message):
    with pytest.raises(JsonArgumentError) as info:
        parse_options(raw)
    assert (info.value.status, str(info.value)) == (4, "options: " + message)


@pytest.mark.parametrize("raw", [
    "{'speculation': 2}", '{"speculation": 2,}', '{"a": "\x01"}', '{"speculation": 01}',
    '{"tsffi": {"temperature": Infinity}}', "[" * 100_000, '{"speculation": ' + "[" * 200 + "]" *
    200 + "}"])
def test_other_decoding_refusals_are_serdes(raw):
    # Each worded by serde (tests/test_option_rules.py and the decoder's own
    # tests hold the exact texts), never by Python's json module.
    with pytest.raises(JsonArgumentError) as info:
        parse_options(raw)
    assert str(info.value).startswith("options: ") and " at line 1 column " in str(info.value)
    assert "Expecting" not in str(info.value)


# --------------------------------------------------------------------------
# The "tsffi" object: status 1, naming the key, what it got, what it accepts.

TSFFI_ERRORS = [
    (tsffi(temperature=-1), f"tsffi.temperature: got -1; accepts {TEMP_ACCEPTS}"),
    (tsffi(temperature=-0.5), f"tsffi.temperature: got -0.5; accepts {TEMP_ACCEPTS}"),
    ('{"tsffi": {"temperature": 1e999}}',
     f"tsffi.temperature: got a number too large for a double; accepts {TEMP_ACCEPTS}"),
    (tsffi(temperature=True), f"tsffi.temperature: got true; accepts {TEMP_ACCEPTS}"),
    (tsffi(temperature="0"), f'tsffi.temperature: got "0"; accepts {TEMP_ACCEPTS}'),
    (tsffi(temperature=[0]), f"tsffi.temperature: got an array; accepts {TEMP_ACCEPTS}"),
    (tsffi(engineBlocker=""), f'tsffi.engineBlocker: got ""; accepts {BLOCKER_ACCEPTS}'),
    (tsffi(engineBlocker=0), f"tsffi.engineBlocker: got 0; accepts {BLOCKER_ACCEPTS}"),
    (tsffi(engineBlocker=False), f"tsffi.engineBlocker: got false; accepts {BLOCKER_ACCEPTS}"),
    (tsffi(engineBlocker=["x"]), f"tsffi.engineBlocker: got an array; accepts {BLOCKER_ACCEPTS}"),
    ('{"tsffi": {"engineBlocker": null, "engineBlocker": "x"}}',
     "tsffi.engineBlocker: given more than once; accepts one value"),
    ('{"tsffi": {"Temperature": 1}}', 'tsffi: unknown key "Temperature"; accepts an object with '
                                      'the keys "engineBlocker", "temperature" and "lowPowerMode", or null'),
    ('{"tsffi": "x"}', 'tsffi must be a JSON object, got a string; accepts an object with the '
                       'keys "engineBlocker", "temperature" and "lowPowerMode", or null'),
]


@pytest.mark.parametrize("raw, message", TSFFI_ERRORS, ids=[r[:50] for r, _ in TSFFI_ERRORS])
def test_tsffi_object_errors(raw, message):
    with pytest.raises(InvalidArgument) as info:
        parse_options(raw)
    assert (info.value.status, str(info.value)) == (1, message)


def test_the_opens_answer_comes_before_the_tsffi_object():
    # A decoding refusal (4) and a mapping refusal (2) outrank a bad tsffi
    # object (1): the open's own answer first.
    with pytest.raises(JsonArgumentError):
        parse_options('{"tsffi": 5, "kvBits": 5}')
    with pytest.raises(OptionRefused):
        parse_options('{"tsffi": 5, "kvBits": "5"}')


# --------------------------------------------------------------------------
# Near-miss keys: the open ignores them, so they are accepted, listed and
# hinted at -- never refused.

NEAR_MISSES = [
    ("speculative", "speculation"),
    ("Speculation", "speculation"),
    ("SPECULATION", "speculation"),
    ("speculations", "speculation"),
    ("speclation", "speculation"),
    ("speculativedrafter", "speculativeDrafter"),
    ("speculativeDrafer", "speculativeDrafter"),
    ("SpeculativeDrafter", "speculativeDrafter"),
    ("speculative_drafter", "speculativeDrafter"),
    ("speculativeDrafters", "speculativeDrafter"),
    ("maxcontext", "maxContext"),
    ("kvbits", "kvBits"),
    ("steeringGates", "steeringGate"),
]


@pytest.mark.parametrize("key, resembles", NEAR_MISSES)
def test_near_miss_keys_are_ignored_with_a_warning(key, resembles):
    options = parse_options(json.dumps({key: 2}))
    assert options == Options(ignored_keys=(key,), warnings=(NEAR.format(key, resembles),))


@pytest.mark.parametrize("key", ["temperature", "engineBlocker"])
def test_top_level_preview_keys_are_ignored_with_a_warning(key):
    assert parse_options(json.dumps({key: "x", "speculation": 2})) == \
        Options(B(2), ignored_keys=(key,), warnings=(MOVED.format(key),))


def _osa(a: str, b: str) -> int:
    """Optimal-string-alignment distance, written out here as the oracle."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def _every_edit(word: str) -> set[str]:
    letters = "esxD_"
    out = {word[:i] + word[i + 1:] for i in range(len(word))}
    out |= {word[:i] + c + word[i:] for i in range(len(word) + 1) for c in letters}
    out |= {word[:i] + c + word[i + 1:] for i in range(len(word)) for c in letters}
    out |= {word[:i] + word[i + 1] + word[i] + word[i + 2:] for i in range(len(word) - 1)}
    return out


def test_the_letter_count_filter_never_changes_a_hint():
    """near_miss turns keys away by their letter counts before building an
    edit-distance table; on every key one or two edits from one of the 16
    (and far ones), its answer is the plain rule's: the first key within two
    edits at the least distance, or the key equal but for case."""
    from turbospark_ffi.options import OPTION_KEYS, near_miss
    candidates = {"theme", "hostKey", "temperature", "tsffi", "speculationBlock"}
    for known in OPTION_KEYS:
        once = _every_edit(known)
        candidates |= once | {w for w in sorted(once)[::400] for w in _every_edit(w)}
    checked = 0
    for key in sorted(candidates):
        if key in OPTION_KEYS:
            continue
        folded = key.lower()
        distances = [(0 if folded == k.lower() else _osa(folded, k.lower()), n)
                     for n, k in enumerate(OPTION_KEYS)]
        best, at = min(distances)
        expected = OPTION_KEYS[at] if best <= 2 and len(key) <= max(map(len, OPTION_KEYS)) + 2 \
            else None
        assert near_miss(key) == expected, key
        checked += 1
    assert checked > 2000


def test_far_keys_get_no_warning():
    assert parse_options('{"theme": 1, "Temperature": 1}').warnings == ()


# --------------------------------------------------------------------------
# Size and encoding: status 1.

@pytest.mark.parametrize("as_bytes", [True, False])
def test_oversized_options_are_refused(as_bytes):
    raw = '{"x": "' + "a" * (MAX_OPTIONS_BYTES + 1) + '"}'
    with pytest.raises(InvalidArgument) as info:
        parse_options(raw.encode() if as_bytes else raw)
    assert str(info.value) == f"options_json is {len(raw)} bytes; accepts at most " \
                              f"{MAX_OPTIONS_BYTES} bytes (this library's bound; the engine " \
                              "has none)"


def test_options_just_under_the_limit_parse():
    raw = '{"x": "' + "a" * (MAX_OPTIONS_BYTES - 10) + '"}'
    assert len(raw) <= MAX_OPTIONS_BYTES == 16 << 20
    assert parse_options(raw.encode()).ignored_keys == ("x",)


@pytest.mark.parametrize("raw, byte, offset", [
    (b'{"a": "\xff"}', 0xFF, 7),
    (b'{"speculation": "\xc3"}', 0xC3, 17),
    (b'\xef\xbb', 0xEF, 0),
    (b'{"a": "\xed\xa0\x80"}', 0xED, 7),      # an encoded surrogate is not UTF-8
])
def test_non_utf8_bytes_are_refused(raw, byte, offset):
    with pytest.raises(InvalidArgument) as info:
        parse_options(raw)
    assert str(info.value) == (f"options_json is not UTF-8 (invalid byte 0x{byte:02x} at "
                               f"offset {offset}); accepts UTF-8 text")


# --------------------------------------------------------------------------
# wire.choice_from_json: exactly what tsffi_resolve_drafter returns.

GOOD_CHOICE = {"drafter": "mtp", "installHasMtpHead": True, "installHasDflash": None,
               "note": None}


@pytest.mark.parametrize("choice", [
    DrafterChoice(D.MTP, True, False),
    DrafterChoice(D.MTP, False, True, "a note \u00e9"),
    DrafterChoice(D.DFLASH, None, None),
    DrafterChoice(D.AUTO, True, True),
])
def test_choice_round_trips(choice):
    assert choice_from_json(choice_text(choice)) == choice


def test_choice_with_the_directory_it_read_is_accepted():
    """What tsffi_resolve_drafter returns names the directory it read; the
    choice is the same with or without it."""
    choice = DrafterChoice(D.MTP, False, True, "a note")
    with_dir = choice_text(choice, "/models/qwen.gturbo")
    assert json.loads(with_dir)["modelDir"] == "/models/qwen.gturbo"
    assert choice_from_json(with_dir) == choice


def _with(**kw):
    d = dict(GOOD_CHOICE)
    for k, v in kw.items():
        if v is _DROP:
            d.pop(k)
        else:
            d[k] = v
    return json.dumps(d)


_DROP = object()
KEYS4 = "drafter, installHasMtpHead, installHasDflash, note"
CHOICE_ERRORS = [
    (_with(extra=1), f'choice_json: unknown key "extra"; accepts exactly the keys {KEYS4} '
                     "and optionally modelDir (what tsffi_resolve_drafter returns)"),
    (_with(modelDir=None), "choice_json: modelDir: got null; accepts a string (the directory "
                           "tsffi_resolve_drafter read)"),
    (_with(modelDir=7), "choice_json: modelDir: got 7; accepts a string (the directory "
                        "tsffi_resolve_drafter read)"),
    (_with(note=_DROP), f"choice_json: missing key note; accepts exactly the keys {KEYS4} "
                        "(what tsffi_resolve_drafter returns)"),
    ("{}", f"choice_json: missing key drafter, installHasMtpHead, installHasDflash, note; "
           f"accepts exactly the keys {KEYS4} (what tsffi_resolve_drafter returns)"),
    ('{"drafter": "mtp", "drafter": "mtp", "installHasMtpHead": true, '
     '"installHasDflash": null, "note": null}', 'choice_json: key "drafter" given more than once'),
    (_with(drafter="MTP"), 'choice_json: drafter: got "MTP"; accepts "auto", "mtp" or "dflash"'),
    (_with(drafter=None), 'choice_json: drafter: got null; accepts "auto", "mtp" or "dflash"'),
    (_with(drafter=["mtp"]), 'choice_json: drafter: got an array; accepts "auto", "mtp" or '
                             '"dflash"'),
    (_with(installHasMtpHead=1), "choice_json: installHasMtpHead: got 1; accepts true, false "
                                 "or null (unknown)"),
    (_with(installHasDflash="false"), 'choice_json: installHasDflash: got "false"; accepts '
                                      "true, false or null (unknown)"),
    (_with(installHasMtpHead=0), "choice_json: installHasMtpHead: got 0; accepts true, false "
                                 "or null (unknown)"),
    (_with(note=5), "choice_json: note: got 5; accepts a string or null"),
    (_with(note=False), "choice_json: note: got false; accepts a string or null"),
    (_with(Drafter="mtp"), None),
]


@pytest.mark.parametrize("raw, message", CHOICE_ERRORS, ids=[r[:60] for r, _ in CHOICE_ERRORS])
def test_choice_from_json_is_strict(raw, message):
    with pytest.raises(InvalidArgument) as info:
        choice_from_json(raw)
    if message is not None:
        assert str(info.value) == message


@pytest.mark.parametrize("raw", ["[]", "null", '"x"', "{", "[" * 100_000])
def test_choice_from_json_non_object_is_a_json_error(raw):
    with pytest.raises(JsonArgumentError):
        choice_from_json(raw)


def test_malformed_text_is_serdes_refusal_where_json_was_never_imported():
    # Inside libtsffi the `json` package is never imported, and the C scanner
    # the decoder's fast path uses then fails with a bare SystemError on
    # malformed text (status 6 through the C ABI, before this was caught).
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    code = ("import sys\n"
            f"sys.path.insert(0, {str(root)!r})\n"
            "from turbospark_ffi.options import parse_options\n"
            "for text in ('{', '[', '[{', '{\"a\":'):\n"
            "    try:\n"
            "        parse_options(text)\n"
            "    except Exception as exc:\n"
            "        print(type(exc).__name__, exc)\n"
            "print('json' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=root, capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines() == [
        "JsonArgumentError options: EOF while parsing an object at line 1 column 1",
        "JsonArgumentError options: EOF while parsing a list at line 1 column 1",
        "JsonArgumentError options: EOF while parsing an object at line 1 column 2",
        "JsonArgumentError options: EOF while parsing a value at line 1 column 5",
        "False"]
