"""The app, built the way the engine's Mac app would adopt this library.

swift/Fixtures/EngineApp is an executable package that depends on the
engine's Swift package (its stand-in, swift/Fixtures/TurboSparkEngine:
module TurboSpark over C module CTurboSpark, every public name the engine's
package declares, linkedLibrary("turbospark_ffi")) and on SpeculationPreview
(swift/). Its main.swift imports all four modules into one file, uses the
engine's names unqualified next to ours, and drives the settings model from
the app's own options. Here it is built against the engine's stand-in as a
static libturbospark_ffi.a (tests/engine_standin.py) and libtsffi, with the
two libraries' directories in either search order, and run: each library
answers its own calls.

EngineAppFormerNames compiles the same main.swift with the two names this
package used to declare (`enum TurboSpark`, `TurboSparkError`) imported as
well: it must not compile, which shows the app exercises those clashes.

The packages are built from the checkout in place; everything SwiftPM writes
goes to a scratch directory under pytest's tmp_path.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import engine_standin
from conftest import HEADER, LIBRARY, ROOT
from original_texts import DFLASH_NOTE, REFUSAL_PREFIX
from turbospark_ffi.native import library_name

APP = ROOT / "swift" / "Fixtures" / "EngineApp"
TIMEOUT = 900

# Every line the app prints for a DFlash2-only install, written out.
APP_LINES = [
    "engine abi 41 header 41",
    "engine open: TurboSparkError 77: stand-in engine: ts_session_open",
    'engine options {"contextLength":8192,"speculation":"auto","speculativeDrafter":"auto"}',
    "preview abi 4 header 4",
    f"plan: mtp off: {DFLASH_NOTE}",
    f"refused: {REFUSAL_PREFIX}{DFLASH_NOTE}",
    "engine last error: stand-in engine: ts_session_open",
    'settings (the app\'s JSON {"contextLength":8192,"speculation":"2","speculativeDrafter":"dflash"}): '
    "on 2 (dflash)",
    f"settings (typed from 2, auto): TSFFI_ERR_REFUSED {REFUSAL_PREFIX}{DFLASH_NOTE}",
    "custom compute: preview of /preview",
    "names: engine 21, preview 27, module-qualified true",
]

# What the former names do to the same source (swiftc's words).
FORMER_NAME_ERRORS = [
    "error: 'TurboSparkError' is ambiguous for type lookup in this context",
    "error: 'OpenOptions' is not a member type of enum 'FormerNames.TurboSpark'",
]


def swift_tool() -> str:
    found = shutil.which("swift", path=f"{os.environ.get('PATH', '')}:/opt/swift/usr/bin")
    if found is None:
        pytest.fail("swift is not on PATH (nor /opt/swift/usr/bin): this test builds a Swift app; "
                    "install Swift 6 from swift.org and put its usr/bin on PATH (.ci/run requires it)")
    return found


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("engine_app")


@pytest.fixture(scope="module")
def dirs(work) -> dict[str, Path]:
    """The engine's archive in one directory; this library (a link to the
    built one) alone in another, so nothing else of the build tree is on the
    search path."""
    archive = engine_standin.static_archive(work / "engine")
    ours = work / "tsffi-lib"
    ours.mkdir()
    (ours / library_name()).symlink_to(LIBRARY)
    return {"engine": archive.parent, "ours": ours}


@pytest.fixture(scope="module")
def dflash_install(work) -> Path:
    from turbospark_ffi.install_writer import write_install
    return write_install(work / "dflash", mtp=False, dflash=True)


def swift_build(work: Path, product: str, search: list[Path]) -> subprocess.CompletedProcess:
    """`swift build` of one product of the app, verbosely (the link line is
    read back), with `search` as the linker's directories in that order. The
    header comes from -I and the directories from -L, both given here (the
    README's pkg-config recipe puts its own -L first, whatever the order
    asked for); the rpath names the built library, which finds its package
    beside it."""
    cmd = [swift_tool(), "build", "-v", "--package-path", str(APP),
           "--scratch-path", str(work / "build"), "--product", product,
           "-Xcc", f"-I{HEADER.parent}"]
    for directory in search:
        cmd += ["-Xlinker", "-L", "-Xlinker", str(directory)]
    cmd += ["-Xlinker", "-rpath", "-Xlinker", str(LIBRARY.parent)]
    env = {k: v for k, v in os.environ.items() if k != "PKG_CONFIG_PATH"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)


def link_search_order(verbose: str, product: str, candidates: list[Path]) -> list[Path]:
    """The order in which the link of `product` searches `candidates`."""
    links = [line for line in verbose.splitlines()
             if re.search(rf"-o \S*/debug/{product}(\s|$)", line) and " -L" in line]
    assert links, f"no link line for {product} in the build's output"
    searched = re.findall(r"-L\s*(\S+)", links[-1])
    return sorted((c for c in candidates if str(c) in searched), key=lambda c: searched.index(str(c)))


def needed(binary: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True).stdout
    return re.findall(r"NEEDED.*\[(.+)\]", out)


@pytest.mark.parametrize("order", ["engine-dir-first", "library-dir-first"])
def test_the_app_links_both_libraries_and_each_answers(order, work, dirs, dflash_install):
    search = [dirs["engine"], dirs["ours"]]
    if order == "library-dir-first":
        search.reverse()
    result = swift_build(work, "EngineApp", search)
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])
    assert link_search_order(result.stdout + result.stderr, "EngineApp", search) == search

    app = work / "build" / "debug" / "EngineApp"
    # The engine's code is in the app (a static library); ours is loaded.
    libraries = needed(app)
    assert library_name() in libraries and not [n for n in libraries if "turbospark" in n], libraries

    run = subprocess.run([str(app), str(dflash_install)], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert run.returncode == 0 and run.stderr == "", (run.stdout, run.stderr)
    assert run.stdout.splitlines() == APP_LINES


def test_the_app_does_not_compile_with_the_former_names(work, dirs):
    result = swift_build(work, "EngineAppFormerNames", [dirs["engine"], dirs["ours"]])
    assert result.returncode != 0
    output = result.stdout + result.stderr
    for error in FORMER_NAME_ERRORS:
        assert error in output, output[-4000:]
