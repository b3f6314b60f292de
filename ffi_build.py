"""Build libtsffi: include/tsffi.h + src/*.c + the
Python package, through cffi's embedding mode.

    python ffi_build.py            # builds turbospark_ffi/libtsffi.so (.dylib) in place
    python ffi_build.py --emit-c DIR [--platform darwin|linux] [--python-config FILE.json]
                                   # writes the generated C and DIR/build.json, builds nothing
    python ffi_build.py --inputs   # the files the library is made of, one a line

In a fixed order, as cffi's own embedding examples: declare (from the header,
which is the one source of the signatures), init code, source, compile. The
result lands inside the package, beside a copy of the header, so that an
installed package carries everything a native host needs.

What the build passes to the compiler and linker is data, computed by one
function (`build_spec`) from a platform and a description of a Python (its
sysconfig, as `describe_python()` returns it, or as the same one-liner prints it
on another machine): the in-place build uses it, and `--emit-c` prints it, so
what is printed is what is built. setuptools adds, as for any extension, the
compiler driver, the Python's own CFLAGS/LDSHARED and `-arch` flags (ARCHFLAGS).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
# The package's own readers of the header's numbers and of the library's
# file names: one source for the build, the bundle and the tests.
from turbospark_ffi.native import (BUILD_PATH_TAG, HEADER_NAME, LINK_NAME,  # noqa: E402
                                   header_constants, library_name)
HEADER = ROOT / "include" / HEADER_NAME
# tsffi_embed.c: the runtime, the error slots and the warm cache; tsffi_index_scan.c:
# the resident index's check 7 in one pass (resident_index.py's fast path).
C_SOURCES = (ROOT / "src" / "tsffi_embed.c", ROOT / "src" / "tsffi_index_scan.c")
# What the built library is made of: a library older than any of these is
# stale (tests/conftest.py, bench/run.py and swift/run-tests.sh ask this).
LIBRARY_INPUTS = (HEADER, *C_SOURCES, ROOT / "ffi_build.py")
PACKAGE = ROOT / "turbospark_ffi"
MODULE_NAME = "_turbospark_ffi_embedded"
# The platforms whose linker rules the build knows: ELF (GNU ld / lld) and
# Mach-O (Apple's ld64 / ld-prime). Any other system is built as "linux" (ELF).
PLATFORMS = ("darwin", "linux")
# The keys of build.json, in order: a distutils Extension's fields (what cffi's
# set_source takes) plus the file it writes and the slices setuptools builds.
SPEC_KEYS = ("sources", "include_dirs", "define_macros", "libraries", "library_dirs",
             "extra_compile_args", "extra_link_args", "output", "archs")

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
#define TSFFI__FN_STORE 7
#define TSFFI__FN_RECONCILE 8
static void tsffi_set_error(const char *msg, size_t n);
static int32_t tsffi_emit(char **out, const char *data, size_t n);
static const char *tsffi_getenv(const char *name);
struct tsffi_file_key { int64_t ok, dev, ino, size, mtime_ns, ctime_ns, mode; };
#define TSFFI_INSTALL_FILES 3
static void tsffi_install_keys(const char *model_dir, struct tsffi_file_key keys[3]);
static uint64_t tsffi_cache_epoch_now(void);
static void tsffi_cache_new_epoch(void);
static void tsffi_cache_put(int32_t fn, const char *a, const char *b,
                            const struct tsffi_file_key *keys, uint64_t epoch,
                            const char *result, size_t len);
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
extern "Python" int32_t tsffi_py_call(int32_t fn, const char *a, const char *b, const char *c,
                                     char **out);
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
    def tsffi_py_call(fn, a, b, c, out):
        abi = state["abi"]
        if abi is None:
            data = state["error"].encode("utf-8", "backslashreplace")
            lib.tsffi_set_error(data, len(data))
            return lib.TSFFI_ERR_RUNTIME
        return abi.dispatch(fn, a, b, c, out)

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
        # The package is found by the finder the C start-up installed
        # (src/tsffi_embed.c, tsffi_seal), never through sys.path. In a
        # Python host it is first and for this one import only (the host's
        # import system is the host's): removed here.
        try:
            import turbospark_ffi._boot
        finally:
            sys.meta_path[:] = [finder for finder in sys.meta_path
                                if not getattr(finder, "temporary", False)
                                or type(finder).__name__ != "TsffiSealedFinder"]
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


class BuildRefused(Exception):
    """This Python or description cannot be built for: the message says what
    is missing and what to do. `python ffi_build.py` exits 1 with it."""


def host_platform() -> str:
    return "darwin" if sys.platform == "darwin" else "linux"


def describe_python() -> dict[str, Any]:
    """The running Python, in the shape `--python-config` reads: what
    `python3 -c 'import json,sys,sysconfig; print(json.dumps({"vars":
    sysconfig.get_config_vars(), "paths": sysconfig.get_paths(), "base_prefix":
    sys.base_prefix}, default=str))'` prints on the machine that has it."""
    return {"vars": sysconfig.get_config_vars(), "paths": sysconfig.get_paths(),
            "base_prefix": sys.base_prefix, "source": sys.executable or "this Python"}


def read_python_config(path: str | os.PathLike) -> dict[str, Any]:
    """A described Python from FILE.json, checked for what the build reads."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise BuildRefused(f"--python-config {path}: cannot read it as JSON ({exc}); accepts "
                           "the JSON object the sysconfig one-liner in ffi_build.py prints")
    if not isinstance(data, dict):
        raise BuildRefused(f"--python-config {path}: got a JSON {type(data).__name__}; accepts "
                           'an object with "vars", "paths" and "base_prefix"')
    for key, kind in (("vars", dict), ("paths", dict), ("base_prefix", str)):
        if not isinstance(data.get(key), kind):
            raise BuildRefused(f"--python-config {path}: {key!r} is missing or not a JSON "
                               f"{'object' if kind is dict else 'string'} (got "
                               f"{type(data.get(key)).__name__}); accepts the object the "
                               "sysconfig one-liner in ffi_build.py prints")
    data["source"] = str(path)
    return data


# What the build reads of a description; a missing one is named.
_REQUIRED_VARS = ("VERSION", "MACHDEP", "LIBDIR", "INCLUDEPY")
_REQUIRED_PATHS = ("stdlib",)


def _var(python: dict[str, Any], name: str) -> Any:
    return python["vars"].get(name)


def _required(python: dict[str, Any]) -> None:
    for name in _REQUIRED_VARS:
        if not _var(python, name):
            raise BuildRefused(f"the Python described by {python['source']} has no sysconfig "
                               f"variable {name} (the build needs {', '.join(_REQUIRED_VARS)})")
    for name in _REQUIRED_PATHS:
        if not python["paths"].get(name):
            raise BuildRefused(f"the Python described by {python['source']} has no sysconfig "
                               f"path {name!r}")


def _is_framework(python: dict[str, Any]) -> bool:
    return bool(_var(python, "PYTHONFRAMEWORK"))


def libpython_dir(python: dict[str, Any], platform: str) -> str:
    """The directory the Python's shared interpreter is loaded from, or
    BuildRefused when it has none.

    An embedded interpreter needs a libpython to link and load. A framework
    build (python.org, Homebrew) has Py_ENABLE_SHARED = 0: the framework's
    `Versions/X.Y/<PYTHONFRAMEWORK>` IS the shared library (CPython's
    configure refuses --enable-shared with --enable-framework), and LIBDIR's
    libpythonX.Y.dylib is a symlink to it. A Python with neither (pyenv's
    default build) has only a static libpython: refused, naming both fixes."""
    _required(python)
    machdep = _var(python, "MACHDEP")
    if (machdep == "darwin") != (platform == "darwin"):
        raise BuildRefused(f"the Python described by {python['source']} is a {machdep} Python "
                           f"(MACHDEP = {machdep!r}); --platform {platform} needs a "
                           f"{'darwin' if platform == 'darwin' else 'non-darwin'} one")
    version = _var(python, "VERSION")
    if platform == "darwin" and _is_framework(python):
        prefix = _var(python, "PYTHONFRAMEWORKPREFIX")
        fwdir = _var(python, "PYTHONFRAMEWORKDIR")
        if not prefix or not fwdir:
            raise BuildRefused(f"the framework Python described by {python['source']} has no "
                               "PYTHONFRAMEWORKPREFIX/PYTHONFRAMEWORKDIR to find its library by")
        return f"{prefix}/{fwdir}/Versions/{version}"
    if _var(python, "Py_ENABLE_SHARED"):
        return _var(python, "LIBDIR")
    raise BuildRefused(
        f"this Python ({python['source']}) cannot host an embedded interpreter: it has no "
        "shared libpython (Py_ENABLE_SHARED = 0) and is not a framework build "
        "(PYTHONFRAMEWORK is empty), so there is no libpython for the library to link and "
        "load; its libpython is static (pyenv's default build is). Use a Python configured "
        "with --enable-shared or, on macOS, --enable-framework (pyenv: "
        f"PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install {version}, or "
        "PYTHON_CONFIGURE_OPTS=--enable-framework; python.org's and Homebrew's Pythons are "
        f"framework builds; Debian: libpython{version}-dev), and build with that one.")


def _c_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_defines(python: dict[str, Any], platform: str) -> list[tuple[str, str]]:
    """The paths of the described Python the C reads (TSFFI_BUILD_*).

    The home, standard library and extension-module directory as they were
    at build time, and the same three relative to the directory libpython is
    loaded from: at load time the library finds them beside the libpython
    actually loaded (src/tsffi_embed.c, tsffi_python_home), so a Python moved
    with its files (Homebrew's versioned Cellar path on `brew upgrade`) keeps
    working; the absolute ones are the fallback. The C stores each absolute
    one led by TSFFI_BUILD_PATH_TAG, which a bundle finds to blank them in
    its copy: they name the build machine's Python."""
    version = _var(python, "VERSION")
    stdlib = python["paths"]["stdlib"]
    dynload = os.path.join(stdlib, "lib-dynload")
    if not os.path.isdir(dynload):
        dynload = _var(python, "DESTSHARED") or dynload
    home = python["base_prefix"]
    anchor = libpython_dir(python, platform)
    values = {
        "TSFFI_BUILD_PYTHON_HOME": home,
        "TSFFI_BUILD_STDLIB": stdlib,
        "TSFFI_BUILD_DYNLOAD": dynload,
        "TSFFI_BUILD_PYTHON_DIRNAME": f"python{version}",
        "TSFFI_BUILD_STDLIB_ZIP_NAME": f"python{version.replace('.', '')}.zip",
        "TSFFI_BUILD_PYTHON_VERSION": version,
        "TSFFI_BUILD_FRAMEWORK_NAME": _var(python, "PYTHONFRAMEWORK") or "",
        "TSFFI_BUILD_LIBPYTHON_DIR": anchor,
        "TSFFI_BUILD_HOME_FROM_LIBPYTHON": os.path.relpath(home, anchor),
        "TSFFI_BUILD_STDLIB_FROM_LIBPYTHON": os.path.relpath(stdlib, anchor),
        "TSFFI_BUILD_DYNLOAD_FROM_LIBPYTHON": os.path.relpath(dynload, anchor),
        "TSFFI_BUILD_PATH_TAG": BUILD_PATH_TAG,
    }
    return [(name, _c_string(value)) for name, value in values.items()]


def exported_functions(text: str) -> list[str]:
    """The functions the header declares public: the only symbols the
    library exports."""
    return re.findall(r"^TSFFI_API\s+[^;(]*?\b(tsffi_[a-z0-9_]+)\s*\(", text, re.M)


def exported_names() -> list[str]:
    """Every symbol the library exports: the header's functions, and the
    module init cffi generates (PyInit_<module>: cffi's start-up calls it, and
    CPython's PyMODINIT_FUNC declares it exported). Nothing else."""
    return [*exported_functions(HEADER.read_text()), f"PyInit_{MODULE_NAME}"]


def export_link_args(platform: str, workdir: Path) -> list[str]:
    """Only the header's functions leave the library, and its own references
    to them bind inside it.

    The process this library is for also holds the engine's library and
    whatever else a GUI links; a name exported twice resolves to whichever
    was loaded first. ELF: `--version-script` keeps every other symbol out of
    the dynamic table; `-Bsymbolic-functions` binds the library's calls to
    its own functions at link time, so no library loaded before it can take
    them over. Mach-O: `-exported_symbols_list` (one `_name` a line, the C
    names with the Mach-O underscore) is ld64's equivalent; its two-level
    namespace already binds each reference to its own image."""
    names = exported_names()
    workdir = workdir.resolve()  # the link runs inside workdir
    if platform == "darwin":
        listing = workdir / "exports.txt"
        listing.write_text("".join(f"_{name}\n" for name in names))
        return [f"-Wl,-exported_symbols_list,{listing}"]
    script = workdir / "exports.map"
    script.write_text("{\n  global:\n%s  local: *;\n};\n"
                      % "".join(f"    {name};\n" for name in names))
    return [f"-Wl,--version-script={script}", "-Wl,-Bsymbolic-functions"]


def darwin_archs(python: dict[str, Any], environ: dict[str, str] | None = None) -> list[str]:
    """The slices setuptools builds on macOS: ARCHFLAGS' `-arch` names when
    set (`ARCHFLAGS="-arch arm64 -arch x86_64"` builds a universal library),
    else those of the Python's own CFLAGS (python.org's universal2 Python
    has both), else none (the compiler's default: the machine's)."""
    environ = os.environ if environ is None else environ
    flags = environ.get("ARCHFLAGS")
    if flags is None:
        flags = str(_var(python, "CFLAGS") or "")
    return re.findall(r"-arch\s+(\S+)", flags)


def build_spec(platform: str, python: dict[str, Any], workdir: Path,
               environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything the build passes to the compiler and linker for `platform`
    and the described Python, as build.json holds it. Writes the export list
    into `workdir` (where the C source and the output go too)."""
    if platform not in PLATFORMS:
        raise BuildRefused(f"platform {platform!r} is not one this build knows; accepts "
                           f"{' or '.join(PLATFORMS)}")
    defines = build_defines(python, platform)  # refuses a Python without a libpython first
    pythonlib = f"python{_var(python, 'VERSION')}{_var(python, 'ABIFLAGS') or ''}"
    libdir = _var(python, "LIBDIR")
    output = workdir.resolve() / library_name(platform)
    # -g0: debug information records the build directory (for pip, a
    # deleted temporary one) and the build machine's include paths; an
    # installed library carries no path of the machine that built it
    # beyond the Python home it runs against.
    compile_args = ["-O2", "-g0", "-Wall", "-Wno-unused-function"]
    if platform == "darwin":
        # Apple's linker rules (there is no -z, and no `a:b` rpath list):
        # the id is @rpath/ + the file name, so a host linked with
        # `turbospark-ffi config --libs` (or an app that embeds the library
        # and carries its own rpath) records a name dyld resolves from
        # anywhere; -rpath takes one path each: @loader_path first, so a
        # copy of libpython beside the library wins, then the Python's
        # library directory (python-build-standalone's libpython is
        # @rpath/libpythonX.Y.dylib; a framework's id is absolute). Room to
        # rewrite install names later (install_name_tool, the bundle).
        # Python is never unloaded: a Mach-O image that links it is not
        # unloaded in practice, and a host wanting certainty dlopens with
        # RTLD_NODELETE (ELF's -z nodelete has no ld64 equivalent).
        libraries = [pythonlib]
        link_args = [f"-Wl,-install_name,@rpath/{library_name(platform)}",
                     "-Wl,-rpath,@loader_path", f"-Wl,-rpath,{libdir}",
                     "-Wl,-headerpad_max_install_names",
                     *export_link_args(platform, workdir)]
        archs = darwin_archs(python, environ)
    else:
        compile_args.append("-Wno-format-truncation")  # GCC's; what snprintf cuts is checked
        libraries = ["dl", "pthread", pythonlib]
        # rpath: $ORIGIN first, so a relocatable bundle (libpython copied
        # beside the library) finds its own copy; then the libpython this was
        # built with, wherever the host runs from. The bundle (bundle/elf.py)
        # overwrites the whole entry with $ORIGIN in a bundled copy. nodelete:
        # Python cannot be unloaded, so neither can we.
        link_args = [f"-Wl,-rpath,$ORIGIN:{libdir}", "-Wl,-z,nodelete",
                     *export_link_args(platform, workdir)]
        archs = []
    return {
        "sources": [str(workdir.resolve() / f"{MODULE_NAME}.c")],
        "include_dirs": [str(HEADER.parent), _var(python, "INCLUDEPY")],
        "define_macros": defines,
        "libraries": libraries,
        # setuptools adds -L LIBDIR only when Py_ENABLE_SHARED is set, so a
        # framework build would link -lpythonX.Y with no search path.
        "library_dirs": [libdir],
        "extra_compile_args": compile_args,
        "extra_link_args": link_args,
        "output": str(output),
        "archs": archs,
    }


def make_ffi(spec: dict[str, Any]):
    """cffi's declarations, init code and source, with the spec's flags."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(cdef_from_header(HEADER.read_text()))
    ffi.cdef(INTERNAL_CDEF)
    ffi.embedding_init_code(INIT_CODE)
    ffi.set_source(
        MODULE_NAME,
        "\n".join(source.read_text() for source in C_SOURCES),
        # cffi names the generated C file itself ("sources" lists it).
        # Copies: cffi appends its own libpython to `libraries` when it is missing.
        **{key: list(spec[key]) for key in SPEC_KEYS if key not in ("sources", "output", "archs")})
    return ffi


def emit_c(out_dir: Path, platform: str, python: dict[str, Any] | None = None) -> Path:
    """Write the generated C and out_dir/build.json for `platform` and the
    described Python (default: this one); build nothing. Returns build.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = build_spec(platform, python or describe_python(), out_dir)
    import contextlib
    with contextlib.redirect_stdout(sys.stderr):  # cffi says "generating <file>"
        make_ffi(spec).emit_c_code(spec["sources"][0])
    target = out_dir / "build.json"
    target.write_text(json.dumps(spec, indent=2) + "\n")
    return target


def build(package_dir: Path = PACKAGE, tmpdir: Path | None = None, verbose: bool = False,
          python: dict[str, Any] | None = None) -> Path:
    """Build the library for this machine into package_dir. `python`: the
    Python to link and embed, as describe_python() gives it (default: this
    one; a test builds against a copy of it)."""
    tmpdir = tmpdir or ROOT / "build" / "cffi"
    tmpdir.mkdir(parents=True, exist_ok=True)
    spec = build_spec(host_platform(), python or describe_python(), tmpdir)
    ffi = make_ffi(spec)
    built = Path(ffi.compile(tmpdir=str(tmpdir), target=Path(spec["output"]).name,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ffi_build.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", action="store_true",
                        help="print the files the library is made of, one a line")
    parser.add_argument("--emit-c", metavar="DIR", type=Path,
                        help="write the generated C and DIR/build.json; build nothing")
    parser.add_argument("--platform", choices=PLATFORMS, default=host_platform(),
                        help="the platform whose linker rules apply (default: this machine's)")
    parser.add_argument("--python-config", metavar="FILE.json", type=Path,
                        help="the Python to build for, as the sysconfig one-liner prints it "
                             "(default: this Python)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.inputs:  # for shell scripts: one path a line
        print("\n".join(map(str, LIBRARY_INPUTS)))
        return 0
    try:
        if args.emit_c is None:
            if args.python_config is not None or args.platform != host_platform():
                parser.error("--platform and --python-config describe what --emit-c writes; "
                             "the build itself is for this machine and this Python")
            print(build(verbose=args.verbose))
        else:
            python = read_python_config(args.python_config) if args.python_config else None
            print(emit_c(args.emit_c, args.platform, python))
    except BuildRefused as refused:
        print(f"ffi_build: {refused}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
