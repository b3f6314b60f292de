"""Build libtsffi: include/tsffi.h + src/*.c + the
Python package, through cffi's embedding mode.

    python ffi_build.py            # builds turbospark_ffi/libtsffi.so in place

In a fixed order, as cffi's own embedding examples: declare (from the header,
which is the one source of the signatures), init code, source, compile. The
result lands inside the package, beside a copy of the header, so that an
installed package carries everything a native host needs.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
# The package's own readers of the header's numbers and of the library's
# file names: one source for the build, the bundle and the tests.
from turbospark_ffi.native import (HEADER_NAME, LINK_NAME, header_constants,  # noqa: E402
                                   library_name)
HEADER = ROOT / "include" / HEADER_NAME
# tsffi_embed.c: the runtime, the error slots and the warm cache; tsffi_index_scan.c:
# the resident index's check 7 in one pass (resident_index.py's fast path).
C_SOURCES = (ROOT / "src" / "tsffi_embed.c", ROOT / "src" / "tsffi_index_scan.c")
# What the built library is made of: a library older than any of these is
# stale (tests/conftest.py, bench/run.py and swift/run-tests.sh ask this).
LIBRARY_INPUTS = (HEADER, *C_SOURCES, ROOT / "ffi_build.py")
PACKAGE = ROOT / "turbospark_ffi"
MODULE_NAME = "_turbospark_ffi_embedded"
RPATH_ORIGIN = "@loader_path" if sys.platform == "darwin" else "$ORIGIN"

# Declarations only the build and the init code share: the Python side of
# the dispatcher. Not public, so not in the header.
INTERNAL_CDEF = """
#define TSFFI__FN_BUILD_INFO 0
#define TSFFI__FN_RESOLVE_DRAFTER 1
#define TSFFI__FN_DRAFT_POLICIES 2
#define TSFFI__FN_RESOLVE_SPECULATION 3
#define TSFFI__FN_SPECULATION_PLAN 4
#define TSFFI__FN_INSTALL_INFO 5
#define TSFFI__FN_SPECULATION_CHOICES 6
static void tsffi_set_error(const char *msg, size_t n);
static int32_t tsffi_emit(char **out, const char *data, size_t n);
static const char *tsffi_getenv(const char *name);
struct tsffi_file_key { int64_t ok, dev, ino, size, mtime_ns, ctime_ns, mode; };
static void tsffi_install_keys(const char *model_dir, struct tsffi_file_key keys[2]);
static void tsffi_cache_put(int32_t fn, const char *a, const char *b,
                            const struct tsffi_file_key *keys, const char *result, size_t len);
static const char *tsffi_get_library_path(void);
static const char *tsffi_get_package_parent(void);
static int tsffi_get_owns_interpreter(void);
#define TSFFI__SCAN_DECLINED 0
#define TSFFI__SCAN_OK 1
#define TSFFI__SCAN_JOINED_TOO_SMALL 2
static uint64_t tsffi_index_names_end(const char *table, uint64_t count,
                                    uint64_t index_size, uint64_t table_end);
static int tsffi_index_scan(const char *head, const char *tail, uint64_t tail_len,
                          uint64_t count, uint64_t index_size, uint64_t resident_end,
                          const char *queries, char *joined, uint64_t joined_cap,
                          int64_t *facts);
extern "Python" int32_t tsffi_py_call(int32_t fn, const char *a, const char *b, char **out);
extern "Python" int32_t tsffi_py_init_status(char *buf, size_t cap);
"""

# The init code runs inside cffi's start-up. It must not raise: cffi would
# print the traceback to the host's stderr and every call would return 0
# (TSFFI_OK) from then on. So it attaches the two entry points FIRST, then tries
# to import the package and hand over to it (turbospark_ffi/_boot.py, which
# the bundle's probe calls too), and keeps any failure as a message that
# every call returns as TSFFI_ERR_RUNTIME.
INIT_CODE = r'''
def _tsffi_boot():
    import sys
    from _turbospark_ffi_embedded import ffi, lib
    state = {"abi": None, "error": "the turbospark_ffi package was not imported"}

    def on_error(exc_type, exc_value, tb):
        try:
            text = "internal error: %s: %s" % (exc_type.__name__, exc_value)
            data = text.encode("utf-8", "backslashreplace")
            lib.tsffi_set_error(data, len(data))
        except BaseException:
            pass
        return None

    @ffi.def_extern(error=lib.TSFFI_ERR_INTERNAL, onerror=on_error)
    def tsffi_py_call(fn, a, b, out):
        abi = state["abi"]
        if abi is None:
            data = state["error"].encode("utf-8", "backslashreplace")
            lib.tsffi_set_error(data, len(data))
            return lib.TSFFI_ERR_RUNTIME
        return abi.dispatch(fn, a, b, out)

    @ffi.def_extern(error=lib.TSFFI_ERR_RUNTIME, onerror=on_error)
    def tsffi_py_init_status(buf, cap):
        if state["abi"] is not None:
            return lib.TSFFI_OK
        data = state["error"].encode("utf-8", "backslashreplace")[:max(cap - 1, 0)]
        ffi.memmove(buf, data + b"\0", len(data) + 1)
        return lib.TSFFI_ERR_RUNTIME

    parent = "?"
    try:
        parent = ffi.string(lib.tsffi_get_package_parent()).decode("utf-8", "surrogateescape")
        if lib.tsffi_get_owns_interpreter():
            # Our interpreter: keep the host's streams clean. A sink, not
            # None: with None CPython writes to the real stderr.
            class _Sink:
                def write(self, text):
                    return len(text)
                def flush(self):
                    pass
                def isatty(self):
                    return False
            sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = _Sink()
        if "turbospark_ffi" not in sys.modules:
            # In a Python host, the package beside the library comes first,
            # for this one import only: the host's sys.path is the host's.
            sys.path.insert(0, parent)
            try:
                import turbospark_ffi._boot
            finally:
                try:
                    sys.path.remove(parent)
                except ValueError:
                    pass
        # The rest is the package's own (turbospark_ffi/_boot.py): it checks
        # that the package is the one beside the library and binds it.
        from turbospark_ffi import _boot
        state["abi"] = _boot.attach(ffi, lib, parent)
    except BaseException as exc:
        state["error"] = ("the turbospark_ffi package could not be imported from %s: %s: %s"
                          % (parent, type(exc).__name__, exc))

try:
    _tsffi_boot()
except BaseException:
    pass
del _tsffi_boot
'''


def cdef_from_header(text: str) -> str:
    """The header's declarations as cffi's parser takes them: integer
    #defines kept; comments, other preprocessor lines, the C++ guard and
    the visibility/nullability macros removed."""
    out = [f"#define {name} {value}" for name, value in header_constants(text).items()]
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        if stripped in ('extern "C" {', "}"):
            continue
        out.append(line)
    body = "\n".join(out)
    body = re.sub(r"\b(TSFFI_API|TSFFI_NONNULL|TSFFI_NULLABLE)\b", "", body)
    return body


def require_shared_libpython() -> None:
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        sys.exit(
            "ffi_build: this Python (%s) has no shared libpython, which an embedded "
            "interpreter needs (the C host links it). Install a Python built with "
            "--enable-shared (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install "
            "3.11; Debian: libpython3.11-dev) and build with that one." % sys.executable)


def build_defines() -> str:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = sysconfig.get_path("stdlib")
    dynload = os.path.join(stdlib, "lib-dynload")
    if not os.path.isdir(dynload):
        dynload = sysconfig.get_config_var("DESTSHARED") or dynload
    values = {
        "TSFFI_BUILD_PYTHON_HOME": sys.base_prefix,
        "TSFFI_BUILD_STDLIB": stdlib,
        "TSFFI_BUILD_DYNLOAD": dynload,
        "TSFFI_BUILD_PYTHON_DIRNAME": f"python{version}",
        "TSFFI_BUILD_STDLIB_ZIP_NAME": f"python{version.replace('.', '')}.zip",
    }

    def c_string(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "".join(f"#define {k} {c_string(v)}\n" for k, v in values.items())


def make_ffi(tmpdir: Path):
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(cdef_from_header(HEADER.read_text()))
    ffi.cdef(INTERNAL_CDEF)
    ffi.embedding_init_code(INIT_CODE)
    libdir = sysconfig.get_config_var("LIBDIR")
    ffi.set_source(
        MODULE_NAME,
        build_defines() + "\n".join(source.read_text() for source in C_SOURCES),
        include_dirs=[str(HEADER.parent)],
        libraries=["dl", "pthread"],
        # -g0: debug information records the build directory (for pip, a
        # deleted temporary one) and the build machine's include paths; an
        # installed library carries no path of the machine that built it
        # beyond the Python home it runs against.
        extra_compile_args=["-O2", "-g0", "-Wall", "-Wno-unused-function",
                            "-Wno-format-truncation"],
        # rpath: $ORIGIN first, so a relocatable bundle (libpython copied
        # beside the library) finds its own copy; then the libpython this was
        # built with, wherever the host runs from. The bundle (bundle/elf.py) cuts the second
        # entry out of a bundled copy. nodelete: Python cannot be unloaded,
        # so neither can we.
        extra_link_args=[f"-Wl,-rpath,{RPATH_ORIGIN}:{libdir}", "-Wl,-z,nodelete",
                         *export_link_args(tmpdir)],
    )
    return ffi


def exported_functions(text: str) -> list[str]:
    """The functions the header declares public: the only symbols the
    library exports."""
    return re.findall(r"^TSFFI_API\s+[^;(]*?\b(tsffi_[a-z0-9_]+)\s*\(", text, re.M)


def export_link_args(tmpdir: Path) -> list[str]:
    """Only the header's functions leave the library, and its own references
    to them bind inside it.

    The process this library is for also holds the engine's library and
    whatever else a GUI links; a name exported twice resolves to whichever
    was loaded first. `--version-script` keeps every other symbol (cffi's
    module init included: cffi calls it directly) out of the dynamic table;
    `-Bsymbolic-functions` binds the library's calls to its own functions at
    link time, so no library loaded before it can take them over. (Mach-O's
    two-level namespace already binds each reference to its own image.)"""
    if sys.platform == "darwin":
        return []
    names = [*exported_functions(HEADER.read_text()), f"PyInit_{MODULE_NAME}"]
    script = tmpdir.resolve() / "exports.map"  # the link runs inside tmpdir
    script.write_text("{\n  global:\n%s  local: *;\n};\n"
                      % "".join(f"    {name};\n" for name in names))
    return [f"-Wl,--version-script={script}", "-Wl,-Bsymbolic-functions"]


def build(package_dir: Path = PACKAGE, tmpdir: Path | None = None, verbose: bool = False) -> Path:
    require_shared_libpython()
    tmpdir = tmpdir or ROOT / "build" / "cffi"
    tmpdir.mkdir(parents=True, exist_ok=True)
    ffi = make_ffi(tmpdir)
    built = Path(ffi.compile(tmpdir=str(tmpdir), target=f"lib{LINK_NAME}.*",
                             verbose=verbose))
    target = package_dir / library_name()
    tmp_target = target.with_suffix(target.suffix + ".tmp")
    shutil.copy2(built, tmp_target)
    # Atomic replace: a host with the old library mapped keeps its copy.
    os.replace(tmp_target, target)
    include = package_dir / "include"
    include.mkdir(exist_ok=True)
    shutil.copy2(HEADER, include / HEADER.name)
    # The embedded interpreter never writes bytecode (a signed bundle must
    # not change under the host), so without these every process that loads
    # the library compiles the package from source: 39 ms instead of 23 ms to
    # the first answer, measured (bench/run.py, cold start). pip writes them on install;
    # this does it for the in-place build a checkout uses.
    import compileall
    compileall.compile_dir(str(package_dir), quiet=1)
    return target


if __name__ == "__main__":
    if sys.argv[1:] == ["--inputs"]:  # for shell scripts: one path a line
        print("\n".join(map(str, LIBRARY_INPUTS)))
    else:
        print(build(verbose="-v" in sys.argv))
