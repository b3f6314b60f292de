"""Mach-O inputs for the macOS bundle, made on Linux: a stand-in Python
framework of real Mach-O files linked by zig (PyPI `ziglang`), the real
standard library's .py files, and cffi's own macOS wheel from PyPI.

    <dest>/Python.framework/
      Python -> Versions/Current/Python, Versions/Current -> 3.11
    <dest>/Python.framework/Versions/3.11/
      Python                       dylib, install name as python.org's:
                                   /Library/Frameworks/Python.framework/Versions/3.11/Python
      lib/libpython3.11.dylib      -> ../Python (as in a framework's LIBDIR)
      lib/python3.11/*.py          the running Python's standard library sources
      lib/python3.11/lib-dynload/  one stand-in per module of this Python's lib-dynload,
                                   linked against Python (LC_LOAD_DYLIB its absolute name)
      lib/python3.11/site-packages/  cffi, unpacked from its macOS wheel

Each file is built thin per architecture and joined into a universal file
here (`lipo`), as python.org's universal2 framework is.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ZIG_TARGETS = {"arm64": "aarch64-macos.11.0", "x86_64": "x86_64-macos.10.13"}
# Mach-O cputype / cpusubtype (ALL) of each architecture, for the universal header.
_CPU = {"arm64": (0x0100000C, 0), "x86_64": (0x01000007, 3)}
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
FRAMEWORK_ID = f"/Library/Frameworks/Python.framework/Versions/{PY}/Python"
TAG = f"cpython-{PY.replace('.', '')}-darwin"
# The standard library's folders a stand-in leaves out (tests and GUIs: the
# bundle never carries them either).
_SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip",
                "site-packages", "lib-dynload", "__pycache__", "config-" + PY}

# What a Python library defines that the stand-ins import.
_PYTHON_C = """
int Py_IsInitialized(void) { return 0; }
void *PyModule_Create2(void *def, int api) { (void)def; (void)api; return 0; }
"""
_MODULE_C = """
void *PyModule_Create2(void *def, int api);
void *PyInit_NAME(void) { return PyModule_Create2(0, 1013); }
"""


def zig_cc(args: list[str], cwd: Path | None = None) -> None:
    """`python -m ziglang cc ARGS`; a missing zig fails the test, naming how
    to install it."""
    try:
        import ziglang  # noqa: F401
    except ImportError:
        pytest.fail("the macOS bundle test links Mach-O files with zig from PyPI: "
                    "pip install ziglang (it is in the test extra: pip install '.[test]')")
    proc = subprocess.run([sys.executable, "-m", "ziglang", "cc", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"zig cc {' '.join(args)}\n{proc.stderr}")


def lipo(out: Path, thin: dict[str, Path]) -> Path:
    """A universal Mach-O file of the thin files `thin` ({arch: path}): the
    fat header (big-endian), one fat_arch each, slices aligned to 2^14."""
    align = 14
    entries, blobs, offset = [], [], 1 << align
    for arch, path in sorted(thin.items()):
        data = path.read_bytes()
        cpu, sub = _CPU[arch]
        entries.append(struct.pack(">iiIII", cpu, sub, offset, len(data), align))
        blobs.append((offset, data))
        offset += (len(data) + (1 << align) - 1) & ~((1 << align) - 1)
    buf = bytearray(offset)
    head = struct.pack(">II", 0xCAFEBABE, len(entries)) + b"".join(entries)
    buf[:len(head)] = head
    for at, data in blobs:
        buf[at:at + len(data)] = data
    out.write_bytes(bytes(buf))
    return out


def _universal(out: Path, archs: list[str], build) -> Path:
    """Build `out` once per arch with build(arch, thin_path), then join."""
    if len(archs) == 1:
        build(archs[0], out)
        return out
    thin = {}
    for arch in archs:
        path = out.with_name(f".{out.name}.{arch}")
        build(arch, path)
        thin[arch] = path
    lipo(out, thin)
    for path in thin.values():
        path.unlink()
    return out


def cffi_macos_wheel(cache: Path, arch: str = "arm64") -> Path:
    """cffi's macOS wheel for this Python's version (the version installed
    here, so backend and package agree), downloaded once into `cache` by
    pip; an unreachable registry fails the test saying so."""
    import cffi
    platform = {"arm64": "macosx_11_0_arm64", "x86_64": "macosx_10_13_x86_64"}[arch]
    cache.mkdir(parents=True, exist_ok=True)
    pattern = f"cffi-{cffi.__version__}-cp{PY.replace('.', '')}-*{arch}*.whl"
    found = sorted(cache.glob(pattern))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--platform", platform, "--python-version", PY, "--implementation", "cp",
           "--dest", str(cache), f"cffi=={cffi.__version__}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"downloading cffi's macOS wheel timed out (is PyPI reachable?): {cmd}")
    found = sorted(cache.glob(pattern))
    if proc.returncode != 0 or not found:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.fail(f"cannot download cffi {cffi.__version__}'s macOS wheel from PyPI into "
                    f"{cache} (the macOS bundle test needs its _cffi_backend; is the registry "
                    f"reachable?): {last}")
    return found[0]


def build_python_framework(dest: Path, *, archs: list[str], wheel: Path,
                           modules: list[str] | None = None,
                           builtins: tuple[str, ...] = ()) -> Path:
    """The stand-in framework under `dest`; returns its Versions/X.Y folder.
    `modules`: the lib-dynload stand-ins (default: one per module of this
    Python's lib-dynload); `builtins`: modules the library claims compiled
    in (it exports their PyInit_)."""
    home = dest / "Python.framework" / "Versions" / PY
    stdlib = home / "lib" / f"python{PY}"
    dynload = stdlib / "lib-dynload"
    site = stdlib / "site-packages"
    for d in (dynload, site):
        d.mkdir(parents=True, exist_ok=True)
    src = dest / "src"
    src.mkdir(exist_ok=True)
    py_c = src / "python.c"
    py_c.write_text(_PYTHON_C + "".join(f"void *PyInit_{m}(void) {{ return 0; }}\n"
                                        for m in builtins))

    def python(arch: str, out: Path) -> None:
        zig_cc(["-target", ZIG_TARGETS[arch], "-dynamiclib", "-o", str(out), str(py_c),
                "-install_name", FRAMEWORK_ID, "-Wl,-headerpad_max_install_names"])

    _universal(home / "Python", archs, python)
    (home / "lib" / f"libpython{PY}.dylib").symlink_to("../Python")
    (home.parent / "Current").symlink_to(PY)
    (home.parent.parent / "Python").symlink_to("Versions/Current/Python")
    running_dynload = Path(sysconfig.get_path("stdlib")) / "lib-dynload"
    if modules is None:
        modules = sorted({p.name.split(".")[0] for p in running_dynload.glob("*.so")})

    def module(name: str) -> None:
        c = src / f"{name}.c"
        c.write_text(_MODULE_C.replace("NAME", name))

        def one(arch: str, out: Path) -> None:
            zig_cc(["-target", ZIG_TARGETS[arch], "-dynamiclib", "-o", str(out), str(c),
                    f"-L{home / 'lib'}", f"-lpython{PY}"])
        _universal(dynload / f"{name}.{TAG}.so", archs, one)

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(module, modules))
    # The standard library's real sources.
    running = Path(sysconfig.get_path("stdlib"))
    for path in running.rglob("*.py"):
        rel = path.relative_to(running)
        if rel.parts[0] in _SKIP_STDLIB or "__pycache__" in rel.parts or \
                (len(rel.parts) > 1 and rel.parts[1] in ("test", "tests")):
            continue
        (stdlib / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, stdlib / rel)
    # cffi, as pip would install it from the wheel.
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    shutil.rmtree(src)
    return home


def build_standin_library(dest: Path, home: Path, *, arch: str = "arm64") -> Path:
    """TEMPORARY, until the macOS build's cross-check (issue 24) is on main:
    a libtsffi.dylib stand-in linked as ffi_build.py links it on a Mac
    (install name @rpath/libtsffi.dylib, -lpython3.X from the framework's
    LIBDIR, an rpath of @loader_path and one naming the build machine)."""
    dest.mkdir(parents=True, exist_ok=True)
    c = dest / "tsffi_standin.c"
    c.write_text("int Py_IsInitialized(void);\n"
                 "unsigned tsffi_abi_version(void) { return Py_IsInitialized() ? 2u : 2u; }\n")
    out = dest / "libtsffi.dylib"
    zig_cc(["-target", ZIG_TARGETS[arch], "-dynamiclib", "-o", str(out), str(c),
            "-install_name", "@rpath/libtsffi.dylib", "-Wl,-headerpad_max_install_names",
            f"-L{home / 'lib'}", f"-lpython{PY}", "-Wl,-rpath,@loader_path",
            f"-Wl,-rpath,{home / 'lib'}"])
    os.remove(c)
    return out
