"""Reliability, part 2: index fuzzing through the C ABI.

Thousands of mutations of two small valid resident indexes -- every single
bit flip of the index region, every truncation, boundary values written into
every header and entry field, u64/u32 overwrites at every byte offset of the
header and entry table, and seeded random multi-byte damage -- each written
as its own install and asked, by ONE C host process (abi_host.c), for
tsffi_install_info_json, tsffi_resolve_drafter and tsffi_speculation_plan.

Each install carries a valid manifest (layer 3 full attention), so the open
gets as far as the index. Install info and the drafter choice must answer
TSFFI_OK (an unreadable index is "unknown" there); the plan answers TSFFI_OK
or the open's refusal (TSFFI_ERR_REFUSED), never another status. The host
must not crash (it runs as a subprocess, so a crash is a failed run naming
the last mutation answered) or hang (timeout). And no answer may lie: a plain
reference reader (tests/installs.reference_read, the engine's checks written
out naively) decides whether each mutated file is readable; when it is, the
flags are exactly whether mtp.fc.weight and dflash.fc.weight are among its
names, and a plan that fails is the open's failure on what it read (a dtype
gate: install info's "openError"; a partial MTP head); when it is not, the
flags are null, tsffi_install_info_json says "indexReadable": false with the
reason ("indexError") and the same failed check ("indexCheck"), and the plan
fails with that reason as the open's message.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter

import pytest

from installs import (ENTRY, ENTRY_FIELDS, HEADER, HEADER_FIELDS, base_file, reference_read,
                      write_manifest)
from test_resident_index import reference_facts
from test_reliability_inputs import CODES, drivers, run_host, script_line, write_script  # noqa: F401
from turbospark_ffi.install_writer import TensorSpec, arch_for

# Every mutated install's architecture: 4 layers, layer 3 full attention.
ARCH = arch_for(["language_model.model.layers.3.self_attn.q_proj.weight"], layers=4)

U64 = (1 << 64) - 1
FUZZ_TIMEOUT = 300


def _bases() -> dict[str, bytes]:
    return {
        # a quantised tensor (payload + scale + bias planes), a raw one, the MTP presence tensor
        "small": bytes(base_file()),
        # both drafters' presence tensors and a full-attention probe
        "drafters": bytes(base_file([
            TensorSpec("language_model.model.layers.3.self_attn.q_proj.weight", 4, 64, True),
            TensorSpec("dflash.fc.weight", 1, 32),
            TensorSpec("mtp.fc.weight", 4, 64, True)])),
    }


def _put(buf: bytearray, at: int, width: int, value: int) -> bytes | None:
    if at + width > len(buf):
        return None
    out = bytearray(buf)
    out[at:at + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    return bytes(out)


def mutations(base: bytes, seed: int) -> list[tuple[str, bytes]]:
    """(label, bytes) of every mutation of `base`, deterministic."""
    buf = bytearray(base)
    index_size = int.from_bytes(base[0:8], "little")
    resident = int.from_bytes(base[8:16], "little")
    count = int.from_bytes(base[16:24], "little")
    table_end = HEADER + ENTRY * count
    size = len(base)
    out: list[tuple[str, bytes | None]] = []
    # 1. every bit of the index region (header, entries, names)
    for at in range(index_size):
        for bit in range(8):
            m = bytearray(buf)
            m[at] ^= 1 << bit
            out.append((f"flip@{at}.{bit}", bytes(m)))
    # 2. every truncation
    for n in range(size):
        out.append((f"truncate@{n}", base[:n]))
    # 3. boundary values in every header and entry field
    u64_values = [0, 1, HEADER - 1, HEADER, HEADER + 1, table_end, index_size - 1, index_size,
                  index_size + 1, resident, size - 1, size, size + 1, 1 << 31, (1 << 32) - 1,
                  1 << 32, (1 << 63) - 1, 1 << 63, U64 - HEADER, U64 // ENTRY, U64 // ENTRY + 1,
                  U64 - 1, U64, U64 - index_size + 1]
    small_values = [0, 1, HEADER - 1, HEADER, table_end, index_size - 1, index_size, size,
                    0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, (1 << 31), (1 << 32) - 1]
    for field, at in HEADER_FIELDS.items():
        for v in u64_values:
            out.append((f"header.{field}={v}", _put(buf, at, 8, v)))
    for k in range(count):
        for field, (off, width) in ENTRY_FIELDS.items():
            values = u64_values if width == 8 else small_values
            for v in values:
                out.append((f"entry{k}.{field}={v}", _put(buf, HEADER + ENTRY * k + off, width, v)))
    # 4. u64 and u32 overwrites at every byte offset of the header and entry table
    for at in range(table_end):
        for v in (0, U64, 1 << 63, size):
            out.append((f"u64@{at}={v}", _put(buf, at, 8, v)))
        for v in (0, (1 << 32) - 1, size):
            out.append((f"u32@{at}={v}", _put(buf, at, 4, v)))
    # 5. seeded random damage: several bytes at once, sometimes truncated too
    rng = random.Random(seed)
    for n in range(600):
        m = bytearray(buf)
        for _ in range(rng.randint(2, 8)):
            at = rng.randrange(index_size if rng.random() < 0.8 else len(m))
            m[at] = rng.randrange(256)
        if rng.random() < 0.2:
            m = m[:rng.randrange(len(m))]
        out.append((f"random{n}", bytes(m)))
    # deduplicate (many writes store the value already there)
    seen: set[bytes] = set()
    unique = []
    for label, data in out:
        if data is not None and data not in seen and data != base:
            seen.add(data)
            unique.append((label, data))
    return unique


@pytest.fixture(scope="module")
def fuzz_run(tmp_path_factory, drivers):
    root = tmp_path_factory.mktemp("fuzz")
    cases: list[tuple[str, str, bytes]] = []  # (mutation id, label, bytes)
    for b, (name, base) in enumerate(sorted(_bases().items())):
        assert reference_read(base)[0] == "ok"
        for label, data in mutations(base, seed=b):
            cases.append((f"{name}{len(cases):05d}", f"{name}:{label}", data))
    lines = []
    for mid, _, data in cases:
        d = root / mid
        d.mkdir()
        (d / "model_weights.bin").write_bytes(data)
        write_manifest(d, ARCH)
        raw = str(d).encode()
        lines.append(script_line(f"{mid}/info", "install_info", (raw,), root))
        lines.append(script_line(f"{mid}/drafter", "resolve_drafter", (raw, None), root))
        lines.append(script_line(f"{mid}/plan", "speculation_plan", (raw, None), root))
    script = write_script(root / "script.txt", lines)
    run = run_host([drivers.get("abi_host"), "-n", script], timeout=FUZZ_TIMEOUT,
                   what=f"abi_host over {len(cases)} mutated indexes")
    for mid, _, _ in cases:  # ten thousand directories: keep the tmp dir small
        shutil.rmtree(root / mid)
    return cases, run


def test_thousands_of_mutations_were_tried(fuzz_run):
    cases, run = fuzz_run
    assert len(cases) >= 5000, len(cases)
    assert len(run.records) == 3 * len(cases)


def test_every_mutation_is_readable_or_unknown_with_the_reason(fuzz_run):
    cases, run = fuzz_run
    problems: list[str] = []
    outcomes: Counter = Counter()
    for mid, label, data in cases:
        recs = {fn: run.records[f"{mid}/{fn}"] for fn in ("info", "drafter", "plan")}
        bad = [f"{fn} status {r.status}: {r.err[:200]}" for fn, r in recs.items()
               if fn != "plan" and (r.status != CODES["TSFFI_OK"] or r.err != ""
                                    or not isinstance(r.out, str))]
        planned = recs["plan"]
        if planned.status == CODES["TSFFI_OK"]:
            if planned.err != "" or not isinstance(planned.out, str):
                bad.append(f"plan OK with {planned.err[:200]!r}")
        elif planned.status != CODES["TSFFI_ERR_REFUSED"] or planned.out is not None:
            bad.append(f"plan status {planned.status}: {planned.err[:200]}")
        if bad:
            problems.append(f"{label}: {bad}")
            continue
        info, drafter = (json.loads(recs[fn].out) for fn in ("info", "drafter"))
        plan = None if planned.out is None else json.loads(planned.out)
        verdict, detail = reference_read(data)
        if verdict == "ok":
            has_mtp, has_dflash, _first_layer = reference_facts(detail)
            expected = (has_mtp, has_dflash)
            # The probe is the manifest's first full-attention layer.
            layer = info["probe"]["layer"] if info["indexReadable"] and info["probe"] else None
            got = (info["installHasMtpHead"], info["installHasDflash"])
            if not info["indexReadable"] or got != expected or info["entryCount"] != len(detail) \
                    or layer != 3:
                problems.append(f"{label}: reference reads it ({len(detail)} entries, flags "
                                f"{expected}) but install_info says readable="
                                f"{info['indexReadable']} flags={got} layer={layer} "
                                f"error={info['indexError']!r}")
                continue
            if plan is None and planned.err != info["openError"] \
                    and not planned.err.startswith("missing resident tensor: mtp."):
                problems.append(f"{label}: readable, but the plan fails with {planned.err!r} "
                                f"(install info's openError {info['openError']!r})")
                continue
            outcomes["readable"] += 1
        else:
            expected = (None, None)
            if (info["indexReadable"] is not False or info["indexCheck"] != detail
                    or not isinstance(info["indexError"], str) or not info["indexError"]
                    or (info["installHasMtpHead"], info["installHasDflash"]) != expected):
                problems.append(f"{label}: reference fails check {detail!r}, install_info says "
                                f"readable={info['indexReadable']} check={info['indexCheck']!r} "
                                f"error={info['indexError']!r} flags="
                                f"{(info['installHasMtpHead'], info['installHasDflash'])}")
                continue
            outcomes[detail] += 1
            # A NUL in a quoted name is "\0" in the last error (a C string).
            if plan is not None or planned.err != info["indexError"].replace("\x00", "\\0"):
                problems.append(f"{label}: the plan is not the open's refusal with the reader's "
                                f"text {info['indexError']!r}: {planned.err!r}")
            continue
        flags = (drafter["installHasMtpHead"], drafter["installHasDflash"])
        if plan is None:
            if flags != expected:
                problems.append(f"{label}: install_info flags {expected}, resolve_drafter {flags}")
            continue
        plan_flags = (plan["drafter"]["installHasMtpHead"], plan["drafter"]["installHasDflash"])
        # The drafter choice names the directory it read; so does the plan, once.
        if flags != expected or plan_flags != expected or \
                {**plan["drafter"], "modelDir": plan["modelDir"]} != drafter:
            problems.append(f"{label}: install_info flags {expected}, resolve_drafter {flags}, "
                            f"plan {plan_flags}")
        spec = plan["speculation"]
        if (spec["block"] is None) != (spec["drafter"] is None):
            problems.append(f"{label}: speculation shape {spec}")
    assert not problems, f"{len(problems)} of {len(cases)} mutations answered wrongly; first: " \
                         + "\n".join(problems[:10])
    # the corpus reaches both outcomes and most of the reader's checks
    assert outcomes["readable"] >= 200, outcomes
    failed_checks = set(outcomes) - {"readable"}
    assert len(failed_checks) >= 10, outcomes
