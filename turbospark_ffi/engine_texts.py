"""The engine's own words: every message of the engine around the original
module that this library shows, in one table beside the policy's own
(policy.py holds the original module's texts). A GUI shows these beside what
the engine later says itself, so each is the engine's, byte for byte
(docs/ENGINE.md sections 1 and 4): the blocker texts of its two blocker
functions, and the reader's refusals.

They are the words of one engine version, `ENGINE` `ENGINE_VERSION`, which
build info reports (`tsffi_build_info_json`'s "engine" and "engineVersion"):
a change to any text here is a change of that version.

`{...}` fields are filled with str.format by the modules that word the
message (blockers.py, resident_index.py); nothing else here is a template.
"""

from __future__ import annotations

__all__ = ["ENGINE", "ENGINE_VERSION", "MOE_SPECULATION_BLOCKER_MARKER", "BLOCKER_TEXTS",
           "ARM_MOE", "ARM_NO_PROBE_LAYER", "ARM_PROBE_ABSENT", "ARM_PROBE_DTYPE",
           "ARM_NO_DRAFTER", "BATCHED_GEMM_DTYPE", "INDEX_CORRUPT", "IO_FAILED",
           "OS_ERROR", "READER_DETAILS", "NUL_IN_PATH"]

ENGINE = "turbospark-runtime"
ENGINE_VERSION = "0.3.0"

# The one dtype the batched verify's GEMM has an arm for (INT4 affine): both
# blocker functions test `dtype != 4`, so 1-bit (15) and 2-bit (16) block too.
BATCHED_GEMM_DTYPE = 4

# The engine's marker of its MoE arm; its own tests match on it.
MOE_SPECULATION_BLOCKER_MARKER = "no MoE drafter"

# The arms a file preview can know, in the engine's order (the vision arm,
# first in the engine, is the open's and has no text a file can know).
ARM_MOE = "moe"
ARM_NO_PROBE_LAYER = "no-probe-layer"
ARM_PROBE_ABSENT = "probe-absent"
ARM_PROBE_DTYPE = "probe-dtype"
ARM_NO_DRAFTER = "no-drafter"

# BLOCKER_TEXTS[drafter][arm]: the MTP runner's function is asked when the
# resolved drafter is "mtp", the DFlash2 one when it is "dflash". Fields:
# {experts} the routed expert count, {probe} the probe tensor's full name,
# {dtype} its decimal tag.
BLOCKER_TEXTS = {
    "mtp": {
        ARM_MOE: (
            MOE_SPECULATION_BLOCKER_MARKER + ": this install routes to {experts} experts, and "
            "no published MoE conversion of this architecture ships a drafter this port can "
            "ingest (every mlx conversion drops mtp.*). The batched routed verify itself runs, "
            "so this is a checkpoint gap and not a missing kernel"),
        ARM_NO_PROBE_LAYER: (
            "the batched verify needs a full-attention layer to probe and this install "
            "declares none"),
        ARM_PROBE_ABSENT: (
            "cannot tell whether the batched verify can run: {probe} is not in the resident "
            "index"),
        ARM_PROBE_DTYPE: (
            "the batched verify is INT4-only and this install's {probe} is dtype {dtype} (the "
            "1-bit and 2-bit checkpoints of this architecture have no batched kernel); the "
            "model decodes normally, only speculation is unavailable"),
        ARM_NO_DRAFTER: (
            "this install carries no multi-token-prediction head (mtp.fc.weight is not in the "
            "resident index); the mlx conversion drops mtp.*, so stream an install that adds "
            "the official checkpoint's last shard (docs/MTP.md)"),
    },
    "dflash": {
        ARM_MOE: (
            MOE_SPECULATION_BLOCKER_MARKER + ": this install routes to {experts} experts, and "
            "no published MoE checkpoint of this architecture ships a DFlash2 drafter (the "
            "published one targets the dense half). The batched routed verify itself runs, so "
            "this is a checkpoint gap and not a missing kernel"),
        ARM_NO_PROBE_LAYER: (
            "the batched verify needs a full-attention layer to probe and this install "
            "declares none"),
        ARM_PROBE_ABSENT: "cannot tell whether the verify can run: {probe} is missing",
        ARM_PROBE_DTYPE: (
            "the batched verify is INT4-only and this install's {probe} is dtype {dtype}"),
        ARM_NO_DRAFTER: (
            "this install carries no DFlash2 drafter (dflash.fc.weight is not in the resident "
            "index); stream it beside the trunk (docs/DFLASH2.md)"),
    },
}

# The reader's two message shapes (the engine's ModelError): a check that
# failed, and an I/O call that failed, whose detail is the OS error as the
# engine's io::Error displays it: "<strerror text> (os error <errno>)".
INDEX_CORRUPT = "resident index is corrupt: {detail}"
IO_FAILED = "{call} failed: {detail}"
OS_ERROR = "{text} (os error {errno})"
# The engine's detail when a path cannot be a C string (a NUL inside).
NUL_IN_PATH = "file name contained an unexpected NUL byte"

# READER_DETAILS[check]: the detail of each check, in the engine's order,
# keyed by the `check` tag ResidentIndexError carries. Names are the lossily
# decoded name, unquoted; the region bounds are half-open.
READER_DETAILS = {
    "short_header": "short read for IndexHeader",                                   # 1
    "index_size_below_header": "indexSize {index_size} < header size 24",           # 2
    "entry_count_overflow": "entryCount {entry_count} overflows the entry table",   # 3
    "entry_table_overflow": "header + entry table size overflows",
    "entry_table_past_index": "header+entries ({table_end}) > indexSize {index_size}",  # 4
    "resident_end_overflow": "indexSize + residentSize overflows",                 # 5
    "resident_end_past_file": ("indexSize {index_size} + residentSize {resident_size} = "
                               "{end} exceeds file length {length}"),
    "short_read": "short read for index region",                                    # 6
    "name_out_of_range": ("entry {i} name range [{start}, {stop}) out of index region "  # 7
                          "[24, {index_size})"),
    "payload_out_of_range": ("entry {i} ({name}) payload [{offset}, +{size}) outside the "
                             "resident region [{index_size}, {end})"),
    "scale_plane_out_of_range": ("entry {i} ({name}) scale plane [{offset}, +{size}) outside "
                                 "the resident region [{index_size}, {end})"),
    "bias_plane_out_of_range": ("entry {i} ({name}) bias plane [{offset}, +{size}) outside the "
                                "resident region [{index_size}, {end})"),
    "duplicate_name": "duplicate tensor name {name}",
}
