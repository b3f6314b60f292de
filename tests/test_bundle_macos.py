"""`turbospark-ffi bundle` with a Mach-O library: the macOS layout an app
embeds, checked from Linux by resolving every load command as dyld would.

Inputs are real Mach-O files: the library itself, cross-built from the real
generated C for python.org's Python by the macOS build's check
(tests/macos_cross.py: zig, linked by ld64.lld with build.json's arguments);
and a stand-in of python.org's framework (tests/macos_standins.py) -- its
Python library with python.org's install name, one lib-dynload stand-in per
module of this Python's, the real standard library's sources, cffi's own
macOS wheel. The bundle is written, MOVED into an app folder (with a space
in its name), and then every Mach-O file in it is read with macholib -- not
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
                            python_imports)

from turbospark_ffi import bundle as bundle_mod
from turbospark_ffi import native
from turbospark_ffi.bundle import macos
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
# Fixtures: the inputs, the bundle, the app it is moved into.

@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """(framework's Versions/X.Y, library, the folder they were built in).
    The library is arm64, as cffi's arm64 wheel (the backend an Apple
    silicon Mac gets) is; the framework is universal, as python.org's is."""
    base = tmp_path_factory.mktemp("macos-inputs")
    wheel = cffi_macos_wheel(WHEEL_CACHE)
    library = mc.cross_build_library(base / "lib", "arm64", python="python.org", linker="lld")
    home = build_python_framework(base / "fw", archs=["arm64", "x86_64"], wheel=wheel,
                                  symbols=python_imports(library))
    return home, library, base


def _bundle_cli(argv: list[str]) -> int:
    from turbospark_ffi.cli import main
    return main(["bundle", *argv])


@pytest.fixture(scope="module")
def built(inputs, tmp_path_factory):
    """(the app folder the bundle was moved into, the command's output, where
    it was written)."""
    home, library, _ = inputs
    base = tmp_path_factory.mktemp("macos-bundle")
    written = base / "written" / "turbospark"
    proc = subprocess.run([sys.executable, "-m", "turbospark_ffi", "bundle", str(written),
                           "--library", str(library), "--python-home", str(home)],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert proc.returncode == 0, proc.stderr
    app = base / "Applications" / APP
    app.parent.mkdir()
    os.rename(written, app)
    shutil.rmtree(base / "written")
    return app, proc.stdout, written


def _copy_app(app: Path, dest: Path) -> Path:
    shutil.copytree(app, dest, symlinks=True)
    return dest


# ---------------------------------------------------------------------------
# The resolver, shown to discriminate before it is trusted.

def test_resolver_catches_an_absolute_framework_dependency(built, inputs, tmp_path):
    """An extension module as the framework ships it (not rewritten) put in
    the bundle: its absolute /Library/Frameworks dependency is caught, in
    both slices."""
    app, _, _ = built
    home, _, _ = inputs
    bad = _copy_app(app, tmp_path / APP)
    rel = f"Contents/Frameworks/tsffi-python/lib-dynload/_json.{TAG}.so"
    shutil.copyfile(home / "lib" / f"python{PY}" / "lib-dynload" / f"_json.{TAG}.so", bad / rel)
    why = "absolute path outside the app and not a system library"
    assert sorted(failures(bad)) == [(rel, "arm64", FRAMEWORK_ID, why),
                                     (rel, "x86_64", FRAMEWORK_ID, why)]
    assert failures(app) == []


def test_resolver_catches_a_missing_file(built, tmp_path):
    """The bundled Python removed: every image that loads it fails, each
    saying where it looked."""
    app, _, _ = built
    bad = _copy_app(app, tmp_path / APP)
    (bad / "Contents" / "Frameworks" / f"libpython{PY}.dylib").unlink()
    got = failures(bad)
    lib = next(f for f in got if f[0] == "Contents/Frameworks/libtsffi.dylib")
    assert lib == ("Contents/Frameworks/libtsffi.dylib", "arm64", f"@rpath/libpython{PY}.dylib",
                   f"not found: no file Contents/Frameworks/libpython{PY}.dylib; "
                   f"no file Contents/Frameworks/libpython{PY}.dylib")
    ext = next(f for f in got if f[0].endswith(f"/_json.{TAG}.so") and f[1] == "x86_64")
    assert ext[3] == (f"not found: no file Contents/Frameworks/libpython{PY}.dylib; "
                      f"no file Contents/Frameworks/libpython{PY}.dylib")
    loaders = {(img.rel, img.arch) for img in read_images(app)
               if ("LOAD_DYLIB", f"@rpath/libpython{PY}.dylib") in img.loads}
    assert {(f[0], f[1]) for f in got} == loaders and len(loaders) >= 9
    assert {f[2] for f in got} == {f"@rpath/libpython{PY}.dylib"}


def test_resolver_catches_a_load_that_leaves_the_app(built, tmp_path):
    """The library pointed at a Python beside the app through @loader_path
    (a real file there): found, but outside the app, so caught (the
    hardened runtime refuses such lookups too)."""
    from turbospark_ffi.bundle.macho import relocate_macho
    app, _, _ = built
    bad = _copy_app(app, tmp_path / APP)
    lib = bad / "Contents" / "Frameworks" / "libtsffi.dylib"
    outside = f"@loader_path/../../../libpython{PY}.dylib"
    relocate_macho(lib, install_name="@rpath/libtsffi.dylib",
                   renames={f"@rpath/libpython{PY}.dylib": outside}, rpaths=[])
    shutil.copyfile(bad / "Contents" / "Frameworks" / f"libpython{PY}.dylib",
                    tmp_path / f"libpython{PY}.dylib")
    assert failures(bad) == [("Contents/Frameworks/libtsffi.dylib", "arm64", outside,
                              f"{tmp_path / f'libpython{PY}.dylib'} is outside the app")]


# ---------------------------------------------------------------------------
# The bundle, moved.

# Where each Mach-O file goes and what it must say, written out: (path
# under Contents/Frameworks, slices, rpaths).
EXPECTED_CODE = {
    "libtsffi.dylib": (["arm64"], ["@loader_path"]),
    f"libpython{PY}.dylib": (["arm64", "x86_64"], []),
    f"tsffi-python/site-packages/_cffi_backend.{TAG}.so": (["arm64"], []),
}
# Measured by the import probe (the same set as the Linux bundle's).
EXPECTED_EXTENSIONS = ["_codecs_cn", "_codecs_hk", "_codecs_iso2022", "_codecs_jp", "_codecs_kr",
                       "_codecs_tw", "_json", "_multibytecodec"]


def test_every_load_command_resolves_inside_the_app_or_the_system(built, capsys):
    app, _, _ = built
    text = table(app)
    with capsys.disabled():
        print(f"\n--- resolver table: {app}\n{text}\n---")
    rows = resolve_all(app)
    assert [r for r in rows if r[4] is None] == []
    assert {r[4] for r in rows if r[4] != "system"} == {f"Contents/Frameworks/libpython{PY}.dylib"}
    assert {r[3] for r in rows if r[4] == "system"} == {"/usr/lib/libSystem.B.dylib",
                                                        "/usr/lib/libffi.dylib"}
    # Every file loaded: the library and every extension module reach the
    # bundled Python; the backend needs only the system.
    loads_python = {r[0] for r in rows if r[4] == f"Contents/Frameworks/libpython{PY}.dylib"}
    assert loads_python == {"Contents/Frameworks/libtsffi.dylib"} | {
        f"Contents/Frameworks/tsffi-python/lib-dynload/{m}.{TAG}.so" for m in EXPECTED_EXTENSIONS}


def test_ids_rpaths_and_slices(built):
    """Every id is @rpath/ and its own path under Frameworks; every rpath
    leads from the file back to Frameworks; universal files stay
    universal."""
    app, _, _ = built
    expected = dict(EXPECTED_CODE)
    for m in EXPECTED_EXTENSIONS:
        expected[f"tsffi-python/lib-dynload/{m}.{TAG}.so"] = (["arm64", "x86_64"],
                                                               ["@loader_path/../.."])
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
    assert {k: (sorted(a), r) for k, (a, r) in got.items()} == expected


def test_placement(built):
    """Mach-O code under Contents/Frameworks only; Python's files under
    Contents/Resources only; outside Contents only the developer's side."""
    app, _, _ = built
    contents = app / "Contents"
    assert sorted(p.name for p in app.iterdir()) == ["Contents", "Package.swift", "include",
                                                     "sign.sh", "swift"]
    assert sorted(p.name for p in contents.iterdir()) == ["Frameworks", "Resources"]
    assert sorted(p.name for p in (contents / "Frameworks").iterdir()) == [
        f"libpython{PY}.dylib", "libtsffi.dylib", "tsffi-python"]
    assert sorted(p.name for p in (contents / "Resources" / "tsffi-python").iterdir()) == [
        f"python{PYNODOT}.zip", "site-packages", "turbospark_bundle.txt"]
    for path in app.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(app).as_posix()
        if is_macho_file(path):
            assert rel.startswith("Contents/Frameworks/"), rel
        else:
            assert not rel.startswith("Contents/Frameworks/"), rel
        if path.suffix in (".py", ".pyc", ".zip"):
            assert rel.startswith("Contents/Resources/tsffi-python/"), rel
    assert sorted(p.name.split(".")[0] for p in
                  (contents / "Frameworks" / "tsffi-python" / "lib-dynload").iterdir()) == \
        EXPECTED_EXTENSIONS


def test_every_py_has_its_pyc(built):
    """The interpreter never writes bytecode, so the bundle ships it: the
    standard library as .pyc only, the package's .py each with a
    checked-hash .pyc (valid however the app is copied)."""
    app, _, _ = built
    home = app / "Contents" / "Resources" / "tsffi-python"
    sources = sorted(home.rglob("*.py"))
    assert len(sources) > 20
    for py in sources:
        pyc = py.parent / "__pycache__" / f"{py.stem}.cpython-{PYNODOT}.pyc"
        assert pyc.is_file(), py
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 3, (pyc, flags)  # hash-based, checked
    names = zipfile.ZipFile(home / f"python{PYNODOT}.zip").namelist()
    assert names and all(n.endswith(".pyc") for n in names)
    assert {"json/__init__.pyc", "encodings/__init__.pyc", "encodings/utf_8.pyc"} <= set(names)


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


def test_no_byte_names_the_build_machine(built, inputs):
    """No file in the bundle -- Mach-O or text, zip members too -- names a
    path of the machine that built it, the framework's install location, or
    the build paths of the debug maps (ours, zig's, cffi's wheel builder's).
    The library's own record of its build Python's paths is there, blanked:
    three tags, each followed by nothing."""
    app, _, written = built
    assert build_machine_strings(app, *_needles(inputs, written), _is_macho_data) == []
    data = (app / "Contents" / "Frameworks" / "libtsffi.dylib").read_bytes()
    tag = native.BUILD_PATH_TAG.encode()
    assert data.count(tag) == data.count(tag + b"\0") == 3


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
    lib = "Contents/Frameworks/libtsffi.dylib"
    assert build_machine_strings(out, *_needles(inputs, out), _is_macho_data) == [
        (lib, f"tsffi-build-path:{fw}"),
        (lib, f"tsffi-build-path:{fw}/lib/python3.11"),
        (lib, f"tsffi-build-path:{fw}/lib/python3.11/lib-dynload")]


def _sign_lines(script: str) -> list[str]:
    return [line[len("sign '"):-1] for line in script.splitlines() if line.startswith("sign '")]


def test_sign_script_signs_every_macho_once_inner_first(built, tmp_path):
    """sign.sh names every Mach-O file exactly once, deeper before shallower,
    and runs codesign with the identity given (a stand-in codesign on PATH
    records what it is asked)."""
    app, _, _ = built
    script = (app / "sign.sh").read_text()
    assert "Why the order matters" in script
    named = _sign_lines(script)
    machos = sorted(p.relative_to(app / "Contents").as_posix()
                    for p in app.rglob("*") if p.is_file() and is_macho_file(p))
    assert sorted(named) == machos and len(named) == len(set(named)) == 11
    depths = [n.count("/") for n in named]
    assert depths == sorted(depths, reverse=True), named
    # Run it.
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "codesign.log"
    (fake / "codesign").write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> "{log}"\necho >> "{log}"\n')
    os.chmod(fake / "codesign", 0o755)
    identity = "Developer ID Application: Tool Demo (ABCDE12345)"
    env = {"PATH": f"{fake}:/usr/bin:/bin"}
    proc = subprocess.run(["sh", str(app / "sign.sh"), identity], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    calls = [line.rstrip("|").split("|") for line in log.read_text().splitlines()]
    assert calls == [["--force", "--timestamp", "--options", "runtime", "--sign", identity,
                      str(app / "Contents" / rel)] for rel in named]
    # Usage errors: no identity; a CONTENTS that is not one.
    proc = subprocess.run(["sh", str(app / "sign.sh")], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and proc.stderr == "usage: sign.sh IDENTITY [CONTENTS]\n"
    proc = subprocess.run(["sh", str(app / "sign.sh"), identity, str(tmp_path)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "is not a directory" in proc.stderr


def test_the_command_reports_what_it_did_not_run(built):
    _, stdout, written = built
    lines = stdout.splitlines()
    assert lines[0].startswith(f"wrote {written}: ") and lines[0].endswith(" on disk")
    assert lines[-2] == ("  Mach-O files (11) rewritten to load from the bundle and unsigned: "
                         "run sign.sh IDENTITY after the last edit")
    assert lines[-1] == ("  load check: NOT RUN: the library is Mach-O (macOS); this command "
                         "loads only a Linux bundle to compare its answers; a macOS bundle is "
                         "first loaded by the signed app")
    assert lines[-3] == ("  needs from the system: libSystem, /usr/lib/libffi.dylib "
                         "(by _cffi_backend)")
    assert f"  Frameworks/libpython{PY}.dylib " in stdout


def test_marker(built):
    app, _, _ = built
    text = (app / "Contents" / "Resources" / "tsffi-python" / "turbospark_bundle.txt").read_text()
    assert text.splitlines()[3:] == [
        "format: 1", "version: 0.1.0", "abi: 2", f"python: {PY}", "platform: macos",
        f"soabi: {TAG}", f"stdlib: python{PYNODOT}.zip (149 modules)",
        "extension modules: " + " ".join(EXPECTED_EXTENSIONS)]


# ---------------------------------------------------------------------------
# Swift: the bundle's local package.

def _swift() -> str:
    swift = shutil.which("swift")
    if swift is None:
        pytest.fail("the bundle's Swift package is checked with swift (SwiftPM) on PATH; "
                    "install the Swift toolchain (swift.org) and put its usr/bin on PATH")
    return swift


def test_swift_package_describes_itself_from_where_it_is(built):
    app, _, _ = built
    proc = subprocess.run([_swift(), "package", "dump-package"], cwd=str(app),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    desc = json.loads(proc.stdout)
    assert desc["name"] == "CTsffi"
    assert [(p["name"], p["targets"]) for p in desc["products"]] == [
        ("CTsffi", ["CTsffiLinker"])]
    settings = {t["name"]: t["settings"] for t in desc["targets"]}
    assert settings["CTsffi"] == []
    assert settings["CTsffiLinker"] == [
        {"condition": {"platformNames": ["macos"]},
         "kind": {"unsafeFlags": {"_0": ["-L", str(app / "Contents" / "Frameworks")]}},
         "tool": "linker"}]
    modulemap = (app / "swift" / "CTsffi" / "module.modulemap").read_text()
    assert modulemap == ('module CTsffi [system] {\n    header "../../include/tsffi.h"\n'
                         '    link "tsffi"\n    export *\n}\n')


CONSUMER_MANIFEST = """// swift-tools-version:5.9
import PackageDescription
let package = Package(
    name: "Consumer",
    dependencies: [.package(path: "APP")],
    targets: [.target(name: "Consumer",
                      dependencies: [.product(name: "CTsffi", package: "PKG")])]
)
"""


def test_swift_package_compiles_against_the_header(built, tmp_path):
    """A package depending on the bundle's by path compiles a call into the
    C API (compile only: the library it would link is Mach-O); a name the
    header lacks does not, so the header is what was read."""
    app, _, _ = built
    swift = _swift()
    consumer = tmp_path / "consumer"
    (consumer / "Sources" / "Consumer").mkdir(parents=True)
    (consumer / "Package.swift").write_text(
        CONSUMER_MANIFEST.replace("APP", str(app)).replace("PKG", app.name))
    source = consumer / "Sources" / "Consumer" / "Consumer.swift"
    source.write_text("import CTsffi\n"
                      "public func abiVersion() -> UInt32 { tsffi_abi_version() }\n")
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.run([swift, "build", "--target", "Consumer"], cwd=str(consumer),
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    source.write_text("import CTsffi\n"
                      "public func abiVersion() -> UInt32 { tsffi_no_such_function() }\n")
    proc = subprocess.run([swift, "build", "--target", "Consumer"], cwd=str(consumer),
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode != 0
    assert "cannot find 'tsffi_no_such_function' in scope" in proc.stdout + proc.stderr


# ---------------------------------------------------------------------------
# The library finds the app layout from its own path. The lookup is the same
# C on every platform, so it runs here: the Linux bundle's own files put
# where a Mac app keeps them, and a host in Contents/MacOS.

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

# Linux bundle path -> app path.
REARRANGE = [
    ("lib/libtsffi.so", "Contents/Frameworks/libtsffi.so"),
    (f"lib/libpython{PY}.so.1.0", f"Contents/Frameworks/libpython{PY}.so.1.0"),
    (f"python/lib/python{PY}/lib-dynload", "Contents/Frameworks/tsffi-python/lib-dynload"),
    ("python/turbospark_bundle.txt", "Contents/Resources/tsffi-python/turbospark_bundle.txt"),
    (f"python/python{PYNODOT}.zip", f"Contents/Resources/tsffi-python/python{PYNODOT}.zip"),
    ("python/site-packages/turbospark_ffi",
     "Contents/Resources/tsffi-python/site-packages/turbospark_ffi"),
]


def _run(host: Path, install: Path, cwd: Path) -> dict[str, tuple[int, str]]:
    proc = subprocess.run(["env", "-i", str(host), str(install)], capture_output=True, text=True,
                          cwd=str(cwd), timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stdout + proc.stderr
    return {k: (int(s), v) for k, s, v in (line.split("\t", 2)
                                           for line in proc.stdout.splitlines())}


def test_the_library_finds_the_app_layout(tmp_path):
    assert macos.APP_DIRNAME == "tsffi-python"
    linux = tmp_path / "linux"
    bundle_mod.write_bundle(linux, verify=False)
    app = tmp_path / "build" / APP
    for src, dst in REARRANGE:
        (app / dst).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (linux / src).is_dir() else shutil.copyfile)(linux / src, app / dst)
    backend = sorted((linux / "python" / "site-packages").glob("_cffi_backend*.so"))[0]
    (app / "Contents/Frameworks/tsffi-python/site-packages").mkdir(parents=True)
    shutil.copyfile(backend, app / "Contents/Frameworks/tsffi-python/site-packages" / backend.name)
    for path in (app / "Contents" / "Frameworks").rglob("*.so*"):
        os.chmod(path, 0o755)
    (app / "Contents" / "MacOS").mkdir()
    (tmp_path / "host.c").write_text(HOST_C)
    cc = ["cc", "-std=c99", "-Wall", "-Werror", f"-I{linux / 'include'}", str(tmp_path / "host.c")]
    subprocess.run(cc + ["-o", str(app / "Contents" / "MacOS" / "host"),
                         f"-L{app / 'Contents' / 'Frameworks'}", "-ltsffi",
                         "-Wl,-rpath,$ORIGIN/../Frameworks"], check=True)
    oracle = tmp_path / "oracle"
    subprocess.run(cc + ["-o", str(oracle), f"-L{LIBRARY.parent}", "-ltsffi",
                         f"-Wl,-rpath,{LIBRARY.parent}"], check=True)
    shipped = tmp_path / "Applications" / APP
    shipped.parent.mkdir()
    os.rename(app, shipped)
    install = shipped / "Contents/Resources/tsffi-python/site-packages/turbospark_ffi/samples/dflash"
    got = _run(shipped / "Contents" / "MacOS" / "host", install, tmp_path)
    status, text = got["info"]
    assert status == 0, text
    info = json.loads(text)
    contents = shipped / "Contents"
    home = contents / "Resources" / "tsffi-python"
    assert info["ownsInterpreter"] is True
    assert (info["library"], info["pythonHome"], info["package"]) == (
        str(contents / "Frameworks" / "libtsffi.so"), str(home),
        str(home / "site-packages" / "turbospark_ffi"))
    # sealed: the two site-packages are reached through the library's finder only
    assert info["sysPath"] == [str(home / f"python{PYNODOT}.zip"),
                               str(home / "lib" / f"python{PY}"),
                               str(contents / "Frameworks" / "tsffi-python" / "lib-dynload")]
    assert json.loads(got["plan"][1])["drafter"]["note"] == DFLASH_AUTO_NOTE
    expected = _run(oracle, install, tmp_path)
    assert {k: v for k, v in got.items() if k != "info"} == \
        {k: v for k, v in expected.items() if k != "info"}
    assert got["refused"][0] != 0


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
    other = build_python_framework(tmp_path / "fw", archs=["arm64"], wheel=wheel,
                                   symbols=python_imports(library), modules=modules,
                                   builtins=("_json",))
    info = bundle_mod.write_bundle(tmp_path / "out", library=library, python_home=other)
    assert info.extension_modules == modules
    assert failures(info.root) == []


def test_architectures_must_cover_the_library(inputs, tmp_path, capsys):
    """An x86_64 library with cffi's arm64-only backend: refused, naming
    the file and the missing slice."""
    home, _, _ = inputs
    lib = mc.cross_build_library(tmp_path / "lib", "x86_64", python="python.org", linker="lld")
    err = _fails(capsys, [str(tmp_path / "out"), "--library", str(lib), "--python-home", str(home)])
    assert f"_cffi_backend.{TAG}.so has arm64 but the library is built for x86_64" in err
    assert "it lacks x86_64" in err


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
    assert (out / "Contents" / "Resources" / "tsffi-python" / "turbospark_bundle.txt").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
    assert stat.S_IMODE((out / "sign.sh").stat().st_mode) == 0o755


def test_a_framework_folder_means_its_current_version(built, inputs, tmp_path):
    """--python-home Python.framework is its Versions/Current: the same
    bundle as from Versions/X.Y."""
    home, library, _ = inputs
    framework = home.parent.parent
    assert framework.name == "Python.framework"
    info = bundle_mod.write_bundle(tmp_path / "b", library=library, python_home=framework)
    app, _, _ = built
    assert info.extension_modules == EXPECTED_EXTENSIONS
    for rel in ("Contents/Frameworks/libtsffi.dylib", f"Contents/Frameworks/libpython{PY}.dylib"):
        assert (tmp_path / "b" / rel).read_bytes() == (app / rel).read_bytes(), rel
