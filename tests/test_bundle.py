"""`turbospark-ffi bundle`: a relocatable folder that runs with no Python
installed.

The bundle is written, MOVED (nothing is left where it was written), and a C
host is compiled against the moved bundle's header and pkg-config file and
run under `env -i` from an unrelated working directory. The host links a
small interposer that records every path the process opens, stats, lists,
resolves or dlopen()s, and prints its own /proc/self/maps: so "nothing
outside the bundle was used" is observed, not inferred from sys.path.
Its answers must equal those of the same host linked against the library in
the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from conftest import BUILD_INFO_HOST, LIBRARY, ROOT, build_machine_strings, header_constants

from turbospark_ffi import bundle as bundle_mod
from turbospark_ffi import native
from turbospark_ffi.bundle import write as bundle_write
from turbospark_ffi.errors import SpeculationRefused
from turbospark_ffi.install_writer import write_install
from turbospark_ffi.options import parse_options
from turbospark_ffi.api import speculation_plan
from turbospark_ffi.policy import DFLASH_AUTO_NOTE

CODES = header_constants()
BUILD_PREFIXES = sorted({sys.base_prefix, sys.prefix, str(Path(sys.base_prefix).resolve()),
                         str(ROOT)})

HOST_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "tsffi.h"

const char *interpose_log(size_t *len);

static void record(const char *key, int32_t status, const char *out) {
    if (status == TSFFI_OK) {
        printf("REC\t%s\t%d\t%s\n", key, (int)status, out);
    } else {
        size_t len = tsffi_last_error(NULL, 0);
        char *msg = malloc(len + 1);
        if (msg == NULL)
            exit(3);
        tsffi_last_error(msg, len + 1);
        printf("REC\t%s\t%d\t%s\n", key, (int)status, msg);
        free(msg);
    }
}

#define CALL(key, expr)                       \
    do {                                      \
        char *out = NULL;                     \
        int32_t status = (expr);              \
        record(key, status, out);             \
        tsffi_string_free(out);                  \
    } while (0)

int main(int argc, char **argv) {
    const char *dflash, *none;
    char *choice = NULL;
    size_t len;
    const char *log;
    char buf[4096];
    ssize_t n;
    int fd;

    if (argc != 3) {
        fprintf(stderr, "usage: host DFLASH_INSTALL NONE_INSTALL\n");
        return 2;
    }
    dflash = argv[1];
    none = argv[2];
    printf("REC\tabi\t0\t%u\n", tsffi_abi_version());
    CALL("info", tsffi_build_info_json(&out));
    CALL("drafter", tsffi_resolve_drafter(dflash, NULL, &out));
    CALL("plan_auto", tsffi_speculation_plan(dflash, "{}", &out));
    CALL("plan_2", tsffi_speculation_plan(dflash, "{\"speculation\": 2}", &out));
    CALL("plan_dflash_2", tsffi_speculation_plan(
        dflash, "{\"speculativeDrafter\": \"dflash\", \"speculation\": 2}", &out));
    CALL("bad_json", tsffi_speculation_plan(dflash, "{not json", &out));
    CALL("bad_tsffi", tsffi_resolve_speculation("{\"tsffi\": {\"temprature\": 2}}", &out));
    CALL("sampled", tsffi_resolve_speculation(
        "{\"speculation\": 2, \"speculativeDrafter\": \"dflash\", \"tsffi\": {\"temperature\": 0.7}}",
        &out));
    CALL("install_info", tsffi_install_info_json(dflash, &out));
    CALL("install_info_none", tsffi_install_info_json(none, &out));
    CALL("plan_none_2", tsffi_speculation_plan(none, "{\"speculation\": 2}", &out));
    if (tsffi_resolve_drafter(dflash, "{}", &choice) == TSFFI_OK) {
        CALL("policies", tsffi_draft_policies(choice, "{\"speculation\": 2}", &out));
        tsffi_string_free(choice);
    }

    log = interpose_log(&len); /* stops recording */
    fwrite(log, 1, len, stdout);
    printf("MAPS\n");
    fflush(stdout);
    fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return 4;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        fwrite(buf, 1, (size_t)n, stdout);
    close(fd);
    return 0;
}
"""

# Defined in the executable, these take the place of libc's for every
# library in the process (libpython, the extension modules, this library);
# each records its path and calls libc's own. Only <dlfcn.h> and friends are
# included, so the prototypes (pointer types as void *) meet no declaration.
INTERPOSE_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#define AT_FDCWD_ (-100)
#define O_CREAT_ 0100
#define O_TMPFILE_ 020200000

static char tsffi_log[1 << 20];
static size_t tsffi_log_len;
static int tsffi_log_off;

static void put(const char *s, size_t n) {
    if (tsffi_log_len + n < sizeof tsffi_log) {
        memcpy(tsffi_log + tsffi_log_len, s, n);
        tsffi_log_len += n;
    }
}

static long (*real_readlink)(const char *, char *, size_t);

static void note_at(const char *op, int dirfd, const char *path) {
    char dir[4096];
    if (tsffi_log_off || path == NULL)
        return;
    put("OPEN\t", 5);
    put(op, strlen(op));
    put("\t", 1);
    if (path[0] != '/' && dirfd != AT_FDCWD_) {
        char link[64];
        long n;
        int i = 0, v = dirfd;
        char digits[16];
        if (real_readlink == NULL)
            *(void **)(&real_readlink) = dlsym(RTLD_NEXT, "readlink");
        memcpy(link, "/proc/self/fd/", 14);
        do { digits[i++] = (char)('0' + v % 10); v /= 10; } while (v > 0 && i < 15);
        for (v = 0; v < i; v++)
            link[14 + v] = digits[i - 1 - v];
        link[14 + i] = '\0';
        n = real_readlink(link, dir, sizeof dir - 1);
        if (n > 0) {
            put(dir, (size_t)n);
            put("/", 1);
        } else {
            put("<fd>/", 5);
        }
    }
    put(path, strlen(path));
    put("\n", 1);
}

static void note(const char *op, const char *path) { note_at(op, AT_FDCWD_, path); }

const char *interpose_log(size_t *len) {
    tsffi_log_off = 1;
    *len = tsffi_log_len;
    return tsffi_log;
}

#define REAL(name) \
    static void *real_##name##_p; \
    if (real_##name##_p == NULL) real_##name##_p = dlsym(RTLD_NEXT, #name)

#define OPEN_LIKE(name)                                                     \
    int name(const char *path, int flags, ...) {                            \
        unsigned mode = 0;                                                  \
        int (*real)(const char *, int, ...);                                \
        REAL(name);                                                         \
        if (flags & (O_CREAT_ | O_TMPFILE_)) {                              \
            va_list ap;                                                     \
            va_start(ap, flags);                                            \
            mode = va_arg(ap, unsigned);                                    \
            va_end(ap);                                                     \
        }                                                                   \
        note(#name, path);                                                  \
        *(void **)(&real) = real_##name##_p;                                \
        return real(path, flags, mode);                                     \
    }
OPEN_LIKE(open)
OPEN_LIKE(open64)

#define OPENAT_LIKE(name)                                                   \
    int name(int dirfd, const char *path, int flags, ...) {                 \
        unsigned mode = 0;                                                  \
        int (*real)(int, const char *, int, ...);                           \
        REAL(name);                                                         \
        if (flags & (O_CREAT_ | O_TMPFILE_)) {                              \
            va_list ap;                                                     \
            va_start(ap, flags);                                            \
            mode = va_arg(ap, unsigned);                                    \
            va_end(ap);                                                     \
        }                                                                   \
        note_at(#name, dirfd, path);                                        \
        *(void **)(&real) = real_##name##_p;                                \
        return real(dirfd, path, flags, mode);                              \
    }
OPENAT_LIKE(openat)
OPENAT_LIKE(openat64)

#define PATH_PTR_RET(ret, name)                                             \
    ret name(const char *path, void *arg) {                                 \
        ret (*real)(const char *, void *);                                  \
        REAL(name);                                                         \
        note(#name, path);                                                  \
        *(void **)(&real) = real_##name##_p;                                \
        return real(path, arg);                                             \
    }
PATH_PTR_RET(void *, fopen)
PATH_PTR_RET(void *, fopen64)
PATH_PTR_RET(int, stat)
PATH_PTR_RET(int, stat64)
PATH_PTR_RET(int, lstat)
PATH_PTR_RET(int, lstat64)
PATH_PTR_RET(char *, realpath)

#define FSTATAT_LIKE(name)                                                  \
    int name(int dirfd, const char *path, void *buf, int flags) {           \
        int (*real)(int, const char *, void *, int);                        \
        REAL(name);                                                         \
        note_at(#name, dirfd, path);                                        \
        *(void **)(&real) = real_##name##_p;                                \
        return real(dirfd, path, buf, flags);                               \
    }
FSTATAT_LIKE(fstatat)
FSTATAT_LIKE(fstatat64)

int access(const char *path, int mode) {
    int (*real)(const char *, int);
    REAL(access);
    note("access", path);
    *(void **)(&real) = real_access_p;
    return real(path, mode);
}

int faccessat(int dirfd, const char *path, int mode, int flags) {
    int (*real)(int, const char *, int, int);
    REAL(faccessat);
    note_at("faccessat", dirfd, path);
    *(void **)(&real) = real_faccessat_p;
    return real(dirfd, path, mode, flags);
}

void *opendir(const char *path) {
    void *(*real)(const char *);
    REAL(opendir);
    note("opendir", path);
    *(void **)(&real) = real_opendir_p;
    return real(path);
}

long readlink(const char *path, char *buf, size_t cap) {
    REAL(readlink);
    note("readlink", path);
    *(void **)(&real_readlink) = real_readlink_p;
    return real_readlink(path, buf, cap);
}

void *dlopen(const char *path, int flags) {
    void *(*real)(const char *, int);
    REAL(dlopen);
    note("dlopen", path);
    *(void **)(&real) = real_dlopen_p;
    return real(path, flags);
}
"""

CFLAGS = ["-std=gnu99", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"]


def _compile_host(out: Path, link_flags: list[str]) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    (out.parent / "host.c").write_text(HOST_C)
    (out.parent / "interpose.c").write_text(INTERPOSE_C)
    cmd = ["cc", *CFLAGS, "-o", str(out), str(out.parent / "host.c"),
           str(out.parent / "interpose.c"), *link_flags, "-rdynamic", "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return out


def _run_host(host: Path, cwd: Path, *installs: Path, env: dict | None = None) -> dict:
    settings = [f"{k}={v}" for k, v in (env or {}).items()]
    proc = subprocess.run(["env", "-i", *settings, str(host), *map(str, installs)],
                          cwd=str(cwd), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "", proc.stderr  # the library writes nothing to the host's streams
    recs, opened, maps = {}, [], []
    head, _, tail = proc.stdout.partition("MAPS\n")
    for line in head.splitlines():
        parts = line.split("\t")
        if parts[0] == "REC":
            recs[parts[1]] = (int(parts[2]), "\t".join(parts[3:]))
        elif parts[0] == "OPEN":
            opened.append((parts[1], "\t".join(parts[2:])))
    for line in tail.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6:
            maps.append(fields[5])
    return {"recs": recs, "opened": opened, "maps": maps}


def _inside(path: str, root: Path) -> bool:
    root_s = str(root)
    path = os.path.normpath(path)
    return path == root_s or path.startswith(root_s + "/")


def _pkg_config(bundle: Path) -> list[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "PKG_CONFIG_PATH": str(bundle / "lib" / "pkgconfig")}
    proc = subprocess.run(["pkg-config", "--cflags", "--libs", "tsffi"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(moved bundle, the BundleInfo, where it was written, scratch root)."""
    base = tmp_path_factory.mktemp("bundle")
    written = base / "written" / "turbospark"
    info = bundle_mod.write_bundle(written)
    assert info.root == written
    moved = base / "moved" / "deeper" / "ts-bundle"
    moved.parent.mkdir(parents=True)
    os.rename(written, moved)
    shutil.rmtree(base / "written")  # nothing is left where it was written
    return moved, info, written, base


@pytest.fixture(scope="module")
def installs(built):
    moved, _, _, base = built
    dflash = write_install(base / "installs" / "dflash-only", dflash=True)
    # The bundled sample: an install inside the bundle itself.
    none = moved / "python" / "site-packages" / "turbospark_ffi" / "samples" / "none"
    assert (none / "model_weights.bin").is_file()
    return Path(dflash), none


@pytest.fixture(scope="module")
def host_run(built, installs):
    moved, _, _, base = built
    host = _compile_host(base / "host" / "host", _pkg_config(moved))
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return _run_host(host, elsewhere, *installs)


@pytest.fixture(scope="module")
def oracle_run(built, installs):
    """The same host against the library in the source tree (not bundled)."""
    _, _, _, base = built
    lib = LIBRARY.parent
    host = _compile_host(base / "oracle" / "host",
                         [f"-I{ROOT / 'include'}", f"-L{lib}", "-ltsffi",
                          f"-Wl,-rpath,{lib}"])
    return _run_host(host, base / "oracle", *installs)


# ---------------------------------------------------------------------------
# The files.

def test_bundle_layout(built):
    moved, info, _, _ = built
    for rel in ("lib/libtsffi.so", "lib/libpython3.11.so.1.0", "include/tsffi.h",
                "module.modulemap", "lib/pkgconfig/tsffi.pc",
                "python/turbospark_bundle.txt", "python/python311.zip",
                "python/lib/python3.11/lib-dynload",
                "python/site-packages/turbospark_ffi/_abi.py",
                "python/site-packages/turbospark_ffi/samples/dflash/model_weights.bin"):
        assert (moved / rel).exists(), rel
    assert list((moved / "python" / "site-packages").glob("_cffi_backend*.so"))
    # The library lives in lib/ only; the package beside it carries no copy.
    assert not list((moved / "python").rglob("libtsffi*"))
    assert (moved / "include" / "tsffi.h").read_bytes() == \
        (ROOT / "include" / "tsffi.h").read_bytes()
    modulemap = (moved / "module.modulemap").read_text()
    assert "module Tsffi {" in modulemap
    assert 'header "include/tsffi.h"' in modulemap
    assert 'link "tsffi"' in modulemap and "export *" in modulemap
    pc = (moved / "lib" / "pkgconfig" / "tsffi.pc").read_text()
    assert pc.startswith("prefix=${pcfiledir}/../..\n")
    assert "libdir=${prefix}/lib" in pc and "includedir=${prefix}/include" in pc


def test_standard_library_is_pruned(built):
    moved, info, _, _ = built
    names = zipfile.ZipFile(moved / "python" / "python311.zip").namelist()
    tops = {n.split("/")[0].removesuffix(".pyc") for n in names}
    assert not tops & {"test", "idlelib", "tkinter", "ensurepip", "lib2to3", "unittest",
                       "pydoc_data", "turtledemo", "distutils", "asyncio", "email"}
    assert all(n.endswith(".pyc") for n in names)
    # The codecs whole; what the library imports (json only on the error path).
    stdlib = Path(sysconfig.get_path("stdlib"))
    assert {f"encodings/{p.stem}.pyc" if p.stem != "__init__" else "encodings/__init__.pyc"
            for p in (stdlib / "encodings").glob("*.py")} <= set(names)
    assert {"json/__init__.pyc", "json/decoder.pyc"} <= set(names)
    exts = sorted(p.name.split(".")[0] for p in
                  (moved / "python" / "lib" / "python3.11" / "lib-dynload").iterdir())
    # Measured, not listed: `_json` because a bad JSON argument imports json;
    # nothing the package stopped importing (math, since options checks
    # temperature by comparison) is carried along.
    assert "_json" in exts and "math" not in exts
    assert not set(exts) & {"_tkinter", "_sqlite3", "_ssl", "_ctypes", "_decimal", "unicodedata",
                            "_curses", "readline", "zlib"}
    assert exts == sorted(info.extension_modules)


def test_every_elf_rpath_is_origin(built):
    moved, _, _, _ = built
    elves = [p for p in moved.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    assert len(elves) >= 5
    bundled = {p.name for p in elves}
    for path in elves:
        out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                             check=True).stdout
        paths = [line for line in out.splitlines() if "(RUNPATH)" in line or "(RPATH)" in line]
        assert all(line.rstrip().endswith("Library runpath: [$ORIGIN]") for line in paths), \
            (path, paths)
        for line in out.splitlines():
            if "(NEEDED)" in line:
                name = line.rsplit("[", 1)[1].rstrip("]")
                assert name in bundled or name.startswith(bundle_write._SYSTEM_LIBS), \
                    (path, name)
        # Stripped: nothing the loader does not map.
        sections = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True,
                                  text=True, check=True).stdout
        assert ".debug_info" not in sections and ".symtab" not in sections, path


def test_library_runpath_is_exactly_origin(built):
    moved, _, _, _ = built
    for name in ("libtsffi.so", "libpython3.11.so.1.0"):
        out = subprocess.run(["readelf", "-d", str(moved / "lib" / name)], capture_output=True,
                             text=True, check=True).stdout
        runpaths = [line.split("Library runpath:")[1].strip()
                    for line in out.splitlines() if "(RUNPATH)" in line]
        assert runpaths == ["[$ORIGIN]"], (name, out)
        assert "(RPATH)" not in out
    assert "libpython3.11.so.1.0" in bundle_mod.elf_dynamic(
        moved / "lib" / "libtsffi.so")["needed"]


# System folders every Linux has: not paths of the machine that built a bundle.
_SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")
LIBPYTHON = sysconfig.get_config_var("INSTSONAME")


def _needles(written: Path) -> tuple[list[str], list[str]]:
    """(what no text file may name, what no ELF file may name). In ELF files:
    this machine's own paths, and the first 16 bytes of each -- GCC copies a
    constant string it can see into the code as 16-byte vector constants
    (measured: this library's build paths were there before src/tsffi_embed.c
    hid them behind a volatile pointer), where no whole path appears."""
    text = BUILD_PREFIXES + [str(written)]
    own = [p for p in text if p not in _SYSTEM_PREFIXES]
    return text, own + [p[:16] for p in own if len(p) > 16]


def _is_elf_data(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def _cpython_prefix(code_needles: list[str]) -> list[tuple[str, str]]:
    """The one build path a bundle keeps: CPython's own library holds the
    prefix it was configured with (getpath's PREFIX and EXEC_PREFIX, which it
    reads only when no home is set, and the bundled library always sets
    one). The bundle does not rewrite CPython's data."""
    prefixes = {sysconfig.get_config_var("prefix"), sysconfig.get_config_var("exec_prefix")}
    return sorted((f"lib/{LIBPYTHON}", p) for p in prefixes
                  if any(n in p for n in code_needles))


def test_nothing_names_the_build_machine(built):
    """No file in the bundle -- text, zip member or ELF -- names a path of
    the build machine, but for CPython's configured prefix (above). The
    library's own record of its build Python's paths is there, blanked:
    three tags, each followed by nothing."""
    moved, _, written, _ = built
    text, code = _needles(written)
    assert build_machine_strings(moved, text, code, _is_elf_data) == _cpython_prefix(code)
    data = (moved / "lib" / "libtsffi.so").read_bytes()
    tag = native.BUILD_PATH_TAG.encode()
    assert data.count(tag) == data.count(tag + b"\0") == 3


def test_the_byte_check_catches_the_library_s_build_paths(tmp_path, monkeypatch):
    """The check above, shown to discriminate: the same bundle with the
    blanking turned off names the home, standard library and lib-dynload of
    the Python the library was built against -- and nothing more."""
    monkeypatch.setattr(bundle_write, "blank_build_paths", lambda path: [])
    out = tmp_path / "kept"
    bundle_mod.write_bundle(out, verify=False)
    text, code = _needles(out)
    stdlib = sysconfig.get_path("stdlib")
    kept = [("lib/libtsffi.so", f"tsffi-build-path:{path}")
            for path in (sys.base_prefix, stdlib, f"{stdlib}/lib-dynload")
            if any(n in path for n in code)]
    assert build_machine_strings(out, text, code, _is_elf_data) == \
        sorted(kept + _cpython_prefix(code))


def test_size_is_reported_and_under_target(built, capsys):
    moved, info, _, _ = built
    report = info.report()
    print(report)  # the breakdown, with -s
    assert info.total_bytes == sum(p.stat().st_size for p in moved.rglob("*") if p.is_file())
    assert info.total_bytes < 20_000_000, report
    assert "libpython3.11.so.1.0" in report and "python311.zip" in report
    assert sum(size for _, size in info.parts) == info.total_bytes


# ---------------------------------------------------------------------------
# A C host against the moved bundle, under env -i.

def test_host_answers_through_the_moved_bundle(host_run, installs):
    recs = host_run["recs"]
    dflash, _ = installs
    assert recs["abi"] == (0, str(CODES["TSFFI_ABI_VERSION"]))
    status, drafter = recs["drafter"]
    assert status == CODES["TSFFI_OK"], drafter
    drafter = json.loads(drafter)
    assert drafter["drafter"] == "mtp" and drafter["installHasDflash"] is True
    assert drafter["note"] == DFLASH_AUTO_NOTE  # verbatim
    plan = json.loads(recs["plan_auto"][1])
    assert plan["drafter"]["note"] == DFLASH_AUTO_NOTE
    # The refusal: the original module's message, exactly what the Python API raises.
    with pytest.raises(SpeculationRefused) as refused:
        speculation_plan(str(dflash), parse_options('{"speculation": 2}'))
    assert recs["plan_2"] == (CODES["TSFFI_ERR_REFUSED"], str(refused.value))
    assert str(refused.value).startswith("--speculative was asked for but cannot be served: ")
    assert recs["bad_json"][0] == CODES["TSFFI_ERR_JSON"]
    assert recs["bad_tsffi"][0] == CODES["TSFFI_ERR_INVALID_ARGUMENT"]
    assert recs["sampled"][0] == CODES["TSFFI_ERR_REFUSED"]
    assert json.loads(recs["install_info"][1])["installHasDflash"] is True


def test_host_answers_match_the_unbundled_library(host_run, oracle_run):
    bundled = {k: v for k, v in host_run["recs"].items() if k != "info"}
    unbundled = {k: v for k, v in oracle_run["recs"].items() if k != "info"}
    assert bundled == unbundled
    assert len(bundled) == 12


def test_build_info_paths_lie_inside_the_moved_bundle(host_run, built):
    moved, _, written, _ = built
    status, text = host_run["recs"]["info"]
    assert status == CODES["TSFFI_OK"], text
    info = json.loads(text)
    assert info["ownsInterpreter"] is True
    assert info["library"] == str(moved / "lib" / "libtsffi.so")
    assert info["package"] == str(moved / "python" / "site-packages" / "turbospark_ffi")
    assert info["pythonHome"] == str(moved / "python")
    # sealed: site-packages is reached through the library's finder only
    assert info["sysPath"] == [str(moved / "python" / "python311.zip"),
                               str(moved / "python" / "lib" / "python3.11"),
                               str(moved / "python" / "lib" / "python3.11" / "lib-dynload")]
    for path in [info["library"], info["package"], info["pythonHome"], *info["sysPath"]]:
        assert _inside(path, moved), path
    assert info["pythonExecutable"] in (None, "") or _inside(info["pythonExecutable"], moved)
    assert str(written) not in text


def test_host_maps_only_the_bundles_python(host_run, built):
    moved, _, written, _ = built
    maps = host_run["maps"]
    libpython = [m for m in maps if "libpython" in m]
    backend = [m for m in maps if "_cffi_backend" in m]
    ours = [m for m in maps if "libtsffi" in m]
    assert libpython and backend and ours, maps
    for path in libpython + backend + ours:
        assert _inside(path, moved), path
    assert any("/lib-dynload/_json." in m and _inside(m, moved) for m in maps)
    host = maps[0]
    for path in maps:
        if path.startswith("["):  # [heap], [stack], [vdso]
            continue
        # The bundle, the host, and glibc: nothing else (no libcrypto).
        assert _inside(path, moved) or path == host or \
            os.path.basename(path).startswith(bundle_write._SYSTEM_LIBS), path
        assert "/root/.pyenv" not in path, path
        for prefix in BUILD_PREFIXES + [str(written)]:
            assert not _inside(path, Path(prefix)), path


def test_python_opened_nothing_outside_the_bundle(host_run, built, installs):
    """Every path the process touched after main() started -- opened,
    stat()ed, listed, resolved, dlopen()ed, by libpython, the extension
    modules or the library -- is in the bundle, an install it was asked
    about, the process's own /proc and /dev entries, or (lstat only) a
    directory above the bundle, which resolving the bundle's real path
    walks."""
    moved, _, _, _ = built
    dflash, _ = installs
    opened = host_run["opened"]
    assert any(op == "dlopen" and "lib-dynload/_json." in path for op, path in opened), opened
    assert any(_inside(path, moved / "python" / "python311.zip") for _, path in opened)
    outside = [(op, path) for op, path in opened
               if not (_inside(path, moved) or _inside(path, dflash)
                       or path.startswith(("/proc/self/", "/dev/"))
                       or (op.startswith("lstat") and str(moved).startswith(path + "/")))]
    assert outside == []


def test_environment_is_not_honoured(built, installs, host_run):
    """A GUI's environment, with PYTHONHOME and PYTHONPATH pointing at a
    Python that would break the library: same answers, nothing touched
    there."""
    moved, _, _, base = built
    evil = base / "evil"
    (evil / "encodings").mkdir(parents=True)
    (evil / "encodings" / "__init__.py").write_text("raise SystemExit('evil encodings')\n")
    (evil / "turbospark_ffi").mkdir()
    (evil / "turbospark_ffi" / "__init__.py").write_text("raise ImportError('evil')\n")
    (evil / "startup.py").write_text("raise SystemExit('evil startup')\n")
    env = {"PATH": f"{evil}:/usr/local/bin:/usr/bin:/bin", "HOME": str(evil),
           "LANG": "C.UTF-8", "PYTHONHOME": str(evil), "PYTHONPATH": str(evil),
           "PYTHONSTARTUP": str(evil / "startup.py"), "PYTHONUSERBASE": str(evil),
           "PYTHONNOUSERSITE": "", "PYTHONVERBOSE": "1", "PYTHONDEVMODE": "1"}
    run = _run_host(base / "host" / "host", evil, *installs, env=env)
    assert {k: v for k, v in run["recs"].items() if k != "info"} == \
        {k: v for k, v in host_run["recs"].items() if k != "info"}
    assert json.loads(run["recs"]["info"][1])["sysPath"] == \
        json.loads(host_run["recs"]["info"][1])["sysPath"]
    assert [p for _, p in run["opened"] if _inside(p, evil)] == []


# ---------------------------------------------------------------------------
# An application: host and bundle side by side, linked by a relative rpath,
# copied and then moved as one folder (with a space in its name).

def test_app_folder_moves_after_linking(built, installs, tmp_path):
    moved, _, _, _ = built
    app = tmp_path / "build" / "App"
    shutil.copytree(moved, app / "Frameworks" / "turbospark", symlinks=True)
    _compile_host(app / "bin" / "host",
                  [f"-I{app / 'Frameworks' / 'turbospark' / 'include'}",
                   f"-L{app / 'Frameworks' / 'turbospark' / 'lib'}", "-ltsffi",
                   "-Wl,-rpath,$ORIGIN/../Frameworks/turbospark/lib"])
    shipped = tmp_path / "Applications" / "My App"
    shipped.parent.mkdir()
    os.rename(app, shipped)
    out = subprocess.run(["readelf", "-d", str(shipped / "bin" / "host")], capture_output=True,
                         text=True, check=True).stdout
    assert "[$ORIGIN/../Frameworks/turbospark/lib]" in out
    run = _run_host(shipped / "bin" / "host", tmp_path, *installs)
    assert json.loads(run["recs"]["drafter"][1])["note"] == DFLASH_AUTO_NOTE
    info = json.loads(run["recs"]["info"][1])
    assert info["pythonHome"] == str(shipped / "Frameworks" / "turbospark" / "python")
    for path in [info["library"], info["package"], *info["sysPath"]]:
        assert _inside(path, shipped), path
    assert all(_inside(m, shipped) for m in run["maps"] if "libpython" in m)


# ---------------------------------------------------------------------------
# The bundle's interpreter, from Python's side.

def test_no_openssl_and_no_hashlib(built):
    """Nothing the library imports needs the machine's libcrypto: _hashlib
    is never shipped, and since install info stopped importing the install
    writer, neither is hashlib (the probe measures what is imported)."""
    moved, _, _, _ = built
    assert not list(moved.rglob("_hashlib*"))
    import zipfile
    with zipfile.ZipFile(moved / "python" / "python311.zip") as z:
        assert not [n for n in z.namelist() if n.startswith("hashlib")]


# ---------------------------------------------------------------------------
# The command.

def cli_main(argv: list[str]) -> int:
    from turbospark_ffi.cli import main
    return main(["bundle", *argv])


def test_main_writes_and_reports(tmp_path, capsys):
    out = tmp_path / "b"
    assert cli_main([str(out), "--no-verify"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"wrote {out}: ") and " MB on disk" in printed
    assert "lib/libpython3.11.so.1.0" in printed
    # A second time: refused, one line, no traceback; --force replaces a bundle.
    assert cli_main([str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("turbospark-ffi bundle: ") and "not empty" in err
    assert cli_main([str(out), "--force", "--no-verify"]) == 0
    assert (out / "python" / "turbospark_bundle.txt").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name != "b"]  # no temporaries left


def test_main_refuses_to_replace_what_is_not_a_bundle(tmp_path, capsys):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("keep me")
    assert cli_main([str(precious), "--force"]) == 1
    err = capsys.readouterr().err
    assert "is not a bundle" in err and err.count("\n") == 1
    assert (precious / "thesis.txt").read_text() == "keep me"


def test_python_dash_m(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "turbospark_ffi", "bundle", str(tmp_path / "x"),
                           "--no-verify"], capture_output=True, text=True, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    assert "MB on disk" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "turbospark_ffi", "bundle", str(tmp_path / "x")],
                          capture_output=True, text=True, cwd=str(ROOT))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("argv", [[], ["a", "b"], ["--bogus", "x"]])
def test_usage_errors_exit_1_like_every_subcommand(argv):
    """Through the command's one parser: a usage error is exit 1 and one
    line, exactly as `plan` answers the same mistake (not argparse's 2)."""
    proc = subprocess.run([sys.executable, "-m", "turbospark_ffi", "bundle", *argv],
                          capture_output=True, text=True, cwd=str(ROOT))
    same = subprocess.run([sys.executable, "-m", "turbospark_ffi", "plan", *argv],
                          capture_output=True, text=True, cwd=str(ROOT))
    assert proc.returncode == same.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.replace("bundle", "plan").split(":")[0] == same.stderr.split(":")[0]


# ---------------------------------------------------------------------------
# The ELF rewriting, on a library of its own.

def test_rpath_rewrite_and_strip_on_a_fresh_library(tmp_path):
    src = tmp_path / "t.c"
    src.write_text("int tsffi_test_answer(void) { return 42; }\n")
    long_so = tmp_path / "liblong.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-g", "-o", str(long_so), str(src),
                    "-Wl,-rpath,/a/very/long/build/machine/path:/and/another"], check=True)
    before = long_so.stat().st_size
    assert bundle_mod.strip_elf(long_so) > 0 and long_so.stat().st_size < before
    assert bundle_mod.set_rpath_origin(long_so) is True
    out = subprocess.run(["readelf", "-d", str(long_so)], capture_output=True, text=True,
                         check=True).stdout
    assert "Library runpath: [$ORIGIN]" in out
    import ctypes
    assert ctypes.CDLL(str(long_so)).tsffi_test_answer() == 42
    # Too short to hold "$ORIGIN": refused, the file untouched.
    short_so = tmp_path / "libshort.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(short_so), str(src),
                    "-Wl,-rpath,/x"], check=True)
    data = short_so.read_bytes()
    with pytest.raises(bundle_mod.BundleError, match="shorter"):
        bundle_mod.set_rpath_origin(short_so)
    assert short_so.read_bytes() == data
    # No rpath at all: nothing to do.
    none_so = tmp_path / "libnone.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(none_so), str(src)], check=True)
    assert bundle_mod.set_rpath_origin(none_so) is False


# ---------------------------------------------------------------------------
# Blanking the library's stored build paths: what it does to bytes, and what
# it refuses.

BLANK_CASES = [
    # (file bytes, what it returns, the bytes after)
    (b"\x7fELF..tsffi-build-path:/home/dev/py\0rest\0tsffi-build-path:/x\0",
     ["/home/dev/py", "/x"],
     b"\x7fELF..tsffi-build-path:" + bytes(12) + b"\0rest\0tsffi-build-path:" + bytes(2) + b"\0"),
    # A copy blanked before: nothing to do, nothing written.
    (b"tsffi-build-path:\0\0\0\0", [], b"tsffi-build-path:\0\0\0\0"),
]


@pytest.mark.parametrize("before,texts,after", BLANK_CASES)
def test_blank_build_paths(tmp_path, before, texts, after):
    path = tmp_path / "libtsffi.so"
    path.write_bytes(before)
    assert bundle_mod.blank_build_paths(path) == texts
    assert path.read_bytes() == after and len(after) == len(before)


@pytest.mark.parametrize("data,message", [
    (b"\x7fELF no tag here\0",
     "libtsffi.so does not mark the build machine's paths it stores (no 'tsffi-build-path:'): "
     "it was built by an older ffi_build.py; rebuild it (python ffi_build.py) and bundle again"),
    (b"\x7fELF..tsffi-build-path:/home/dev/py",
     "libtsffi.so: the build path after 'tsffi-build-path:' at byte 6 has no end; the file is "
     "damaged"),
])
def test_blank_build_paths_refuses(tmp_path, data, message):
    path = tmp_path / "libtsffi.so"
    path.write_bytes(data)
    with pytest.raises(bundle_mod.BundleError) as caught:
        bundle_mod.blank_build_paths(path)
    assert str(caught.value) == message
    assert path.read_bytes() == data


# ---------------------------------------------------------------------------
# Modes: a bundle is shipped, so another user of the machine (an app's users)
# must be able to load it whatever the umask of the user who wrote it.

def _modes(root: Path) -> dict[str, list[str]]:
    """Every path under `root` (itself included) that does not have the mode
    a shipped file needs, by what it is: directories 0755, ELF files 0755,
    other files 0644 or 0755."""
    wrong: dict[str, list[str]] = {}
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode & 0o7777
        if path.is_dir():
            kind, allowed = "dir", (0o755,)
        elif path.read_bytes()[:4] == b"\x7fELF":
            kind, allowed = "elf", (0o755,)
        else:
            kind, allowed = "file", (0o644, 0o755)
        if mode not in allowed:
            wrong.setdefault(kind, []).append(f"{path.relative_to(root)} {mode:04o}")
    return wrong


def test_bundle_modes_let_other_users_load_it(built):
    moved, _, _, _ = built
    assert moved.stat().st_mode & 0o7777 == 0o755
    assert _modes(moved) == {}


def test_bundle_written_under_umask_077_is_loadable_by_another_user(tmp_path):
    """Written with umask 077 into a folder anyone may enter, and loaded by a
    C host running as nobody (setpriv): it answers, as for its writer."""
    shared = Path(tempfile.mkdtemp(prefix="tsffi-shared-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        before = os.umask(0o077)
        try:
            bundle_mod.write_bundle(shared / "bundle", verify=False)
        finally:
            os.umask(before)
        assert _modes(shared / "bundle") == {}
        host = shared / "host"
        cmd = ["cc", "-std=c99", "-o", str(host), "-x", "c", "-", *_pkg_config(shared / "bundle")]
        proc = subprocess.run(cmd, input=BUILD_INFO_HOST, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        host.chmod(0o755)
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv is missing: apt-get install util-linux (.ci/run does)"
        nobody = 65534
        done = subprocess.run([setpriv, f"--reuid={nobody}", f"--regid={nobody}",
                               "--clear-groups", "env", "-i", str(host)],
                              capture_output=True, text=True, timeout=120, cwd="/")
        assert done.returncode == 0, done.stderr[-3000:]
        status, text = done.stdout.split("\n", 1)
        assert int(status) == CODES["TSFFI_OK"], text
        assert json.loads(text)["library"].startswith(str(shared / "bundle") + "/")
    finally:
        shutil.rmtree(shared, ignore_errors=True)
