"""bench/profile_plan.py keeps running: it reads the package's insides, so
a change there can break it, and nothing else would notice. Run here in its
quick mode (every view, few repetitions, a 10,000-entry large index); what
is checked is that it completes and prints each stage -- never a timing."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, compile_c_host

STAGES = [
    "1. cold start (child: -I -S -B, sys.path as the embedded interpreter's)",
    "   interpreter alone (-I -S -c pass), exec to exit",
    "     import turbospark_ffi._abi",
    "     api.request (first read)",
    "     api.plan_json",
    "   slowest imports (cumulative us, self us) from -X importtime, one run:",
    "   (library loaded in process; reader's C pass bound: True; the library's stat key: True)",
    "2. first plan, 866 entries: dense866",
    "2. first plan, 10,000 entries: entries10000",
    "2. first plan, MoE, 4-layer layout: moe",
    "   total: snapshot + plan + text",
    "       load_resident_index",
    "       load_manifest_arch",
    "     decide + text (fresh snapshot)",
    "       check_dtype_gates (fresh index)",
    "       build_mtp (fresh index)",
    "       speculation_blocker (fresh index)",
    "       load_expert_layout",
    "       names_containing(b'.self_attn.')",
    "   first choices table: snapshot + table text",
    "       inside load_resident_index (10000 entries",
    "         load_resident_index, Python pass only",
    "3. warm call pieces (Python side only, ns per call), dense866:",
    "   _abi._speculation_plan (whole Python side)",
    "4. threads, warm calls on dense866 (50 ms each)",
    "   pinned to CPU",
]


def test_profile_runs_and_prints_every_stage(tmp_path):
    host = compile_c_host(ROOT / "bench" / "tsffi_host.c", tmp_path / "tsffi_host")
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "profile_plan.py"), "--quick",
                             "--installs", str(tmp_path / "installs"), "--host", str(host)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    missing = [stage for stage in STAGES if stage not in result.stdout]
    assert missing == [], result.stdout
    assert "skipped" not in result.stdout
