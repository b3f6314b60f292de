"""An engine-less preview of the engine's speculation blocker.

The engine answers "can the verify pass serve this install" after OPEN, with
the full architecture in hand (docs/ENGINE.md section 4). A GUI wants the answer before
a multi-gigabyte open, so this asks the same questions, in the same order, of
what can be read without the engine: the resident index and
`packed_experts/layout.json`. The first that applies is the reason.

1. a vision tower is active -- NOT previewable: it is a property of the
   opened runner, not of the files. The preview assumes none.
2. the model routes to N experts (MoE)
3. no full-attention layer to probe
4. the probe tensor is absent from the index
5. the probe's dtype is not one the batched verify covers
6. the drafter itself is missing

The architectural reasons come before the missing-drafter one on purpose:
telling someone to download a shard that cannot help is the bug the original module's
long comments are about. So only reason 6 points at an artifact, and only
where one exists.
"""

from __future__ import annotations

from ._value import Value
from .policy import SpeculativeDrafter
from .resident_index import (DFLASH_PRESENCE_TENSOR, DTYPE_NAMES, MTP_PRESENCE_TENSOR,
                             ResidentIndex)

__all__ = ["VERIFY_PROBE_DTYPES", "Blocker", "first_full_attention_layer", "probe_tensor_name",
           "preview_blocker", "architecture_blocker", "drafter_blocker", "REASON_MOE",
           "REASON_NO_PROBE_LAYER", "REASON_PROBE_ABSENT", "REASON_PROBE_DTYPE",
           "REASON_NO_MTP_HEAD", "REASON_NO_DFLASH"]

# The batched verify covers INT4 affine, 1-bit affine and 2-bit affine.
VERIFY_PROBE_DTYPES = {4: "INT4 affine", 15: "1-bit affine", 16: "2-bit affine"}

# The code of each reason below, in its order (see policy.REASON_*).
REASON_MOE = "moe"                       # 2
REASON_NO_PROBE_LAYER = "no-probe-layer"  # 3
REASON_PROBE_ABSENT = "probe-absent"     # 4
REASON_PROBE_DTYPE = "probe-dtype"       # 5
REASON_NO_MTP_HEAD = "no-mtp-head"       # 6, per drafter
REASON_NO_DFLASH = "no-dflash"


class Blocker(Value):
    """One reason not to speculate: `message`, the words a host shows, and
    `code`, which of the reasons it is (for a front end that labels it)."""

    __slots__ = ("code", "message")

    def __init__(self, code: str, message: str) -> None:
        self._init(code=code, message=message)


def probe_tensor_name(layer: int) -> str:
    return f"language_model.model.layers.{layer}.self_attn.q_proj.weight"


def first_full_attention_layer(index: ResidentIndex) -> int | None:
    """The lowest-numbered trunk layer that has `self_attn` tensors.

    The engine knows its first full-attention layer from the model's config;
    without the engine, the index is the evidence: full-attention layers are
    exactly the ones whose tensors live under `self_attn` (linear layers use
    `linear_attn`). The MTP head's and the drafter's own attention tensors
    are not trunk layers and are not counted. The reader answers it
    (`first_self_attn_layer`), in its C pass when the library is loaded.
    """
    return index.first_self_attn_layer()


def _dtype_label(dtype: int) -> str:
    name = DTYPE_NAMES.get(dtype)
    return f"{dtype} ({name})" if name else f"{dtype} (not a known dtype tag)"


def preview_blocker(index: ResidentIndex, experts_per_layer: int,
                    drafter: SpeculativeDrafter) -> Blocker | None:
    """The reason the engine would give for not speculating with `drafter` on
    this install, or None when nothing the files show stands in the way."""
    reason = architecture_blocker(index, experts_per_layer)
    return reason if reason is not None else drafter_blocker(index, drafter)


def architecture_blocker(index: ResidentIndex, experts_per_layer: int) -> Blocker | None:
    """Reasons 2-5, which do not depend on the drafter."""
    # 2. MoE. A checkpoint gap, not a missing kernel: no download helps.
    if experts_per_layer > 0:
        return Blocker(REASON_MOE, f"this install routes to {experts_per_layer} experts per "
                       "layer (mixture-of-experts), and no published MoE conversion of this "
                       "architecture ships a drafter the engine can ingest; no download "
                       "changes that")
    # 3.
    layer = first_full_attention_layer(index)
    if layer is None:
        return Blocker(REASON_NO_PROBE_LAYER, "this install has no full-attention layer (no "
                       "language_model.model.layers.N.self_attn.* tensor) for the verify "
                       "pass to probe")
    # 4.
    probe = probe_tensor_name(layer)
    dtype = index.dtype_of(probe)
    if dtype is None:
        return Blocker(REASON_PROBE_ABSENT, f"the verify probe tensor {probe} (layer {layer}, "
                       "the first full-attention layer) is not in the resident index")
    # 5.
    if dtype not in VERIFY_PROBE_DTYPES:
        covered = ", ".join(f"{k} ({v})" for k, v in VERIFY_PROBE_DTYPES.items())
        return Blocker(REASON_PROBE_DTYPE, f"the verify probe tensor {probe} has dtype "
                       f"{_dtype_label(dtype)}, which the batched verify does not cover (it "
                       f"covers {covered})")
    return None


def drafter_blocker(index: ResidentIndex, drafter: SpeculativeDrafter) -> Blocker | None:
    """Reason 6, the drafter's own presence: asked only once reasons 2-5 are
    clear. Only here is there an artifact to point at."""
    if drafter is SpeculativeDrafter.DFLASH:
        if DFLASH_PRESENCE_TENSOR not in index:
            return Blocker(REASON_NO_DFLASH, "this install carries no DFlash2 drafter "
                           f"({DFLASH_PRESENCE_TENSOR} is not in the resident index); stream "
                           "the drafter beside the trunk")
        return None
    if MTP_PRESENCE_TENSOR not in index:
        return Blocker(REASON_NO_MTP_HEAD, "this install carries no multi-token-prediction "
                       f"head ({MTP_PRESENCE_TENSOR} is not in the resident index); stream an "
                       "install that adds the official checkpoint's last shard")
    return None
