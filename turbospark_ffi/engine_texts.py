"""The engine's own words: every message of the engine around the original
module that this library shows, in one table beside the policy's own
(policy.py holds the original module's texts). A GUI shows these beside what
the engine later says itself, so each is the engine's, byte for byte
(TURBOSPARK_FACTS.md sections 1, 4 and 10-12): the blocker texts of its two
blocker functions, the open's refusals of an install (its directory, its
manifest's `arch`, its dtype gates, the drafter state it builds) and the
reader's refusals.

Each text is the engine's at the revision `engine_revision.REVISIONS` names
for its part; build info reports that table. A change to a text here is a
change of revision there.

`{...}` fields are filled with str.format by the modules that word the
message (blockers.py, manifest_arch.py, runner_open.py, resident_index.py);
nothing else here is a template.
"""

from __future__ import annotations

__all__ = ["MOE_SPECULATION_BLOCKER_MARKER", "VISION_SPECULATION_BLOCKER_MARKER",
           "BLOCKER_TEXTS", "ARM_VISION", "ARM_MOE", "ARM_NO_PROBE_LAYER", "ARM_PROBE_ABSENT",
           "ARM_PROBE_DTYPE", "ARM_NO_DRAFTER", "VERIFY_DTYPES", "INDEX_CORRUPT", "IO_FAILED",
           "OS_ERROR", "READER_DETAILS", "NUL_IN_PATH", "NOT_A_DIRECTORY", "NO_MANIFEST",
           "MANIFEST_JSON", "MANIFEST_ARCH", "UNKNOWN_FAMILY", "FAMILY_NOT_SUPPORTED",
           "MISSING_RESIDENT_TENSOR", "UNSUPPORTED", "DFLASH_CODEBOOK_MISMATCH",
           "DFLASH_LAYER_COUNT", "DFLASH_NOT_DIVIDING", "DFLASH_AUX_NOT_WHOLE",
           "DFLASH_WIDTHS", "DFLASH_SHAPE", "DFLASH_CONV_ROWS", "DFLASH_BASE_KERNEL",
           "DFLASH_AUX_COUNT", "GGUF_NOT_RESIDENT", "DTYPE_NOT_READABLE"]

# The probe dtypes the batched verify has kernels for (revision 22f47a2):
# INT4 affine (4) and the 1-bit (15) / 2-bit (16) affine pair. The revision
# before (5c0ed9b) had 4 alone: do not "correct" it back.
VERIFY_DTYPES = frozenset((4, 15, 16))

# The engine's markers of two arms; its own tests match on them.
MOE_SPECULATION_BLOCKER_MARKER = "no MoE drafter"
VISION_SPECULATION_BLOCKER_MARKER = "the verify pass is vision-blind"

# The blockers' arms, in the engine's order (FACTS section 4).
ARM_VISION = "vision"
ARM_MOE = "moe"
ARM_NO_PROBE_LAYER = "no-probe-layer"
ARM_PROBE_ABSENT = "probe-absent"
ARM_PROBE_DTYPE = "probe-dtype"
ARM_NO_DRAFTER = "no-drafter"

_VISION_TEXT = (
    VISION_SPECULATION_BLOCKER_MARKER + ": this runner has a vision tower, and the batched "
    "verify embeds every row from the token table and rotates at the raw position, so a "
    "speculative round past an image would attend and rotate by the wrong values; run "
    "text-only or disable speculation (docs/VISION.md)")
_PROBE_DTYPE_TEXT = (
    "the batched verify covers INT4-affine (4) and the 1-bit (15) / 2-bit (16) affine pair, "
    "and this install's {probe} is dtype {dtype}")

# BLOCKER_TEXTS[drafter][arm]: the MTP runner's function is asked when the
# resolved drafter is "mtp", the DFlash2 one when it is "dflash". Fields:
# {experts} the manifest's routed expert count, {probe} the probe tensor's
# full name, {dtype} its decimal tag.
BLOCKER_TEXTS = {
    "mtp": {
        ARM_VISION: _VISION_TEXT,
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
            _PROBE_DTYPE_TEXT + "; the model decodes normally, only speculation is unavailable"),
        ARM_NO_DRAFTER: (
            "this install carries no multi-token-prediction head (mtp.fc.weight is not in the "
            "resident index); the mlx conversion drops mtp.*, so stream an install that adds "
            "the official checkpoint's last shard (docs/MTP.md)"),
    },
    "dflash": {
        ARM_VISION: _VISION_TEXT,
        ARM_MOE: (
            MOE_SPECULATION_BLOCKER_MARKER + ": this install routes to {experts} experts, and "
            "no published MoE checkpoint of this architecture ships a DFlash2 drafter (the "
            "published one targets the dense half). The batched routed verify itself runs, so "
            "this is a checkpoint gap and not a missing kernel"),
        ARM_NO_PROBE_LAYER: (
            "the batched verify needs a full-attention layer to probe and this install "
            "declares none"),
        ARM_PROBE_ABSENT: "cannot tell whether the verify can run: {probe} is missing",
        ARM_PROBE_DTYPE: _PROBE_DTYPE_TEXT,
        ARM_NO_DRAFTER: (
            "this install carries no DFlash2 drafter (dflash.fc.weight is not in the resident "
            "index); stream it beside the trunk (docs/DFLASH2.md)"),
    },
}

# The open's refusals of an install, before its runner (FACTS sections 10,
# 11; the manifest peek of revision 54bc43a). {dir} is the directory as the
# open names it; {path} the manifest's path; {error} an io::Error's or
# serde's Display; {raw} the family in Rust's Debug quoting.
NOT_A_DIRECTORY = "{dir} is not a directory (and matched no installed alias)"
NO_MANIFEST = "no manifest.json at {path}: {error}"
MANIFEST_JSON = "manifest.json: {error}"
MANIFEST_ARCH = "manifest.json arch: {error}"
UNKNOWN_FAMILY = "unknown arch.family {raw}"
FAMILY_NOT_SUPPORTED = "manifest family deepseekV4Flash is not supported by real generation yet"

# The runner's open (FACTS sections 10 and 12): the two index-wide dtype
# gates (real_forward_layout.rs), then the drafter state it builds. Every
# "unsupported" failure is prefixed so.
UNSUPPORTED = "unsupported: {detail}"
GGUF_NOT_RESIDENT = (
    "tensor {name} carries GGUF block dtype {dtype}, which has no RESIDENT kernel in this "
    "port (ROADMAP Phase G Stage 2; resident-executable tags: {tags})")
DTYPE_NOT_READABLE = (
    "tensor {name} carries resident dtype {dtype}, which no reader in this crate honours; "
    "unquantized tensors must be narrowed to BF16 (tag 1) at repack time")
MISSING_RESIDENT_TENSOR = "missing resident tensor: {name}"
DFLASH_CODEBOOK_MISMATCH = (
    "dflash candidate selector codebook shape mismatch: pred [{p}, {r}], succ [{s}, {r2}], "
    "expected [{v}, {r}]")
DFLASH_LAYER_COUNT = "the DFlash2 drafter has {layers} contiguous layers, expected 5"
DFLASH_NOT_DIVIDING = "the DFlash2 drafter's shapes do not divide: q {q}, k {k}, head_dim {hd}"
DFLASH_AUX_NOT_WHOLE = "dflash.fc.weight is [{rows}, {cols}], not a whole number of {h}-wide aux states"
DFLASH_WIDTHS = (
    "the DFlash2 drafter widths exceed their allocation bounds: q {q}, k {k}, ffn {g}, "
    "hidden {h}")
DFLASH_SHAPE = "{name} has shape [{a}, {b}], expected [{rows}, {cols}]"
DFLASH_CONV_ROWS = (
    "attention_conv.kernel_projection.weight has {rows} rows against the {conv_rows} this "
    "port's conv dispatches (2 sides x 2 taps x {h}/16 groups); this drafter's conv shape is "
    "not the published one")
DFLASH_BASE_KERNEL = "{name} has shape {shape}, expected [2, 2, {h}]"
DFLASH_AUX_COUNT = "dflash.fc.weight fuses {aux} aux states but this drafter taps 5 trunk layers"

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
