"""Reliability, part 1: bad arguments through the C ABI, every function.

Every hostile argument the issue lists -- NULL for each pointer, options that
are not UTF-8, 10 MB of options, JSON nested 100,000 deep, JSON that is not an
object, non-finite and odd temperatures and blocks, strings holding \\u0000,
duplicate keys, and model directories that are empty, relative, 10,000
characters long, a file, a FIFO, without an index, unreadable, a symlink loop,
or whose model_weights.bin is a directory, a FIFO or a symlink to /dev/zero or
/dev/urandom -- is passed by a real C host (tests/reliability/abi_host.c) to
the real library. For each call the test asserts the exact status code, that
the message names the argument or file at fault, that *out stayed NULL on
failure, and that a canary call right after it still gets the right answer.
Every host run has a timeout (hang detection: a FIFO must not block), an empty
stderr, and only the host's own lines on stdout.

This module also holds the helpers the other test_reliability_* modules share
(compiling the drivers, writing call scripts, running hosts, parsing records).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from conftest import ROOT, compile_c_host, header_constants
from engine_texts import corrupt, io_failed
from installs import write_manifest
from turbospark_ffi.install_writer import arch_for

DRIVERS_DIR = ROOT / "tests" / "reliability"
HOST_TIMEOUT = 120  # seconds; hang detection only, on a noisy 2-core machine
CANARY_OUT = '{"block":3,"drafter":"mtp","reason":null}'
KNOWN_TAGS = {"ABI", "R", "X", "SIG", "SIGINT", "DONE", "T", "S", "M", "C", "P", "FATAL"}
CODES = header_constants()
GARBAGE = object()  # the host's pre-set out pointer, left untouched
PREV = object()     # "@": the previous TSFFI_OK result


# ---------------------------------------------------------------------------
# Shared helpers (imported by the other test_reliability_* modules)

class Drivers:
    """The C drivers of tests/reliability, compiled on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[tuple, Path] = {}

    def get(self, name: str, *, dlopen: bool = False, library_dir: Path | None = None) -> Path:
        key = (name, dlopen, library_dir)
        if key not in self._built:
            label = name + ("_dlopen" if dlopen else "") + (f"_{len(self._built)}"
                                                             if library_dir else "")
            out = self.root / label
            source = DRIVERS_DIR / f"{name}.c"
            if dlopen:
                compile_c_host(source, out, link_library=False, extra=["-DTSFFI_HOST_DLOPEN"])
            elif library_dir is not None:
                compile_c_host(source, out, link_library=False,
                               extra=[f"-L{library_dir}", "-ltsffi",
                                      f"-Wl,-rpath,{library_dir}"])
            else:
                compile_c_host(source, out)
            self._built[key] = out
        return self._built[key]


@pytest.fixture(scope="session")
def drivers(tmp_path_factory) -> Drivers:
    return Drivers(tmp_path_factory.mktemp("reliability-drivers"))


def encode_arg(value, spill_dir: Path) -> str:
    if value is None:
        return "-"
    if value is PREV:
        return "@"
    if isinstance(value, str):
        value = value.encode("utf-8")
    assert b"\x00" not in value, "a C string cannot hold NUL"
    if len(value) > 65536:  # megabytes go through a file, not a script line
        spill_dir.mkdir(parents=True, exist_ok=True)
        path = spill_dir / (hashlib.sha1(value).hexdigest() + ".arg")
        if not path.exists():
            path.write_bytes(value)
        return "f" + str(path)
    return "x" + value.hex()


from abi_cases import SIGNATURES  # noqa: E402  (one table of which arguments each takes)


def script_line(call_id: str, fn: str, args: tuple, spill_dir: Path, nullout: bool = False) -> str:
    assert len(args) == len(SIGNATURES.get(fn, args)), (fn, args)
    fields = [encode_arg(a, spill_dir) for a in args] + ["-", "-"]
    assert "\t" not in call_id and " " not in call_id
    return "\t".join([call_id, fn, fields[0], fields[1], "nullout" if nullout else "-"]) + "\n"


def write_script(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines))
    return path


def unescape(text: str) -> str:
    """The inverse of the drivers' escaping: \\xNN bytes, then UTF-8."""
    raw = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1] == "x":
            raw.append(int(text[i + 2:i + 4], 16))
            i += 4
        else:
            raw.append(ord(text[i]))
            i += 1
    return raw.decode("utf-8")


@dataclass
class Record:
    id: str
    status: int
    out: object  # None (NULL), GARBAGE (untouched) or the text
    err: str
    canary_status: int | None
    canary_out: str | None

    def json(self):
        assert isinstance(self.out, str), f"{self.id}: no result ({self.out!r}); error {self.err!r}"
        return json.loads(self.out)


@dataclass
class HostRun:
    lines: list[str]
    records: dict[str, Record] = field(default_factory=dict)
    extras: dict[str, str] = field(default_factory=dict)

    def tagged(self, tag: str) -> list[list[str]]:
        return [line.split("\t")[1:] for line in self.lines if line.split("\t", 1)[0] == tag]


def _parse(lines: list[str]) -> HostRun:
    run = HostRun(lines)
    for line in lines:
        parts = line.split("\t")
        if parts[0] == "R":
            _, cid, status, out, err, cstatus, cout = parts
            value = None if out == "-" else GARBAGE if out == "!" else unescape(out[1:])
            run.records[cid] = Record(cid, int(status), value, unescape(err),
                                      None if cstatus == "-" else int(cstatus),
                                      None if cout == "-" else unescape(cout))
        elif parts[0] == "X":
            run.extras[parts[1]] = parts[2]
    return run


def run_host(cmd: list, *, timeout: float = HOST_TIMEOUT, cwd=None, env=None,
             what: str = "host") -> HostRun:
    """Run a driver; the library must not crash it, hang it, or write to its
    streams. Returns the parsed records."""
    try:
        result = subprocess.run([str(c) for c in cmd], capture_output=True, timeout=timeout,
                                cwd=cwd, env=env)
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"").decode("ascii", "replace").splitlines()[-3:]
        raise AssertionError(f"{what} did not finish within {timeout} s (a hang); its last "
                             f"records were: {[t[:200] for t in tail]}") from None
    stdout = result.stdout.decode("ascii", "replace")
    if result.returncode != 0:
        how = (f"killed by {signal.Signals(-result.returncode).name}" if result.returncode < 0
               else f"exited {result.returncode}")
        raise AssertionError(f"{what} {how}; last stdout lines: "
                             f"{[t[:300] for t in stdout.splitlines()[-3:]]}; stderr: "
                             f"{result.stderr[-2000:]!r}")
    assert result.stderr == b"", f"{what}: the library wrote to the host's stderr: " \
                                 f"{result.stderr[:2000]!r}"
    lines = stdout.splitlines()
    foreign = [line[:200] for line in lines if line.split("\t", 1)[0] not in KNOWN_TAGS]
    assert not foreign, f"{what}: stdout holds lines the host did not print: {foreign[:5]}"
    assert lines and lines[-1] == "DONE", f"{what}: did not finish its script: {lines[-3:]}"
    return _parse(lines)


def assert_signals_untouched(run: HostRun, what: str = "host") -> None:
    assert run.tagged("SIG") == [["unchanged"]], f"{what}: signal dispositions changed: " \
                                                 f"{run.tagged('SIG')}"
    assert run.tagged("SIGINT") == [["host"]], f"{what}: SIGINT no longer reaches the host"


def assert_canary(rec: Record) -> None:
    assert (rec.canary_status, rec.canary_out) == (CODES["TSFFI_OK"], CANARY_OUT), (
        f"{rec.id}: the library was not usable after this call: canary got "
        f"{rec.canary_status} {rec.canary_out!r}")


def write_fixture_installs(root: Path) -> dict[str, Path]:
    """The valid installs the suites run against."""
    from turbospark_ffi.install_writer import write_install
    shapes = {"none": {}, "mtp": {"mtp": True}, "dflash": {"dflash": True},
              "both": {"mtp": True, "dflash": True}, "moe": {"mtp": True, "experts": 8}}
    return {name: write_install(root / name, **kw) for name, kw in shapes.items()}


def run_as_unprivileged_reader(cmd: list) -> tuple[list, str]:
    """A command prefix under which a mode-000 file is really unreadable.

    Root reads mode-000 files (CAP_DAC_OVERRIDE), so as root the host runs
    under setpriv with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from
    its bounding set: still uid 0, but bound by file modes like anyone."""
    if os.geteuid() != 0:
        return list(cmd), "not root: file modes apply"
    setpriv = shutil.which("setpriv")
    assert setpriv, "running as root and setpriv is missing: cannot make a file unreadable"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd], \
        "root with CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH dropped (setpriv)"


# ---------------------------------------------------------------------------
# The cases

MTP_CHOICE = b'{"drafter": "mtp", "installHasMtpHead": true, "installHasDflash": false, "note": null}'
MB10 = 10 * 1024 * 1024
DEEP = 100_000


@dataclass(frozen=True)
class Dir:
    """A model_dir by name: an install or a hostile directory of the fixture."""
    name: str


@dataclass(frozen=True)
class Case:
    id: str
    fn: str
    args: tuple
    status: str = "TSFFI_OK"
    says: tuple[str, ...] = ()          # substrings of the last error
    nullout: bool = False
    check: Callable | None = None       # on the parsed result (TSFFI_OK only)


def _eq(expected):
    def check(result):
        assert result == expected
    return check


def _eq_read(expected, read: str = "/i/mtp"):
    """`expected`, once the result's "modelDir" -- the absolute path of the
    directory read, here the fixture's install `read` -- is checked and set
    aside."""
    def check(result):
        directory = result.pop("modelDir")
        assert directory.startswith("/") and directory.endswith(read), directory
        assert result == expected
    return check


def _policies_shape(result):
    assert set(result) == {"mtp", "dflash"}, result
    for policy in result.values():
        assert policy["mode"] in ("off", "auto", "fixed"), result


OPTION_FUNCTIONS = {
    "resolve_drafter": lambda o: (Dir("mtp"), o),
    "draft_policies": lambda o: (MTP_CHOICE, o),
    "resolve_speculation": lambda o: (o,),
    "speculation_plan": lambda o: (Dir("mtp"), o),
}

RANGE = "speculation block must be in 1..=15, got "
OTHER = 'speculation must be "off", "auto" or a block in 1..=15, got '
LIMIT = 16 << 20
MB17 = 17 * 1024 * 1024
# A text of exactly `size` bytes that the open accepts (speculation 2).
def _sized(size: int) -> bytes:
    head = b'{"speculation": 2, "x": "'
    return head + b"a" * (size - len(head) - 2) + b'"}'


# (id, options bytes, status, substrings of the message). Every one of these
# is validated by every function that takes options, as the engine's open
# reads the same text (TURBOSPARK_FACTS.md section 10).
OPTION_CASES = [
    # not UTF-8
    ("utf8-ff", b"\xff\xfe", "TSFFI_ERR_INVALID_ARGUMENT",
     ("options_json is not UTF-8", "0xff at offset 0")),
    ("utf8-bad-continuation", b'{"speculation": "\xc3\x28"}', "TSFFI_ERR_INVALID_ARGUMENT",
     ("options_json is not UTF-8", "0xc3 at offset 17")),
    ("utf8-overlong", b'{"x": "\xc0\xaf"}', "TSFFI_ERR_INVALID_ARGUMENT",
     ("options_json is not UTF-8", "0xc0")),
    ("utf8-surrogate", b'{"x": "\xed\xa0\x80"}', "TSFFI_ERR_INVALID_ARGUMENT",
     ("options_json is not UTF-8", "0xed")),
    ("utf8-truncated", b'{"x": 1} \xe2\x82', "TSFFI_ERR_INVALID_ARGUMENT",
     ("options_json is not UTF-8", "0xe2")),
    # size: this library's own bound (the open has none)
    ("17mb", b'{"x": "' + b"a" * MB17 + b'"}', "TSFFI_ERR_INVALID_ARGUMENT",
     (f"options_json is {MB17 + 9} bytes", "accepts at most 16777216 bytes")),
    ("17mb-not-utf8", b"\xff" * MB17, "TSFFI_ERR_INVALID_ARGUMENT",
     (f"options_json is {MB17} bytes", "accepts at most 16777216 bytes")),
    ("16mib-exactly", _sized(LIMIT), "TSFFI_OK", ()),
    ("16mib-plus-one", _sized(LIMIT + 1), "TSFFI_ERR_INVALID_ARGUMENT",
     ("options_json is 16777217 bytes", "at most 16777216")),
    # nesting: skipped to any depth under an ignored key, as the open skips
    # it; serde's recursion limit (128) for a value the open reads
    ("deep-arrays", b"[" * DEEP + b"]" * DEEP, "TSFFI_ERR_JSON",
     ("options: recursion limit exceeded at line 1 column ",)),
    ("deep-objects", b'{"maxContext":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}",
     "TSFFI_ERR_JSON", ("options: recursion limit exceeded at line 1 column ",)),
    ("deep-under-ignored-key", b'{"x": ' + b"[" * DEEP + b"]" * DEEP + b"}", "TSFFI_OK", ()),
    ("deep-objects-under-ignored-key", b'{"x": ' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}",
     "TSFFI_OK", ()),
    ("deep-unclosed", b"[" * DEEP, "TSFFI_ERR_JSON", ("options: recursion limit exceeded",)),
    ("brackets-inside-a-string", b'{"x": "' + b"[" * DEEP + b'"}', "TSFFI_OK", ()),
    # not an object: an array is read positionally, the rest refused by serde
    ("array", b"[1, 2]", "TSFFI_ERR_REFUSED",
     ('expertCacheSlots must be "auto" or one of [8, 16, 24, 32, 48, 64, 96, 128], got 2',)),
    ("number", b"3", "TSFFI_ERR_JSON",
     ("options: invalid type: integer `3`, expected struct OpenOptions at line 1 column 1",)),
    ("string", b'"speculation"', "TSFFI_ERR_JSON",
     ('options: invalid type: string "speculation", expected struct OpenOptions at line 1 '
      "column 13",)),
    ("boolean", b"true", "TSFFI_ERR_JSON",
     ("options: invalid type: boolean `true`, expected struct OpenOptions at line 1 column 4",)),
    ("null", b"null", "TSFFI_ERR_JSON",
     ("options: invalid type: null, expected struct OpenOptions at line 1 column 4",)),
    ("whitespace-only", b"   ", "TSFFI_ERR_JSON",
     ("options: EOF while parsing a value at line 1 column 3",)),
    ("unterminated", b'{"speculation": ', "TSFFI_ERR_JSON",
     ("options: EOF while parsing a value at line 1 column 16",)),
    ("trailing-data", b'{"speculation": 2} x', "TSFFI_ERR_JSON",
     ("options: trailing characters at line 1 column 20",)),
    # temperature: in the tsffi object (status 1); not JSON at all: serde's 4
    ("temperature-NaN", b'{"tsffi": {"temperature": NaN}}', "TSFFI_ERR_JSON",
     ("options: expected value at line 1 column 27",)),
    ("temperature-Infinity", b'{"tsffi": {"temperature": Infinity}}', "TSFFI_ERR_JSON",
     ("options: expected value at line 1 column 27",)),
    ("temperature-minus-Infinity", b'{"tsffi": {"temperature": -Infinity}}', "TSFFI_ERR_JSON",
     ("options: invalid number at line 1 column 28",)),
    ("temperature-minus-zero", b'{"tsffi": {"temperature": -0.0}}', "TSFFI_OK", ()),
    ("temperature-1e999", b'{"tsffi": {"temperature": 1e999}}', "TSFFI_ERR_INVALID_ARGUMENT",
     ("tsffi.temperature: got a number too large for a double", "accepts a finite number >= 0")),
    ("temperature-negative", b'{"tsffi": {"temperature": -1}}', "TSFFI_ERR_INVALID_ARGUMENT",
     ("tsffi.temperature: got -1", "accepts a finite number >= 0")),
    ("temperature-string", b'{"tsffi": {"temperature": "0.5"}}', "TSFFI_ERR_INVALID_ARGUMENT",
     ('tsffi.temperature: got "0.5"',)),
    ("temperature-true", b'{"tsffi": {"temperature": true}}', "TSFFI_ERR_INVALID_ARGUMENT",
     ("tsffi.temperature: got true",)),
    ("temperature-top-level-ignored", b'{"temperature": -1}', "TSFFI_OK", ()),
    # blocks: the open's mapping (status 2, its message)
    ("block-2.0", b'{"speculation": 2.0}', "TSFFI_ERR_REFUSED", (RANGE + "2.0",)),
    ("block-2e0", b'{"speculation": 2e0}', "TSFFI_ERR_REFUSED", (RANGE + "2.0",)),
    ("block-string-2.5", b'{"speculation": "2.5"}', "TSFFI_ERR_REFUSED", (OTHER + '"2.5"',)),
    ("block-string-space-2", b'{"speculation": " 2"}', "TSFFI_ERR_REFUSED", (OTHER + '" 2"',)),
    ("block-string-plus-2", b'{"speculation": "+2"}', "TSFFI_OK", ()),
    ("block-minus-1", b'{"speculation": -1}', "TSFFI_ERR_REFUSED", (RANGE + "-1",)),
    ("block-2-pow-64", b'{"speculation": 18446744073709551615}', "TSFFI_ERR_REFUSED",
     (RANGE + "18446744073709551615",)),
    ("block-2-pow-32", b'{"speculation": 4294967296}', "TSFFI_ERR_REFUSED",
     (RANGE + "4294967296",)),
    ("block-true", b'{"speculation": true}', "TSFFI_ERR_REFUSED", (OTHER + "true",)),
    ("block-5000-digits", b'{"speculation": "' + b"9" * 5000 + b'"}', "TSFFI_ERR_REFUSED",
     (OTHER + '"999',)),
    # \u0000 inside strings
    ("block-with-nul", b'{"speculation": "2\\u0000"}', "TSFFI_ERR_REFUSED",
     (OTHER + '"2\\0"',)),
    ("drafter-with-nul", b'{"speculativeDrafter": "mtp\\u0000"}', "TSFFI_ERR_REFUSED",
     ('speculativeDrafter must be auto, mtp or dflash, got "mtp\\0"',)),
    ("blocker-with-nul", b'{"tsffi": {"engineBlocker": "vision\\u0000tower"}}',
     "TSFFI_ERR_INVALID_ARGUMENT", ('tsffi.engineBlocker: got "vision\\u0000tower"',
                                    "without NUL")),
    ("blocker-lone-surrogate", b'{"tsffi": {"engineBlocker": "\\ud800 vision"}}',
     "TSFFI_ERR_INVALID_ARGUMENT", ("tsffi.engineBlocker: got", "lone surrogates")),
    ("used-key-with-nul", b'{"speculation\\u0000": 2}', "TSFFI_OK", ()),
    ("ignored-key-nul", b'{"\\u0000": 1}', "TSFFI_OK", ()),
    ("lone-surrogate-key", b'{"\\ud800": 1}', "TSFFI_ERR_JSON",
     ("options: unexpected end of hex escape at line 1 column 9",)),
    # duplicate keys: serde's (status 4) for the open's keys, ours (1) in tsffi
    ("duplicate-speculation", b'{"speculation": 2, "speculation": 3}', "TSFFI_ERR_JSON",
     ("options: duplicate field `speculation` at line 1 column 32",)),
    ("duplicate-drafter", b'{"speculativeDrafter": "mtp", "speculativeDrafter": "mtp"}',
     "TSFFI_ERR_JSON", ("options: duplicate field `speculativeDrafter` at line 1 column 50",)),
    ("duplicate-temperature", b'{"tsffi": {"temperature": 0, "temperature": 0}}',
     "TSFFI_ERR_INVALID_ARGUMENT", ("tsffi.temperature: given more than once",)),
    ("duplicate-blocker", b'{"tsffi": {"engineBlocker": null, "engineBlocker": "x"}}',
     "TSFFI_ERR_INVALID_ARGUMENT", ("tsffi.engineBlocker: given more than once",)),
    ("duplicate-ignored-key", b'{"x": 1, "x": 2}', "TSFFI_OK", ()),
    ("near-miss-key", b'{"Speculation": 2}', "TSFFI_OK", ()),
]

_PLAN_MTP = {"drafter": {"drafter": "mtp", "installHasMtpHead": True, "installHasDflash": False,
                         "note": None},
             "draftPolicies": {"mtp": {"mode": "auto", "block": None},
                               "dflash": {"mode": "off", "block": None}},
             "speculation": {"block": 2, "drafter": "mtp", "reason": None},
             # At the binding's default temperature a turn does not speculate.
             "turn": {"temperature": 0.2, "speculates": False,
                      "reason": "this session drafts, but a turn speculates only at temperature "
                                "0 and this turn's temperature is 0.2 (the engine binding's "
                                "default): it decodes sequentially (send temperature 0 to "
                                "speculate)"},
             "source": "preview", "ignoredKeys": [], "warnings": []}
from original_texts import REFUSAL_PREFIX as REFUSED, SAMPLED_REASON as SAMPLED  # noqa: E402

SPECIFIC_CASES = [
    # NULL for each pointer, every function
    Case("build_info/null-out", "build_info", (), "TSFFI_ERR_INVALID_ARGUMENT",
         ("out_json is NULL",), nullout=True),
    Case("resolve_drafter/null-dir", "resolve_drafter", (None, b"{}"), "TSFFI_ERR_INVALID_ARGUMENT",
         ("model_dir is NULL", "accepts the path of an install directory")),
    Case("resolve_drafter/null-options", "resolve_drafter", (Dir("mtp"), None), "TSFFI_OK",
         check=_eq_read(_PLAN_MTP["drafter"])),
    Case("resolve_drafter/null-out", "resolve_drafter", (Dir("mtp"), b"{}"),
         "TSFFI_ERR_INVALID_ARGUMENT", ("out_json is NULL",), nullout=True),
    Case("resolve_drafter/all-null", "resolve_drafter", (None, None), "TSFFI_ERR_INVALID_ARGUMENT",
         ("out_json is NULL",), nullout=True),
    Case("draft_policies/null-choice", "draft_policies", (None, b"{}"), "TSFFI_ERR_INVALID_ARGUMENT",
         ("choice_json is NULL", "tsffi_resolve_drafter returned")),
    Case("draft_policies/null-options", "draft_policies", (MTP_CHOICE, None), "TSFFI_OK",
         check=_eq(_PLAN_MTP["draftPolicies"])),
    Case("draft_policies/null-out", "draft_policies", (MTP_CHOICE, b"{}"),
         "TSFFI_ERR_INVALID_ARGUMENT", ("out_json is NULL",), nullout=True),
    Case("draft_policies/all-null", "draft_policies", (None, None), "TSFFI_ERR_INVALID_ARGUMENT",
         ("out_json is NULL",), nullout=True),
    Case("resolve_speculation/null-options", "resolve_speculation", (None,), "TSFFI_OK",
         check=_eq({"block": 2, "drafter": "mtp", "reason": None})),
    Case("resolve_speculation/null-out", "resolve_speculation", (b"{}",),
         "TSFFI_ERR_INVALID_ARGUMENT", ("out_json is NULL",), nullout=True),
    Case("resolve_speculation/all-null", "resolve_speculation", (None,),
         "TSFFI_ERR_INVALID_ARGUMENT", ("out_json is NULL",), nullout=True),
    Case("speculation_plan/null-dir", "speculation_plan", (None, b"{}"), "TSFFI_ERR_INVALID_ARGUMENT",
         ("model_dir is NULL",)),
    Case("speculation_plan/null-options", "speculation_plan", (Dir("mtp"), None), "TSFFI_OK",
         check=_eq_read(_PLAN_MTP)),
    Case("speculation_plan/null-out", "speculation_plan", (Dir("mtp"), b"{}"),
         "TSFFI_ERR_INVALID_ARGUMENT", ("out_json is NULL",), nullout=True),
    Case("speculation_plan/all-null", "speculation_plan", (None, None), "TSFFI_ERR_INVALID_ARGUMENT",
         ("out_json is NULL",), nullout=True),
    Case("install_info/null-dir", "install_info", (None,), "TSFFI_ERR_INVALID_ARGUMENT",
         ("model_dir is NULL",)),
    Case("install_info/null-out", "install_info", (Dir("mtp"),), "TSFFI_ERR_INVALID_ARGUMENT",
         ("out_json is NULL",), nullout=True),
    Case("install_info/all-null", "install_info", (None,), "TSFFI_ERR_INVALID_ARGUMENT",
         ("out_json is NULL",), nullout=True),
    # option values whose exact answer matters
    Case("resolve_speculation/temperature-minus-zero-is-deterministic", "resolve_speculation",
         (b'{"speculation": 2, "speculativeDrafter": "dflash", "tsffi": {"temperature": -0.0}}',),
         "TSFFI_OK", check=_eq({"block": 2, "drafter": "dflash", "reason": None})),
    Case("resolve_speculation/temperature-positive-is-sampled", "resolve_speculation",
         (b'{"speculation": 2, "speculativeDrafter": "dflash", "tsffi": {"temperature": 0.5}}',),
         "TSFFI_ERR_REFUSED", (REFUSED + SAMPLED,)),
    # At the top level the open ignores it: deterministic, enabled.
    Case("resolve_speculation/top-level-temperature-is-ignored", "resolve_speculation",
         (b'{"speculation": 2, "speculativeDrafter": "dflash", "temperature": 0.5}',),
         "TSFFI_OK", check=_eq({"block": 2, "drafter": "dflash", "reason": None})),
    # A block outside 1..=15: the open's mapping refuses it (status 2).
    Case("resolve_speculation/block-16-refused", "resolve_speculation",
         (b'{"speculation": 16}',), "TSFFI_ERR_REFUSED", (RANGE + "16",)),
    Case("resolve_speculation/block-0-refused", "resolve_speculation", (b'{"speculation": 0}',),
         "TSFFI_ERR_REFUSED", (RANGE + "0",)),
    Case("resolve_speculation/block-u32-max-refused", "resolve_speculation",
         (b'{"speculation": 4294967295}',), "TSFFI_ERR_REFUSED", (RANGE + "4294967295",)),
    Case("resolve_speculation/block-leading-zeros", "resolve_speculation",
         (b'{"speculation": "0002"}',), "TSFFI_OK",
         check=_eq({"block": 2, "drafter": "mtp", "reason": None})),
    Case("resolve_speculation/16mib-exactly", "resolve_speculation",
         (_sized(LIMIT),), "TSFFI_OK",
         check=_eq({"block": 2, "drafter": "mtp", "reason": None})),
    Case("resolve_speculation/empty-options", "resolve_speculation", (b"",), "TSFFI_OK",
         check=_eq({"block": 2, "drafter": "mtp", "reason": None})),
    Case("resolve_speculation/empty-blocker", "resolve_speculation",
         (b'{"tsffi": {"engineBlocker": ""}}',), "TSFFI_ERR_INVALID_ARGUMENT",
         ('tsffi.engineBlocker: got ""',)),
    Case("speculation_plan/ignored-nul-key-listed", "speculation_plan",
         (Dir("mtp"), b'{"\\u0000": 1}'), "TSFFI_OK",
         check=_eq_read({**_PLAN_MTP, "ignoredKeys": ["\x00"]})),
    Case("speculation_plan/near-miss-listed-and-warned", "speculation_plan",
         (Dir("mtp"), b'{"Speculation": "off"}'), "TSFFI_OK",
         check=_eq_read({**_PLAN_MTP, "ignoredKeys": ["Speculation"], "warnings": [
             '"Speculation" is not a key the engine\'s open reads, so it ignores it (and so '
             'does this preview); did you mean "speculation"?']})),
    Case("speculation_plan/duplicate-ignored-key-listed-once", "speculation_plan",
         (Dir("mtp"), b'{"x": 1, "x": 2}'), "TSFFI_OK",
         check=_eq_read({**_PLAN_MTP, "ignoredKeys": ["x"]})),
    Case("speculation_plan/brackets-inside-a-string", "speculation_plan",
         (Dir("mtp"), b'{"x": "' + b"[" * DEEP + b'"}'), "TSFFI_OK",
         check=_eq_read({**_PLAN_MTP, "ignoredKeys": ["x"]})),
    # choice_json
    Case("draft_policies/choice-not-utf8", "draft_policies", (b'{"drafter": "\xff"}', None),
         "TSFFI_ERR_INVALID_ARGUMENT", ("choice_json is not UTF-8", "0xff")),
    Case("draft_policies/choice-empty", "draft_policies", (b"", None), "TSFFI_ERR_JSON",
         ("choice_json is not valid JSON",)),
    # Refused by size before any of it is parsed, like options_json.
    Case("draft_policies/choice-17mb-whitespace", "draft_policies", (b" " * MB17, None),
         "TSFFI_ERR_INVALID_ARGUMENT", ("choice_json is 17825792 bytes; accepts at most 16777216",)),
    Case("draft_policies/choice-17mb-key", "draft_policies",
         (MTP_CHOICE[:-1] + b', "' + b"k" * MB17 + b'": 1}', None), "TSFFI_ERR_INVALID_ARGUMENT",
         ("choice_json is", "bytes; accepts at most 16777216")),
    Case("draft_policies/choice-long-key", "draft_policies",
         (MTP_CHOICE[:-1] + b', "' + b"k" * 100_000 + b'": 1}', None), "TSFFI_ERR_INVALID_ARGUMENT",
         ('choice_json: unknown key "kkk', 'kk...; accepts exactly the keys')),
    Case("draft_policies/choice-deep", "draft_policies", (b"[" * DEEP + b"]" * DEEP, None),
         "TSFFI_ERR_JSON", ("choice_json nests 100000 levels deep", "at most 64")),
    Case("draft_policies/choice-array", "draft_policies", (b"[]", None), "TSFFI_ERR_JSON",
         ("choice_json must be a JSON object, got an array",)),
    Case("draft_policies/choice-string", "draft_policies", (b'"mtp"', None), "TSFFI_ERR_JSON",
         ("choice_json must be a JSON object, got a string",)),
    Case("draft_policies/choice-NaN", "draft_policies",
         (MTP_CHOICE.replace(b"null", b"NaN"), None), "TSFFI_ERR_JSON",
         ("choice_json is not valid JSON", "NaN is not JSON")),
    Case("draft_policies/choice-missing-key", "draft_policies",
         (b'{"drafter": "mtp", "installHasMtpHead": true, "installHasDflash": false}', None),
         "TSFFI_ERR_INVALID_ARGUMENT", ("choice_json: missing key note",)),
    Case("draft_policies/choice-extra-key", "draft_policies",
         (MTP_CHOICE[:-1] + b', "extra": 1}', None), "TSFFI_ERR_INVALID_ARGUMENT",
         ('choice_json: unknown key "extra"',)),
    Case("draft_policies/choice-duplicate-key", "draft_policies",
         (MTP_CHOICE[:-1] + b', "drafter": "mtp"}', None), "TSFFI_ERR_INVALID_ARGUMENT",
         ('choice_json: key "drafter" given more than once',)),
    Case("draft_policies/choice-bad-drafter", "draft_policies",
         (MTP_CHOICE.replace(b'"mtp"', b'"eagle"'), None), "TSFFI_ERR_INVALID_ARGUMENT",
         ('choice_json: drafter: got "eagle"',)),
    Case("draft_policies/choice-drafter-with-nul", "draft_policies",
         (MTP_CHOICE.replace(b'"mtp"', b'"mtp\\u0000"'), None), "TSFFI_ERR_INVALID_ARGUMENT",
         ('choice_json: drafter: got "mtp\\u0000"',)),
    Case("draft_policies/choice-note-with-nul", "draft_policies",
         (MTP_CHOICE.replace(b"null", b'"a\\u0000b"'), None), "TSFFI_OK",
         check=lambda r: _policies_shape(r)),
    Case("draft_policies/choice-flag-is-1", "draft_policies",
         (MTP_CHOICE.replace(b"true", b"1"), None), "TSFFI_ERR_INVALID_ARGUMENT",
         ("choice_json: installHasMtpHead: got 1", "true, false or null")),
    Case("draft_policies/choice-note-is-5", "draft_policies",
         (MTP_CHOICE.replace(b"null", b"5"), None), "TSFFI_ERR_INVALID_ARGUMENT",
         ("choice_json: note: got 5",)),
]

# model_dir values that are refused outright
DIR_REFUSALS = [
    ("empty", b"", ("model_dir is empty",)),
    ("not-utf8", b"/tmp/\xff/x", ("model_dir is not UTF-8", "0xff at offset 5")),
    ("not-utf8-overlong", b"/tmp/\xc0\xaf", ("model_dir is not UTF-8", "0xc0")),
]
DIR_FUNCTIONS = {
    "resolve_drafter": lambda d: (d, None),
    "speculation_plan": lambda d: (d, None),
    "install_info": lambda d: (d,),
}

# Hostile model directories: for resolve_drafter and install info TSFFI_OK,
# everything unknown, and the reason (which names model_weights.bin and what
# is wrong with it) in indexError; a plan fails as the open does, with the
# same reason as its message (or the open's refusal of a name that is not a
# directory).
# The reason each hostile install gives, whole. A failed open and a corrupt
# index are the engine's texts (engine_texts.py): "open failed: " and the OS
# error as the engine's io::Error shows it, without the path. A file that is
# not a regular one is refused before any read, so that a FIFO cannot block
# the host (the engine would wait on it): that text is this library's, and
# names the file ({weights}).
NOT_REGULAR = "read failed: {weights} is %s, not a regular file"
HOSTILE_DIRS = {
    "relative-missing": io_failed("open", errno.ENOENT),
    "10000-chars": io_failed("open", errno.ENAMETOOLONG),
    "10000-chars-of-components": io_failed("open", errno.ENAMETOOLONG),
    "a-file": io_failed("open", errno.ENOTDIR),
    "a-fifo": io_failed("open", errno.ENOTDIR),
    "no-index": io_failed("open", errno.ENOENT),
    "symlink-loop": io_failed("open", errno.ELOOP),
    "weights-directory": NOT_REGULAR % "a directory",
    "weights-fifo": NOT_REGULAR % "a FIFO",
    "weights-dev-zero": NOT_REGULAR % "a character device",
    "weights-dev-urandom": NOT_REGULAR % "a character device",
    "weights-symlink-loop": io_failed("open", errno.ELOOP),
    "weights-dangling-symlink": io_failed("open", errno.ENOENT),
    "weights-empty-file": corrupt("short_header"),
}
UNREADABLE_DIRS = {
    "weights-mode-000": io_failed("open", errno.EACCES),
    "dir-mode-000": io_failed("open", errno.EACCES),
}
# What the engine's open says of each, where it refuses the install before
# its index ({dir}: the model_dir as passed): a name that is not a directory.
NOT_A_DIRECTORY = "{dir} is not a directory (and matched no installed alias)"
NOT_DIRECTORIES = {"relative-missing", "10000-chars", "10000-chars-of-components", "a-file",
                   "a-fifo", "symlink-loop"}
# The functions that answer as the open does: the install's refusal is theirs.
OPENING = ("speculation_plan", "speculation_choices")


def _make_hostile(root: Path) -> dict[str, bytes]:
    """Create the hostile model directories under root (the host's cwd)."""
    paths: dict[str, bytes] = {}

    def weights_dir(name: str) -> Path:
        # A valid manifest, so the open gets as far as the index.
        d = root / name
        d.mkdir()
        write_manifest(d, arch_for([]))
        return d / "model_weights.bin"

    paths["relative-missing"] = b"no/such/install"
    paths["10000-chars"] = str(root / ("a" * (10_000 - len(str(root)) - 1))).encode()
    paths["10000-chars-of-components"] = (str(root) + "/x" * 5000)[:10_000].encode()
    (root / "a-file").write_bytes(b"not a directory")
    os.mkfifo(root / "a-fifo")
    (root / "no-index").mkdir()
    write_manifest(root / "no-index", arch_for([]))
    os.symlink("symlink-loop-b", root / "symlink-loop")
    os.symlink("symlink-loop", root / "symlink-loop-b")
    weights_dir("weights-directory").mkdir()
    os.mkfifo(weights_dir("weights-fifo"))
    os.symlink("/dev/zero", weights_dir("weights-dev-zero"))
    os.symlink("/dev/urandom", weights_dir("weights-dev-urandom"))
    os.symlink("model_weights.bin", weights_dir("weights-symlink-loop"))
    os.symlink("gone.bin", weights_dir("weights-dangling-symlink"))
    weights_dir("weights-empty-file").write_bytes(b"")
    for name in HOSTILE_DIRS:
        paths.setdefault(name, str(root / name).encode())
    assert len(paths["10000-chars"]) == 10_000 and len(paths["10000-chars-of-components"]) == 10_000
    return paths


def _all_cases() -> list[Case]:
    cases = list(SPECIFIC_CASES)
    for fn, make in OPTION_FUNCTIONS.items():
        for cid, options, status, says in OPTION_CASES:
            cases.append(Case(f"{fn}/options-{cid}", fn, make(options), status, says))
    for fn, make in DIR_FUNCTIONS.items():
        for cid, raw, says in DIR_REFUSALS:
            cases.append(Case(f"{fn}/model-dir-{cid}", fn, make(raw), "TSFFI_ERR_INVALID_ARGUMENT",
                              says))
    return cases


CASES = _all_cases()
HOSTILE_CALLS = [(fn, name) for name in HOSTILE_DIRS for fn in DIR_FUNCTIONS]


def _resolve(args: tuple, dirs: dict) -> tuple:
    return tuple(dirs[a.name] if isinstance(a, Dir) else a for a in args)


@pytest.fixture(scope="module")
def inputs_run(tmp_path_factory, drivers):
    """ONE host process makes every call above, each followed by a canary."""
    root = tmp_path_factory.mktemp("inputs")
    dirs: dict = {k: str(v).encode() for k, v in write_fixture_installs(root / "i").items()}
    dirs.update(_make_hostile(root))
    # a valid index whose packed_experts/layout.json is a FIFO
    from turbospark_ffi.install_writer import write_install
    fifo_layout = write_install(root / "layout-fifo", mtp=True)
    (fifo_layout / "packed_experts" / "layout.json").unlink()
    os.mkfifo(fifo_layout / "packed_experts" / "layout.json")
    dirs["layout-fifo"] = str(fifo_layout).encode()
    lines = [script_line(c.id, c.fn, _resolve(c.args, dirs), root / "spill", c.nullout)
             for c in CASES]
    lines += [script_line(f"{fn}/hostile-{name}", fn, DIR_FUNCTIONS[fn](dirs[name]),
                          root / "spill") for fn, name in HOSTILE_CALLS]
    lines += [script_line(f"{fn}/layout-fifo", fn, DIR_FUNCTIONS[fn](dirs["layout-fifo"]),
                          root / "spill") for fn in DIR_FUNCTIONS]
    lines += [script_line(f"{fn}/relative-install", fn, DIR_FUNCTIONS[fn](b"i/mtp"),
                          root / "spill") for fn in DIR_FUNCTIONS]
    lines += [script_line(f"{fn}/dot-segments", fn,
                          DIR_FUNCTIONS[fn](b"./i/none/../mtp//"), root / "spill")
              for fn in DIR_FUNCTIONS]
    lines.append("null-probe\tnull_probe\t-\t-\t-\n")
    script = write_script(root / "script.txt", lines)
    run = run_host([drivers.get("abi_host"), script], cwd=root, what="abi_host (bad inputs)")
    shutil.rmtree(root / "spill")  # megabytes of arguments, no longer needed
    assert len(run.records) == len(lines) - 1, "some calls produced no record"
    return run, dirs


def _check_record(rec: Record, status: str, says: tuple[str, ...], nullout: bool = False):
    assert rec.status == CODES[status], (
        f"{rec.id}: expected {status} ({CODES[status]}), got {rec.status}; message {rec.err!r}")
    assert_canary(rec)
    if rec.status == CODES["TSFFI_OK"]:
        assert rec.err == "", f"{rec.id}: TSFFI_OK left a last error: {rec.err!r}"
        assert isinstance(rec.out, str)
        return rec.json()
    assert rec.out is (GARBAGE if nullout else None), f"{rec.id}: *out is {rec.out!r} on failure"
    for part in says:
        assert part in rec.err, f"{rec.id}: message {rec.err[:500]!r} does not say {part!r}"
    return None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_argument_gets_its_documented_status_and_message(case: Case, inputs_run):
    run, _ = inputs_run
    result = _check_record(run.records[case.id], case.status, case.says, case.nullout)
    if case.check is not None:
        case.check(result)


def test_messages_quote_values_as_the_open_does(inputs_run):
    """A refusal of the open's mapping is the engine's message byte for byte, so
    a 5000-digit block comes back whole, as the open echoes it (its size is
    bounded by the input's, which LIMITS bounds)."""
    run, _ = inputs_run
    for fn in OPTION_FUNCTIONS:
        err = run.records[f"{fn}/options-block-5000-digits"].err
        assert err == OTHER + '"' + "9" * 5000 + '"', err[:200]


def _unknown_flags(result: dict) -> None:
    assert (result["installHasMtpHead"], result["installHasDflash"]) == (None, None)


@pytest.mark.parametrize("fn,name", HOSTILE_CALLS, ids=[f"{fn}/{n}" for fn, n in HOSTILE_CALLS])
def test_hostile_model_dir_is_an_unknown_install_or_the_opens_refusal(fn, name, inputs_run):
    """The original module's resolve_drafter and install info answer an
    unreadable install as "unknown", with the reader's reason; a plan (and
    a choices table) fails as the engine's open fails on it: status 2, the
    open's message (ABI 4)."""
    run, dirs = inputs_run
    model_dir = dirs[name].decode()
    if fn in OPENING:
        weights = os.path.join(model_dir, "model_weights.bin")
        message = (NOT_A_DIRECTORY.format(dir=model_dir) if name in NOT_DIRECTORIES
                   else HOSTILE_DIRS[name].format(weights=weights))
        _check_record(run.records[f"{fn}/hostile-{name}"], "TSFFI_ERR_REFUSED", ())
        assert run.records[f"{fn}/hostile-{name}"].err == message
        return
    result = _check_record(run.records[f"{fn}/hostile-{name}"], "TSFFI_OK", ())
    check_unknown_install(fn, result, model_dir, HOSTILE_DIRS[name])


def check_unknown_install(fn: str, result: dict, model_dir: str, reason_is: str) -> None:
    """An unreadable index answers "unknown" (null flags), never "absent", and
    says why: `reason_is`, whole ({weights} the file it names)."""
    weights = os.path.join(model_dir, "model_weights.bin")
    # The directory read: the path itself, made absolute (a relative one from
    # the host's working directory).
    read = result.pop("modelDir")
    if model_dir.startswith("/"):
        assert read == model_dir
    else:
        assert read.startswith("/") and read.endswith("/" + model_dir), read
    if fn == "resolve_drafter":
        assert result == {"drafter": "mtp", "installHasMtpHead": None, "installHasDflash": None,
                          "note": None}
        return
    if fn == "install_info":
        assert result["indexReadable"] is False
        _unknown_flags(result)
        reason = result["indexError"]
        assert isinstance(result["indexCheck"], str) and result["indexCheck"]
    else:
        _unknown_flags(result["drafter"])
        assert result["speculation"]["block"] is None
        reason = result["speculation"]["reason"]
    assert reason == reason_is.format(weights=weights), (reason[:300], weights[:100])


@pytest.mark.parametrize("fn", list(DIR_FUNCTIONS))
def test_layout_fifo_does_not_block_and_is_reported(fn, inputs_run):
    run, _ = inputs_run
    result = _check_record(run.records[f"{fn}/layout-fifo"], "TSFFI_OK", ())
    if fn == "install_info":
        assert result["indexReadable"] is True and result["installHasMtpHead"] is True
        assert "packed_experts/layout.json is not a regular file" in result["experts"]["error"]
    elif fn == "resolve_drafter":
        assert result["installHasMtpHead"] is True
    else:
        # No decision reads the layout (the manifest gives the expert
        # count), so the plan is the open's: it drafts.
        assert result["drafter"]["installHasMtpHead"] is True
        assert result["speculation"] == {"block": 2, "drafter": "mtp", "reason": None}


@pytest.mark.parametrize("fn", list(DIR_FUNCTIONS))
def test_relative_model_dir_is_read_against_the_hosts_cwd(fn, inputs_run):
    run, dirs = inputs_run
    root = os.path.dirname(os.path.dirname(dirs["mtp"].decode()))
    for variant, read in (("relative-install", "i/mtp"), ("dot-segments", "i/none/../mtp//")):
        result = _check_record(run.records[f"{fn}/{variant}"], "TSFFI_OK", ())
        # Read relative to the host's working directory, and named so.
        assert result["modelDir"] == os.path.join(root, read), variant
        flags = result["drafter"] if fn == "speculation_plan" else result
        assert (flags["installHasMtpHead"], flags["installHasDflash"]) == (True, False), variant


def test_functions_without_status_take_null(inputs_run):
    """tsffi_last_error(NULL, n), tsffi_last_error(buf, 0) and tsffi_string_free(NULL)."""
    run, _ = inputs_run
    message = "out_json is NULL; accepts the address of a char * to receive the result"
    n = len(message)
    assert run.extras["null-probe"] == (f"len={n} nullcap={n} cap0={n} untouched=1 "
                                        f"after_free_null={n} abi=4")


def test_bad_inputs_never_touch_the_hosts_signals(inputs_run):
    run, _ = inputs_run
    assert_signals_untouched(run, "abi_host (bad inputs)")


# ---------------------------------------------------------------------------
# Unreadable files: a separate host, bound by file modes even as root.

@pytest.fixture(scope="module")
def unreadable_run(tmp_path_factory, drivers):
    from turbospark_ffi.install_writer import write_install
    root = tmp_path_factory.mktemp("unreadable")
    paths = {}
    a = write_install(root / "weights-mode-000", mtp=True)
    (a / "model_weights.bin").chmod(0)
    paths["weights-mode-000"] = a
    b = write_install(root / "dir-mode-000", mtp=True)
    b.chmod(0)
    paths["dir-mode-000"] = b
    control = write_install(root / "control", mtp=True)
    lines = [script_line(f"{fn}/{name}", fn, DIR_FUNCTIONS[fn](str(path).encode()), root)
             for name, path in paths.items() for fn in DIR_FUNCTIONS]
    lines += [script_line(f"{fn}/control", fn, DIR_FUNCTIONS[fn](str(control).encode()), root)
              for fn in DIR_FUNCTIONS]
    script = write_script(root / "script.txt", lines)
    cmd, how = run_as_unprivileged_reader([drivers.get("abi_host"), script])
    try:
        run = run_host(cmd, what=f"abi_host (unreadable files; {how})")
    finally:
        b.chmod(0o755)
    return run, paths, how


@pytest.mark.parametrize("fn", list(DIR_FUNCTIONS))
@pytest.mark.parametrize("name", list(UNREADABLE_DIRS))
def test_unreadable_index_is_unknown_with_permission_denied(fn, name, unreadable_run):
    run, paths, how = unreadable_run
    if fn in OPENING:
        # The open fails where it first cannot read: the manifest inside an
        # unreadable directory, else the index.
        _check_record(run.records[f"{fn}/{name}"], "TSFFI_ERR_REFUSED", ())
        manifest = os.path.join(str(paths[name]), "manifest.json")
        assert run.records[f"{fn}/{name}"].err == {
            "weights-mode-000": io_failed("open", errno.EACCES),
            "dir-mode-000": f"no manifest.json at {manifest}: "
                            f"{os.strerror(errno.EACCES)} (os error {errno.EACCES})"}[name], how
    else:
        result = _check_record(run.records[f"{fn}/{name}"], "TSFFI_OK", ())
        check_unknown_install(fn, result, str(paths[name]), UNREADABLE_DIRS[name])
    # the same host still reads a readable install right after
    control = _check_record(run.records[f"{fn}/control"], "TSFFI_OK", ())
    flags = control["drafter"] if fn == "speculation_plan" else control
    assert flags["installHasMtpHead"] is True, how
