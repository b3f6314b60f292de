"""Every value type of the package compares by ALL its fields, including the
ones a subclass inherits: distinct values are unequal and hash apart, equal
values hash alike, and a pickle round trip gives back an equal value with
every field.

A base that read only the concrete class's own `__slots__` made
`MtpDraftPolicy.fixed(2) == MtpDraftPolicy.fixed(3)` and every
`DraftPolicies` equal to every other one, so table tests comparing policies
could not fail. `test_every_value_type_is_in_the_table` keeps this table
complete as types are added.
"""

from __future__ import annotations

import itertools
import pickle

import pytest

from turbospark_ffi._value import Value
from turbospark_ffi.blockers import Blocker
from turbospark_ffi.expert_layout import ExpertLayout
from turbospark_ffi.manifest_arch import ManifestArch
from turbospark_ffi.options import ABSENT, Options
from turbospark_ffi.plan import PlanResult, SpeculationChoice, SpeculationChoices
from turbospark_ffi.reconcile_memory import Outcome, Reconciliation
from turbospark_ffi.policy import (DflashDraftPolicy, DraftPolicies, DrafterChoice,
                                   MtpDraftPolicy, Speculation, SpeculationDisabled,
                                   SpeculationEnabled, SpeculativeDrafter)
from turbospark_ffi.resident_index import IndexEntry
from turbospark_ffi.store import StoreFile, StoreRow
from turbospark_ffi.store_listing import StoreAlias, StoreListing
from turbospark_ffi.turn import Turn

M, F, S, D = MtpDraftPolicy, DflashDraftPolicy, Speculation, SpeculativeDrafter
CHOICE = DrafterChoice(D.MTP, True, False)
POLICIES = DraftPolicies(M.AUTO, F.OFF)


def _entry(**changes) -> IndexEntry:
    fields = dict(name="mtp.fc.weight", dtype=4, file_offset=16384, size_bytes=64,
                  shape=(8, 8, 0, 0), scale_offset=0, scale_size=0, bias_offset=0, bias_size=0)
    fields.update(changes)
    return IndexEntry(**fields)


# type -> values that are pairwise distinct: each differs from the others in
# exactly the field its row varies (inherited fields included).
DISTINCT = {
    Speculation: [S.AUTO, S.OFF, S.block(0), S.block(1), S.block(2), S.block(16),
                  S.block(2**32 - 1)],
    SpeculativeDrafter: [D.AUTO, D.MTP, D.DFLASH],
    MtpDraftPolicy: [M.OFF, M.AUTO, M.fixed(0), M.fixed(2), M.fixed(3)],
    DflashDraftPolicy: [F.OFF, F.AUTO, F.fixed(0), F.fixed(2), F.fixed(3)],
    DraftPolicies: [DraftPolicies(M.OFF, F.OFF), DraftPolicies(M.AUTO, F.OFF),
                    DraftPolicies(M.fixed(2), F.OFF), DraftPolicies(M.fixed(3), F.OFF),
                    DraftPolicies(M.OFF, F.AUTO), DraftPolicies(M.OFF, F.fixed(2)),
                    DraftPolicies(M.OFF, F.fixed(3))],
    DrafterChoice: [DrafterChoice(D.MTP, True, False), DrafterChoice(D.DFLASH, True, False),
                    DrafterChoice(D.MTP, False, False), DrafterChoice(D.MTP, None, False),
                    DrafterChoice(D.MTP, True, True), DrafterChoice(D.MTP, True, None),
                    DrafterChoice(D.MTP, True, False, "a note"),
                    DrafterChoice(D.MTP, True, False, "another note")],
    SpeculationEnabled: [SpeculationEnabled(1), SpeculationEnabled(2), SpeculationEnabled(15)],
    SpeculationDisabled: [SpeculationDisabled(None), SpeculationDisabled("a reason"),
                          SpeculationDisabled("another reason")],
    Options: [Options(), Options(speculation=S.OFF), Options(speculation=S.block(3)),
              Options(drafter=D.DFLASH), Options(temperature=0.0), Options(temperature=0.7),
              Options(engine_blocker=None), Options(engine_blocker="blocked"),
              Options(ignored_keys=("contextLength",)), Options(warnings=("a hint",)),
              Options(rate_capped=True), Options(power_profile="balanced"),
              Options(low_power_mode=True), Options(vision_sidecar="/tower")],
    PlanResult: [PlanResult(CHOICE, POLICIES, SpeculationEnabled(2)),
                 PlanResult(DrafterChoice(D.MTP, False, False), POLICIES,
                            SpeculationEnabled(2)),
                 PlanResult(CHOICE, DraftPolicies(M.fixed(2), F.OFF), SpeculationEnabled(2)),
                 PlanResult(CHOICE, POLICIES, SpeculationEnabled(3)),
                 PlanResult(CHOICE, POLICIES, SpeculationDisabled("why")),
                 PlanResult(CHOICE, POLICIES, SpeculationEnabled(2), ("contextLength",)),
                 PlanResult(CHOICE, POLICIES, SpeculationDisabled("why"), (), None, "moe"),
                 PlanResult(CHOICE, POLICIES, SpeculationEnabled(2), turn=Turn(0.0, True, None)),
                 PlanResult(CHOICE, POLICIES, SpeculationEnabled(2), source="engine")],
    Turn: [Turn(0.0, True, None), Turn(0.2, False, "why"), Turn(0.7, False, "why"),
           Turn(0.2, False, "another"), Turn(0.2, False, None)],
    ManifestArch: [ManifestArch("qwen35", 5120, 248320, 8, 0, (2, 1), 0),
                   ManifestArch("qwen36", 5120, 248320, 8, 0, (2, 1), 0),
                   ManifestArch("qwen35", 4096, 248320, 8, 0, (2, 1), 0),
                   ManifestArch("qwen35", 5120, 1000, 8, 0, (2, 1), 0),
                   ManifestArch("qwen35", 5120, 248320, 4, 0, (2, 1), 0),
                   ManifestArch("qwen35", 5120, 248320, 8, 256, (2, 1), 0),
                   ManifestArch("qwen35", 5120, 248320, 8, 0, (1, 2), 0),
                   ManifestArch("qwen35", 5120, 248320, 8, 0, (2, 1), 27)],
    Outcome: [Outcome.opened(2, "mtp", None), Outcome.opened(3, "mtp", None),
              Outcome.opened(2, "dflash", None), Outcome.opened(None, None, "why"),
              Outcome.opened(None, None, None), Outcome.failed(2, "why"),
              Outcome.failed(4, "why"), Outcome.failed(2, "another")],
    Reconciliation: [
        Reconciliation(Outcome.opened(2, "mtp", None), Outcome.opened(2, "mtp", None), (),
                       {"engine": "turbospark-runtime", "engineVersion": "0.3.0"}),
        Reconciliation(Outcome.opened(2, "mtp", None), Outcome.opened(3, "mtp", None),
                       ("speculation.block",),
                       {"engine": "turbospark-runtime", "engineVersion": "0.3.0"}),
        Reconciliation(Outcome.opened(3, "mtp", None), Outcome.opened(2, "mtp", None),
                       ("speculation.block",),
                       {"engine": "turbospark-runtime", "engineVersion": "0.3.0"}),
        Reconciliation(Outcome.opened(2, "mtp", None), Outcome.opened(2, "mtp", None), (),
                       {"engine": "turbospark-runtime", "engineVersion": "0.4.0"})],
    Blocker: [Blocker("moe", "why"), Blocker("engine", "why"), Blocker("moe", "another")],
    SpeculationChoice: [SpeculationChoice(S.AUTO, D.AUTO, None, "refused", False),
                        SpeculationChoice(S.OFF, D.AUTO, None, "refused", False),
                        SpeculationChoice(S.AUTO, D.MTP, None, "refused", False),
                        SpeculationChoice(S.AUTO, D.AUTO, PlanResult(CHOICE, POLICIES,
                                                                     SpeculationEnabled(2)),
                                          None, False),
                        SpeculationChoice(S.AUTO, D.AUTO, None, "another refusal", False),
                        SpeculationChoice(S.AUTO, D.AUTO, None, "refused", True)],
    SpeculationChoices: [SpeculationChoices("/m", True, False, ()),
                         SpeculationChoices("/n", True, False, ()),
                         SpeculationChoices("/m", False, False, ()),
                         SpeculationChoices("/m", True, None, ()),
                         SpeculationChoices("/m", True, False, (
                             SpeculationChoice(S.OFF, D.AUTO, None, "refused", False),)),
                         SpeculationChoices("/m", True, False, (), ("contextLength",))],
    ExpertLayout: [ExpertLayout(False, 0, 0), ExpertLayout(True, 0, 0),
                   ExpertLayout(True, 8, 0), ExpertLayout(True, 8, 4),
                   ExpertLayout(True, 256, 40)],
    StoreRow: [StoreRow("qm", "/a", None, "text"), StoreRow("qx", "/a", None, "text"),
               StoreRow("qm", "/b", None, "text"), StoreRow("qm", "/a", "image", "text"),
               StoreRow("qm", "/a", None, "audio")],
    StoreFile: [StoreFile("/s", True, None, ()), StoreFile("/t", True, None, ()),
                StoreFile("/s", False, None, ()), StoreFile("/s", True, "why", ()),
                StoreFile("/s", True, None, (StoreRow("qm", "/a", None, "text"),))],
    StoreAlias: [StoreAlias("qm", "/a", "/a", True, False),
                 StoreAlias("qx", "/a", "/a", True, False),
                 StoreAlias("qm", "b", "/a", True, False),
                 StoreAlias("qm", "/a", "/b", True, False),
                 StoreAlias("qm", "/a", "/a", None, False),
                 StoreAlias("qm", "/a", "/a", True, None)],
    StoreListing: [StoreListing("/s", "/s/i", True, None, ()),
                   StoreListing(None, "/s/i", True, None, ()),
                   StoreListing("/s", "/t/i", True, None, ()),
                   StoreListing("/s", "/s/i", False, None, ()),
                   StoreListing("/s", "/s/i", True, "why", ()),
                   StoreListing("/s", "/s/i", True, None,
                                (StoreAlias("qm", "/a", "/a", True, False),))],
    IndexEntry: [_entry(), _entry(name="dflash.fc.weight"), _entry(dtype=1),
                 _entry(file_offset=16448), _entry(size_bytes=128),
                 _entry(shape=(8, 4, 0, 0)), _entry(scale_offset=16384, scale_size=4),
                 _entry(scale_size=4), _entry(bias_offset=16384), _entry(bias_size=4)],
}

PAIRS = [(cls.__name__, a, b) for cls, values in DISTINCT.items()
         for a, b in itertools.combinations(values, 2)]


def _concrete_value_types(cls=Value):
    for sub in cls.__subclasses__():
        # The package's own types; a test's local subclass is not a value type.
        if sub.__module__.startswith("turbospark_ffi.") and not sub.__name__.startswith("_"):
            if sub.__name__ != "SpeculationPlan":   # abstract: Enabled | Disabled
                yield sub
        yield from _concrete_value_types(sub)


def test_every_value_type_is_in_the_table():
    missing = sorted(t.__name__ for t in set(_concrete_value_types()) if t not in DISTINCT)
    assert missing == []


@pytest.mark.parametrize("name, a, b", PAIRS, ids=[f"{n}:{a!r}!={b!r}" for n, a, b in PAIRS])
def test_distinct_values_differ(name, a, b):
    assert a != b and b != a
    assert not (a == b)
    assert hash(a) != hash(b)


ALL = [(cls.__name__, v) for cls, values in DISTINCT.items() for v in values]


@pytest.mark.parametrize("name, value", ALL, ids=[f"{n}:{v!r}" for n, v in ALL])
def test_pickle_round_trip_keeps_every_field(name, value):
    back = pickle.loads(pickle.dumps(value))
    assert type(back) is type(value)
    assert back == value and hash(back) == hash(value)
    assert repr(back) == repr(value)
    # Each value's distinct siblings stay distinct after the trip.
    for other in DISTINCT[type(value)]:
        if other is not value and other != value:
            assert back != other


# Two policies of different drafters with the same mode and block are not
# the same value; nor are the two outcomes of a speculation plan.
CROSS = [(M.fixed(2), F.fixed(2)), (M.OFF, F.OFF), (M.AUTO, F.AUTO),
         (SpeculationEnabled(2), SpeculationDisabled(None))]


@pytest.mark.parametrize("a, b", CROSS, ids=[f"{a!r}!={b!r}" for a, b in CROSS])
def test_values_of_different_types_differ(a, b):
    assert a != b and b != a


# Equal values built separately are equal and hash alike.
EQUAL = [(M.fixed(2), M.fixed(2)), (F.fixed(7), F("fixed", 7)),
         (S.block(3), S("block", 3)),
         (DraftPolicies(M.fixed(2), F.OFF), DraftPolicies.mtp_only(M.fixed(2))),
         (Options(speculation=S.block(3)), Options(speculation=S.block(3))),
         (_entry(), _entry())]


@pytest.mark.parametrize("a, b", EQUAL, ids=[repr(a) for a, _ in EQUAL])
def test_equal_values_are_equal(a, b):
    assert a == b and hash(a) == hash(b)


# What repr shows: every field, inherited ones included.
REPRS = [
    (Options(speculation=S.block(3)),
     "Options(speculation=Speculation.block(3), drafter=SpeculativeDrafter.AUTO, "
     "temperature=None, engine_blocker=ABSENT, ignored_keys=(), warnings=(), "
     "rate_capped=False, power_profile=None, low_power_mode=False, vision_sidecar=None)"),
    (M.fixed(2), "MtpDraftPolicy.fixed(2)"),
    (DraftPolicies(M.OFF, F.fixed(3)),
     "DraftPolicies(mtp=MtpDraftPolicy.OFF, dflash=DflashDraftPolicy.fixed(3))"),
    (ExpertLayout(True, 8, 4),
     "ExpertLayout(present=True, experts_per_layer=8, num_layers=4)"),
]


@pytest.mark.parametrize("value, text", REPRS, ids=[t for _, t in REPRS])
def test_repr(value, text):
    assert repr(value) == text


def test_absent_survives_pickle_as_itself():
    assert pickle.loads(pickle.dumps(Options(engine_blocker=ABSENT))).engine_blocker is ABSENT
