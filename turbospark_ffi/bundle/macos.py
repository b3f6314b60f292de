"""The macOS layout: what an app drops into its `Contents/`, written when the
library given to `turbospark-ffi bundle` is Mach-O (on a Mac, or on Linux
with Mach-O inputs).

    OUT/
      Contents/Frameworks/              code (Apple: Mach-O goes here)
        libtsffi.dylib                  id @rpath/libtsffi.dylib, rpath @loader_path
        libpython3.11.dylib             id @rpath/libpython3.11.dylib
        tsffi-python/lib-dynload/       the extension modules the library loads
        tsffi-python/site-packages/     cffi's _cffi_backend
      Contents/Resources/tsffi-python/  data (Python sources and .pyc)
        turbospark_bundle.txt           the marker the library looks for
        python311.zip                   the standard library it imports, .pyc
        site-packages/turbospark_ffi/   this package, .py with .pyc
      include/tsffi.h
      Package.swift, swift/             a local Swift package: the C module, linked
      sign.sh                           signs every Mach-O above, inner first

Every Mach-O file is rewritten (bundle/macho.py): its id is `@rpath/` plus
its path under Frameworks, every dependency on the bundled Python names
`@rpath/libpython3.11.dylib`, and its only LC_RPATH leads from the file
back to Frameworks (`@loader_path`, `@loader_path/../..`), and the library's
stored build paths are blanked (bundle/common.py), so nothing names the
machine that built it. Anything else a file needs must be the system's
(/usr/lib, /System); the command refuses the rest, naming it.

The library finds this layout from its own path (src/tsffi_embed.c,
tsffi_find_app_layout): `<dir of the dylib>/../Resources/tsffi-python/
turbospark_bundle.txt`.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from .common import BundleError, blank_build_paths
from .macho import MachOSlice, exports_symbol, is_macho, macho_slices, relocate_macho

__all__ = ["APP_DIRNAME", "MacLayout", "MacPython", "find_python", "check_library",
           "write_binaries", "write_sign_script", "write_swift_package", "builtin_in",
           "SYSTEM_PREFIXES"]

# The folder under Contents/Frameworks and Contents/Resources that holds the
# embedded Python's pieces; src/tsffi_embed.c spells it TSFFI_APP_DIRNAME.
APP_DIRNAME = "tsffi-python"
# What every Mac has: dependencies here are left as they are.
SYSTEM_PREFIXES = ("/usr/lib/", "/System/Library/")
# What every Mach-O file links (the C library): not listed in the report.
_LIBSYSTEM = "/usr/lib/libSystem.B.dylib"


class MacLayout:
    """Where each piece goes inside the bundle being written at `root`."""

    def __init__(self, root: Path, version: str, library_name: str) -> None:
        self.root = root
        self.contents = root / "Contents"
        self.frameworks = self.contents / "Frameworks"
        self.resources = self.contents / "Resources"
        self.home = self.resources / APP_DIRNAME
        self.site = self.home / "site-packages"
        self.package = self.site / "turbospark_ffi"
        self.stdlib_zip = self.home / f"python{version.replace('.', '')}.zip"
        self.code = self.frameworks / APP_DIRNAME
        self.dynload = self.code / "lib-dynload"
        self.backend_dir = self.code / "site-packages"
        self.library = self.frameworks / library_name
        self.libpython = self.frameworks / f"libpython{version}.dylib"

    def make_dirs(self) -> None:
        for d in (self.site, self.dynload, self.backend_dir, self.root / "include"):
            d.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class MacPython:
    """The macOS Python to bundle, as found from --python-home."""
    home: Path
    version: str            # "3.11"
    library: Path           # the shared library: a framework's Python, or libpython3.X.dylib
    stdlib: Path
    dynload: Path
    cffi_backend: Path
    install_names: tuple[str, ...]  # the library's LC_ID_DYLIB, per slice


def find_python(home: str | os.PathLike) -> MacPython:
    """The Python at `home`: a framework's `Versions/X.Y` directory (the
    framework itself means its `Versions/Current`), or a prefix holding
    `lib/libpythonX.Y.dylib` (uv, pyenv with --enable-shared)."""
    given = Path(home).absolute()
    if not given.is_dir():
        raise BundleError(f"--python-home {given} is not a directory")
    root = given
    if given.name.endswith(".framework") and (given / "Versions" / "Current").is_dir():
        root = (given / "Versions" / "Current").resolve()
    found = sorted(p.parent for p in root.glob("lib/python3.*/os.py"))
    if len(found) != 1:
        raise BundleError(f"--python-home {given}: expected one standard library at "
                          f"lib/python3.X/os.py, found {len(found)}; it accepts a Python's "
                          "prefix or a framework's Versions/X.Y directory "
                          "(/Library/Frameworks/Python.framework/Versions/3.11)")
    stdlib = found[0]
    version = stdlib.name[len("python"):]
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if version != running:
        raise BundleError(f"--python-home {given} is Python {version} and this command runs "
                          f"on {running}: run it with a Python {version}, whose import probe "
                          "measures what the library imports and whose compiler writes the "
                          ".pyc files")
    candidates = [root / "Python", root / "lib" / f"libpython{version}.dylib"]
    library = next((p for p in candidates if p.is_file()), None)
    linux = sorted((root / "lib").glob(f"libpython{version}*.so*"))
    if library is None and linux:
        raise BundleError(f"--python-home {given} is a Linux Python ({linux[0].name}): "
                          "--python-home must be a macOS Python when the library is Mach-O")
    if library is None:
        raise BundleError(f"--python-home {given} has no shared Python library (looked for "
                          f"{', '.join(str(p) for p in candidates)}): a static build such as "
                          "pyenv's default cannot host an embedded interpreter; rebuild it "
                          "with PYTHON_CONFIGURE_OPTS=--enable-shared (or --enable-framework), "
                          "or use python.org's, Homebrew's or uv's Python")
    library = library.resolve()
    if not is_macho(library):
        raise BundleError(f"{library} is not Mach-O: --python-home must be a macOS Python "
                          "when the library is Mach-O")
    dynload = stdlib / "lib-dynload"
    if not dynload.is_dir():
        raise BundleError(f"--python-home {given} has no {dynload}")
    site = stdlib / "site-packages"
    tag = f"cpython-{version.replace('.', '')}-darwin"
    backends = sorted(site.glob(f"_cffi_backend.{tag}.so")) or sorted(site.glob("_cffi_backend*.so"))
    if not backends:
        raise BundleError(f"cffi is not installed in the Python at {given} (no "
                          f"_cffi_backend.{tag}.so in {site}); install it there: "
                          f"{root}/bin/python{version} -m pip install cffi")
    names = tuple(s.install_name or "" for s in macho_slices(library))
    return MacPython(home=given, version=version, library=library, stdlib=stdlib,
                     dynload=dynload, cffi_backend=backends[0], install_names=names)


def _is_python(name: str, python: MacPython) -> bool:
    return name in python.install_names or \
        name.endswith(f"/Python.framework/Versions/{python.version}/Python") or \
        os.path.basename(name) == f"libpython{python.version}.dylib"


def _other_python(name: str) -> bool:
    base = os.path.basename(name)
    return (base.startswith("libpython") and base.endswith(".dylib")) or \
        "/Python.framework/" in name


def _archs(slices: list[MachOSlice]) -> list[str]:
    return sorted(s.arch for s in slices)


def check_library(library: Path, python: MacPython) -> None:
    """The library is Mach-O and links this Python."""
    slices = macho_slices(library)
    loads = sorted({name for s in slices for _, name in s.loads})
    if not any(_is_python(name, python) for name in loads):
        raise BundleError(f"{library.name} does not link the Python {python.version} at "
                          f"{python.home} (it loads {', '.join(loads) or 'nothing'}); build "
                          "it with that Python")


def builtin_in(python: MacPython, module: str) -> bool:
    """Whether `module` is compiled into the Python library: it exports the
    module's init function, PyInit_<module>."""
    return exports_symbol(python.library, f"_PyInit_{module}")


def _relocation(src: Path, dst: Path, layout: MacLayout, python: MacPython,
                want_archs: list[str]) -> tuple[str | None, dict[str, str], list[str], list]:
    """What to rewrite in the copy `dst` of `src`: (install name, renames,
    rpaths, the system libraries it needs)."""
    slices = macho_slices(src)
    have = _archs(slices)
    missing = [a for a in want_archs if a not in have]
    if missing:
        raise BundleError(f"{src} has {', '.join(have)} but the library is built for "
                          f"{', '.join(want_archs)}: it lacks {', '.join(missing)}")
    rel = dst.relative_to(layout.frameworks)
    python_name = "@rpath/" + layout.libpython.name
    renames: dict[str, str] = {}
    system = []
    for name in sorted({name for s in slices for _, name in s.loads}):
        if _is_python(name, python):
            renames[name] = python_name
        elif _other_python(name):
            raise BundleError(f"{src.name} links {name}, not the Python {python.version} at "
                              f"{python.home}")
        elif name.startswith(SYSTEM_PREFIXES):
            system.append(name)
        else:
            raise BundleError(f"{src.name} needs {name}, which is neither the bundled Python "
                              "nor a system library (/usr/lib, /System); a bundle carries "
                              "no other library: use a Python whose extension modules link "
                              "only those")
    has_id = any(s.install_name is not None for s in slices)
    install_name = "@rpath/" + rel.as_posix() if has_id else None
    rpaths = ["/".join(["@loader_path"] + [".."] * (len(rel.parts) - 1))] if renames else []
    return install_name, renames, rpaths, system


def _place(src: Path, dst: Path, layout: MacLayout, python: MacPython, want_archs: list[str],
           system: dict[str, set[str]]) -> int:
    install_name, renames, rpaths, needs = _relocation(src, dst, layout, python, want_archs)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    before = dst.stat().st_size
    relocate_macho(dst, install_name=install_name, renames=renames, rpaths=rpaths)
    who = dst.name if dst.suffix == ".dylib" else dst.name.split(".")[0]
    for name in needs:
        if name != _LIBSYSTEM:
            system.setdefault(name, set()).add(who)
    return max(before - dst.stat().st_size, 0)


def write_binaries(layout: MacLayout, library: Path, python: MacPython,
                   ext_files: dict[str, Path]) -> tuple[list[Path], int, list]:
    """Every Mach-O file, copied and rewritten: the library (its stored build
    paths blanked too), the Python, the extension modules, cffi's backend.
    Returns (the files written, bytes saved, [(system library, needed by)])."""
    want = _archs(macho_slices(library))
    system: dict[str, set[str]] = {}
    written = []
    saved = 0
    plan = [(library, layout.library), (python.library, layout.libpython),
            (python.cffi_backend, layout.backend_dir / python.cffi_backend.name)]
    plan += [(src, layout.dynload / src.name) for _, src in sorted(ext_files.items())]
    for src, dst in plan:
        saved += _place(src, dst, layout, python, want, system)
        written.append(dst)
        if dst == layout.library:
            blank_build_paths(dst)
    needs = [(name, ", ".join(sorted(who))) for name, who in sorted(system.items())]
    return written, saved, needs


_SIGN_HEADER = """#!/bin/sh
# Signs every Mach-O file of this bundle with the app's own identity, inner
# first. Run it after the last change to the files (any edit -- install_name_tool,
# a strip, a copy that rewrites -- voids a signature) and before the app itself
# is signed: Xcode signs the app after its build phases, so call this from a
# Run Script phase that follows the phases copying the bundle in.
#
#   sign.sh IDENTITY [CONTENTS]
#
# IDENTITY: a codesign identity ("Developer ID Application: Name (TEAMID)",
# or its SHA-1); in a Run Script phase, "$EXPANDED_CODE_SIGN_IDENTITY".
# CONTENTS: the app's Contents folder holding Frameworks/ and Resources/ as
# this bundle lays them out (default: this bundle's own Contents).
#
# Why the order matters: a signature seals the code it covers and records the
# signatures of the code nested inside it. Signing an outer item before an
# inner one leaves the outer seal naming the inner file's OLD signature, and
# the app fails verification (and, under the hardened runtime's library
# validation, the file is refused at load). So the deepest files come first,
# and the app itself -- outermost -- last, after this script.
#
# Every file was rewritten by `turbospark-ffi bundle` (install names, rpaths)
# and is unsigned until this runs; Apple silicon loads no unsigned code.
set -eu
if [ "$#" -lt 1 ] || [ "$#" -gt 2 ] || [ -z "$1" ]; then
    echo "usage: sign.sh IDENTITY [CONTENTS]" >&2
    exit 2
fi
IDENTITY=$1
CONTENTS=${2:-"$(cd "$(dirname "$0")" && pwd)/Contents"}
if [ ! -d "$CONTENTS/Frameworks" ]; then
    echo "sign.sh: $CONTENTS/Frameworks is not a directory (CONTENTS is the app's Contents folder)" >&2
    exit 2
fi
sign() {
    codesign --force --timestamp --options runtime --sign "$IDENTITY" "$CONTENTS/$1"
}
"""


def sign_order(layout: MacLayout, files: list[Path]) -> list[str]:
    """Inner first: deeper paths under Contents before shallower ones."""
    rel = [f.relative_to(layout.contents).as_posix() for f in files]
    return sorted(rel, key=lambda r: (-r.count("/"), r))


def write_sign_script(layout: MacLayout, files: list[Path]) -> Path:
    script = layout.root / "sign.sh"
    order = sign_order(layout, files)
    quoted = [rel for rel in order if "'" in rel]
    if quoted:
        raise BundleError(f"the bundled file {quoted[0]} has a quote in its name; sign.sh "
                          "quotes every path with single quotes and cannot name it")
    lines = [f"sign '{rel}'" for rel in order]
    script.write_text(_SIGN_HEADER + "\n".join(lines) + "\n")
    os.chmod(script, 0o755)
    return script


def write_swift_package(layout: MacLayout, *, module_name: str, header_name: str,
                        link_name: str) -> None:
    """A local Swift package at the bundle's root: the C module (module map
    over include/, `link` the library) and the linker's search path to
    Contents/Frameworks, computed from where the package is when it is
    evaluated -- so no environment variable and no absolute path. Local
    (path) packages may carry unsafeFlags; a package from a URL may not."""
    root = layout.root
    target = root / "swift" / module_name
    target.mkdir(parents=True, exist_ok=True)
    (target / "module.modulemap").write_text(
        f"module {module_name} [system] {{\n"
        f'    header "../../include/{header_name}"\n'
        f'    link "{link_name}"\n'
        "    export *\n"
        "}\n")
    linker = root / "swift" / f"{module_name}Linker"
    linker.mkdir(parents=True, exist_ok=True)
    (linker / "Linker.swift").write_text(
        f"// Carries the linker's search path for lib{link_name} (Package.swift); the C\n"
        f"// functions come from `import {module_name}`.\n"
        f"@_exported import {module_name}\n")
    frameworks = layout.frameworks.relative_to(root).as_posix()
    (root / "Package.swift").write_text(f"""// swift-tools-version:5.9
//
// Written by `turbospark-ffi bundle`: the C API of lib{link_name} for Swift, from this
// folder wherever it is. In Xcode: File > Add Package Dependencies > Add Local...,
// this folder; add the product {module_name} to the app target; `import {module_name}`.
// The app still embeds Contents/ (README: Shipping in a Mac app).
import PackageDescription

let frameworks = Context.packageDirectory + "/{frameworks}"

let package = Package(
    name: "{module_name}",
    products: [
        .library(name: "{module_name}", targets: ["{module_name}Linker"]),
    ],
    targets: [
        .systemLibrary(name: "{module_name}", path: "swift/{module_name}"),
        .target(
            name: "{module_name}Linker",
            dependencies: ["{module_name}"],
            path: "swift/{module_name}Linker",
            linkerSettings: [.unsafeFlags(["-L", frameworks], .when(platforms: [.macOS]))]
        ),
    ]
)
""")
