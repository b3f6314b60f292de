"""The engine's speculation blocker as the preview asks it (TURBOSPARK_FACTS.md
section 4, revision 22f47a2): its inputs are the manifest's `arch`, the
resident index and whether the drafter's state was built at open. Each case
is a table row: the install's shape, asserted before the answer is
believed, and the engine's text written out (tests/engine_texts.py)."""

from __future__ import annotations

import pytest

from engine_texts import VISION, blocker
from installs import shape_of, write_custom_install
from turbospark_ffi import blockers
from turbospark_ffi.blockers import probe_tensor_name, speculation_blocker, verify_covers
from turbospark_ffi.install_writer import TensorSpec, trunk_tensors, write_install
from turbospark_ffi.manifest_arch import ManifestArch
from turbospark_ffi.api import speculation_plan
from turbospark_ffi.policy import SpeculativeDrafter
from turbospark_ffi.resident_index import load_resident_index

MTP, DFLASH = SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH
DRAFTERS = [MTP, DFLASH]
ARTIFACT_WORDS = ("stream", "shard", "download the", "beside the trunk")
PROBE3 = probe_tensor_name(3)


def reason(model_dir, drafter, speculation="auto"):
    """The session's reason when the host names `drafter` (None: on)."""
    plan = speculation_plan(str(model_dir), '{"speculativeDrafter": "%s", "speculation": "%s"}'
                            % (drafter.value, speculation))
    return plan.speculation.reason if not plan.speculation.enabled else None


def test_verify_covers_int4_and_the_1_and_2_bit_pair():
    # 22f47a2 added kernels for 15 and 16; 5c0ed9b had 4 alone.
    assert [tag for tag in range(256) if verify_covers(tag)] == [4, 15, 16]
    assert verify_covers(None) is False


# --------------------------------------------------------------------------
# The arms, in order: each row trips exactly its arm, and the shape assert
# shows every earlier arm passes.

ARM_ROWS = [
    # id, write_install arguments, (experts, first layer, probe dtype, vision), arm, fields
    ("clean", {"mtp": True, "dflash": True}, (0, 3, 4, 0), None, {}),
    ("vision", {"mtp": True, "dflash": True, "vision_depth": 27}, (0, 3, 4, 27), "vision", {}),
    ("moe-256", {"experts": 256, "mtp": True}, (256, 3, 4, 0), "moe", {"experts": 256}),
    ("moe-1", {"experts": 1, "mtp": True}, (1, 3, 4, 0), "moe", {"experts": 1}),
    ("no-full-layer", {"full_attention_every": 0, "mtp": True, "dflash": True},
     (0, None, None, 0), "no-probe-layer", {}),
    ("dtype-1", {"probe_dtype": 1, "mtp": True, "dflash": True}, (0, 3, 1, 0), "probe-dtype",
     {"probe": PROBE3, "dtype": 1}),
    ("dtype-5", {"probe_dtype": 5, "mtp": True, "dflash": True}, (0, 3, 5, 0), "probe-dtype",
     {"probe": PROBE3, "dtype": 5}),
    ("dtype-6", {"probe_dtype": 6, "mtp": True, "dflash": True}, (0, 3, 6, 0), "probe-dtype",
     {"probe": PROBE3, "dtype": 6}),
    ("dtype-24", {"probe_dtype": 24, "mtp": True, "dflash": True}, (0, 3, 24, 0), "probe-dtype",
     {"probe": PROBE3, "dtype": 24}),
    ("dtype-15", {"probe_dtype": 15, "mtp": True, "dflash": True}, (0, 3, 15, 0), None, {}),
    ("dtype-16", {"probe_dtype": 16, "mtp": True, "dflash": True}, (0, 3, 16, 0), None, {}),
]


@pytest.mark.parametrize("drafter", DRAFTERS)
@pytest.mark.parametrize("kw, shape, arm, fields", [r[1:] for r in ARM_ROWS],
                         ids=[r[0] for r in ARM_ROWS])
def test_each_arm(tmp_path, drafter, kw, shape, arm, fields):
    d = write_install(tmp_path / "i", **kw)
    s = shape_of(d)
    assert (s["experts"], s["first_layer"], s["probe_dtype"], s["vision"]) == shape
    expected = None if arm is None else blocker(drafter.value, arm, **fields)
    if drafter is DFLASH and arm == "moe":
        # A DFlash2 drafter is not even written here: on MoE its build fails.
        assert not s["has_dflash"]
    assert reason(d, drafter) == expected
    if arm not in (None, "no-drafter"):
        for word in ARTIFACT_WORDS:
            assert word not in expected


ORDER_ROWS = [
    # Two or more arms trip; the first in the engine's order is the reason.
    ("vision-over-moe", {"experts": 8, "vision_depth": 3}, "vision", {}),
    ("vision-over-no-layer", {"full_attention_every": 0, "vision_depth": 3}, "vision", {}),
    ("vision-over-dtype", {"probe_dtype": 1, "vision_depth": 3}, "vision", {}),
    ("moe-over-no-layer", {"experts": 8, "full_attention_every": 0}, "moe", {"experts": 8}),
    ("moe-over-dtype", {"experts": 8, "probe_dtype": 1}, "moe", {"experts": 8}),
    ("no-layer-over-no-drafter", {"full_attention_every": 0}, "no-probe-layer", {}),
    ("dtype-over-no-drafter", {"probe_dtype": 1}, "probe-dtype",
     {"probe": PROBE3, "dtype": 1}),
]


@pytest.mark.parametrize("drafter", DRAFTERS)
@pytest.mark.parametrize("kw, arm, fields", [r[1:] for r in ORDER_ROWS],
                         ids=[r[0] for r in ORDER_ROWS])
def test_the_first_arm_wins(tmp_path, drafter, kw, arm, fields):
    d = write_install(tmp_path / "i", **kw)
    s = shape_of(d)
    assert not s["has_mtp"] and not s["has_dflash"]   # the last arm would trip too
    assert reason(d, drafter) == blocker(drafter.value, arm, **fields)


def test_the_no_drafter_arm_is_each_drafters_own(tmp_path):
    d = write_install(tmp_path / "i", dflash=True)
    s = shape_of(d)
    assert (s["experts"], s["first_layer"], s["probe_dtype"]) == (0, 3, 4)
    assert not s["has_mtp"] and s["has_dflash"]
    assert reason(d, MTP) == blocker("mtp", "no-drafter")
    assert reason(d, DFLASH) is None
    d = write_install(tmp_path / "j", mtp=True)
    assert reason(d, DFLASH) == blocker("dflash", "no-drafter")
    assert reason(d, MTP) is None


@pytest.mark.parametrize("family", ["gemma4", "llama", "qwen3", "gptOss"])
def test_a_family_that_builds_no_drafter_has_none_whatever_the_index(tmp_path, family):
    # Its index carries both drafters whole; only qwen35/qwen36 build one.
    d = write_install(tmp_path / "i", mtp=True, dflash=True, family=family,
                      full_attention_every=1)
    s = shape_of(d)
    assert s["family"] == family and s["has_mtp"] and s["has_dflash"] and s["first_layer"] == 0
    assert reason(d, MTP) == blocker("mtp", "no-drafter")
    assert reason(d, DFLASH) == blocker("dflash", "no-drafter")


# --------------------------------------------------------------------------
# The probe layer: the manifest's mask, not the tensor names.

def _arch(mask, *, layers=None, experts=0, vision=0):
    return ManifestArch("qwen35", 5120, 248320, len(mask) if layers is None else layers,
                        experts, tuple(v & 0xFF for v in mask), vision)


@pytest.mark.parametrize("mask, layers, expected", [
    ([2, 2, 2, 1, 2, 2, 2, 1], None, 3),
    ([1, 2, 2, 2], None, 0),
    ([2, 2, 0, 1], None, 2),             # sliding window (0) counts as full
    ([258, 258, 257, 258], None, 2),     # each value truncated to a byte: 257 is 1
    ([2, 2, 2, 2], None, None),
    ([2, 2, 2, 1], 3, None),             # only layers 0..numLayers
    ([2, 1], 5, 1),                      # a mask shorter than numLayers ends the search
    ([1, 1], -1, None),
])
def test_first_full_attention_layer_from_the_mask(mask, layers, expected):
    assert _arch(mask, layers=layers).first_full_attention_layer() == expected


def test_the_index_names_no_longer_decide_the_probe_layer(tmp_path):
    # The index has self_attn tensors at layer 1, but the manifest says layer
    # 3 is the first full-attention layer: the engine probes layer 3.
    tensors = trunk_tensors() + [TensorSpec(probe_tensor_name(1), 1, 64)]
    d = write_custom_install(tmp_path / "i", tensors)
    (d / "manifest.json").write_text((d / "manifest.json").read_text().replace(
        '"fullAttentionLayerMask": [\n      2,\n      1,', '"fullAttentionLayerMask": [\n'
        '      2,\n      2,'))
    s = shape_of(d)
    assert s["first_layer"] == 3 and s["probe_dtype"] == 4
    index = load_resident_index(d / "model_weights.bin")
    assert index.dtype_of(probe_tensor_name(1)) == 1
    assert reason(d, MTP) == blocker("mtp", "no-drafter")


# --------------------------------------------------------------------------
# The function itself, and each reason's code.

@pytest.mark.parametrize("arch, built, code, text", [
    (_arch([2, 2, 2, 1]), True, None, None),
    (_arch([2, 2, 2, 1], vision=1), True, blockers.REASON_VISION, VISION),
    (_arch([2, 2, 2, 1], experts=4), True, blockers.REASON_MOE,
     blocker("mtp", "moe", experts=4)),
    (_arch([2, 2, 2, 2]), True, blockers.REASON_NO_PROBE_LAYER, blocker("mtp", "no-probe-layer")),
    (_arch([2, 1, 2, 2]), True, blockers.REASON_PROBE_ABSENT,
     blocker("mtp", "probe-absent", probe=probe_tensor_name(1))),
    (_arch([2, 2, 2, 1]), False, blockers.REASON_NO_MTP_HEAD, blocker("mtp", "no-drafter")),
], ids=["clean", "vision", "moe", "no-layer", "probe-absent", "not-built"])
def test_speculation_blocker_codes(tmp_path, arch, built, code, text):
    d = write_install(tmp_path / "i", mtp=True)
    index = load_resident_index(d / "model_weights.bin")
    found = speculation_blocker(arch, index, MTP, built, arch.vision_depth > 0)
    assert (None if found is None else (found.code, found.message)) == (
        None if code is None else (code, text))
