"""The C ABI in process: ctypes.CDLL on the built library from the pytest
process, i.e. a host that is itself Python (the library then uses the host's
interpreter, its streams and its signal handlers, and must leave them alone).

The cases come from tests/abi_cases.py, the same table the C hosts run.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import abi_cases
from abi_cases import CASES, PREVIOUS, Call, Case, Outcome
from conftest import GARBAGE, HEADER, LIBRARY

NAMES = {"build_info": "tsffi_build_info_json", "install_info": "tsffi_install_info_json"}
@pytest.fixture(scope="session")
def lib(loaded) -> ctypes.CDLL:
    return loaded.lib


@pytest.fixture(scope="session")
def status(codes) -> dict[str, int]:
    parsed = abi_cases.header_codes(HEADER)
    assert all(parsed[k] == v for k, v in codes.items() if k in parsed), (codes, parsed)
    return {**parsed, **codes}


@pytest.fixture(scope="session")
def installs(tmp_path_factory) -> dict[str, Path]:
    paths = abi_cases.materialize(tmp_path_factory.mktemp("ctypes-installs"))
    abi_cases.verify_installs(paths)
    return paths


def last_error(lib) -> tuple[str, list[str]]:
    n = lib.tsffi_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    full = lib.tsffi_last_error(buf, n + 1)
    problems = []
    if full != n or len(buf.value) != n:
        problems.append(f"tsffi_last_error lengths disagree: {n}/{full}/{len(buf.value)}")
    return buf.value.decode("utf-8"), problems


def invoke(lib, call: Call, previous: bytes | None, prime: bool = True) -> Outcome:
    """One call, made as case_host.c makes it: last error primed by a failure,
    *out_json pre-filled with a garbage pointer."""
    if prime:
        assert lib.tsffi_build_info_json(None) == 1 and lib.tsffi_last_error(None, 0) > 0
    args = [previous if a == PREVIOUS else a for a in call.args]
    out = ctypes.c_void_p(GARBAGE)
    outp = None if call.null_out else ctypes.byref(out)
    rc = getattr(lib, NAMES.get(call.fn, "tsffi_" + call.fn))(*args, outp)
    err, problems = last_error(lib)
    untouched = False
    text = None
    if not call.null_out:
        if out.value == GARBAGE:
            untouched = True
        elif out.value is not None:
            text = ctypes.string_at(out.value).decode("utf-8")
            lib.tsffi_string_free(out)
    return Outcome(rc, text, err, untouched, problems)


def run_case(lib, case: Case, paths) -> list[Outcome]:
    outcomes, previous = [], None
    for call in abi_cases.calls_for(case, paths):
        outcome = invoke(lib, call, previous)
        if outcome.status == 0 and outcome.out is not None:
            previous = outcome.out.encode()
        outcomes.append(outcome)
    return outcomes


# ---------------------------------------------------------------------------
# The table, in process.

@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_in_process(case: Case, lib, installs, status):
    abi_cases.check(case, run_case(lib, case, installs), status, installs)


def test_whole_table_from_four_threads_at_once(lib, installs, status):
    """Every function from any thread, concurrently: four threads run the whole
    table at the same time, each with its own last error."""
    failures: list[str] = []
    barrier = threading.Barrier(4)

    def worker():
        barrier.wait()
        for case in CASES:
            try:
                abi_cases.check(case, run_case(lib, case, installs), status, installs)
            except AssertionError as exc:
                failures.append(str(exc))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_nothing_written_to_the_hosts_streams(lib, installs, capfd):
    for case in CASES:
        run_case(lib, case, installs)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


def test_dflash_note_and_refusal_verbatim(lib, installs):
    from turbospark_ffi.policy import DFLASH_AUTO_NOTE
    info = invoke(lib, Call("install_info", [os.fsencode(installs["dflash"])]), None)
    value = json.loads(info.out)
    assert (value["installHasMtpHead"], value["installHasDflash"]) == (False, True)
    choice = invoke(lib, Call("resolve_drafter", [os.fsencode(installs["dflash"]), None]), None)
    assert json.loads(choice.out)["note"] == abi_cases.DFLASH_NOTE == DFLASH_AUTO_NOTE
    refused = invoke(lib, Call("speculation_plan", [os.fsencode(installs["dflash"]),
                                                    b'{"speculation": 2}']), None)
    assert (refused.status, refused.out) == (2, None)
    assert refused.err == abi_cases.REFUSAL_PREFIX + DFLASH_AUTO_NOTE


def test_table_constants_are_the_packages():
    from turbospark_ffi import policy
    assert abi_cases.DFLASH_NOTE == policy.DFLASH_AUTO_NOTE
    assert abi_cases.SAMPLED_REASON == policy.SAMPLED_BLOCK_DRAFTER_REASON


# ---------------------------------------------------------------------------
# Functions that need no runtime, build info, the host's state.

def test_abi_version(lib):
    assert lib.tsffi_abi_version() == 4


def test_string_free_null_is_a_no_op(lib):
    lib.tsffi_string_free(None)
    lib.tsffi_string_free(None)


def test_build_info_in_a_python_host(lib, loaded):
    import turbospark_ffi
    assert loaded.first_status == 0
    info = invoke(lib, Call("build_info", []), None)
    value = json.loads(info.out)
    assert value["abiVersion"] == lib.tsffi_abi_version() == 4
    assert value["version"] == turbospark_ffi.__version__
    assert value["python"] == platform.python_version()
    assert value["library"] == os.path.realpath(LIBRARY)
    # The host's own interpreter, and the package it already imported.
    assert value["ownsInterpreter"] is False
    assert os.path.realpath(value["package"]) == os.path.realpath(
        os.path.dirname(turbospark_ffi.__file__))


def test_host_signal_handlers_unchanged_by_the_first_call(loaded):
    # Before against after, never against Python's default: pytest started
    # under nohup (SIGINT ignored) holds SIG_IGN there, and that is not ours.
    assert loaded.signals_after == loaded.signals_before
    assert signal.SIGINT in loaded.signals_before


# ---------------------------------------------------------------------------
# tsffi_last_error semantics.

REFUSE_SAMPLED = abi_cases.REFUSED_OPTIONS


def _fail(lib) -> str:
    out = ctypes.c_void_p()
    assert lib.tsffi_resolve_speculation(REFUSE_SAMPLED, ctypes.byref(out)) == 2
    assert out.value is None
    return abi_cases.REFUSED_MESSAGE


def _in_fresh_thread(fn):
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc
    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_last_error_fresh_thread_is_empty(lib):
    def fresh():
        buf = ctypes.create_string_buffer(b"untouched", 16)
        return lib.tsffi_last_error(None, 0), lib.tsffi_last_error(buf, 16), buf.value
    assert _in_fresh_thread(fresh) == (0, 0, b"")


def test_last_error_length_and_truncation(lib):
    message = _fail(lib)
    data = message.encode()
    n = len(data)
    size = n + 100  # every cap below fits the buffer
    assert lib.tsffi_last_error(None, 0) == n
    buf = ctypes.create_string_buffer(b"#" * size, size)
    assert lib.tsffi_last_error(buf, 0) == n           # cap 0: nothing written
    assert buf.raw[:5] == b"#####"
    for cap in (1, 2, 10, n - 1, n, n + 1, size):
        buf = ctypes.create_string_buffer(b"#" * size, size)
        assert lib.tsffi_last_error(buf, cap) == n, cap   # the FULL length, whatever cap
        kept = min(cap - 1, n)
        assert buf.raw[:kept] == data[:kept], cap
        assert buf.raw[kept] == 0, cap                 # NUL-terminated
        if cap < size:
            assert buf.raw[cap:cap + 1] in (b"#", b""), cap   # nothing past cap
    # Reading does not clear it.
    assert lib.tsffi_last_error(None, 0) == n


def test_last_error_truncates_at_a_character_boundary(lib):
    blocker = "\u00e9\u2014\U0001F600"
    options = json.dumps({"speculation": 2, "tsffi": {"engineBlocker": blocker}},
                         ensure_ascii=False).encode()
    out = ctypes.c_void_p()
    assert lib.tsffi_resolve_speculation(options, ctypes.byref(out)) == 2
    data = (abi_cases.REFUSAL_PREFIX + blocker).encode()
    p = len(abi_cases.REFUSAL_PREFIX.encode())
    expected_len = {p + 1: p, p + 2: p, p + 3: p + 2, p + 4: p + 2, p + 5: p + 2,
                    p + 6: p + 5, p + 7: p + 5, p + 8: p + 5, p + 9: p + 5, p + 10: p + 9}
    for cap, kept in expected_len.items():
        buf = ctypes.create_string_buffer(64 + len(data))
        assert lib.tsffi_last_error(buf, cap) == len(data)
        assert buf.value == data[:kept], cap
        buf.value.decode("utf-8")  # always whole characters


def test_last_error_left_by_abi_version_string_free_and_last_error(lib):
    out = ctypes.c_void_p()
    assert lib.tsffi_resolve_speculation(b"{}", ctypes.byref(out)) == 0
    message = _fail(lib)
    n = len(message.encode())
    lib.tsffi_abi_version()
    assert lib.tsffi_last_error(None, 0) == n
    lib.tsffi_string_free(None)
    assert lib.tsffi_last_error(None, 0) == n
    lib.tsffi_string_free(out)   # a real result
    assert lib.tsffi_last_error(None, 0) == n
    assert last_error(lib)[0] == message


@pytest.mark.parametrize("fn", ["build_info", "resolve_drafter", "draft_policies",
                                "resolve_speculation", "speculation_plan", "install_info",
                                "speculation_choices"])
def test_every_status_call_clears_the_last_error(fn, lib, installs):
    d = os.fsencode(installs["mtp"])
    args = {"build_info": [], "resolve_drafter": [d, None],
            "draft_policies": [json.dumps(abi_cases.CHOICE_MTP).encode(), b""],
            "resolve_speculation": [None], "speculation_plan": [d, b"{}"],
            "install_info": [d], "speculation_choices": [d, b"{}"]}[fn]
    _fail(lib)
    assert lib.tsffi_last_error(None, 0) > 0
    outcome = invoke(lib, Call(fn, args), None, prime=False)
    assert outcome.status == 0
    assert lib.tsffi_last_error(None, 0) == 0 and outcome.err == ""


def test_a_failure_replaces_the_message(lib):
    _fail(lib)
    out = ctypes.c_void_p()
    assert lib.tsffi_resolve_speculation(b"7", ctypes.byref(out)) == 4
    err, _ = last_error(lib)
    assert err == "options: invalid type: integer `7`, expected struct OpenOptions at line 1 " \
        "column 1"


def test_last_error_is_per_thread(lib):
    message = _fail(lib)

    def other():
        seen_before = lib.tsffi_last_error(None, 0)
        out = ctypes.c_void_p()
        rc = lib.tsffi_resolve_speculation(b"{", ctypes.byref(out))
        mine, _ = last_error(lib)
        rc_ok = lib.tsffi_resolve_speculation(b"{}", ctypes.byref(out))
        lib.tsffi_string_free(out)
        return seen_before, rc, mine, rc_ok, lib.tsffi_last_error(None, 0)

    seen_before, rc, mine, rc_ok, after_ok = _in_fresh_thread(other)
    assert seen_before == 0                     # not this thread's failure
    assert (rc, mine) == (4, "options: EOF while parsing an object at line 1 column 1")
    assert (rc_ok, after_ok) == (0, 0)
    assert last_error(lib)[0] == message        # untouched by the other thread


# ---------------------------------------------------------------------------
# TSFFI_ERR_INTERNAL: anything unexpected, caught at the boundary. Provoked by
# making the package's dispatcher misbehave inside this (host) interpreter.

@pytest.fixture
def abi_module(lib):
    from turbospark_ffi import _abi
    # The library bound this very module (the host's), so patching it reaches C.
    assert _abi._lib is not None
    return _abi


def _provoke(lib, abi_module, monkeypatch, handler) -> Outcome:
    calls = []

    def wrapped(a, b):
        calls.append((a, b))
        return handler(a, b)
    monkeypatch.setitem(abi_module._handlers, abi_module._lib.TSFFI__FN_RESOLVE_SPECULATION,
                        wrapped)
    outcome = invoke(lib, Call("resolve_speculation", [b'{"speculation": 3}']), None)
    assert calls == [(b'{"speculation": 3}', b"")], "the patched dispatcher was not reached"
    return outcome


@pytest.mark.parametrize("exc", [RuntimeError("provoked"), KeyError("provoked"),
                                 KeyboardInterrupt("provoked"), SystemExit(3)],
                         ids=["RuntimeError", "KeyError", "KeyboardInterrupt", "SystemExit"])
def test_an_unexpected_exception_is_internal(exc, lib, abi_module, monkeypatch, status, capfd):
    def boom(a, b):
        raise exc
    outcome = _provoke(lib, abi_module, monkeypatch, boom)
    assert abi_cases.check_call(outcome, status, "provoked") == []
    assert outcome.status == status["TSFFI_ERR_INTERNAL"]
    assert outcome.out is None
    assert outcome.err.startswith("internal error")
    assert type(exc).__name__ in outcome.err
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""   # no traceback into the host's stderr
    monkeypatch.undo()
    # And the library goes on working.
    ok = invoke(lib, Call("resolve_speculation", [b'{"speculation": 3}']), None)
    assert (ok.status, json.loads(ok.out)) == (0, abi_cases._spec(3, "mtp"))


def test_ok_without_a_result_is_internal(lib, abi_module, monkeypatch, status):
    outcome = _provoke(lib, abi_module, monkeypatch, lambda a, b: (0, "no result"))
    assert abi_cases.check_call(outcome, status, "provoked") == []
    assert outcome.status == status["TSFFI_ERR_INTERNAL"]
    assert outcome.err.startswith("internal error")


def test_failure_without_a_message_still_has_one(lib, abi_module, monkeypatch, status):
    outcome = _provoke(lib, abi_module, monkeypatch,
                       lambda a, b: (status["TSFFI_ERR_INTERNAL"], ""))
    assert abi_cases.check_call(outcome, status, "provoked") == []
    assert outcome.status == status["TSFFI_ERR_INTERNAL"]
    assert outcome.err.startswith("internal error")


# ---------------------------------------------------------------------------
# A fresh Python host, isolated (-I: no PYTHONPATH, no cwd on sys.path, so the
# package is NOT importable by the host), racing its very first calls from 16
# threads through ctypes.

PYTHON_HOST = textwrap.dedent(r'''
    import ctypes, json, sys, threading
    lib = ctypes.CDLL(sys.argv[1])
    out_t = ctypes.POINTER(ctypes.c_void_p)
    lib.tsffi_resolve_drafter.argtypes = [ctypes.c_char_p, ctypes.c_char_p, out_t]
    lib.tsffi_resolve_speculation.argtypes = [ctypes.c_char_p, out_t]
    lib.tsffi_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.tsffi_last_error.restype = ctypes.c_size_t
    lib.tsffi_string_free.argtypes = [ctypes.c_void_p]
    importable_before = "turbospark_ffi" in sys.modules
    barrier = threading.Barrier(16)
    results = [None] * 16

    def run(i):
        out = ctypes.c_void_p()
        barrier.wait()
        if i % 2:
            rc = lib.tsffi_resolve_speculation(b'{"speculativeDrafter": "dflash", "tsffi": {"temperature": 0.7}, "speculation": 2}', ctypes.byref(out))
        else:
            rc = lib.tsffi_resolve_drafter(sys.argv[2].encode(), None, ctypes.byref(out))
        n = lib.tsffi_last_error(None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        lib.tsffi_last_error(buf, n + 1)
        text = ctypes.string_at(out.value).decode() if out.value else None
        lib.tsffi_string_free(out)
        results[i] = [rc, text, buf.value.decode()]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"importableBefore": importable_before, "results": results}))
''')


def test_python_host_without_the_package_races_first_calls(installs, tmp_path):
    script = tmp_path / "host.py"
    script.write_text(PYTHON_HOST)
    outputs = []
    for _ in range(3):
        result = subprocess.run([sys.executable, "-I", str(script), str(LIBRARY),
                                 str(installs["dflash"])], capture_output=True, timeout=60,
                                cwd=tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        assert result.stderr == b""
        outputs.append(result.stdout)
    assert all(o == outputs[0] for o in outputs)
    value = json.loads(outputs[0])
    assert value["importableBefore"] is False
    for i, (rc, text, err) in enumerate(value["results"]):
        if i % 2:
            assert (rc, text, err) == (2, None, abi_cases.REFUSED_MESSAGE)
        else:
            assert (rc, err) == (0, "")
            assert json.loads(text) == {**abi_cases.CHOICE_NOTE,
                                        "modelDir": str(installs["dflash"])}
