"""Reliability, part 5: host environments.

The same call script, through the C ABI, from every kind of host a GUI might
be: a host run under `env -i`; a host that dlopen()s the library RTLD_LOCAL; a
Python process loading it with ctypes (the library then uses the running
interpreter: "ownsInterpreter": false, and leaves the host's streams and
SIGINT handler alone); a host whose working directory is unreadable (chmod
000, bound by file modes even as root) or deleted while it is inside; the
library copied with its package to another directory (it finds itself and its
package there); and the library copied WITHOUT its package (TSFFI_ERR_RUNTIME,
with a message naming what is missing, on every call, never TSFFI_OK -- also
when another copy of the package sits beside the build's cffi, as it does in
a venv where the package is pip-installed).

Every C host run asserts an empty stderr, only the host's own lines on
stdout, every signal disposition 1..31 and the signal mask unchanged, and that
SIGINT still reaches the host's own handler (sigaction before and after).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LIBRARY, ROOT
from engine_texts import io_failed
from original_texts import REFUSAL_PREFIX, SAMPLED_REASON
from test_reliability_inputs import (CODES, HOST_TIMEOUT, MTP_CHOICE,  # noqa: F401
                                     PREV, assert_canary, assert_signals_untouched, drivers,
                                     run_as_unprivileged_reader, run_host, script_line,
                                     write_fixture_installs, write_script)

PLAN_MTP = {"drafter": {"drafter": "mtp", "installHasMtpHead": True, "installHasDflash": False,
                        "note": None},
            "draftPolicies": {"mtp": {"mode": "auto", "block": None},
                              "dflash": {"mode": "off", "block": None}},
            "speculation": {"block": 2, "drafter": "mtp", "reason": None},
            "turn": {"temperature": 0.2, "speculates": False,
                     "reason": "this session drafts, but a turn speculates only at temperature 0 "
                               "and this turn's temperature is 0.2 (the engine binding's "
                               "default): it decodes sequentially (send temperature 0 to "
                               "speculate)"},
            "source": "preview", "ignoredKeys": ["hostOnly"], "warnings": []}
# A refusal with a known message: a named block under DFlash2 on a sampled run
# (the original module's texts, from their one home).
REFUSED_SAMPLED = REFUSAL_PREFIX + SAMPLED_REASON
REFUSED_OPTIONS = b'{"speculativeDrafter": "dflash", "speculation": 2, "tsffi": {"temperature": 0.7}}'
FUNCTIONS = ("build_info", "resolve_drafter", "draft_policies", "resolve_speculation",
             "speculation_plan", "install_info")


@pytest.fixture(scope="module")
def installs(tmp_path_factory):
    return write_fixture_installs(tmp_path_factory.mktemp("hosts-installs"))


def common_lines(mtp: Path, spill: Path) -> list[str]:
    d = str(mtp).encode()
    return [
        script_line("build_info", "build_info", (), spill),
        script_line("plan", "speculation_plan", (d, b'{"hostOnly": true}'), spill),
        script_line("drafter", "resolve_drafter", (d, None), spill),
        script_line("policies", "draft_policies", (PREV, b'{"speculation": "4"}'), spill),
        script_line("refused", "resolve_speculation", (REFUSED_OPTIONS,), spill),
        script_line("info", "install_info", (d,), spill),
        script_line("json", "resolve_speculation", (b"{",), spill),
        script_line("null-out", "install_info", (d,), spill, nullout=True),
    ]


def check_common(run, *, owns: bool = True) -> dict:
    """The answers of common_lines; returns the build info."""
    for rec in run.records.values():
        assert_canary(rec)
    r = run.records
    info = r["build_info"].json()
    assert r["build_info"].status == 0 and info["abiVersion"] == 4
    assert info["ownsInterpreter"] is owns
    # Each names the directory it read: the install's, as install info says.
    read = r["info"].json()["modelDir"]
    assert {**PLAN_MTP, "modelDir": read} == r["plan"].json()
    assert {**PLAN_MTP["drafter"], "modelDir": read} == r["drafter"].json()
    assert r["policies"].json() == {"mtp": {"mode": "fixed", "block": 4},
                                    "dflash": {"mode": "off", "block": None}}
    assert (r["refused"].status, r["refused"].out, r["refused"].err) == \
        (CODES["TSFFI_ERR_REFUSED"], None, REFUSED_SAMPLED)
    assert r["info"].json()["installHasMtpHead"] is True
    assert (r["json"].status, r["json"].err) == \
        (CODES["TSFFI_ERR_JSON"], "options: EOF while parsing an object at line 1 column 1")
    assert r["null-out"].status == CODES["TSFFI_ERR_INVALID_ARGUMENT"]
    return info


def _script(tmp_path: Path, lines: list[str], name: str = "script.txt") -> Path:
    return write_script(tmp_path / name, lines)


# ---------------------------------------------------------------------------

def test_linked_host_baseline(drivers, installs, tmp_path):
    run = run_host([drivers.get("abi_host"), _script(tmp_path, common_lines(installs["mtp"],
                                                                            tmp_path))])
    info = check_common(run)
    assert info["library"] == str(LIBRARY.resolve())
    assert info["package"] == str((ROOT / "turbospark_ffi").resolve())
    assert_signals_untouched(run)


def test_host_under_env_i(drivers, installs, tmp_path):
    script = _script(tmp_path, common_lines(installs["mtp"], tmp_path))
    run = run_host(["env", "-i", drivers.get("abi_host"), script], env={}, what="env -i host")
    info = check_common(run)
    assert info["package"] == str((ROOT / "turbospark_ffi").resolve())
    assert_signals_untouched(run, "env -i host")


def test_host_that_dlopens_rtld_local(drivers, installs, tmp_path):
    host = drivers.get("abi_host", dlopen=True)
    linked = subprocess.run(["ldd", str(host)], capture_output=True, text=True).stdout
    assert "turbospark" not in linked and "libpython" not in linked, linked
    script = _script(tmp_path, common_lines(installs["mtp"], tmp_path))
    run = run_host([host, script, LIBRARY], what="dlopen(RTLD_LOCAL) host")
    check_common(run)
    assert_signals_untouched(run, "dlopen(RTLD_LOCAL) host")


CTYPES_HOST = r'''
import ctypes, json, signal, sys, threading
library, model_dir = sys.argv[1], sys.argv[2].encode()
before = (signal.getsignal(signal.SIGINT), sys.stdout, sys.stderr, list(sys.path))
lib = ctypes.CDLL(library)           # RTLD_LOCAL, as ctypes does by default
out_t = ctypes.POINTER(ctypes.c_void_p)
lib.tsffi_build_info_json.argtypes = [out_t]
lib.tsffi_speculation_plan.argtypes = [ctypes.c_char_p, ctypes.c_char_p, out_t]
lib.tsffi_resolve_speculation.argtypes = [ctypes.c_char_p, out_t]
lib.tsffi_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
lib.tsffi_last_error.restype = ctypes.c_size_t
lib.tsffi_string_free.argtypes = [ctypes.c_void_p]

def call(fn, *args):
    out = ctypes.c_void_p()
    status = getattr(lib, fn)(*args, ctypes.byref(out))
    text = ctypes.string_at(out.value).decode() if out.value else None
    lib.tsffi_string_free(out.value)
    n = lib.tsffi_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.tsffi_last_error(buf, n + 1)
    return status, text, buf.value.decode()

report = {"info": call("tsffi_build_info_json"),
          "plan": call("tsffi_speculation_plan", model_dir, b'{"hostOnly": true}'),
          "refused": call("tsffi_resolve_speculation",
                          b'{"speculativeDrafter": "dflash", "speculation": 2, "tsffi": {"temperature": 0.7}}')}
errors = {}
def worker(k):
    errors[k] = call("tsffi_resolve_speculation", b'{"tsffi": {"temperature": -%d}}' % k)
threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 9)]
[t.start() for t in threads]
[t.join() for t in threads]
report["threads"] = errors
after = (signal.getsignal(signal.SIGINT), sys.stdout, sys.stderr)
# Before against after: a host started with SIGINT ignored (nohup) holds
# SIG_IGN, not Python's default, and that is not the library's doing.
report["sigint_unchanged"] = after[0] is before[0]
report["streams_unchanged"] = after[1] is before[1] and after[2] is before[2]
report["python"] = "%d.%d.%d" % sys.version_info[:3]
report["host_sys_path_was"] = before[3]
print(json.dumps(report))
'''


def run_ctypes_host(library: Path, model_dir: Path, cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        result = subprocess.run([sys.executable, "-I", "-c", CTYPES_HOST, str(library),
                                 str(model_dir)], capture_output=True, timeout=HOST_TIMEOUT,
                                cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        raise AssertionError("the ctypes host hung") from None
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    assert result.stderr == b"", f"the library wrote to stderr: {result.stderr[:2000]!r}"
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 1, f"the library wrote to stdout: {lines[:5]}"
    return json.loads(lines[0])


def test_python_host_loading_with_ctypes_uses_the_running_interpreter(installs, tmp_path):
    report = run_ctypes_host(LIBRARY, installs["mtp"], tmp_path)
    status, text, err = report["info"]
    assert (status, err) == (0, "")
    info = json.loads(text)
    assert info["ownsInterpreter"] is False
    assert info["python"] == report["python"]
    assert info["package"] == str((ROOT / "turbospark_ffi").resolve())
    assert report["plan"][0] == 0
    assert json.loads(report["plan"][1]) == {**PLAN_MTP, "modelDir": str(installs["mtp"])}
    assert report["refused"] == [CODES["TSFFI_ERR_REFUSED"], None, REFUSED_SAMPLED]
    for k, (status, text, err) in report["threads"].items():
        assert (status, text) == (CODES["TSFFI_ERR_INVALID_ARGUMENT"], None)
        assert err.startswith(f"tsffi.temperature: got -{k};"), (k, err)
    assert report["sigint_unchanged"] is True, "the library replaced Python's SIGINT handler"
    assert report["streams_unchanged"] is True, "the library replaced the host's sys.stdout/err"


# ---------------------------------------------------------------------------
# Unreadable working directory

def test_host_whose_working_directory_is_unreadable(drivers, installs, tmp_path):
    cwd = tmp_path / "locked"
    lines = ["cd\tchdir_unreadable\tx" + str(cwd).encode().hex() + "\t-\t-\n"]
    lines += common_lines(installs["mtp"], tmp_path)
    lines.append(script_line("relative", "install_info", (b"mtp",), tmp_path))
    lines.append(script_line("relative-plan", "speculation_plan", (b"mtp", None), tmp_path))
    cmd, how = run_as_unprivileged_reader([drivers.get("abi_host"),
                                           _script(tmp_path, lines)])
    try:
        run = run_host(cmd, cwd=tmp_path, what=f"host in an unreadable cwd ({how})")
    finally:
        if cwd.exists():
            cwd.chmod(0o755)
    assert run.extras["cd"] == "ok listable=0", f"the cwd was still readable ({how})"
    check_common(run)  # the first call started the runtime inside that directory
    rel = run.records["relative"].json()
    assert rel["installHasMtpHead"] is None
    # mtp/ beside the cwd (in tmp_path) would read: the reader's open failure
    # shows the relative path was tried inside the locked directory, and the
    # plan is the open's refusal of a name that is no directory there.
    assert rel["indexError"] == io_failed("open", errno.EACCES)
    assert (run.records["relative-plan"].status, run.records["relative-plan"].err) == (
        CODES["TSFFI_ERR_REFUSED"], "mtp is not a directory (and matched no installed alias)")
    assert_signals_untouched(run)


def test_host_whose_working_directory_was_removed(drivers, installs, tmp_path):
    cwd = tmp_path / "doomed"
    lines = ["cd\tchdir_removed\tx" + str(cwd).encode().hex() + "\t-\t-\n"]
    lines += common_lines(installs["mtp"], tmp_path)
    lines.append(script_line("relative", "install_info", (b"mtp",), tmp_path))
    lines.append(script_line("relative-plan", "speculation_plan", (b"mtp", None), tmp_path))
    run = run_host([drivers.get("abi_host"), _script(tmp_path, lines)], cwd=tmp_path,
                   what="host in a removed cwd")
    assert run.extras["cd"] == "ok cwd_gone=1"
    check_common(run)
    # A relative name has no absolute path there: refused (issue 40, item 8),
    # where it was TSFFI_OK with "modelDir": "mtp".
    rel = run.records["relative"]
    assert (rel.status, rel.out) == (CODES["TSFFI_ERR_INVALID_ARGUMENT"], None)
    assert rel.err == (
        "model_dir resolves to the relative path \"mtp\", and the working directory it is "
        "relative to was removed (No such file or directory): a result names the directory it "
        "read by its absolute path, and this one has none; accepts an absolute path (or a "
        "relative one while the working directory exists)")
    plan = run.records["relative-plan"]
    assert (plan.status, plan.err) == (CODES["TSFFI_ERR_INVALID_ARGUMENT"], rel.err)
    assert_signals_untouched(run)


# ---------------------------------------------------------------------------
# The library copied with its package

@pytest.fixture(scope="module")
def copied_package(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("copied")
    target = root / "elsewhere" / "turbospark_ffi"
    shutil.copytree(ROOT / "turbospark_ffi", target,
                    ignore=shutil.ignore_patterns("__pycache__", "samples"))
    assert (target / LIBRARY.name).is_file()
    return target


def _assert_copy_found_itself(info: dict, copy: Path) -> None:
    assert info["library"] == str((copy / LIBRARY.name).resolve())
    assert info["package"] == str(copy.resolve()), "the copy ran another package than its own"
    # Sealed: the package's folder is reached through the library's finder,
    # never through sys.path (tests/test_sealed_runtime.py).
    assert str(copy.parent.resolve()) not in info["sysPath"]


def test_library_copied_with_its_package_finds_itself(drivers, installs, copied_package,
                                                      tmp_path):
    host = drivers.get("abi_host", library_dir=copied_package)
    script = _script(tmp_path, common_lines(installs["mtp"], tmp_path))
    run = run_host(["env", "-i", host, script], env={}, cwd="/", what="host linked to the copy")
    _assert_copy_found_itself(check_common(run), copied_package)
    assert_signals_untouched(run)
    # and the same copy through dlopen(RTLD_LOCAL)
    run = run_host([drivers.get("abi_host", dlopen=True), script,
                    copied_package / LIBRARY.name], what="dlopen host on the copy")
    _assert_copy_found_itself(check_common(run), copied_package)


def test_python_host_with_ctypes_on_the_copy_uses_the_copy(installs, copied_package, tmp_path):
    report = run_ctypes_host(copied_package / LIBRARY.name, installs["mtp"], tmp_path)
    info = json.loads(report["info"][1])
    assert info["ownsInterpreter"] is False
    assert info["package"] == str(copied_package.resolve())
    assert json.loads(report["plan"][1]) == {**PLAN_MTP, "modelDir": str(installs["mtp"])}


# ---------------------------------------------------------------------------
# The package missing

def _missing_lines(mtp: Path, spill: Path) -> list[str]:
    d = str(mtp).encode()
    args = {"build_info": (), "resolve_drafter": (d, None),
            "draft_policies": (MTP_CHOICE, None), "resolve_speculation": (None,),
            "speculation_plan": (d, b"{}"), "install_info": (d,)}
    lines = [script_line(f"{fn}-{k}", fn, args[fn], spill) for k in range(2) for fn in FUNCTIONS]
    lines += [script_line(f"{fn}-null-out", fn, args[fn], spill, nullout=True)
              for fn in FUNCTIONS]
    lines.append("probe\tnull_probe\t-\t-\t-\n")
    return lines


def check_package_missing(run, parent: Path) -> None:
    runtime, invalid = CODES["TSFFI_ERR_RUNTIME"], CODES["TSFFI_ERR_INVALID_ARGUMENT"]
    assert run.tagged("ABI") == [["4"]]  # tsffi_abi_version never needs the runtime
    for rec in run.records.values():
        assert rec.status != CODES["TSFFI_OK"], f"{rec.id}: TSFFI_OK without its package: {rec.out!r}"
        if rec.id.endswith("-null-out"):
            assert rec.status == invalid and "out_json is NULL" in rec.err, rec
            continue
        assert rec.status == runtime, (rec.id, rec.status, rec.err)
        assert rec.out is None
        assert "turbospark_ffi" in rec.err and str(parent) in rec.err, rec.err
        assert "could not be imported" in rec.err, rec.err
        # the canary gets the same verdict: every later call returns it too
        assert rec.canary_status == runtime and rec.canary_out is None
    assert run.extras["probe"].endswith("abi=4")


def test_package_missing_is_runtime_error_on_every_call(drivers, installs, tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy2(LIBRARY, alone / LIBRARY.name)
    host = drivers.get("abi_host", library_dir=alone)
    script = _script(tmp_path, _missing_lines(installs["mtp"], tmp_path))
    for cmd, what in (([host, script], "linked"), (["env", "-i", host, script], "env -i"),
                      ([drivers.get("abi_host", dlopen=True), script, alone / LIBRARY.name],
                       "dlopen")):
        run = run_host(cmd, what=f"{what} host without the package")
        check_package_missing(run, tmp_path)
        assert_signals_untouched(run, what)


def test_package_missing_even_when_a_copy_sits_beside_the_builds_cffi(drivers, installs,
                                                                      tmp_path):
    """`pip install .` puts turbospark_ffi in the same site-packages as cffi.
    The library's interpreter puts the directory of the cffi it was built
    with on sys.path, so a library copied away from its package must still
    say its package is missing -- not silently run that other copy (of any
    version). Reproduced here without a venv: the library is built with
    _cffi_backend found in a directory that also holds a turbospark_ffi."""
    import _cffi_backend
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy2(_cffi_backend.__file__, site / Path(_cffi_backend.__file__).name)
    shutil.copytree(ROOT / "turbospark_ffi", site / "turbospark_ffi",
                    ignore=shutil.ignore_patterns("__pycache__", "samples", "*.so"))
    build = (f"import sys; sys.path[:0] = [{str(site)!r}, {str(ROOT)!r}]\n"
             "import _cffi_backend, ffi_build\nfrom pathlib import Path\n"
             f"assert _cffi_backend.__file__.startswith({str(site)!r})\n"
             f"ffi_build.build(package_dir=Path({str(tmp_path / 'pkg')!r}), "
             f"tmpdir=Path({str(tmp_path / 'build')!r}))\n")
    (tmp_path / "pkg").mkdir()
    done = subprocess.run([sys.executable, "-c", build], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy2(tmp_path / "pkg" / LIBRARY.name, alone / LIBRARY.name)
    host = drivers.get("abi_host", library_dir=alone)
    run = run_host([host, _script(tmp_path, _missing_lines(installs["mtp"], tmp_path))],
                   what="host without the package (a copy beside cffi)")
    info = run.records["build_info-0"]
    assert info.status != CODES["TSFFI_OK"], (
        "the library has no package beside it, yet answered TSFFI_OK by importing another copy: "
        f"package = {json.loads(info.out)['package']}, sysPath = {json.loads(info.out)['sysPath']}")
    check_package_missing(run, tmp_path)
