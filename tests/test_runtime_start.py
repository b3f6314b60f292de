"""Issue 32 items 2, 4 and 7b through a C host (tests/c/stack_host.c: one
tsffi_speculation_plan from a thread with the stack size asked for).

- a first call from a 64 KiB and a 16 KiB stack thread answers (the start
  runs on the library's own 8 MiB thread; on the old code 64 KiB died with
  SIGSEGV);
- an install under `Modèles/` answers the same under LANG=C, with no
  setlocale, and under a Latin-1 locale (UTF-8 mode);
- under a tight RLIMIT_AS the first call is status 9 naming the limit, with
  nothing on stderr (the old code aborted with "Fatal Python error").
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import ROOT, compile_c_host

HOST = ROOT / "tests" / "c" / "stack_host.c"


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    return compile_c_host(HOST, tmp_path_factory.mktemp("stack") / "stack_host")


@pytest.fixture(scope="module")
def accented(tmp_path_factory):
    from turbospark_ffi.install_writer import write_install
    return write_install(tmp_path_factory.mktemp("acc") / "Modèles" / "mtp", mtp=True)


def run(cmd, env=None):
    result = subprocess.run([str(c) for c in cmd], capture_output=True, timeout=120, env=env)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stderr == b""
    status, text = result.stdout.decode().rstrip("\n").split(" ", 1)
    return int(status), text


@pytest.mark.parametrize("kib", [64, 16])
def test_first_call_from_a_small_stack_thread(host, accented, kib):
    status, text = run([host, accented, str(kib)])
    assert status == 0, text
    assert json.loads(text)["drafter"]["installHasMtpHead"] is True


def test_non_ascii_path_is_the_same_under_every_locale(host, accented, tmp_path):
    answers = {}
    answers["no setlocale, LANG unset"] = run([host, accented, "8192"], env={})
    answers["LANG=C"] = run([host, accented, "8192"], env={"LANG": "C", "LC_ALL": "C"})
    if shutil.which("localedef"):
        subprocess.run(["localedef", "-i", "fr_FR", "-f", "ISO-8859-1",
                        str(tmp_path / "fr_FR.ISO-8859-1")], capture_output=True)
        answers["Latin-1"] = run([host, accented, "8192"],
                                 env={"LOCPATH": str(tmp_path), "LC_ALL": "fr_FR.ISO-8859-1"})
    for what, (status, text) in answers.items():
        assert status == 0, (what, text)
        plan = json.loads(text)
        assert plan["modelDir"] == str(accented), what
        assert plan["drafter"]["installHasMtpHead"] is True, what


def test_tight_address_space_is_status_9(host, accented):
    status, text = run(["prlimit", "--as=11000000", host, accented, "64"])
    assert status == 9
    assert text.startswith("the process's address-space limit (RLIMIT_AS = 11000000 bytes)")
