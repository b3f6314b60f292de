"""speculation_plan end to end, on real installs written in the engine's layout,
with options parsed from JSON the way a host sends them, and the result's JSON
shape (wire.plan_to_dict) asserted exactly."""

from __future__ import annotations

import errno
import json

import pytest

from engine_texts import DFLASH_MOE, blocker, corrupt, io_failed
from installs import shape_of, write_bytes
from turbospark_ffi.errors import InvalidArgument, OpenRefused, OptionRefused, SpeculationRefused
from turbospark_ffi.install_writer import write_install
from turbospark_ffi.options import parse_options
from turbospark_ffi.api import speculation_plan
from turbospark_ffi.policy import DFLASH_AUTO_NOTE, SAMPLED_BLOCK_DRAFTER_REASON
from turbospark_ffi.jsontext import dumps
from turbospark_ffi.wire import plan_to_dict

from original_texts import DFLASH_NOTE as NOTE, REFUSAL_PREFIX as PREFIX, SAMPLED_REASON as SAMPLED


def test_package_texts_are_the_seeds():
    assert DFLASH_AUTO_NOTE == NOTE
    assert SAMPLED_BLOCK_DRAFTER_REASON == SAMPLED


# name -> (write_install kwargs or a special, the shape the case needs)
SHAPES = {
    "none": ({}, dict(readable=True, has_mtp=False, has_dflash=False, experts=0, probe_dtype=4)),
    "mtp": ({"mtp": True}, dict(has_mtp=True, has_dflash=False, experts=0, probe_dtype=4)),
    "dflash": ({"dflash": True}, dict(has_mtp=False, has_dflash=True, experts=0, probe_dtype=4)),
    "both": ({"mtp": True, "dflash": True},
             dict(has_mtp=True, has_dflash=True, experts=0, probe_dtype=4)),
    "moe": ({"experts": 256}, dict(has_mtp=False, has_dflash=False, experts=256, probe_dtype=4)),
    "moe_mtp": ({"experts": 256, "mtp": True},
                dict(has_mtp=True, has_dflash=False, experts=256, probe_dtype=4)),
    "moe_both": ({"experts": 256, "mtp": True, "dflash": True},
                 dict(has_mtp=True, has_dflash=True, experts=256, probe_dtype=4)),
    "bf16": ({"mtp": True, "dflash": True, "probe_dtype": 1},
             dict(has_mtp=True, has_dflash=True, experts=0, probe_dtype=1)),
    "int4": ({"mtp": True, "dflash": True, "probe_dtype": 4},
             dict(has_mtp=True, has_dflash=True, experts=0, probe_dtype=4)),
    "nofull": ({"mtp": True, "dflash": True, "full_attention_every": 0},
               dict(has_mtp=True, has_dflash=True, experts=0, first_layer=None)),
    "garbage": ("garbage", dict(readable=False, check="entry_count_overflow", experts=0)),
}


@pytest.fixture(scope="module")
def installs(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan_installs")
    out = {}
    for name, (kw, needs) in SHAPES.items():
        if kw == "garbage":
            d = write_install(root / name)
            write_bytes(d / "model_weights.bin", bytes(range(256)) * 4)
        else:
            d = write_install(root / name, **kw)
        shape = shape_of(d)
        for key, value in needs.items():
            assert shape[key] == value, (name, key, shape)
        if needs.get("readable", True):
            assert shape["readable"] is True
        out[name] = str(d)
    return out


def choice(drafter, mtp, dflash, note=None):
    return {"drafter": drafter, "installHasMtpHead": mtp, "installHasDflash": dflash,
            "note": note}


def pol(mode, block=None):
    return {"mode": mode, "block": block}


OFFP, AUTOP = pol("off"), pol("auto")


def spec(block=None, drafter=None, reason=None):
    return {"block": block, "drafter": drafter, "reason": reason}


def plan_json(model_dir, options):
    """The plan's wire form, checked for shape; "modelDir" checked (every
    install here is an existing directory named by its absolute path, which
    is the directory read) and then left out, and "turn" checked for its
    shape and left out (tests/test_turn.py holds its answers), so cases
    compare the session's decision."""
    result = speculation_plan(model_dir, parse_options(options))
    d = plan_to_dict(result)
    # The wire form is JSON and round-trips to the same dict.
    assert json.loads(dumps(d)) == d
    assert list(d) == ["drafter", "draftPolicies", "speculation", "turn", "source",
                       "ignoredKeys", "warnings", "modelDir"]
    assert d.pop("modelDir") == str(model_dir)
    turn = d.pop("turn")
    assert list(turn) == ["temperature", "speculates", "reason"]
    # A turn speculates only on a session that drafts; a reason only when
    # the session drafts and the turn does not.
    if d["speculation"]["block"] is None:
        assert (turn["speculates"], turn["reason"]) == (False, None)
    else:
        assert (turn["reason"] is None) is turn["speculates"]
    assert list(d["drafter"]) == ["drafter", "installHasMtpHead", "installHasDflash", "note"]
    assert list(d["speculation"]) == ["block", "drafter", "reason"]
    # block non-null iff drafter non-null; reason null whenever it is on.
    s = d["speculation"]
    assert (s["block"] is None) is (s["drafter"] is None)
    if s["block"] is not None:
        assert s["reason"] is None
    for p in d["draftPolicies"].values():
        assert (p["block"] is not None) is (p["mode"] == "fixed")
    return d


# (install, options) -> exact plan_to_dict
EXACT = [
    ("none", "", choice("mtp", False, False), AUTOP, OFFP, None),
    ("mtp", "", choice("mtp", True, False), AUTOP, OFFP, spec(2, "mtp")),
    ("mtp", '{"speculation": 2}', choice("mtp", True, False), pol("fixed", 2), OFFP,
     spec(2, "mtp")),
    ("mtp", '{"speculation": "15", "tsffi": {"temperature": 0.8}}', choice("mtp", True, False),
     pol("fixed", 15), OFFP, spec(15, "mtp")),                    # mtp serves sampled
    ("mtp", '{"speculation": "off"}', choice("mtp", True, False), OFFP, OFFP, spec()),
    ("dflash", "", choice("mtp", False, True, NOTE), OFFP, OFFP, spec(reason=NOTE)),
    ("dflash", '{"speculation": "OFF"}', choice("mtp", False, True, NOTE), OFFP, OFFP, spec()),
    ("dflash", '{"speculativeDrafter": "dflash"}', choice("dflash", False, True), OFFP, AUTOP,
     spec(2, "dflash")),
    ("dflash", '{"speculativeDrafter": "dflash", "speculation": 3, "tsffi": {"temperature": 0}}',
     choice("dflash", False, True), OFFP, pol("fixed", 3), spec(3, "dflash")),
    ("dflash", '{"speculativeDrafter": "dflash", "tsffi": {"temperature": -0.0}}',
     choice("dflash", False, True), OFFP, AUTOP, spec(2, "dflash")),
    # The session is the open's answer, greedy assumed: a sampled turn
    # temperature never disables it (ABI 4; the turn says the turn will not
    # speculate).
    ("dflash", '{"speculativeDrafter": "dflash", "tsffi": {"temperature": 0.7}}',
     choice("dflash", False, True), OFFP, AUTOP, spec(2, "dflash")),
    ("both", '{"speculativeDrafter": "dflash", "speculation": 2, "tsffi": {"temperature": 0.5}}',
     choice("dflash", True, True), OFFP, pol("fixed", 2), spec(2, "dflash")),
    ("both", "", choice("mtp", True, True), AUTOP, OFFP, spec(2, "mtp")),
    ("both", '{"tsffi": {"temperature": 1.0}}', choice("mtp", True, True), AUTOP, OFFP, spec(2, "mtp")),
    ("both", '{"speculativeDrafter": "mtp", "speculation": 2}', choice("mtp", True, True),
     pol("fixed", 2), OFFP, spec(2, "mtp")),
    ("both", '{"speculativeDrafter": "dflash"}', choice("dflash", True, True), OFFP, AUTOP,
     spec(2, "dflash")),
    ("int4", '{"speculation": 1}', choice("mtp", True, True), pol("fixed", 1), OFFP,
     spec(1, "mtp")),
    # off is off, whatever stands in the way.
    ("moe_mtp", '{"speculation": "off", "tsffi": {"engineBlocker": "x"}}', choice("mtp", True, False),
     OFFP, OFFP, spec()),
    # engineBlocker null = the engine reported none: the preview is not consulted.
    ("none", '{"tsffi": {"engineBlocker": null}}', choice("mtp", False, False), AUTOP, OFFP,
     spec(2, "mtp")),
    # An explicit engine reason is used as is.
    ("mtp", '{"tsffi": {"engineBlocker": "a vision tower is active"}}', choice("mtp", True, False),
     AUTOP, OFFP, spec(reason="a vision tower is active")),
    # The note outranks an explicit engine reason, and the engine's "none".
    ("dflash", '{"tsffi": {"engineBlocker": "carries no multi-token-prediction head"}}',
     choice("mtp", False, True, NOTE), OFFP, OFFP, spec(reason=NOTE)),
    ("dflash", '{"tsffi": {"engineBlocker": null}}', choice("mtp", False, True, NOTE), OFFP, OFFP,
     spec(reason=NOTE)),
]


@pytest.mark.parametrize("shape, options, drafter, mtp, dflash, speculation", EXACT,
                         ids=[f"{r[0]}-{r[1]}" for r in EXACT])
def test_plan_exact_json(installs, shape, options, drafter, mtp, dflash, speculation):
    d = plan_json(installs[shape], options)
    expected = {"drafter": drafter, "draftPolicies": {"mtp": mtp, "dflash": dflash},
                "speculation": speculation, "source": "preview", "ignoredKeys": [],
                "warnings": []}
    if speculation is None:  # the preview's wording: checked separately below
        expected["speculation"] = d["speculation"]
        assert d["speculation"]["block"] is None
    assert d == expected


def test_absent_engine_blocker_means_preview(installs):
    """Each drafter's missing-drafter arm, in its own blocker function's words."""
    d = plan_json(installs["none"], "")
    assert d["speculation"] == spec(reason=blocker("mtp", "no-drafter"))
    d = plan_json(installs["mtp"], '{"speculativeDrafter": "dflash"}')
    assert d["speculation"] == spec(reason=blocker("dflash", "no-drafter"))


# Refusals: (install, options) -> exact message, or a predicate on the reason.
REFUSALS = [
    ("none", '{"speculation": 2}', PREFIX + blocker("mtp", "no-drafter")),
    ("dflash", '{"speculation": 2}', PREFIX + NOTE),
    ("dflash", '{"speculation": 2, "tsffi": {"engineBlocker": "something else"}}', PREFIX + NOTE),
    ("mtp", '{"speculation": 2, "tsffi": {"engineBlocker": "a vision tower is active"}}',
     PREFIX + "a vision tower is active"),
]


@pytest.mark.parametrize("shape, options, message", REFUSALS,
                         ids=[f"{r[0]}-{r[1]}" for r in REFUSALS])
def test_plan_refusals(installs, shape, options, message):
    with pytest.raises(SpeculationRefused) as info:
        speculation_plan(installs[shape], parse_options(options))
    assert str(info.value) == message


# A block outside 1..=15 as an OPTION is the open's mapping refusal (status
# 2, its message), so no plan is made, whatever the install (a MoE one, the
# DFlash2-only one with its note, an unreadable one) and whatever blocker the
# host passes.
OUT_OF_RANGE = [
    ('{"speculation": 16}', "16"),
    ('{"speculation": "16"}', "16"),
    ('{"speculation": 0}', "0"),
    ('{"speculation": "0"}', "0"),
    ('{"speculation": 4294967295}', "4294967295"),
    ('{"speculation": "4294967295"}', "4294967295"),
    ('{"speculation": 16, "tsffi": {"engineBlocker": "a vision tower is active"}}', "16"),
]


@pytest.mark.parametrize("options, shown", OUT_OF_RANGE, ids=[r[0] for r in OUT_OF_RANGE])
@pytest.mark.parametrize("shape", ["mtp", "moe", "dflash", "garbage"])
def test_out_of_range_block_is_the_opens_refusal(installs, shape, options, shown):
    with pytest.raises(OptionRefused) as info:
        speculation_plan(installs[shape], options)
    assert (info.value.status, str(info.value)) == \
        (2, f"speculation block must be in 1..=15, got {shown}")


@pytest.mark.parametrize("shape", ["mtp", "moe", "none"])
@pytest.mark.parametrize("n", [0, 16, 2**32 - 1])
def test_a_python_caller_building_the_block_gets_the_seeds_own_refusal(installs, shape, n):
    """The original module's range arm, for a caller who builds Speculation.block(n)
    directly: it comes after any blocker, as the original module orders it."""
    from turbospark_ffi.options import Options
    from turbospark_ffi.policy import Speculation
    with pytest.raises(SpeculationRefused) as info:
        speculation_plan(installs[shape], Options(speculation=Speculation.block(n),
                                                  engine_blocker=None))
    assert str(info.value) == f"{PREFIX}block {n} is outside allowed range 1..=15"
    with pytest.raises(SpeculationRefused) as info:
        speculation_plan(installs[shape], Options(speculation=Speculation.block(n),
                                                  engine_blocker="a vision tower is active"))
    assert str(info.value) == PREFIX + "a vision tower is active"


# --------------------------------------------------------------------------
# MoE: refused for its ARCHITECTURE, never for its head.

def assert_moe_reason(reason, drafter):
    """The MoE arm of the blocker function of the drafter the plan resolved
    (the MTP runner's unless dflash was named)."""
    assert reason == blocker("dflash" if drafter == "dflash" else "mtp", "moe", experts=256)
    # It must not send anyone after an artifact that cannot help.
    for advice in ("stream", "shard", "multi-token-prediction head", "beside the trunk"):
        assert advice not in reason


@pytest.mark.parametrize("shape", ["moe", "moe_mtp", "moe_both"])
@pytest.mark.parametrize("options", ["", '{"speculativeDrafter": "dflash"}',
                                     '{"speculativeDrafter": "mtp", "tsffi": {"temperature": 0.3}}'])
def test_moe_auto_is_disabled_for_its_architecture(installs, shape, options):
    if shape == "moe_both" and "dflash" in options:
        # A DFlash2 drafter on a MoE install fails the OPEN when named,
        # under auto too: test_moe_dflash_drafter_fails_the_open.
        return
    d = plan_json(installs[shape], options)
    assert d["speculation"]["block"] is None
    assert_moe_reason(d["speculation"]["reason"], d["drafter"]["drafter"])
    assert d["drafter"]["drafter"] == ("dflash" if "dflash" in options else "mtp")


@pytest.mark.parametrize("shape, headless", [("moe", True), ("moe_mtp", False),
                                             ("moe_both", False)])
@pytest.mark.parametrize("drafter", ["mtp", "dflash", None])
def test_moe_named_block_is_refused_for_its_architecture(installs, shape, headless, drafter):
    options = {"speculation": 2}
    if drafter:
        options["speculativeDrafter"] = drafter
    if shape == "moe_both" and drafter == "dflash":
        with pytest.raises(OpenRefused) as info:
            speculation_plan(installs[shape], parse_options(json.dumps(options)))
        assert str(info.value) == DFLASH_MOE.format(experts=256)
        return
    with pytest.raises(SpeculationRefused) as info:
        speculation_plan(installs[shape], parse_options(json.dumps(options)))
    message = str(info.value)
    assert message.startswith(PREFIX)
    assert_moe_reason(message[len(PREFIX):], drafter)


@pytest.mark.parametrize("options", ['{"speculativeDrafter": "dflash"}',
                                     '{"speculativeDrafter": "dflash", "speculation": 3}'])
def test_moe_dflash_drafter_fails_the_open(installs, options):
    """The DFlash2 build refuses a MoE install (FACTS section 12): the open
    fails, at auto as at a named block, with the MoE text prefixed."""
    assert shape_of(installs["moe_both"])["has_dflash"] is True
    with pytest.raises(OpenRefused) as info:
        speculation_plan(installs["moe_both"], options)
    assert (info.value.status, str(info.value)) == (2, DFLASH_MOE.format(experts=256))
    # "off" builds nothing, and opens.
    off = plan_json(installs["moe_both"], '{"speculativeDrafter": "dflash", "speculation": "off"}')
    assert off["speculation"] == spec()


def test_moe_headless_named_block_does_not_ask_the_open_for_a_head(installs):
    """The ornith35b case: the draft policies pin the absent drafter OFF so the
    open succeeds and the architectural reason is the one reported."""
    from turbospark_ffi.plan import request
    from turbospark_ffi.policy import (Speculation, SpeculativeDrafter, draft_policies,
                                       resolve_drafter)
    from turbospark_ffi.wire import policies_to_dict
    assert shape_of(installs["moe"])["has_mtp"] is False
    snap = request(installs["moe"]).snapshot
    for drafter in (SpeculativeDrafter.AUTO, SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH):
        c = resolve_drafter(drafter, snap.index)
        assert policies_to_dict(draft_policies(c, Speculation.block(2))) == {
            "mtp": OFFP, "dflash": OFFP}


# --------------------------------------------------------------------------
# The probe and the full-attention layer.

@pytest.mark.parametrize("drafter", ["mtp", "dflash"])
def test_probe_dtype_bf16_is_the_reason_int4_is_served(installs, drafter):
    opts = json.dumps({"speculativeDrafter": drafter})
    off = plan_json(installs["bf16"], opts)["speculation"]
    probe = "language_model.model.layers.%d.self_attn.q_proj.weight" % (
        shape_of(installs["bf16"])["first_layer"])
    assert off == spec(reason=blocker(drafter, "probe-dtype", probe=probe, dtype=1))
    assert "stream" not in off["reason"]
    on = plan_json(installs["int4"], opts)["speculation"]
    assert on == spec(2, drafter)


@pytest.mark.parametrize("drafter", ["mtp", "dflash"])
def test_no_full_attention_layer_is_the_reason(installs, drafter):
    d = plan_json(installs["nofull"], json.dumps({"speculativeDrafter": drafter}))
    reason = d["speculation"]["reason"]
    assert d["speculation"]["block"] is None
    assert reason == blocker(drafter, "no-probe-layer") and "stream" not in reason
    with pytest.raises(SpeculationRefused) as info:
        speculation_plan(installs["nofull"],
                         parse_options(json.dumps({"speculativeDrafter": drafter,
                                                   "speculation": 2})))
    assert str(info.value) == PREFIX + blocker(drafter, "no-probe-layer")


# --------------------------------------------------------------------------
# An unreadable index fails the open: the reader's text, status 2, whatever
# is asked (the original module's resolve_drafter still reads it as unknown).

COUNT = int.from_bytes(bytes(range(16, 24)), "little")  # entryCount x 72 overflows


@pytest.mark.parametrize("options", ["", '{"speculation": 2}', '{"speculation": "off"}',
                                     '{"speculation": 2, "tsffi": {"engineBlocker": null}}',
                                     '{"speculativeDrafter": "dflash", "speculation": 4}'])
def test_unreadable_index_is_the_opens_refusal(installs, options):
    with pytest.raises(OpenRefused) as info:
        speculation_plan(installs["garbage"], options)
    assert (info.value.status, info.value.stage, str(info.value)) == (
        2, "index", corrupt("entry_count_overflow", entry_count=COUNT))
    from turbospark_ffi.plan import request
    assert request(installs["garbage"], options).drafter_choice().install_has_mtp_head is None


def test_missing_weights_fails_the_open(tmp_path):
    d = write_install(tmp_path / "i")
    (d / "model_weights.bin").unlink()
    assert shape_of(d)["check"] == "open"
    with pytest.raises(OpenRefused) as info:
        speculation_plan(str(d), "")
    assert str(info.value) == io_failed("open", errno.ENOENT)


# --------------------------------------------------------------------------
# Options plumbing.

def test_ignored_keys_are_reported_in_order(installs):
    d = plan_json(installs["mtp"], '{"contextLength": 4096, "speculation": 2, '
                                   '"theme": "max", "contextLength": 1, "powerProfile": '
                                   '"balanced"}')
    # The open's own keys (powerProfile) are read, so not listed.
    assert d["ignoredKeys"] == ["contextLength", "theme"]
    assert d["speculation"] == spec(2, "mtp")


@pytest.mark.parametrize("bad", ["", "a\x00b"])
def test_bad_model_dir_is_refused(bad):
    with pytest.raises(InvalidArgument):
        speculation_plan(bad)


def test_default_options_equal_empty_json(installs):
    for shape in ("none", "mtp", "dflash", "both", "moe"):
        d = plan_to_dict(speculation_plan(installs[shape]))
        assert d.pop("modelDir") == installs[shape]
        assert d.pop("turn") == plan_to_dict(speculation_plan(installs[shape], "{}"))["turn"]
        assert d == plan_json(installs[shape], "{}")
