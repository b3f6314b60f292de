"""The original module's three decisions -- resolve_drafter, draft_policies,
resolve_speculation -- branch by branch, with the original module's own
messages written out here verbatim (NOT imported from the package: the point
is to compare the package against the original module's text).
"""

from __future__ import annotations

import pytest

from installs import shape_of, write_bytes
from turbospark_ffi.errors import InvalidArgument, SpeculationRefused
from turbospark_ffi.install_writer import write_install
from turbospark_ffi.policy import (ALLOWED_SPECULATION_BLOCKS, DEFAULT_SPECULATION_BLOCK,
                                   DFLASH_SERVING_BLOCK, DflashDraftPolicy, DraftPolicies,
                                   DrafterChoice, MtpDraftPolicy, Speculation,
                                   SpeculationDisabled, SpeculationEnabled,
                                   SpeculativeDrafter, draft_policies, resolve_drafter,
                                   resolve_speculation)
from turbospark_ffi.errors import ResidentIndexError
from turbospark_ffi.resident_index import load_resident_index

from original_texts import DFLASH_NOTE as NOTE, REFUSAL_PREFIX as PREFIX, SAMPLED_REASON as SAMPLED

AUTO, OFF, B = Speculation.AUTO, Speculation.OFF, Speculation.block
D_AUTO, D_MTP, D_DFLASH = SpeculativeDrafter.AUTO, SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH
M_OFF, M_AUTO, M_FIX = MtpDraftPolicy.OFF, MtpDraftPolicy.AUTO, MtpDraftPolicy.fixed
F_OFF, F_AUTO, F_FIX = DflashDraftPolicy.OFF, DflashDraftPolicy.AUTO, DflashDraftPolicy.fixed


def test_constants_are_the_engines():
    assert DEFAULT_SPECULATION_BLOCK == 2
    assert DFLASH_SERVING_BLOCK == 2
    assert list(ALLOWED_SPECULATION_BLOCKS) == list(range(1, 16))


# --------------------------------------------------------------------------
# resolve_drafter


def index_of(model_dir):
    """The install's index as the snapshot reads it: None when unreadable
    (the original module's `load_resident_index(...).ok()`)."""
    try:
        return load_resident_index(model_dir / "model_weights.bin")
    except ResidentIndexError:
        return None


def resolve(requested, model_dir):
    return resolve_drafter(requested, index_of(model_dir))

# install shape -> (write_install kwargs, expected has_mtp, expected has_dflash)
SHAPES = {
    "none": ({}, False, False),
    "mtp": ({"mtp": True}, True, False),
    "dflash": ({"dflash": True}, False, True),
    "both": ({"mtp": True, "dflash": True}, True, True),
    "unreadable": (None, None, None),
}


@pytest.fixture(scope="module")
def install_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("policy_installs")
    dirs = {}
    for name, (kw, has_mtp, has_dflash) in SHAPES.items():
        if kw is None:
            d = root / name
            d.mkdir()
            write_bytes(d / "model_weights.bin", b"\xff" * 100)  # indexSize 2^64-1
        else:
            d = write_install(root / name, **kw)
        shape = shape_of(d)
        # The fixture discriminates: the presence predicates (or the reader's
        # refusal) are exactly what the case needs.
        assert shape["readable"] is (kw is not None)
        assert shape["has_mtp"] is has_mtp and shape["has_dflash"] is has_dflash
        dirs[name] = d
    return dirs


# (requested, install shape) -> (drafter, note)
RESOLVE_TABLE = [
    # auto: DETECTION IS NOT ENABLEMENT.
    (D_AUTO, "none", D_MTP, None),        # NEITHER: mtp, no note
    (D_AUTO, "mtp", D_MTP, None),
    (D_AUTO, "dflash", D_MTP, NOTE),      # the note arm
    (D_AUTO, "both", D_MTP, None),        # BOTH: mtp, no note
    (D_AUTO, "unreadable", D_MTP, None),  # unreadable: mtp rather than failing
    # An explicit ask is passed through untouched, flags still recorded.
    (D_MTP, "none", D_MTP, None),
    (D_MTP, "mtp", D_MTP, None),
    (D_MTP, "dflash", D_MTP, None),       # named mtp on a dflash-only install: no note
    (D_MTP, "both", D_MTP, None),
    (D_MTP, "unreadable", D_MTP, None),
    (D_DFLASH, "none", D_DFLASH, None),
    (D_DFLASH, "mtp", D_DFLASH, None),
    (D_DFLASH, "dflash", D_DFLASH, None),
    (D_DFLASH, "both", D_DFLASH, None),
    (D_DFLASH, "unreadable", D_DFLASH, None),
]


@pytest.mark.parametrize("requested, shape, drafter, note", RESOLVE_TABLE,
                         ids=[f"{r.value}-{s}" for r, s, _, _ in RESOLVE_TABLE])
def test_resolve_drafter(install_dirs, requested, shape, drafter, note):
    _, has_mtp, has_dflash = SHAPES[shape]
    choice = resolve(requested, install_dirs[shape])
    assert choice == DrafterChoice(drafter, has_mtp, has_dflash, note)
    # Three-state, never folded: `is`, not ==, so False is not None.
    assert choice.install_has_mtp_head is has_mtp
    assert choice.install_has_dflash is has_dflash
    assert choice.note == note


def test_note_is_the_seeds_text_verbatim(install_dirs):
    choice = resolve(D_AUTO, install_dirs["dflash"])
    assert choice.note == NOTE
    # Names both spellings: the flag and the C ABI option key.
    assert "--speculative-drafter dflash" in choice.note
    assert 'speculativeDrafter "dflash"' in choice.note


def test_unreadable_index_is_unknown_not_false(tmp_path):
    # A missing model_weights.bin, a directory in its place: nobody could look.
    missing = tmp_path / "missing"
    missing.mkdir()
    as_dir = tmp_path / "dir"
    (as_dir / "model_weights.bin").mkdir(parents=True)
    for d in (missing, as_dir, tmp_path / "does-not-exist"):
        assert shape_of(d)["readable"] is False
        choice = resolve(D_AUTO, d)
        assert choice == DrafterChoice(D_MTP, None, None, None)
        assert choice.install_has_mtp_head is None and choice.install_has_dflash is None


# --------------------------------------------------------------------------
# draft_policies

def C(drafter, mtp, dflash, note=None):
    return DrafterChoice(drafter, mtp, dflash, note)


# (choice, speculation) -> (mtp policy, dflash policy)
POLICY_TABLE = [
    # --- MTP drafter: dflash is pinned OFF throughout.
    ("mtp off", C(D_MTP, True, False), OFF, M_OFF, F_OFF),
    ("mtp auto", C(D_MTP, True, False), AUTO, M_AUTO, F_OFF),
    ("mtp block", C(D_MTP, True, False), B(2), M_FIX(2), F_OFF),
    ("mtp block 3", C(D_MTP, True, True), B(3), M_FIX(3), F_OFF),
    # The original module does not range-check here: resolve_speculation does.
    ("mtp block 0", C(D_MTP, True, False), B(0), M_FIX(0), F_OFF),
    ("mtp block 16", C(D_MTP, True, False), B(16), M_FIX(16), F_OFF),
    ("mtp block u32max", C(D_MTP, True, False), B(2**32 - 1), M_FIX(2**32 - 1), F_OFF),
    # The note arm: pinned OFF even under a named block, and under auto.
    ("note auto", C(D_MTP, False, True, NOTE), AUTO, M_OFF, F_OFF),
    ("note block", C(D_MTP, False, True, NOTE), B(2), M_OFF, F_OFF),
    ("note off", C(D_MTP, False, True, NOTE), OFF, M_OFF, F_OFF),
    # A note outranks even a head that is there (the arm tests the note only).
    ("note with head", C(D_MTP, True, True, NOTE), B(2), M_OFF, F_OFF),
    # The MTP headless arm: Some(false) -> Off ...
    ("mtp headless block", C(D_MTP, False, False), B(2), M_OFF, F_OFF),
    ("mtp headless auto", C(D_MTP, False, False), AUTO, M_AUTO, F_OFF),
    # ... None (unreadable index) keeps asking for the head: never folded to false.
    ("mtp unknown block", C(D_MTP, None, None), B(2), M_FIX(2), F_OFF),
    ("mtp unknown auto", C(D_MTP, None, None), AUTO, M_AUTO, F_OFF),
    # The MTP arm asks about ITS drafter only.
    ("mtp head, no dflash", C(D_MTP, True, False), B(4), M_FIX(4), F_OFF),
    ("mtp unknown, dflash false", C(D_MTP, None, False), B(2), M_FIX(2), F_OFF),
    # --- DFLASH drafter: mtp is pinned OFF throughout.
    ("dflash off", C(D_DFLASH, False, True), OFF, M_OFF, F_OFF),
    ("dflash auto", C(D_DFLASH, False, True), AUTO, M_OFF, F_AUTO),
    ("dflash block", C(D_DFLASH, False, True), B(2), M_OFF, F_FIX(2)),
    ("dflash block 5 with head", C(D_DFLASH, True, True), B(5), M_OFF, F_FIX(5)),
    ("dflash block 16", C(D_DFLASH, False, True), B(16), M_OFF, F_FIX(16)),
    # The DFlash2 headless arm: Some(false) -> Off ...
    ("dflash headless block", C(D_DFLASH, True, False), B(2), M_OFF, F_OFF),
    ("dflash headless auto", C(D_DFLASH, True, False), AUTO, M_OFF, F_AUTO),
    # ... None -> Fixed(n).
    ("dflash unknown block", C(D_DFLASH, None, None), B(2), M_OFF, F_FIX(2)),
    ("dflash unknown auto", C(D_DFLASH, None, None), AUTO, M_OFF, F_AUTO),
    # The DFlash2 arm asks about ITS drafter: a missing MTP head is irrelevant.
    ("dflash, mtp false", C(D_DFLASH, False, None), B(3), M_OFF, F_FIX(3)),
    # The original module's DFlash2 arm does not look at the note.
    ("dflash with note", C(D_DFLASH, False, True, NOTE), B(2), M_OFF, F_FIX(2)),
    # --- AUTO cannot reach here in the original module; it shares the DFlash2 arm.
    ("auto shares dflash arm block", C(D_AUTO, True, True), B(3), M_OFF, F_FIX(3)),
    ("auto shares dflash arm auto", C(D_AUTO, True, True), AUTO, M_OFF, F_AUTO),
    ("auto shares dflash headless", C(D_AUTO, True, False), B(3), M_OFF, F_OFF),
]


@pytest.mark.parametrize("choice, speculation, mtp, dflash",
                         [row[1:] for row in POLICY_TABLE], ids=[row[0] for row in POLICY_TABLE])
def test_draft_policies(choice, speculation, mtp, dflash):
    assert draft_policies(choice, speculation) == DraftPolicies(mtp, dflash)


# The same decisions reached from real installs, through resolve_drafter.
FLOW_TABLE = [
    # (requested drafter, install, speculation) -> policies
    (D_AUTO, "dflash", B(2), M_OFF, F_OFF),          # note arm under a named block
    (D_AUTO, "dflash", AUTO, M_OFF, F_OFF),
    (D_AUTO, "none", B(2), M_OFF, F_OFF),            # MTP headless arm
    (D_AUTO, "none", AUTO, M_AUTO, F_OFF),
    (D_AUTO, "unreadable", B(2), M_FIX(2), F_OFF),   # None keeps asking
    (D_AUTO, "mtp", B(2), M_FIX(2), F_OFF),
    (D_AUTO, "both", B(2), M_FIX(2), F_OFF),         # both: dflash never opened too
    (D_MTP, "dflash", B(2), M_OFF, F_OFF),           # named mtp, headless
    (D_DFLASH, "mtp", B(2), M_OFF, F_OFF),           # DFlash2 headless arm
    (D_DFLASH, "none", B(2), M_OFF, F_OFF),
    (D_DFLASH, "unreadable", B(2), M_OFF, F_FIX(2)), # None keeps asking
    (D_DFLASH, "dflash", B(3), M_OFF, F_FIX(3)),
    (D_DFLASH, "both", AUTO, M_OFF, F_AUTO),
]


@pytest.mark.parametrize("requested, shape, speculation, mtp, dflash", FLOW_TABLE,
                         ids=[f"{r.value}-{s}-{sp!r}" for r, s, sp, _, _ in FLOW_TABLE])
def test_draft_policies_from_real_installs(install_dirs, requested, shape, speculation,
                                           mtp, dflash):
    choice = resolve(requested, install_dirs[shape])
    assert choice.install_has_mtp_head is SHAPES[shape][1]
    assert choice.install_has_dflash is SHAPES[shape][2]
    assert draft_policies(choice, speculation) == DraftPolicies(mtp, dflash)


def test_draft_policies_mtp_is_the_engines_mtp_constructor():
    assert DraftPolicies.mtp_only(M_FIX(2)) == DraftPolicies(M_FIX(2), F_OFF)


# --------------------------------------------------------------------------
# resolve_speculation

ENABLED, DISABLED, REFUSED = "enabled", "disabled", "refused"

# (requested, drafter, engine_blocker, deterministic) -> (outcome, value)
SPECULATION_TABLE = [
    # off is always Disabled(None), whatever stands in the way.
    ("off", OFF, D_MTP, None, True, DISABLED, None),
    ("off with blocker", OFF, D_MTP, "a vision tower is active", True, DISABLED, None),
    ("off sampled dflash", OFF, D_DFLASH, None, False, DISABLED, None),
    ("off dflash blocker", OFF, D_DFLASH, "x", False, DISABLED, None),
    # auto: the drafter's own default block, or a warning.
    ("auto mtp", AUTO, D_MTP, None, True, ENABLED, 2),
    ("auto dflash", AUTO, D_DFLASH, None, True, ENABLED, 2),
    ("auto auto-drafter", AUTO, D_AUTO, None, True, ENABLED, 2),
    ("auto mtp sampled", AUTO, D_MTP, None, False, ENABLED, 2),       # mtp serves sampled
    ("auto auto-drafter sampled", AUTO, D_AUTO, None, False, ENABLED, 2),
    ("auto dflash sampled", AUTO, D_DFLASH, None, False, DISABLED, SAMPLED),
    ("auto mtp blocker", AUTO, D_MTP, "no head", True, DISABLED, "no head"),
    ("auto dflash blocker", AUTO, D_DFLASH, "no drafter", True, DISABLED, "no drafter"),
    # The engine's blocker comes before the sampled refusal.
    ("auto dflash blocker sampled", AUTO, D_DFLASH, "MoE", False, DISABLED, "MoE"),
    # Some("") is still Some: an empty blocker is a blocker.
    ("auto empty blocker", AUTO, D_MTP, "", True, DISABLED, ""),
    ("auto note as blocker", AUTO, D_MTP, NOTE, True, DISABLED, NOTE),
    # A named block: served, or a hard fail naming the reason.
    ("block mtp", B(2), D_MTP, None, True, ENABLED, 2),
    ("block mtp sampled", B(2), D_MTP, None, False, ENABLED, 2),      # mtp serves sampled
    ("block dflash", B(3), D_DFLASH, None, True, ENABLED, 3),
    ("block dflash sampled", B(2), D_DFLASH, None, False, REFUSED, PREFIX + SAMPLED),
    ("block mtp blocker", B(2), D_MTP, "no head", True, REFUSED, PREFIX + "no head"),
    ("block dflash blocker", B(2), D_DFLASH, "MoE", True, REFUSED, PREFIX + "MoE"),
    ("block dflash blocker sampled", B(2), D_DFLASH, "MoE", False, REFUSED, PREFIX + "MoE"),
    ("block empty blocker", B(2), D_MTP, "", True, REFUSED, PREFIX),
    ("block note", B(2), D_MTP, NOTE, True, REFUSED, PREFIX + NOTE),
    # The blocker is reported before the range.
    ("block 16 blocker", B(16), D_MTP, "MoE", True, REFUSED, PREFIX + "MoE"),
    ("block 0 sampled dflash", B(0), D_DFLASH, None, False, REFUSED, PREFIX + SAMPLED),
]

# The allowed range, on each drafter.
for _n, _ok in ((0, False), (1, True), (2, True), (15, True), (16, False),
                (2**31, False), (2**32 - 1, False)):
    for _d in (D_MTP, D_DFLASH):
        SPECULATION_TABLE.append(
            (f"range {_n} {_d.value}", B(_n), _d, None, True,
             ENABLED if _ok else REFUSED,
             _n if _ok else f"{PREFIX}block {_n} is outside allowed range 1..=15"))


@pytest.mark.parametrize("requested, drafter, blocker, deterministic, outcome, value",
                         [row[1:] for row in SPECULATION_TABLE],
                         ids=[row[0] for row in SPECULATION_TABLE])
def test_resolve_speculation(requested, drafter, blocker, deterministic, outcome, value):
    if outcome == REFUSED:
        with pytest.raises(SpeculationRefused) as info:
            resolve_speculation(requested, drafter, blocker, deterministic)
        assert str(info.value) == value
        assert info.value.reason == value[len(PREFIX):]
        return
    plan = resolve_speculation(requested, drafter, blocker, deterministic)
    if outcome == ENABLED:
        assert plan == SpeculationEnabled(value)
        assert plan.enabled is True and plan.block == value
    else:
        assert plan == SpeculationDisabled(value)
        assert plan.enabled is False and plan.reason == value


def test_out_of_range_message_verbatim():
    with pytest.raises(SpeculationRefused) as info:
        resolve_speculation(B(16), D_MTP, None, True)
    assert str(info.value) == ("--speculative was asked for but cannot be served: "
                               "block 16 is outside allowed range 1..=15")


def test_disabled_reason_none_and_empty_are_different():
    assert SpeculationDisabled(None) != SpeculationDisabled("")
    assert resolve_speculation(OFF, D_MTP, "", True) == SpeculationDisabled(None)
    assert resolve_speculation(AUTO, D_MTP, "", True) == SpeculationDisabled("")


# --------------------------------------------------------------------------
# The three decisions in the original module's order, on real installs.

E2E_TABLE = [
    # (requested drafter, install, speculation, deterministic) -> outcome, value
    (D_AUTO, "mtp", AUTO, True, ENABLED, 2),
    (D_AUTO, "mtp", B(4), False, ENABLED, 4),
    (D_AUTO, "both", AUTO, False, ENABLED, 2),      # both -> mtp, serves sampled
    (D_AUTO, "dflash", AUTO, True, DISABLED, NOTE),
    (D_AUTO, "dflash", B(2), True, REFUSED, PREFIX + NOTE),
    (D_AUTO, "dflash", OFF, True, DISABLED, None),
    (D_DFLASH, "dflash", AUTO, True, ENABLED, 2),
    (D_DFLASH, "dflash", AUTO, False, DISABLED, SAMPLED),
    (D_DFLASH, "both", B(2), False, REFUSED, PREFIX + SAMPLED),
    (D_DFLASH, "dflash", B(15), True, ENABLED, 15),
]


@pytest.mark.parametrize("requested, shape, speculation, deterministic, outcome, value",
                         E2E_TABLE)
def test_three_decisions_in_order(install_dirs, requested, shape, speculation,
                                  deterministic, outcome, value):
    """The original module's flow with no engine blocker other than the note
    (which it prefers over the engine's own reason)."""
    choice = resolve(requested, install_dirs[shape])
    assert (choice.note is not None) is (shape == "dflash" and requested is D_AUTO)
    draft_policies(choice, speculation)
    if outcome == REFUSED:
        with pytest.raises(SpeculationRefused) as info:
            resolve_speculation(speculation, choice.drafter, choice.note, deterministic)
        assert str(info.value) == value
    else:
        plan = resolve_speculation(speculation, choice.drafter, choice.note, deterministic)
        assert plan == (SpeculationEnabled(value) if outcome == ENABLED
                        else SpeculationDisabled(value))


# --------------------------------------------------------------------------
# The types.

@pytest.mark.parametrize("bad", [-1, 2**32, True, 2.0, "2", None])
def test_speculation_block_is_a_u32(bad):
    with pytest.raises(ValueError):
        Speculation.block(bad)


def test_values_are_immutable_and_compare_by_value():
    choice = DrafterChoice(D_MTP, True, None)
    with pytest.raises(AttributeError):
        choice.note = "x"
    with pytest.raises(AttributeError):
        B(2).n = 3
    assert B(2) == B(2) and B(2) != B(3) and hash(B(2)) == hash(B(2))
    assert DrafterChoice(D_MTP, False, None) != DrafterChoice(D_MTP, None, None)
    assert SpeculativeDrafter("dflash") is D_DFLASH


@pytest.mark.parametrize("flag", [0, 1, "false", ""])
def test_drafter_choice_flags_are_three_state(flag):
    with pytest.raises(TypeError):
        DrafterChoice(D_MTP, flag, None)
    with pytest.raises(TypeError):
        DrafterChoice(D_MTP, None, flag)
