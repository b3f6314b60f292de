#!/usr/bin/env python3
"""The benchmark: libtsffi beside the native engine.

    python3 bench/run.py            # the full run (about two minutes on 2 cores)
    python3 bench/run.py --quick    # small repetition counts, for development
    python3 bench/run.py --no-png   # skip the chart explicitly (matplotlib absent)
    python3 bench/run.py --rows 1,5 # only some rows (saved as results.partial.*)
    python3 bench/run.py --replot   # redraw results.png from results.json
    python3 bench/profile_plan.py   # where the time goes, stage by stage

It builds what it needs (the library if missing, through ffi_build.build();
native_plan from bench/native_plan.c, the project's baseline copied from
shared/bench; the C hosts bench/*.c, -O2 against include/tsffi.h; the
trivial cffi-embedded library of bench/trivial_build.py), writes installs in
the engine's layout into bench/out/installs/ with
turbospark_ffi.install_writer, and prints the table of the issue's seven rows,
saved as bench/out/results.json and bench/out/results.png.

The machine is shared and noisy: every figure is the median of repeated runs
with min and max, and the figures that count are RATIOS of two things
measured in the same repetition, back to back (their order alternated).
Targets are the issue's; they are benchmark figures, not tests: a miss is
printed, and the exit status stays 0 unless something failed to run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
BIN = OUT / "bin"
INSTALLS = OUT / "installs"
HEADER_DIR = ROOT / "include"
PACKAGE = ROOT / "turbospark_ffi"
OPTIONS = '{"speculativeDrafter":"auto","speculation":"auto"}'

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from turbospark_ffi.native import LINK_NAME, library_name  # noqa: E402

LIBRARY = PACKAGE / library_name()

# Repetition counts. "reps": paired repetitions (native run + host run, in
# alternating order); "procs": fresh host processes for first plans, each
# planning "fresh" distinct never-seen copies.
FULL = {
    "warm_calls": 20000, "native_budget_ms": 150,
    "g1": {"reps": 21, "procs": 7, "fresh": 30},
    "g3": {"reps": 9, "procs": 3, "fresh": {100: 20, 1000: 20, 10000: 10, 100000: 5}},
    "g4": {"reps": 15, "procs": 5, "fresh": 20},
    "g5": {"reps": 41},
    "g6": {"reps": 7, "millis": 400, "threads": [1, 2, 4, 8]},
    "g7": {"reps": 11, "procs": 4, "fresh": 6, "fresh_layers_first": 2},
}
QUICK = {
    "warm_calls": 3000, "native_budget_ms": 40,
    "g1": {"reps": 3, "procs": 2, "fresh": 8},
    "g3": {"reps": 2, "procs": 1, "fresh": {100: 5, 1000: 5, 10000: 3, 100000: 2}},
    "g4": {"reps": 3, "procs": 2, "fresh": 5},
    "g5": {"reps": 5},
    "g6": {"reps": 2, "millis": 150, "threads": [1, 2, 4, 8]},
    "g7": {"reps": 3, "procs": 1, "fresh": 3, "fresh_layers_first": 1},
}

SIZES = [100, 1000, 10000, 100000]
SPARSE_SIZE = 14 * 2**30


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# statistics


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "n": len(samples)}


def ratios(a: list[float], b: list[float]) -> list[float]:
    """Pairwise a[i] / b[i]: both measured in the same repetition."""
    return [x / y for x, y in zip(a, b)]


# ---------------------------------------------------------------------------
# building


def run_checked(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise SystemExit(f"bench: command failed ({result.returncode}): {' '.join(map(str, cmd))}\n"
                         f"{result.stdout}{result.stderr}")
    return result


def build_all(notes: list[str]) -> dict:
    BIN.mkdir(parents=True, exist_ok=True)
    import ffi_build
    if not LIBRARY.exists():
        log(f"{LIBRARY.name} missing: building it with ffi_build.build()")
        ffi_build.build(tmpdir=OUT / "build" / "cffi")
    else:
        built = LIBRARY.stat().st_mtime
        stale = [str(p.relative_to(ROOT)) for p in ffi_build.LIBRARY_INPUTS
                 if p.stat().st_mtime > built]
        if stale:
            note = (f"{LIBRARY.name} is older than {', '.join(stale)}; measured as built "
                    "(run `python3 ffi_build.py` to measure the sources)")
            notes.append(note)
            log("NOTE: " + note)
    cc = os.environ.get("CC", "cc")
    flags = ["-O2", "-Wall", "-Wextra"]
    native = BIN / "native_plan"
    run_checked([cc, "-O2", "-o", str(native), str(BENCH / "native_plan.c")])
    link = [f"-L{PACKAGE}", f"-l{LINK_NAME}", f"-Wl,-rpath,{PACKAGE}", "-lpthread"]
    run_checked([cc, *flags, f"-I{HEADER_DIR}", "-o", str(BIN / "tsffi_host"),
                 str(BENCH / "tsffi_host.c"), *link])
    run_checked([cc, *flags, f"-I{HEADER_DIR}", "-o", str(BIN / "cold_host"),
                 str(BENCH / "cold_host.c"), *link])
    import trivial_build
    trivial = trivial_build.build(OUT / "trivial", OUT / "build" / "trivial")
    run_checked([cc, *flags, f"-I{HEADER_DIR}", "-o", str(BIN / "cold_host_trivial"),
                 str(BENCH / "cold_host.c"), f"-L{trivial.parent}", "-ltrivial",
                 f"-Wl,-rpath,{trivial.parent}"])
    isolated = trivial_build.build_isolated(OUT / "trivial_isolated",
                                            OUT / "build" / "trivial_isolated")
    run_checked([cc, *flags, f"-I{HEADER_DIR}", "-o", str(BIN / "cold_host_trivial_isolated"),
                 str(BENCH / "cold_host.c"), f"-L{isolated.parent}", "-ltrivial_isolated",
                 f"-Wl,-rpath,{isolated.parent}"])
    return {"library": str(LIBRARY), "library_mtime": LIBRARY.stat().st_mtime,
            "trivial": str(trivial), "trivial_isolated": str(isolated), "cc": cc}


# ---------------------------------------------------------------------------
# installs


def entry_count(layers: int, mtp: bool, extra: int = 0, moe: bool = False) -> int:
    from turbospark_ffi.install_writer import MTP_HEAD_TENSORS, trunk_tensors
    return len(trunk_tensors(layers=layers, moe=moe)) + (len(MTP_HEAD_TENSORS) if mtp else 0) + extra


def spec_for_entries(n: int) -> dict:
    """write_install arguments for a dense MTP install of exactly n entries."""
    layers = 64 if n >= entry_count(64, True) else 4
    extra = n - entry_count(layers, True)
    if extra < 0:
        raise ValueError(f"cannot write an install of {n} entries")
    return {"layers": layers, "mtp": True, "extra_entries": extra}


def real_size_layout(experts: int = 256, layers: int = 40, layers_first: bool = False) -> bytes:
    """A packed_experts/layout.json of the real size (docs/ENGINE.md section 1: about 22 MB for
    40 layers x 256 experts). install_writer's own layout for the same counts
    is compact (3.3 MB: 3 tensors per expert, one line), so this one keeps its
    schema and key order but carries what an INT4-affine MoE carries -- a
    weight, a scale plane and a bias plane per role, 9 tensors per expert --
    pretty-printed with a 2-space indent. `layers_first` puts the large
    `layers` array before the scalars (a writer that orders keys otherwise)."""
    sizes = {"weight": 1 << 20, "scales": 1 << 15, "biases": 1 << 15}
    roles = ("gate_proj", "up_proj", "down_proj")
    stride = sum(sizes.values()) * len(roles)
    out_layers = []
    for i in range(layers):
        experts_json = []
        for j in range(experts):
            tensors = {}
            at = j * stride
            for role in roles:
                for plane, size in sizes.items():
                    tensors[f"{role}.{plane}"] = {
                        "offset": at, "size": size, "dtype": 4 if plane == "weight" else 1,
                        "shape": [512, 2048, 1, 1] if plane == "weight" else [512, 32, 1, 1]}
                    at += size
            experts_json.append({"expert": j, "offset": j * stride, "size": stride,
                                 "tensors": tensors})
        out_layers.append({"layer": i, "file": f"layer_{i:02d}.bin", "experts": experts_json})
    scalars = {"expertStride": stride, "numLayers": layers, "expertsPerLayer": experts}
    doc = ({"layers": out_layers, **scalars} if layers_first
           else {**scalars, "layers": out_layers})
    return json.dumps(doc, indent=2).encode()


def copy_install(src: Path, dst: Path) -> Path:
    """A distinct copy (new inodes, new times) of a non-sparse install, with
    a manifest of its own: another install's `modelID`. Two real installs
    never share a manifest's text (it names the model and digests its
    files), and a reader that remembered manifests by their text answered
    every copy after the first from memory: a first plan no real unseen
    install gets (issue 41, docs/performance.md)."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    manifest = dst / "manifest.json"
    if manifest.is_file():
        doc = json.loads(manifest.read_text())
        doc["modelID"] = f"bench/{dst.parent.name}/{dst.name}"
        manifest.write_text(json.dumps(doc, indent=2) + "\n")
    return dst


def write_installs(cfg: dict, rows: set[int]) -> dict:
    """Every install the rows need. Fresh copies are distinct directories the
    library has never planned; each host process sees each copy once."""
    from turbospark_ffi.install_writer import (expert_layout_json, rewrite_manifest,
                                               write_install)
    if INSTALLS.exists():
        shutil.rmtree(INSTALLS)
    INSTALLS.mkdir(parents=True)
    plan: dict = {}

    def with_copies(name: str, count: int, written: bool = False, **spec) -> dict:
        main = write_install(INSTALLS / name, **spec)
        copies = []
        for k in range(count):
            dst = INSTALLS / f"{name}.fresh" / f"c{k:03d}"
            # Sparse: never copy 14 GB of holes. `written`: both sides of a
            # comparison made the same way. With copied small installs beside
            # written sparse ones, row 4 read 0.90-0.94x in three runs ("14 GB
            # faster than 100 KB"); written alike, 1.00x.
            if written or spec.get("resident_size"):
                copies.append(write_install(dst, **spec))
            else:
                copies.append(copy_install(main, dst))
        return {"main": main, "fresh": copies}

    d866 = spec_for_entries(866)
    if rows & {1, 2, 5, 6}:
        plan["g1"] = {"866": with_copies("dense866", cfg["g1"]["fresh"], **d866)}
        # Unseen copies for first choices tables, written like the plans' own.
        plan["g1_tables"] = with_copies("dense866_tables", cfg["g1"]["fresh"], **d866)["fresh"]
    if 3 in rows:
        plan["g3"] = {str(n): with_copies(f"entries{n}", cfg["g3"]["fresh"][n],
                                          **spec_for_entries(n)) for n in SIZES}
    if 4 in rows:
        plan["g4"] = {
            "small": with_copies("small866", cfg["g4"]["fresh"], written=True, **d866),
            "sparse14g": with_copies("sparse14g", cfg["g4"]["fresh"], **d866,
                                     resident_size=SPARSE_SIZE),
        }
    if 7 in rows:
        log("writing the real-size MoE layouts")
        moe = write_install(INSTALLS / "moe", layers=40, experts=256, mtp=True)
        (moe / "packed_experts" / "layout.json").write_bytes(real_size_layout())
        rewrite_manifest(moe)
        dense = copy_install(moe, INSTALLS / "moe_dense_layout")
        (dense / "packed_experts" / "layout.json").write_bytes(expert_layout_json(0, 0))
        # Dense in the manifest too: since ABI 4 the open takes the expert
        # count from the manifest's arch, not the layout, and native_plan
        # (the layout's reader) must agree with it on this twin.
        rewrite_manifest(dense, experts=0)
        lf = copy_install(moe, INSTALLS / "moe_layers_first")
        (lf / "packed_experts" / "layout.json").write_bytes(real_size_layout(layers_first=True))
        rewrite_manifest(lf)
        g7 = {}
        for name, main, count in (("moe", moe, cfg["g7"]["fresh"]),
                                  ("dense", dense, cfg["g7"]["fresh"]),
                                  ("moe_layers_first", lf, cfg["g7"]["fresh_layers_first"])):
            g7[name] = {"main": main, "fresh": [copy_install(main, INSTALLS / f"{main.name}.fresh"
                                                             / f"c{k:03d}")
                                                for k in range(count)]}
        plan["g7"] = g7
    # A snapshot of files modified in the last 100 ms is not trusted (and not
    # cached): let every install age past that before the first warm call.
    time.sleep(0.3)
    return plan


def file_sizes(model_dir: Path) -> dict:
    w = model_dir / "model_weights.bin"
    layout = model_dir / "packed_experts" / "layout.json"
    return {"model_weights.bin": w.stat().st_size,
            "model_weights.bin_allocated": w.stat().st_blocks * 512,
            "layout.json": layout.stat().st_size if layout.exists() else None}


# ---------------------------------------------------------------------------
# measuring


def native_calls_for(entries: int, budget_ms: float) -> int:
    # ~190 ns per entry plus ~20 us fixed, from the figures.
    est_ns = 190 * entries + 20_000
    return int(max(5, min(5000, budget_ms * 1e6 / est_ns)))


def native_ns(model_dir: Path, n: int) -> float:
    r = run_checked([str(BIN / "native_plan"), str(model_dir), "-n", str(n)])
    m = re.search(r"([0-9.]+) ns/plan", r.stderr)
    if not m:
        raise SystemExit(f"bench: native_plan printed no timing: {r.stderr!r}")
    return float(m.group(1))


def host_warm_ns(model_dir: Path, n: int) -> float:
    r = run_checked([str(BIN / "tsffi_host"), "warm", str(model_dir), str(n), OPTIONS])
    return float(r.stdout.split()[0])


def host_warm_choices_ns(model_dir: Path, n: int) -> float:
    r = run_checked([str(BIN / "tsffi_host"), "warm-choices", str(model_dir), str(n), OPTIONS])
    return float(r.stdout.split()[0])


def host_fresh_ns(warm_dir: Path, dirs: list[Path], mode: str = "fresh") -> list[float]:
    r = run_checked([str(BIN / "tsffi_host"), mode, str(warm_dir), *map(str, dirs),
                     "-o", OPTIONS])
    values = [float(x) for x in r.stdout.split()]
    if len(values) != len(dirs):
        raise SystemExit(f"bench: tsffi_host fresh gave {len(values)} timings for {len(dirs)} dirs")
    return values


def host_threads(model_dir: Path, threads: int, millis: int) -> float:
    r = run_checked([str(BIN / "tsffi_host"), "threads", str(model_dir), str(threads), str(millis),
                     OPTIONS])
    calls, elapsed = r.stdout.split()
    return int(calls) / (int(elapsed) / 1e9)


def sanity_check(model_dir: Path) -> dict:
    """The library and the native baseline must agree on what they time."""
    ts = json.loads(run_checked([str(BIN / "tsffi_host"), "show", str(model_dir), OPTIONS]).stdout)
    native = json.loads(run_checked([str(BIN / "native_plan"), str(model_dir)]).stdout)
    ours = (ts["drafter"]["installHasMtpHead"], ts["drafter"]["installHasDflash"],
            ts["speculation"]["block"])
    theirs = (native["installHasMtpHead"], native["installHasDflash"], native["block"])
    if ours != theirs:
        raise SystemExit(f"bench: library and native_plan disagree on {model_dir}: "
                         f"{ours} vs {theirs}\n{ts}\n{native}")
    return {"ts": ts, "native": native}


def measure_group(group: dict, reps: int, procs: int, cfg: dict, warm_dir: Path,
                  entries: dict) -> dict:
    """Per install of the group, per repetition: native per plan, warm plan
    per call, and (in the first `procs` repetitions) one fresh host process
    planning every fresh copy once. The installs' order rotates each
    repetition, and native/host alternate, so drift hits both sides alike."""
    names = list(group)
    res = {name: {"native": [], "warm": [], "first": [], "first_by_proc": [],
                  "native_for_proc": []} for name in names}
    for r in range(reps):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            inst = group[name]
            n_native = native_calls_for(entries[name], cfg["native_budget_ms"])
            steps = ["native", "warm"] if r % 2 == 0 else ["warm", "native"]
            for step in steps:
                if step == "native":
                    nat = native_ns(inst["main"], n_native)
                    res[name]["native"].append(nat)
                else:
                    res[name]["warm"].append(host_warm_ns(inst["main"], cfg["warm_calls"]))
            if r < procs and inst["fresh"]:
                got = host_fresh_ns(warm_dir, inst["fresh"])
                res[name]["first"].extend(got)
                res[name]["first_by_proc"].append(statistics.median(got))
                res[name]["native_for_proc"].append(nat)
    return res


def measure_choices(warm_dir: Path, table_dirs: list[Path], plan_dirs: list[Path], reps: int,
                    procs: int, warm_calls: int) -> dict:
    """Choices tables beside plans: per repetition a warm table and a warm
    plan back to back (order alternated); in the first `procs` repetitions
    one fresh host process making first tables of unseen copies and one
    making first plans of as many other unseen copies."""
    res = {"warm_table": [], "warm_plan": [], "first_table": [], "first_plan": [],
           "first_table_by_proc": [], "first_plan_by_proc": []}
    calls = max(200, warm_calls // 4)  # a table copies ~17 KB a call
    for r in range(reps):
        steps = ["table", "plan"] if r % 2 == 0 else ["plan", "table"]
        for step in steps:
            if step == "table":
                res["warm_table"].append(host_warm_choices_ns(warm_dir, calls))
            else:
                res["warm_plan"].append(host_warm_ns(warm_dir, calls))
        if r < procs:
            for step in steps:
                if step == "table":
                    got = host_fresh_ns(warm_dir, table_dirs, "fresh-choices")
                    res["first_table"].extend(got)
                    res["first_table_by_proc"].append(statistics.median(got))
                else:
                    got = host_fresh_ns(warm_dir, plan_dirs)
                    res["first_plan"].extend(got)
                    res["first_plan_by_proc"].append(statistics.median(got))
    return res


def spawn_until_answer(program: Path, model_dir: Path, env: dict) -> tuple[float, float]:
    """(exec to first answer, exec to exit) in ns, timed from the harness with
    CLOCK_MONOTONIC on both sides of the exec."""
    rd, wr = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, wr, 1), (os.POSIX_SPAWN_CLOSE, rd)]
    t0 = time.monotonic_ns()
    pid = os.posix_spawn(str(program), [str(program), str(model_dir)], env, file_actions=actions)
    os.close(wr)
    with os.fdopen(rd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    t_exit = time.monotonic_ns()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench: {program.name} failed: {data!r}")
    answered_at, code = data.split()
    if int(code) != 0:
        raise SystemExit(f"bench: {program.name} answered status {code.decode()}")
    return int(answered_at) - t0, t_exit - t0


def measure_cold(model_dir: Path, reps: int) -> dict:
    # What a GUI passes: no PYTHON* variables (the real library is isolated
    # from them anyway; the trivial one is not).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    progs = {"ts": BIN / "cold_host", "trivial": BIN / "cold_host_trivial",
             "isolated": BIN / "cold_host_trivial_isolated"}
    for p in progs.values():  # page the binaries and Python's files in once
        spawn_until_answer(p, model_dir, env)
    out = {k: {"answer": [], "exit": []} for k in progs}
    for r in range(reps):
        names = list(progs)
        for k in names[r % 3:] + names[:r % 3]:
            answer, exited = spawn_until_answer(progs[k], model_dir, env)
            out[k]["answer"].append(answer)
            out[k]["exit"].append(exited)
    return out


def measure_threads(model_dir: Path, reps: int, millis: int, counts: list[int]) -> dict:
    out = {t: [] for t in counts}
    for r in range(reps):
        order = counts[r % len(counts):] + counts[:r % len(counts)]
        for t in order:
            out[t].append(host_threads(model_dir, t, millis))
    return out


# ---------------------------------------------------------------------------
# the table


class Table:
    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.loads: dict[str, str] = {}

    def mark_row(self, row: int) -> None:
        self.loads[str(row)] = " ".join(f"{x:.2f}" for x in os.getloadavg())

    def add(self, row: int, label: str, samples: list[float], unit: str,
            target: str | None = None, passed: bool | None = None, kind: str = "time",
            note: str | None = None) -> dict:
        fig = {"row": row, "label": label, "unit": unit, "kind": kind, **summary(samples),
               "samples": samples, "target": target, "pass": passed}
        if note:
            fig["note"] = note
        self.rows.append(fig)
        return fig


def fmt_value(v: float, unit: str) -> str:
    if unit == "ns":
        if v >= 1e6:
            return f"{v / 1e6:.2f} ms"
        if v >= 1e3:
            return f"{v / 1e3:.2f} us"
        return f"{v:.0f} ns"
    if unit == "x":
        return f"{v:.3f}x" if v < 10 else f"{v:.1f}x"
    if unit == "calls/s":
        return f"{v / 1e3:.1f} k/s"
    return f"{v:.3g} {unit}"


ROW_TITLES = {
    1: "warm tsffi_speculation_plan, C host, 866 entries, beside native_plan; "
       "warm choices table",
    2: "first plan of an unseen 866-entry install (runtime warmed on another); "
       "first table",
    3: "scaling with index entries (first plan = unseen install; warm)",
    4: "file-size independence: ~150 KB vs 14 GB sparse model_weights.bin (866 entries)",
    5: "cold start: exec to first answer, real library vs a trivial cffi library started "
       "isolated, as the library starts",
    6: "throughput, host threads calling warm plans at once (866 entries)",
    7: "MoE install, real-size layout.json, vs the same install with a dense layout",
}


CHART_TITLES = {
    1: "warm plan vs native_plan, 866 entries",
    2: "first plan of an unseen 866-entry install",
    3: "scaling with index entries",
    4: "~150 KB vs 14 GB sparse file",
    5: "cold start, exec to first answer",
    6: "warm throughput vs host threads",
    7: "MoE real-size layout vs dense layout",
}


def render(table: Table) -> str:
    lines = []
    # By row (stable): a row's figures may be measured in more than one pass.
    table.rows.sort(key=lambda fig: fig["row"])
    head = f"{'':3}{'figure':<52}{'median':>11}  {'[min .. max]':<24}{'target':<12}result"
    lines.append(head)
    lines.append("-" * len(head))
    current = None
    for fig in table.rows:
        if fig["row"] != current:
            current = fig["row"]
            lines.append(f"({current}) {ROW_TITLES[current]}")
        rng = f"[{fmt_value(fig['min'], fig['unit'])} .. {fmt_value(fig['max'], fig['unit'])}]"
        result = "" if fig["pass"] is None else ("PASS" if fig["pass"] else "FAIL")
        lines.append(f"{'':3}{fig['label']:<52}{fmt_value(fig['median'], fig['unit']):>11}  "
                     f"{rng:<24}{fig['target'] or '':<12}{result}")
    return "\n".join(lines)


def within(ratio: float, tol: float) -> bool:
    return max(ratio, 1 / ratio) <= tol


# ---------------------------------------------------------------------------
# charts


def write_png(table: Table, path: Path, machine: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def figs(row):
        return [f for f in table.rows if f["row"] == row]

    fig, axes = plt.subplots(2, 4, figsize=(20, 9))
    axes = axes.ravel()

    def bars(ax, items, title, unit_scale=None, ylabel=None, log=False):
        if unit_scale is None:
            big = max(f["median"] for f in items) >= 1e6
            unit_scale, ylabel = (1e6, "ms") if big else (1e3, "us")
        labels = [f["label"] for f in items]
        med = [f["median"] / unit_scale for f in items]
        lo = [(f["median"] - f["min"]) / unit_scale for f in items]
        hi = [(f["max"] - f["median"]) / unit_scale for f in items]
        ax.bar(range(len(items)), med, yerr=[lo, hi], color="tab:blue", capsize=4)
        ax.set_xticks(range(len(items)))
        ax.set_xticklabels(labels, rotation=25, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")

    present = {f["row"] for f in table.rows}
    slot = 0
    for row in sorted(present):
        items = figs(row)
        ax = axes[slot]
        slot += 1
        title = f"({row}) {CHART_TITLES[row]}"
        if row == 3:
            for key, style in (("native", "o-"), ("first", "s-"), ("warm", "^-")):
                pts = [f for f in items if f.get("series") == key]
                ax.errorbar([f["entries"] for f in pts], [f["median"] / 1e3 for f in pts],
                            yerr=[[(f["median"] - f["min"]) / 1e3 for f in pts],
                                  [(f["max"] - f["median"]) / 1e3 for f in pts]],
                            fmt=style, label={"native": "native_plan", "first": "first plan",
                                              "warm": "warm plan"}[key], capsize=3)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("index entries")
            ax.set_ylabel("us per plan")
            ax.legend(fontsize=7)
            ax.set_title(title, fontsize=9)
            continue
        if row == 6:
            thr = [f for f in items if f["unit"] == "calls/s"]
            bars(ax, thr, title, unit_scale=1e3, ylabel="k calls/s")
            continue
        timed = [f for f in items if f["unit"] == "ns"]
        if timed:
            bars(ax, timed, title, log=row in (1, 4, 7))
    # The last panel: every ratio that has a target, against its target.
    ax = axes[-1]
    rat = [f for f in table.rows if f["unit"] == "x" and f["target"]]
    ys = range(len(rat))
    ax.barh(ys, [f["median"] for f in rat],
            xerr=[[f["median"] - f["min"] for f in rat], [f["max"] - f["median"] for f in rat]],
            color=["tab:green" if f["pass"] else "tab:red" for f in rat], capsize=3)
    for y, f in zip(ys, rat):
        m = re.search(r"([0-9.]+)x?$", f["target"])
        if m:
            limit = float(m.group(1))
            marks = [limit, 1 / limit] if f["target"].startswith("within") else [limit]
            for x in marks:
                ax.plot([x, x], [y - 0.4, y + 0.4], color="k", lw=1.5)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([f"({f['row']}) {f['label'].strip()}" for f in rat], fontsize=7)
    ax.set_xscale("log")
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator, ScalarFormatter
    ax.xaxis.set_major_locator(FixedLocator([0.01, 0.1, 0.3, 1, 3, 10]))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_title("ratios vs targets (black ticks: target; green: met)", fontsize=9)
    for extra in axes[slot:-1]:
        extra.axis("off")
    fig.suptitle(f"turbospark_ffi benchmarks -- {machine['cpu_model']}, nproc {machine['nproc']}, "
                 f"load {machine['loadavg_start']} -> {machine['loadavg_end']}  "
                 "(medians, bars = min..max)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------


def machine_info() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        nproc = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout)
    except (OSError, ValueError):
        nproc = os.cpu_count()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or None
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--",
                                 "turbospark_ffi", "src", "include", "ffi_build.py"],
                                capture_output=True, text=True).stdout.strip())
    import cffi
    return {"nproc": nproc, "cpu_model": model, "platform": platform.platform(),
            "python": platform.python_version(), "cffi": cffi.__version__,
            "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "git_commit": commit, "package_tree_dirty": dirty,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small repetition counts")
    ap.add_argument("--no-png", action="store_true", help="do not write results.png")
    ap.add_argument("--rows", default="1,2,3,4,5,6,7", help="comma-separated rows to run")
    ap.add_argument("--replot", action="store_true",
                    help="only redraw results.png from the saved results.json")
    args = ap.parse_args(argv)
    if args.replot:
        saved = json.loads((OUT / "results.json").read_text())
        table = Table()
        table.rows = saved["figures"]
        write_png(table, OUT / "results.png", saved["machine"])
        print(f"saved {OUT / 'results.png'}")
        return 0
    rows = {int(x) for x in args.rows.split(",") if x.strip()}
    if not rows <= set(range(1, 8)):
        ap.error("--rows takes numbers 1..7")
    if not args.no_png:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("bench: matplotlib is not importable, and results.png needs it.\n"
                  "  install the bench extra:  python3 -m pip install '.[bench]'   "
                  "(or: python3 -m pip install 'matplotlib>=3.7')\n"
                  "  or skip the chart explicitly:  python3 bench/run.py --no-png",
                  file=sys.stderr)
            return 2
    cfg = QUICK if args.quick else FULL
    OUT.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    machine = machine_info()
    log(f"machine: nproc {machine['nproc']}, {machine['cpu_model']}, "
        f"load {machine['loadavg_start']}; mode {'quick' if args.quick else 'full'}")
    build = build_all(notes)
    log("writing installs")
    inst = write_installs(cfg, rows)
    table = Table()
    raw: dict = {}
    sizes: dict = {}
    checks: dict = {}
    t_start = time.monotonic()

    if rows & {1, 2, 5, 6}:
        d866 = inst["g1"]["866"]["main"]
        sizes["dense866"] = file_sizes(d866)
        checks["dense866"] = sanity_check(d866)
    warm_dir = inst["g1"]["866"]["main"] if "g1" in inst else None

    if rows & {1, 2}:
        table.mark_row(1)
        log("rows 1-2: 866 entries, warm and first plans")
        g = cfg["g1"]
        if not rows & {2}:
            g = {**g, "procs": 0}
        res = measure_group(inst["g1"], g["reps"], g["procs"], cfg, warm_dir, {"866": 866})["866"]
        raw["g1"] = res
        if 1 in rows:
            table.add(1, "warm plan through the C ABI", res["warm"], "ns")
            table.add(1, "native_plan per plan", res["native"], "ns")
            r = ratios(res["warm"], res["native"])
            table.add(1, "ratio warm / native", r, "x", "<= 1.0x",
                      statistics.median(r) <= 1.0, kind="ratio")
        if 2 in rows:
            med = statistics.median(res["first"])
            table.add(2, f"first plan, per plan ({len(res['first'])} plans)", res["first"], "ns",
                      "<= 2 ms", med <= 2e6)
            table.add(2, "native_plan per plan", res["native_for_proc"], "ns")
            r = ratios(res["first_by_proc"], res["native_for_proc"])
            table.add(2, "ratio first / native", r, "x", "<= 3.0x",
                      statistics.median(r) <= 3.0, kind="ratio")
        # Beside the plan rows: the settings pane's table (51 plans), warm and
        # first, each against a plan measured back to back with it.
        tab = measure_choices(warm_dir, inst["g1_tables"], inst["g1"]["866"]["fresh"],
                              g["reps"], g["procs"] if 2 in rows else 0, cfg["warm_calls"])
        raw["g1_choices"] = tab
        if 1 in rows:
            table.add(1, "warm choices table (51 items) through the C ABI", tab["warm_table"],
                      "ns")
            table.add(1, "warm plan, measured beside it", tab["warm_plan"], "ns")
            r = ratios(tab["warm_table"], tab["warm_plan"])
            table.add(1, "ratio warm table / warm plan", r, "x", "<= 5.0x",
                      statistics.median(r) <= 5.0, kind="ratio")
        if 2 in rows:
            table.add(2, f"first choices table ({len(tab['first_table'])} tables)",
                      tab["first_table"], "ns")
            table.add(2, "first plan, measured beside it", tab["first_plan"], "ns")
            r = ratios(tab["first_table_by_proc"], tab["first_plan_by_proc"])
            table.add(2, "ratio first table / first plan", r, "x", "<= 2.0x",
                      statistics.median(r) <= 2.0, kind="ratio")

    if 3 in rows:
        table.mark_row(3)
        log("row 3: scaling")
        g = cfg["g3"]
        entries = {str(n): n for n in SIZES}
        for n in SIZES:
            sizes[f"entries{n}"] = file_sizes(inst["g3"][str(n)]["main"])
        checks["entries100000"] = sanity_check(inst["g3"]["100000"]["main"])
        res = measure_group(inst["g3"], g["reps"], g["procs"], cfg,
                            warm_dir or inst["g3"]["1000"]["main"], entries)
        raw["g3"] = res
        for n in SIZES:
            s = res[str(n)]
            for series, label, samples in (("native", "native_plan", s["native"]),
                                           ("first", "first plan", s["first"]),
                                           ("warm", "warm plan", s["warm"])):
                f = table.add(3, f"{n:>7,} entries: {label}", samples, "ns")
                f["series"], f["entries"] = series, n
            rf = ratios(s["first_by_proc"], s["native_for_proc"])
            if n == 100000:
                table.add(3, f"{n:>7,} entries: ratio first / native", rf, "x", "<= 1.5x",
                          statistics.median(rf) <= 1.5, kind="ratio")
            else:
                table.add(3, f"{n:>7,} entries: ratio first / native", rf, "x", kind="ratio")
            table.add(3, f"{n:>7,} entries: ratio warm / native",
                      ratios(s["warm"], s["native"]), "x", kind="ratio")

    if 4 in rows:
        table.mark_row(4)
        log("row 4: file size")
        g = cfg["g4"]
        for k in ("small", "sparse14g"):
            sizes[k] = file_sizes(inst["g4"][k]["main"])
        res = measure_group(inst["g4"], g["reps"], g["procs"], cfg,
                            warm_dir or inst["g4"]["small"]["main"], {"small": 866,
                                                                      "sparse14g": 866})
        raw["g4"] = res
        small_kb = sizes["small"]["model_weights.bin"] / 1e3
        for side, key in (("native_plan", "native"), ("first plan", "first"),
                          ("warm plan", "warm")):
            table.add(4, f"{side}, {small_kb:.0f} KB file", res["small"][key], "ns")
            table.add(4, f"{side}, 14 GB sparse file", res["sparse14g"][key], "ns")
        rn = ratios(res["sparse14g"]["native"], res["small"]["native"])
        table.add(4, "ratio 14 GB / small, native_plan", rn, "x", kind="ratio")
        rf = ratios(res["sparse14g"]["first_by_proc"], res["small"]["first_by_proc"])
        table.add(4, "ratio 14 GB / small, first plan", rf, "x", "within 1.1x",
                  within(statistics.median(rf), 1.1), kind="ratio")
        rw = ratios(res["sparse14g"]["warm"], res["small"]["warm"])
        table.add(4, "ratio 14 GB / small, warm plan", rw, "x", "within 1.1x",
                  within(statistics.median(rw), 1.1), kind="ratio")

    if 5 in rows:
        table.mark_row(5)
        log("row 5: cold start")
        res = measure_cold(inst["g1"]["866"]["main"], cfg["g5"]["reps"])
        raw["g5"] = res
        table.add(5, "real library: exec to first plan", res["ts"]["answer"], "ns")
        table.add(5, "trivial cffi library: exec to first call", res["trivial"]["answer"], "ns")
        # Information only: this floor imports `site` and reads the
        # environment, which the library never does, so beating it says
        # nothing (it took 12 to 42 ms across runs). The target is the
        # isolated floor below: the same interpreter start as the library's.
        r = ratios(res["ts"]["answer"], res["trivial"]["answer"])
        table.add(5, "ratio real / trivial floor with site (info)", r, "x", kind="ratio")
        table.add(5, "isolated trivial (no site): exec to first call",
                  res["isolated"]["answer"], "ns",
                  note="the same do-nothing library, interpreter started as tsffi_embed.c does")
        r = ratios(res["ts"]["answer"], res["isolated"]["answer"])
        table.add(5, "ratio real / isolated trivial floor", r, "x", "<= 1.3x",
                  statistics.median(r) <= 1.3, kind="ratio")
        table.add(5, "real library: exec to exit (info)", res["ts"]["exit"], "ns")
        table.add(5, "trivial library: exec to exit (info)", res["trivial"]["exit"], "ns")
        table.add(5, "isolated trivial: exec to exit (info)", res["isolated"]["exit"], "ns")

    if 6 in rows:
        table.mark_row(6)
        log("row 6: threads")
        g = cfg["g6"]
        res = measure_threads(inst["g1"]["866"]["main"], g["reps"], g["millis"], g["threads"])
        raw["g6"] = {str(k): v for k, v in res.items()}
        for t in g["threads"]:
            table.add(6, f"{t} thread{'s' if t > 1 else ''}: aggregate warm calls/s", res[t],
                      "calls/s", kind="throughput")
        for t in g["threads"][1:]:
            r = ratios(res[t], res[g["threads"][0]])
            if t == 8:
                table.add(6, f"ratio {t} threads / 1 thread", r, "x", ">= 0.8x",
                          statistics.median(r) >= 0.8, kind="ratio")
            else:
                table.add(6, f"ratio {t} threads / 1 thread", r, "x", kind="ratio")

    if 7 in rows:
        table.mark_row(7)
        log("row 7: MoE layout")
        g = cfg["g7"]
        for k in ("moe", "dense", "moe_layers_first"):
            sizes[f"g7_{k}"] = file_sizes(inst["g7"][k]["main"])
        checks["moe"] = sanity_check(inst["g7"]["dense"]["main"])
        n_entries = entry_count(40, True, moe=True)
        res = measure_group({k: inst["g7"][k] for k in ("moe", "dense")}, g["reps"], g["procs"],
                            cfg, warm_dir or inst["g7"]["dense"]["main"],
                            {"moe": n_entries, "dense": n_entries})
        lf = host_fresh_ns(warm_dir or inst["g7"]["dense"]["main"],
                           inst["g7"]["moe_layers_first"]["fresh"])
        raw["g7"] = {**res, "moe_layers_first_first": lf}
        mb = sizes["g7_moe"]["layout.json"] / 1e6
        table.add(7, f"MoE ({mb:.1f} MB layout): first plan", res["moe"]["first"], "ns")
        table.add(7, "dense layout: first plan", res["dense"]["first"], "ns")
        rf = ratios(res["moe"]["first_by_proc"], res["dense"]["first_by_proc"])
        table.add(7, "ratio first plan MoE / dense", rf, "x", "<= 10x",
                  statistics.median(rf) <= 10, kind="ratio")
        table.add(7, f"MoE ({mb:.1f} MB layout): warm plan", res["moe"]["warm"], "ns")
        table.add(7, "dense layout: warm plan", res["dense"]["warm"], "ns")
        rw = ratios(res["moe"]["warm"], res["dense"]["warm"])
        table.add(7, "ratio warm plan MoE / dense", rw, "x", "within 1.1x",
                  within(statistics.median(rw), 1.1), kind="ratio")
        table.add(7, "native_plan per plan (reads no layout)", res["moe"]["native"], "ns")
        table.add(7, "info: MoE, layers-first layout: first plan", lf, "ns",
                  note="layout.json with the `layers` array before the scalars: the "
                       "reader's full-parse fallback")

    machine["loadavg_by_row"] = table.loads
    machine["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    machine["measure_seconds"] = round(time.monotonic() - t_start, 1)
    text = render(table)
    header = (f"turbospark_ffi benchmarks ({'quick' if args.quick else 'full'}): "
              f"nproc {machine['nproc']}, {machine['cpu_model']}, "
              f"load {machine['loadavg_start']} -> {machine['loadavg_end']}, "
              f"Python {machine['python']}, cffi {machine['cffi']}, "
              f"commit {machine['git_commit']}{' (package tree dirty)' if machine['package_tree_dirty'] else ''}")
    print(header)
    print(text)
    for n in notes:
        print(f"note: {n}")
    met = [f for f in table.rows if f["pass"] is True]
    missed = [f for f in table.rows if f["pass"] is False]
    print(f"targets: {len(met)} met, {len(missed)} missed"
          + ("".join(f"\n  MISSED ({f['row']}) {f['label']}: {fmt_value(f['median'], f['unit'])} "
                     f"vs {f['target']}" for f in missed)))
    results = {"machine": machine, "mode": "quick" if args.quick else "full", "config": cfg,
               "build": build, "notes": notes, "file_sizes": sizes,
               "sanity": {k: v["ts"] for k, v in checks.items()},
               "figures": table.rows, "raw": raw, "table": header + "\n" + text}
    # A run of some rows only does not overwrite the last complete run.
    stem = "results" if rows == set(range(1, 8)) else "results.partial"
    (OUT / f"{stem}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"saved {OUT / f'{stem}.json'}")
    if not args.no_png:
        write_png(table, OUT / f"{stem}.png", machine)
        print(f"saved {OUT / f'{stem}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
