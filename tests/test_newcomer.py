"""What a newcomer's first hour runs: `make demo` installs only the library
(the test tools are `make test`'s: ziglang alone is 411 MB) and says so;
`make test-pythons` (.ci/pythons) finds the shared CPythons, and CI runs it;
pyproject states the Python range CI ran."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import tomllib

import pytest

from conftest import ROOT


def dry_run(target: str, **variables: str) -> str:
    """What `make TARGET` would run (-n: nothing runs, -B: as on a fresh
    machine, every step out of date), in the checkout."""
    done = subprocess.run(["make", "-n", "-B", target,
                           *[f"{k}={v}" for k, v in variables.items()]],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


# (target, what its pip install line must be, what it must say)
INSTALLS = [
    ("demo", '.venv/bin/python -m pip install -q .',
     "make demo: installing the library (and cffi) into .venv; the test tools come with "
     "make test"),
    ("test", '.venv/bin/python -m pip install -q ".[test]"', None),
]


@pytest.mark.parametrize("target,install,says", INSTALLS)
def test_each_command_installs_what_it_needs(target, install, says):
    commands = dry_run(target).splitlines()
    installs = [c for c in commands if " -m pip install -q " in c and "--upgrade pip" not in c]
    assert installs == [install]
    if says is not None:
        assert f'echo "{says}"' in commands


def _pythons_module():
    loader = importlib.machinery.SourceFileLoader("ci_pythons", str(ROOT / ".ci" / "pythons"))
    spec = importlib.util.spec_from_loader("ci_pythons", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_ci_runs_the_other_pythons():
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'make PYTHON="$PYTHON" EXCEPT="$PYTHON" test-pythons' in ci
    assert ".ci/pythons" in dry_run("test-pythons", PYTHON="python3", EXCEPT="python3")


def test_the_subset_names_test_files_that_exist():
    module = _pythons_module()
    missing = [name for name in module.SUBSET if not (ROOT / "tests" / name).is_file()]
    assert missing == []


def test_this_machine_has_at_least_two_shared_pythons():
    """What .ci/pythons --list finds here (the image's pyenv 3.11, 3.12,
    3.13): at least two, else CI fails at that step."""
    done = subprocess.run([str(ROOT / ".ci" / "pythons"), "--list"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    kept = done.stdout.splitlines()[-1]
    assert kept.startswith("kept: ") and len(kept[len("kept: "):].split(", ")) >= 2, kept


def test_pyproject_names_the_pythons_ci_ran():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    versions = [c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
                if c.startswith("Programming Language :: Python :: 3.")]
    assert versions == ["3.11", "3.12", "3.13"]
    readme = (ROOT / "README.md").read_text()
    assert "Python 3.11, 3.12 or 3.13" in readme


def test_no_test_prints_past_pytest_s_capture():
    """`make test` (pytest -q) prints dots, and a failure's report: no test
    switches capture off to print a table among the dots (a resolver table
    printed that way was ~40 lines of every run)."""
    import re
    offenders = [f"{path.name}:{n}" for path in sorted((ROOT / "tests").glob("*.py"))
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"\b(capsys|capfd|capsysbinary|capfdbinary)\.disabled\(|"
                              r"sys\.__stdout__|sys\.__stderr__|/dev/tty", line)
                 and path.name != "test_newcomer.py"]
    assert offenders == []
