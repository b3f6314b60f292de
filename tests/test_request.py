"""One request path: every entry point that takes a model names it the same
three ways -- an installed alias, a path relative to the working directory,
an absolute path -- and gets the same answer for each.

The table: for every C function that takes a model_dir and every subcommand
that does (inspect, plan, choices), each naming gives the same `modelDir`
(the absolute directory read) and the same bytes, through the C ABI (the
library loaded in this process, its environment and working directory set
as a host sets them) and through `turbospark-ffi ... --json` (a subprocess
with the same environment and working directory).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from turbospark_ffi.install_writer import record_install, write_install

ROOT = Path(__file__).resolve().parent.parent

# C function -> (the options argument it takes, the subcommand answering it).
# tsffi_resolve_drafter has no subcommand: the table checks it through C only.
FUNCTIONS = {
    "tsffi_resolve_drafter": (b'{"speculativeDrafter": "dflash"}', None),
    "tsffi_speculation_plan": (b'{"tsffi":{"temperature":0.5}}', ["plan", "--temperature", "0.5"]),
    "tsffi_speculation_choices": (b"{}", ["choices"]),
    "tsffi_install_info_json": (None, ["inspect"]),
}
NAMINGS = ["alias", "relative", "dot-relative", "absolute"]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """A DFlash2-only install (its flags false/true, never the null of an
    install nobody read) at work/models/qd, recorded as alias `qd` in the
    store at work/store; the working directory is work."""
    work = tmp_path_factory.mktemp("request")
    install = write_install(work / "models" / "qd", dflash=True)
    record_install(work / "store", "qd", install)
    return {"work": work, "install": install, "store": work / "store",
            "names": {"alias": "qd", "relative": "models/qd", "dot-relative": "./models/qd",
                      "absolute": str(install)}}


def c_call(lib, fn: str, name: str, options: bytes | None) -> tuple[int, str]:
    out = ctypes.c_void_p()
    args = (name.encode(),) if options is None else (name.encode(), options)
    status = getattr(lib, fn)(*args, ctypes.byref(out))
    if status != 0:
        n = lib.tsffi_last_error(None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        lib.tsffi_last_error(buf, n + 1)
        return status, buf.value.decode()
    text = ctypes.string_at(out.value).decode()
    lib.tsffi_string_free(out)
    return status, text


@pytest.fixture
def in_world(world, monkeypatch):
    """This process as a host in the world: $TURBOSPARK_HOME the store, the
    working directory `work` (os.environ writes through to the C getenv the
    library reads)."""
    monkeypatch.setenv("TURBOSPARK_HOME", str(world["store"]))
    monkeypatch.chdir(world["work"])
    return world


@pytest.mark.parametrize("naming", NAMINGS)
@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_c_answers_every_naming_alike(loaded, in_world, fn, naming):
    options = FUNCTIONS[fn][0]
    status, text = c_call(loaded.lib, fn, in_world["names"][naming], options)
    assert status == 0, text
    expected = c_call(loaded.lib, fn, str(in_world["install"]), options)
    assert (status, text) == expected
    assert json.loads(text)["modelDir"] == str(in_world["install"])


def cli(world, args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    env["TURBOSPARK_HOME"] = str(world["store"])
    return subprocess.run([sys.executable, "-m", "turbospark_ffi", *args], cwd=world["work"],
                          env=env, capture_output=True, text=True, timeout=120)


CLI_CASES = [(fn, naming) for fn in sorted(FUNCTIONS) if FUNCTIONS[fn][1]
             for naming in NAMINGS]


@pytest.mark.parametrize("fn, naming", CLI_CASES, ids=[f"{f}-{n}" for f, n in CLI_CASES])
def test_the_command_line_answers_what_c_answers(loaded, in_world, fn, naming):
    options, command = FUNCTIONS[fn]
    name = in_world["names"][naming]
    r = cli(in_world, [command[0], name, *command[1:], "--json"])
    assert (r.returncode, r.stderr) == (0, "")
    status, text = c_call(loaded.lib, fn, str(in_world["install"]), options)
    assert status == 0
    assert r.stdout == text + "\n"
    answer = json.loads(r.stdout)
    assert answer["modelDir"] == str(in_world["install"])
    flags = answer["install"] if fn == "tsffi_speculation_choices" else answer
    if fn == "tsffi_speculation_plan":
        flags = answer["drafter"]
    assert (flags["installHasMtpHead"], flags["installHasDflash"]) == (False, True)
