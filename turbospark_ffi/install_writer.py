"""Writes installs in the engine's real layout, so that every shape the policy
distinguishes can be tested without a 14 GB model.

Used by `turbospark-ffi make-install`, the test suite, the benchmarks and the
sample installs that ship with the package: one writer, so the fixtures of the
three cannot drift apart. What it writes is what docs/ENGINE.md sections 1 and 2 say the
engine writes and reads: the 24-byte header, 72-byte entries, one string table,
`indexSize` padded to 16,384 bytes and zero-filled, payloads inside the
resident region, a manifest with a SHA-256 per file and the model's `arch`
(TURBOSPARK_FACTS.md section 11: what the engine's open reads first, here
consistent with the index: the layers, which of them are full attention, the
routed experts), and `packed_experts/layout.json` (dense: no layers, 0
experts). A DFlash2 drafter is written in the published drafter's shapes
for that `arch`, so the open would build it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .resident_index import (DFLASH_TENSORS, DTYPE_NAMES, ENTRY_SIZE, HEADER_SIZE,
                             MTP_HEAD_TENSORS)

__all__ = [
    "DTYPE_NAMES",
    "MTP_HEAD_TENSORS",
    "DFLASH_TENSORS",
    "TensorSpec",
    "trunk_tensors",
    "mtp_tensors",
    "dflash_tensors",
    "arch_for",
    "manifest_json",
    "rewrite_manifest",
    "encode_index",
    "write_install",
    "SAMPLE_SHAPES",
    "write_samples",
    "store_install_dir",
    "record_install",
]


_LINEAR_ATTN = ("in_proj_qkv.weight", "in_proj_z.weight", "in_proj_a.weight",
                "in_proj_b.weight", "out_proj.weight", "A_log", "dt_bias",
                "conv1d.weight", "norm.weight")
_FULL_ATTN = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
              "q_norm.weight", "k_norm.weight")
_DENSE_MLP = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
_MOE_MLP = ("mlp.gate.weight", "mlp.shared_expert.gate_proj.weight",
            "mlp.shared_expert.up_proj.weight", "mlp.shared_expert.down_proj.weight",
            "mlp.shared_expert_gate.weight")

INDEX_ALIGNMENT = 16_384


class TensorSpec:
    """One resident tensor to write: its name, dtype tag, payload size and
    shape (rank padded to 4; default `(size, 1, 1, 1)`)."""

    __slots__ = ("name", "dtype", "size", "quantized", "shape")

    def __init__(self, name: str, dtype: int = 1, size: int = 32, quantized: bool = False,
                 shape: tuple[int, int, int, int] | None = None):
        self.name = name
        self.dtype = dtype
        self.size = size
        # Quantised tensors carry scale and bias planes, as INT4 affine does.
        self.quantized = quantized
        self.shape = (size, 1, 1, 1) if shape is None else tuple(shape)


def trunk_tensors(*, layers: int = 4, full_attention_every: int = 4, moe: bool = False,
                  probe_dtype: int = 4, weight_dtype: int = 4) -> list[TensorSpec]:
    """The trunk of a Qwen-style hybrid model: every `full_attention_every`-th
    layer is full attention (the first is the verify probe's layer), the rest
    linear attention. 64 layers give the real 27B dense install's 851 entries."""
    def weight(name: str, dtype: int = weight_dtype) -> TensorSpec:
        return TensorSpec(name, dtype, 64, quantized=dtype in (4, 5, 15, 16))

    out = [weight("language_model.model.embed_tokens.weight"),
           weight("language_model.lm_head.weight"),
           TensorSpec("language_model.model.norm.weight")]
    for i in range(layers):
        prefix = f"language_model.model.layers.{i}."
        out.append(TensorSpec(prefix + "input_layernorm.weight"))
        out.append(TensorSpec(prefix + "post_attention_layernorm.weight"))
        if full_attention_every and (i + 1) % full_attention_every == 0:
            for t in _FULL_ATTN:
                if t.endswith("norm.weight"):
                    out.append(TensorSpec(prefix + "self_attn." + t))
                else:
                    out.append(weight(prefix + "self_attn." + t,
                                      probe_dtype if t == "q_proj.weight" else weight_dtype))
        else:
            for t in _LINEAR_ATTN:
                out.append(weight(prefix + "linear_attn." + t)
                           if t.endswith("proj.weight") else TensorSpec(prefix + "linear_attn." + t))
        for t in (_MOE_MLP if moe else _DENSE_MLP):
            out.append(weight(prefix + t))
    return out


# The dense 27B's architecture (FACTS section 11's example), the numbers an
# install's `arch` carries unless told otherwise.
HIDDEN_SIZE = 5120
VOCAB_SIZE = 248320
_ARCH_BASE = {
    "hiddenSize": HIDDEN_SIZE, "ffnIntermediate": 17408, "moeIntermediateSize": 0,
    "numHeads": 24, "numKVHeads": 4, "numFullKVHeads": 4, "headDim": 256, "fullHeadDim": 256,
    "vocabSize": VOCAB_SIZE, "slidingWindow": 0, "finalLogitSoftcap": 0.0,
    "ropeTheta": 10000000.0, "fullRopeTheta": 10000000.0, "partialRotaryFactor": 0.25,
    "topKExperts": 0, "tieWordEmbeddings": False, "attentionKEqV": False,
    "hiddenActivation": "silu",
}
_TRUNK_LAYER = "language_model.model.layers."


def arch_for(names, *, layers: int = 0, experts: int = 0, family: str | None = None,
             vision_depth: int = 0, hidden_size: int = HIDDEN_SIZE,
             vocab_size: int = VOCAB_SIZE) -> dict:
    """A manifest `arch` consistent with an index holding `names`: `numLayers`
    the larger of `layers` and the trunk layers named, each layer full
    attention (1) when it has `self_attn` tensors and linear (2) otherwise,
    `numExperts` the routed experts, the family `qwen36` for MoE and `qwen35`
    for dense unless told."""
    full: set[int] = set()
    highest = -1
    for name in names:
        if name.startswith(_TRUNK_LAYER):
            number, _, rest = name[len(_TRUNK_LAYER):].partition(".")
            if number.isascii() and number.isdigit() and len(number) < 6:
                layer = int(number)
                highest = max(highest, layer)
                if rest.startswith("self_attn."):
                    full.add(layer)
    count = max(layers, highest + 1)
    arch = {"family": family or ("qwen36" if experts else "qwen35"), **_ARCH_BASE,
            "hiddenSize": hidden_size, "vocabSize": vocab_size, "numLayers": count,
            "numExperts": experts, "topKExperts": 8 if experts else 0,
            "fullAttentionLayerMask": [1 if i in full else 2 for i in range(count)]}
    if vision_depth:
        arch["visionDepth"] = vision_depth
    return arch


def mtp_tensors(names: tuple[str, ...] = MTP_HEAD_TENSORS) -> list[TensorSpec]:
    """The MTP head (or the named part of it): the open checks only that its
    15 names are present."""
    return [TensorSpec(n, 4, 64, True) if n.endswith("proj.weight") or n == "mtp.fc.weight"
            else TensorSpec(n) for n in names]


def dflash_tensors(names: tuple[str, ...] = DFLASH_TENSORS, *, hidden_size: int = HIDDEN_SIZE,
                   vocab_size: int = VOCAB_SIZE) -> list[TensorSpec]:
    """The DFlash2 drafter (or the named part of it) in the published
    drafter's shapes for a trunk of `hidden_size` and `vocab_size` (FACTS
    section 12): 5 layers, 5 aux states, head_dim 128, q 4096, k 1024, ffn
    17408, codebooks of rank 256, convolutions of 4 * H/16 rows."""
    h, v = hidden_size, vocab_size
    rank, q, k, g, head_dim = 256, 4096, 1024, 17408, 128
    shapes = {
        "dflash.fc.weight": (h, 5 * h), "dflash.hidden_norm.weight": (h, 1),
        "dflash.norm.weight": (h, 1),
        "dflash.candidate_selector.hidden_projection.weight": (rank, h),
        "dflash.candidate_selector.predecessor_codebook": (v, rank),
        "dflash.candidate_selector.successor_codebook": (v, rank),
    }
    layer_shapes = {
        "attention_conv.base_kernel": (2, 2, h, 1),
        "attention_conv.kernel_projection.weight": (4 * (h // 16), h),
        "mlp_conv.base_kernel": (2, 2, h, 1),
        "mlp_conv.kernel_projection.weight": (4 * (h // 16), h),
        "input_layernorm.weight": (h, 1), "post_attention_layernorm.weight": (h, 1),
        "self_attn.q_proj.weight": (q, h), "self_attn.k_proj.weight": (k, h),
        "self_attn.v_proj.weight": (k, h), "self_attn.o_proj.weight": (h, q),
        "self_attn.q_norm.weight": (head_dim, 1), "self_attn.k_norm.weight": (head_dim, 1),
        "mlp.gate_proj.weight": (g, h), "mlp.up_proj.weight": (g, h),
        "mlp.down_proj.weight": (h, g),
    }
    out = []
    for name in names:
        leaf = name.split(".", 3)[3] if name.startswith("dflash.layers.") else None
        dims = layer_shapes.get(leaf) if leaf is not None else shapes.get(name)
        dims = tuple(dims or (32,)) + (1,) * (4 - len(dims or (32,)))
        # The engine reads head_dim off the norm's size in bytes (BF16: 2 each).
        size = 2 * head_dim if leaf in ("self_attn.q_norm.weight", "self_attn.k_norm.weight") \
            else 32
        out.append(TensorSpec(name, 1, size, shape=dims))
    return out


def encode_index(tensors: list[TensorSpec], *, alignment: int = INDEX_ALIGNMENT,
                 resident_size: int | None = None) -> tuple[bytes, int]:
    """The index region's bytes (header, entries, names, padding) and the size
    of the resident region the payloads need. Payloads are laid out in entry
    order right after the index, each followed by its scale and bias planes."""
    names = [t.name.encode("utf-8") for t in tensors]
    table_end = HEADER_SIZE + ENTRY_SIZE * len(tensors)
    strings_end = table_end + sum(map(len, names))
    index_size = -(-strings_end // alignment) * alignment if alignment else strings_end
    entries = bytearray()
    name_at = table_end
    data_at = index_size
    for t, name in zip(tensors, names):
        payload = (data_at, t.size)
        data_at += t.size
        scale = bias = (0, 0)
        if t.quantized:
            scale = (data_at, 8)
            data_at += 8
            bias = (data_at, 8)
            data_at += 8
        shape = t.shape
        entries += name_at.to_bytes(4, "little") + len(name).to_bytes(2, "little")
        entries += bytes((t.dtype, 0))
        for v in payload:
            entries += v.to_bytes(8, "little")
        for v in shape:
            entries += v.to_bytes(4, "little")
        for v in scale + bias:
            entries += v.to_bytes(8, "little")
        name_at += len(name)
    used = data_at - index_size
    if resident_size is None:
        resident_size = used
    if resident_size < used:
        raise ValueError(f"resident_size {resident_size} is smaller than the {used} bytes "
                         "the payloads need")
    header = (index_size.to_bytes(8, "little") + resident_size.to_bytes(8, "little")
              + len(tensors).to_bytes(8, "little"))
    region = header + bytes(entries) + b"".join(names)
    return region + bytes(index_size - len(region)), resident_size


def write_install(model_dir: str | os.PathLike, *, mtp: bool = False, dflash: bool = False,
                  experts: int = 0, layers: int = 4, probe_dtype: int = 4,
                  full_attention_every: int = 4, mtp_tensors: tuple[str, ...] | None = None,
                  dflash_tensors: tuple[str, ...] | None = None,
                  extra_entries: int = 0, resident_size: int | None = None,
                  expert_layers: int | None = None, manifest: bool = True,
                  family: str | None = None, vision_depth: int = 0) -> Path:
    """Write an install into `model_dir` (created if needed) and return its path.

    `mtp`/`dflash` add the full drafter; `mtp_tensors`/`dflash_tensors` write
    only the named subset (a partial drafter). `experts` > 0 makes it a MoE
    install whose manifest and layout route to that many experts per layer.
    `resident_size` larger than the payloads need makes a sparse file of that
    size (the tensor data region is never read by the policy). `manifest`
    False writes none (the open refuses such an install); `family` and
    `vision_depth` go into its `arch`.
    """
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    tensors = trunk_tensors(layers=layers, full_attention_every=full_attention_every,
                            moe=experts > 0, probe_dtype=probe_dtype)
    for k in range(extra_entries):
        tensors.append(TensorSpec(f"language_model.model.extra.{k}.weight"))
    if mtp or mtp_tensors:
        tensors += mtp_tensors_of(MTP_HEAD_TENSORS if mtp else mtp_tensors)
    if dflash or dflash_tensors:
        tensors += dflash_tensors_of(DFLASH_TENSORS if dflash else dflash_tensors)
    region, resident = encode_index(tensors, resident_size=resident_size)
    weights = model_dir / "model_weights.bin"
    with open(weights, "wb") as f:
        f.write(region)
        # The data region is a hole (zeros): the policy never reads it, and a
        # sparse 14 GB test file costs kilobytes of disk.
        f.truncate(len(region) + resident)
    layout_path = model_dir / "packed_experts" / "layout.json"
    layout_path.parent.mkdir(exist_ok=True)
    layout_path.write_bytes(expert_layout_json(experts, layers if expert_layers is None
                                               else expert_layers))
    if manifest:
        arch = arch_for([t.name for t in tensors], layers=layers, experts=experts,
                        family=family, vision_depth=vision_depth)
        _write_manifest(model_dir, [weights, layout_path], arch, experts=experts,
                        layers=layers if experts else 0)
    return model_dir


# write_install's parameters shadow the two builders' names.
mtp_tensors_of = mtp_tensors
dflash_tensors_of = dflash_tensors


def expert_layout_json(experts: int, layers: int) -> bytes:
    """`packed_experts/layout.json`: dense (0 experts) has no layers. Keys in
    the engine writer's order, scalars before the large `layers` array."""
    if experts <= 0:
        return json.dumps({"expertStride": 0, "numLayers": 0, "expertsPerLayer": 0,
                           "layers": []}, indent=2).encode()
    stride = 3 * 4096
    roles = ("gate_proj", "up_proj", "down_proj")
    parts = [f'{{"expertStride": {stride}, "numLayers": {layers}, '
             f'"expertsPerLayer": {experts}, "layers": [']
    for i in range(layers):
        experts_json = []
        for j in range(experts):
            tensors = ", ".join(
                f'"{role}": {{"offset": {j * stride + r * 4096}, "size": 4096, "dtype": 4, '
                f'"shape": [512, 2048, 1, 1]}}' for r, role in enumerate(roles))
            experts_json.append(f'{{"expert": {j}, "offset": {j * stride}, "size": {stride}, '
                                f'"tensors": {{{tensors}}}}}')
        parts.append(("" if i == 0 else ", ")
                     + f'{{"layer": {i}, "file": "layer_{i:02d}.bin", "experts": ['
                     + ", ".join(experts_json) + "]}")
    parts.append("]}")
    return "".join(parts).encode()


def manifest_json(arch: object, files: dict | None = None, *, experts: int = 0,
                  layers: int = 0, model_id: str = "local/test") -> str:
    """A whole `manifest.json` the engine's open accepts: its magic and
    version, flags, model id, `arch`, files, and the expert counts."""
    return json.dumps(
        {"magic": "GTURBO", "versionMajor": 1, "versionMinor": 0, "flags": {},
         "modelID": model_id, "arch": arch, "files": files or {},
         "expertsPerLayer": experts, "numLayers": layers,
         "expertStride": 3 * 4096 if experts else 0},
        indent=2) + "\n"


def _write_manifest(model_dir: Path, files: list[Path], arch: dict, *, experts: int = 0,
                    layers: int = 0) -> None:
    entries = {}
    for path in files:
        digest = hashlib.sha256()
        size = path.stat().st_size
        with open(path, "rb") as f:
            # A sparse multi-gigabyte file is hashed as what it is; cap the
            # work so a 14 GB test install does not take minutes to write.
            if size > (256 << 20):
                entries[str(path.relative_to(model_dir))] = {"size": size, "sha256": None}
                continue
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        entries[str(path.relative_to(model_dir))] = {"size": size,
                                                     "sha256": digest.hexdigest()}
    (model_dir / "manifest.json").write_text(manifest_json(arch, entries, experts=experts,
                                                          layers=layers))


def rewrite_manifest(model_dir: str | os.PathLike, *, experts: int | None = None) -> None:
    """Write `manifest.json` anew for the install's files as they are now
    (their sizes and digests), keeping its `arch` and expert counts, or
    routing to `experts` (0: dense) when given: after a caller replaced the
    index or the layout (the bench's real-size MoE layout and its dense twin)."""
    model_dir = Path(model_dir)
    old = json.loads((model_dir / "manifest.json").read_text())
    arch, layers = old["arch"], old["numLayers"]
    if experts is None:
        experts = old["expertsPerLayer"]
    else:
        arch = {**arch, "numExperts": experts}
        layers = layers if experts else 0
    files = [model_dir / "model_weights.bin", model_dir / "packed_experts" / "layout.json"]
    _write_manifest(model_dir, files, arch, experts=experts, layers=layers)


# The four install shapes the policy tells apart, at the real dense 27B's
# size (64 layers: 851 trunk entries, 866 with the MTP head).
SAMPLE_SHAPES = {
    "none": {},
    "mtp": {"mtp": True},
    "dflash": {"dflash": True},
    "both": {"mtp": True, "dflash": True},
}


def write_samples(root: str | os.PathLike) -> list[Path]:
    """Write the four sample installs under `root` (what ships in the package)."""
    return [write_install(Path(root) / name, layers=64, **shape)
            for name, shape in SAMPLE_SHAPES.items()]


# ---------------------------------------------------------------------------
# A store: the engine's model store under a root ($TURBOSPARK_HOME, or
# $HOME/.turbospark), with installed.json recording installs by alias.

def store_install_dir(root: str | os.PathLike, alias: str) -> Path:
    """Where the engine's default layout puts a text install named `alias`:
    `<root>/models/text/<alias>.gturbo`."""
    return Path(root) / "models" / "text" / f"{alias}.gturbo"


def record_install(root: str | os.PathLike, alias: str, path: str | os.PathLike, *,
                   modality: str | None = "text", kind: str | None = None) -> Path:
    """Record the install at `path` under `alias` in `<root>/installed.json`,
    in the engine's row shape (snake_case keys): replaces an earlier row of
    the same alias and modality, keeps every other row as it was. `modality`
    None leaves the key out (the engine reads that as text). Written to a
    temporary file and renamed into place, so a reader never sees half a file.
    Raises ValueError for an existing installed.json that is not a JSON
    array of objects (it is not ours to overwrite), OSError when it cannot
    be written. Returns the path of installed.json."""
    import datetime
    root = Path(root)
    target = root / "installed.json"
    path = Path(path).absolute()
    if not alias or "/" in alias or "\x00" in alias:
        raise ValueError(f"alias {alias!r}: accepts a non-empty name without '/' or NUL")
    rows: list = []
    if target.exists():
        try:
            rows = json.loads(target.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"{target} is not valid JSON ({exc}); accepts a JSON array of "
                             "install rows (not overwritten)") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"{target} is not a JSON array of objects; accepts a JSON array "
                             "of install rows (not overwritten)")
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    row = {"alias": alias, "repo": f"local/{alias}", "revision": "local", "path": str(path),
           "family": "qwen", "install_bytes": size,
           "installed_on": datetime.datetime.now(datetime.timezone.utc)
           .strftime("%Y-%m-%dT%H:%M:%SZ"),
           "status": "installed"}
    if kind is not None:
        row["kind"] = kind
    if modality is not None:
        row["modality"] = modality
    rows = [r for r in rows
            if not (r.get("alias") == alias and r.get("modality") == modality
                    and r.get("kind") == kind)]
    rows.append(row)
    root.mkdir(parents=True, exist_ok=True)
    temporary = root / f".installed.json.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, target)
    return target
