"""A preview of the engine's speculation blocker (revision 22f47a2).

The engine answers "can the verify pass serve this install" after OPEN
(TURBOSPARK_FACTS.md section 4), in one of two functions: the MTP runner's
when the resolved drafter is mtp, the DFlash2 one when it is dflash. Their
inputs are the model's architecture as the manifest's `arch` declares it (a
vision sidecar attached at open changes it), the resident index, and whether
THAT drafter's state was BUILT at open (runner_open.py). A GUI wants the
answer before a multi-gigabyte open, so this asks the same questions, in the
same order, of the same files, and answers in the words of the drafter's own
function (engine_texts.py). The first that applies is the reason:

1. the runner has a vision tower (`visionDepth` > 0, or a sidecar attached)
2. the model routes to N experts (`numExperts` != 0: the manifest, not
   `packed_experts/layout.json`)
3. no full-attention layer to probe (`fullAttentionLayerMask`: every layer
   in 0..numLayers linear, 2; sliding window, 0, counts as full)
4. the probe tensor of the first full-attention layer is absent
5. the probe's dtype is not one the batched verify has kernels for: 4, 15, 16
6. the drafter's state was not built

The architectural reasons come before the missing-drafter one on purpose:
telling someone to download a shard that cannot help is the bug the original
module's long comments are about. So only reason 6 points at an artifact,
and only where one exists.
"""

from __future__ import annotations

from ._value import Value
from .engine_texts import (ARM_MOE, ARM_NO_DRAFTER, ARM_NO_PROBE_LAYER, ARM_PROBE_ABSENT,
                           ARM_PROBE_DTYPE, ARM_VISION, BLOCKER_TEXTS, VERIFY_DTYPES)
from .manifest_arch import ManifestArch
from .policy import SpeculativeDrafter
from .reasons import (REASON_MOE, REASON_NO_DFLASH, REASON_NO_MTP_HEAD, REASON_NO_PROBE_LAYER,
                      REASON_PROBE_ABSENT, REASON_PROBE_DTYPE, REASON_VISION)
from .resident_index import ResidentIndex

__all__ = ["Blocker", "probe_tensor_name", "verify_covers", "speculation_blocker"]


class Blocker(Value):
    """One reason not to speculate: `message`, the words a host shows, and
    `code`, which of the reasons it is (reasons.py)."""

    __slots__ = ("code", "message")

    def __init__(self, code: str, message: str) -> None:
        self._init(code=code, message=message)


def probe_tensor_name(layer: int) -> str:
    return f"language_model.model.layers.{layer}.self_attn.q_proj.weight"


def verify_covers(dtype: int | None) -> bool:
    """Whether the batched verify can run on a probe of this dtype tag."""
    return dtype in VERIFY_DTYPES


def speculation_blocker(arch: ManifestArch, index: ResidentIndex, drafter: SpeculativeDrafter,
                        built: bool, vision: bool) -> Blocker | None:
    """The reason the engine's blocker function for `drafter` gives for not
    speculating, or None when nothing stands in the way. `built`: whether
    that drafter's state was built at open; `vision`: whether the runner has
    a vision tower (the manifest's, or a sidecar's attached at open)."""
    # AUTO is resolved before a blocker is asked; it shares the MTP runner's
    # function, as the original module's flow does.
    texts = BLOCKER_TEXTS["dflash" if drafter is SpeculativeDrafter.DFLASH else "mtp"]
    if vision:
        return Blocker(REASON_VISION, texts[ARM_VISION])
    # A checkpoint gap, not a missing kernel: no download helps.
    if arch.num_experts != 0:
        return Blocker(REASON_MOE, texts[ARM_MOE].format(experts=arch.num_experts))
    layer = arch.first_full_attention_layer()
    if layer is None:
        return Blocker(REASON_NO_PROBE_LAYER, texts[ARM_NO_PROBE_LAYER])
    probe = probe_tensor_name(layer)
    dtype = index.dtype_of(probe)
    if dtype is None:
        return Blocker(REASON_PROBE_ABSENT, texts[ARM_PROBE_ABSENT].format(probe=probe))
    if not verify_covers(dtype):
        return Blocker(REASON_PROBE_DTYPE, texts[ARM_PROBE_DTYPE].format(probe=probe,
                                                                         dtype=dtype))
    # Only here is there an artifact to point at.
    if not built:
        code = REASON_NO_DFLASH if drafter is SpeculativeDrafter.DFLASH else REASON_NO_MTP_HEAD
        return Blocker(code, texts[ARM_NO_DRAFTER])
    return None
