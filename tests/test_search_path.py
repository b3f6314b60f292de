"""The installed library imports only from its own install.

pip builds the library in an isolated build environment, a temporary
directory that is deleted afterwards and that any local user may re-create.
Nothing of the build machine may reach the runtime search path: it is built
at load time from what exists beside the library (the package's
site-packages, where pip put cffi too) and the Python home it runs against,
and a directory others than its owner can write to is never imported from.

Built here as a user installs it: `pip wheel` (isolated build environment)
then `pip install` into a fresh venv, once per session (~1 min).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT, compile_c_host

TIMEOUT = 900
LIB = "libturbospark_ffi.so"

BUILD_INFO_HOST = r"""
#include <stdio.h>
#include "turbospark_ffi.h"
int main(void) {
    char *out = NULL;
    char message[2048];
    int status = (int)tsffi_build_info_json(&out);
    tsffi_last_error(message, sizeof message);
    printf("%d\n%s\n", status, out != NULL ? out : message);
    tsffi_string_free(out);
    return 0;
}
"""


def run(cmd, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            timeout=TIMEOUT, **kw)
    assert result.returncode == 0, f"{cmd}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


class Installed:
    def __init__(self, site: Path, library: Path, build_env: Path, source: Path) -> None:
        self.site = site
        self.source = source
        self.library = library
        self.build_env = build_env


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    work = tmp_path_factory.mktemp("pipinstall")
    source = work / "src"
    files = run(["git", "ls-files"], cwd=ROOT).stdout.split("\n")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    wheels = work / "wheels"
    built = run([sys.executable, "-m", "pip", "wheel", "-vv", "--no-deps", "-w", wheels, source],
                cwd=work)
    envs = re.findall(r"(/\S*pip-build-env-[^/\s]+)", built.stdout + built.stderr)
    assert envs, "pip did not report its isolated build environment"
    run([sys.executable, "-m", "venv", work / "venv"])
    run([work / "venv" / "bin" / "pip", "install", "-q", *wheels.glob("*.whl")])
    site = Path(run([work / "venv" / "bin" / "python", "-c",
                     "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    return Installed(site, site / "turbospark_ffi" / LIB, Path(envs[0]), source)


def build_info(installed_lib_dir: Path, tmp_path: Path) -> tuple[int, str]:
    host = compile_c_host(BUILD_INFO_HOST, tmp_path / "info_host", link_library=False,
                          extra=[f"-L{installed_lib_dir}", "-lturbospark_ffi",
                                 f"-Wl,-rpath,{installed_lib_dir}"])
    out = run(["env", "-i", host], cwd="/").stdout.split("\n", 1)
    return int(out[0]), out[1].strip()


def test_no_path_of_the_build_machine_is_in_the_installed_library(installed):
    """No byte of the installed library names pip's build environment, its
    build directory, the source tree it was built from, or any temporary
    directory (the Python home it runs against is the only machine path)."""
    data = installed.library.read_bytes()
    for needle in ("pip-build-env", "pip-req-build", str(installed.build_env),
                   str(installed.source), "/tmp/"):
        assert needle.encode() not in data, needle
    assert sys.base_prefix.encode() in data  # the check reads the right bytes


def test_planted_modules_in_the_build_environment_are_never_imported(installed, tmp_path):
    """Re-create pip's (deleted) build environment, cffi's place in it
    included, fill it with modules named like the ones the library imports,
    each leaving a marker when imported: the library's sys.path is exactly its
    own install, and no marker appears."""
    markers = tmp_path / "markers"
    markers.mkdir()
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    planted_dirs = [installed.build_env / "overlay" / "lib" / pyver / "site-packages",
                    installed.build_env / "normal" / "lib" / pyver / "site-packages"]
    for directory in planted_dirs:
        assert not directory.exists()  # pip deleted it: this test re-creates it
        for name in ("_cffi_backend", "planted", "os", "posixpath", "json"):
            (directory / f"{name}.py").parent.mkdir(parents=True, exist_ok=True)
            (directory / f"{name}.py").write_text(
                f"open({str(markers / name)!r}, 'w').close()\n")
        (directory / "turbospark_ffi").mkdir()
        (directory / "turbospark_ffi" / "__init__.py").write_text(
            f"open({str(markers / 'turbospark_ffi')!r}, 'w').close()\n")
    try:
        status, text = build_info(installed.library.parent, tmp_path)
        assert status == 0, text
        info = json.loads(text)
        stdlib = sysconfig.get_path("stdlib")
        assert info["sysPath"] == [str(installed.site), stdlib, os.path.join(stdlib, "lib-dynload")]
        assert info["package"] == str(installed.site / "turbospark_ffi")
        assert sorted(os.listdir(markers)) == []
    finally:
        shutil.rmtree(installed.build_env, ignore_errors=True)


def test_a_package_directory_others_can_write_to_is_refused(installed, tmp_path):
    """The install copied (package and cffi's backend) into a directory with
    mode 0775: the library refuses to import from it, naming it."""
    import _cffi_backend
    site = tmp_path / "site"
    site.mkdir()
    shutil.copytree(installed.site / "turbospark_ffi", site / "turbospark_ffi")
    shutil.copy2(_cffi_backend.__file__, site)
    # The same copy, owner-writable only, answers: the mode alone decides.
    site.chmod(0o755)
    status, text = build_info(site / "turbospark_ffi", tmp_path)
    assert status == 0, text
    site.chmod(0o775)
    status, text = build_info(site / "turbospark_ffi", tmp_path)
    assert status == 9
    assert text == (f"refusing to import Python code from {site}: the directory is writable "
                    "by others than its owner (mode 0775); make it writable by its owner only")
