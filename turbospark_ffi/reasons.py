"""The one table of reason codes.

A plan that does not speculate says why in the words of the arm that decided
(the original module's, the engine's blocker's, or the host's own), which a
host shows verbatim. `PlanResult.reason_code` says WHICH reason it is, for a
front end that labels or counts reasons (the command line's grid) and must
never parse words. Each code belongs to one arm; the arms import their code
from here, so a new reason is one row of this table.
"""

from __future__ import annotations

__all__ = ["REASON_DFLASH_OPT_IN", "REASON_SAMPLED", "REASON_ENGINE", "REASON_VISION",
           "REASON_MOE", "REASON_NO_PROBE_LAYER", "REASON_PROBE_ABSENT", "REASON_PROBE_DTYPE",
           "REASON_NO_MTP_HEAD", "REASON_NO_DFLASH", "REASON_LABELS"]

# policy.py: auto resolved to MTP on a DFlash2-only install (its note).
REASON_DFLASH_OPT_IN = "dflash-opt-in"
# policy.py: a block drafter asked at a sampled temperature (the original
# module's arm; the open decides greedy, so only tsffi_resolve_speculation
# reaches it).
REASON_SAMPLED = "sampled"
# The host's own "tsffi.engineBlocker", passed through verbatim.
REASON_ENGINE = "engine"
# blockers.py, the engine's blocker arms in its order (1-6).
REASON_VISION = "vision"
REASON_MOE = "moe"
REASON_NO_PROBE_LAYER = "no-probe-layer"
REASON_PROBE_ABSENT = "probe-absent"
REASON_PROBE_DTYPE = "probe-dtype"
REASON_NO_MTP_HEAD = "no-mtp-head"  # 6, for the MTP runner
REASON_NO_DFLASH = "no-dflash"      # 6, for the DFlash2 runner

# A short label per code, for a grid cell (the full words are listed beside
# it). The sampled arm has none: no item of a table reaches it.
REASON_LABELS = {
    REASON_DFLASH_OPT_IN: "DFlash2 opt-in", REASON_ENGINE: "engine",
    REASON_VISION: "vision", REASON_MOE: "MoE", REASON_NO_PROBE_LAYER: "no probe layer",
    REASON_PROBE_ABSENT: "verify probe", REASON_PROBE_DTYPE: "verify probe",
    REASON_NO_MTP_HEAD: "no MTP head", REASON_NO_DFLASH: "no DFlash2",
}
