"""What the engine's runner checks of the install's files when it opens, after
the manifest and before the blockers are asked (TURBOSPARK_FACTS.md sections
10 and 12): the two index-wide dtype gates, then the drafter state it builds.
Each failure fails the OPEN -- status 2 with the engine's message, not a
reason not to speculate -- so a preview that said "enabled" or gave a blocker
reason there would answer for an open that never happens.

The drafter state the open builds is also the blockers' last input: their
"no drafter" arm means "not built", not "not named in the index" (a family
that builds no drafter carries its head in vain).
"""

from __future__ import annotations

from .engine_texts import (BLOCKER_TEXTS, ARM_MOE, DFLASH_AUX_COUNT, DFLASH_AUX_NOT_WHOLE,
                           DFLASH_BASE_KERNEL, DFLASH_CODEBOOK_MISMATCH, DFLASH_CONV_ROWS,
                           DFLASH_LAYER_COUNT, DFLASH_NOT_DIVIDING, DFLASH_SHAPE,
                           DFLASH_WIDTHS, DTYPE_NOT_READABLE, GGUF_NOT_RESIDENT,
                           MISSING_RESIDENT_TENSOR, UNSUPPORTED)
from .errors import OpenRefused
from .manifest_arch import ManifestArch
from .resident_index import (DFLASH_PRESENCE_TENSOR, MTP_HEAD_TENSORS, MTP_PRESENCE_TENSOR,
                             IndexEntry, ResidentIndex)

__all__ = ["GGUF_BLOCK_DTYPES", "EXECUTABLE_GGUF_DTYPES", "READABLE_DTYPES", "VISION_PREFIX",
           "check_dtype_gates", "build_mtp", "build_dflash", "DFLASH_LAYERS", "DFLASH_AUX_STATES"]

# real_forward_layout.rs: every GGUF block tag the index can carry, and the
# subset with a resident kernel (MXFP4, 14, has a routed pair only; Q4_0, 9,
# and Q2_0, 25, no resident reader).
GGUF_BLOCK_DTYPES = frozenset((6, 7, 8, 9, 10, 11, 12, 13, 14, 17, 18, 19, 20, 21, 22, 23, 24,
                               25))
EXECUTABLE_GGUF_DTYPES = (6, 7, 8, 10, 11, 12, 13, 17, 18, 19, 20, 21, 22, 23, 24)
# BF16, INT4 and INT8 affine, 1-bit and 2-bit affine, and the executable
# GGUF tags; FP16 (2) only under VISION_PREFIX, the tower's FP16 tensors.
READABLE_DTYPES = frozenset((1, 4, 5, 15, 16) + EXECUTABLE_GGUF_DTYPES)
FP16 = 2
_READABLE_BYTES = bytes(sorted(READABLE_DTYPES))
VISION_PREFIX = b"vision."
_TAGS_TEXT = "[" + ", ".join(map(str, EXECUTABLE_GGUF_DTYPES)) + "]"

# The published DFlash2 drafter: 5 layers tapping 5 trunk layers.
DFLASH_LAYERS = 5
DFLASH_AUX_STATES = 5


def _unsupported(detail: str, stage: str) -> OpenRefused:
    return OpenRefused(UNSUPPORTED.format(detail=detail), stage=stage)


def check_dtype_gates(index: ResidentIndex) -> None:
    """The runner's two gates over every resident tensor, each reporting the
    tensor with the smallest name: a GGUF block dtype without a resident
    kernel first, then any tag no reader honours. One column of the entry
    table is read; names only when a gate trips."""
    tags = index.dtypes()
    # The common case in C: every tag readable (deleting the readable ones
    # leaves nothing); a set of 866 tags costs ~10 us, measured.
    if not tags.translate(None, _READABLE_BYTES):
        return
    present = set(tags)
    stuck_gguf = present & (GGUF_BLOCK_DTYPES - READABLE_DTYPES)
    if stuck_gguf:
        name, tag = _smallest(index, lambda name, tag: tag in stuck_gguf)
        raise _unsupported(GGUF_NOT_RESIDENT.format(name=name, dtype=tag, tags=_TAGS_TEXT),
                           "dtypeGate")
    unreadable = present - READABLE_DTYPES
    if unreadable:
        found = _smallest(index, lambda name, tag: tag in unreadable and not (
            tag == FP16 and name.startswith(VISION_PREFIX)))
        if found is not None:
            name, tag = found
            raise _unsupported(DTYPE_NOT_READABLE.format(name=name, dtype=tag), "dtypeGate")


def _smallest(index: ResidentIndex, trips) -> tuple[str, int] | None:
    """(name, tag) of the entry with the smallest name (byte order, as Rust
    orders the lossily decoded names) that `trips(name_bytes, tag)`."""
    best = None
    for name, tag in zip(index.name_bytes(), index.dtypes()):
        if trips(name, tag) and (best is None or name < best[0]):
            best = (name, tag)
    return None if best is None else (best[0].decode("utf-8"), best[1])


def build_mtp(index: ResidentIndex, arch: ManifestArch, fixed: bool) -> bool:
    """Whether the open builds the MTP head's state under an `Auto` (`fixed`
    False) or `Fixed` policy; OpenRefused when it fails building it. `Auto`
    on an install without `mtp.fc.weight` builds nothing; otherwise every one
    of the head's 15 tensors must be present, in the engine's order (no shape
    or dtype check)."""
    if not arch.builds_drafters:
        return False
    if not fixed and MTP_PRESENCE_TENSOR not in index:
        return False
    # The reader's C pass answers these 15 names as it reads (resident_index
    # _QUERIED_NAMES): no search here, and asked as bytes, no encoding.
    for name in _MTP_HEAD_NAME_BYTES:
        if name not in index:
            raise OpenRefused(MISSING_RESIDENT_TENSOR.format(name=name.decode()),
                              stage="mtpBuild")
    return True


_MTP_HEAD_NAME_BYTES = tuple(name.encode() for name in MTP_HEAD_TENSORS)


class _Drafter:
    """The DFlash2 tensors as the build reads them: a missing one fails the
    open at its first use."""

    __slots__ = ("index",)

    def __init__(self, index: ResidentIndex) -> None:
        self.index = index

    def entry(self, name: str) -> IndexEntry:
        found = self.index.entry(name)
        if found is None:
            raise OpenRefused(MISSING_RESIDENT_TENSOR.format(name=name), stage="dflashBuild")
        return found

    def dims(self, name: str) -> tuple[int, int]:
        shape = self.entry(name).shape
        return shape[0], shape[1]

    def expect(self, name: str, rows: int, cols: int) -> None:
        a, b = self.dims(name)
        if (a, b) != (rows, cols):
            raise _unsupported(DFLASH_SHAPE.format(name=name, a=a, b=b, rows=rows, cols=cols),
                               "dflashBuild")


def build_dflash(index: ResidentIndex, arch: ManifestArch, fixed: bool) -> bool:
    """Whether the open builds the DFlash2 drafter's state under an `Auto`
    (`fixed` False) or `Fixed` policy; OpenRefused when it fails building it:
    on a MoE install (at any policy), or when the drafter's shapes do not
    match the trunk's `hiddenSize` H and `vocabSize` V, checked in the
    engine's order (FACTS section 12). No dtype is checked here."""
    if not arch.builds_drafters:
        return False
    if not fixed and DFLASH_PRESENCE_TENSOR not in index:
        return False
    if arch.num_experts != 0:
        raise _unsupported(BLOCKER_TEXTS["dflash"][ARM_MOE].format(experts=arch.num_experts),
                           "dflashBuild")
    h, v = arch.hidden_size, arch.vocab_size
    d = _Drafter(index)
    layer0 = "dflash.layers.0."
    head_dim = d.entry(layer0 + "self_attn.q_norm.weight").size_bytes // 2
    q = d.dims(layer0 + "self_attn.q_proj.weight")[0]
    k = d.dims(layer0 + "self_attn.k_proj.weight")[0]
    g = d.dims(layer0 + "mlp.gate_proj.weight")[0]
    p, r = d.dims("dflash.candidate_selector.predecessor_codebook")
    s, r2 = d.dims("dflash.candidate_selector.successor_codebook")
    if not (0 < r <= h and p == v and s == v and r2 == r):
        raise _unsupported(DFLASH_CODEBOOK_MISMATCH.format(p=p, r=r, s=s, r2=r2, v=v),
                           "dflashBuild")
    fc_rows, fc_cols = d.dims("dflash.fc.weight")
    layers = 0
    while f"dflash.layers.{layers}.input_layernorm.weight" in index:
        layers += 1
    if layers != DFLASH_LAYERS:
        raise _unsupported(DFLASH_LAYER_COUNT.format(layers=layers), "dflashBuild")
    if head_dim == 0 or q % head_dim or k % head_dim:
        raise _unsupported(DFLASH_NOT_DIVIDING.format(q=q, k=k, hd=head_dim), "dflashBuild")
    # Rust's integer division truncates toward zero; H is positive in any
    # manifest a drafter is built for, and a zero H divides nothing.
    aux = _div(fc_cols, h)
    if not (h != 0 and aux * h == fc_cols and aux > 0):
        raise _unsupported(DFLASH_AUX_NOT_WHOLE.format(rows=fc_rows, cols=fc_cols, h=h),
                           "dflashBuild")
    if q > h or k > h or g > 4 * h:
        raise _unsupported(DFLASH_WIDTHS.format(q=q, k=k, g=g, h=h), "dflashBuild")
    d.expect("dflash.fc.weight", h, aux * h)
    d.expect("dflash.hidden_norm.weight", h, 1)
    d.expect("dflash.norm.weight", h, 1)
    d.expect("dflash.candidate_selector.hidden_projection.weight", r, h)
    for layer in range(DFLASH_LAYERS):
        prefix = f"dflash.layers.{layer}."
        for name, rows, cols in (("input_layernorm", h, 1), ("post_attention_layernorm", h, 1),
                                 ("self_attn.q_norm", head_dim, 1),
                                 ("self_attn.k_norm", head_dim, 1),
                                 ("self_attn.q_proj", q, h), ("self_attn.k_proj", k, h),
                                 ("self_attn.v_proj", k, h), ("self_attn.o_proj", h, q),
                                 ("mlp.gate_proj", g, h), ("mlp.up_proj", g, h),
                                 ("mlp.down_proj", h, g)):
            d.expect(prefix + name + ".weight", rows, cols)
    conv_rows = 4 * _div(h, 16)
    rows = d.dims(layer0 + "attention_conv.kernel_projection.weight")[0]
    if rows != conv_rows:
        raise _unsupported(DFLASH_CONV_ROWS.format(rows=rows, conv_rows=conv_rows, h=h),
                           "dflashBuild")
    for layer in range(DFLASH_LAYERS):
        for stem in ("attention_conv", "mlp_conv"):
            prefix = f"dflash.layers.{layer}.{stem}."
            d.expect(prefix + "kernel_projection.weight", conv_rows, h)
            shape = d.entry(prefix + "base_kernel").shape
            if shape != (2, 2, h, 1):
                raise _unsupported(DFLASH_BASE_KERNEL.format(
                    name=prefix + "base_kernel", shape="(%d, %d, %d, %d)" % shape, h=h),
                    "dflashBuild")
    if aux != DFLASH_AUX_STATES:
        raise _unsupported(DFLASH_AUX_COUNT.format(aux=aux), "dflashBuild")
    return True


def _div(a: int, b: int) -> int:
    """Rust's `/` on integers (truncating toward zero; 0 for a zero divisor,
    which the callers refuse before using)."""
    if b == 0:
        return 0
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient
