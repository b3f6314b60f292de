"""The turn (TURBOSPARK_FACTS.md section 13, revision 0a45c54): whether a turn
the host sends on the session speculates through the engine's C ABI, as a
table with every cause's words written out. The session's answer is the
open's whatever the turn: a sampled temperature never disables it."""

from __future__ import annotations

import pytest

from turbospark_ffi.snapshots import snapshot
from turbospark_ffi.install_writer import write_install
from turbospark_ffi.options import parse_options
from turbospark_ffi.api import speculation_plan
from turbospark_ffi.plan import decide
from turbospark_ffi.turn import turn
from turbospark_ffi.wire import plan_text, plan_to_dict

DEFAULT = ("this session drafts, but a turn speculates only at temperature 0 and this turn's "
           "temperature is 0.2 (the engine binding's default): it decodes sequentially (send "
           "temperature 0 to speculate)")
SAMPLED = ("this session drafts, but a turn speculates only at temperature 0 and this turn's "
           "temperature is 0.7: it decodes sequentially (send temperature 0 to speculate)")
RATE = ("this session drafts, but maxTokensPerSec turns the engine's rate control on, and a turn "
        "under rate control decodes sequentially (leave maxTokensPerSec unset to speculate)")
BALANCED = ('this session drafts, but powerProfile "balanced" turns the engine\'s rate control '
            'on, and a turn under rate control decodes sequentially (powerProfile '
            '"performance" speculates)')
EFFICIENCY = BALANCED.replace('"balanced"', '"efficiency"')
LOW_POWER = ('this session drafts, but Low Power Mode resolves the absent powerProfile to '
             '"efficiency", which turns the engine\'s rate control on, and a turn under rate '
             'control decodes sequentially (set powerProfile "performance" to speculate)')

# options text (on an MTP install: the session drafts at block 2 unless
# "off") -> (temperature, speculates, reason)
ROWS = [
    ("{}", 0.2, False, DEFAULT),
    ('{"tsffi": {"temperature": 0}}', 0.0, True, None),
    ('{"tsffi": {"temperature": -0.0}}', -0.0, True, None),
    ('{"tsffi": {"temperature": 0.7}}', 0.7, False, SAMPLED),
    ('{"tsffi": {"temperature": 0}, "maxTokensPerSec": 12}', 0.0, False, RATE),
    # Any value turns rate control on, 0 included.
    ('{"tsffi": {"temperature": 0}, "maxTokensPerSec": 0}', 0.0, False, RATE),
    ('{"tsffi": {"temperature": 0}, "maxTokensPerSec": null}', 0.0, True, None),
    ('{"tsffi": {"temperature": 0}, "powerProfile": "performance"}', 0.0, True, None),
    ('{"tsffi": {"temperature": 0}, "powerProfile": "balanced"}', 0.0, False, BALANCED),
    ('{"tsffi": {"temperature": 0}, "powerProfile": "efficiency"}', 0.0, False, EFFICIENCY),
    ('{"tsffi": {"temperature": 0, "lowPowerMode": true}}', 0.0, False, LOW_POWER),
    ('{"tsffi": {"temperature": 0, "lowPowerMode": false}}', 0.0, True, None),
    # A named profile outranks the OS's mode, as it replaces the resolution.
    ('{"tsffi": {"temperature": 0, "lowPowerMode": true}, "powerProfile": "performance"}',
     0.0, True, None),
    # The temperature is named first, then the rate cap, then the profile.
    ('{"tsffi": {"temperature": 0.7}, "maxTokensPerSec": 3, "powerProfile": "balanced"}', 0.7,
     False, SAMPLED),
    ('{"maxTokensPerSec": 3, "powerProfile": "balanced", "tsffi": {"temperature": 0}}', 0.0,
     False, RATE),
    # A session that does not draft: no turn reason (the session's says why).
    ('{"speculation": "off", "tsffi": {"temperature": 0}}', 0.0, False, None),
    ('{"speculation": "off"}', 0.2, False, None),
]


@pytest.fixture(scope="module")
def mtp(tmp_path_factory):
    return str(write_install(tmp_path_factory.mktemp("turn") / "mtp", mtp=True))


@pytest.mark.parametrize("options, temperature, speculates, reason", ROWS,
                         ids=[r[0] for r in ROWS])
def test_turn(mtp, options, temperature, speculates, reason):
    plan = plan_to_dict(speculation_plan(mtp, options))
    assert plan["turn"] == {"temperature": temperature, "speculates": speculates,
                            "reason": reason}
    # The session is the open's answer, whatever the turn.
    off = '"off"' in options
    assert plan["speculation"] == ({"block": None, "drafter": None, "reason": None} if off else
                                   {"block": 2, "drafter": "mtp", "reason": None})


def test_the_table_discriminates():
    # Each cause's words are its own, and every outcome is some row's.
    assert len({DEFAULT, SAMPLED, RATE, BALANCED, EFFICIENCY, LOW_POWER}) == 6
    assert {(r[2], r[3] is None) for r in ROWS} == {(True, True), (False, False), (False, True)}


@pytest.mark.parametrize("block", [2, None])
def test_the_function_reads_only_its_inputs(block):
    # -0.0 is 0 for the engine's `== 0.0` test.
    assert turn(block, -0.0, False, None, False).speculates is (block is not None)
    assert turn(block, 1e-9, False, None, False).speculates is False


def test_a_remembered_turn_keeps_its_own_temperature(mtp):
    # A snapshot remembers each turn by its inputs; 0.0 and -0.0 are one key
    # to a dict, and the plan's JSON carries the temperature as sent.
    snap = snapshot(mtp)
    for temperature in ("0.0", "-0.0", "0.0", "0.5", "-0.0"):
        options = parse_options(('{"tsffi": {"temperature": %s}}' % temperature).encode())
        text = plan_text(decide(snap, options))
        assert '"turn":{"temperature":%s,' % temperature in text
        assert ('"speculates":false' in text) is (temperature == "0.5")


def test_a_sampled_turn_leaves_the_dflash2_session_on(tmp_path):
    """The original module's sampled arm is the engine CLI's rule, never the
    open's (which assumes greedy): the session drafts, the turn does not."""
    d = str(write_install(tmp_path / "dflash", dflash=True))
    plan = plan_to_dict(speculation_plan(
        d, '{"speculativeDrafter": "dflash", "speculation": 2, "tsffi": {"temperature": 0.7}}'))
    assert plan["speculation"] == {"block": 2, "drafter": "dflash", "reason": None}
    assert plan["turn"]["speculates"] is False
    assert plan["turn"]["reason"] == SAMPLED


def test_the_temperatures_fast_text_is_rust_texts():
    """wire's turn text takes repr's digits where they are serde's: held
    equal to rust_text's rule over generated values, exponents included."""
    import random
    from turbospark_ffi.rust_text import compact
    from turbospark_ffi.turn import temperature_text
    rng = random.Random(37)
    values = [0.0, -0.0, 0.2, 1.0, 2.5, 1e-5, 1e-7, 1e15, 1e16, 12340000000.0, 5e-324, 1e300]
    values += [rng.random() * rng.choice([1, 10, 1e-3, 1e6, 1e20]) for _ in range(5000)]
    assert [temperature_text(v) for v in values] == [compact(v) for v in values]
