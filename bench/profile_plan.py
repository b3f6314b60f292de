#!/usr/bin/env python3
"""Where the time of a plan goes, stage by stage, in plain Python.

    python3 bench/profile_plan.py            # writes its installs into bench/out/profile_installs
    python3 bench/profile_plan.py --reps 20
    python3 bench/profile_plan.py --quick --installs DIR   # every stage once or twice, a
                                             # 10,000-entry index for the large one (the test)

Three views, each the median of --reps repetitions (min..max):

1. cold start: what the embedded interpreter imports for the first plan and
   what each import costs, measured in a child started as tsffi_embed.c starts
   its interpreter (-I -S, no bytecode writing, sys.path = package parent,
   stdlib, lib-dynload, cffi), with -X importtime; and which of those modules
   have no usable .pyc (compiled from source on every start, because the
   embedded interpreter never writes bytecode).
2. first plan of an unseen install, at 866 and 100,000 entries and for the
   real-size MoE layout: snapshots.snapshot split into load_resident_index and
   load_expert_layout, then the blocker preview, the policy, the JSON text;
   the first choices table beside it.
3. a warm call (the library loaded in process, as a Python host loads it):
   the pieces _abi._speculation_plan runs on an unchanged install (check
   model_dir, parse the options, the stat key, the decision and its text).
4. threads: bench/out/bin/tsffi_host (built by bench/run.py) with 1 and 8 host
   threads, free to use every core and pinned to one CPU, with the voluntary
   context switches per call: how much of a multi-thread loss is the GIL
   handed across cores.

It times the package's functions from outside; it changes nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
INSTALLS = BENCH / "out" / "profile_installs"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))


def stat_line(samples: list[float], unit: float = 1e3, suffix: str = "us") -> str:
    return (f"{statistics.median(samples) / unit:9.2f} {suffix}  "
            f"[{min(samples) / unit:.2f} .. {max(samples) / unit:.2f}]")


def timed(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t)
    return out


CHILD = r'''
import sys, time
t0 = time.perf_counter_ns()
from turbospark_ffi import _abi
t1 = time.perf_counter_ns()
from turbospark_ffi.api import plan_json, request
t2 = time.perf_counter_ns()
req = request(sys.argv[1].encode(), b'{"speculativeDrafter":"auto","speculation":"auto"}')
t3 = time.perf_counter_ns()
out = plan_json(req)
t4 = time.perf_counter_ns()
mods = sorted(m for m in sys.modules if m.startswith("turbospark_ffi"))
print("TIMES", t1 - t0, t2 - t1, t3 - t2, t4 - t3)
print("MODULES", " ".join(mods))
print("ALL", len(sys.modules))
'''


def cold(model_dir: Path, reps: int) -> None:
    import _cffi_backend
    stdlib = sysconfig.get_path("stdlib")
    paths = [str(ROOT), stdlib, os.path.join(stdlib, "lib-dynload"),
             os.path.dirname(_cffi_backend.__file__)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin")}
    code = "import sys; sys.path[:] = %r\n" % paths + CHILD
    exe = sys.executable
    print("1. cold start (child: -I -S -B, sys.path as the embedded interpreter's)")
    walls, phases = [], []
    for _ in range(reps):
        t = time.perf_counter_ns()
        r = subprocess.run([exe, "-I", "-S", "-B", "-c", code, str(model_dir)],
                           capture_output=True, text=True, env=env, check=True)
        walls.append(time.perf_counter_ns() - t)
        for line in r.stdout.splitlines():
            if line.startswith("TIMES"):
                phases.append([int(x) for x in line.split()[1:]])
            if line.startswith("MODULES"):
                modules = line.split()[1:]
            if line.startswith("ALL"):
                nmods = int(line.split()[1])
    bare = timed(lambda: subprocess.run([exe, "-I", "-S", "-B", "-c", "pass"], env=env,
                                        check=True), reps)
    print(f"   interpreter alone (-I -S -c pass), exec to exit {stat_line(bare, 1e6, 'ms')}")
    print(f"   import, read and plan, exec to exit           {stat_line(walls, 1e6, 'ms')}")
    for k, what in enumerate(("import turbospark_ffi._abi", "import api",
                              "api.request (first read)", "api.plan_json")):
        print(f"     {what:<44}{stat_line([p[k] for p in phases], 1e6, 'ms')}")
    print(f"   modules loaded: {nmods} in all; turbospark_ffi's: {' '.join(modules)}")
    r = subprocess.run([exe, "-I", "-S", "-B", "-X", "importtime", "-c", code, str(model_dir)],
                       capture_output=True, text=True, env=env, check=True)
    rows = []
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            self_us, cum_us, name = (p.strip() for p in
                                     line[len("import time:"):].split("|"))
            rows.append((int(cum_us), int(self_us), name))
    print("   slowest imports (cumulative us, self us) from -X importtime, one run:")
    for cum, self_us, name in sorted(rows, reverse=True)[:14]:
        print(f"     {cum:7d} {self_us:7d}  {name}")
    pkg = ROOT / "turbospark_ffi"
    cache = pkg / "__pycache__"
    tag = sys.implementation.cache_tag
    missing = []
    for mod in modules:
        leaf = mod.split(".")[-1] if mod != "turbospark_ffi" else "__init__"
        src = pkg / f"{leaf}.py"
        pyc = cache / f"{leaf}.{tag}.pyc"
        if src.exists() and (not pyc.exists() or pyc.stat().st_mtime < src.stat().st_mtime):
            missing.append(leaf)
    print(f"   imported modules with no fresh .pyc (compiled from source at every start): "
          f"{', '.join(missing) or 'none'}"
          f"  [PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')}]")
    if missing:
        comp = []
        for leaf in missing:
            text = (pkg / f"{leaf}.py").read_text()
            comp.append((leaf, statistics.median(timed(
                lambda: compile(text, leaf, "exec"), max(3, reps // 2)))))
        print("   compile() cost of those: " + ", ".join(f"{m} {t / 1e6:.2f} ms" for m, t in comp))


def timed_fresh(make, fn, reps: int) -> list[float]:
    """fn(make()) timed, `make` (untimed) giving each repetition a fresh object."""
    out = []
    for _ in range(reps):
        obj = make()
        t = time.perf_counter_ns()
        fn(obj)
        out.append(time.perf_counter_ns() - t)
    return out


def first_plan(model_dir: Path, reps: int, label: str) -> None:
    from turbospark_ffi import snapshots
    from turbospark_ffi.blockers import speculation_blocker
    from turbospark_ffi.expert_layout import load_expert_layout
    from turbospark_ffi.manifest_arch import load_manifest_arch
    from turbospark_ffi.runner_open import build_mtp, check_dtype_gates
    from turbospark_ffi.options import parse_options
    from turbospark_ffi.plan import decide, table
    from turbospark_ffi.policy import SpeculativeDrafter, resolve_drafter
    from turbospark_ffi.resident_index import load_resident_index, native_scan, use_native_scan
    from turbospark_ffi.wire import choices_text, plan_text

    weights = str(model_dir / "model_weights.bin")
    opts = parse_options(b'{"speculativeDrafter":"auto","speculation":"auto"}')
    print(f"2. first plan, {label}: {model_dir.name}")

    def fresh_snapshot():
        snapshots.clear_cache()
        return snapshots.snapshot(str(model_dir))
    s_total = timed(lambda: plan_text(decide(fresh_snapshot(), opts)), reps)
    def table_text(snap):
        return choices_text(table(snap, opts), snap.model_dir,
                            resolve_drafter(SpeculativeDrafter.AUTO, snap.index), opts)
    s_table = timed(lambda: table_text(fresh_snapshot()), reps)
    s_snap = timed(fresh_snapshot, reps)
    s_idx = timed(lambda: load_resident_index(weights), reps)
    s_lay = timed(lambda: load_expert_layout(str(model_dir)), reps)
    s_arch = timed(lambda: load_manifest_arch(str(model_dir)), reps)
    arch = load_manifest_arch(str(model_dir))
    s_plan = timed_fresh(fresh_snapshot, lambda s: plan_text(decide(s, opts)), reps)
    s_gates = timed_fresh(lambda: load_resident_index(weights), check_dtype_gates, reps)
    s_build = timed_fresh(lambda: load_resident_index(weights),
                          lambda i: build_mtp(i, arch, False), reps)
    s_block = timed_fresh(lambda: load_resident_index(weights),
                          lambda i: speculation_blocker(arch, i, SpeculativeDrafter.MTP, True,
                                                        False), reps)
    s_names = timed_fresh(lambda: load_resident_index(weights),
                          lambda i: i.names_containing(b".self_attn."), reps)
    print(f"   total: snapshot + plan + text                 {stat_line(s_total)}")
    print(f"     snapshots.snapshot                            {stat_line(s_snap)}")
    print(f"       load_resident_index                       {stat_line(s_idx)}")
    print(f"       load_manifest_arch                        {stat_line(s_arch)}")
    print(f"     decide + text (fresh snapshot)              {stat_line(s_plan)}")
    print(f"       check_dtype_gates (fresh index)           {stat_line(s_gates)}")
    print(f"       build_mtp (fresh index)                   {stat_line(s_build)}")
    print(f"       speculation_blocker (fresh index)         {stat_line(s_block)}")
    print(f"   (install info only, read on its first use:)")
    print(f"       load_expert_layout                        {stat_line(s_lay)}")
    print(f"       names_containing(b'.self_attn.')          {stat_line(s_names)}")
    print(f"         (what the Python reader's answer to the layer costs; the C pass answers it)")
    print(f"   first choices table: snapshot + table text   {stat_line(s_table)}"
          f"  ({statistics.median(s_table) / statistics.median(s_total):.2f}x the first plan)")
    # Inside load_resident_index, for the large case: the C pass against the
    # Python pass (the fallback, and what words a refusal).
    if load_resident_index(weights).entry_count >= 10000:
        import turbospark_ffi.resident_index as ri
        scan = native_scan()
        fd = os.open(weights, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            header = os.pread(fd, 24, 0)
            count = int.from_bytes(header[16:24], "little")
            index_size = int.from_bytes(header[0:8], "little")
            resident = int.from_bytes(header[8:16], "little")
            s_read = timed(lambda: os.pread(fd, count * 72, 24), reps)
            table = os.pread(fd, count * 72, 24)
            s_ranges = timed(lambda: ri._name_ranges(table), reps)
            offs, ends = ri._name_ranges(table)
            tail = os.pread(fd, max(ends) - (24 + count * 72), 24 + count * 72)
            region = header + table + tail
            s_names2 = timed(lambda: ri._validated_names(region, table, index_size,
                                                         index_size + resident), reps)
            s_dict = timed(lambda: dict(zip(map(region.__getitem__, map(slice, offs, ends)),
                                            range(count))), reps)
            use_native_scan(None, None)
            try:
                s_python = timed(lambda: load_resident_index(weights), reps)
            finally:
                use_native_scan(*scan) if scan else None
        finally:
            os.close(fd)
        print(f"       inside load_resident_index ({count} entries, file {size} bytes):")
        print(f"         pread of the entry table                {stat_line(s_read)}")
        print(f"         load_resident_index, Python pass only   {stat_line(s_python)}")
        print(f"         _name_ranges (where the names end)      {stat_line(s_ranges)}")
        print(f"         _validated_names (check 7, one walk)    {stat_line(s_names2)}")
        print(f"           of which the name->slot dict alone    {stat_line(s_dict)}")


def load_library() -> None:
    """Load the built library into this process, as a Python host would: its
    start binds _abi (which the warm pieces call) and the reader's C pass (so
    views 2 and 3 time what the library runs, not the pure-Python fallback)."""
    import ctypes
    from turbospark_ffi.native import library_name
    name = library_name()
    lib = ctypes.CDLL(str(ROOT / "turbospark_ffi" / name))
    lib.tsffi_build_info_json.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.tsffi_string_free.argtypes = [ctypes.c_void_p]
    out = ctypes.c_void_p()
    if lib.tsffi_build_info_json(ctypes.byref(out)) != 0:
        sys.exit("profile_plan: the library did not start (run bench/run.py or ffi_build.py)")
    lib.tsffi_string_free(out)
    from turbospark_ffi.snapshots import keys_in_use, python_file_keys
    from turbospark_ffi.resident_index import native_scan
    print(f"   (library loaded in process; reader's C pass bound: {native_scan() is not None}; "
          f"the library's stat key: {keys_in_use() is not python_file_keys})")


def warm(model_dir: Path, reps: int, loops: int) -> None:
    from turbospark_ffi import _abi, snapshots
    from turbospark_ffi.api import plan_json, request
    from turbospark_ffi.model_names import check_model_dir

    raw = str(model_dir).encode()
    opts = b'{"speculativeDrafter":"auto","speculation":"auto"}'
    d = str(model_dir)
    snapshots.clear_cache()
    snapshots.snapshot(d)
    time.sleep(0.15)  # past the racy window: a snapshot the cache keeps
    snapshots.clear_cache()
    snap = request(raw, opts).snapshot
    plan_json(request(raw, opts))
    w = os.path.join(d, "model_weights.bin")

    def per_call(fn):
        out = []
        for _ in range(reps):
            t = time.perf_counter_ns()
            for _ in range(loops):
                fn()
            out.append((time.perf_counter_ns() - t) / loops)
        return out

    print(f"3. warm call pieces (Python side only, ns per call), {model_dir.name}:")
    items = [
        ("empty Python call (floor of a call)", lambda: None),
        ("os.stat() once", lambda: os.stat(w)),
        ("snapshots.file_keys (the library's, 2 stat)", lambda: snapshots.file_keys(d)),
        ("snapshots.python_file_keys (2 os.stat)", lambda: snapshots.python_file_keys(d)),
        ("check_model_dir", lambda: check_model_dir(raw)),
        ("snapshots.snapshot (cached)", lambda: snapshots.snapshot(d)),
        ("api.request (check, parse, resolve, snapshot)", lambda: request(raw, opts)),
        ("api.plan_json (decided again)", lambda: plan_json(request(raw, opts))),
        ("_abi._speculation_plan (whole Python side)", lambda: _abi._speculation_plan(raw, opts)),
    ]
    if snapshots.snapshot(d) is not snap:
        print("   (the snapshot was not cached: install too young?)")
    for label, fn in items:
        print(f"   {label:<48}{stat_line(per_call(fn), 1, 'ns')}")


def threads(model_dir: Path, reps: int, millis: int, host: Path) -> None:
    import resource
    if not host.exists():
        print(f"4. threads: skipped ({host} missing: run bench/run.py first, or pass --host)")
        return
    print(f"4. threads, warm calls on {model_dir.name} ({millis} ms each)")
    cpu0 = {sorted(os.sched_getaffinity(0))[0]}
    for label, pin in (("all cores", None), (f"pinned to CPU {min(cpu0)}", cpu0)):
        for t in (1, 8):
            rates, switches = [], []
            for _ in range(reps):
                before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw
                r = subprocess.run([str(host), "threads", str(model_dir), str(t), str(millis)],
                                   capture_output=True, text=True, check=True,
                                   preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin
                                   else None)
                after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw
                calls, elapsed = map(int, r.stdout.split())
                rates.append(calls / (elapsed / 1e9))
                switches.append((after - before) / calls)
            print(f"   {label:<16} {t} thread{'s' if t > 1 else ' '}: "
                  f"{stat_line(rates, 1e3, 'k calls/s')}   "
                  f"voluntary context switches per call {statistics.median(switches):.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--quick", action="store_true",
                    help="every view with few repetitions and a 10,000-entry large index: "
                         "that it runs, not what it measures")
    ap.add_argument("--installs", type=Path, default=INSTALLS,
                    help=f"where to write its installs (default {INSTALLS})")
    ap.add_argument("--host", type=Path, default=BENCH / "out" / "bin" / "tsffi_host",
                    help="the C host of view 4 (bench/tsffi_host.c, as bench/run.py builds it)")
    args = ap.parse_args(argv)
    reps = 2 if args.quick else args.reps
    large = 10000 if args.quick else 100000
    # Its own installs, written as bench/run.py writes them (run.py replaces
    # bench/out/installs on every run).
    import run
    from turbospark_ffi.install_writer import write_install
    d866, big, moe = (args.installs / "dense866", args.installs / f"entries{large}",
                      args.installs / "moe")
    if not (moe.exists() and big.exists()):
        write_install(d866, **run.spec_for_entries(866))
        write_install(big, **run.spec_for_entries(large))
        write_install(moe, layers=40, experts=256, mtp=True)
        (moe / "packed_experts" / "layout.json").write_bytes(
            run.real_size_layout(layers=4 if args.quick else 40))
        time.sleep(0.3)
    cold(d866, reps)
    load_library()
    first_plan(d866, reps, "866 entries")
    first_plan(big, max(2 if args.quick else 3, reps // 2), f"{large:,} entries")
    first_plan(moe, reps, "MoE, real-size layout" if not args.quick else "MoE, 4-layer layout")
    warm(d866, max(2, reps // 2), 200 if args.quick else 20000)
    threads(d866, max(1 if args.quick else 3, reps // 2), 50 if args.quick else 300, args.host)
    return 0


if __name__ == "__main__":
    sys.exit(main())
