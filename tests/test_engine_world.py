"""Every row of the engine's measured world, through the C ABI.

tests/data/engine_world_sample.jsonl is a verbatim copy of
../shared/reference/engine_world_sample.jsonl (sha256 e888e003383bab26...;
its format: ../shared/reference/ENGINE_WORLD_SAMPLE.md): 283 rows measured
from an oracle transcribed from the newest engine's code -- an install
written byte for byte, the options a host passes, and what `ts_session_open`
answered (and, on turn rows, whether the turn speculated). A fresh clone has
no ../shared beside it, hence the copy.

Each row's install is written here by `write_spec` (this file's own writer
of the row's spec, not install_writer's), then `tsffi_speculation_plan` is
called in process (ctypes) and its answer held to the engine's: status and
message byte for byte where the open fails; drafter, block and reason where
it opens; `turn.speculates` on turn rows ("speculates unless Low Power Mode"
is asked both ways, through `tsffi.lowPowerMode`).
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parent / "data" / "engine_world_sample.jsonl"
ROWS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
ALIGNMENT = 16_384


def encode_tensors(tensors: list) -> bytes:
    """model_weights.bin as ENGINE_WORLD_SAMPLE.md says: entries in order,
    names packed after the table, the region zero-padded to 16,384, then
    each tensor's payload in entry order, no planes."""
    names = [name.encode("utf-8") for name, _dtype, _shape, _size in tensors]
    table_end = 24 + 72 * len(tensors)
    strings_end = table_end + sum(map(len, names))
    index_size = -(-strings_end // ALIGNMENT) * ALIGNMENT
    entries = bytearray()
    name_at, data_at = table_end, index_size
    for (name, dtype, shape, size), raw in zip(tensors, names):
        entries += name_at.to_bytes(4, "little") + len(raw).to_bytes(2, "little")
        entries += bytes((dtype, 0)) + data_at.to_bytes(8, "little") + size.to_bytes(8, "little")
        entries += b"".join(d.to_bytes(4, "little") for d in shape)
        entries += bytes(32)
        name_at += len(raw)
        data_at += size
    resident = data_at - index_size
    region = (index_size.to_bytes(8, "little") + resident.to_bytes(8, "little")
              + len(tensors).to_bytes(8, "little") + bytes(entries) + b"".join(names))
    return region + bytes(index_size - len(region)) + bytes(resident)


def write_spec(path: Path, spec: dict) -> None:
    kind = spec["kind"]
    if kind == "missing":
        return
    if kind == "file":
        path.write_bytes(b"not a directory\n")
        return
    path.mkdir(parents=True)
    manifest = spec.get("manifest") or {"mode": "absent"}
    document = {"magic": "GTURBO", "versionMajor": 1, "versionMinor": 0, "files": {}}
    if manifest["mode"] == "arch":
        document["arch"] = manifest["arch"]
        (path / "manifest.json").write_text(json.dumps(document))
    elif manifest["mode"] == "noarch":
        (path / "manifest.json").write_text(json.dumps(document))
    elif manifest["mode"] == "text":
        (path / "manifest.json").write_bytes(manifest["text"].encode("utf-8"))
    elif manifest["mode"] == "dir":
        (path / "manifest.json").mkdir()
    layout = spec.get("layout")
    if layout is not None:
        (path / "packed_experts").mkdir()
        (path / "packed_experts" / "layout.json").write_text(json.dumps(
            {"expertStride": 0, "numLayers": 0, "expertsPerLayer": layout["expertsPerLayer"],
             "layers": []}))
    index = spec.get("index") or {"mode": "absent"}
    if index["mode"] == "tensors":
        (path / "model_weights.bin").write_bytes(encode_tensors(index["tensors"]))
    elif index["mode"] == "hex":
        (path / "model_weights.bin").write_bytes(bytes.fromhex(index["hex"]))


def plan(lib, model_dir: str, options: str) -> tuple[int, dict | None, str]:
    out = ctypes.c_void_p()
    status = lib.tsffi_speculation_plan(model_dir.encode(), options.encode(), ctypes.byref(out))
    if status == 0:
        text = ctypes.string_at(out).decode("utf-8")
        lib.tsffi_string_free(out)
        return status, json.loads(text), ""
    n = lib.tsffi_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.tsffi_last_error(buf, n + 1)
    return status, None, buf.value.decode("utf-8")


def with_low_power(options: str, low: bool) -> str:
    document = json.loads(options)
    document.setdefault("tsffi", {})["lowPowerMode"] = low
    return json.dumps(document)


def test_the_sample_is_the_measured_one():
    import hashlib
    assert hashlib.sha256(SAMPLE.read_bytes()).hexdigest().startswith("e888e003383bab26")
    assert len(ROWS) == 283
    # It discriminates: opens and failures, turns both ways.
    assert {row["expected"]["status"] for row in ROWS} == {0, 2}
    turns = {row["turn"]["expectedTurn"] for row in ROWS if "turn" in row}
    assert turns == {"speculates", "sequential", "speculates unless Low Power Mode"}


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_row(row, loaded, tmp_path):
    lib = loaded.lib
    model_dir = tmp_path / "install"
    write_spec(model_dir, row["install"])
    expected = row["expected"]
    status, answer, message = plan(lib, str(model_dir), row["options"])
    if expected["status"] != 0:
        assert (status, message) == (expected["status"],
                                     expected["message"].replace("{dir}", str(model_dir)))
        return
    assert (status, message) == (0, "")
    assert answer["speculation"] == {"block": expected["block"], "drafter": expected["drafter"],
                                     "reason": expected["reason"]}
    if "turn" in row:
        turn = row["turn"]["expectedTurn"]
        assert answer["turn"]["speculates"] is (turn != "sequential")
        if turn == "speculates unless Low Power Mode":
            _, low, _ = plan(lib, str(model_dir), with_low_power(row["options"], True))
            assert low["turn"]["speculates"] is False
            assert "Low Power Mode" in low["turn"]["reason"]
