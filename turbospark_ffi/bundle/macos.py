"""The macOS layout: `Tsffi.xcframework`, what a Swift package's
`.binaryTarget` names and Xcode embeds, written when the library given to
`turbospark-ffi bundle` is Mach-O (on a Mac, or on Linux with Mach-O inputs).

    OUT/
      Tsffi.xcframework/
        Info.plist                      XFWK: one library, LibraryIdentifier macos-<archs>
        macos-arm64_x86_64/             the slice (named by the library's architectures)
          Tsffi.framework/              a versioned framework (Apple's layout for macOS)
            Tsffi, Headers, Modules, Resources, Frameworks   -> Versions/Current/...
            Versions/Current -> A
            Versions/A/Tsffi            libtsffi: id @rpath/Tsffi.framework/Versions/A/Tsffi
            Versions/A/Headers/tsffi.h
            Versions/A/Modules/module.modulemap   framework module Tsffi (the one C module
                                        name, also the Linux system library's: swift/)
            Versions/A/Frameworks/      every other Mach-O, flat: libpython3.X.dylib, the
                                        extension modules the library loads, _cffi_backend
            Versions/A/Resources/Info.plist
            Versions/A/Resources/tsffi-python/   data: marker, standard library zip (.pyc),
                                        site-packages/turbospark_ffi (the runtime, .py + .pyc)
      sign.sh, sign-inputs.xcfilelist, sign-outputs.xcfilelist
                                        the app's Run Script phase: signs the embedded
                                        framework inside-out (docs/shipping.md)

Where the code goes, and why (docs/shipping.md, "Shipping in a Mac app"):
Apple's "Placing content in a bundle" puts a framework's code in its
Versions/A (the binary) and nested code in standard places as a flat list,
and resources (Python sources, .pyc, zips: no place for a signature) in
Resources; so every Mach-O here is the framework's binary or a file directly
in Versions/A/Frameworks, and the interpreter's search path names that
folder for the extension modules (src/tsffi_embed.c, tsffi_find_app_layout),
so no nonstandard structure or symlink into code is needed. libpython
travels inside, not as a sibling Python.framework: the interpreter is this
library's private one, and a sibling would take the name `Python.framework`,
which an app that embeds its own Python (BeeWare's Python-Apple-support
ships exactly that) already holds; two frameworks of one name cannot sit in
one Contents/Frameworks. Its id names its own place under the framework,
and every file that uses Python binds its symbols to it by two-level
binding, so another libpython in the process cannot serve them: the
framework's binary and the extension modules as linked; cffi's backend,
whose wheel is linked with `-undefined dynamic_lookup` (flat lookups), once
the bundle adds its load of libpython and rewrites those binds
(bundle/macho.py, bind_flat_lookups; docs/shipping.md, "Two Pythons in one
process").

Every Mach-O file is rewritten (bundle/macho.py): its id is `@rpath/` plus
its path under the slice folder (an app's Contents/Frameworks once
embedded), every dependency on the bundled Python names libpython's id, and
its only LC_RPATH leads from the file back to that folder; the library's
stored build paths are blanked (bundle/common.py). Anything else a file
needs must be the system's (/usr/lib, /System); the command refuses the
rest, naming it. A file that needs none of that (cffi's backend) is copied
unchanged. Then every Mach-O file is signed ad hoc (bundle/codesign.py),
after its last edit, each slice that does not already carry a valid
signature: a copied file keeps its vendor's.
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from . import codesign
from .common import BundleError, blank_build_paths
from .macho import (MachOSlice, bind_flat_lookups, exports_symbol, flat_bound, is_macho,
                    macho_slices, relocate_macho, rewrite_needed)

__all__ = ["APP_DIRNAME", "FRAMEWORK_NAME", "DEFAULT_BUNDLE_ID", "MacLayout", "MacPython",
           "find_python", "check_library", "check_bundle_id", "write_binaries",
           "write_framework_files", "write_sign_script", "builtin_in", "library_archs",
           "slice_identifier", "SYSTEM_PREFIXES"]

# The folder under the framework's Resources that holds the embedded Python's
# data; src/tsffi_embed.c spells it TSFFI_APP_DIRNAME.
APP_DIRNAME = "tsffi-python"
# The framework, its binary and the C module in it: one name. Clang finds a
# framework's module by the framework's name, so the module is `Tsffi`, and
# the Linux system library in swift/Package.swift is named the same.
FRAMEWORK_NAME = "Tsffi"
# A framework's version folder: Apple's default, and what the id names.
_VERSION = "A"
# The framework's bundle identifier when none is given (--bundle-id): reverse
# DNS, as Apple asks, under this library's own name -- not the engine's (ts_,
# Ts, TurboSpark). An app that ships it may give its own (com.example.Tsffi).
DEFAULT_BUNDLE_ID = "org.tsffi.Tsffi"
# CFBundleIdentifier's characters (Apple: alphanumerics, hyphen, period), in
# reverse-DNS form: at least two labels, none empty.
_BUNDLE_ID = re.compile(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
# What every Mac has: dependencies here are left as they are.
SYSTEM_PREFIXES = ("/usr/lib/", "/System/Library/")
# What every Mach-O file links (the C library): not listed in the report.
_LIBSYSTEM = "/usr/lib/libSystem.B.dylib"


def check_bundle_id(bundle_id: str) -> str:
    """`bundle_id` if it is a reverse-DNS bundle identifier, else BundleError."""
    if not _BUNDLE_ID.fullmatch(bundle_id):
        raise BundleError(f"--bundle-id {bundle_id!r} is not a reverse-DNS bundle identifier; "
                          "accepts two or more labels of letters, digits and hyphens joined "
                          f"by periods (default {DEFAULT_BUNDLE_ID})")
    return bundle_id


def slice_identifier(archs: list[str]) -> str:
    """The XCFramework's name for the one macOS slice: `macos-` and the
    architectures, sorted, joined by `_` (xcodebuild -create-xcframework's
    spelling: macos-arm64_x86_64)."""
    return "macos-" + "_".join(sorted(archs))


class MacLayout:
    """Where each piece goes inside the bundle being written at `root`."""

    def __init__(self, root: Path, version: str, archs: list[str]) -> None:
        self.root = root
        self.archs = sorted(archs)
        self.xcframework = root / f"{FRAMEWORK_NAME}.xcframework"
        self.slice_id = slice_identifier(archs)
        # What @rpath leads to: the slice folder here, the app's
        # Contents/Frameworks once Xcode embeds the framework.
        self.frameworks = self.xcframework / self.slice_id
        self.framework = self.frameworks / f"{FRAMEWORK_NAME}.framework"
        self.version_dir = self.framework / "Versions" / _VERSION
        self.library = self.version_dir / FRAMEWORK_NAME
        self.headers = self.version_dir / "Headers"
        self.modules = self.version_dir / "Modules"
        self.resources = self.version_dir / "Resources"
        self.code = self.version_dir / "Frameworks"
        self.home = self.resources / APP_DIRNAME
        self.site = self.home / "site-packages"
        self.package = self.site / "turbospark_ffi"
        self.stdlib_zip = self.home / f"python{version.replace('.', '')}.zip"
        self.dynload = self.code
        self.backend_dir = self.code
        self.libpython = self.code / f"libpython{version}.dylib"

    def make_dirs(self) -> None:
        for d in (self.site, self.code, self.headers, self.modules):
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


def find_python(home: str | os.PathLike, *, backend_from_wheels: bool = False) -> MacPython:
    """The Python at `home`: a framework's `Versions/X.Y` directory (the
    framework itself means its `Versions/Current`), or a prefix holding
    `lib/libpythonX.Y.dylib` (uv, pyenv with --enable-shared). Without cffi
    installed there it is refused, unless `backend_from_wheels` (cffi's
    wheels given): then `cffi_backend` names the file it would have."""
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
    if not backends and backend_from_wheels:
        backends = [site / f"_cffi_backend.{tag}.so"]
    if not backends:
        raise BundleError(f"cffi is not installed in the Python at {given} (no "
                          f"_cffi_backend.{tag}.so in {site}); install it there: "
                          f"{root}/bin/python{version} -m pip install cffi (or give its "
                          "macOS wheels with --cffi-wheel)")
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


def library_archs(path: Path) -> list[str]:
    """The architectures of the Mach-O file at `path`, sorted."""
    return _archs(macho_slices(path))


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


def _is_python_symbol(name: str) -> bool:
    """A name of Python's C API, as Mach-O spells it (`_Py...`, `__Py...`)."""
    return name.startswith(("_Py", "__Py"))


def _relocation(src: Path, dst: Path, layout: MacLayout, python: MacPython,
                want_archs: list[str]) -> tuple[str | None, dict[str, str], list[str], list,
                                                tuple[str, ...]]:
    """What to rewrite in the copy `dst` of `src`: (install name, renames,
    rpaths, the system libraries it needs, libraries to add: the bundled
    Python, for a file that looks its Python symbols up flat)."""
    slices = macho_slices(src)
    have = _archs(slices)
    missing = [a for a in want_archs if a not in have]
    if missing and src == python.cffi_backend:
        raise BundleError(_thin_backend(src, python, have, want_archs, missing))
    if missing:
        raise BundleError(f"{src} has {', '.join(have)} but the library is built for "
                          f"{', '.join(want_archs)}: it lacks {', '.join(missing)}")
    rel = dst.relative_to(layout.frameworks)
    python_name = "@rpath/" + layout.libpython.relative_to(layout.frameworks).as_posix()
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
    flat_python = not renames and any(_is_python_symbol(n) for n in flat_bound(src))
    adds = (python_name,) if flat_python else ()
    rpaths = ["/".join(["@loader_path"] + [".."] * (len(rel.parts) - 1))] \
        if renames or adds else []
    return install_name, renames, rpaths, system, adds


def _thin_backend(src: Path, python: MacPython, have: list[str], want: list[str],
                  missing: list[str]) -> str:
    """What to do when cffi's backend lacks an architecture: PyPI's macOS
    wheels of cffi are thin, one architecture each."""
    import cffi
    tag = f"cp{python.version.replace('.', '')}"
    platform = {"arm64": "macosx_11_0_arm64", "x86_64": "macosx_10_15_x86_64"}
    wheels = " ".join(f"--cffi-wheel cffi-{cffi.__version__}-{tag}-{tag}-{platform.get(a, a)}.whl"
                      for a in missing)
    downloads = "; ".join(
        f"pip download --no-deps --only-binary=:all: --platform {platform.get(a, a)} "
        f"--python-version {python.version} --implementation cp cffi=={cffi.__version__}"
        for a in missing)
    return (f"cffi's backend {src} has {', '.join(have)} but the library is built for "
            f"{', '.join(want)}: it lacks {', '.join(missing)} (cffi's macOS wheels carry one "
            f"architecture each). Fetch the missing one ({downloads}) and run the command "
            f"again with {wheels}: it joins the slices into one universal backend")


def _place(src: Path, dst: Path, layout: MacLayout, python: MacPython, want_archs: list[str],
           system: dict[str, set[str]]) -> int:
    install_name, renames, rpaths, needs, adds = _relocation(src, dst, layout, python,
                                                             want_archs)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o755)
    before = dst.stat().st_size
    if dst != layout.library and not adds and not rewrite_needed(
            dst, install_name=install_name, renames=renames, rpaths=rpaths):
        # Nothing to change: the vendor's bytes, and with them its signature.
        before = 0
    else:
        relocate_macho(dst, install_name=install_name, renames=renames, rpaths=rpaths,
                       add_loads=adds)
    if adds:
        # cffi's backend (its wheel links with -undefined dynamic_lookup):
        # its Python symbols bound to the bundled libpython, two-level, so
        # another libpython loaded first in the process cannot serve them.
        bind_flat_lookups(dst, _is_python_symbol)
    who = dst.name if dst.suffix == ".dylib" else dst.name.split(".")[0]
    for name in needs:
        if name != _LIBSYSTEM:
            system.setdefault(name, set()).add(who)
    return max(before - dst.stat().st_size, 0)


def write_binaries(layout: MacLayout, library: Path, python: MacPython,
                   ext_files: dict[str, Path], *, bundle_id: str = DEFAULT_BUNDLE_ID,
                   backend: Path | None = None) -> tuple[list[Path], int, list]:
    """Every Mach-O file, copied and rewritten where it must be: the library
    (its stored build paths blanked too), the Python, the extension modules,
    cffi's backend (`backend`, a universal one the command joined, in place
    of the Python's own); then each signed ad hoc, after its last edit
    (bundle/codesign.py; the framework's binary named `bundle_id`, every
    other file by its name, as a linker names what it signs).
    Returns (the files written, bytes saved, [(system library, needed by)],
    ["file (arch)" of each slice that kept its vendor's signature])."""
    want = _archs(macho_slices(library))
    system: dict[str, set[str]] = {}
    written = []
    kept = []
    saved = 0
    plan = [(library, layout.library), (python.library, layout.libpython),
            (backend or python.cffi_backend, layout.backend_dir / python.cffi_backend.name)]
    plan += [(src, layout.dynload / src.name) for _, src in sorted(ext_files.items())]
    for src, dst in plan:
        saved += _place(src, dst, layout, python, want, system)
        written.append(dst)
        if dst == layout.library:
            blank_build_paths(dst)
        signed = codesign.sign(dst, bundle_id if dst == layout.library else dst.name)
        kept += [f"{dst.name} ({arch})" for arch in want if arch not in signed]
    needs = [(name, ", ".join(sorted(who))) for name, who in sorted(system.items())]
    return written, saved, needs, kept


def write_framework_files(layout: MacLayout, *, header: Path, version: str,
                          bundle_id: str = DEFAULT_BUNDLE_ID) -> None:
    """The framework's non-code files and its symlinks, and the
    XCFramework's Info.plist: a versioned framework (Versions/A, Current ->
    A, each top-level entry a symlink into Versions/Current, as codesign
    requires of a macOS framework: "unsealed contents present in the root
    directory" otherwise)."""
    from .. import native
    shutil.copyfile(header, layout.headers / native.HEADER_NAME)
    (layout.modules / "module.modulemap").write_text(
        f"framework module {FRAMEWORK_NAME} {{\n"
        f'    header "{native.HEADER_NAME}"\n'
        "    export *\n"
        "}\n")
    info = {
        "CFBundleDevelopmentRegion": "en",
        "CFBundleExecutable": FRAMEWORK_NAME,
        "CFBundleIdentifier": bundle_id,
        "CFBundleInfoDictionaryVersion": "6.0",
        "CFBundleName": FRAMEWORK_NAME,
        "CFBundlePackageType": "FMWK",
        "CFBundleShortVersionString": version,
        "CFBundleSupportedPlatforms": ["MacOSX"],
        "CFBundleVersion": version,
    }
    with open(layout.resources / "Info.plist", "wb") as f:
        plistlib.dump(info, f, fmt=plistlib.FMT_XML)
    versions = layout.framework / "Versions"
    os.symlink(_VERSION, versions / "Current")
    for name in (FRAMEWORK_NAME, "Headers", "Modules", "Resources", "Frameworks"):
        os.symlink(f"Versions/Current/{name}", layout.framework / name)
    xc = {
        "AvailableLibraries": [{
            "BinaryPath": f"{FRAMEWORK_NAME}.framework/Versions/{_VERSION}/{FRAMEWORK_NAME}",
            "LibraryIdentifier": layout.slice_id,
            "LibraryPath": f"{FRAMEWORK_NAME}.framework",
            "SupportedArchitectures": layout.archs,
            "SupportedPlatform": "macos",
        }],
        "CFBundlePackageType": "XFWK",
        "XCFrameworkFormatVersion": "1.0",
    }
    with open(layout.xcframework / "Info.plist", "wb") as f:
        plistlib.dump(xc, f, fmt=plistlib.FMT_XML)


_SIGN_SCRIPT = r"""#!/bin/sh
# Signs the embedded Tsffi.framework inside-out with the app's identity: each
# Mach-O file in Versions/A/Frameworks (libpython, the extension modules,
# cffi's backend), then the framework itself (its binary, and the seal over
# its resources: the Python files). Nothing is signed twice. Written by
# `turbospark-ffi bundle`; docs/shipping.md says where the phase goes.
#
#   sign.sh FRAMEWORK            in Xcode's Run Script phase: signs with
#                                $EXPANDED_CODE_SIGN_IDENTITY (the certificate's
#                                SHA-1, or - for "Sign to Run Locally")
#   sign.sh IDENTITY FRAMEWORK   anywhere else: IDENTITY as codesign --sign takes it
#
# In the app target, a Run Script phase placed after Xcode embeds the
# package's framework (docs/shipping.md):
#   "$SRCROOT/sign.sh" "$TARGET_BUILD_DIR/$FRAMEWORKS_FOLDER_PATH/Tsffi.framework"
# with sign-inputs.xcfilelist / sign-outputs.xcfilelist as its input and
# output file lists: the inputs are every file codesign reads (code and
# resources: the user-script sandbox lets a script read only what it
# declares, and they order the phase after the embedding); the one output is
# a stamp in DERIVED_FILE_DIR, never a file of the framework, which Xcode's
# embed step already produces.
#
# The mode follows the identity's NAME, $EXPANDED_CODE_SIGN_IDENTITY_NAME
# (Xcode's readable name; outside Xcode, IDENTITY itself when it is unset):
#   no identity, or CODE_SIGNING_ALLOWED=NO  signing is off: one line, exit 0
#   -                                   ad hoc: no hardened runtime, no timestamp
#   Developer ID Application: ..., Apple Distribution: ...,
#   3rd Party Mac Developer Application: ..., or TSFFI_SIGN_FOR_DISTRIBUTION=YES
#                                       distribution: --options runtime --timestamp
#                                       (the timestamp needs Apple's server: online)
#   anything else (Apple Development: ..., Mac Developer: ...)
#                                       development: no timestamp, so offline builds pass
#
# Why the order matters: a signature seals the code it covers and records the
# signatures of the code nested inside it. Signing the framework before a file
# inside it leaves the seal naming the file's OLD signature, and verification
# (and, under library validation, loading) fails. The app itself, outermost,
# is signed by Xcode after this phase.
set -eu
stamp() {
    if [ -n "${DERIVED_FILE_DIR:-}" ]; then
        mkdir -p "$DERIVED_FILE_DIR" && : > "$DERIVED_FILE_DIR/Tsffi-sign.stamp"
    fi
}
case "$#" in
    1) IDENTITY=${EXPANDED_CODE_SIGN_IDENTITY:-}; FRAMEWORK=$1 ;;
    2) IDENTITY=$1; FRAMEWORK=$2 ;;
    *) echo "usage: sign.sh FRAMEWORK (in Xcode) | sign.sh IDENTITY FRAMEWORK" >&2
       exit 2 ;;
esac
if [ "${CODE_SIGNING_ALLOWED:-YES}" = NO ] || [ -z "$IDENTITY" ]; then
    echo "sign.sh: code signing is off (no identity, or CODE_SIGNING_ALLOWED=NO): Tsffi.framework keeps the bundle's ad hoc signatures"
    stamp
    exit 0
fi
NAME=${EXPANDED_CODE_SIGN_IDENTITY_NAME:-$IDENTITY}
if [ ! -f "$FRAMEWORK/Versions/A/Tsffi" ]; then
    echo "sign.sh: $FRAMEWORK/Versions/A/Tsffi is not a file (FRAMEWORK is the embedded Tsffi.framework)" >&2
    exit 2
fi
if [ "$IDENTITY" = - ]; then
    set -- --force --timestamp=none --sign -
else
    case "$NAME" in
        "Developer ID Application:"*|"Apple Distribution:"*|"3rd Party Mac Developer Application:"*)
            DISTRIBUTION=YES ;;
        *) DISTRIBUTION=${TSFFI_SIGN_FOR_DISTRIBUTION:-NO} ;;
    esac
    if [ "$DISTRIBUTION" = YES ]; then
        set -- --force --options runtime --timestamp --sign "$IDENTITY"
    else
        set -- --force --timestamp=none --sign "$IDENTITY"
    fi
fi
"""

# sign.sh's last line, once every file is signed.
_SIGN_TAIL = "stamp\n"


def sign_order(layout: MacLayout, files: list[Path]) -> list[str]:
    """Inner first: every file in Versions/A/Frameworks (a flat list, sorted),
    then the framework's version folder, which signs its binary."""
    nested = sorted(f.relative_to(layout.framework).as_posix() for f in files
                    if f.parent == layout.code)
    return nested + [layout.version_dir.relative_to(layout.framework).as_posix()]


def write_sign_script(layout: MacLayout, files: list[Path]) -> Path:
    """sign.sh and the Run Script phase's file lists, beside the XCFramework:
    its inputs every file of the framework codesign reads (code and
    resources), its output a stamp outside the framework."""
    script = layout.root / "sign.sh"
    order = sign_order(layout, files)
    quoted = [rel for rel in order if '"' in rel or "$" in rel or "`" in rel]
    if quoted:
        raise BundleError(f"the bundled file {quoted[0]} has a quote, $ or ` in its name; "
                          "sign.sh names every path in double quotes and cannot name it")
    lines = [f"codesign \"$@\" \"$FRAMEWORK/{rel}\"" for rel in order]
    script.write_text(_SIGN_SCRIPT + "\n".join(lines) + "\n" + _SIGN_TAIL)
    os.chmod(script, 0o755)
    embedded = f"$(TARGET_BUILD_DIR)/$(FRAMEWORKS_FOLDER_PATH)/{FRAMEWORK_NAME}.framework"
    read = sorted(p.relative_to(layout.framework).as_posix()
                  for p in layout.version_dir.rglob("*") if p.is_file() and not p.is_symlink())
    (layout.root / "sign-inputs.xcfilelist").write_text(
        "".join(f"{embedded}/{rel}\n" for rel in read))
    (layout.root / "sign-outputs.xcfilelist").write_text(
        f"$(DERIVED_FILE_DIR)/{FRAMEWORK_NAME}-sign.stamp\n")
    return script
