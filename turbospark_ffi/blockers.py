"""An engine-less preview of the engine's speculation blocker.

The engine answers "can the verify pass serve this install" after OPEN, with
the full architecture in hand (docs/ENGINE.md section 4), in one of two
functions: the MTP runner's when the resolved drafter is mtp, the DFlash2
one when it is dflash. A GUI wants the answer before a multi-gigabyte open,
so this asks the same questions, in the same order, of what can be read
without the engine -- the resident index and `packed_experts/layout.json` --
and answers in the words of the drafter's own function (engine_texts.py).
The first that applies is the reason.

1. a vision tower is active -- NOT previewable: it is a property of the
   opened runner, not of the files. The preview assumes none.
2. the model routes to N experts (MoE)
3. no full-attention layer to probe
4. the probe tensor is absent from the index
5. the probe's dtype is not 4 (INT4 affine), the one dtype the batched
   verify has a kernel for: 1-bit (15) and 2-bit (16) block too
6. the drafter itself is missing

The architectural reasons come before the missing-drafter one on purpose:
telling someone to download a shard that cannot help is the bug the original module's
long comments are about. So only reason 6 points at an artifact, and only
where one exists.
"""

from __future__ import annotations

from ._value import Value
from .engine_texts import (ARM_MOE, ARM_NO_DRAFTER, ARM_NO_PROBE_LAYER, ARM_PROBE_ABSENT,
                           ARM_PROBE_DTYPE, BATCHED_GEMM_DTYPE, BLOCKER_TEXTS)
from .policy import SpeculativeDrafter
from .resident_index import DFLASH_PRESENCE_TENSOR, MTP_PRESENCE_TENSOR, ResidentIndex

__all__ = ["Blocker", "first_full_attention_layer", "probe_tensor_name", "verify_covers",
           "preview_blocker", "architecture_blocker", "drafter_blocker", "REASON_MOE",
           "REASON_NO_PROBE_LAYER", "REASON_PROBE_ABSENT", "REASON_PROBE_DTYPE",
           "REASON_NO_MTP_HEAD", "REASON_NO_DFLASH"]

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


def verify_covers(dtype: int | None) -> bool:
    """Whether the batched verify can run on a probe of this dtype tag: both
    of the engine's blocker functions test exactly `dtype != 4`."""
    return dtype == BATCHED_GEMM_DTYPE


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


def _texts(drafter: SpeculativeDrafter) -> dict[str, str]:
    # AUTO is resolved before a preview is asked; it shares the MTP runner's
    # function, as the original module's flow does.
    return BLOCKER_TEXTS["dflash" if drafter is SpeculativeDrafter.DFLASH else "mtp"]


def preview_blocker(index: ResidentIndex, experts_per_layer: int,
                    drafter: SpeculativeDrafter) -> Blocker | None:
    """The reason the engine's blocker function for `drafter` would give for
    not speculating on this install, or None when nothing the files show
    stands in the way."""
    reason = architecture_blocker(index, experts_per_layer, drafter)
    return reason if reason is not None else drafter_blocker(index, drafter)


def architecture_blocker(index: ResidentIndex, experts_per_layer: int,
                         drafter: SpeculativeDrafter) -> Blocker | None:
    """Reasons 2-5: the same questions for both drafters, each function in
    its own words."""
    texts = _texts(drafter)
    # 2. MoE. A checkpoint gap, not a missing kernel: no download helps.
    if experts_per_layer > 0:
        return Blocker(REASON_MOE, texts[ARM_MOE].format(experts=experts_per_layer))
    # 3.
    layer = first_full_attention_layer(index)
    if layer is None:
        return Blocker(REASON_NO_PROBE_LAYER, texts[ARM_NO_PROBE_LAYER])
    # 4.
    probe = probe_tensor_name(layer)
    dtype = index.dtype_of(probe)
    if dtype is None:
        return Blocker(REASON_PROBE_ABSENT, texts[ARM_PROBE_ABSENT].format(probe=probe))
    # 5.
    if not verify_covers(dtype):
        return Blocker(REASON_PROBE_DTYPE, texts[ARM_PROBE_DTYPE].format(probe=probe,
                                                                         dtype=dtype))
    return None


def drafter_blocker(index: ResidentIndex, drafter: SpeculativeDrafter) -> Blocker | None:
    """Reason 6, the drafter's own presence: asked only once reasons 2-5 are
    clear. Only here is there an artifact to point at."""
    if drafter is SpeculativeDrafter.DFLASH:
        if DFLASH_PRESENCE_TENSOR not in index:
            return Blocker(REASON_NO_DFLASH, _texts(drafter)[ARM_NO_DRAFTER])
        return None
    if MTP_PRESENCE_TENSOR not in index:
        return Blocker(REASON_NO_MTP_HEAD, _texts(drafter)[ARM_NO_DRAFTER])
    return None
