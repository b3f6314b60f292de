"""What the engine's runner checks of the files when it opens
(TURBOSPARK_FACTS.md sections 10 and 12): the two index-wide dtype gates,
then the drafter state the policies name. Each failure fails the OPEN
(status 2, the engine's message written out here), under `auto` too; the
open's order of refusals is held by a table of installs that fail two
checks at once."""

from __future__ import annotations

import pytest

from engine_texts import DFLASH_MOE, DTYPE_GATE, GGUF_GATE, MISSING_TENSOR, blocker, corrupt
from installs import dflash_specs, mtp_specs, shape_of, write_custom_install
from turbospark_ffi.errors import OpenRefused
from turbospark_ffi.install_writer import TensorSpec, dflash_tensors, trunk_tensors, write_install
from turbospark_ffi.api import speculation_plan
from turbospark_ffi.resident_index import DFLASH_TENSORS, MTP_HEAD_TENSORS


def refusal(model_dir, options="{}"):
    """The open's message (None: it opens)."""
    try:
        speculation_plan(str(model_dir), options)
    except OpenRefused as exc:
        assert exc.status == 2
        return str(exc)
    return None


# --------------------------------------------------------------------------
# The MTP head: its 15 names, the first missing one in the engine's order.

@pytest.mark.parametrize("missing", MTP_HEAD_TENSORS[1:])
@pytest.mark.parametrize("options", ["{}", '{"speculation": 2}', '{"speculativeDrafter": "mtp"}'])
def test_a_partial_mtp_head_fails_the_open(tmp_path, missing, options):
    head = [n for n in MTP_HEAD_TENSORS if n != missing]
    d = write_install(tmp_path / "i", mtp_tensors=tuple(head))
    assert shape_of(d)["has_mtp"] is True   # the presence tensor is there
    assert refusal(d, options) == MISSING_TENSOR.format(name=missing)


def test_the_first_missing_name_is_reported(tmp_path):
    head = (MTP_HEAD_TENSORS[0],) + MTP_HEAD_TENSORS[3:]   # 2nd and 3rd missing
    d = write_install(tmp_path / "i", mtp_tensors=head)
    assert refusal(d) == MISSING_TENSOR.format(name=MTP_HEAD_TENSORS[1])


@pytest.mark.parametrize("options", ['{"speculation": "off"}', '{"speculativeDrafter": "dflash"}'])
def test_a_partial_head_not_asked_for_is_not_built(tmp_path, options):
    d = write_install(tmp_path / "i", mtp_tensors=MTP_HEAD_TENSORS[:3])
    assert refusal(d, options) is None


def test_a_partial_head_of_a_family_that_builds_none_opens(tmp_path):
    d = write_install(tmp_path / "i", mtp_tensors=MTP_HEAD_TENSORS[:3], family="llama",
                      full_attention_every=1)
    plan = speculation_plan(str(d))
    assert plan.speculation.reason == blocker("mtp", "no-drafter")


def test_a_head_without_its_presence_tensor_is_not_built(tmp_path):
    # Auto builds nothing without mtp.fc.weight: the no-drafter arm.
    d = write_install(tmp_path / "i", mtp_tensors=MTP_HEAD_TENSORS[1:])
    assert shape_of(d)["has_mtp"] is False
    assert speculation_plan(str(d)).speculation.reason == blocker("mtp", "no-drafter")


# --------------------------------------------------------------------------
# The DFlash2 drafter: MoE, then its shapes against hiddenSize H = 5120 and
# vocabSize V = 248320, in the engine's order.

H, V = 5120, 248320
DFLASH = '{"speculativeDrafter": "dflash"}'


def drafter_with(**changes):
    """The published drafter's tensors with some changed: name -> a shape
    (rows, cols[, c, d]), a size in bytes (an int), or None (left out)."""
    out = []
    for spec in dflash_tensors():
        if spec.name in changes:
            change = changes[spec.name]
            if change is None:
                continue
            if isinstance(change, int):
                spec = TensorSpec(spec.name, spec.dtype, change, shape=spec.shape)
            else:
                shape = tuple(change) + (1,) * (4 - len(change))
                spec = TensorSpec(spec.name, spec.dtype, spec.size, shape=shape)
        out.append(spec)
    return out


def rename_layer(tensors, old, new):
    return [TensorSpec(t.name.replace(f"dflash.layers.{old}.", f"dflash.layers.{new}."),
                       t.dtype, t.size, shape=t.shape) for t in tensors]


L0, L1, L2, L3 = (f"dflash.layers.{i}." for i in range(4))
PRED = "dflash.candidate_selector.predecessor_codebook"
SUCC = "dflash.candidate_selector.successor_codebook"
U = "unsupported: "

DFLASH_ROWS = [
    ("valid", drafter_with(), None),
    ("missing-q-norm", drafter_with(**{L0 + "self_attn.q_norm.weight": None}),
     MISSING_TENSOR.format(name=L0 + "self_attn.q_norm.weight")),
    ("missing-pred", drafter_with(**{PRED: None}), MISSING_TENSOR.format(name=PRED)),
    ("codebook-rows", drafter_with(**{PRED: (V - 1, 256)}),
     U + f"dflash candidate selector codebook shape mismatch: pred [{V - 1}, 256], succ "
         f"[{V}, 256], expected [{V}, 256]"),
    ("codebook-rank-0", drafter_with(**{PRED: (V, 0), SUCC: (V, 0)}),
     U + f"dflash candidate selector codebook shape mismatch: pred [{V}, 0], succ [{V}, 0], "
         f"expected [{V}, 0]"),
    ("codebook-rank-over-h", drafter_with(**{PRED: (V, H + 1), SUCC: (V, H + 1)}),
     U + f"dflash candidate selector codebook shape mismatch: pred [{V}, {H + 1}], succ "
         f"[{V}, {H + 1}], expected [{V}, {H + 1}]"),
    ("layers-4", [t for t in drafter_with() if not t.name.startswith("dflash.layers.4.")],
     U + "the DFlash2 drafter has 4 contiguous layers, expected 5"),
    ("layers-gap", rename_layer(drafter_with(), 2, 7),
     U + "the DFlash2 drafter has 2 contiguous layers, expected 5"),
    ("head-dim-0", drafter_with(**{L0 + "self_attn.q_norm.weight": 0}),
     U + "the DFlash2 drafter's shapes do not divide: q 4096, k 1024, head_dim 0"),
    ("k-not-divisible", drafter_with(**{L0 + "self_attn.k_proj.weight": (1000, H)}),
     U + "the DFlash2 drafter's shapes do not divide: q 4096, k 1000, head_dim 128"),
    ("aux-not-whole", drafter_with(**{"dflash.fc.weight": (H, 5 * H + 1)}),
     U + f"dflash.fc.weight is [{H}, {5 * H + 1}], not a whole number of {H}-wide aux states"),
    ("widths-ffn", drafter_with(**{L0 + "mlp.gate_proj.weight": (4 * H + 1, H)}),
     U + f"the DFlash2 drafter widths exceed their allocation bounds: q 4096, k 1024, "
         f"ffn {4 * H + 1}, hidden {H}"),
    ("shape-norm", drafter_with(**{"dflash.norm.weight": (H - 1, 1)}),
     U + f"dflash.norm.weight has shape [{H - 1}, 1], expected [{H}, 1]"),
    ("shape-l2-v-proj", drafter_with(**{L2 + "self_attn.v_proj.weight": (1024, H - 1)}),
     U + f"{L2}self_attn.v_proj.weight has shape [1024, {H - 1}], expected [1024, {H}]"),
    ("missing-l3-o-proj", drafter_with(**{L3 + "self_attn.o_proj.weight": None}),
     MISSING_TENSOR.format(name=L3 + "self_attn.o_proj.weight")),
    ("conv-rows", drafter_with(**{L0 + "attention_conv.kernel_projection.weight": (1279, H)}),
     U + f"attention_conv.kernel_projection.weight has 1279 rows against the 1280 this port's "
         f"conv dispatches (2 sides x 2 taps x {H}/16 groups); this drafter's conv shape is not "
         "the published one"),
    ("conv-l1-mlp-cols", drafter_with(**{L1 + "mlp_conv.kernel_projection.weight": (1280, 1)}),
     U + f"{L1}mlp_conv.kernel_projection.weight has shape [1280, 1], expected [1280, {H}]"),
    ("base-kernel-fourth", drafter_with(**{L0 + "attention_conv.base_kernel": (2, 2, H, 0)}),
     U + f"{L0}attention_conv.base_kernel has shape (2, 2, {H}, 0), expected [2, 2, {H}]"),
    ("aux-4", drafter_with(**{"dflash.fc.weight": (H, 4 * H)}),
     U + "dflash.fc.weight fuses 4 aux states but this drafter taps 5 trunk layers"),
    # Order: the codebooks before the layer count; the widths before the
    # exact shapes.
    ("codebook-before-layers", [t for t in drafter_with(**{SUCC: (V, 128)})
                                if not t.name.startswith("dflash.layers.4.")],
     U + f"dflash candidate selector codebook shape mismatch: pred [{V}, 256], succ [{V}, 128], "
         f"expected [{V}, 256]"),
    ("widths-before-shapes", drafter_with(**{L0 + "self_attn.q_proj.weight": (H + 128, H),
                                             "dflash.norm.weight": (1, 1)}),
     U + f"the DFlash2 drafter widths exceed their allocation bounds: q {H + 128}, k 1024, "
         f"ffn 17408, hidden {H}"),
]


@pytest.mark.parametrize("tensors, message", [r[1:] for r in DFLASH_ROWS],
                         ids=[r[0] for r in DFLASH_ROWS])
@pytest.mark.parametrize("speculation", ["auto", 3])
def test_the_dflash2_build(tmp_path, tensors, message, speculation):
    d = write_custom_install(tmp_path / "i", trunk_tensors() + tensors)
    assert shape_of(d)["has_dflash"] is True
    options = '{"speculativeDrafter": "dflash", "speculation": %s}' % (
        '"auto"' if speculation == "auto" else speculation)
    assert refusal(d, options) == message
    # Only the drafter named is built: mtp and off never look at it.
    assert refusal(d, '{"speculativeDrafter": "dflash", "speculation": "off"}') is None
    assert refusal(d) is None or refusal(d) == refusal(d, '{"speculativeDrafter": "mtp"}')


def test_the_rows_discriminate():
    assert len({r[2] for r in DFLASH_ROWS}) == len(DFLASH_ROWS)


@pytest.mark.parametrize("options", [DFLASH, '{"speculativeDrafter": "dflash", "speculation": 2}'])
def test_a_dflash2_drafter_on_moe_fails_the_open(tmp_path, options):
    d = write_install(tmp_path / "i", experts=256, dflash=True)
    assert refusal(d, options) == DFLASH_MOE.format(experts=256)
    # The same install under auto: the note (the DFlash2-only arm) decides.
    assert refusal(d) is None


def test_the_hidden_size_is_the_manifests(tmp_path):
    # A drafter in the published shapes for H = 4096 on a 5120 trunk: its
    # fc's 20480 columns are 4 whole 5120-wide states, so the first check to
    # fail is fc's exact shape.
    tensors = dflash_tensors(hidden_size=4096)
    d = write_custom_install(tmp_path / "i", trunk_tensors() + tensors)
    assert refusal(d, DFLASH) == U + f"dflash.fc.weight has shape [4096, 20480], expected [{H}, 20480]"


# --------------------------------------------------------------------------
# The dtype gates, over every resident tensor: the smallest name, GGUF first.

GATE_ROWS = [
    ("gguf-q4_0", [("zz.extra.weight", 9)], GGUF_GATE.format(name="zz.extra.weight", dtype=9)),
    ("gguf-mxfp4", [("m.weight", 14)], GGUF_GATE.format(name="m.weight", dtype=14)),
    ("gguf-q2_0", [("m.weight", 25)], GGUF_GATE.format(name="m.weight", dtype=25)),
    ("fp32", [("m.weight", 3)], DTYPE_GATE.format(name="m.weight", dtype=3)),
    ("tag-0", [("m.weight", 0)], DTYPE_GATE.format(name="m.weight", dtype=0)),
    ("tag-26", [("m.weight", 26)], DTYPE_GATE.format(name="m.weight", dtype=26)),
    ("fp16-outside-vision", [("visionx.patch.weight", 2)],
     DTYPE_GATE.format(name="visionx.patch.weight", dtype=2)),
    ("fp16-in-vision", [("vision.patch.weight", 2)], None),
    ("executable-gguf", [("a.weight", 6), ("b.weight", 23), ("c.weight", 24)], None),
    ("affine-1-2-bit", [("a.weight", 15), ("b.weight", 16), ("c.weight", 5)], None),
    ("smallest-name", [("zz.weight", 3), ("aa.weight", 0)],
     DTYPE_GATE.format(name="aa.weight", dtype=0)),
    ("gguf-before-unreadable", [("zz.weight", 9), ("aa.weight", 3)],
     GGUF_GATE.format(name="zz.weight", dtype=9)),
]


@pytest.mark.parametrize("extra, message", [r[1:] for r in GATE_ROWS], ids=[r[0] for r in GATE_ROWS])
@pytest.mark.parametrize("options", ["{}", '{"speculation": "off"}'])
def test_the_dtype_gates(tmp_path, extra, message, options):
    tensors = trunk_tensors() + mtp_specs() + [TensorSpec(n, t, 32) for n, t in extra]
    d = write_custom_install(tmp_path / "i", tensors)
    assert refusal(d, options) == message


# --------------------------------------------------------------------------
# The open's order: an install that fails two checks gets the first's words.

def _no_manifest(p):
    return write_install(p / "i", mtp=True, manifest=False)


def _manifest_and_index(p):
    d = write_install(p / "i", mtp=True, manifest=False)
    (d / "model_weights.bin").write_bytes(b"")
    return d


def _index_and_gate(p):
    d = write_install(p / "i", mtp=True, probe_dtype=3)
    (d / "model_weights.bin").write_bytes(b"\x01" * 10)
    return d


def _gate_and_partial_head(p):
    return write_install(p / "i", mtp_tensors=MTP_HEAD_TENSORS[:2], probe_dtype=3)


def _partial_head_and_moe(p):
    return write_install(p / "i", mtp_tensors=MTP_HEAD_TENSORS[:2], experts=8)


def _partial_head_and_vision(p):
    return write_install(p / "i", mtp_tensors=MTP_HEAD_TENSORS[:2], vision_depth=27)


PROBE3 = "language_model.model.layers.3.self_attn.q_proj.weight"
ORDER_ROWS = [
    ("options-before-directory", lambda p: p / "missing", '{"speculation": 0}',
     "speculation block must be in 1..=15, got 0"),
    ("directory", lambda p: p / "missing", "{}",
     "{dir} is not a directory (and matched no installed alias)"),
    ("manifest-before-index", _manifest_and_index, "{}",
     "no manifest.json at {dir}/manifest.json: No such file or directory (os error 2)"),
    ("index-before-gates", _index_and_gate, "{}", corrupt("short_header")),
    ("gates-before-drafter", _gate_and_partial_head, "{}",
     DTYPE_GATE.format(name=PROBE3, dtype=3)),
    ("drafter-before-blockers", _partial_head_and_moe, "{}",
     MISSING_TENSOR.format(name=MTP_HEAD_TENSORS[2])),
    ("drafter-before-vision", _partial_head_and_vision, "{}",
     MISSING_TENSOR.format(name=MTP_HEAD_TENSORS[2])),
]


@pytest.mark.parametrize("make, options, message", [r[1:] for r in ORDER_ROWS],
                         ids=[r[0] for r in ORDER_ROWS])
def test_the_opens_order(tmp_path, make, options, message):
    d = make(tmp_path)
    from turbospark_ffi.errors import OptionRefused
    try:
        speculation_plan(str(d), options)
    except (OpenRefused, OptionRefused) as exc:
        assert (exc.status, str(exc)) == (2, message.replace("{dir}", str(d)))
    else:
        pytest.fail("the open would fail")


def test_choices_items_follow_the_drafter_build(tmp_path):
    """The table: an item whose open fails building its drafter is a refused
    item; the others answer."""
    from turbospark_ffi.api import speculation_choices
    d = write_custom_install(tmp_path / "i", trunk_tensors() + mtp_specs()
                             + drafter_with(**{"dflash.norm.weight": (1, 1)}))
    items = speculation_choices(str(d), "{}")["choices"]
    bad = U + f"dflash.norm.weight has shape [1, 1], expected [{H}, 1]"
    for item in items:
        if item["speculativeDrafter"] == "dflash" and item["speculation"] != "off":
            assert (item["status"], item["error"]) == (2, bad), item
        else:
            assert item["status"] == 0, item
