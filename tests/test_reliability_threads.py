"""Reliability, part 3: concurrency through the C ABI.

* 32 threads race the very first call into the library (the embedded runtime
  starts exactly once), in 20 fresh processes (tests/reliability/race_host.c):
  every run prints exactly what the same 32 calls print one after another on
  one thread -- results and each thread's own last error.
* 8 threads each make 50,000 mixed calls (speculation_plan, resolve_drafter,
  draft_policies, resolve_speculation, install_info; good inputs and bad) in
  one process (tests/reliability/stress_host.c): every status, result and last
  error is identical to the single-threaded answer, and no thread ever reads a
  message that belongs to another call (nearly every failing call of the mix
  has a message of its own, so a message crossing threads would show).
"""

from __future__ import annotations

import json
import time

import pytest

from test_reliability_inputs import (CODES, assert_canary, drivers, run_host,  # noqa: F401
                                     script_line, unescape, write_fixture_installs, write_script)

RACE_PROCESSES = 20
STRESS_THREADS = 8
STRESS_CALLS = 50_000
STRESS_TIMEOUT = 600
MTP_CHOICE = {"drafter": "mtp", "installHasMtpHead": True, "installHasDflash": False, "note": None}
DFLASH_CHOICE = {"drafter": "dflash", "installHasMtpHead": False, "installHasDflash": True,
                 "note": None}


@pytest.fixture(scope="module")
def installs(tmp_path_factory):
    root = tmp_path_factory.mktemp("threads")
    dirs = write_fixture_installs(root)
    corrupt = root / "corrupt"
    corrupt.mkdir()
    (corrupt / "model_weights.bin").write_bytes(b"\x01" * 10)
    dirs["corrupt"] = corrupt
    dirs["missing"] = root / "missing"
    return dirs


# ---------------------------------------------------------------------------
# 32 threads racing the first call, 20 fresh processes

def test_32_threads_race_the_first_call_in_20_fresh_processes(drivers, installs):
    host = drivers.get("race_host")
    args = [installs["mtp"], installs["dflash"]]
    serial = run_host([host, "-s", *args], what="race_host -s")
    rows = serial.tagged("T")
    assert len(rows) == 32
    expected_status = {"build_info": 0, "resolve_drafter": 0, "draft_policies": 0,
                       "refused": CODES["TSFFI_ERR_REFUSED"], "speculation_plan": 0,
                       "install_info": 0, "invalid": CODES["TSFFI_ERR_INVALID_ARGUMENT"],
                       "json": CODES["TSFFI_ERR_JSON"]}
    for index, op, status, out, err in rows:
        assert int(status) == expected_status[op], (index, op, status, err)
        assert (out == "-") == (int(status) != 0) and (err == "") == (int(status) == 0)
    errors = [unescape(r[4]) for r in rows if r[4]]
    assert len(set(errors)) == len(errors) == 12, "each failing thread needs its own message"
    info = json.loads(unescape(rows[0][3][1:]))
    assert info["ownsInterpreter"] is True
    for n in range(RACE_PROCESSES):
        racing = run_host([host, *args], what=f"race_host run {n}")
        assert racing.lines == serial.lines, (
            f"run {n}: the racing threads' answers differ from the single-threaded ones: "
            f"{[(a, b) for a, b in zip(racing.lines, serial.lines) if a != b][:3]}")


# ---------------------------------------------------------------------------
# 8 threads x 50,000 mixed calls

def _stress_lines(installs, spill) -> list[str]:
    lines: list[str] = []

    def add(cid, fn, *args):
        lines.append(script_line(cid, fn, args, spill))

    for k, (name, path) in enumerate(sorted(installs.items())):
        d = str(path).encode()
        add(f"plan-{name}", "speculation_plan", d, None)
        add(f"plan-{name}-2", "speculation_plan", d, b'{"speculation": 2}')
        add(f"plan-{name}-dflash", "speculation_plan", d,
            b'{"speculativeDrafter": "dflash", "speculation": "3", "tsffi": {"temperature": 0}}')
        add(f"plan-{name}-sampled", "speculation_plan", d,
            b'{"speculativeDrafter": "dflash", "speculation": %d, "tsffi": {"temperature": 0.7}}' %
            (k + 1))
        add(f"plan-{name}-blocker", "speculation_plan", d,
            b'{"tsffi": {"engineBlocker": "blocker of %s"}, "other": [1, 2]}' % name.encode())
        add(f"plan-{name}-bad", "speculation_plan", d, b'{"speculation": %d.5}' % k)
        add(f"drafter-{name}", "resolve_drafter", d, None)
        add(f"drafter-{name}-dflash", "resolve_drafter", d, b'{"speculativeDrafter": "dflash"}')
        add(f"drafter-{name}-bad", "resolve_drafter", d, b'{"speculativeDrafter": "x%d"}' % k)
        add(f"info-{name}", "install_info", d)
    for k in range(1, 17):
        choice = json.dumps(MTP_CHOICE if k % 2 else DFLASH_CHOICE).encode()
        add(f"policies-{k}", "draft_policies", choice, b'{"speculation": %d}' % k)
        add(f"policies-{k}-bad", "draft_policies", choice.replace(b"null", b"%d" % k), None)
        add(f"spec-{k}", "resolve_speculation",
            b'{"speculation": %d, "tsffi": {"engineBlocker": null}}' % k)
        add(f"spec-{k}-blocker", "resolve_speculation",
            b'{"speculation": "auto", "tsffi": {"engineBlocker": "reason %d"}}' % k)
        add(f"spec-{k}-temperature", "resolve_speculation", b'{"tsffi": {"temperature": -%d}}' % k)
        add(f"spec-{k}-json", "resolve_speculation", b'{"speculation": 2,' + b" " * k)
        add(f"spec-{k}-deep", "resolve_speculation", b"[" * (64 + k))
    add("dir-not-utf8-a", "install_info", b"/x\xff")
    add("dir-not-utf8-b", "speculation_plan", b"/xy\xff", None)
    add("dir-empty", "resolve_drafter", b"", None)
    add("options-not-utf8", "resolve_speculation", b'{"a": "\xfe"}')
    add("null-dir", "speculation_plan", None, None)
    add("null-choice", "draft_policies", None, b"{}")
    return lines


@pytest.fixture(scope="module")
def stress(tmp_path_factory, drivers, installs):
    root = tmp_path_factory.mktemp("stress")
    script = write_script(root / "script.txt", _stress_lines(installs, root))
    started = time.monotonic()
    run = run_host([drivers.get("stress_host"), script, STRESS_THREADS, STRESS_CALLS],
                   timeout=STRESS_TIMEOUT,
                   what=f"stress_host ({STRESS_THREADS} threads x {STRESS_CALLS} calls)")
    wall = time.monotonic() - started
    print(f"\n{STRESS_THREADS} threads x {STRESS_CALLS} mixed calls: {wall:.1f} s wall")
    return script, run


def test_the_mix_has_good_and_bad_calls_each_with_its_own_message(stress):
    _, run = stress
    rows = run.tagged("S")
    statuses = {int(r[1]) for r in rows}
    assert {0, CODES["TSFFI_ERR_INVALID_ARGUMENT"], CODES["TSFFI_ERR_REFUSED"],
            CODES["TSFFI_ERR_JSON"]} <= statuses, statuses
    errors = [r[3] for r in rows if r[3]]
    assert len(errors) >= 100
    # Nearly every failing call has a message of its own (the exceptions are
    # refusals the policy words identically for several installs), so a
    # message crossing threads shows as a mismatch.
    assert len(set(errors)) >= 90, len(set(errors))
    fns = {line.split("\t")[1] for line in open(stress[0])}
    assert fns == {"speculation_plan", "resolve_drafter", "draft_policies",
                   "resolve_speculation", "install_info"}


def test_single_threaded_answers_are_a_fresh_processes_answers(stress, drivers):
    """The expected answers stress_host records on its main thread are what a
    separate single-threaded host process gets for the same calls."""
    script, run = stress
    fresh = run_host([drivers.get("abi_host"), script], what="abi_host (stress script)")
    for cid, status, out, err in run.tagged("S"):
        rec = fresh.records[cid]
        assert_canary(rec)
        got_out = None if out == "-" else unescape(out[1:])
        assert (rec.status, rec.out, rec.err) == (int(status), got_out, unescape(err)), cid


def test_8_threads_x_50000_mixed_calls_match_the_single_threaded_answers(stress):
    _, run = stress
    threads = run.tagged("T")
    assert len(threads) == STRESS_THREADS
    mismatches = run.tagged("M")
    for index, calls, bad, foreign in threads:
        assert calls == f"calls={STRESS_CALLS}", (index, calls)
        assert bad == "mismatches=0", (index, bad, [unescape(m[1]) for m in mismatches][:6])
        assert foreign == "foreign=0", (index, foreign)
    assert not mismatches
