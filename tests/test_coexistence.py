"""Beside the engine in one process (the host this library is made for).

A GUI that previews with this library also holds the engine's library, which
owns the whole ts_ / TS_ / Ts namespace (docs/ENGINE.md section 7) and is
the static libturbospark_ffi.a its app links (-lturbospark_ffi). Here a
stand-in of that library (tests/engine_standin.py: every name the engine
exports, each call returning TS_STANDIN_STATUS with its own last error) is
in the process BEFORE ours in the three ways it can be -- linked into the
executable as the app links it (its names exported, first in the global
scope), LD_PRELOAD, dlopen(RTLD_GLOBAL) -- and the whole ABI case table must
print exactly what it prints alone, while the stand-in's own ts_last_error
still holds the stand-in's message after all our calls.

One program links both libraries, -lturbospark_ffi and -ltsffi, whichever
directory and library comes first; with this library under its former file
name (libturbospark_ffi.so) no search order links (the names' proof, kept).

Also: the library exports nothing but the header's functions, binds its own
references to itself (a library exporting OUR names, preloaded, changes
nothing), both headers compile in one translation unit, and a host that forks
while its threads are inside the library gets children that answer promptly.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import abi_cases
import engine_standin
from abi_cases import CASES
from conftest import C_FLAGS, HEADER, LIBRARY, compile_c_host
from engine_standin import ENGINE_ARCHIVE, ENGINE_LINK_NAME, STANDIN_DIR
from original_texts import DFLASH_NOTE
from turbospark_ffi.native import LINK_NAME, library_name

C_DIR = Path(__file__).resolve().parent / "c"
TIMEOUT = 120

ENGINE_BEFORE = "engine open status=77"
ENGINE_AFTER = "engine last_error=stand-in engine: ts_session_open abi=41"


def run(cmd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, timeout=TIMEOUT, env=env)


def shared_library(source: Path, out: Path, *, std: str = "c11") -> Path:
    cmd = ["cc", f"-std={std}", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fPIC", "-shared",
           f"-I{STANDIN_DIR}", "-o", str(out), str(source)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("coexist")


@pytest.fixture(scope="module")
def archive(work) -> Path:
    """The engine's stand-in as the engine ships it: libturbospark_ffi.a."""
    return engine_standin.static_archive(work / "engine")


@pytest.fixture(scope="module")
def standin(work) -> Path:
    """The same code as a shared object, to load into a process first (the
    engine itself is never one: this is the harsher case)."""
    return engine_standin.shared_object(work / "preload" / "engine_standin.so")


@pytest.fixture(scope="module")
def case_path(work) -> Path:
    installs = abi_cases.materialize(work / "installs")
    abi_cases.verify_installs(installs)
    lines, _ = abi_cases.case_file_lines(CASES, installs)
    path = work / "cases.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def alone(work, case_path) -> list[str]:
    """The table through a host that holds only this library."""
    host = compile_c_host(C_DIR / "case_host.c", work / "case_host")
    result = run([host, case_path])
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "abi 4" and lines[-1] == "done" and len(lines) > 100
    return lines


def engine_linked_in(work, archive, cases) -> list:
    # As the engine's Swift package links it (-force_load): the whole
    # archive, into the executable, whose symbols are exported (as every
    # executable's are on macOS) and so first in the process's scope.
    host = compile_c_host(
        C_DIR / "case_host.c", work / "host_engine_linked_in", link_library=False,
        extra=["-DTSFFI_HOST_ENGINE_PROBE", f"-L{archive.parent}", "-Wl,--whole-archive",
               f"-l{ENGINE_LINK_NAME}", "-Wl,--no-whole-archive", "-Wl,--export-dynamic",
               f"-L{LIBRARY.parent}", f"-l{LINK_NAME}", f"-Wl,-rpath,{LIBRARY.parent}"])
    dynamic = run(["nm", "-D", "--defined-only", host]).stdout.decode()
    # The point of this host: the engine's names are the executable's own.
    assert re.search(r" T ts_session_open$", dynamic, re.M), dynamic
    needed = re.findall(r"NEEDED.*\[(.+)\]", run(["readelf", "-d", host]).stdout.decode())
    assert library_name() in needed and not [n for n in needed if "turbospark" in n], needed
    return [host, cases]


def engine_preloaded(work, standin, cases) -> list:
    host = compile_c_host(C_DIR / "case_host.c", work / "host_engine_preloaded",
                          extra=["-DTSFFI_HOST_ENGINE_PROBE"])
    return ["env", f"LD_PRELOAD={standin}", host, cases]


def engine_dlopened_global(work, standin, cases) -> list:
    host = compile_c_host(C_DIR / "case_host.c", work / "host_engine_dlopen", link_library=False,
                          extra=["-DTSFFI_HOST_DLOPEN", "-DTSFFI_HOST_ENGINE_PROBE"])
    return ["env", f"TSFFI_TEST_LOAD_FIRST={standin}", host, cases, LIBRARY]


WAYS = {"linked-in": engine_linked_in, "ld-preload": engine_preloaded,
        "dlopen-global-first": engine_dlopened_global}


@pytest.mark.parametrize("way", WAYS)
def test_whole_table_beside_the_engine(way, work, archive, standin, case_path, alone):
    result = run(WAYS[way](work, archive if way == "linked-in" else standin, case_path))
    assert result.stderr == b"" and result.returncode == 0, (result.stdout[-2000:], result.stderr)
    lines = result.stdout.decode().splitlines()
    # The stand-in answered its own call before ours ran...
    assert lines[0] == ENGINE_BEFORE
    # ...every case printed exactly what it prints without the engine...
    assert lines[1:-1] == alone
    # ...and the engine's last error is still the engine's own.
    assert lines[-1] == ENGINE_AFTER


def test_the_probe_host_sees_a_missing_engine(work, case_path):
    """The probe discriminates: without the stand-in loaded it says so."""
    host = compile_c_host(C_DIR / "case_host.c", work / "host_probe_alone",
                          extra=["-DTSFFI_HOST_ENGINE_PROBE"])
    result = run([host, case_path])
    assert result.stdout.decode().splitlines() == ["engine stand-in not loaded"]


def test_a_library_exporting_our_own_names_first_changes_nothing(work, case_path, alone):
    """Preloaded before ours, a library that exports tsffi_last_error (always
    "no error") and tsffi_abi_version: the dlopen host reaches our functions
    through our handle, and our own internal references must still bind to
    ourselves (refusals keep their messages, the runtime finds its package)."""
    interposer = shared_library(C_DIR / "interposer.c", work / "libinterposer.so")
    host = compile_c_host(C_DIR / "case_host.c", work / "host_interposed", link_library=False,
                          extra=["-DTSFFI_HOST_DLOPEN"])
    result = run(["env", f"LD_PRELOAD={interposer}", host, case_path, LIBRARY])
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    assert result.stdout.decode().splitlines() == alone


def exported(library: Path) -> list[str]:
    out = run(["nm", "-D", "--defined-only", library]).stdout.decode()
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


def test_only_the_headers_functions_are_exported(library_path):
    import ffi_build
    names = exported(library_path)
    assert not [n for n in names if n.startswith(("ts_", "TS_", "Ts"))], names
    # The header's functions, and cffi's module init (a Python process can
    # import the library as cffi's module: the bundle's import probe does).
    assert names == sorted([*ffi_build.exported_functions(HEADER.read_text()),
                            f"PyInit_{ffi_build.MODULE_NAME}"])


def test_no_relocation_resolves_an_own_function_through_the_process(library_path):
    """Every reference the library makes to one of its exported functions is
    bound at link time (no GLOB_DAT / JUMP_SLOT against tsffi_*): nothing
    loaded earlier can take one over."""
    relocs = run(["readelf", "-rW", library_path]).stdout.decode()
    own = [line for line in relocs.splitlines() if "tsffi_" in line or "PyInit_" in line]
    assert own == []


HEADERS_TOGETHER = r"""
#include <turbospark.h>
#include <tsffi.h>
#include <turbospark.h>
#include <tsffi.h>

int both(void);
int both(void) {
    char buf[8];
    char *out = 0;
    TsSession *session = 0;
    int32_t engine = ts_session_open("m", "{}", &session);
    int32_t ours = tsffi_resolve_speculation("{}", &out);
    tsffi_string_free(out);
    return (int)(engine + ours + TS_OK + TSFFI_OK + (int)TS_ABI_VERSION +
                 (int)TSFFI_ABI_VERSION + (int)ts_last_error(buf, sizeof buf) +
                 (int)tsffi_last_error(buf, sizeof buf));
}
"""


@pytest.mark.parametrize("compiler,std", [
    ("gcc", "-std=c99"), ("gcc", "-std=c11"), ("g++", "-std=c++11"), ("g++", "-std=c++17"),
    ("clang", "-std=c99"), ("clang", "-std=c11"), ("clang++", "-std=c++11"),
    ("clang++", "-std=c++17")])
def test_both_headers_in_one_translation_unit(compiler, std, tmp_path):
    if shutil.which(compiler) is None:
        pytest.fail(f"{compiler} is not on PATH (the Swift toolchain carries clang)")
    source = tmp_path / ("both.cpp" if compiler.endswith("++") else "both.c")
    source.write_text(HEADERS_TOGETHER)
    cmd = [compiler, std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-c",
           f"-I{STANDIN_DIR}", f"-I{HEADER.parent}", "-o", str(tmp_path / "both.o"),
           str(source)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------
# One program, both libraries: the engine's -lturbospark_ffi and our -ltsffi.

# What tests/c/both_libraries.c calls of each.
ENGINE_CALLS = {"ts_session_open", "ts_last_error", "ts_abi_version"}
OUR_CALLS = {"tsffi_speculation_plan", "tsffi_abi_version", "tsffi_string_free"}

DIR_ORDERS = ["engine-dir-first", "library-dir-first"]


@pytest.fixture(scope="module")
def both_object(work) -> Path:
    obj = work / "both_libraries.o"
    result = run(["cc", *C_FLAGS, "-c", f"-I{STANDIN_DIR}", f"-I{HEADER.parent}", "-o", obj,
                  C_DIR / "both_libraries.c"])
    assert result.returncode == 0, result.stderr.decode()
    return obj


@pytest.fixture(scope="module")
def our_dir(work) -> Path:
    """This library alone in a directory (a link to the built one), so that
    nothing else in the build tree is on the search path."""
    directory = work / "tsffi-lib"
    directory.mkdir()
    (directory / library_name()).symlink_to(LIBRARY)
    return directory


@pytest.fixture(scope="module")
def former_dir(work) -> Path:
    """This library under its former file name, libturbospark_ffi.so: the
    engine's library name, which no search order can link beside it."""
    directory = work / "former-lib"
    directory.mkdir()
    former = directory / f"lib{ENGINE_LINK_NAME}.so"
    shutil.copy(LIBRARY, former)
    return directory


def link_both(obj: Path, out: Path, dirs: list[Path], libs: list[str]) -> subprocess.CompletedProcess:
    cmd = ["cc", "-o", str(out), str(obj), *[f"-L{d}" for d in dirs], *[f"-l{lib}" for lib in libs],
           f"-Wl,-rpath,{LIBRARY.parent}", "-lpthread", "-ldl"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("order", DIR_ORDERS)
def test_under_the_former_file_name_no_search_order_links_both(order, work, both_object, archive,
                                                                former_dir):
    """Both libraries named libturbospark_ffi: the app's -lturbospark_ffi (the
    engine's) and -lturbospark_ffi (ours, formerly) both find the FIRST
    directory's file, and the other library's functions are undefined."""
    assert archive.name == ENGINE_ARCHIVE
    engine_first = order == "engine-dir-first"
    dirs = [archive.parent, former_dir] if engine_first else [former_dir, archive.parent]
    result = link_both(both_object, work / f"former_{order}", dirs, [ENGINE_LINK_NAME] * 2)
    assert result.returncode != 0, result.stdout
    undefined = set(re.findall(r"undefined reference to `(\w+)'", result.stderr))
    assert undefined == (OUR_CALLS if engine_first else ENGINE_CALLS), result.stderr


@pytest.mark.parametrize("libs", [[ENGINE_LINK_NAME, LINK_NAME], [LINK_NAME, ENGINE_LINK_NAME]],
                         ids=["engine-lib-first", "library-lib-first"])
@pytest.mark.parametrize("order", DIR_ORDERS)
def test_one_program_links_both_in_any_order(order, libs, work, both_object, archive, our_dir,
                                             sample_dflash, codes):
    """libturbospark_ffi.a and libtsffi: every directory order and library
    order links, and each library answers its own calls."""
    dirs = [archive.parent, our_dir] if order == "engine-dir-first" else [our_dir, archive.parent]
    exe = work / f"both_{order}_{libs[0]}"
    result = link_both(both_object, exe, dirs, libs)
    assert result.returncode == 0, result.stderr
    out = run([exe, sample_dflash])
    assert out.returncode == 0 and out.stderr == b"", out.stderr
    lines = out.stdout.decode().splitlines()
    assert lines[0] == "engine open status=77 last_error=stand-in engine: ts_session_open abi=41"
    preview = re.fullmatch(r"preview status=0 abi=(\d+) plan=(.+)", lines[1])
    assert preview and int(preview.group(1)) == codes["TSFFI_ABI_VERSION"], lines[1]
    plan = json.loads(preview.group(2))
    assert plan["speculation"] == {"block": None, "drafter": None, "reason": DFLASH_NOTE}
    assert plan["drafter"]["note"] == DFLASH_NOTE
    assert lines[2:] == ["engine last_error=stand-in engine: ts_session_open"]


# ---------------------------------------------------------------------------
# fork()

@pytest.fixture(scope="module")
def fork_host(work) -> Path:
    return compile_c_host(C_DIR / "fork_host.c", work / "fork_host")


@pytest.fixture(scope="module")
def sample_dflash(work) -> Path:
    from turbospark_ffi.install_writer import write_install
    return write_install(work / "dflash", mtp=False, dflash=True)


def child_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("child ")]


@pytest.mark.parametrize("round_", range(5))
def test_fork_while_threads_are_inside(round_, fork_host, sample_dflash):
    """4 threads planning, 20 forks: every child answers (the right answer,
    or TSFFI_ERR_RUNTIME with the fork message); none hangs (alarm) or
    crashes; the parent's threads never saw a wrong answer."""
    result = run([fork_host, "busy", sample_dflash])
    out = result.stdout.decode()
    assert result.returncode == 0 and result.stderr == b"", (out, result.stderr)
    children = child_lines(out)
    assert len(children) == 20, out
    assert all(re.fullmatch(r"child \d+ exit=[01]", line) for line in children), out
    calls = re.search(r"threads calls=(\d+) wrong=(\d+)", out)
    assert calls and int(calls.group(1)) > 0 and calls.group(2) == "0", out
    assert "parent after forks same=1" in out


def test_fork_before_any_call(fork_host, sample_dflash):
    out = run([fork_host, "before", sample_dflash]).stdout.decode()
    assert child_lines(out) == ["child 0 exit=0"], out


def test_single_threaded_fork_after_the_first_call(fork_host, sample_dflash):
    out = run([fork_host, "single", sample_dflash]).stdout.decode()
    assert child_lines(out) == ["child 0 exit=0"], out
    assert "parent after fork same=1" in out
