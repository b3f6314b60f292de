"""Every rule of TURBOSPARK_FACTS.md section 10 (the engine's open, option by option) and of the
library's own "tsffi" object, as a table with the answers written out: each key's accepted values
and each message arm, the order between two bad options, the statuses, the tsffi object's rules and
the warnings. Through `parse_options` (the one parser every entry point uses); the C ABI's status
is the error's own `status` (tests/test_engine_options.py runs the engine's measured texts through
the C ABI itself).

On main before issue 30 (ABI 2, commit 603747b), 95 of the 109 rows of ROWS gave another answer
(measured by running parse_options of that tree on each row, warnings not compared).
"""

from __future__ import annotations

import pytest

from turbospark_ffi.errors import InvalidArgument, JsonArgumentError, OptionRefused
from turbospark_ffi.options import ABSENT, OPTION_KEYS, Options, parse_options
from turbospark_ffi.policy import Speculation, SpeculativeDrafter

AUTO, OFF, B = Speculation.AUTO, Speculation.OFF, Speculation.block
MTP, DFLASH = SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH


def ok(speculation=AUTO, drafter=SpeculativeDrafter.AUTO, temperature=None, blocker=ABSENT,
       ignored=(), warnings=(), **turn_inputs):
    """Options as parsed: `turn_inputs` are rate_capped, power_profile,
    low_power_mode and vision_sidecar (what the turn and the vision arm read)."""
    return Options(speculation, drafter, temperature, blocker, tuple(ignored), tuple(warnings),
                   **turn_inputs)


def refused(message):  # status 2, the engine's bare message
    return (2, message)


def serde(message):  # status 4
    return (4, "options: " + message)


def bad(message):  # status 1
    return (1, message)


MOVED = ('"{0}" at the top level is ignored, as the engine\'s open ignores it; since ABI 3 this '
         'library reads it inside the "tsffi" object: {{"tsffi": {{"{0}": ...}}}}')
NEAR = ('"{0}" is not a key the engine\'s open reads, so it ignores it (and so does this '
        'preview); did you mean "{1}"?')
SPEC_RANGE = "speculation block must be in 1..=15, got {}"
SPEC_OTHER = 'speculation must be "off", "auto" or a block in 1..=15, got {}'
DRAFTER = "speculativeDrafter must be auto, mtp or dflash, got {}"
TSFFI_ACCEPTS = 'accepts an object with the keys "engineBlocker", "temperature" and "lowPowerMode", or null'

ROWS = [
    # -- 1. NULL / "" = defaults; whitespace goes to the parser.
    ("null-pointer", None, ok()),
    ("empty", "", ok()),
    ("whitespace", " ", serde("EOF while parsing a value at line 1 column 1")),
    ("empty-object", "{}", ok()),
    # -- 2. decoding (status 4, serde's words and positions)
    ("eof-object", "{", serde("EOF while parsing an object at line 1 column 1")),
    ("duplicate", '{"speculation":1,"speculation":2}',
     serde("duplicate field `speculation` at line 1 column 30")),
    ("wrong-type-string", '{"kvBits":4}',
     serde("invalid type: integer `4`, expected a string at line 1 column 11")),
    ("wrong-type-u32", '{"minAutoContext":-1}',
     serde("invalid value: integer `-1`, expected u32 at line 1 column 20")),
    ("wrong-type-f64", '{"steeringScale":"x"}',
     serde('invalid type: string "x", expected f64 at line 1 column 20')),
    ("top-level-string", '"x"',
     serde('invalid type: string "x", expected struct OpenOptions at line 1 column 3')),
    ("null-is-absent", '{"speculation":null,"speculativeDrafter":null,"kvBits":null}', ok()),
    ("case-sensitive-keys", '{"Speculation":2}',
     ok(ignored=["Speculation"], warnings=[NEAR.format("Speculation", "speculation")])),
    ("unknown-deep", '{"x":' + "[" * 200 + "]" * 200 + ',"speculation":3}',
     ok(B(3), ignored=["x"])),
    ("unknown-huge-number", '{"x":' + "9" * 5000 + "}", ok(ignored=["x"])),
    ("unknown-repeated", '{"x":1,"x":2,"speculation":"off"}', ok(OFF, ignored=["x"])),
    # 0a45c54's order: maxContext, expertCacheSlots, expertResidency,
    # powerProfile, loadGuard, minAutoContext, maxTokensPerSec, speculation,
    # speculativeDrafter, ... (element 6 is maxTokensPerSec, given: the turn
    # is rate-capped).
    ("array-positional", '[null,null,null,null,null,null,null,3,"dflash"]', ok(B(3), DFLASH)),
    ("array-positional-rate", '[null,null,null,null,null,null,3,"dflash"]',
     refused(SPEC_OTHER.format('"dflash"'))),
    ("array-18", "[" + ",".join(["null"] * 17) + ",true]", ok()),
    ("array-19", "[" + ",".join(["null"] * 19) + "]",
     serde("trailing characters at line 1 column 92")),
    ("array-empty", "[]", ok()),
    ("escaped-key", '{"sp\\u0065culation":4}', ok(B(4))),
    # -- 3./4. maxContext
    ("maxContext-auto", '{"maxContext":"AUTO"}', ok()),
    # A named window: the open's fit depends on the machine's memory, which
    # the preview cannot know, and says so.
    ("maxContext-u32", '{"maxContext":4294967295}',
     ok(warnings=["maxContext 4294967295: whether this machine's memory holds that context "
                  "window is the open's to decide, and this preview cannot know; it takes the "
                  "window to fit"])),
    ("maxContext-beyond-u32", '{"maxContext":4294967296}',
     refused("maxContext must be a non-negative integer, got 4294967296")),
    ("maxContext-negative", '{"maxContext":-1}',
     refused("maxContext must be a non-negative integer, got -1")),
    ("maxContext-fraction", '{"maxContext":1.5}',
     refused("maxContext must be a non-negative integer, got 1.5")),
    ("maxContext-string", '{"maxContext":"big"}',
     refused('maxContext must be a number or "auto", got "big"')),
    ("maxContext-bool", '{"maxContext":true}',
     refused('maxContext must be a number or "auto", got true')),
    ("maxContext-object", '{"maxContext":{"a":1}}',
     refused('maxContext must be a number or "auto", got {"a":1}')),
    # expertCacheSlots
    ("slots-auto", '{"expertCacheSlots":"Auto"}', ok()),
    ("slots-listed", '{"expertCacheSlots":48}', ok()),
    ("slots-unlisted", '{"expertCacheSlots":7}',
     refused('expertCacheSlots must be "auto" or one of [8, 16, 24, 32, 48, 64, 96, 128], '
             "got 7")),
    ("slots-fraction", '{"expertCacheSlots":0.7}',
     refused("expertCacheSlots must be a non-negative integer, got 0.7")),
    ("slots-string", '{"expertCacheSlots":"x"}',
     refused('expertCacheSlots must be a number or "auto", got "x"')),
    # loadGuard
    ("loadGuard-tier", '{"loadGuard":"Strict"}', ok()),
    ("loadGuard-bytes", '{"loadGuard":1000000}', ok()),
    ("loadGuard-bad-tier", '{"loadGuard":"tight"}',
     refused("loadGuard must be off, relaxed, balanced, strict or a byte count, got tight")),
    ("loadGuard-zero", '{"loadGuard":0}',
     refused("loadGuard as a byte ceiling must be positive, got 0")),
    ("loadGuard-fraction", '{"loadGuard":0.7}',
     refused("loadGuard as a byte ceiling must be positive, got 0.7")),
    ("loadGuard-array", '{"loadGuard":[]}',
     refused("loadGuard must be a tier name or a byte count, got []")),
    ("minAutoContext-any-u32", '{"minAutoContext":0}', ok()),
    # speculation
    ("spec-auto", '{"speculation":"AuTo"}', ok()),
    ("spec-off", '{"speculation":"OFF"}', ok(OFF)),
    ("spec-int", '{"speculation":15}', ok(B(15))),
    ("spec-string-digits", '{"speculation":"007"}', ok(B(7))),
    ("spec-string-plus", '{"speculation":"+2"}', ok(B(2))),
    ("spec-zero", '{"speculation":0}', refused(SPEC_RANGE.format(0))),
    ("spec-16", '{"speculation":16}', refused(SPEC_RANGE.format(16))),
    ("spec-u64-max", '{"speculation":18446744073709551615}',
     refused(SPEC_RANGE.format(18446744073709551615))),
    ("spec-string-range", '{"speculation":"4294967295"}', refused(SPEC_RANGE.format(4294967295))),
    ("spec-string-plus-zero", '{"speculation":"+0"}', refused(SPEC_RANGE.format(0))),
    ("spec-negative", '{"speculation":-2}', refused(SPEC_RANGE.format(-2))),
    ("spec-minus-zero", '{"speculation":-0}', refused(SPEC_RANGE.format("-0.0"))),
    ("spec-float-integral", '{"speculation":2.0}', refused(SPEC_RANGE.format("2.0"))),
    ("spec-exponent", '{"speculation":1e2}', refused(SPEC_RANGE.format("100.0"))),
    ("spec-fraction", '{"speculation":2.5}', refused(SPEC_RANGE.format("2.5"))),
    ("spec-string-space", '{"speculation":"2 "}', refused(SPEC_OTHER.format('"2 "'))),
    ("spec-string-minus", '{"speculation":"-1"}', refused(SPEC_OTHER.format('"-1"'))),
    ("spec-string-overflow", '{"speculation":"18446744073709551616"}',
     refused(SPEC_OTHER.format('"18446744073709551616"'))),
    ("spec-string-empty", '{"speculation":""}', refused(SPEC_OTHER.format('""'))),
    ("spec-string-nul", '{"speculation":"2\\u0000"}', refused(SPEC_OTHER.format('"2\\0"'))),
    ("spec-string-quote", '{"speculation":"a\\"b"}', refused(SPEC_OTHER.format('"a\\"b"'))),
    ("spec-bool", '{"speculation":true}', refused(SPEC_OTHER.format("true"))),
    ("spec-array", '{"speculation":[1,"x",null]}', refused(SPEC_OTHER.format('[1,"x",null]'))),
    # speculativeDrafter
    ("drafter-mtp", '{"speculativeDrafter":"mtp"}', ok(drafter=MTP)),
    ("drafter-dflash", '{"speculativeDrafter":"dflash"}', ok(drafter=DFLASH)),
    ("drafter-case", '{"speculativeDrafter":"MTP"}', refused(DRAFTER.format('"MTP"'))),
    ("drafter-empty", '{"speculativeDrafter":""}', refused(DRAFTER.format('""'))),
    # steering keys
    ("steering-all", '{"steering":"/v.bin","steeringMode":"clamp","steeringScale":-2,'
     '"steeringLayers":" 3 : 5 ","steeringTarget":1,"steeringGate":0}', ok()),
    ("steeringMode-bad", '{"steering":"/v","steeringMode":"zap"}',
     refused('steeringMode must be one of ["ablate", "add", "clamp", "renorm"], got "zap"')),
    ("steeringGate-negative", '{"steering":"/v","steeringGate":-1}',
     refused("steeringGate must be a finite number >= 0, got -1")),
    ("steeringGate-fraction", '{"steering":"/v","steeringGate":-0.5}',
     refused("steeringGate must be a finite number >= 0, got -0.5")),
    ("steeringLayers-reversed", '{"steering":"/v","steeringLayers":"5:3"}',
     refused('steeringLayers must be START:END, inclusive and 0-based, got "5:3"')),
    ("steeringLayers-no-colon", '{"steering":"/v","steeringLayers":"5"}',
     refused('steeringLayers must be START:END, inclusive and 0-based, got "5"')),
    ("steering-without-path", '{"steeringScale":1.0}',
     refused("steering options given without a steering vector path")),
    ("steering-without-path-null-path", '{"steering":null,"steeringTarget":0}',
     refused("steering options given without a steering vector path")),
    # powerProfile, kvBits
    ("power-ok", '{"powerProfile":"efficiency"}', ok(power_profile="efficiency")),
    # -- 0a45c54: expertResidency, prefixReuse, maxContext 0
    ("residency-ok", '{"expertResidency":"streamed"}', ok()),
    ("residency-mapped", '{"expertResidency":"mapped"}', ok()),
    ("residency-case", '{"expertResidency":"Mapped"}',
     refused('expertResidency must be auto, streamed or mapped, got "Mapped"')),
    ("residency-type", '{"expertResidency":1}',
     serde("invalid type: integer `1`, expected a string at line 1 column 20")),
    ("prefixReuse-ok", '{"prefixReuse":false}', ok()),
    ("prefixReuse-type", '{"prefixReuse":1}',
     serde("invalid type: integer `1`, expected a boolean at line 1 column 16")),
    ("maxContext-zero", '{"maxContext":0}', refused('maxContext must be at least 1, or "auto"')),
    ("maxContext-zero-string", '{"maxContext":"0"}',
     refused('maxContext must be a number or "auto", got "0"')),
    ("order-maxContext-zero-first", '{"expertCacheSlots":7,"maxContext":0}',
     refused('maxContext must be at least 1, or "auto"')),
    ("order-slots-before-residency", '{"expertResidency":"x","expertCacheSlots":7}',
     refused('expertCacheSlots must be "auto" or one of [8, 16, 24, 32, 48, 64, 96, 128], '
             "got 7")),
    ("order-residency-before-loadGuard", '{"loadGuard":"x","expertResidency":"x"}',
     refused('expertResidency must be auto, streamed or mapped, got "x"')),
    ("power-case", '{"powerProfile":"Balanced"}',
     refused('powerProfile must be performance, balanced or efficiency, got "Balanced"')),
    ("kvBits-ok", '{"kvBits":"3.5"}', ok()),
    ("kvBits-case", '{"kvBits":"OFF"}', ok()),
    ("kvBits-bad", '{"kvBits":"5"}', refused('kvBits must be off, 2, 3, 3.5 or 4, got "5"')),
    # -- the open's order between two bad options
    ("order-maxContext-first", '{"speculation":0,"maxContext":"x"}',
     refused('maxContext must be a number or "auto", got "x"')),
    ("order-slots-before-loadGuard", '{"loadGuard":"x","expertCacheSlots":7}',
     refused('expertCacheSlots must be "auto" or one of [8, 16, 24, 32, 48, 64, 96, 128], '
             "got 7")),
    ("order-loadGuard-before-spec", '{"speculation":0,"loadGuard":"x"}',
     refused("loadGuard must be off, relaxed, balanced, strict or a byte count, got x")),
    ("order-spec-before-drafter", '{"speculativeDrafter":"x","speculation":0}',
     refused(SPEC_RANGE.format(0))),
    ("order-drafter-before-steering", '{"steering":"/v","steeringMode":"x",'
     '"speculativeDrafter":"x"}', refused(DRAFTER.format('"x"'))),
    ("order-steering-before-power", '{"powerProfile":"x","steering":"/v","steeringGate":-1}',
     refused("steeringGate must be a finite number >= 0, got -1")),
    ("order-power-before-kvBits", '{"kvBits":"x","powerProfile":"x"}',
     refused('powerProfile must be performance, balanced or efficiency, got "x"')),
    ("order-kvBits-before-no-path", '{"steeringGate":1,"kvBits":"x"}',
     refused('kvBits must be off, 2, 3, 3.5 or 4, got "x"')),
    ("order-decoding-before-mapping", '{"speculation":0,"kvBits":4}',
     serde("invalid type: integer `4`, expected a string at line 1 column 27")),
    ("order-mapping-before-tsffi", '{"speculation":0,"tsffi":5}', refused(SPEC_RANGE.format(0))),
    # -- the tsffi object (status 1, strict)
    ("tsffi-both", '{"speculation":2,"tsffi":{"engineBlocker":"no","temperature":0.7}}',
     ok(B(2), temperature=0.7, blocker="no")),
    ("tsffi-blocker-null", '{"tsffi":{"engineBlocker":null}}', ok(blocker=None)),
    ("tsffi-null", '{"tsffi":null}', ok()),
    ("tsffi-empty", '{"tsffi":{}}', ok()),
    ("tsffi-temperature-int", '{"tsffi":{"temperature":1}}', ok(temperature=1.0)),
    ("tsffi-not-object", '{"tsffi":5}',
     bad(f"tsffi must be a JSON object, got a number; {TSFFI_ACCEPTS}")),
    ("tsffi-unknown-key", '{"tsffi":{"temp":1}}',
     bad(f'tsffi: unknown key "temp"; {TSFFI_ACCEPTS}')),
    ("tsffi-twice", '{"tsffi":{"temperature":1,"temperature":2}}',
     bad("tsffi.temperature: given more than once; accepts one value")),
    ("tsffi-temperature-negative", '{"tsffi":{"temperature":-1}}',
     bad("tsffi.temperature: got -1; accepts a finite number >= 0, or null (the engine "
         "binding's default temperature, 0.2)")),
    ("tsffi-temperature-string", '{"tsffi":{"temperature":"hot"}}',
     bad('tsffi.temperature: got "hot"; accepts a finite number >= 0, or null (the engine '
         "binding's default temperature, 0.2)")),
    ("tsffi-blocker-empty", '{"tsffi":{"engineBlocker":""}}',
     bad('tsffi.engineBlocker: got ""; accepts a non-empty string without NUL characters or '
         "lone surrogates (the engine's reason), or null (the engine reported none)")),
    ("tsffi-blocker-nul", '{"tsffi":{"engineBlocker":"a\\u0000b"}}',
     bad('tsffi.engineBlocker: got "a\\u0000b"; accepts a non-empty string without NUL '
         "characters or lone surrogates (the engine's reason), or null (the engine reported "
         "none)")),
    ("tsffi-blocker-surrogate", '{"tsffi":{"engineBlocker":"\\ud800 vision"}}',
     bad('tsffi.engineBlocker: got "\\ufffd vision"; accepts a non-empty string without NUL '
         "characters or lone surrogates (the engine's reason), or null (the engine reported "
         "none)")),
    ("tsffi-blocker-number", '{"tsffi":{"engineBlocker":5}}',
     bad("tsffi.engineBlocker: got 5; accepts a non-empty string without NUL characters or "
         "lone surrogates (the engine's reason), or null (the engine reported none)")),
    # -- ignored keys and warnings: never a refusal
    ("top-temperature", '{"temperature":0.7,"speculation":2}',
     ok(B(2), ignored=["temperature"], warnings=[MOVED.format("temperature")])),
    ("top-engineBlocker", '{"engineBlocker":"x"}',
     ok(ignored=["engineBlocker"], warnings=[MOVED.format("engineBlocker")])),
    ("near-miss-edit", '{"speculativeDrafters":"x"}',
     ok(ignored=["speculativeDrafters"],
        warnings=[NEAR.format("speculativeDrafters", "speculativeDrafter")])),
    ("near-miss-case", '{"KVBITS":"x"}', ok(ignored=["KVBITS"],
                                            warnings=[NEAR.format("KVBITS", "kvBits")])),
    ("far-key", '{"theme":"dark"}', ok(ignored=["theme"])),
    ("near-miss-tsffi", '{"Tsffi":{"temperature":1},"tsfi":2}',
     ok(ignored=["Tsffi", "tsfi"], warnings=[NEAR.format("Tsffi", "tsffi"),
                                             NEAR.format("tsfi", "tsffi")])),
    ("far-from-tsffi", '{"stiff":1,"ts":2}', ok(ignored=["stiff", "ts"])),
    # A key is read as a str, which serde checks: a lone surrogate is refused
    # (it never reaches a result; inside an ignored VALUE it is skipped).
    ("lone-surrogate-key", '{"\\ud800":1}',
     serde("unexpected end of hex escape at line 1 column 9")),
    ("lone-surrogate-ignored-value", '{"x":"\\ud800"}', ok(ignored=["x"])),
]


@pytest.mark.parametrize("name,text,want", ROWS, ids=[row[0] for row in ROWS])
def test_rule(name, text, want):
    if isinstance(want, Options):
        assert parse_options(text) == want
        return
    status, message = want
    kind = {1: InvalidArgument, 2: OptionRefused, 4: JsonArgumentError}[status]
    with pytest.raises(kind) as caught:
        parse_options(text)
    assert (caught.value.status, str(caught.value)) == (status, message)


def test_table_covers_every_key_and_status():
    # Each of the 18 keys appears in some row, and every status the option
    # stage can give (0, 1, 2, 4) is some row's answer.
    texts = " ".join(row[1] or "" for row in ROWS)
    assert [key for key in OPTION_KEYS if f'"{key}"' not in texts] == \
        ["maxTokensPerSec", "visionSidecar"]
    statuses = {0 if isinstance(row[2], Options) else row[2][0] for row in ROWS}
    assert statuses == {0, 1, 2, 4}


@pytest.mark.parametrize("text,want", [
    ('{"maxTokensPerSec":12.5,"visionSidecar":"/side"}',
     ok(rate_capped=True, vision_sidecar="/side",
        warnings=['visionSidecar "/side": this preview takes the tower to attach (the open loads '
                  "it after the install, and fails if it cannot), so the verify pass is "
                  "vision-blind and speculation off"])),
    ('{"maxTokensPerSec":"fast"}',
     serde('invalid type: string "fast", expected f64 at line 1 column 25')),
    ('{"visionSidecar":2048}',
     serde("invalid type: integer `2048`, expected a string at line 1 column 21")),
])
def test_type_only_keys(text, want):
    if isinstance(want, Options):
        assert parse_options(text) == want
        return
    with pytest.raises(JsonArgumentError) as caught:
        parse_options(text)
    assert (caught.value.status, str(caught.value)) == want


def test_a_wrong_row_would_fail():
    # The comparison discriminates: the order row's answer is not the other
    # bad option's message, nor a status 1 refusal as ABI 2 gave.
    with pytest.raises(OptionRefused) as caught:
        parse_options('{"speculation":0,"maxContext":"x"}')
    assert str(caught.value) != SPEC_RANGE.format(0)
    assert caught.value.status != InvalidArgument.status
