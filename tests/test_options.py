"""The option grammar (options.py docstring, docs/ENGINE.md section 5): valid inputs to
typed Options, invalid ones to InvalidArgument / JsonArgumentError with the
message asserted; and wire.choice_from_json's strictness."""

from __future__ import annotations

import json
import math

import pytest

from turbospark_ffi.errors import InvalidArgument, JsonArgumentError
from turbospark_ffi.options import ABSENT, MAX_OPTIONS_BYTES, Options, parse_options
from turbospark_ffi.policy import DrafterChoice, Speculation, SpeculativeDrafter
from turbospark_ffi.jsontext import MAX_JSON_DEPTH, dumps
from turbospark_ffi.wire import choice_from_json, choice_text

AUTO, OFF, B = Speculation.AUTO, Speculation.OFF, Speculation.block
D = SpeculativeDrafter

SPEC_ACCEPTS = ('"auto", "off" (any case), null, or a block in 1..=15 as a JSON integer or a '
                'string of ASCII digits')
DRAFTER_ACCEPTS = '"auto", "mtp", "dflash" (exact spelling) or null'
TEMP_ACCEPTS = "a finite number >= 0, or null"
BLOCKER_ACCEPTS = "a non-empty string without NUL characters (the engine's reason), or null (the engine reported none)"
KEYS = "speculation, speculativeDrafter, temperature, engineBlocker"


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
    ('{"speculation": 15}', Options(speculation=B(15))),
    ('{"speculation": 1}', Options(speculation=B(1))),
    ('{"speculation": "015"}', Options(speculation=B(15))),
    ('{"speculativeDrafter": "auto"}', Options(drafter=D.AUTO)),
    ('{"speculativeDrafter": "mtp"}', Options(drafter=D.MTP)),
    ('{"speculativeDrafter": "dflash"}', Options(drafter=D.DFLASH)),
    ('{"speculativeDrafter": null}', Options(drafter=D.AUTO)),
    ('{"temperature": 0}', Options(temperature=0.0)),
    ('{"temperature": 0.7}', Options(temperature=0.7)),
    ('{"temperature": 2}', Options(temperature=2.0)),
    ('{"temperature": 1e300}', Options(temperature=1e300)),
    ('{"temperature": null}', Options(temperature=None)),
    ('{"engineBlocker": "a vision tower is active"}',
     Options(engine_blocker="a vision tower is active")),
    ('{"engineBlocker": null}', Options(engine_blocker=None)),
    ('{"engineBlocker": " "}', Options(engine_blocker=" ")),
    ('{"speculation": 3, "speculativeDrafter": "dflash", "temperature": 0, '
     '"engineBlocker": null}',
     Options(speculation=B(3), drafter=D.DFLASH, temperature=0.0, engine_blocker=None)),
    # Unrelated keys: ignored, listed in order, each once.
    ('{"contextLength": 4096, "speculation": 2, "powerProfile": "max", '
     '"contextLength": 8, "expertCacheSlots": {"a": [1, 2]}}',
     Options(speculation=B(2), ignored_keys=("contextLength", "powerProfile",
                                             "expertCacheSlots"))),
    ('{"seed": 1, "maxTokens": 10, "temp": 1, "draft": 2, "blocker": "x"}',
     Options(ignored_keys=("seed", "maxTokens", "temp", "draft", "blocker"))),
    ('{"\\ud800": 1}', Options(ignored_keys=("\ud800",))),
    ('{"x": "' + "[" * 200 + '"}', Options(ignored_keys=("x",))),   # brackets in a string
    ('{"x": ' + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "}",
     Options(ignored_keys=("x",))),                                  # exactly the limit
    ('{"speculation": "auto"}'.encode(), Options(speculation=AUTO)),
]


@pytest.mark.parametrize("raw, expected", VALID, ids=[repr(r)[:60] for r, _ in VALID])
def test_valid_options(raw, expected):
    assert parse_options(raw) == expected


def test_absent_blocker_is_distinct_from_null():
    assert parse_options("{}").engine_blocker is ABSENT
    assert parse_options('{"engineBlocker": null}').engine_blocker is None
    assert parse_options('{"temperature": null}').temperature is None


@pytest.mark.parametrize("raw, deterministic", [
    ("{}", True), ('{"temperature": null}', True), ('{"temperature": 0}', True),
    ('{"temperature": 0.0}', True), ('{"temperature": -0.0}', True),
    ('{"temperature": 5e-324}', False), ('{"temperature": 0.7}', False)])
def test_deterministic(raw, deterministic):
    options = parse_options(raw)
    assert options.deterministic is deterministic


def test_negative_zero_temperature_is_accepted_as_zero():
    t = parse_options('{"temperature": -0.0}').temperature
    assert t == 0 and math.copysign(1, t) == -1


# --------------------------------------------------------------------------
# Invalid values: InvalidArgument naming the key, the value and what it accepts.

INVALID = [
    ('{"speculation": " 2"}', f'speculation: got " 2"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "2 "}', f'speculation: got "2 "; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "+2"}', f'speculation: got "+2"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "-2"}', f'speculation: got "-2"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "2.0"}', f'speculation: got "2.0"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "0x2"}', f'speculation: got "0x2"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "2_0"}', f'speculation: got "2_0"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": ""}', f'speculation: got ""; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "\\u0662"}', f'speculation: got "\\u0662"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "\\u00b2"}', f'speculation: got "\\u00b2"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "on"}', f'speculation: got "on"; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "auto "}', f'speculation: got "auto "; accepts {SPEC_ACCEPTS}'),
    ('{"speculation": "\\u212aUTO"}', None),  # Kelvin sign folds to k: not ASCII
    ('{"speculation": 2.0}', f"speculation: got 2.0; accepts {SPEC_ACCEPTS}"),
    ('{"speculation": 2e0}', f"speculation: got 2.0; accepts {SPEC_ACCEPTS}"),
    ('{"speculation": true}', f"speculation: got true; accepts {SPEC_ACCEPTS}"),
    ('{"speculation": false}', f"speculation: got false; accepts {SPEC_ACCEPTS}"),
    ('{"speculation": [2]}', f"speculation: got an array; accepts {SPEC_ACCEPTS}"),
    ('{"speculation": {}}', f"speculation: got an object; accepts {SPEC_ACCEPTS}"),
    ('{"speculation": -1}',
     f"speculation: got -1, which is not a block (blocks are 1..=15); accepts {SPEC_ACCEPTS}"),
    ('{"speculation": 4294967296}',
     f"speculation: got 4294967296, which is not a block (blocks are 1..=15); accepts {SPEC_ACCEPTS}"),
    ('{"speculation": 18446744073709551616}',
     f"speculation: got 18446744073709551616, which is not a block (blocks are 1..=15); accepts {SPEC_ACCEPTS}"),
    ('{"speculation": "4294967296"}',
     f'speculation: got "4294967296", which is not a block (blocks are 1..=15); accepts {SPEC_ACCEPTS}'),
    # A u32 outside 1..=15 is a block the engine's parser refuses.
    ('{"speculation": 0}', "speculation: got 0, a block outside the allowed range 1..=15 "
                           f"(0 proposes nothing); accepts {SPEC_ACCEPTS}"),
    ('{"speculation": "000"}', 'speculation: got "000", a block outside the allowed range '
                               f"1..=15 (0 proposes nothing); accepts {SPEC_ACCEPTS}"),
    ('{"speculation": 16}', "speculation: got 16, a block outside the allowed range 1..=15 "
                            "(block B verifies B+1 rows and the batched verify kernel's cap "
                            f"is 16 rows); accepts {SPEC_ACCEPTS}"),
    ('{"speculation": "16"}', 'speculation: got "16", a block outside the allowed range 1..=15 '
                              "(block B verifies B+1 rows and the batched verify kernel's cap "
                              f"is 16 rows); accepts {SPEC_ACCEPTS}"),
    ('{"speculation": 4294967295}', "speculation: got 4294967295, a block outside the allowed "
                                    "range 1..=15 (block B verifies B+1 rows and the batched "
                                    f"verify kernel's cap is 16 rows); accepts {SPEC_ACCEPTS}"),
    ('{"speculation": "4294967295"}', 'speculation: got "4294967295", a block outside the '
                                      "allowed range 1..=15 (block B verifies B+1 rows and the "
                                      "batched verify kernel's cap is 16 rows); accepts "
                                      f"{SPEC_ACCEPTS}"),
    ('{"speculativeDrafter": "MTP"}', f'speculativeDrafter: got "MTP"; accepts {DRAFTER_ACCEPTS}'),
    ('{"speculativeDrafter": "Dflash"}',
     f'speculativeDrafter: got "Dflash"; accepts {DRAFTER_ACCEPTS}'),
    ('{"speculativeDrafter": "dflash2"}',
     f'speculativeDrafter: got "dflash2"; accepts {DRAFTER_ACCEPTS}'),
    ('{"speculativeDrafter": ""}', f'speculativeDrafter: got ""; accepts {DRAFTER_ACCEPTS}'),
    ('{"speculativeDrafter": 1}', f"speculativeDrafter: got 1; accepts {DRAFTER_ACCEPTS}"),
    ('{"speculativeDrafter": true}', f"speculativeDrafter: got true; accepts {DRAFTER_ACCEPTS}"),
    ('{"temperature": -1}', f"temperature: got -1; accepts {TEMP_ACCEPTS}"),
    ('{"temperature": -0.5}', f"temperature: got -0.5; accepts {TEMP_ACCEPTS}"),
    ('{"temperature": 1e999}', f"temperature: got a number too large for a double; "
                               f"accepts {TEMP_ACCEPTS}"),
    ('{"temperature": -1e999}', f"temperature: got a number too large for a double; "
                                f"accepts {TEMP_ACCEPTS}"),
    ('{"temperature": true}', f"temperature: got true; accepts {TEMP_ACCEPTS}"),
    ('{"temperature": "0"}', f'temperature: got "0"; accepts {TEMP_ACCEPTS}'),
    ('{"temperature": [0]}', f"temperature: got an array; accepts {TEMP_ACCEPTS}"),
    ('{"engineBlocker": ""}', f'engineBlocker: got ""; accepts {BLOCKER_ACCEPTS}'),
    ('{"engineBlocker": 0}', f"engineBlocker: got 0; accepts {BLOCKER_ACCEPTS}"),
    ('{"engineBlocker": false}', f"engineBlocker: got false; accepts {BLOCKER_ACCEPTS}"),
    ('{"engineBlocker": ["x"]}', f"engineBlocker: got an array; accepts {BLOCKER_ACCEPTS}"),
    # A used key given twice, even with the same value.
    ('{"speculation": 2, "speculation": 3}',
     "speculation: given more than once in options_json; accepts one value"),
    ('{"speculation": null, "speculation": null}',
     "speculation: given more than once in options_json; accepts one value"),
    ('{"engineBlocker": null, "engineBlocker": "x"}',
     "engineBlocker: given more than once in options_json; accepts one value"),
]


@pytest.mark.parametrize("raw, message", INVALID, ids=[r[:50] for r, _ in INVALID])
def test_invalid_values(raw, message):
    with pytest.raises(InvalidArgument) as info:
        parse_options(raw)
    if message is not None:
        assert str(info.value) == message
    key = json.loads(raw.replace("1e999", "1").replace("-1e999", "1"),
                     object_pairs_hook=lambda p: p)[0][0]
    assert str(info.value).startswith(key + ":")
    assert "accepts" in str(info.value)


def test_invalid_values_are_not_json_errors():
    # The two exception types are distinct: a host maps them to distinct codes.
    with pytest.raises(InvalidArgument) as info:
        parse_options('{"speculation": true}')
    assert not isinstance(info.value, JsonArgumentError)


# A decimal-string block of more than 4,300 digits: Python's int() limit. The
# grammar accepts "a string of ASCII digits"; a u32 check follows, so this is
# an out-of-range block and must be InvalidArgument like "4294967296" is --
# not a bare ValueError (the C ABI reports that as an internal error).
def test_leading_zeros_do_not_change_a_block():
    # As the engine's u32 parse reads it: zeros in front are the same number,
    # however many there are (and int()'s 4,300-digit limit is not reached).
    assert parse_options('{"speculation": "' + "0" * 5000 + '2"}').speculation == \
        Speculation.block(2)


@pytest.mark.parametrize("digits", ["9" * 5000, "1" + "0" * 10], ids=["9x5000", "1e10"])
def test_huge_decimal_string_block_is_invalid_argument(digits):
    with pytest.raises(InvalidArgument) as info:
        parse_options('{"speculation": "' + digits + '"}')
    assert str(info.value).startswith("speculation: got ")


# --------------------------------------------------------------------------
# Near-miss keys: refused, naming the key they resemble.

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
    ("Temperature", "temperature"),
    ("temprature", "temperature"),
    ("temperatrue", "temperature"),   # a transposition is one edit
    ("enginBlocker", "engineBlocker"),
    ("engine_blocker", "engineBlocker"),
    ("EngineBlocker", "engineBlocker"),
]


@pytest.mark.parametrize("key, resembles", NEAR_MISSES)
def test_near_miss_keys_are_refused(key, resembles):
    with pytest.raises(InvalidArgument) as info:
        parse_options(json.dumps({key: 2}))
    assert str(info.value) == (
        f'options_json: unknown key "{key}" looks like a misspelling of "{resembles}"; '
        f"accepts the keys {KEYS} (other keys are ignored)")


# --------------------------------------------------------------------------
# JSON errors.

JSON_ERRORS = [
    ("[1]", "options_json must be a JSON object, got an array"),
    ("[]", "options_json must be a JSON object, got an array"),
    ("3", "options_json must be a JSON object, got a number"),
    ("2.5", "options_json must be a JSON object, got a number"),
    ('"speculation"', "options_json must be a JSON object, got a string"),
    ("null", "options_json must be a JSON object, got null"),
    ("true", "options_json must be a JSON object, got a boolean"),
    ('{"speculation": NaN}',
     "options_json is not valid JSON: NaN is not JSON at line 1 column 17 (char 16)"),
    ('{"temperature": Infinity}',
     "options_json is not valid JSON: Infinity is not JSON at line 1 column 17 (char 16)"),
    ('{"temperature": -Infinity}',
     "options_json is not valid JSON: -Infinity is not JSON at line 1 column 17 (char 16)"),
    ("{} x", "options_json is not valid JSON: Extra data at line 1 column 4 (char 3)"),
    ("{", None), ("{'speculation': 2}", None), ('{"speculation": 2,}', None),
    ("   ", None), ('{"a": "\x01"}', None),     # raw control character (strict)
    ('{"speculation": 01}', None),
]


@pytest.mark.parametrize("raw, message", JSON_ERRORS, ids=[r for r, _ in JSON_ERRORS])
def test_json_errors(raw, message):
    with pytest.raises(JsonArgumentError) as info:
        parse_options(raw)
    if message is not None:
        assert str(info.value) == message
    assert str(info.value).startswith("options_json ")


@pytest.mark.parametrize("raw", [
    "[" * 100_000 + "]" * 100_000,
    '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"x": ' + '{"y": ' * 100_000 + "1" + "}" * 100_000 + "}",
    "[" * 100_000,   # unbalanced too
])
def test_deep_nesting_is_a_json_error(raw):
    with pytest.raises(JsonArgumentError, match=r"nests \d+ levels deep; accepts at most 64"):
        parse_options(raw)


def test_one_level_past_the_depth_limit():
    raw = '{"x": ' + "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH + "}"
    with pytest.raises(JsonArgumentError) as info:
        parse_options(raw)
    assert str(info.value) == f"options_json nests {MAX_JSON_DEPTH + 1} levels deep; " \
                              f"accepts at most {MAX_JSON_DEPTH}"


@pytest.mark.parametrize("as_bytes", [True, False])
def test_oversized_options_are_refused(as_bytes):
    raw = '{"x": "' + "a" * (2 << 20) + '"}'
    with pytest.raises(InvalidArgument) as info:
        parse_options(raw.encode() if as_bytes else raw)
    assert str(info.value) == f"options_json is {len(raw)} bytes; accepts at most " \
                              f"{MAX_OPTIONS_BYTES} bytes"


def test_options_just_under_the_limit_parse():
    raw = '{"x": "' + "a" * (MAX_OPTIONS_BYTES - 10) + '"}'
    assert len(raw) <= MAX_OPTIONS_BYTES
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
