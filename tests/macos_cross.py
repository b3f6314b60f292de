"""The library cross-built for macOS from Linux, and read back.

No Mac is reachable from the machines this project is tested on, so what can
be checked of the macOS build is checked here: the real generated C
(`ffi_build.py --emit-c DIR --platform darwin --python-config FILE`) is
compiled for macOS with zig (PyPI's `ziglang`, which carries macOS's libc
headers), linked with exactly build.json's arguments by zig and by Debian's
`ld64.lld-14` (a Mach-O linker that, unlike zig's, rejects options Apple's
linker does not have), against a stand-in of the described Python's library
carrying that Python's real install name, and the result is read back with
`lief`. Nothing here loads the result with dyld, starts an interpreter on a
real framework, or signs anything.

Public API (tests/test_macos_build.py uses it; other tests may import it):

    cross_build_library(tmpdir, arch, python="python.org", linker="lld") -> Path
        libtsffi.dylib for one arch ("arm64" or "x86_64"), built for the
        described Python `python` (a name of PYTHONS: "python.org",
        "homebrew", "standalone"; see tests/pythons/*.json) and linked by
        `linker` ("lld" or "zig"). Everything it makes is under tmpdir.
        tests/test_bundle_macos.py bundles it (python.org, arm64, lld).
    cross_build_universal(tmpdir, python="python.org") -> Path
        both slices (lld) combined by llvm-lipo into one universal file.
    stand_in_python(root, python, arch, symbols) -> Path
        a dylib standing in for the described Python's library: it defines
        `symbols` (Mach-O names, leading underscore) and has the Python's real
        install name; it is written under `root` at that install name's path
        (a framework's Versions/X.Y/Python with lib/libpythonX.Y.dylib
        pointing at it, Versions/Current and the framework's top-level Python
        link as python.org lays them out; or LIBDIR/libpythonX.Y.dylib), so
        that `root` serves as the linkers' syslibroot and build.json's `-L`
        paths are used as they are. `arch` is one architecture, or several
        (a universal file, as python.org's universal2 framework ships). The
        one builder of a stand-in Python: tests/macos_standins.py builds the
        macOS bundle's framework on it.
    emit(workdir, python, environ=None) -> dict
        runs `ffi_build.py --emit-c` for the described Python, returns build.json.
    check_library(path, python, spec, linker) -> list[str]
        every way the file breaks Apple's rules as the issue states them
        (id, rpaths, exports, load commands, two-level namespace); [] when none.
    linked_host_loads(tmpdir, library, arch, linker) -> list[str]
        a host linked the way `turbospark-ffi config --libs` says: its
        LC_LOAD_DYLIB names.

A tool that is missing raises CrossToolMissing, naming how to install it
(pyproject's `test` extra: ziglang, lief; .ci/run: lld-14, llvm-14).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHONS_DIR = Path(__file__).resolve().parent / "pythons"
sys.path.insert(0, str(ROOT))

from turbospark_ffi import native  # noqa: E402

ARCHS = ("arm64", "x86_64")
PYTHONS = ("python.org", "homebrew", "standalone")
LINKERS = ("zig", "lld")
# zig's target triples, at the oldest macOS each of its libc headers covers;
# ld64.lld needs the same as -platform_version MIN SDK.
ZIG_TARGETS = {"arm64": "aarch64-macos.11.0", "x86_64": "x86_64-macos.10.13"}
MACOS_MIN = {"arm64": "11.0", "x86_64": "10.13"}
SYSTEM_LIBRARY = "/usr/lib/libSystem.B.dylib"
INSTALL_NAME = f"@rpath/{native.library_name('darwin')}"
# Symbols zig's linker synthesizes and exports whatever the export list says
# (measured; Apple's ld64 and ld64.lld keep them private). Allowed in zig's
# link only, by name.
ZIG_SYNTHESIZED = frozenset({"__mh_dylib_header", "___dso_handle"})
TIMEOUT = 300


class CrossToolMissing(AssertionError):
    """A tool the cross-check needs is not installed; the message says how."""


def _run(cmd: list[Any], cwd: Path | None = None, env: dict | None = None,
         ok: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd,
                            env=env, timeout=TIMEOUT)
    if ok and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))}\nexit {result.returncode}\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def zig() -> list[str]:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        raise CrossToolMissing("zig is missing: pip install ziglang (pyproject.toml's test "
                               "extra has it; make test installs it)") from None
    return [sys.executable, "-m", "ziglang"]


def _tool(names: tuple[str, ...], package: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise CrossToolMissing(f"{names[0]} is missing: apt-get install {package} (.ci/run does; "
                           f"on macOS: brew install {'lld' if 'lld' in names[0] else 'llvm'})")


def ld64_lld() -> str:
    return _tool(("ld64.lld-14", "ld64.lld"), "lld-14")


def llvm_lipo() -> str:
    return _tool(("llvm-lipo-14", "llvm-lipo"), "llvm-14")


def lief_module():
    try:
        import lief
    except ImportError:
        raise CrossToolMissing("lief is missing: pip install lief (pyproject.toml's test extra "
                               "has it; make test installs it)") from None
    lief.logging.disable()
    return lief


# --------------------------------------------------------------------------
# Described Pythons

def described_python_path(python: str) -> Path:
    path = PYTHONS_DIR / f"{python}.json"
    if not path.is_file():
        known = sorted(p.stem for p in PYTHONS_DIR.glob("*.json"))
        raise ValueError(f"no described Python {python!r}; accepts {', '.join(known)}")
    return path


def described_python(python: str) -> dict[str, Any]:
    return json.loads(described_python_path(python).read_text())


def emit(workdir: Path, python: str, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """`python ffi_build.py --emit-c workdir --platform darwin --python-config
    tests/pythons/<python>.json`, as a user runs it; returns build.json."""
    env = {k: v for k, v in os.environ.items() if k != "ARCHFLAGS"}
    env.update(environ or {})
    _run([sys.executable, ROOT / "ffi_build.py", "--emit-c", workdir, "--platform", "darwin",
          "--python-config", described_python_path(python)], env=env)
    return json.loads((workdir / "build.json").read_text())


# --------------------------------------------------------------------------
# Compiling and the stand-ins

def compile_object(spec: dict[str, Any], python: str, arch: str, workdir: Path) -> Path:
    """The generated C compiled for macOS with build.json's include
    directories, macros and compile arguments. The described Python's
    headers are not on this machine: its include directory is replaced by
    this Python's (the C API of one X.Y is the same on both systems)."""
    described_include = described_python(python)["vars"]["INCLUDEPY"]
    includes = [sysconfig.get_config_var("INCLUDEPY") if d == described_include else d
                for d in spec["include_dirs"]]
    obj = workdir / f"{Path(spec['sources'][0]).stem}.{arch}.o"
    _run([*zig(), "cc", "-target", ZIG_TARGETS[arch], "-c", spec["sources"][0], "-o", obj,
          *[f"-I{d}" for d in includes], *[f"-D{name}={value}" for name, value in spec["define_macros"]],
          *spec["extra_compile_args"], "-Werror"])
    return obj


def undefined_symbols(obj: Path) -> list[str]:
    lief = lief_module()
    binary = lief.parse(str(obj))
    return sorted(s.name for s in binary.symbols if s.type == lief.MachO.Symbol.TYPE.UNDEFINED)


def is_python_symbol(name: str) -> bool:
    return name.startswith(("_Py", "__Py"))


def libsystem_tbd(root: Path, symbols: list[str]) -> Path:
    """A TAPI v4 text stub of libSystem listing `symbols` (ld64.lld 14 cannot
    read zig's bundled one), at root/usr/lib/libSystem.tbd."""
    target = root / "usr" / "lib" / "libSystem.tbd"
    target.parent.mkdir(parents=True, exist_ok=True)
    names = sorted(set(symbols) | {"dyld_stub_binder"})
    targets = ", ".join(f"{a}-macos" for a in ARCHS)
    target.write_text(
        "--- !tapi-tbd\ntbd-version: 4\n"
        f"targets: [ {targets} ]\n"
        f"install-name: '{SYSTEM_LIBRARY}'\ncurrent-version: 1311\n"
        f"exports:\n  - targets: [ {targets} ]\n"
        f"    symbols: [ {', '.join(repr(n) for n in names)} ]\n...\n")
    # As in Apple's SDK: -ldl, -lpthread, -lc and -lm name libSystem too, and
    # its install name's file has a stub of its own.
    for alias in ("dl", "pthread", "c", "m", "System.B"):
        link = target.parent / f"lib{alias}.tbd"
        if not link.is_symlink():
            link.symlink_to(target.name)
    return target


def _libpython_file(root: Path, described: dict[str, Any]) -> tuple[Path, Path | None]:
    """Where the described Python's library is (under root), and the
    lib/libpythonX.Y.dylib symlink a framework has beside it."""
    v = described["vars"]
    name = f"libpython{v['VERSION']}{v.get('ABIFLAGS') or ''}.dylib"
    install_name = described["libpython_install_name"]
    libdir = root / v["LIBDIR"].lstrip("/")
    if install_name.startswith("@rpath/"):
        return libdir / install_name[len("@rpath/"):], None
    return root / install_name.lstrip("/"), libdir / name


def stand_in_python(root: Path, python: str, arch: str | tuple[str, ...],
                    symbols: list[str]) -> Path:
    """A dylib defining `symbols` with the described Python's install name,
    placed under root where that Python has its library (see the module's
    docstring); for several archs, one thin file each joined by llvm-lipo.
    Functions all: a linker only needs the names to exist."""
    described = described_python(python)
    archs = (arch,) if isinstance(arch, str) else tuple(arch)
    unknown = [a for a in archs if a not in ARCHS]
    if not archs or unknown:
        raise ValueError(f"arch {arch!r}; accepts {' or '.join(ARCHS)}, or several of them")
    target, link = _libpython_file(root, described)
    target.parent.mkdir(parents=True, exist_ok=True)
    source = root.parent / f"stand_in_{python}_{'_'.join(archs)}.c"
    source.write_text("".join(f"void {name[1:]}(void) {{}}\n" for name in sorted(symbols)))
    thin = [target.with_name(f".{target.name}.{a}") if len(archs) > 1 else target for a in archs]
    for one, path in zip(archs, thin):
        _run([*zig(), "cc", "-target", ZIG_TARGETS[one], "-shared", "-o", path, source,
              f"-Wl,-install_name,{described['libpython_install_name']}",
              "-Wl,-headerpad_max_install_names"])
    if len(archs) > 1:
        lipo(thin, target)
        for path in thin:
            path.unlink()
    if link is not None:
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(target, link.parent))
    framework = described["vars"].get("PYTHONFRAMEWORK")
    if framework:
        # Versions/X.Y/<name> -> Versions/Current -> X.Y, <name>.framework/<name>.
        current = target.parent.parent / "Current"
        if not current.is_symlink():
            current.symlink_to(target.parent.name)
        top = target.parent.parent.parent / target.name
        if not top.is_symlink():
            top.symlink_to(f"Versions/Current/{target.name}")
    return target


# --------------------------------------------------------------------------
# Linking

def _linker_args(args: list[str]) -> list[str]:
    """Compiler-driver link arguments as the linker receives them."""
    out: list[str] = []
    for arg in args:
        out += arg[len("-Wl,"):].split(",") if arg.startswith("-Wl,") else [arg]
    return out


def link_library(spec: dict[str, Any], obj: Path, arch: str, linker: str, root: Path) -> Path:
    """Link as cffi does on macOS (setuptools' LDSHARED with -bundle made
    -dynamiclib, run inside the output's directory with `-o ./NAME`), with
    build.json's libraries, library directories and link arguments exactly;
    `root` is the syslibroot holding the stand-ins."""
    output = Path(spec["output"])
    out_dir = output.parent / f"{linker}-{arch}"
    out_dir.mkdir(parents=True, exist_ok=True)
    libs = [*[f"-L{d}" for d in spec["library_dirs"]], *[f"-l{n}" for n in spec["libraries"]]]
    if linker == "zig":
        cmd = [*zig(), "cc", "-target", ZIG_TARGETS[arch], "-dynamiclib", "-o",
               f"./{output.name}", obj, f"--sysroot={root}", *libs, *spec["extra_link_args"]]
    elif linker == "lld":
        cmd = [ld64_lld(), "-arch", arch, "-platform_version", "macos", MACOS_MIN[arch],
               MACOS_MIN[arch], "-dylib", "-o", f"./{output.name}", obj, "-syslibroot", root,
               *libs, "-lSystem", *_linker_args(spec["extra_link_args"])]
    else:
        raise ValueError(f"linker {linker!r}; accepts {' or '.join(LINKERS)}")
    _run(cmd, cwd=out_dir)
    return out_dir / output.name


def prepare(tmpdir: Path, arch: str, python: str,
            environ: dict[str, str] | None = None) -> tuple[dict[str, Any], Path, Path]:
    """build.json, the compiled object and the syslibroot for one Python and arch."""
    work = Path(tmpdir) / python
    spec_dir = work / "emit"
    spec = (json.loads((spec_dir / "build.json").read_text())
            if (spec_dir / "build.json").is_file() and environ is None
            else emit(spec_dir, python, environ))
    obj = compile_object(spec, python, arch, spec_dir)
    root = work / f"root-{arch}"
    symbols = undefined_symbols(obj)
    stand_in_python(root, python, arch, [s for s in symbols if is_python_symbol(s)])
    libsystem_tbd(root, [s for s in symbols if not is_python_symbol(s)])
    return spec, obj, root


def cross_build_library(tmpdir: Path, arch: str, python: str = "python.org",
                        linker: str = "lld") -> Path:
    """libtsffi.dylib for `arch`, built for the described Python `python`
    and linked by `linker`; see the module docstring."""
    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r}; accepts {' or '.join(ARCHS)}")
    spec, obj, root = prepare(Path(tmpdir), arch, python)
    return link_library(spec, obj, arch, linker, root)


def lipo(slices: list[Path], output: Path) -> Path:
    _run([llvm_lipo(), "-create", *slices, "-output", output])
    return output


def lipo_archs(path: Path) -> list[str]:
    return sorted(_run([llvm_lipo(), "-archs", path]).stdout.split())


def cross_build_universal(tmpdir: Path, python: str = "python.org") -> Path:
    slices = [cross_build_library(tmpdir, arch, python) for arch in ARCHS]
    return lipo(slices, Path(tmpdir) / python / native.library_name("darwin"))


# --------------------------------------------------------------------------
# Reading back

def load_commands(path: Path) -> dict[str, list[str]]:
    """{"id": [...], "load": [...], "rpath": [...]} in file order."""
    lief = lief_module()
    binary = lief.MachO.parse(str(path)).at(0)
    kinds = {lief.MachO.LoadCommand.TYPE.ID_DYLIB: "id",
             lief.MachO.LoadCommand.TYPE.LOAD_DYLIB: "load",
             lief.MachO.LoadCommand.TYPE.RPATH: "rpath"}
    out: dict[str, list[str]] = {"id": [], "load": [], "rpath": []}
    for command in binary.commands:
        kind = kinds.get(command.command)
        if kind is not None:
            out[kind].append(command.path if kind == "rpath" else command.name)
    return out


def exported_symbols(path: Path) -> list[str]:
    binary = lief_module().MachO.parse(str(path)).at(0)
    return sorted(s.name for s in binary.exported_symbols)


def expected_exports() -> list[str]:
    """The header's functions and cffi's module init, with Mach-O's underscore."""
    import ffi_build
    return sorted(f"_{name}" for name in ffi_build.exported_names())


def check_library(path: Path, python: str, spec: dict[str, Any], linker: str) -> list[str]:
    """Every rule of the issue the file breaks, one line each; [] when none."""
    lief = lief_module()
    described = described_python(python)
    problems: list[str] = []
    commands = load_commands(path)
    if commands["id"] != [INSTALL_NAME]:
        problems.append(f"id: {commands['id']} (want [{INSTALL_NAME!r}])")
    libdir = described["vars"]["LIBDIR"]
    for rpath in commands["rpath"]:
        if ":" in rpath:
            problems.append(f"rpath: {rpath!r} is a list, which dyld takes as one path")
    if commands["rpath"] != ["@loader_path", libdir]:
        problems.append(f"rpaths: {commands['rpath']} (want ['@loader_path', {libdir!r}])")
    exports = exported_symbols(path)
    allowed = set(expected_exports()) | (ZIG_SYNTHESIZED if linker == "zig" else set())
    extra = sorted(set(exports) - allowed)
    missing = sorted(set(expected_exports()) - set(exports))
    if extra:
        problems.append(f"exports {len(extra)} names the header does not declare: "
                        f"{', '.join(extra[:8])}{' ...' if len(extra) > 8 else ''}")
    if missing:
        problems.append(f"does not export {', '.join(missing)}")
    python_name = described["libpython_install_name"]
    for name in commands["load"]:
        if not (name == python_name or name.startswith(("/usr/lib/", "/System/Library/"))
                or name.startswith("@rpath/")):
            problems.append(f"loads {name!r}: neither a system library, the Python it was "
                            f"built for ({python_name}), nor @rpath/")
    if python_name not in commands["load"]:
        problems.append(f"does not load the Python it was built for ({python_name}); loads "
                        f"{commands['load']}")
    binary = lief.MachO.parse(str(path)).at(0)
    if lief.MachO.Header.FLAGS.TWOLEVEL not in binary.header.flags_list:
        problems.append("not a two-level namespace image (MH_TWOLEVEL unset)")
    flat = sorted(s.name for s in binary.imported_symbols
                  if not (s.has_binding_info and s.binding_info.has_library))
    if flat:
        problems.append(f"binds {len(flat)} symbols without naming their library: "
                        f"{', '.join(flat[:8])}")
    return problems


HOST_C = """#include "tsffi.h"
int main(void) { return tsffi_abi_version() == TSFFI_ABI_VERSION ? 0 : 1; }
"""


def config_libs(library_dir: Path) -> list[str]:
    """`turbospark-ffi config --libs` for a package whose directory is
    library_dir: native.libs()'s words with the package directory replaced."""
    return native.libs().replace(native.package_dir(), str(library_dir)).split()


def linked_host_loads(tmpdir: Path, library: Path, arch: str, linker: str) -> dict[str, list[str]]:
    """Compile a host against the header and link it to `library` the way
    `turbospark-ffi config --libs` says (by zig or ld64.lld); its load
    commands."""
    work = Path(tmpdir) / f"host-{linker}-{arch}"
    work.mkdir(parents=True, exist_ok=True)
    package = work / "package"
    package.mkdir(exist_ok=True)
    shutil.copy2(library, package / native.library_name("darwin"))
    source = work / "host.c"
    source.write_text(HOST_C)
    obj = work / "host.o"
    _run([*zig(), "cc", "-target", ZIG_TARGETS[arch], "-c", source, "-o", obj,
          f"-I{ROOT / 'include'}"])
    libs = config_libs(package)
    if linker == "zig":
        _run([*zig(), "cc", "-target", ZIG_TARGETS[arch], "-o", work / "host", obj, *libs])
    else:
        root = work / "root"
        libsystem_tbd(root, [s for s in undefined_symbols(obj) if not is_python_symbol(s)])
        _run([ld64_lld(), "-arch", arch, "-platform_version", "macos", MACOS_MIN[arch],
              MACOS_MIN[arch], "-execute", "-o", work / "host", obj,
              "-syslibroot", root, *_linker_args(libs), "-lSystem"])
    return load_commands(work / "host")
