"""swift/Package.swift, as SwiftPM reads it: on Linux the C module `Tsffi` is
the pkg-config system library; with the manifest's host switch set as macOS
sets it, the same module is the binary target Tsffi.xcframework. And the
release form's checksum is what `swift package compute-checksum` says of a
zip of the XCFramework (SHA-256 of the file).

What cannot run here: SwiftPM on macOS resolving the binary target and
Xcode embedding it (docs/swift.md says so)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT
from test_engine_app import swift_tool

MANIFEST = ROOT / "swift" / "Package.swift"
LINUX = "let hostIsMac = false"


def _dump(package: Path) -> dict:
    proc = subprocess.run([swift_tool(), "package", "dump-package"], cwd=str(package),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _c_target(desc: dict) -> dict:
    target = next(t for t in desc["targets"] if t["name"] == "Tsffi")
    return {k: target[k] for k in ("type", "path", "pkgConfig", "url", "checksum")
            if k in target}


def _copy(tmp_path: Path, text: str) -> Path:
    pkg = tmp_path / "SpeculationPreview"
    shutil.copytree(ROOT / "swift" / "Sources", pkg / "Sources")
    shutil.copytree(ROOT / "swift" / "Tests", pkg / "Tests")
    (pkg / "Package.swift").write_text(text)
    return pkg


def test_on_linux_the_c_module_is_the_pkg_config_system_library():
    desc = _dump(ROOT / "swift")
    assert desc["name"] == "SpeculationPreview"
    assert _c_target(desc) == {"type": "system", "path": "Sources/CTsffi", "pkgConfig": "tsffi"}
    assert [t["dependencies"] for t in desc["targets"] if t["name"] == "SpeculationPreview"] == \
        [[{"byName": ["Tsffi", None]}]]
    assert "unsafeFlags" not in json.dumps(desc)


def test_on_macos_the_same_module_is_the_binary_target(tmp_path):
    text = MANIFEST.read_text()
    assert text.count(LINUX) == 1
    desc = _dump(_copy(tmp_path, text.replace(LINUX, "let hostIsMac = true")))
    assert _c_target(desc) == {"type": "binary", "path": "Tsffi.xcframework"}
    assert "unsafeFlags" not in json.dumps(desc)


def test_the_release_checksum_is_swiftpm_s(tmp_path):
    """A zip of a (small) XCFramework folder: compute-checksum prints its
    SHA-256, the value the release form's `checksum:` takes."""
    xc = tmp_path / "Tsffi.xcframework"
    (xc / "macos-arm64_x86_64").mkdir(parents=True)
    (xc / "Info.plist").write_text("<plist/>\n")
    archive = tmp_path / "Tsffi.xcframework.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(xc / "Info.plist", "Tsffi.xcframework/Info.plist")
    pkg = _copy(tmp_path, MANIFEST.read_text())
    proc = subprocess.run([swift_tool(), "package", "compute-checksum", str(archive)],
                          cwd=str(pkg), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == hashlib.sha256(archive.read_bytes()).hexdigest()


# The repository's root manifest: what SwiftPM reads when an app adds the
# repository by URL. Its sources are swift/'s.
ROOT_MANIFEST = ROOT / "Package.swift"
RELEASE = ('let releaseURL = ""\nlet releaseChecksum = ""\n')


def _root_copy(tmp_path: Path, text: str) -> Path:
    """The root manifest beside a copy of the sources it names, in the layout
    it names them (swift/Sources/...)."""
    pkg = tmp_path / "turbospark_ffi"
    shutil.copytree(ROOT / "swift" / "Sources", pkg / "swift" / "Sources")
    (pkg / "Package.swift").write_text(text)
    return pkg


def test_the_root_manifest_on_linux_is_the_pkg_config_system_library():
    desc = _dump(ROOT)
    assert desc["name"] == "SpeculationPreview"
    assert _c_target(desc) == {"type": "system", "path": "swift/Sources/CTsffi",
                               "pkgConfig": "tsffi"}
    assert [(t["name"], t["type"], t.get("path")) for t in desc["targets"]] == [
        ("Tsffi", "system", "swift/Sources/CTsffi"),
        ("SpeculationPreview", "regular", "swift/Sources/SpeculationPreview")]
    assert [p["name"] for p in desc["products"]] == ["SpeculationPreview"]
    assert "unsafeFlags" not in json.dumps(desc)


def test_the_root_manifest_names_what_swift_s_names():
    """Same products, platforms and C-module dependencies as swift/Package.swift
    (the package Linux builds and tests), so the fetched package is the tested one."""
    root, swift = _dump(ROOT), _dump(ROOT / "swift")
    for key in ("name", "products", "platforms"):
        assert root[key] == swift[key], key
    deps = {t["name"]: t["dependencies"] for t in swift["targets"]}
    assert {t["name"]: t["dependencies"] for t in root["targets"]} == \
        {name: deps[name] for name in ("Tsffi", "SpeculationPreview")}


# (release URL and checksum as the release writes them, the C module SwiftPM sees on a Mac)
ROOT_ON_MACOS = [
    ("", "", {"type": "binary", "path": "swift/Tsffi.xcframework"}),
    ("https://example.com/releases/0.1.0/Tsffi.xcframework.zip", "ab" * 32,
     {"type": "binary", "url": "https://example.com/releases/0.1.0/Tsffi.xcframework.zip",
      "checksum": "ab" * 32}),
]


@pytest.mark.parametrize("url,checksum,target", ROOT_ON_MACOS, ids=["development", "release"])
def test_the_root_manifest_on_macos_is_the_binary_target(tmp_path, url, checksum, target):
    text = ROOT_MANIFEST.read_text()
    assert text.count(LINUX) == 1 and text.count(RELEASE) == 1
    text = text.replace(LINUX, "let hostIsMac = true").replace(
        RELEASE, f'let releaseURL = "{url}"\nlet releaseChecksum = "{checksum}"\n')
    assert _c_target(_dump(_root_copy(tmp_path, text))) == target
