"""The engine's messages, transcribed once from
../shared/reference/TURBOSPARK_FACTS.md sections 1, 4 and 10-12 (the blockers of
revision 22f47a2, the open of 0a45c54, the manifest of 54bc43a), the way
tests/original_texts.py holds the original module's. Copied, not
imported from the package, so a test fails when the package's text drifts
from the engine's; every test that names one of these texts imports it from
here.

`{...}` fields are filled with str.format by the tests (names as in FACTS:
`experts` is the routed expert count, `probe` the probe tensor, `dtype` its
tag)."""

ENGINE = "turbospark-runtime"
ENGINE_VERSION = "0.3.0"

# --------------------------------------------------------------------------
# The two blocker functions (FACTS section 4's table), arm by arm, in the
# engine's order. Keyed by the drafter the plan resolved.

MOE_MARKER = "no MoE drafter"
VISION = ("the verify pass is vision-blind: this runner has a vision tower, and the batched "
          "verify embeds every row from the token table and rotates at the raw position, so a "
          "speculative round past an image would attend and rotate by the wrong values; run "
          "text-only or disable speculation (docs/VISION.md)")

BLOCKERS = {
    "mtp": {
        "vision": VISION,
        "moe": ("no MoE drafter: this install routes to {experts} experts, and no published MoE "
                "conversion of this architecture ships a drafter this port can ingest (every "
                "mlx conversion drops mtp.*). The batched routed verify itself runs, so this is "
                "a checkpoint gap and not a missing kernel"),
        "no-probe-layer": ("the batched verify needs a full-attention layer to probe and this "
                           "install declares none"),
        "probe-absent": ("cannot tell whether the batched verify can run: {probe} is not in "
                         "the resident index"),
        "probe-dtype": ("the batched verify covers INT4-affine (4) and the 1-bit (15) / 2-bit "
                        "(16) affine pair, and this install's {probe} is dtype {dtype}; the "
                        "model decodes normally, only speculation is unavailable"),
        "no-drafter": ("this install carries no multi-token-prediction head (mtp.fc.weight is "
                       "not in the resident index); the mlx conversion drops mtp.*, so stream "
                       "an install that adds the official checkpoint's last shard "
                       "(docs/MTP.md)"),
    },
    "dflash": {
        "vision": VISION,
        "moe": ("no MoE drafter: this install routes to {experts} experts, and no published MoE "
                "checkpoint of this architecture ships a DFlash2 drafter (the published one "
                "targets the dense half). The batched routed verify itself runs, so this is a "
                "checkpoint gap and not a missing kernel"),
        "no-probe-layer": ("the batched verify needs a full-attention layer to probe and this "
                           "install declares none"),
        "probe-absent": "cannot tell whether the verify can run: {probe} is missing",
        "probe-dtype": ("the batched verify covers INT4-affine (4) and the 1-bit (15) / 2-bit "
                        "(16) affine pair, and this install's {probe} is dtype {dtype}"),
        "no-drafter": ("this install carries no DFlash2 drafter (dflash.fc.weight is not in the "
                       "resident index); stream it beside the trunk (docs/DFLASH2.md)"),
    },
}


def blocker(drafter: str, arm: str, **fields) -> str:
    """The engine's text of `arm` for `drafter` ("mtp" or "dflash"), filled."""
    return BLOCKERS[drafter][arm].format(**fields)


# --------------------------------------------------------------------------
# The reader's refusals (FACTS section 1, "The details, in check order"):
# "resident index is corrupt: <detail>", or "<call> failed: <detail>" with the
# OS error's text as the engine's io::Error renders it.

CORRUPT = "resident index is corrupt: "

READER = {
    "short_header": "short read for IndexHeader",
    "index_size_below_header": "indexSize {index_size} < header size 24",
    "entry_count_overflow": "entryCount {entry_count} overflows the entry table",
    "entry_table_overflow": "header + entry table size overflows",
    "entry_table_past_index": "header+entries ({table_end}) > indexSize {index_size}",
    "resident_end_overflow": "indexSize + residentSize overflows",
    "resident_end_past_file": ("indexSize {index_size} + residentSize {resident_size} = {end} "
                               "exceeds file length {length}"),
    "short_read": "short read for index region",
    "name_out_of_range": ("entry {i} name range [{start}, {stop}) out of index region "
                          "[24, {index_size})"),
    "payload_out_of_range": ("entry {i} ({name}) payload [{offset}, +{size}) outside the "
                             "resident region [{index_size}, {end})"),
    "scale_plane_out_of_range": ("entry {i} ({name}) scale plane [{offset}, +{size}) outside "
                                 "the resident region [{index_size}, {end})"),
    "bias_plane_out_of_range": ("entry {i} ({name}) bias plane [{offset}, +{size}) outside the "
                                "resident region [{index_size}, {end})"),
    "duplicate_name": "duplicate tensor name {name}",
}


def corrupt(check: str, **fields) -> str:
    """The engine's whole message for the reader's `check`, filled."""
    return CORRUPT + READER[check].format(**fields)


def io_failed(call: str, errno_value: int) -> str:
    """`<call> failed: <detail>`: the detail is Rust's io::Error Display of an
    OS error, the C library's strerror text then ` (os error N)`."""
    import os
    return f"{call} failed: {os.strerror(errno_value)} (os error {errno_value})"


# --------------------------------------------------------------------------
# The open's refusals of an install (FACTS sections 10-12), status 2, bare.

NOT_A_DIRECTORY = "{dir} is not a directory (and matched no installed alias)"
NO_MANIFEST = "no manifest.json at {dir}/manifest.json: {error}"
MANIFEST_ARCH = "manifest.json arch: {error}"
MISSING_TENSOR = "missing resident tensor: {name}"
DFLASH_MOE = "unsupported: " + BLOCKERS["dflash"]["moe"]
GGUF_GATE = ("unsupported: tensor {name} carries GGUF block dtype {dtype}, which has no "
             "RESIDENT kernel in this port (ROADMAP Phase G Stage 2; resident-executable tags: "
             "[6, 7, 8, 10, 11, 12, 13, 17, 18, 19, 20, 21, 22, 23, 24])")
DTYPE_GATE = ("unsupported: tensor {name} carries resident dtype {dtype}, which no reader in "
              "this crate honours; unquantized tensors must be narrowed to BF16 (tag 1) at "
              "repack time")
