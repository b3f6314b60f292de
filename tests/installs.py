"""Test helpers: installs and resident indexes written byte for byte in the
engine's layout (docs/ENGINE.md section 1), plus a deliberately naive reference reader
used as an oracle by the property tests.

Everything here writes REAL files; nothing mocks the policy.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from turbospark_ffi.blockers import probe_tensor_name
from turbospark_ffi.errors import ResidentIndexError
from turbospark_ffi.errors import OpenRefused
from turbospark_ffi.manifest_arch import load_manifest_arch
from turbospark_ffi.install_writer import (DFLASH_TENSORS, MTP_HEAD_TENSORS, TensorSpec,
                                           arch_for, dflash_tensors, encode_index,
                                           expert_layout_json, manifest_json, mtp_tensors,
                                           trunk_tensors)
from turbospark_ffi.resident_index import (install_has_dflash, install_has_mtp_head,
                                           load_resident_index)

HEADER = 24
ENTRY = 72
U64_MAX = (1 << 64) - 1

# Offsets of each field inside one 72-byte entry, and its width in bytes.
ENTRY_FIELDS = {
    "name_offset": (0, 4), "name_length": (4, 2), "dtype": (6, 1), "reserved": (7, 1),
    "file_offset": (8, 8), "size_bytes": (16, 8),
    "shape0": (24, 4), "shape1": (28, 4), "shape2": (32, 4), "shape3": (36, 4),
    "scale_offset": (40, 8), "scale_size": (48, 8),
    "bias_offset": (56, 8), "bias_size": (64, 8),
}
HEADER_FIELDS = {"index_size": 0, "resident_size": 8, "entry_count": 16}

# Every `check` tag the reader may put on a ResidentIndexError.
CHECK_TAGS = {
    "short_header", "index_size_below_header", "entry_count_overflow",
    "entry_table_overflow", "entry_table_past_index", "resident_end_overflow",
    "resident_end_past_file", "short_read", "name_out_of_range", "payload_out_of_range",
    "scale_plane_out_of_range", "bias_plane_out_of_range", "duplicate_name",
    "open", "stat", "read", "not_regular_file",
}


# --------------------------------------------------------------------------
# Tensor lists

def mtp_specs(names=MTP_HEAD_TENSORS) -> list[TensorSpec]:
    return mtp_tensors(names)


def dflash_specs(names=DFLASH_TENSORS) -> list[TensorSpec]:
    """The drafter in the published shapes (the open builds it)."""
    return dflash_tensors(names)


def write_weights(path: str | os.PathLike, tensors: list[TensorSpec], *,
                  alignment: int | None = None, resident_size: int | None = None) -> Path:
    """A `model_weights.bin` holding exactly `tensors` (data region zero-filled)."""
    kw = {} if alignment is None else {"alignment": alignment}
    region, resident = encode_index(tensors, resident_size=resident_size, **kw)
    path = Path(path)
    with open(path, "wb") as f:
        f.write(region)
        f.truncate(len(region) + resident)
    return path


def write_layout(model_dir: str | os.PathLike, experts: int, layers: int = 4) -> Path:
    path = Path(model_dir) / "packed_experts" / "layout.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(expert_layout_json(experts, layers))
    return path


def write_custom_install(model_dir: str | os.PathLike, tensors: list[TensorSpec], *,
                         experts: int = 0, layers: int = 4, manifest: bool = True,
                         **arch_fields) -> Path:
    """An install whose resident index holds exactly `tensors`, with a
    manifest whose `arch` matches them (install_writer.arch_for: full
    attention where the index has `self_attn` tensors; `arch_fields` go to
    it: family, vision_depth, ...)."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    write_weights(model_dir / "model_weights.bin", tensors)
    write_layout(model_dir, experts, layers)
    if manifest:
        write_manifest(model_dir, arch_for([t.name for t in tensors], layers=layers,
                                           experts=experts, **arch_fields))
    return model_dir


def write_manifest(model_dir: str | os.PathLike, arch: object) -> Path:
    """`manifest.json` with this `arch` (any JSON value)."""
    path = Path(model_dir) / "manifest.json"
    path.write_text(manifest_json(arch))
    return path


def shape_of(model_dir: str | os.PathLike) -> dict:
    """What an install's files say, read with the package's own readers: what
    each case asserts BEFORE it believes its own assertion."""
    model_dir = Path(model_dir)
    out: dict = {}
    try:
        arch = load_manifest_arch(str(model_dir))
    except OpenRefused:
        arch = None
    try:
        index = load_resident_index(model_dir / "model_weights.bin")
    except ResidentIndexError as exc:
        out.update(readable=False, check=exc.check, has_mtp=None, has_dflash=None,
                   first_layer=None, probe_dtype=None, entries=None)
    else:
        layer = None if arch is None else arch.first_full_attention_layer()
        out.update(readable=True, check=None, has_mtp=install_has_mtp_head(index),
                   has_dflash=install_has_dflash(index), first_layer=layer,
                   probe_dtype=None if layer is None else index.dtype_of(probe_tensor_name(layer)),
                   entries=len(index))
    out["experts"] = None if arch is None else arch.num_experts
    out["family"] = None if arch is None else arch.family
    out["vision"] = None if arch is None else arch.vision_depth
    return out


# --------------------------------------------------------------------------
# Raw index bytes

def base_tensors() -> list[TensorSpec]:
    """A small valid index: a quantised tensor (payload + scale + bias planes),
    a raw one, and the MTP presence tensor."""
    return [TensorSpec("a.weight", 4, 64, True), TensorSpec("b.weight", 1, 32),
            TensorSpec("mtp.fc.weight", 4, 64, True)]


def base_file(tensors: list[TensorSpec] | None = None, *, alignment: int = 0,
              trailing: bytes = b"") -> bytearray:
    """The full bytes of a valid `model_weights.bin` (index + data region)."""
    region, resident = encode_index(base_tensors() if tensors is None else tensors,
                                    alignment=alignment)
    return bytearray(region + bytes(resident) + trailing)


def get_header(buf: bytes, field: str) -> int:
    at = HEADER_FIELDS[field]
    return int.from_bytes(buf[at:at + 8], "little")


def set_header(buf: bytearray, field: str, value: int) -> bytearray:
    at = HEADER_FIELDS[field]
    buf[at:at + 8] = value.to_bytes(8, "little")
    return buf


def get_entry(buf: bytes, k: int, field: str) -> int:
    off, width = ENTRY_FIELDS[field]
    at = HEADER + k * ENTRY + off
    return int.from_bytes(buf[at:at + width], "little")


def set_entry(buf: bytearray, k: int, field: str, value: int) -> bytearray:
    off, width = ENTRY_FIELDS[field]
    at = HEADER + k * ENTRY + off
    buf[at:at + width] = value.to_bytes(width, "little")
    return buf


def raw_index(names: list[bytes], *, trailing_data: int = 256, planes=None) -> bytearray:
    """An index whose names are arbitrary BYTES (the writer only takes str):
    each entry has a 16-byte payload, no planes; `planes` optionally maps an
    entry number to ((scale_off_rel, scale_size), (bias_off_rel, bias_size))."""
    count = len(names)
    table_end = HEADER + ENTRY * count
    index_size = table_end + sum(map(len, names))
    entries = bytearray()
    name_at = table_end
    for k, name in enumerate(names):
        e = bytearray(ENTRY)
        e[0:4] = name_at.to_bytes(4, "little")
        e[4:6] = len(name).to_bytes(2, "little")
        e[6] = 1
        e[8:16] = (index_size + 16 * k).to_bytes(8, "little")
        e[16:24] = (16).to_bytes(8, "little")
        if planes and k in planes:
            (so, ss), (bo, bs) = planes[k]
            e[40:48] = (index_size + so).to_bytes(8, "little")
            e[48:56] = ss.to_bytes(8, "little")
            e[56:64] = (index_size + bo).to_bytes(8, "little")
            e[64:72] = bs.to_bytes(8, "little")
        entries += e
        name_at += len(name)
    resident = max(16 * count, 16) + trailing_data
    header = struct.pack("<QQQ", index_size, resident, count)
    return bytearray(header + entries + b"".join(names) + bytes(resident))


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.write_bytes(bytes(data))
    return path


# --------------------------------------------------------------------------
# The oracle: docs/ENGINE.md section 1's checks, written out as plainly as possible.

def reference_read(data: bytes):
    """('ok', names) or ('error', check_tag), from the bytes of a regular file."""
    size = len(data)
    if size < HEADER:
        return "error", "short_header"
    index_size, resident_size, count = struct.unpack_from("<QQQ", data, 0)
    if index_size < HEADER:
        return "error", "index_size_below_header"
    if count * ENTRY > U64_MAX:
        return "error", "entry_count_overflow"
    if HEADER + count * ENTRY > U64_MAX:
        return "error", "entry_table_overflow"
    if HEADER + count * ENTRY > index_size:
        return "error", "entry_table_past_index"
    if index_size + resident_size > U64_MAX:
        return "error", "resident_end_overflow"
    if index_size + resident_size > size:
        return "error", "resident_end_past_file"
    resident_end = index_size + resident_size
    seen = set()
    names = []
    for k in range(count):
        at = HEADER + k * ENTRY
        name_offset, name_length = struct.unpack_from("<IH", data, at)
        if name_offset < HEADER or name_offset + name_length > index_size:
            return "error", "name_out_of_range"
        name = data[name_offset:name_offset + name_length].decode("utf-8", "replace")
        for tag, (off_at, size_at) in (("payload", (8, 16)), ("scale_plane", (40, 48)),
                                       ("bias_plane", (56, 64))):
            offset = int.from_bytes(data[at + off_at:at + off_at + 8], "little")
            plane = int.from_bytes(data[at + size_at:at + size_at + 8], "little")
            if plane and (offset < index_size or offset + plane > resident_end):
                return "error", tag + "_out_of_range"
        if name in seen:
            return "error", "duplicate_name"
        seen.add(name)
        names.append(name)
    return "ok", names


class CountingPread:
    """A wrapper for `os.pread` that counts what the reader asked for and got."""

    def __init__(self, real):
        self.real = real
        self.calls: list[tuple[int, int]] = []  # (requested length, offset)
        self.bytes_read = 0

    def __call__(self, fd, length, offset):
        self.calls.append((length, offset))
        data = self.real(fd, length, offset)
        self.bytes_read += len(data)
        return data

    @property
    def bytes_requested(self) -> int:
        return sum(length for length, _ in self.calls)
