"""The installed library imports only from its own install.

pip builds the library in an isolated build environment, a temporary
directory that is deleted afterwards and that any local user may re-create.
Nothing of the build machine may reach the runtime search path: it is built
at load time from what exists beside the library (the package's
site-packages, where pip put cffi too) and the Python home it runs against,
and a directory others than its owner can write to is never imported from.

Built as a user installs it: conftest's `pip_installed` (`pip wheel` in
pip's isolated build environment, then `pip install` into a fresh venv).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from conftest import BUILD_INFO_HOST, compile_c_host

TIMEOUT = 900



def run(cmd, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                            timeout=TIMEOUT, **kw)
    assert result.returncode == 0, f"{cmd}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def build_info(installed_lib_dir: Path, tmp_path: Path) -> tuple[int, str]:
    host = compile_c_host(BUILD_INFO_HOST, tmp_path / "info_host", link_library=False,
                          extra=[f"-L{installed_lib_dir}", "-ltsffi",
                                 f"-Wl,-rpath,{installed_lib_dir}"])
    out = run(["env", "-i", host], cwd="/").stdout.split("\n", 1)
    return int(out[0]), out[1].strip()


def test_no_path_of_the_build_machine_is_in_the_installed_library(pip_installed):
    installed = pip_installed
    """No byte of the installed library names pip's build environment, its
    build directory, the source tree it was built from, or any temporary
    directory (the Python home it runs against is the only machine path)."""
    data = installed.library.read_bytes()
    for needle in ("pip-build-env", "pip-req-build", str(installed.build_env),
                   str(installed.source), "/tmp/"):
        assert needle.encode() not in data, needle
    assert sys.base_prefix.encode() in data  # the check reads the right bytes


def test_planted_modules_in_the_build_environment_are_never_imported(pip_installed, tmp_path):
    installed = pip_installed
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
        assert info["sysPath"] == [stdlib, os.path.join(stdlib, "lib-dynload")]  # sealed
        assert info["package"] == str(installed.site / "turbospark_ffi")
        assert sorted(os.listdir(markers)) == []
    finally:
        shutil.rmtree(installed.build_env, ignore_errors=True)


def test_a_package_directory_others_can_write_to_is_refused(pip_installed, tmp_path):
    installed = pip_installed
    """The install copied (package and cffi's backend) into a directory its
    group may write to: accepted while the group is root's, refused, naming
    it, when it is another (tests/test_python_home.py has every arm of the
    rule)."""
    import _cffi_backend
    site = tmp_path / "site"
    site.mkdir()
    shutil.copytree(installed.site / "turbospark_ffi", site / "turbospark_ffi")
    shutil.copy2(_cffi_backend.__file__, site)
    site.chmod(0o775)
    os.chown(site, 0, 0)
    status, text = build_info(site / "turbospark_ffi", tmp_path)
    assert status == 0, text
    os.chown(site, 0, 4242)
    try:
        status, text = build_info(site / "turbospark_ffi", tmp_path)
    finally:
        os.chown(site, 0, 0)
    assert status == 9
    assert text.startswith(f"refusing to import Python code from {site}: owner uid 0, group gid "
                           "4242, mode 0775: its group may write to it and is not root's")
