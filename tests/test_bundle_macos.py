"""`turbospark-ffi bundle` with a Mach-O library: Tsffi.xcframework, whose
framework an app embeds, checked from Linux by resolving every load command
as dyld would, and sign.sh run against a stand-in codesign.

Inputs are real Mach-O files: the library itself, cross-built from the real
generated C for python.org's Python by the macOS build's check
(tests/macos_cross.py: zig, linked by ld64.lld with build.json's arguments);
and a stand-in of python.org's framework (tests/macos_standins.py) -- its
Python library with python.org's install name, one lib-dynload stand-in per
module of this Python's, the real standard library's sources, cffi's own
macOS wheels (both slices, joined). The bundle is written and MOVED, its
framework embedded as Xcode does in an app folder (with a space in its
name), and then every Mach-O file in it is read with macholib -- not
LIEF, which wrote them -- and each LC_LOAD_DYLIB is resolved: `@rpath/`
through the image's own LC_RPATHs and then the app's
`@executable_path/../Frameworks`, `@loader_path/`, `@executable_path/`,
absolute. Each must land on a file inside the app or on a system library
(/usr/lib, /System). The resolver is shown to catch a planted absolute
/Library/Frameworks dependency and a missing file first; the byte check, the
library's build paths left in place.

Nothing here loads a Mach-O file: dyld, signing and the sandbox are not
exercised (README, "Shipping in a Mac app").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import macos_cross as mc
from conftest import LIBRARY, ROOT, build_machine_strings
from macos_standins import (FRAMEWORK_ID, PY, TAG, build_python_framework, cffi_macos_wheel,
                            python_imports, universal_backend)

from turbospark_ffi import bundle as bundle_mod
from turbospark_ffi import native
from turbospark_ffi.bundle import codesign, macos
from turbospark_ffi.policy import DFLASH_AUTO_NOTE

WHEEL_CACHE = ROOT / "build" / "test-cache" / "wheels"
SYSTEM = ("/usr/lib/", "/System/Library/")
APP = "Tool Demo.app"
PYNODOT = PY.replace(".", "")


def _macholib():
    try:
        from macholib import mach_o
        from macholib.MachO import MachO
    except ImportError:
        pytest.fail("the macOS bundle test reads Mach-O with macholib: pip install macholib "
                    "(it is in the test extra: pip install '.[test]')")
    return MachO, mach_o


# ---------------------------------------------------------------------------
# The resolver: dyld's search, from the load commands macholib reads.

@dataclass(frozen=True)
class Image:
    rel: str                 # path under the app
    arch: str
    filetype: str            # "dylib", "bundle"
    install_name: str | None
    loads: tuple             # ((command, name), ...)
    rpaths: tuple


def _is_macho_data(data: bytes) -> bool:
    return data[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe",
                        b"\xfe\xed\xfa\xcf")


def is_macho_file(path: Path) -> bool:
    with open(path, "rb") as f:
        return _is_macho_data(f.read(4))


def read_images(app: Path) -> list[Image]:
    """Every slice of every Mach-O file under `app`."""
    MachO, mach_o = _macholib()
    loads = {mach_o.LC_LOAD_DYLIB: "LOAD_DYLIB", mach_o.LC_LOAD_WEAK_DYLIB: "LOAD_WEAK_DYLIB",
             mach_o.LC_REEXPORT_DYLIB: "REEXPORT_DYLIB",
             mach_o.LC_LAZY_LOAD_DYLIB: "LAZY_LOAD_DYLIB",
             mach_o.LC_LOAD_UPWARD_DYLIB: "LOAD_UPWARD_DYLIB"}
    out = []
    for path in sorted(p for p in app.rglob("*") if p.is_file() and not p.is_symlink()
                       and is_macho_file(p)):
        for h in MachO(str(path)).headers:
            ident, found, rpaths = None, [], []
            for lc, cmd, data in h.commands:
                if lc.cmd in loads or lc.cmd == mach_o.LC_ID_DYLIB:
                    at = cmd.name - lc._size_ - cmd._size_
                elif lc.cmd == mach_o.LC_RPATH:
                    at = cmd.path - lc._size_ - cmd._size_
                else:
                    continue
                text = data[at:].split(b"\0")[0].decode()
                if lc.cmd == mach_o.LC_ID_DYLIB:
                    ident = text
                elif lc.cmd == mach_o.LC_RPATH:
                    rpaths.append(text)
                else:
                    found.append((loads[lc.cmd], text))
            arch = {"ARM64": "arm64"}.get(mach_o.CPU_TYPE_NAMES.get(h.header.cputype),
                                         mach_o.CPU_TYPE_NAMES.get(h.header.cputype))
            out.append(Image(rel=path.relative_to(app).as_posix(), arch=arch,
                             filetype=h.filetype, install_name=ident, loads=tuple(found),
                             rpaths=tuple(rpaths)))
    return out


def _inside(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root) + "/")


def resolve(app: Path, image: Image, name: str) -> tuple[str | None, str]:
    """(where, note): where dyld finds `name` for `image` in the app at
    `app` -- a path relative to the app, "system", or None with why not."""
    here = os.path.dirname(str(app / image.rel))
    exe = str(app / "Contents" / "MacOS")

    def expand(p: str) -> str | None:
        if p.startswith("@loader_path"):
            return here + p[len("@loader_path"):]
        if p.startswith("@executable_path"):
            return exe + p[len("@executable_path"):]
        return p if p.startswith("/") else None

    def landed(cand: str) -> tuple[str | None, str]:
        cand = os.path.normpath(cand)
        if not _inside(cand, app):
            return None, f"{cand} is outside the app"
        if not os.path.isfile(cand):
            return None, f"no file {os.path.relpath(cand, app)}"
        return os.path.relpath(cand, app), ""

    if name.startswith("@rpath/"):
        tried = []
        for rpath in list(image.rpaths) + ["@executable_path/../Frameworks"]:
            base = expand(rpath)
            if base is None:
                tried.append(f"{rpath} (relative rpath: the working directory)")
                continue
            where, why = landed(base + "/" + name[len("@rpath/"):])
            if where is not None:
                return where, f"via {rpath}"
            tried.append(why)
        return None, "not found: " + "; ".join(tried)
    if name.startswith(("@loader_path/", "@executable_path/")):
        return landed(expand(name))
    if name.startswith(SYSTEM):
        return "system", ""
    if name.startswith("/"):
        return None, "absolute path outside the app and not a system library"
    return None, "relative install name: dyld would look in the working directory"


def resolve_all(app: Path) -> list[tuple[str, str, str, str, str | None, str]]:
    """[(file, arch, command, name, where, note)] for every load command."""
    return [(img.rel, img.arch, cmd, name, *resolve(app, img, name))
            for img in read_images(app) for cmd, name in img.loads]


def failures(app: Path) -> list[tuple[str, str, str, str]]:
    return [(rel, arch, name, note) for rel, arch, _, name, where, note in resolve_all(app)
            if where is None]


def table(app: Path) -> str:
    rows = resolve_all(app)
    ids = {(img.rel, img.arch): (img.install_name, img.rpaths) for img in read_images(app)}
    lines = []
    last = None
    for rel, arch, cmd, name, where, note in rows:
        if (rel, arch) != last:
            ident, rpaths = ids[(rel, arch)]
            lines.append(f"{rel} [{arch}] id={ident or '-'} rpaths={list(rpaths)}")
            last = (rel, arch)
        lines.append(f"    {cmd:<11} {name:<42} -> {where or 'UNRESOLVED'}"
                     f"{'  (' + note + ')' if note else ''}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Fixtures: the inputs, the bundle, the app its framework is embedded in.

ARCHS = ["arm64", "x86_64"]
SLICE = "macos-arm64_x86_64"
FW = "Tsffi.framework"
VA = f"{FW}/Versions/A"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """(framework's Versions/X.Y, library, the folder they were built in).
    Both universal, as python.org's Python is: the library's two slices
    linked apart and joined, cffi's backend joined from its two wheels."""
    base = tmp_path_factory.mktemp("macos-inputs")
    wheel = cffi_macos_wheel(WHEEL_CACHE)
    x86_wheel = cffi_macos_wheel(WHEEL_CACHE, "x86_64")
    library = mc.cross_build_universal(base / "lib", python="python.org")
    home = build_python_framework(base / "fw", archs=ARCHS, wheel=wheel,
                                  symbols=python_imports(library))
    universal_backend(home, x86_wheel)
    return home, library, base


def _bundle_cli(argv: list[str]) -> int:
    from turbospark_ffi.cli import main
    return main(["bundle", *argv])


def embed(framework: Path, app: Path) -> Path:
    """What Xcode's Embed Frameworks phase does: the framework copied, its
    symlinks kept, into the app's Contents/Frameworks (beside Contents/MacOS,
    where the executable would be)."""
    (app / "Contents" / "MacOS").mkdir(parents=True)
    shutil.copytree(framework, app / "Contents" / "Frameworks" / FW, symlinks=True)
    return app


@pytest.fixture(scope="module")
def built(inputs, tmp_path_factory):
    """(the app its framework was embedded in -- after the bundle was moved
    --, the command's output, where it was written, the moved bundle)."""
    home, library, _ = inputs
    base = tmp_path_factory.mktemp("macos-bundle")
    written = base / "written" / "turbospark"
    proc = subprocess.run([sys.executable, "-m", "turbospark_ffi", "bundle", str(written),
                           "--library", str(library), "--python-home", str(home)],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert proc.returncode == 0, proc.stderr
    moved = base / "moved" / "bundle"
    moved.parent.mkdir()
    os.rename(written, moved)
    shutil.rmtree(base / "written")
    app = embed(moved / "Tsffi.xcframework" / SLICE / FW, base / "Applications" / APP)
    return app, proc.stdout, written, moved


def _copy_app(app: Path, dest: Path) -> Path:
    shutil.copytree(app, dest, symlinks=True)
    return dest


CODE = f"Contents/Frameworks/{VA}/Frameworks"


# ---------------------------------------------------------------------------
# The resolver, shown to discriminate before it is trusted.

def test_resolver_catches_an_absolute_framework_dependency(built, inputs, tmp_path):
    """An extension module as the framework ships it (not rewritten) put in
    the bundle: its absolute /Library/Frameworks dependency is caught, in
    both slices."""
    app = built[0]
    home, _, _ = inputs
    bad = _copy_app(app, tmp_path / APP)
    rel = f"{CODE}/_json.{TAG}.so"
    shutil.copyfile(home / "lib" / f"python{PY}" / "lib-dynload" / f"_json.{TAG}.so", bad / rel)
    why = "absolute path outside the app and not a system library"
    assert sorted(failures(bad)) == [(rel, "arm64", FRAMEWORK_ID, why),
                                     (rel, "x86_64", FRAMEWORK_ID, why)]
    assert failures(app) == []


def test_resolver_catches_a_missing_file(built, tmp_path):
    """The bundled Python removed: every image that loads it fails, each
    saying where it looked."""
    app = built[0]
    bad = _copy_app(app, tmp_path / APP)
    (bad / CODE / f"libpython{PY}.dylib").unlink()
    got = failures(bad)
    name = f"@rpath/{VA}/Frameworks/libpython{PY}.dylib"
    miss = f"no file {CODE}/libpython{PY}.dylib"
    lib = next(f for f in got if f[0] == f"Contents/Frameworks/{VA}/Tsffi" and f[1] == "arm64")
    assert lib == (f"Contents/Frameworks/{VA}/Tsffi", "arm64", name,
                   f"not found: {miss}; {miss}")
    ext = next(f for f in got if f[0].endswith(f"/_json.{TAG}.so") and f[1] == "x86_64")
    assert ext[3] == f"not found: {miss}; {miss}"
    loaders = {(img.rel, img.arch) for img in read_images(app)
               if ("LOAD_DYLIB", name) in img.loads}
    # The library, 8 extension modules and cffi's backend, two slices each.
    assert {(f[0], f[1]) for f in got} == loaders and len(loaders) == 20
    assert {f[2] for f in got} == {name}


def test_resolver_catches_a_load_that_leaves_the_app(built, tmp_path):
    """The library pointed at a Python beside the app through @loader_path
    (a real file there): found, but outside the app, so caught (the
    hardened runtime refuses such lookups too)."""
    from turbospark_ffi.bundle.macho import relocate_macho
    app = built[0]
    bad = _copy_app(app, tmp_path / APP)
    lib = bad / "Contents" / "Frameworks" / VA / "Tsffi"
    outside = f"@loader_path/../../../../../../libpython{PY}.dylib"
    relocate_macho(lib, install_name=f"@rpath/{VA}/Tsffi",
                   renames={f"@rpath/{VA}/Frameworks/libpython{PY}.dylib": outside}, rpaths=[])
    shutil.copyfile(bad / CODE / f"libpython{PY}.dylib", tmp_path / f"libpython{PY}.dylib")
    why = f"{tmp_path / f'libpython{PY}.dylib'} is outside the app"
    assert sorted(failures(bad)) == [(f"Contents/Frameworks/{VA}/Tsffi", arch, outside, why)
                             for arch in ARCHS]


# ---------------------------------------------------------------------------
# The bundle, moved, its framework embedded.

# Where each Mach-O file goes and what it must say, written out: (path
# under the slice folder -- an app's Contents/Frameworks --, rpaths).
EXPECTED_CODE = {
    f"{VA}/Tsffi": ["@loader_path/../../.."],
    f"{VA}/Frameworks/libpython{PY}.dylib": [],
    f"{VA}/Frameworks/_cffi_backend.{TAG}.so": ["@loader_path/../../../.."],
}
# Declared (bundle/runtime.py, EXTENSION_MODULES).
EXPECTED_EXTENSIONS = ["_codecs_cn", "_codecs_hk", "_codecs_iso2022", "_codecs_jp", "_codecs_kr",
                       "_codecs_tw", "_json", "_multibytecodec"]


def test_every_load_command_resolves_inside_the_app_or_the_system(built):
    app = built[0]
    text = table(app)
    # Captured: pytest shows it with a failure (or under -s), never among the dots.
    print(f"\n--- resolver table: {app}\n{text}\n---")
    rows = resolve_all(app)
    python = f"{CODE}/libpython{PY}.dylib"
    assert [r for r in rows if r[4] is None] == []
    assert {r[4] for r in rows if r[4] != "system"} == {python}
    assert {r[3] for r in rows if r[4] == "system"} == {"/usr/lib/libSystem.B.dylib",
                                                        "/usr/lib/libffi.dylib"}
    # The library, every extension module and cffi's backend (given the load
    # its wheel lacks: it bound Python by flat lookup) reach the bundled
    # Python, through their own rpath.
    loads_python = {r[0] for r in rows if r[4] == python}
    assert loads_python == {f"Contents/Frameworks/{VA}/Tsffi", f"{CODE}/_cffi_backend.{TAG}.so"} | {
        f"{CODE}/{m}.{TAG}.so" for m in EXPECTED_EXTENSIONS}
    assert {r[5] for r in rows if r[4] == python} == {
        "via @loader_path/../../..", "via @loader_path/../../../.."}


def test_ids_rpaths_and_slices(built):
    """Every id is @rpath/ and its own path under Contents/Frameworks; every
    rpath leads from the file back to Contents/Frameworks; every file has
    both slices."""
    app = built[0]
    expected = dict(EXPECTED_CODE)
    for m in EXPECTED_EXTENSIONS:
        expected[f"{VA}/Frameworks/{m}.{TAG}.so"] = ["@loader_path/../../../.."]
    got: dict[str, tuple[list, list]] = {}
    for img in read_images(app):
        rel = img.rel.removeprefix("Contents/Frameworks/")
        archs, rpaths = got.setdefault(rel, ([], list(img.rpaths)))
        archs.append(img.arch)
        assert list(img.rpaths) == rpaths
        if img.filetype == "dylib":
            assert img.install_name == f"@rpath/{rel}", img
        else:
            assert img.filetype == "bundle" and img.install_name is None, img
    assert {k: (sorted(a), r) for k, (a, r) in got.items()} == \
        {k: (ARCHS, r) for k, r in expected.items()}
    assert got[f"{VA}/Tsffi"] and \
        next(i for i in read_images(app) if i.rel.endswith("/Tsffi")).install_name == \
        "@rpath/Tsffi.framework/Versions/A/Tsffi"


def test_every_mach_o_file_carries_a_valid_signature(built, tmp_path):
    """Embedded as Xcode embeds it, every Mach-O file of the framework is
    signed ad hoc in every slice: its CodeDirectory's page hashes match its
    pages (bundle/codesign.py's verifier; tests/test_codesign.py holds it to
    zig's and Apple's linkers). The framework's binary is named by the
    bundle identifier, every other file by its name. One flipped byte in an
    embedded copy is caught."""
    app = built[0]
    fw = app / "Contents" / "Frameworks" / FW
    files = sorted(p for p in fw.rglob("*") if p.is_file() and not p.is_symlink()
                   and is_macho_file(p))
    assert len(files) == 11
    assert {p.relative_to(fw).as_posix(): codesign.verify(p) for p in files} == \
        {p.relative_to(fw).as_posix(): [] for p in files}
    names = {p.name: sorted((i.arch, i.identifier, i.flags, i.hash_types)
                            for i in codesign.signature_info(p)) for p in files}
    assert names["Tsffi"] == [("arm64", "org.tsffi.Tsffi", 2, (2,)),
                              ("x86_64", "org.tsffi.Tsffi", 2, (2,))]
    for p in files:
        if p.name != "Tsffi":
            assert names[p.name] == [("arm64", p.name, 2, (2,)), ("x86_64", p.name, 2, (2,))]
    copy = _copy_app(app, tmp_path / APP)
    python = copy / CODE / f"libpython{PY}.dylib"
    data = bytearray(python.read_bytes())
    (x86,) = [e for e in codesign.thin_slices(bytes(data)) if e[0] == 0x01000007]
    _, _, offset, size, _ = x86
    data[offset + size // 3] ^= 0x40
    python.write_bytes(data)
    problems = codesign.verify(python)
    assert len(problems) == 1 and problems[0].startswith(
        f"libpython{PY}.dylib (x86_64): 1 of ") and "page hashes (sha256) differ" in problems[0]


def test_every_python_symbol_is_bound_to_the_bundled_libpython(built, inputs):
    """Two-level binding, read from the bind opcodes by LIEF (not the code
    that rewrote them): every Python symbol the framework's binary and cffi's
    backend import names the bundled libpython's LC_LOAD_DYLIB, so another
    libpython loaded first in the process cannot serve them. The backend's
    wheel bound them by flat lookup (ordinal -2: the first image loaded that
    exports the name); the input is shown to, so the rewrite is what changed."""
    lief = mc.lief_module()
    app = built[0]
    fw = app / "Contents" / "Frameworks" / FW / "Versions" / "A"
    python = f"@rpath/{VA}/Frameworks/libpython{PY}.dylib"
    site = inputs[0] / "lib" / f"python{PY}" / "site-packages"
    for path, was_flat in ((fw / "Tsffi", False),
                           (fw / "Frameworks" / f"_cffi_backend.{TAG}.so", True)):
        # Each parsed file held while its symbols are read: LIEF (nanobind)
        # reads freed memory when the file object goes first (seen: a crash).
        fat = lief.MachO.parse(str(path))
        for i in range(fat.size):
            binary = fat.at(i)
            python_symbols = [s for s in binary.imported_symbols
                              if mc.is_python_symbol(s.name)]
            assert python_symbols, path
            assert {s.binding_info.library.name for s in python_symbols} == {python}, path
        original = lief.MachO.parse(str(site / f"_cffi_backend.{TAG}.so"))
        flat = {s.binding_info.library_ordinal for s in original.at(0).imported_symbols
                if mc.is_python_symbol(s.name)}
        assert flat == {-2} or not was_flat


def test_the_release_zip_keeps_the_links(built, tmp_path):
    """The XCFramework zipped as `zip -ry` / `ditto -c -k --keepParent`
    zip it: six links stored as links (Info-ZIP's S_IFLNK mode, the target
    as data), which Info-ZIP's unzip restores as links; the same folder
    gives the same bytes. A zip that follows the links (`zip -r`) holds no
    link and every file under Versions/A twice."""
    import stat as st
    from turbospark_ffi.bundle import release
    xc = built[3] / "Tsffi.xcframework"
    archive = tmp_path / "Tsffi.xcframework.zip"
    digest = release.write_release_zip(xc, archive)
    assert digest == hashlib.sha256(archive.read_bytes()).hexdigest()
    with zipfile.ZipFile(archive) as zf:
        links = {i.filename: zf.read(i).decode() for i in zf.infolist()
                 if st.S_ISLNK(i.external_attr >> 16)}
    top = f"Tsffi.xcframework/{SLICE}/{FW}"
    assert links == {f"{top}/Versions/Current": "A",
                     **{f"{top}/{n}": f"Versions/Current/{n}"
                        for n in ("Tsffi", "Headers", "Modules", "Resources", "Frameworks")}}
    again = tmp_path / "again.zip"
    assert release.write_release_zip(xc, again) == digest
    unpacked = tmp_path / "unpacked"
    unzip = shutil.which("unzip")
    if unzip is None:
        pytest.fail("Info-ZIP's unzip is missing (it reads the release zip back): apt-get "
                    "install unzip (.ci/run does)")
    subprocess.run([unzip, "-q", str(archive), "-d", str(unpacked)], check=True)
    assert _tree(unpacked / "Tsffi.xcframework") == _tree(xc)
    assert os.readlink(unpacked / top / "Versions" / "Current") == "A"
    followed = tmp_path / "followed.zip"
    with zipfile.ZipFile(followed, "w") as zf:
        for folder, _, names in os.walk(xc, followlinks=True):
            for name in names:
                path = Path(folder) / name
                zf.write(path, path.relative_to(xc.parent).as_posix())
    with zipfile.ZipFile(followed) as zf:
        names = zf.namelist()
        assert not any(st.S_ISLNK(i.external_attr >> 16) for i in zf.infolist())
    real = [n for n in names if f"{FW}/Versions/A/" in n]
    # Each file of Versions/A again under Versions/Current/ and under the
    # top-level link that leads to it; the XCFramework's Info.plist once.
    assert len(names) == 3 * len(real) + 1


def _tree(root: Path) -> dict[str, str]:
    """Every entry under root: a link's target, a file's SHA-256, or "dir"."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _entries(path: Path) -> list[tuple[str, str]]:
    return sorted((p.name, "-> " + os.readlink(p) if p.is_symlink() else
                   ("dir" if p.is_dir() else "file")) for p in path.iterdir())


def test_the_xcframework_and_the_versioned_framework(built):
    """The folders as Xcode and codesign expect them, written out: the
    XCFramework's one slice, the versioned framework (Current -> A, every
    top-level entry a symlink into Versions/Current)."""
    _, _, _, out = built
    assert _entries(out) == [("Tsffi.xcframework", "dir"), ("sign-inputs.xcfilelist", "file"),
                             ("sign-outputs.xcfilelist", "file"), ("sign.sh", "file")]
    xc = out / "Tsffi.xcframework"
    assert _entries(xc) == [("Info.plist", "file"), (SLICE, "dir")]
    assert _entries(xc / SLICE) == [(FW, "dir")]
    fw = xc / SLICE / FW
    assert _entries(fw) == [("Frameworks", "-> Versions/Current/Frameworks"),
                            ("Headers", "-> Versions/Current/Headers"),
                            ("Modules", "-> Versions/Current/Modules"),
                            ("Resources", "-> Versions/Current/Resources"),
                            ("Tsffi", "-> Versions/Current/Tsffi"), ("Versions", "dir")]
    assert _entries(fw / "Versions") == [("A", "dir"), ("Current", "-> A")]
    assert _entries(fw / "Versions" / "A") == [("Frameworks", "dir"), ("Headers", "dir"),
                                               ("Modules", "dir"), ("Resources", "dir"),
                                               ("Tsffi", "file")]
    assert _entries(fw / "Versions" / "A" / "Headers") == [("tsffi.h", "file")]
    assert (fw / "Headers" / "tsffi.h").read_bytes() == (ROOT / "include" / "tsffi.h").read_bytes()
    assert (fw / "Modules" / "module.modulemap").read_text() == (
        'framework module Tsffi {\n    header "tsffi.h"\n    export *\n}\n')
    assert _entries(fw / "Versions" / "A" / "Resources") == [("Info.plist", "file"),
                                                             ("tsffi-python", "dir")]


def test_the_info_plists_read_back(built):
    """Both Info.plist files are property lists (plistlib reads them back),
    with exactly these keys and values."""
    import plistlib
    from turbospark_ffi import __version__
    _, _, _, out = built
    xc = plistlib.loads((out / "Tsffi.xcframework" / "Info.plist").read_bytes())
    assert xc == {
        "AvailableLibraries": [{"BinaryPath": "Tsffi.framework/Versions/A/Tsffi",
                                "LibraryIdentifier": "macos-arm64_x86_64",
                                "LibraryPath": "Tsffi.framework",
                                "SupportedArchitectures": ["arm64", "x86_64"],
                                "SupportedPlatform": "macos"}],
        "CFBundlePackageType": "XFWK", "XCFrameworkFormatVersion": "1.0"}
    info = plistlib.loads((out / "Tsffi.xcframework" / SLICE / VA / "Resources" /
                           "Info.plist").read_bytes())
    assert info == {"CFBundleDevelopmentRegion": "en", "CFBundleExecutable": "Tsffi",
                    "CFBundleIdentifier": "org.tsffi.Tsffi", "CFBundleInfoDictionaryVersion": "6.0",
                    "CFBundleName": "Tsffi", "CFBundlePackageType": "FMWK",
                    "CFBundleShortVersionString": __version__,
                    "CFBundleSupportedPlatforms": ["MacOSX"], "CFBundleVersion": __version__}


def test_placement(built):
    """Code only where Apple puts a framework's code: its binary, and files
    directly in Versions/A/Frameworks (a flat list); Python's files only in
    Versions/A/Resources/tsffi-python."""
    _, _, _, out = built
    fw = out / "Tsffi.xcframework" / SLICE / FW
    for path in fw.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(fw).as_posix()
        if is_macho_file(path):
            assert rel == "Versions/A/Tsffi" or (
                path.parent == fw / "Versions" / "A" / "Frameworks"), rel
        else:
            assert not rel.startswith("Versions/A/Frameworks/"), rel
        if path.suffix in (".py", ".pyc", ".zip"):
            assert rel.startswith("Versions/A/Resources/tsffi-python/"), rel
    assert [p for p in (fw / "Versions" / "A" / "Frameworks").iterdir() if p.is_dir()] == []
    assert sorted(p.name.split(".")[0] for p in
                  (fw / "Versions" / "A" / "Frameworks").glob("*.so")) == \
        sorted(EXPECTED_EXTENSIONS + ["_cffi_backend"])
    assert sorted(p.name for p in (fw / "Versions/A/Resources/tsffi-python").iterdir()) == [
        f"python{PYNODOT}.zip", "site-packages", "turbospark_bundle.txt"]


def test_the_app_carries_the_runtime_not_the_tooling(built):
    """The package's runtime -- every module but the tooling, derived from
    the package, so a new module is shipped unlisted -- and none of bundle/,
    cli/, install_writer, __main__ or the samples."""
    _, _, _, out = built
    shipped = out / "Tsffi.xcframework" / SLICE / VA / "Resources/tsffi-python/site-packages"
    got = sorted(p.relative_to(shipped / "turbospark_ffi").as_posix()
                 for p in (shipped / "turbospark_ffi").rglob("*.py"))
    source = ROOT / "turbospark_ffi"
    tooling = ("bundle", "cli", "install_writer.py", "__main__.py", "samples")
    expected = sorted(p.relative_to(source).as_posix() for p in source.rglob("*.py")
                      if p.relative_to(source).parts[0] not in tooling)
    assert got == expected
    assert {"plan.py", "wire.py", "options.py", "policy.py", "_abi.py", "_boot.py",
            "resident_index.py"} <= set(got)
    assert not [g for g in got if g.startswith(("bundle/", "cli/", "samples/"))
                or g in ("install_writer.py", "__main__.py")]
    assert not (shipped / "turbospark_ffi" / "samples").exists()
    assert sorted(p.name for p in shipped.iterdir()) == ["turbospark_ffi"]


def test_every_py_has_its_pyc(built):
    """The interpreter never writes bytecode, so the bundle ships it: the
    standard library as .pyc only, the package's .py each with a
    checked-hash .pyc (valid however the app is copied)."""
    _, _, _, out = built
    home = out / "Tsffi.xcframework" / SLICE / VA / "Resources" / "tsffi-python"
    sources = sorted(home.rglob("*.py"))
    assert len(sources) > 15
    for py in sources:
        pyc = py.parent / "__pycache__" / f"{py.stem}.cpython-{PYNODOT}.pyc"
        assert pyc.is_file(), py
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 3, (pyc, flags)  # hash-based, checked
    names = zipfile.ZipFile(home / f"python{PYNODOT}.zip").namelist()
    assert names and all(n.endswith(".pyc") for n in names)
    assert {"json/__init__.pyc", "encodings/__init__.pyc", "encodings/utf_8.pyc",
            "warnings.pyc", "importlib/__init__.pyc"} <= set(names)


def _needles(inputs, written: Path) -> tuple[list[str], list[str]]:
    """(what no text file may name, what no Mach-O file may name): this
    machine's paths -- where the inputs were built, the checkout, this
    Python, where the bundle was written, zig's cache -- and, in code only,
    the framework's install location and the usual build folders (this
    package's own sources mention /Library/Frameworks)."""
    _, _, base = inputs
    needles = [str(base), str(ROOT), sys.prefix, sys.base_prefix, str(written),
               str(Path.home() / ".cache" / "zig")]
    return needles, needles + ["/Library/Frameworks", "/Users/runner", "/tmp/"]


LIB_REL = f"Tsffi.xcframework/{SLICE}/{VA}/Tsffi"


def test_no_byte_names_the_build_machine(built, inputs):
    """No file in the bundle -- Mach-O or text, zip members too -- names a
    path of the machine that built it, the framework's install location, or
    the build paths of the debug maps (ours, zig's, cffi's wheel builder's).
    The library's own record of its build Python's paths is there, blanked:
    three tags a slice, each followed by nothing."""
    _, _, written, out = built
    assert build_machine_strings(out, *_needles(inputs, written), _is_macho_data) == []
    data = (out / LIB_REL).read_bytes()
    tag = native.BUILD_PATH_TAG.encode()
    assert data.count(tag) == data.count(tag + b"\0") == 6


def test_the_byte_check_catches_the_library_s_build_paths(inputs, tmp_path, monkeypatch):
    """The check above, shown to discriminate on the real library: the same
    bundle with the blanking turned off names the home, standard library and
    lib-dynload of the python.org Python the library was built against --
    and nothing else."""
    home, library, _ = inputs
    monkeypatch.setattr(macos, "blank_build_paths", lambda path: [])
    out = tmp_path / "kept"
    bundle_mod.write_bundle(out, library=library, python_home=home)
    fw = "/Library/Frameworks/Python.framework/Versions/3.11"
    assert build_machine_strings(out, *_needles(inputs, out), _is_macho_data) == [
        (LIB_REL, f"tsffi-build-path:{fw}"),
        (LIB_REL, f"tsffi-build-path:{fw}/lib/python3.11"),
        (LIB_REL, f"tsffi-build-path:{fw}/lib/python3.11/lib-dynload")]


# ---------------------------------------------------------------------------
# sign.sh: a stand-in codesign on PATH records every call.

DEV_ID = "Developer ID Application: Tool Demo (ABCDE12345)"


def _sign(app: Path, tmp_path: Path, args: list[str], env: dict[str, str] | None = None,
          script: Path | None = None) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    log = tmp_path / "codesign.log"
    log.write_text("")
    (fake / "codesign").write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> "{log}"\necho >> "{log}"\n')
    os.chmod(fake / "codesign", 0o755)
    run_env = {"PATH": f"{fake}:/usr/bin:/bin", **(env or {})}
    proc = subprocess.run(["sh", str(script), *args], capture_output=True, text=True,
                          env=run_env, cwd=str(tmp_path))
    calls = [line.rstrip("|").split("|") for line in log.read_text().splitlines()]
    return proc, calls


def _nested(app: Path) -> list[str]:
    fw = app / "Contents" / "Frameworks" / FW
    return sorted(p.relative_to(fw).as_posix()
                  for p in (fw / "Versions" / "A" / "Frameworks").iterdir())


SHA1 = "0123456789ABCDEF0123456789ABCDEF01234567"
# As Xcode runs the phase: `sign.sh FRAMEWORK`, the identity the SHA-1 and
# the mode from its readable name. (environment, the flags every call must carry)
XCODE_MODES = [
    ({"EXPANDED_CODE_SIGN_IDENTITY": SHA1, "EXPANDED_CODE_SIGN_IDENTITY_NAME": DEV_ID},
     ["--force", "--options", "runtime", "--timestamp", "--sign", SHA1]),
    ({"EXPANDED_CODE_SIGN_IDENTITY": SHA1,
      "EXPANDED_CODE_SIGN_IDENTITY_NAME": "Apple Distribution: Tool Demo (ABCDE12345)"},
     ["--force", "--options", "runtime", "--timestamp", "--sign", SHA1]),
    ({"EXPANDED_CODE_SIGN_IDENTITY": SHA1,
      "EXPANDED_CODE_SIGN_IDENTITY_NAME": "Apple Development: Ann Dev (XYZ9876543)"},
     ["--force", "--timestamp=none", "--sign", SHA1]),
    ({"EXPANDED_CODE_SIGN_IDENTITY": "-", "EXPANDED_CODE_SIGN_IDENTITY_NAME": "-"},
     ["--force", "--timestamp=none", "--sign", "-"]),
]


@pytest.mark.parametrize("env,flags", XCODE_MODES,
                         ids=["developer-id", "apple-distribution", "development", "ad-hoc"])
def test_sign_script_in_xcode_signs_with_the_sha1_in_the_name_s_mode(built, tmp_path, env,
                                                                    flags):
    """The identity Xcode gives codesign is the certificate's SHA-1; only
    EXPANDED_CODE_SIGN_IDENTITY_NAME says it is a distribution one. Then the
    stamp, the phase's one declared output, is written."""
    app, _, _, out = built
    fw = app / "Contents" / "Frameworks" / FW
    derived = tmp_path / "DerivedSources"
    proc, calls = _sign(app, tmp_path, [str(fw)], {**env, "DERIVED_FILE_DIR": str(derived)},
                        out / "sign.sh")
    assert proc.returncode == 0 and proc.stdout == proc.stderr == "", proc
    assert calls == [flags + [f"{fw}/{rel}"] for rel in _nested(app)] + \
        [flags + [f"{fw}/Versions/A"]]
    assert [p.name for p in derived.iterdir()] == ["Tsffi-sign.stamp"]


# Outside Xcode: `sign.sh IDENTITY FRAMEWORK`, the mode from the identity.
# (identity, extra environment, the flags every call must carry)
SIGN_MODES = [
    (DEV_ID, {}, ["--force", "--options", "runtime", "--timestamp", "--sign", DEV_ID]),
    ("Apple Distribution: Tool Demo (ABCDE12345)", {},
     ["--force", "--options", "runtime", "--timestamp", "--sign",
      "Apple Distribution: Tool Demo (ABCDE12345)"]),
    ("-", {}, ["--force", "--timestamp=none", "--sign", "-"]),
    ("Apple Development: Ann Dev (XYZ9876543)", {},
     ["--force", "--timestamp=none", "--sign", "Apple Development: Ann Dev (XYZ9876543)"]),
    ("0123456789ABCDEF0123456789ABCDEF01234567", {},
     ["--force", "--timestamp=none", "--sign", "0123456789ABCDEF0123456789ABCDEF01234567"]),
    ("0123456789ABCDEF0123456789ABCDEF01234567", {"TSFFI_SIGN_FOR_DISTRIBUTION": "YES"},
     ["--force", "--options", "runtime", "--timestamp", "--sign",
      "0123456789ABCDEF0123456789ABCDEF01234567"]),
]


@pytest.mark.parametrize("identity,env,flags", SIGN_MODES,
                         ids=["developer-id", "apple-distribution", "ad-hoc", "development",
                              "sha1", "sha1-for-distribution"])
def test_sign_script_signs_inside_out_with_the_mode_s_flags(built, tmp_path, identity, env,
                                                            flags):
    """Every file in Versions/A/Frameworks once (sorted), then the framework's
    Versions/A -- which signs its binary: nothing signed twice, the outer seal
    last; the hardened runtime and the secure timestamp only for
    distribution."""
    app, _, _, out = built
    fw = app / "Contents" / "Frameworks" / FW
    proc, calls = _sign(app, tmp_path, [identity, str(fw)], env, out / "sign.sh")
    assert proc.returncode == 0 and proc.stdout == proc.stderr == "", proc
    assert calls == [flags + [f"{fw}/{rel}"] for rel in _nested(app)] + \
        [flags + [f"{fw}/Versions/A"]]
    assert len(calls) == 11


@pytest.mark.parametrize("args,env", [(["somewhere"], {}), (["", "x"], {}),
                                      (["somewhere"], {"EXPANDED_CODE_SIGN_IDENTITY": ""}),
                                      ([DEV_ID, "somewhere"], {"CODE_SIGNING_ALLOWED": "NO"}),
                                      (["somewhere"], {"CODE_SIGNING_ALLOWED": "NO",
                                                       "EXPANDED_CODE_SIGN_IDENTITY": SHA1})],
                         ids=["xcode-no-identity", "empty-identity", "xcode-empty-identity",
                              "signing-not-allowed", "xcode-signing-not-allowed"])
def test_sign_script_does_nothing_when_signing_is_off(built, tmp_path, args, env):
    _, _, _, out = built
    proc, calls = _sign(built[0], tmp_path, args, env, out / "sign.sh")
    assert (proc.returncode, proc.stdout, proc.stderr, calls) == (
        0, "sign.sh: code signing is off (no identity, or CODE_SIGNING_ALLOWED=NO): "
           "Tsffi.framework keeps the bundle's ad hoc signatures\n", "", [])


@pytest.mark.parametrize("args", [[], [DEV_ID, "a", "b"]], ids=["none", "three"])
def test_sign_script_usage_errors(built, tmp_path, args):
    app, _, _, out = built
    proc, calls = _sign(app, tmp_path, args, None, out / "sign.sh")
    assert (proc.returncode, proc.stderr, calls) == (
        2, "usage: sign.sh FRAMEWORK (in Xcode) | sign.sh IDENTITY FRAMEWORK\n", [])


def test_sign_script_names_a_folder_that_is_not_the_framework(built, tmp_path):
    app, _, _, out = built
    proc, calls = _sign(app, tmp_path, [DEV_ID, str(tmp_path)], None, out / "sign.sh")
    assert proc.returncode == 2 and calls == []
    assert proc.stderr == (f"sign.sh: {tmp_path}/Versions/A/Tsffi is not a file (FRAMEWORK is "
                           "the embedded Tsffi.framework)\n")


def test_sign_file_lists_declare_what_the_script_touches(built):
    """The Run Script phase's file lists (Xcode's user-script sandbox): as
    inputs every file of the embedded framework codesign reads -- the code it
    signs and the resources its seal hashes --; as output only a stamp
    outside the framework, so no path is also an output of Xcode's embed
    step (whose copy of the framework produces every file in it)."""
    app, _, _, out = built
    base = "$(TARGET_BUILD_DIR)/$(FRAMEWORKS_FOLDER_PATH)/Tsffi.framework"
    fw = app / "Contents" / "Frameworks" / FW
    every_file = sorted(p.relative_to(fw).as_posix() for p in fw.rglob("*")
                        if p.is_file() and not p.is_symlink())
    inputs = (out / "sign-inputs.xcfilelist").read_text().splitlines()
    assert inputs == [f"{base}/{rel}" for rel in every_file]
    assert f"{base}/Versions/A/Resources/Info.plist" in inputs
    assert f"{base}/Versions/A/Resources/tsffi-python/python{PYNODOT}.zip" in inputs
    assert [f"{base}/{rel}" for rel in _nested(app)] + [f"{base}/Versions/A/Tsffi"] == \
        [i for i in inputs if "/Frameworks/" in i.removeprefix(base) or i.endswith("/A/Tsffi")]
    assert (out / "sign-outputs.xcfilelist").read_text() == \
        "$(DERIVED_FILE_DIR)/Tsffi-sign.stamp\n"
    assert stat.S_IMODE((out / "sign.sh").stat().st_mode) == 0o755


def test_the_command_reports_what_it_did_not_run(built):
    _, stdout, written, _ = built
    lines = stdout.splitlines()
    assert lines[0].startswith(f"wrote {written}: ") and lines[0].endswith(" on disk")
    # Every file is rewritten (cffi's backend too: its debug map's 1200
    # STABS entries go), so none keeps a vendor's signature.
    assert lines[-2] == ("  Mach-O files (11): each loads from the framework and is signed "
                         "ad hoc after its last edit; the app's Run Script phase re-signs them "
                         "with its identity: sign.sh after Xcode embeds the framework "
                         "(docs/shipping.md)")
    assert lines[-1] == ("  load check: NOT RUN: the library is Mach-O (macOS); this command "
                         "loads only a Linux bundle to compare its answers; a macOS bundle is "
                         "first loaded by the signed app")
    assert lines[-3] == ("  needs from the system: libSystem, /usr/lib/libffi.dylib "
                         "(by _cffi_backend)")
    assert f"  {VA}/Frameworks/libpython{PY}.dylib " in stdout


def test_marker(built):
    from turbospark_ffi.bundle import runtime
    _, _, _, out = built
    home = out / "Tsffi.xcframework" / SLICE / VA / "Resources" / "tsffi-python"
    count = len(zipfile.ZipFile(home / f"python{PYNODOT}.zip").namelist())
    assert count == len(runtime.STDLIB_MODULES) + len(
        list((Path(sys.base_prefix) / "lib" / f"python{PY}" / "encodings").glob("*.py")))
    assert (home / "turbospark_bundle.txt").read_text().splitlines()[3:] == [
        "format: 1", "version: 0.1.0", "abi: 4", f"python: {PY}", "platform: macos",
        f"soabi: {TAG}", f"stdlib: python{PYNODOT}.zip ({count} modules)",
        "extension modules: " + " ".join(EXPECTED_EXTENSIONS)]


# ---------------------------------------------------------------------------
# The library finds the framework layout from its own path. The lookup is the
# same C on every platform, so it runs here: the Linux bundle's own files put
# where Tsffi.framework keeps them, embedded in an app, a host in
# Contents/MacOS.

HOST_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "tsffi.h"
static void show(const char *key, int32_t status, char *out) {
    if (status == TSFFI_OK) {
        printf("%s\t%d\t%s\n", key, (int)status, out);
    } else {
        char msg[4096];
        tsffi_last_error(msg, sizeof msg);
        printf("%s\t%d\t%s\n", key, (int)status, msg);
    }
    tsffi_string_free(out);
}
int main(int argc, char **argv) {
    char *out = NULL;
    int32_t status;
    if (argc != 2)
        return 2;
    status = tsffi_build_info_json(&out);
    show("info", status, out);
    out = NULL;
    status = tsffi_speculation_plan(argv[1], "{}", &out);
    show("plan", status, out);
    out = NULL;
    status = tsffi_speculation_plan(argv[1], "{\"speculation\": 2}", &out);
    show("refused", status, out);
    return 0;
}
"""

FWA = f"Contents/Frameworks/{VA}"
# Linux bundle path -> app path (the framework's places).
REARRANGE = [
    ("lib/libtsffi.so", f"{FWA}/Tsffi"),
    (f"lib/libpython{PY}.so.1.0", f"{FWA}/Frameworks/libpython{PY}.so.1.0"),
    ("python/turbospark_bundle.txt", f"{FWA}/Resources/tsffi-python/turbospark_bundle.txt"),
    (f"python/python{PYNODOT}.zip", f"{FWA}/Resources/tsffi-python/python{PYNODOT}.zip"),
    ("python/site-packages/turbospark_ffi",
     f"{FWA}/Resources/tsffi-python/site-packages/turbospark_ffi"),
]


def _run(host: Path, install: Path, cwd: Path) -> dict[str, tuple[int, str]]:
    proc = subprocess.run(["env", "-i", str(host), str(install)], capture_output=True, text=True,
                          cwd=str(cwd), timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
    return {k: (int(s), v) for k, s, v in (line.split("\t", 2)
                                           for line in proc.stdout.splitlines())}


@pytest.fixture(scope="module")
def framework_app(tmp_path_factory):
    """(an app holding the Linux bundle's files in Tsffi.framework's layout,
    its host, an install inside it, the oracle host linked to the built
    library)."""
    tmp_path = tmp_path_factory.mktemp("framework-app")
    linux = tmp_path / "linux"
    bundle_mod.write_bundle(linux, verify=False)
    app = tmp_path / "build" / APP
    for src, dst in REARRANGE:
        (app / dst).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (linux / src).is_dir() else shutil.copyfile)(linux / src, app / dst)
    code = app / FWA / "Frameworks"
    for so in sorted((linux / "python" / "lib" / f"python{PY}" / "lib-dynload").iterdir()) + \
            sorted((linux / "python" / "site-packages").glob("_cffi_backend*.so")):
        shutil.copyfile(so, code / so.name)
    for path in [app / FWA / "Tsffi", *code.iterdir()]:
        os.chmod(path, 0o755)
    (app / "Contents" / "MacOS").mkdir()
    (tmp_path / "host.c").write_text(HOST_C)
    cc = ["cc", "-std=c99", "-Wall", "-Werror", f"-I{linux / 'include'}", str(tmp_path / "host.c")]
    # DT_RPATH (not RUNPATH): it also serves the library's own libpython
    # dependency, which the ELF copy's $ORIGIN no longer reaches.
    # -l:Tsffi: the library has no soname, so DT_NEEDED is the file's name.
    subprocess.run(cc + ["-o", str(app / "Contents" / "MacOS" / "host"), f"-L{app / FWA}",
                         "-l:Tsffi", "-Wl,--disable-new-dtags",
                         f"-Wl,-rpath,$ORIGIN/../Frameworks/{VA}:$ORIGIN/../Frameworks/{VA}"
                         "/Frameworks"], check=True)
    oracle = tmp_path / "oracle"
    subprocess.run(cc + ["-o", str(oracle), f"-L{LIBRARY.parent}", "-ltsffi",
                         f"-Wl,-rpath,{LIBRARY.parent}"], check=True)
    shipped = tmp_path / "Applications" / APP
    shipped.parent.mkdir()
    os.rename(app, shipped)
    from turbospark_ffi.install_writer import write_install
    write_install(tmp_path / "dflash", mtp=False, dflash=True)
    return shipped, tmp_path / "dflash", oracle, tmp_path


def test_the_library_finds_the_framework_layout(framework_app):
    shipped, install, oracle, tmp_path = framework_app
    got = _run(shipped / "Contents" / "MacOS" / "host", install, tmp_path)
    status, text = got["info"]
    assert status == 0, text
    info = json.loads(text)
    va = shipped / FWA
    home = va / "Resources" / "tsffi-python"
    assert info["ownsInterpreter"] is True
    assert (info["library"], info["pythonHome"], info["package"]) == (
        str(va / "Tsffi"), str(home), str(home / "site-packages" / "turbospark_ffi"))
    # sealed: site-packages is reached through the library's finder only
    assert info["sysPath"] == [str(home / f"python{PYNODOT}.zip"),
                               str(home / "lib" / f"python{PY}"), str(va / "Frameworks")]
    assert json.loads(got["plan"][1])["drafter"]["note"] == DFLASH_AUTO_NOTE
    expected = _run(oracle, install, tmp_path)
    assert {k: v for k, v in got.items() if k != "info"} == \
        {k: v for k, v in expected.items() if k != "info"}
    assert got["refused"][0] != 0


OTHER_UID = 4321


def _chown_tree(root: Path, uid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        os.lchown(dirpath, uid, -1)
        for name in filenames + dirnames:
            os.lchown(os.path.join(dirpath, name), uid, -1)


def _owned_by_another_user(framework_app, tmp_path: Path, where: str) -> Path:
    """A copy of the app, every file owned by another user (as an app dragged
    into /Applications by one account looks to another), under `where`."""
    if os.geteuid() != 0:
        pytest.fail("this test gives files to another user (chown), which needs root; the "
                    "project's CI runs the suite as root (.ci/run)")
    shipped = framework_app[0]
    dest = tmp_path / where / APP
    dest.parent.mkdir(parents=True)
    shutil.copytree(shipped, dest, symlinks=True)
    _chown_tree(dest, OTHER_UID)
    return dest


def test_an_app_owned_by_another_user_loads_its_own_framework(framework_app, tmp_path):
    """Inside the app's own Contents/, closed to everyone else: trusted by
    where it sits, though owned by uid 4321 and run as root."""
    _, install, _, _ = framework_app
    app = _owned_by_another_user(framework_app, tmp_path, "Applications")
    got = _run(app / "Contents" / "MacOS" / "host", install, tmp_path)
    assert got["info"][0] == 0, got["info"]
    assert json.loads(got["plan"][1])["drafter"]["note"] == DFLASH_AUTO_NOTE


def test_the_same_app_in_a_world_writable_folder_is_refused(framework_app, tmp_path):
    """The same files, but the .app folder may be written by everyone (so
    anyone could have replaced what is inside): location proves nothing, the
    owner rule holds, and the start is refused, naming the folder and the
    rule."""
    _, install, _, _ = framework_app
    app = _owned_by_another_user(framework_app, tmp_path, "Shared")
    os.chmod(app, 0o777)
    got = _run(app / "Contents" / "MacOS" / "host", install, tmp_path)
    home = app / FWA / "Resources" / "tsffi-python"
    assert got["info"][0] == 9, got["info"]
    assert got["info"][1].startswith(f"refusing to import Python code from {home}/site-packages: "
                                     f"owner uid {OTHER_UID}, group gid 0, mode 0755: its owner "
                                     "is neither root nor the user this process runs as")


def test_the_same_files_outside_an_app_are_refused(framework_app, tmp_path):
    """The framework alone, not in any app's Contents/: the owner rule holds."""
    _, install, _, _ = framework_app
    app = _owned_by_another_user(framework_app, tmp_path, "loose")
    loose = tmp_path / "loose" / "NotAnApp"
    os.rename(app, loose)
    got = _run(loose / "Contents" / "MacOS" / "host", install, tmp_path)
    assert got["info"][0] == 9, got["info"]
    assert "its owner is neither root nor the user this process runs as" in got["info"][1]


# ---------------------------------------------------------------------------
# Bad inputs: one line each, naming what was wrong and what is accepted.

def _fails(capsys, argv: list[str]) -> str:
    assert _bundle_cli(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("turbospark-ffi bundle: "), err
    return err


def test_a_macho_library_needs_a_macos_python(inputs, tmp_path, capsys):
    home, library, _ = inputs
    out = str(tmp_path / "out")
    err = _fails(capsys, [out, "--library", str(library)])
    assert "is a Mach-O (macOS) library" in err and "pass --python-home" in err
    err = _fails(capsys, [out, "--library", str(library), "--python-home", sys.base_prefix])
    assert "is a Linux Python" in err and "--python-home must be a macOS Python" in err
    err = _fails(capsys, [out, "--library", str(library), "--python-home", str(tmp_path)])
    assert "expected one standard library at lib/python3.X/os.py, found 0" in err
    text = tmp_path / "notes.txt"
    text.write_text("not a library\n")
    err = _fails(capsys, [out, "--library", str(text), "--python-home", str(home)])
    assert "is neither an ELF (Linux) nor a Mach-O (macOS) library" in err
    err = _fails(capsys, [out, "--python-home", str(home)])  # this package's ELF library
    assert "a Linux bundle carries the Python running this command" in err
    err = _fails(capsys, [out, "--library", str(tmp_path / "nowhere.dylib")])
    assert "--library" in err and "is not a file" in err
    assert not (tmp_path / "out").exists()


def test_a_static_python_is_refused_saying_how_to_fix_it(inputs, tmp_path, capsys):
    home, library, _ = inputs
    static = tmp_path / "pyenv" / "3.11.7"
    shutil.copytree(home, static, symlinks=True, ignore=shutil.ignore_patterns("Python",
                                                                              "libpython*"))
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(library),
                          "--python-home", str(static)])
    assert "has no shared Python library" in err
    assert "PYTHON_CONFIGURE_OPTS=--enable-shared" in err


def test_missing_cffi_and_missing_modules_are_named(inputs, tmp_path, capsys):
    home, library, _ = inputs
    copy = tmp_path / "fw" / PY
    shutil.copytree(home, copy, symlinks=True)
    (copy / "lib" / f"python{PY}" / "lib-dynload" / f"_json.{TAG}.so").unlink()
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(library),
                          "--python-home", str(copy)])
    assert "the library loads the extension module _json" in err
    assert "nor compiled in (its library exports no PyInit__json)" in err
    for p in (copy / "lib" / f"python{PY}" / "site-packages").glob("_cffi_backend*"):
        p.unlink()
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(library),
                          "--python-home", str(copy)])
    assert "cffi is not installed in the Python at" in err and "-m pip install cffi" in err


def test_a_module_compiled_into_python_is_not_looked_for(inputs, tmp_path):
    """A Python that exports PyInit__json has _json built in: the bundle
    goes without the file, and the rest stays the same."""
    home, library, _ = inputs
    wheel = cffi_macos_wheel(WHEEL_CACHE)
    modules = [m for m in EXPECTED_EXTENSIONS if m != "_json"]
    other = build_python_framework(tmp_path / "fw", archs=ARCHS, wheel=wheel,
                                   symbols=python_imports(library), modules=modules,
                                   builtins=("_json",))
    universal_backend(other, cffi_macos_wheel(WHEEL_CACHE, "x86_64"))
    info = bundle_mod.write_bundle(tmp_path / "out", library=library, python_home=other)
    assert info.extension_modules == modules
    assert failures(info.root) == []


def test_architectures_must_cover_the_library(inputs, tmp_path, capsys):
    """The universal library with cffi's arm64-only backend (its wheel's,
    not joined): refused, naming the file and the missing slice."""
    home, library, _ = inputs
    copy = tmp_path / "fw" / PY
    shutil.copytree(home, copy, symlinks=True)
    site = copy / "lib" / f"python{PY}" / "site-packages"
    with zipfile.ZipFile(cffi_macos_wheel(WHEEL_CACHE)) as zf:
        zf.extract(f"_cffi_backend.{TAG}.so", site)
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(library),
                          "--python-home", str(copy)])
    import cffi
    v, cp = cffi.__version__, f"cp{PYNODOT}"
    assert err == (
        f"turbospark-ffi bundle: cffi's backend {site}/_cffi_backend.{TAG}.so has arm64 but the "
        "library is built for arm64, x86_64: it lacks x86_64 (cffi's macOS wheels carry one "
        "architecture each). Fetch the missing one (pip download --no-deps --only-binary=:all: "
        f"--platform macosx_10_15_x86_64 --python-version {PY} --implementation cp cffi=={v}) "
        f"and run the command again with --cffi-wheel cffi-{v}-{cp}-{cp}-macosx_10_15_x86_64.whl: "
        "it joins the slices into one universal backend\n")


# (the backend the Python has, the wheels given)
JOINED = [("arm64", ["x86_64"]), (None, ["arm64", "x86_64"])]


@pytest.mark.parametrize("own,wheels", JOINED, ids=["arm64-python-x86_64-wheel",
                                                    "no-cffi-both-wheels"])
def test_the_command_joins_the_wheels_names_the_bundle_and_zips_it(inputs, tmp_path, capsys,
                                                                   own, wheels):
    """What the refusal above says to do, done: the Python's backend (or
    none: cffi not installed in it) joined with the wheels', the bundle
    identifier given, the release zip written with its checksum."""
    import plistlib
    home, library, _ = inputs
    copy = tmp_path / "fw" / PY
    shutil.copytree(home, copy, symlinks=True)
    site = copy / "lib" / f"python{PY}" / "site-packages"
    (site / f"_cffi_backend.{TAG}.so").unlink()
    if own:
        with zipfile.ZipFile(cffi_macos_wheel(WHEEL_CACHE, own)) as zf:
            zf.extract(f"_cffi_backend.{TAG}.so", site)
    given = [w for arch in wheels for w in ("--cffi-wheel",
                                            str(cffi_macos_wheel(WHEEL_CACHE, arch)))]
    out = tmp_path / "out"
    assert _bundle_cli([str(out), "--library", str(library), "--python-home", str(copy), *given,
                        "--bundle-id", "com.example.tool-demo.Tsffi", "--release-zip"]) == 0
    stdout = capsys.readouterr().out
    slice_dir = out / "Tsffi.xcframework" / SLICE
    backend = slice_dir / VA / "Frameworks" / f"_cffi_backend.{TAG}.so"
    assert mc.lipo_archs(backend) == ARCHS
    assert codesign.verify(backend) == []
    info = plistlib.loads((slice_dir / VA / "Resources" / "Info.plist").read_bytes())
    assert info["CFBundleIdentifier"] == "com.example.tool-demo.Tsffi"
    assert [i.identifier for i in codesign.signature_info(slice_dir / VA / "Tsffi")] == \
        ["com.example.tool-demo.Tsffi"] * 2
    archive = out / "Tsffi.xcframework.zip"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert (out / "Tsffi.xcframework.zip.sha256").read_text() == \
        f"{digest}  Tsffi.xcframework.zip\n"
    assert f"links kept); checksum: {digest}" in stdout.splitlines()[-1]


# (--bundle-id, why it is refused)
BAD_BUNDLE_IDS = [
    ("Tsffi", "one label"),
    ("com.example.", "an empty label"),
    ("com.example.tool demo", "a space"),
    ("com.example.Tsffi_1", "an underscore"),
]


@pytest.mark.parametrize("bundle_id,why", BAD_BUNDLE_IDS)
def test_error_a_bundle_id_that_is_not_reverse_dns(inputs, tmp_path, capsys, bundle_id, why):
    home, library, _ = inputs
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(library), "--python-home",
                          str(home), "--bundle-id", bundle_id])
    assert err == (f"turbospark-ffi bundle: --bundle-id {bundle_id!r} is not a reverse-DNS "
                   "bundle identifier; accepts two or more labels of letters, digits and "
                   "hyphens joined by periods (default org.tsffi.Tsffi)\n")


@pytest.mark.parametrize("flag", [["--bundle-id", "com.example.X"], ["--release-zip"],
                                  ["--cffi-wheel", "x.whl"]])
def test_error_the_macos_options_with_a_linux_library(tmp_path, capsys, flag):
    err = _fails(capsys, [str(tmp_path / "out"), *flag])
    assert err == (f"turbospark-ffi bundle: {flag[0]} is for a Mach-O (macOS) library's "
                   f"XCFramework; {LIBRARY.name} is ELF (Linux)\n")


def test_error_a_cffi_wheel_that_is_not_one(inputs, tmp_path, capsys):
    home, library, _ = inputs
    fake = tmp_path / "cffi.whl"
    fake.write_text("not a zip\n")
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(library), "--python-home",
                          str(home), "--cffi-wheel", str(fake)])
    assert err == (f"turbospark-ffi bundle: --cffi-wheel {fake} is not a wheel (not a zip "
                   "file); accepts a cffi macOS wheel from PyPI\n")
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("cffi/__init__.py", "")
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(library), "--python-home",
                          str(home), "--cffi-wheel", str(fake)])
    assert err == (f"turbospark-ffi bundle: --cffi-wheel cffi.whl holds no backend; the "
                   f"bundled Python needs _cffi_backend.{TAG}.so (a cffi wheel for {TAG}, "
                   "macOS)\n")


def test_a_library_linking_another_python_is_refused(inputs, tmp_path, capsys):
    home, _, _ = inputs
    c = tmp_path / "lib.c"
    c.write_text("unsigned tsffi_abi_version(void) { return 2u; }\n")
    lib = tmp_path / "libtsffi.dylib"
    proc = subprocess.run([*mc.zig(), "cc", "-target", mc.ZIG_TARGETS["arm64"], "-dynamiclib",
                           "-o", str(lib), str(c), "-install_name", "@rpath/libtsffi.dylib"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(lib), "--python-home", str(home)])
    assert f"libtsffi.dylib does not link the Python {PY} at {home}" in err
    assert "(it loads /usr/lib/libSystem.B.dylib)" in err


def test_without_lief_the_error_says_what_to_install(inputs, tmp_path):
    home, library, _ = inputs
    code = ("import sys; sys.modules['lief'] = None\n"
            "from turbospark_ffi.cli import main\n"
            f"sys.exit(main(['bundle', {str(tmp_path / 'o')!r}, '--library', {str(library)!r}, "
            f"'--python-home', {str(home)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(ROOT))
    assert proc.returncode == 1
    assert proc.stderr == ("turbospark-ffi bundle: writing a macOS bundle needs LIEF, which "
                           "reads and edits Mach-O files; install it with: pip install "
                           "'turbospark_ffi[bundle]'\n")


def test_force_replaces_an_earlier_macos_bundle(built, inputs, tmp_path, capsys):
    home, library, _ = inputs
    out = tmp_path / "b"
    argv = [str(out), "--library", str(library), "--python-home", str(home)]
    assert _bundle_cli(argv) == 0
    capsys.readouterr()
    assert "not empty" in _fails(capsys, argv)
    assert _bundle_cli(argv + ["--force"]) == 0
    assert (out / "Tsffi.xcframework" / SLICE / VA / "Resources" / "tsffi-python" /
            "turbospark_bundle.txt").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
    assert stat.S_IMODE((out / "sign.sh").stat().st_mode) == 0o755


def test_a_framework_folder_means_its_current_version(built, inputs, tmp_path):
    """--python-home Python.framework is its Versions/Current: the same
    bundle as from Versions/X.Y."""
    home, library, _ = inputs
    framework = home.parent.parent
    assert framework.name == "Python.framework"
    info = bundle_mod.write_bundle(tmp_path / "b", library=library, python_home=framework)
    out = built[3]
    assert info.extension_modules == EXPECTED_EXTENSIONS
    for rel in (LIB_REL, f"Tsffi.xcframework/{SLICE}/{VA}/Frameworks/libpython{PY}.dylib"):
        assert (tmp_path / "b" / rel).read_bytes() == (out / rel).read_bytes(), rel
