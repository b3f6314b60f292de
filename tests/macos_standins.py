"""Mach-O inputs for the macOS bundle, made on Linux: a stand-in of
python.org's Python framework, of real Mach-O files, beside the library
itself, cross-built by tests/macos_cross.py (the macOS build's check).

    <dest>/Library/Frameworks/Python.framework/     python.org's install location, under dest
      Python -> Versions/Current/Python, Versions/Current -> 3.11
      Versions/3.11/Python         the stand-in Python (macos_cross.stand_in_python, the one
                                   builder of it): universal, python.org's install name
                                   /Library/Frameworks/Python.framework/Versions/3.11/Python
      Versions/3.11/lib/libpython3.11.dylib -> ../Python (as in a framework's LIBDIR)
      Versions/3.11/lib/python3.11/*.py          the running Python's standard library sources
      Versions/3.11/lib/python3.11/lib-dynload/  one stand-in per module of this Python's
                                   lib-dynload, linked against Python (LC_LOAD_DYLIB its
                                   absolute name), universal
      Versions/3.11/lib/python3.11/site-packages/  cffi, unpacked from its macOS wheel (PyPI)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import macos_cross as mc

PYTHON = "python.org"
_DESCRIBED = mc.described_python(PYTHON)
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
FRAMEWORK_ID = _DESCRIBED["libpython_install_name"]
TAG = f"cpython-{PY.replace('.', '')}-darwin"
# The standard library's folders a stand-in leaves out (tests and GUIs: the
# bundle never carries them either).
_SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip",
                "site-packages", "lib-dynload", "__pycache__", "config-" + PY}
# What an extension module calls in Python (its PyInit_ creates the module).
_MODULE_IMPORTS = ("_PyModule_Create2",)
_MODULE_C = """
void *PyModule_Create2(void *def, int api);
void *PyInit_NAME(void) { return PyModule_Create2(0, 1013); }
"""


def cffi_macos_wheel(cache: Path, arch: str = "arm64") -> Path:
    """cffi's macOS wheel for this Python's version (the version installed
    here, so backend and package agree), downloaded once into `cache` by
    pip; an unreachable registry fails the test saying so."""
    import cffi
    # macOS 11 for both: pip accepts any older tag too (cffi 2.1 builds x86_64
    # for 10.15, older releases for 10.13).
    platform = {"arm64": "macosx_11_0_arm64", "x86_64": "macosx_11_0_x86_64"}[arch]
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


def python_imports(library: Path) -> list[str]:
    """The Python symbols `library` imports (Mach-O names): what the
    stand-in Python must define for the library's link to hold."""
    return [name for name in mc.undefined_symbols(library) if mc.is_python_symbol(name)]


def build_python_framework(dest: Path, *, archs: list[str], wheel: Path, symbols: list[str],
                           modules: list[str] | None = None,
                           builtins: tuple[str, ...] = ()) -> Path:
    """The stand-in framework under `dest`; returns its Versions/X.Y folder.
    `symbols`: what the Python library defines besides what the extension
    modules call (the library's imports: python_imports); `modules`: the
    lib-dynload stand-ins (default: one per module of this Python's
    lib-dynload); `builtins`: modules the Python claims compiled in (it
    exports their PyInit_)."""
    version = _DESCRIBED["vars"]["VERSION"]
    if version != PY:
        pytest.fail(f"the macOS bundle test stands in for {PYTHON}'s Python {version} "
                    f"(tests/pythons/{PYTHON}.json) and bundles it with this Python {PY}, which "
                    f"must be the same X.Y; run the tests with a Python {version}")
    defined = sorted(set(symbols) | set(_MODULE_IMPORTS) | {f"_PyInit_{m}" for m in builtins})
    library = mc.stand_in_python(dest, PYTHON, tuple(archs), defined)
    home = library.parent
    stdlib = home / "lib" / f"python{PY}"
    dynload = stdlib / "lib-dynload"
    site = stdlib / "site-packages"
    for d in (dynload, site):
        d.mkdir(parents=True, exist_ok=True)
    src = dest / "src"
    src.mkdir(exist_ok=True)
    running_dynload = Path(sysconfig.get_path("stdlib")) / "lib-dynload"
    if modules is None:
        modules = sorted({p.name.split(".")[0] for p in running_dynload.glob("*.so")})

    def module(name: str) -> None:
        c = src / f"{name}.c"
        c.write_text(_MODULE_C.replace("NAME", name))
        out = dynload / f"{name}.{TAG}.so"
        thin = [out.with_name(f".{out.name}.{a}") if len(archs) > 1 else out for a in archs]
        for arch, path in zip(archs, thin):
            cmd = [*mc.zig(), "cc", "-target", mc.ZIG_TARGETS[arch], "-dynamiclib", "-o",
                   str(path), str(c), f"-L{home / 'lib'}", f"-lpython{PY}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=mc.TIMEOUT)
            assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
        if len(archs) > 1:
            mc.lipo(thin, out)
            for path in thin:
                path.unlink()

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


def universal_backend(home: Path, x86_wheel: Path) -> Path:
    """Make the framework's cffi backend (from the arm64 wheel) universal,
    as python.org's universal2 Python needs: its arm64 file joined by lipo
    with the x86_64 wheel's. Returns the backend's path."""
    site = home / "lib" / f"python{PY}" / "site-packages"
    backend = sorted(site.glob("_cffi_backend*.so"))[0]
    with zipfile.ZipFile(x86_wheel) as zf:
        member = next(n for n in zf.namelist() if n.startswith("_cffi_backend") and
                      n.endswith(".so"))
        x86 = home.parent / f".x86_64-{member}"
        x86.write_bytes(zf.read(member))
    joined = backend.with_name(backend.name + ".universal")
    mc.lipo([backend, x86], joined)
    os.replace(joined, backend)
    x86.unlink()
    return backend
