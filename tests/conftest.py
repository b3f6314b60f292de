"""Shared fixtures: the built library, the header's status codes, a C host
compiler, and installs written in the engine's layout.

The library is built in place (turbospark_ffi/libtsffi.so) from the
working tree when it is missing or older than its sources, so the tests always
exercise the code beside them.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from turbospark_ffi.native import HEADER_NAME, LINK_NAME, library_name  # noqa: E402

HEADER = ROOT / "include" / HEADER_NAME

LIBRARY = ROOT / "turbospark_ffi" / library_name()


def _library_is_stale() -> bool:
    if not LIBRARY.exists():
        return True
    built = LIBRARY.stat().st_mtime
    import ffi_build
    return any(src.stat().st_mtime > built for src in ffi_build.LIBRARY_INPUTS)


def pytest_configure(config):
    if _library_is_stale():
        import ffi_build
        ffi_build.build()


def header_constants() -> dict[str, int]:
    """Every `#define TSFFI_NAME <int>` of the header: the one source of the codes."""
    from turbospark_ffi.native import header_constants as read
    return read(HEADER.read_text())


@pytest.fixture(scope="session")
def codes() -> dict[str, int]:
    return header_constants()


@pytest.fixture(scope="session")
def library_path() -> Path:
    return LIBRARY


def build_machine_strings(root: Path, text_needles: list[str], code_needles: list[str],
                          is_code) -> list[tuple[str, str]]:
    """Where the files under `root` (a bundle) name the machine that built
    it: (file relative to root -- a zip member as FILE:MEMBER --, the whole
    run of printable bytes around the needle), for every occurrence, sorted
    and without repeats. A file whose bytes `is_code` accepts (ELF, Mach-O)
    is searched for `code_needles`, every other file and every zip member
    for `text_needles`."""
    import zipfile

    def runs(where: str, blob: bytes, needles: list[str]) -> set[tuple[str, str]]:
        out = set()
        for needle in filter(None, needles):
            at = blob.find(needle.encode())
            while at != -1:
                start, end = at, at + len(needle)
                while start > 0 and 0x20 <= blob[start - 1] < 0x7f:
                    start -= 1
                while end < len(blob) and 0x20 <= blob[end] < 0x7f:
                    end += 1
                out.add((where, blob[start:end].decode("ascii")))
                at = blob.find(needle.encode(), at + 1)
        return out

    found: set[tuple[str, str]] = set()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        if is_code(data):
            found |= runs(rel, data, code_needles)
            continue
        found |= runs(rel, data, text_needles)
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                for name in zf.namelist():
                    found |= runs(f"{rel}:{name}", zf.read(name), text_needles)
    return sorted(found)


C_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


# A C host that prints tsffi_build_info_json's status, then its result or the
# last error: what a test that moves the library or its Python reads back.
BUILD_INFO_HOST = r"""
#include <stdio.h>
#include "tsffi.h"
int main(void) {
    char *out = NULL;
    char message[4096];
    int status = (int)tsffi_build_info_json(&out);
    tsffi_last_error(message, sizeof message);
    printf("%d\n%s\n", status, out != NULL ? out : message);
    tsffi_string_free(out);
    return 0;
}
"""


def compile_c_host(source: str | Path, out: Path, *, extra: list[str] | None = None,
                   link_library: bool = True, compiler: str = "cc") -> Path:
    """Compile a C host program against the header (and the library)."""
    if isinstance(source, str) and not source.endswith(".c"):
        src = out.with_suffix(".c")
        src.write_text(source)
    else:
        src = Path(source)
    cmd = [compiler, *C_FLAGS, f"-I{HEADER.parent}", "-o", str(out), str(src)]
    if link_library:
        cmd += [f"-L{LIBRARY.parent}", f"-l{LINK_NAME}", f"-Wl,-rpath,{LIBRARY.parent}"]
    cmd += ["-lpthread", "-ldl"] + (extra or [])
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"compiling {src} failed:\n{' '.join(cmd)}\n{result.stderr}")
    return out


@pytest.fixture
def c_host(tmp_path):
    """compile(source_or_path, name="host", **kw) -> path of the executable."""
    def compile_(source, name: str = "host", **kw) -> Path:
        return compile_c_host(source, tmp_path / name, **kw)
    return compile_


@pytest.fixture
def make_install(tmp_path):
    """write_install(...) into a fresh directory under tmp_path."""
    from turbospark_ffi.install_writer import write_install
    counter = iter(range(10**6))

    def make(name: str | None = None, **kw) -> Path:
        return write_install(tmp_path / (name or f"install{next(counter)}"), **kw)
    return make


# --------------------------------------------------------------------------
# The library loaded into the pytest process (a Python host): one load per
# session, shared by the ctypes ABI tests and the reader tests that run the
# C pass (loading binds it into turbospark_ffi.resident_index).

_GARBAGE = ctypes.c_char(b"G")   # what *out_json is pre-filled with: not NULL, not ours
GARBAGE = ctypes.addressof(_GARBAGE)
OUT = ctypes.POINTER(ctypes.c_void_p)


def declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    c = ctypes
    lib.tsffi_abi_version.argtypes, lib.tsffi_abi_version.restype = [], c.c_uint32
    lib.tsffi_build_info_json.argtypes, lib.tsffi_build_info_json.restype = [OUT], c.c_int32
    lib.tsffi_last_error.argtypes = [c.POINTER(c.c_char), c.c_size_t]
    lib.tsffi_last_error.restype = c.c_size_t
    lib.tsffi_string_free.argtypes, lib.tsffi_string_free.restype = [c.c_void_p], None
    for name in ("tsffi_resolve_drafter", "tsffi_draft_policies", "tsffi_speculation_plan",
                 "tsffi_speculation_choices"):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [c.c_char_p, c.c_char_p, OUT], c.c_int32
    lib.tsffi_resolve_speculation.argtypes = [c.c_char_p, OUT]
    lib.tsffi_resolve_speculation.restype = c.c_int32
    lib.tsffi_install_info_json.argtypes = [c.c_char_p, OUT]
    lib.tsffi_install_info_json.restype = c.c_int32
    lib.tsffi_store_json.argtypes, lib.tsffi_store_json.restype = [OUT], c.c_int32
    lib.tsffi_reconcile.argtypes = [c.c_char_p, c.c_char_p, c.c_char_p, OUT]
    lib.tsffi_reconcile.restype = c.c_int32
    return lib


def _all_signal_handlers() -> dict:
    out = {}
    for sig in signal.valid_signals():
        try:
            out[sig] = signal.getsignal(sig)
        except (OSError, ValueError):
            pass
    return out


class Loaded:
    def __init__(self, lib, signals_before, signals_after, first_status):
        self.lib = lib
        self.signals_before = signals_before
        self.signals_after = signals_after
        self.first_status = first_status


@pytest.fixture(scope="session")
def loaded(library_path) -> Loaded:
    """The first load in this process: the signal handlers are read before it."""
    before = _all_signal_handlers()
    lib = declare(ctypes.CDLL(str(library_path)))
    out = ctypes.c_void_p()
    first = lib.tsffi_build_info_json(ctypes.byref(out))
    lib.tsffi_string_free(out)
    return Loaded(lib, before, _all_signal_handlers(), first)


@pytest.fixture(scope="session")
def native_scan(loaded):
    """The library's C pass of the reader, as the library bound it on start."""
    import turbospark_ffi.resident_index as ri
    assert ri._native is not None, "loading the library did not bind its C pass"
    return ri._native


# --------------------------------------------------------------------------
# A fresh install, as a user makes it.

def _run_ok(cmd, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900,
                            **kw)
    assert result.returncode == 0, f"{cmd}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


class Installed:
    def __init__(self, site: Path, library: Path, build_env: Path, source: Path) -> None:
        self.venv = site.parents[2]  # <venv>/lib/pythonX.Y/site-packages
        self.bin = self.venv / "bin"
        self.site = site
        self.source = source
        self.library = library
        self.build_env = build_env


@pytest.fixture(scope="session")
def pip_installed(tmp_path_factory) -> Installed:
    """The package as a user installs it: `pip wheel` from a copy of the tracked
    files (in pip's isolated build environment, which pip deletes), then
    `pip install` of the wheel into a fresh venv. Once per session (~20 s)."""
    work = tmp_path_factory.mktemp("pipinstall")
    source = work / "src"
    files = _run_ok(["git", "ls-files"], cwd=ROOT).stdout.split("\n")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    wheels = work / "wheels"
    built = _run_ok([sys.executable, "-m", "pip", "wheel", "-vv", "--no-deps", "-w", wheels,
                     source], cwd=work)
    envs = re.findall(r"(/\S*pip-build-env-[^/\s]+)", built.stdout + built.stderr)
    assert envs, "pip did not report its isolated build environment"
    _run_ok([sys.executable, "-m", "venv", work / "venv"])
    _run_ok([work / "venv" / "bin" / "pip", "install", "-q", *wheels.glob("*.whl")])
    site = Path(_run_ok([work / "venv" / "bin" / "python", "-c",
                         "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    return Installed(site, site / "turbospark_ffi" / LIBRARY.name, Path(envs[0]), source)


# An hour: far past the install cache's racy window, so a file written by a
# test counts as old and its snapshot may be remembered.
HOUR_NS = 3600 * 10**9


@pytest.fixture
def aged_clock(monkeypatch):
    """The install cache's clock, an hour ahead: every file looks old."""
    from turbospark_ffi import snapshots

    class Later:
        @staticmethod
        def time_ns():
            return time.time_ns() + HOUR_NS
    monkeypatch.setattr(snapshots, "time", Later)
