"""The C ABI out of process: small C hosts (tests/c/*.c) compiled with the
system compiler against include/tsffi.h, run as fresh processes, their
stdout compared exactly and their stderr required empty.

The cases come from tests/abi_cases.py, the same table the in-process ctypes
tests run, so the two layers cannot drift apart.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import abi_cases
from abi_cases import CASES, INSTALLS, Case
from conftest import C_FLAGS, HEADER, LIBRARY, ROOT, compile_c_host

C_DIR = Path(__file__).resolve().parent / "c"
TIMEOUT = 60


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, timeout=TIMEOUT, **kw)


def stdout_lines(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, (
        f"host exited {result.returncode}\nstdout:\n{result.stdout.decode(errors='replace')}"
        f"\nstderr:\n{result.stderr.decode(errors='replace')}")
    return result.stdout.decode("ascii").splitlines()


def escape(text: str) -> str:
    """What the hosts print for a string (the inverse of abi_cases.unescape)."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02x}"
                   for b in text.encode("utf-8"))


# ---------------------------------------------------------------------------
# Fixtures: status codes, installs, hosts (each compiled once per session), host runs.

@pytest.fixture(scope="session")
def status(codes) -> dict[str, int]:
    """The header's codes. conftest's `codes` is consulted too, and must agree
    wherever it has a value."""
    parsed = abi_cases.header_codes(HEADER)
    assert all(parsed[k] == v for k, v in codes.items() if k in parsed), (codes, parsed)
    return {**parsed, **codes}


def test_the_packages_status_numbers_are_the_headers(codes):
    """errors.py is the one Python source of the numbers (the choices table's
    per-item status, the command line's exit statuses, _abi's mapping):
    each is the header's."""
    from turbospark_ffi import cli
    from turbospark_ffi.errors import (STATUS_OK, InvalidArgument, JsonArgumentError,
                                       ResidentIndexError, SpeculationRefused)
    assert STATUS_OK == codes["TSFFI_OK"]
    assert InvalidArgument.status == codes["TSFFI_ERR_INVALID_ARGUMENT"]
    assert JsonArgumentError.status == codes["TSFFI_ERR_JSON"]
    assert SpeculationRefused.status == codes["TSFFI_ERR_REFUSED"]
    assert ResidentIndexError.status is None   # never reaches the boundary
    assert (cli.EXIT_OK, cli.EXIT_REFUSED) == (codes["TSFFI_OK"], codes["TSFFI_ERR_REFUSED"])


def test_header_status_codes_are_the_contracts(codes):
    parsed = {**abi_cases.header_codes(HEADER), **codes}
    for name, number in abi_cases.CONTRACT_CODES.items():
        assert parsed.get(name) == number, (name, parsed.get(name))


@pytest.fixture(scope="session")
def installs(tmp_path_factory) -> dict[str, Path]:
    paths = abi_cases.materialize(tmp_path_factory.mktemp("installs"))
    abi_cases.verify_installs(paths)
    return paths


class Hosts:
    """Compiles each driver at most once per session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[str, Path] = {}

    def get(self, name: str, source: str | None = None, **kw) -> Path:
        if name not in self.built:
            self.built[name] = compile_c_host(C_DIR / (source or f"{name}.c"),
                                              self.root / name, **kw)
        return self.built[name]

    def linked(self) -> Path:
        return self.get("case_host")

    def dlopen(self) -> Path:
        return self.get("case_host_dlopen", "case_host.c", link_library=False,
                        extra=["-DTSFFI_HOST_DLOPEN"])


@pytest.fixture(scope="session")
def hosts(tmp_path_factory) -> Hosts:
    return Hosts(tmp_path_factory.mktemp("hosts"))


@pytest.fixture(scope="session")
def case_file(tmp_path_factory, installs):
    lines, spans = abi_cases.case_file_lines(CASES, installs)
    path = tmp_path_factory.mktemp("cases") / "cases.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path, spans


VARIANTS = ("linked", "dlopen", "env-i", "dlopen-env-i")


def _command(variant: str, hosts: Hosts, case_path: Path) -> list:
    if variant.startswith("dlopen"):
        cmd = [hosts.dlopen(), case_path, LIBRARY]
    else:
        cmd = [hosts.linked(), case_path]
    if variant.endswith("env-i"):
        cmd = ["env", "-i"] + cmd
    return cmd


@pytest.fixture(scope="session")
def host_runs(hosts, case_file):
    """Every case through every host variant: one process per variant."""
    path, _ = case_file
    return {variant: run(_command(variant, hosts, path)) for variant in VARIANTS}


def outcomes_of(result, spans, cases=CASES):
    lines = stdout_lines(result)
    assert lines[0] == "abi 4", lines[:1]
    assert lines[-1] == "done", lines[-1:]
    body = lines[1:-1]
    assert len(body) == spans[-1].stop, "one output line per call"
    per_case = {}
    for case, span in zip(cases, spans):
        calls = [line.split(" ", 1)[0] for line in body[span]]
        per_case[case.id] = [abi_cases.parse_host_line(line, fn)
                             for line, fn in zip(body[span], calls)]
        expected_fns = [c.fn for c in abi_cases.calls_for(case, {k: Path("/") for k in INSTALLS})]
        assert calls == expected_fns, (case.id, calls)
    return per_case


# ---------------------------------------------------------------------------
# The table, through C.

@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_through_c(case: Case, variant, host_runs, case_file, status, installs):
    _, spans = case_file
    outcomes = outcomes_of(host_runs[variant], spans)
    abi_cases.check(case, outcomes[case.id], status, installs)


@pytest.mark.parametrize("variant", VARIANTS)
def test_library_writes_nothing_to_the_hosts_streams(variant, host_runs, case_file):
    """Across every case (failures included): stderr empty, stdout only the
    host's own lines."""
    result = host_runs[variant]
    assert result.stderr == b""
    _, spans = case_file
    lines = stdout_lines(result)
    assert len(lines) == spans[-1].stop + 2
    assert all(line == "abi 4" or line == "done" or line.split(" ", 1)[0] in abi_cases.FUNCTIONS
               for line in lines)


@pytest.mark.parametrize("variant", VARIANTS[1:])
def test_every_host_variant_prints_the_same_lines(variant, host_runs):
    """dlopen(RTLD_LOCAL), env -i: the library finds itself and answers the same."""
    assert host_runs[variant].stdout == host_runs["linked"].stdout


def test_dlopen_host_is_not_linked_to_the_library(hosts):
    """The dlopen variant reaches the library only through dlopen/dlsym."""
    needed = run(["ldd", hosts.dlopen()]).stdout.decode()
    assert "turbospark" not in needed and "libpython" not in needed, needed
    assert "turbospark" in run(["ldd", hosts.linked()]).stdout.decode()


def test_output_never_changes_between_runs(hosts, case_file, host_runs):
    path, _ = case_file
    again = run(_command("linked", hosts, path))
    assert again.stderr == b""
    assert again.stdout == host_runs["linked"].stdout


def test_dflash_note_and_refusal_verbatim_through_c(host_runs, case_file, installs):
    """The two messages a GUI shows, byte for byte, read through the C ABI
    (and the install really is DFlash2-only, by the Python reader)."""
    from turbospark_ffi.resident_index import (install_has_dflash, install_has_mtp_head,
                                               load_resident_index)
    index = load_resident_index(str(installs["dflash"] / "model_weights.bin"))
    assert install_has_mtp_head(index) is False and install_has_dflash(index) is True
    _, spans = case_file
    outcomes = outcomes_of(host_runs["linked"], spans)
    (choice,) = outcomes["drafter-dflash-only-note"]
    assert json.loads(choice.out)["note"] == abi_cases.DFLASH_NOTE
    (plan,) = outcomes["plan-dflash-only-auto-note"]
    assert json.loads(plan.out)["speculation"]["reason"] == abi_cases.DFLASH_NOTE
    (refused,) = outcomes["plan-dflash-only-block-refused"]
    assert refused.status == 2
    assert refused.err == abi_cases.REFUSAL_PREFIX + abi_cases.DFLASH_NOTE
    assert refused.out is None


def test_build_info_through_c(host_runs, case_file):
    import turbospark_ffi
    _, spans = case_file
    (info,) = outcomes_of(host_runs["linked"], spans)["build-info"]
    value = json.loads(info.out)
    assert value["abiVersion"] == 4
    assert value["version"] == turbospark_ffi.__version__
    assert value["python"] == platform.python_version()
    assert value["library"] == os.path.realpath(LIBRARY)
    assert value["ownsInterpreter"] is True
    assert os.path.realpath(value["package"]) == os.path.realpath(LIBRARY.parent)


def test_build_info_under_env_i_pins_the_built_python(host_runs, case_file):
    """Under env -i (no PATH, no PYTHONHOME) the interpreter's home and
    standard library are the ones the library was built with."""
    import sysconfig
    _, spans = case_file
    (info,) = outcomes_of(host_runs["env-i"], spans)["build-info"]
    value = json.loads(info.out)
    assert value["python"] == platform.python_version()
    assert os.path.realpath(value["pythonHome"]) == os.path.realpath(sys.base_prefix)
    assert sysconfig.get_path("stdlib") in value["sysPath"]


# ---------------------------------------------------------------------------
# Last error, threads, signals.

def _utf8_cut(message: str, cap: int) -> int:
    """Bytes tsffi_last_error copies for `cap`: at most cap - 1, never half a character."""
    data = message.encode("utf-8")
    n = min(len(data), max(cap - 1, 0))
    while n > 0 and n < len(data) and (data[n] & 0xC0) == 0x80:
        n -= 1
    return n


def test_last_error_semantics(hosts, installs):
    refused = abi_cases.REFUSED_MESSAGE
    L = len(refused.encode())
    utf8 = abi_cases.REFUSAL_PREFIX + "\u00e9\u2014\U0001F600"
    U = len(utf8.encode())
    expected = [
        "fresh len=0", "fresh ret=0", 'fresh buf ""',
        "kept status=0 set=1",
        f"refused status=2 len={L}",
        f"full ret={L} strlen={L}",
        f'full "{escape(refused)}"',
        f"cap0 ret={L}", 'cap0 buf "untouched"',
        f"cap1 ret={L}", 'cap1 buf ""', 'cap1 after "ntouched"',
    ]
    for cap in (2, 9, 10, 40):
        expected += [f"cap{cap} ret={L}", f'cap{cap} buf "{escape(refused[:cap - 1])}"',
                     f"cap{cap} beyond=#"]
    expected += [
        f"capL ret={L} strlen={L - 1} beyond=#",
        f"capL+1 ret={L} strlen={L} beyond=#",
        f"reread len={L}", f"abi_version=4 len={L}",
        f"string_free(NULL) len={L}", f"string_free(result) len={L}",
        "replaced status=4 len_changed=1",
        "replaced mentions_serde_eof=1 mentions_block=0",
    ]
    for fn in ("tsffi_build_info_json", "tsffi_resolve_drafter", "tsffi_draft_policies",
               "tsffi_resolve_speculation", "tsffi_speculation_plan", "tsffi_install_info_json",
               "tsffi_speculation_choices", "tsffi_store_json", "tsffi_reconcile"):
        expected.append(f"cleared by {fn}: status=0 before={L} after=0")
    expected.append("null out status=1 mentions_out_json=1 mentions_block=0")
    expected.append(f"utf8 status=2 len={U}")
    for cap in range(U - 9, U + 2):
        expected.append(f"utf8 cap=L{cap - U:+d} ret={U} strlen={_utf8_cut(utf8, cap)}")
    expected += [
        "thread fresh len=0", 'thread fresh buf ""',
        "thread status=4 len_is_strlen=1 mentions_serde_eof=1",
        "main after thread failure len_same=1",
        f'main msg "{escape(refused)}"',
        "thread ok status=0; main len_same=1",
        "done",
    ]
    result = run([hosts.get("last_error"), installs["mtp"]])
    assert result.stderr == b""
    assert stdout_lines(result) == expected


def _race_expected(installs) -> list[str]:
    # Exactly the bytes: each result ends with the directory it read.
    read = {"modelDir": str(installs["dflash"])}
    note_plan = json.dumps({**abi_cases._plan(abi_cases.CHOICE_NOTE, abi_cases.OFF_OFF,
                                              abi_cases._spec(None, None,
                                                              abi_cases.DFLASH_NOTE)),
                            **read}, separators=(",", ":"))
    note_choice = json.dumps({**abi_cases.CHOICE_NOTE, **read}, separators=(",", ":"))
    lines = []
    for i in range(16):
        op = i % 4
        if op == 0:
            lines.append(f"t{i:02d} build_info status=0 err_len_ok=1 err= out=abiVersion=4")
        elif op == 1:
            lines.append(f"t{i:02d} refused status=2 err_len_ok=1 "
                         f"err={escape(abi_cases.REFUSED_MESSAGE)} out=NULL")
        elif op == 2:
            lines.append(f"t{i:02d} plan status=0 err_len_ok=1 err= out={escape(note_plan)}")
        else:
            lines.append(f"t{i:02d} drafter status=0 err_len_ok=1 err= "
                         f"out={escape(note_choice)}")
    return lines + ["main err_len=0", "done"]


def test_sixteen_threads_race_the_first_call(hosts, installs):
    """Ten fresh processes, 16 threads each released at once into their very
    first call: every run prints the same, expected, lines."""
    host = hosts.get("race")
    expected = _race_expected(installs)
    outputs = []
    for _ in range(10):
        result = run([host, installs["dflash"]])
        assert result.stderr == b""
        outputs.append(stdout_lines(result))
    assert all(out == outputs[0] for out in outputs)
    assert outputs[0] == expected


def test_host_sigint_handler_unchanged(hosts, installs):
    result = run([hosts.get("signals"), installs["mtp"]])
    assert result.stderr == b""
    assert stdout_lines(result) == [
        "calls 0 0 2",
        "sigint handler is the host's: yes",
        "dispositions unchanged: yes",
        "signal mask unchanged: yes",
        "sigint reached the host's handler: yes",
        "done",
    ]


# ---------------------------------------------------------------------------
# A library that cannot find its package: TSFFI_ERR_RUNTIME, never TSFFI_OK.

@pytest.fixture(scope="session")
def lonely_library(tmp_path_factory) -> Path:
    """The .so copied alone into a directory with no turbospark_ffi package."""
    root = tmp_path_factory.mktemp("runtime")
    lonely = root / "lonely"
    lonely.mkdir()
    copy = lonely / LIBRARY.name
    shutil.copy2(LIBRARY, copy)
    assert not (root / "turbospark_ffi").exists()
    assert sorted(p.name for p in lonely.iterdir()) == [LIBRARY.name]
    return copy


@pytest.fixture(scope="session")
def runtime_runs(tmp_path_factory, lonely_library, hosts, installs):
    calls = abi_cases.runtime_calls(installs)
    path = tmp_path_factory.mktemp("runtime-cases") / "calls.tsv"
    path.write_text("\n".join(abi_cases.call_lines(calls)) + "\n")
    linked = compile_c_host(C_DIR / "case_host.c", hosts.root / "case_host_lonely",
                            link_library=False,
                            extra=[f"-L{lonely_library.parent}", "-ltsffi",
                                   f"-Wl,-rpath,{lonely_library.parent}"])
    ldd = run(["ldd", linked]).stdout.decode()
    assert str(lonely_library) in ldd, ldd  # the host really loads the lonely copy
    return calls, {
        "linked": run([linked, path]),
        "dlopen": run([hosts.dlopen(), path, lonely_library]),
        "env-i": run(["env", "-i", linked, path]),
    }


@pytest.mark.parametrize("variant", ["linked", "dlopen", "env-i"])
def test_library_without_its_package_returns_runtime_error(variant, runtime_runs,
                                                           lonely_library, status):
    calls, results = runtime_runs
    result = results[variant]
    assert result.stderr == b""
    lines = stdout_lines(result)
    assert lines[0] == "abi 4"  # works without the runtime
    assert lines[-1] == "done"
    body = lines[1:-1]
    assert len(body) == len(calls)
    messages = set()
    for call, line in zip(calls, body):
        outcome = abi_cases.parse_host_line(line, call.fn)
        assert abi_cases.check_call(outcome, status, call.fn) == []
        assert outcome.status == status["TSFFI_ERR_RUNTIME"], line
        assert outcome.out is None
        messages.add(outcome.err)
    # One verdict, repeated by every later call; it names what is missing and
    # where it was looked for.
    assert len(messages) == 1, messages
    (message,) = messages
    assert "turbospark_ffi" in message
    assert str(lonely_library.parent.parent) in message


# ---------------------------------------------------------------------------
# The header as C and as C++, and the installed-package way of linking.

HEADER_BOTH_LINES = [
    "abi 4 header 4",
    "build_info 0 result",
    'resolve_speculation 2 NULL len>16 truncated "--speculative w"',
    "resolve_drafter 0",
    'draft_policies 0 {"mtp":{"mode":"fixed","block":2},"dflash":{"mode":"off","block":null}}',
    # A path that is not a directory: the open's refusal (ABI 4).
    "speculation_plan 2",
    "install_info 0",
    "codes 0 1 2 4 6 9",
]


def test_header_compiles_clean_as_c99_pedantic(hosts):
    host = hosts.get("header_both")
    result = run([host])
    assert result.stderr == b""
    assert stdout_lines(result) == ["language C"] + HEADER_BOTH_LINES


def test_header_compiles_clean_as_cxx11_pedantic(tmp_path):
    exe = tmp_path / "header_both_cxx"
    cmd = ["g++", "-x", "c++", "-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic",
           f"-I{HEADER.parent}", "-o", exe, C_DIR / "header_both.c", "-x", "none",
           f"-L{LIBRARY.parent}", "-ltsffi", f"-Wl,-rpath,{LIBRARY.parent}"]
    compiled = run(cmd)
    assert compiled.returncode == 0, compiled.stderr.decode()
    assert compiled.stderr == b""
    result = run([exe])
    assert result.stderr == b""
    assert stdout_lines(result) == ["language C++"] + HEADER_BOTH_LINES


def test_header_compiles_clean_with_clang_c99_pedantic(tmp_path):
    """clang is the compiler that reads the header's nullability (it is how
    Swift imports it): the header must compile clean there too."""
    clang = shutil.which("clang")
    assert clang is not None, "clang (the Swift toolchain's) is needed on PATH"
    exe = tmp_path / "header_both_clang"
    compiled = run([clang, *C_FLAGS, f"-I{HEADER.parent}", "-o", exe, C_DIR / "header_both.c",
                    f"-L{LIBRARY.parent}", "-ltsffi", f"-Wl,-rpath,{LIBRARY.parent}"])
    assert compiled.returncode == 0 and compiled.stderr == b"", compiled.stderr.decode()[:700]
    result = run([exe])
    assert stdout_lines(result) == ["language C"] + HEADER_BOTH_LINES


def test_header_is_self_contained_c_with_only_stdint_and_stddef():
    text = HEADER.read_text()
    includes = [line.split()[1] for line in text.splitlines()
                if line.strip().startswith("#include")]
    assert includes == ["<stddef.h>", "<stdint.h>"]
    assert "#define TSFFI_ABI_VERSION 4u" in text


def test_installed_package_config_flags_build_a_working_host(tmp_path):
    config = run([sys.executable, "-m", "turbospark_ffi", "config", "--cflags", "--libs"],
                 cwd=ROOT)
    assert config.returncode == 0 and config.stderr == b"", config.stderr.decode()
    flags = shlex.split(config.stdout.decode())
    dirs = run([sys.executable, "-m", "turbospark_ffi", "config", "--includedir", "--libdir"],
               cwd=ROOT)
    includedir, libdir = dirs.stdout.decode().split()
    assert (Path(includedir) / "tsffi.h").read_bytes() == HEADER.read_bytes()
    assert os.path.realpath(Path(libdir) / LIBRARY.name) == os.path.realpath(LIBRARY)
    exe = tmp_path / "config_host"
    compiled = run(["cc", *C_FLAGS, "-o", exe, C_DIR / "header_both.c", *flags])
    assert compiled.returncode == 0 and compiled.stderr == b"", compiled.stderr.decode()
    result = run(["env", "-i", exe])
    assert result.stderr == b""
    assert stdout_lines(result) == ["language C"] + HEADER_BOTH_LINES
