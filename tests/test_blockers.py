"""The engine-less blocker preview (docs/ENGINE.md section 4, checks 2..6), in the
engine's order, for each drafter: each fixture trips exactly one check and is
asserted not to trip the one before it."""

from __future__ import annotations

import pytest

from engine_texts import blocker, corrupt
from installs import dflash_specs, mtp_specs, shape_of, write_custom_install
from turbospark_ffi import blockers
from turbospark_ffi.blockers import (first_full_attention_layer, preview_blocker,
                                     probe_tensor_name, verify_covers)
from turbospark_ffi.expert_layout import (REASON_UNREADABLE_LAYOUT, ExpertLayoutError,
                                          load_expert_layout)
from turbospark_ffi.resident_index import REASON_UNREADABLE_INDEX
from turbospark_ffi.install import snapshot
from turbospark_ffi.install_writer import TensorSpec, trunk_tensors, write_install
from turbospark_ffi.policy import SpeculativeDrafter
from turbospark_ffi.resident_index import load_resident_index

MTP, DFLASH = SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH
DRAFTERS = [MTP, DFLASH]
ARTIFACT_WORDS = ("stream", "shard", "download the", "beside the trunk")


def preview_of(model_dir, drafter):
    index = load_resident_index(model_dir / "model_weights.bin")
    experts = load_expert_layout(str(model_dir)).experts_per_layer
    return preview_blocker(index, experts, drafter)


def preview(model_dir, drafter):
    """The preview's words (None: nothing stands in the way)."""
    blocker = preview_of(model_dir, drafter)
    return None if blocker is None else blocker.message


def snapshot_preview(model_dir, drafter):
    blocker = snapshot(str(model_dir)).blocker_preview(drafter)
    return None if blocker is None else blocker.message


def both_drafters():
    return mtp_specs() + dflash_specs()


def assert_no_artifact(reason):
    for word in ARTIFACT_WORDS:
        assert word not in reason, (word, reason)


def test_verify_covers_exactly_int4():
    # Both of the engine's blocker functions test `dtype != 4`.
    assert [tag for tag in range(256) if verify_covers(tag)] == [4]
    assert verify_covers(None) is False


# --------------------------------------------------------------------------
# 0. A clean install: nothing stands in the way.

@pytest.mark.parametrize("drafter", DRAFTERS)
def test_clean_install_has_no_blocker(tmp_path, drafter):
    d = write_install(tmp_path / "i", mtp=True, dflash=True)
    s = shape_of(d)
    assert (s["experts"], s["first_layer"], s["probe_dtype"], s["has_mtp"], s["has_dflash"]) \
        == (0, 3, 4, True, True)
    assert preview(d, drafter) is None


# --------------------------------------------------------------------------
# 2. MoE (the first previewable check: a vision tower is not in the files).

@pytest.mark.parametrize("drafter", DRAFTERS)
@pytest.mark.parametrize("experts", [256, 8, 1])
def test_moe_names_its_expert_count(tmp_path, drafter, experts):
    d = write_install(tmp_path / "i", experts=experts, mtp=True, dflash=True)
    s = shape_of(d)
    # Every later check would pass: the ONLY obstacle is the architecture.
    assert s["experts"] == experts and s["probe_dtype"] == 4
    assert s["has_mtp"] and s["has_dflash"]
    reason = preview(d, drafter)
    assert reason == blocker(drafter.value, "moe", experts=experts)
    assert_no_artifact(reason)


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_moe_outranks_every_later_check(tmp_path, drafter):
    # MoE AND no full-attention layer AND no drafter: MoE is the reason.
    d = write_install(tmp_path / "i", experts=256, full_attention_every=0)
    s = shape_of(d)
    assert s["experts"] == 256 and s["first_layer"] is None
    assert not s["has_mtp"] and not s["has_dflash"]
    assert preview(d, drafter) == blocker(drafter.value, "moe", experts=256)


# --------------------------------------------------------------------------
# 3. No full-attention layer.

@pytest.mark.parametrize("drafter", DRAFTERS)
def test_no_full_attention_layer(tmp_path, drafter):
    d = write_install(tmp_path / "i", full_attention_every=0, mtp=True, dflash=True)
    s = shape_of(d)
    assert s["experts"] == 0                            # check 2 does not apply
    assert s["first_layer"] is None
    reason = preview(d, drafter)
    assert reason == blocker(drafter.value, "no-probe-layer")
    assert_no_artifact(reason)


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_drafter_attention_is_not_a_trunk_layer(tmp_path, drafter):
    """mtp.layers.0.self_attn.* and dflash.layers.N.self_attn.* do not count."""
    d = write_install(tmp_path / "i", full_attention_every=0, mtp=True, dflash=True)
    index = load_resident_index(d / "model_weights.bin")
    assert "mtp.layers.0.self_attn.q_proj.weight" in index
    assert "dflash.layers.0.self_attn.q_proj.weight" in index
    assert first_full_attention_layer(index) is None
    assert preview(d, drafter) == blocker(drafter.value, "no-probe-layer")


def test_no_full_attention_outranks_missing_drafter(tmp_path):
    d = write_install(tmp_path / "i", full_attention_every=0)
    s = shape_of(d)
    assert s["experts"] == 0 and s["first_layer"] is None and not s["has_mtp"]
    for drafter in DRAFTERS:
        assert preview(d, drafter) == blocker(drafter.value, "no-probe-layer")


# --------------------------------------------------------------------------
# 4. The probe tensor is absent.

def _without(tensors, name):
    out = [t for t in tensors if t.name != name]
    assert len(out) == len(tensors) - 1
    return out


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_missing_probe_names_the_tensor(tmp_path, drafter):
    probe = probe_tensor_name(3)
    d = write_custom_install(tmp_path / "i", _without(trunk_tensors(), probe) + both_drafters())
    s = shape_of(d)
    assert s["experts"] == 0                            # check 2 does not apply
    assert s["first_layer"] == 3                        # check 3 does not apply
    index = load_resident_index(d / "model_weights.bin")
    assert probe not in index and "language_model.model.layers.3.self_attn.k_proj.weight" in index
    reason = preview(d, drafter)
    assert reason == blocker(drafter.value, "probe-absent", probe=probe)
    assert_no_artifact(reason)


def test_missing_probe_outranks_missing_drafter(tmp_path):
    d = write_custom_install(tmp_path / "i", _without(trunk_tensors(), probe_tensor_name(3)))
    assert not shape_of(d)["has_mtp"] and not shape_of(d)["has_dflash"]
    for drafter in DRAFTERS:
        assert preview(d, drafter) == blocker(drafter.value, "probe-absent",
                                              probe=probe_tensor_name(3))


# --------------------------------------------------------------------------
# 5. The probe's dtype.

@pytest.mark.parametrize("drafter", DRAFTERS)
@pytest.mark.parametrize("dtype", [1, 2, 3, 5, 6, 13, 14, 15, 16, 17, 24, 0, 25, 255])
def test_uncovered_probe_dtype_names_the_number(tmp_path, drafter, dtype):
    d = write_install(tmp_path / "i", probe_dtype=dtype, mtp=True, dflash=True)
    s = shape_of(d)
    assert s["experts"] == 0 and s["first_layer"] == 3   # checks 2 and 3 do not apply
    assert s["probe_dtype"] == dtype                      # check 4 does not apply
    reason = preview(d, drafter)
    assert reason == blocker(drafter.value, "probe-dtype", probe=probe_tensor_name(3),
                             dtype=dtype)
    assert_no_artifact(reason)


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_the_covered_probe_dtype(tmp_path, drafter):
    d = write_install(tmp_path / "i", probe_dtype=4, mtp=True, dflash=True)
    assert shape_of(d)["probe_dtype"] == 4
    assert preview(d, drafter) is None


def test_probe_dtype_outranks_missing_drafter(tmp_path):
    d = write_install(tmp_path / "i", probe_dtype=1)
    s = shape_of(d)
    assert s["probe_dtype"] == 1 and not s["has_mtp"] and not s["has_dflash"]
    for drafter in DRAFTERS:
        assert preview(d, drafter) == blocker(drafter.value, "probe-dtype",
                                              probe=probe_tensor_name(3), dtype=1)


# --------------------------------------------------------------------------
# 6. The drafter is missing: the only reason that points at an artifact.

def test_missing_mtp_head(tmp_path):
    d = write_install(tmp_path / "i", dflash=True)
    s = shape_of(d)
    assert (s["experts"], s["first_layer"], s["probe_dtype"]) == (0, 3, 4)  # 2..5 pass
    assert not s["has_mtp"] and s["has_dflash"]
    assert preview(d, MTP) == blocker("mtp", "no-drafter")
    assert preview(d, DFLASH) is None   # each drafter asks about its own


def test_missing_dflash_drafter(tmp_path):
    d = write_install(tmp_path / "i", mtp=True)
    s = shape_of(d)
    assert (s["experts"], s["first_layer"], s["probe_dtype"]) == (0, 3, 4)
    assert s["has_mtp"] and not s["has_dflash"]
    reason = preview(d, DFLASH)
    assert reason == blocker("dflash", "no-drafter")
    assert "shard" not in reason
    assert preview(d, MTP) is None


@pytest.mark.parametrize("drafter, partial, presence", [
    (MTP, ("mtp.norm.weight", "mtp.layers.0.self_attn.q_proj.weight"), "mtp.fc.weight"),
    (DFLASH, ("dflash.norm.weight", "dflash.layers.0.self_attn.q_proj.weight"),
     "dflash.fc.weight")])
def test_partial_drafter_without_its_presence_tensor_is_missing(tmp_path, drafter, partial,
                                                                presence):
    kw = {"mtp_tensors": partial} if drafter is MTP else {"dflash_tensors": partial}
    d = write_install(tmp_path / "i", **kw)
    index = load_resident_index(d / "model_weights.bin")
    assert partial[0] in index and presence not in index
    assert preview(d, drafter) == blocker(drafter.value, "no-drafter")


# --------------------------------------------------------------------------
# The first full-attention layer: the LOWEST-NUMBERED trunk layer with
# self_attn tensors.

def _attn(layer, dtype=4, only=None):
    names = only or ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight")
    return [TensorSpec(f"language_model.model.layers.{layer}.self_attn.{n}",
                       dtype if n == "q_proj.weight" else 4, 64, True) for n in names]


def _lin(layer):
    return [TensorSpec(f"language_model.model.layers.{layer}.linear_attn.in_proj_qkv.weight")]


@pytest.mark.parametrize("layers, expected", [
    ([11, 7, 9], 7),          # entry order is not layer order
    ([10, 9], 9),             # numeric, not lexicographic ("10" < "9")
    ([100, 20, 3000], 20),
    ([0], 0),
    ([5, 5], 5),
])
def test_first_full_attention_layer_is_lowest_numbered(tmp_path, layers, expected):
    tensors = _lin(0) + _lin(1)
    seen = set()
    for layer in layers:
        if layer in seen:
            tensors += _attn(layer, only=("k_norm.weight",))
        else:
            tensors += _attn(layer)
        seen.add(layer)
    tensors += mtp_specs() + dflash_specs()
    d = write_custom_install(tmp_path / "i", tensors)
    index = load_resident_index(d / "model_weights.bin")
    assert first_full_attention_layer(index) == expected
    assert preview(d, MTP) is None


def test_probe_is_taken_from_the_first_layer_only(tmp_path):
    # Layer 3's q_proj is BF16, layer 7's INT4: layer 3 decides.
    tensors = _attn(7, dtype=4) + _attn(3, dtype=1) + mtp_specs()
    d = write_custom_install(tmp_path / "i", tensors)
    assert shape_of(d)["first_layer"] == 3 and shape_of(d)["probe_dtype"] == 1
    assert preview(d, MTP) == blocker("mtp", "probe-dtype", probe=probe_tensor_name(3), dtype=1)


def test_layer_with_only_some_self_attn_tensors_counts(tmp_path):
    # Layer 2 has only a k_norm under self_attn: it is the first full-attention
    # layer, and its probe is missing (layer 5's q_proj does not stand in).
    tensors = _attn(2, only=("k_norm.weight",)) + _attn(5) + mtp_specs()
    d = write_custom_install(tmp_path / "i", tensors)
    assert shape_of(d)["first_layer"] == 2
    assert preview(d, MTP) == blocker("mtp", "probe-absent", probe=probe_tensor_name(2))


@pytest.mark.parametrize("name", [
    "language_model.model.layers.x.self_attn.q_proj.weight",
    "language_model.model.layers.-1.self_attn.q_proj.weight",
    "language_model.model.layers.3.mlp.self_attn.q_proj.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "visual.blocks.0.self_attn.q_proj.weight",
    "mtp.layers.0.self_attn.q_proj.weight",
    "dflash.layers.0.self_attn.q_proj.weight",
    "xlanguage_model.model.layers.0.self_attn.q_proj.weight",
    "language_model.model.layers.0.linear_attn.self_attnish",
])
def test_non_trunk_self_attn_names_do_not_count(tmp_path, name):
    tensors = [TensorSpec(name)] + _attn(6) + [TensorSpec("mtp.fc.weight", 4, 64, True)]
    d = write_custom_install(tmp_path / "i", tensors)
    assert name in load_resident_index(d / "model_weights.bin")
    assert shape_of(d)["first_layer"] == 6
    assert preview(d, MTP) is None


def test_a_name_containing_a_newline_is_not_a_trunk_layer(tmp_path):
    """Names are arbitrary bytes. A tensor named "junk\\nlanguage_model.model.
    layers.0.self_attn.x" is NOT a trunk tensor (it starts with "junk"), so the
    first full-attention layer is still 3 and nothing blocks."""
    tensors = trunk_tensors() + [TensorSpec("junk\nlanguage_model.model.layers.0.self_attn.x")]
    tensors += mtp_specs()
    d = write_custom_install(tmp_path / "i", tensors)
    index = load_resident_index(d / "model_weights.bin")
    assert probe_tensor_name(3) in index and index.dtype_of(probe_tensor_name(3)) == 4
    assert not any(n.startswith("language_model.model.layers.0.self_attn.")
                   for n in index.names)
    assert first_full_attention_layer(index) == 3
    assert preview(d, MTP) is None


# --------------------------------------------------------------------------
# Through the install snapshot: an unreadable index or layout has no preview,
# the reader's own error is the reason.

def test_unreadable_index_preview_is_the_readers_error(tmp_path):
    d = write_install(tmp_path / "i", mtp=True)
    (d / "model_weights.bin").write_bytes(b"\x00" * 10)
    for drafter in DRAFTERS:
        assert snapshot_preview(d, drafter) == corrupt("short_header")


@pytest.mark.parametrize("layout, needle", [
    (b"not json", "not valid JSON"),
    (b'{"numLayers": 1}', "expertsPerLayer"),
    (b'{"numLayers": 1, "expertsPerLayer": -3, "layers": []}', "expertsPerLayer is -3"),
    (b'{"numLayers": 1, "expertsPerLayer": 2.0, "layers": []}', "expertsPerLayer is 2.0"),
    (b"[]", "not a JSON object"),
    # The engine's parser has no NaN; Python's would take it by default.
    (b'{"numLayers": NaN, "expertsPerLayer": 0, "layers": []}', "NaN is not JSON"),
    # Deep enough for the C scanner's recursion guard: refused, not a crash.
    # (Before the counts, so that the whole file is parsed: see expert_layout.py.)
    (b'{"x": ' + b"[" * 30_000 + b"]" * 30_000 + b', "numLayers": 0, "expertsPerLayer": 0}',
     "not valid JSON"),
], ids=["not-json", "no-experts-key", "negative", "float", "array", "nan", "deep"])
def test_unusable_layout_preview_is_the_layouts_error(tmp_path, layout, needle):
    d = write_install(tmp_path / "i", mtp=True)
    (d / "packed_experts" / "layout.json").write_bytes(layout)
    reason = snapshot_preview(d, MTP)
    assert needle in reason and "layout.json" in reason


@pytest.mark.parametrize("pad", [0, 100_000], ids=["fits-in-head", "past-the-head"])
def test_layout_duplicate_count_is_refused_whatever_the_size(tmp_path, pad):
    # The small file and the large one must agree (tests/test_expert_layout.py
    # holds every case to it); a duplicate field is what the engine refuses.
    d = write_install(tmp_path / "i", mtp=True)
    body = (b'{"expertsPerLayer": 7, "numLayers": 1, "expertsPerLayer": 0, "layers": ['
            + b" " * pad + b"]}")
    (d / "packed_experts" / "layout.json").write_bytes(body)
    with pytest.raises(ExpertLayoutError) as info:
        load_expert_layout(str(d))
    assert str(info.value) == ("packed_experts/layout.json gives expertsPerLayer more than once; "
                               "accepts it once (the engine refuses a duplicate field)")


def test_missing_layout_is_dense(tmp_path):
    d = write_install(tmp_path / "i", mtp=True)
    (d / "packed_experts" / "layout.json").unlink()
    assert shape_of(d)["experts"] == 0
    assert snapshot_preview(d, MTP) is None


def test_large_moe_layout_reads_the_expert_count(tmp_path):
    # Scalars first, then a layers array far past the reader's head window.
    d = write_install(tmp_path / "i", experts=256, mtp=True, expert_layers=8)
    assert (d / "packed_experts" / "layout.json").stat().st_size > 256 * 1024
    assert load_expert_layout(str(d)).experts_per_layer == 256
    assert preview(d, MTP) == blocker("mtp", "moe", experts=256)


def test_layout_with_layers_before_scalars(tmp_path):
    d = write_install(tmp_path / "i", mtp=True)
    import json
    body = {"layers": [{"layer": i, "file": f"layer_{i:02d}.bin", "experts": [
        {"expert": j, "offset": 0, "size": 1, "tensors": {}} for j in range(300)]}
        for i in range(40)], "expertStride": 1, "numLayers": 40, "expertsPerLayer": 300}
    (d / "packed_experts" / "layout.json").write_text(json.dumps(body))
    assert load_expert_layout(str(d)).experts_per_layer == 300
    assert preview(d, MTP) == blocker("mtp", "moe", experts=300)


# --------------------------------------------------------------------------
# Each reason's code, which a front end labels it by (never by its words).

CODE_CASES = [
    # id, write_install arguments (None: the custom install without the probe), drafter, code
    ("clean", {"mtp": True, "dflash": True}, MTP, None),
    ("moe", {"experts": 8, "mtp": True, "dflash": True}, DFLASH, blockers.REASON_MOE),
    ("no-layer", {"full_attention_every": 0, "mtp": True}, MTP, blockers.REASON_NO_PROBE_LAYER),
    ("probe-absent", None, MTP, blockers.REASON_PROBE_ABSENT),
    ("probe-dtype", {"probe_dtype": 1, "mtp": True}, MTP, blockers.REASON_PROBE_DTYPE),
    ("no-mtp", {"dflash": True}, MTP, blockers.REASON_NO_MTP_HEAD),
    ("no-dflash", {"mtp": True}, DFLASH, blockers.REASON_NO_DFLASH),
]


@pytest.mark.parametrize("kw, drafter, code", [c[1:] for c in CODE_CASES],
                         ids=[c[0] for c in CODE_CASES])
def test_each_reason_has_its_code(tmp_path, kw, drafter, code):
    if kw is None:
        d = write_custom_install(tmp_path / "i", _without(trunk_tensors(), probe_tensor_name(3))
                                 + both_drafters())
    else:
        d = write_install(tmp_path / "i", **kw)
    blocker = preview_of(d, drafter)
    assert (None if blocker is None else blocker.code) == code
    # The snapshot's preview is the same value.
    assert snapshot(str(d)).blocker_preview(drafter) == blocker


def test_unreadable_files_preview_with_their_readers_codes(tmp_path):
    bad_index = write_install(tmp_path / "i", mtp=True)
    (bad_index / "model_weights.bin").write_bytes(b"\x00" * 10)
    bad_layout = write_install(tmp_path / "l", mtp=True)
    (bad_layout / "packed_experts" / "layout.json").write_bytes(b"[]")
    assert snapshot(str(bad_index)).blocker_preview(MTP).code == REASON_UNREADABLE_INDEX
    assert snapshot(str(bad_layout)).blocker_preview(MTP).code == REASON_UNREADABLE_LAYOUT
