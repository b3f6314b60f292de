"""A host that runs a Python of its own before its first call (issue 40,
items 1 and 3), through tests/c/python_host.c: it dlopen()s a libpython
RTLD_GLOBAL, starts it, then calls the library from a worker thread.

* Another X.Y running (3.10, 3.12, 3.13 beside a library built for 3.11):
  every call is status 9 naming the Python found and the one the library was
  built for, at once, and nothing reaches the host's stderr. Before: a 3.12
  or 3.13 host spun forever at 100% CPU in cffi's start-up, and a 3.10 one
  got a misleading message and 622 bytes on its stderr.
* The same X.Y, its GIL released: the library runs in the host's
  interpreter ("ownsInterpreter": false) and answers.
* The same X.Y, its GIL kept by the main thread for good: each call is
  status 9 after a bounded wait (TSFFI_GIL_WAIT_MS), never a hang; once the
  host releases the GIL, the next call answers.

The Pythons are found as .ci/pythons finds them (pyenv's, python3.X on
PATH); each version this file names must be there with a shared libpython,
or the test fails saying which is missing (no skip). The subprocess timeout
is the watchdog: a hang fails the test, no run is timed.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import LIBRARY, ROOT, compile_c_host

WATCHDOG = 120
BUILT = f"{sys.version_info[0]}.{sys.version_info[1]}"
# 3.10: older than the package supports (a host's own old Python); 3.12 and
# 3.13: newer; 3.11: the build of `make test`. The one equal to BUILT is
# the same-version host; every other one is a foreign one.
VERSIONS = ["3.10", "3.11", "3.12", "3.13"]
PROBE = ("import json, platform, sys, sysconfig; print(json.dumps({'minor': "
         "'%d.%d' % sys.version_info[:2], 'version': platform.python_version(), "
         "'libdir': sysconfig.get_config_var('LIBDIR'), "
         "'ldlibrary': sysconfig.get_config_var('LDLIBRARY'), 'home': sys.base_prefix, "
         "'shared': bool(sysconfig.get_config_var('Py_ENABLE_SHARED'))}))")

GIL_MESSAGE = (
    "the host's Python interpreter did not let its GIL go within 2 seconds: the host started "
    "Python itself and one of its threads holds the GIL (a host that calls Py_Initialize keeps "
    "the GIL on that thread until it calls PyEval_SaveThread), so a call from this thread cannot "
    "run Python; release the GIL (PyEval_SaveThread after Py_Initialize, or "
    "Py_BEGIN_ALLOW_THREADS around waits), or make the call from the thread that holds it")


def foreign_message(libpython: str, version: str) -> str:
    return (f"the Python already running in this process ({libpython}) is Python {version}, "
            f"but this library was built for Python {BUILT}: it cannot run inside another "
            f"version's interpreter, so it does not touch it; load it in a process whose Python "
            f"is {BUILT}, or rebuild it against the Python the host runs")


def _candidates() -> list[str]:
    loader = importlib.machinery.SourceFileLoader("ci_pythons", str(ROOT / ".ci" / "pythons"))
    spec = importlib.util.spec_from_loader("ci_pythons", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.candidates()


@pytest.fixture(scope="module")
def pythons() -> dict[str, dict]:
    """X.Y -> {version, libpython, home} of the first shared CPython found."""
    found: dict[str, dict] = {}
    for path in _candidates():
        try:
            done = subprocess.run([path, "-I", "-c", PROBE], capture_output=True, text=True,
                                  timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode != 0:
            continue
        info = json.loads(done.stdout)
        libpython = os.path.join(info["libdir"] or "", info["ldlibrary"] or "")
        if info["shared"] and os.path.isfile(libpython) and info["minor"] not in found:
            found[info["minor"]] = {"version": info["version"], "libpython": libpython,
                                    "home": info["home"]}
    # The same X.Y: the interpreter running these tests, whose libpython the
    # library links (a venv's base Python).
    found[BUILT] = {"version": sys.version.split()[0],
                    "libpython": os.path.join(sysconfig.get_config_var("LIBDIR"),
                                              sysconfig.get_config_var("LDLIBRARY")),
                    "home": sys.base_prefix}
    return found


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> Path:
    return compile_c_host(ROOT / "tests" / "c" / "python_host.c",
                          tmp_path_factory.mktemp("python_host") / "python_host",
                          link_library=False)


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> Path:
    from turbospark_ffi.install_writer import write_install
    return write_install(tmp_path_factory.mktemp("python_host_install") / "mtp", mtp=True)


def run(host: Path, python: dict, mode: str, install: Path) -> tuple[list[str], str]:
    """The host's lines after its first, and its stderr."""
    env = {"PYTHONHOME": python["home"], "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(host), python["libpython"], str(LIBRARY), mode, str(install)],
                          capture_output=True, text=True, timeout=WATCHDOG, env=env)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("host python " + python["version"]), lines[0]
    assert lines[-1] == "done", lines
    return lines[1:-1], done.stderr


def python_of(pythons: dict, minor: str) -> dict:
    assert minor in pythons, (
        f"no CPython {minor} with a shared libpython was found (looked where .ci/pythons "
        f"looks: pyenv's versions, python3.X on PATH); this test needs it: "
        f"PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install {minor}")
    return pythons[minor]


def linked_host(tmp_path: Path, python: dict) -> Path:
    """python_host with the libpython linked in (DT_NEEDED, before anything
    else), as a host embedding that Python is built: it is then first in
    the process's global scope, before the library's own libpython."""
    libdir, name = os.path.split(python["libpython"])
    link = name[len("lib"):].split(".so")[0]
    return compile_c_host(ROOT / "tests" / "c" / "python_host.c", tmp_path / "linked_host",
                          link_library=False,
                          extra=["-Wl,--no-as-needed", f"-L{libdir}", f"-l{link}",
                                 f"-Wl,-rpath,{libdir}", "-Wl,--as-needed"])


@pytest.mark.parametrize("how", ["dlopen", "linked"])
@pytest.mark.parametrize("minor", VERSIONS)
def test_a_running_python_is_used_only_when_it_is_the_built_one(host, pythons, install, minor,
                                                                how, tmp_path):
    python = python_of(pythons, minor)
    loaded = python["libpython"]
    if how == "linked":
        host = linked_host(tmp_path, python)
        # Loaded by its soname (libpythonX.Y.so.1.0), which the link name
        # is a symlink to: the name dladdr gives.
        loaded = os.path.join(os.path.dirname(loaded), os.path.basename(os.path.realpath(loaded)))
    lines, stderr = run(host, python, "release", install)
    if minor != BUILT:
        message = foreign_message(loaded, python["version"])
        assert lines == [f"{fn} 9 {message}" for fn in ("info", "plan") * 2]
    else:
        info, plan = (json.loads(line.split(" ", 2)[2]) for line in lines[:2])
        assert [line.split(" ", 2)[:2] for line in lines] == [["info", "0"], ["plan", "0"]] * 2
        assert info["ownsInterpreter"] is False
        assert plan["drafter"]["installHasMtpHead"] is True
    assert stderr == ""


def test_a_host_keeping_the_gil_gets_status_9_not_a_hang(host, pythons, install):
    lines, stderr = run(host, python_of(pythons, BUILT), "hold", install)
    assert lines == [f"{fn} 9 {GIL_MESSAGE}" for fn in ("info", "plan") * 2]
    assert stderr == ""


def test_once_the_host_releases_the_gil_the_next_call_answers(host, pythons, install):
    lines, stderr = run(host, python_of(pythons, BUILT), "hold_then_release", install)
    assert lines[:2] == [f"{fn} 9 {GIL_MESSAGE}" for fn in ("info", "plan")]
    assert [line.split(" ", 2)[:2] for line in lines[2:]] == [["info", "0"], ["plan", "0"]]
    assert json.loads(lines[3].split(" ", 2)[2])["drafter"]["installHasMtpHead"] is True
    assert stderr == ""
