"""Where the library's interpreter finds its files, and whom it trusts.

The home is found from the libpython actually loaded into the process
(src/tsffi_embed.c, tsffi_python_home), so a Python moved with its files keeps
working -- on macOS, Homebrew's Cellar path changes on every upgrade -- while
a libpython or standard library of another X.Y is TSFFI_ERR_RUNTIME with a
message. Every directory the interpreter imports from must be owned by root
or the process's effective user, not writable by everyone, and writable by
its group only when that group is root's (or, on macOS, admin).

Built here against a copy of this machine's Python (hard links, in a directory
every user may enter), so the copy can be moved, changed, chown'd and run as
another user without touching the real one: `ffi_build.build(python=...)` with
a description of the copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from conftest import BUILD_INFO_HOST, ROOT, compile_c_host, header_constants

CODES = header_constants()
VERSION = sysconfig.get_config_var("VERSION")
PRIVILEGED = "root's (gid 0) or admin (gid 80)" if sys.platform == "darwin" else "root's (gid 0)"
OTHER_UID = 4242      # no such user: an unprivileged owner
OTHER_GID = 4242
THIRD_UID = 4343
TIMEOUT = 300


# Left out of the copy: what the embedded interpreter never imports.
_NOT_COPIED = ("site-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip",
               "lib2to3", "pydoc_data")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


class Embedded:
    """A Python copy at `home`, a site with the package built against it,
    and a host linked to that library."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.home = base / "python"
        self.site = base / "site"
        self.host = base / "info_host"

    def rel(self, real: str) -> Path:
        rel = os.path.relpath(real, sys.base_prefix)
        if rel.startswith(".."):
            pytest.fail(f"this test copies the running Python from its prefix {sys.base_prefix}, "
                        f"but {real} is outside it")
        return self.home / rel

    @property
    def libdir(self) -> Path:
        return self.rel(sysconfig.get_config_var("LIBDIR"))

    @property
    def stdlib(self) -> Path:
        return self.rel(sysconfig.get_path("stdlib"))

    @property
    def dynload(self) -> Path:
        return self.stdlib / "lib-dynload"


def _copy_python(embedded: Embedded) -> None:
    libdir = Path(sysconfig.get_config_var("LIBDIR"))
    embedded.libdir.mkdir(parents=True)
    for name in {sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LDLIBRARY")}:
        src = libdir / name
        if src.is_symlink():
            (embedded.libdir / name).symlink_to(os.readlink(src))
        else:
            _link_or_copy(str(src), str(embedded.libdir / name))
    shutil.copytree(sysconfig.get_path("stdlib"), embedded.stdlib, symlinks=True,
                    copy_function=_link_or_copy, ignore=shutil.ignore_patterns(*_NOT_COPIED))


def _build(embedded: Embedded) -> None:
    """The package copied into the site and the library built into it against
    the copy (described as ffi_build.describe_python() describes this Python,
    with the copy's paths), in a child process as pip would run it."""
    import _cffi_backend
    embedded.site.mkdir()
    shutil.copytree(ROOT / "turbospark_ffi", embedded.site / "turbospark_ffi",
                    ignore=shutil.ignore_patterns("__pycache__", "samples", "*.so", "*.dylib"))
    shutil.copy2(_cffi_backend.__file__, embedded.site)
    paths = {"home": str(embedded.home), "libdir": str(embedded.libdir),
             "stdlib": str(embedded.stdlib), "dynload": str(embedded.dynload)}
    script = (
        f"import json, sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "import ffi_build\nfrom pathlib import Path\n"
        f"p = json.loads({json.dumps(paths)!r})\n"
        "d = ffi_build.describe_python()\n"
        "d['vars'] = dict(d['vars'], LIBDIR=p['libdir'], DESTSHARED=p['dynload'])\n"
        "d['paths'] = dict(d['paths'], stdlib=p['stdlib'])\n"
        "d['base_prefix'] = p['home']\n"
        f"ffi_build.build(package_dir=Path({str(embedded.site / 'turbospark_ffi')!r}), "
        f"tmpdir=Path({str(embedded.base / 'build')!r}), python=d)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=embedded.base)
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.rmtree(embedded.base / "build")
    package = embedded.site / "turbospark_ffi"
    compile_c_host(BUILD_INFO_HOST, embedded.host, link_library=False,
                   extra=[f"-L{package}", "-ltsffi", f"-Wl,-rpath,{package}",
                          f"-Wl,-rpath-link,{embedded.libdir}"])


@pytest.fixture(scope="module")
def embedded():
    # Every user may enter it (the runs as another uid read it all); files
    # are hard links to this Python's: only directories are ever chown'd or
    # chmod'ed below, never a file.
    base = Path(tempfile.mkdtemp(prefix="tsffi-home-", dir="/tmp"))
    base.chmod(0o755)
    try:
        made = Embedded(base)
        _copy_python(made)
        _build(made)
        yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_info(embedded: Embedded, libdir: Path | None = None, uid: int = 0) -> tuple[int, str]:
    """The host under env -i from /, its libpython found in `libdir` (the
    copy's by default), as `uid` (setpriv) when not root."""
    cmd = ["env", "-i", f"LD_LIBRARY_PATH={libdir or embedded.libdir}", str(embedded.host)]
    if uid:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv is missing: apt-get install util-linux (.ci/run does)"
        cmd = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    status, text = done.stdout.split("\n", 1)
    return int(status), text.strip()


def test_the_copy_answers_from_its_own_home(embedded):
    status, text = run_info(embedded)
    assert status == CODES["TSFFI_OK"], text
    info = json.loads(text)
    assert info["pythonHome"] == str(embedded.home)
    assert info["sysPath"] == [str(embedded.stdlib), str(embedded.dynload)]  # sealed: no site


# ----------------------------------------------------------------------
# The home, from the libpython loaded

def test_a_moved_python_is_found_from_the_loaded_libpython(embedded):
    """The copy renamed after the build (as `brew upgrade` moves a Cellar
    path): the home baked in at build time is gone, the libpython loaded
    knows where it is now."""
    moved = embedded.base / "python-upgraded"
    embedded.home.rename(moved)
    try:
        status, text = run_info(embedded, libdir=moved / embedded.libdir.relative_to(embedded.home))
        assert status == CODES["TSFFI_OK"], text
        info = json.loads(text)
        stdlib = moved / embedded.stdlib.relative_to(embedded.home)
        assert info["pythonHome"] == str(moved)
        assert info["sysPath"] == [str(stdlib), str(stdlib / "lib-dynload")]  # sealed: no site
    finally:
        moved.rename(embedded.home)


def test_a_python_replaced_by_another_x_y_is_a_runtime_error(embedded):
    """Moved, and its standard library is another X.Y's: nothing to start,
    so TSFFI_ERR_RUNTIME naming both places looked at."""
    moved = embedded.base / "python-replaced"
    embedded.home.rename(moved)
    stdlib = moved / embedded.stdlib.relative_to(embedded.home)
    other = stdlib.with_name("python9.99")
    stdlib.rename(other)
    try:
        libdir = moved / embedded.libdir.relative_to(embedded.home)
        status, text = run_info(embedded, libdir=libdir)
        assert status == CODES["TSFFI_ERR_RUNTIME"]
        loaded = os.path.realpath(libdir / sysconfig.get_config_var("INSTSONAME"))
        assert text == (
            f"the Python standard library is neither at {stdlib} (beside the libpython loaded "
            f"from {loaded}) nor at {embedded.stdlib} (this library was built against the Python "
            f"{VERSION} whose home was {embedded.home}); reinstall that Python or rebuild the "
            "library against the Python installed now")
    finally:
        other.rename(stdlib)
        moved.rename(embedded.home)


def _stand_in_libpython(embedded: Embedded, directory: Path, version: str) -> Path:
    """A library with libpython's soname that defines every Python symbol
    the library imports; Py_GetVersion says `version`, Py_IsInitialized 0,
    anything else aborts (it must never be reached)."""
    library = embedded.site / "turbospark_ffi" / "libtsffi.so"
    nm = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True,
                        text=True, check=True).stdout.split()
    names = sorted({n for n in nm if n.startswith(("Py", "_Py"))} - {"Py_GetVersion",
                                                                     "Py_IsInitialized"})
    source = directory / "stand_in.c"
    directory.mkdir(parents=True, exist_ok=True)
    source.write_text(
        "#include <stdlib.h>\n"
        f'const char *Py_GetVersion(void) {{ return "{version} (stand-in)"; }}\n'
        "int Py_IsInitialized(void) { return 0; }\n"
        + "".join(f"void {n}(void) {{ abort(); }}\n" for n in names))
    soname = sysconfig.get_config_var("INSTSONAME")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(directory / soname), str(source),
                    f"-Wl,-soname,{soname}"], check=True, capture_output=True)
    return directory / soname


def test_a_libpython_of_another_x_y_is_a_runtime_error(embedded, tmp_path):
    """A libpython that says it is 3.99 under the file name of this X.Y's."""
    directory = embedded.base / "other-libpython"
    try:
        fake = _stand_in_libpython(embedded, directory, "3.99.0")
        status, text = run_info(embedded, libdir=directory)
        assert status == CODES["TSFFI_ERR_RUNTIME"]
        assert text == (
            f"the libpython loaded into this process ({os.path.realpath(fake)}) is Python 3.99.0, "
            f"but this library was built for Python {VERSION} (whose home was {embedded.home}); "
            "rebuild the library against the Python installed now")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ----------------------------------------------------------------------
# Trusted directories

def _rule(directory: Path, uid: int, gid: int, mode: int, broken: str, euid: int) -> str:
    return (f"refusing to import Python code from {directory}: owner uid {uid}, group gid {gid}, "
            f"mode {mode:04o}: {broken} (this process runs as uid {euid}). A directory Python "
            "code is imported from must be owned by root or by that user, not writable by "
            f"everyone, and writable by its group only if the group is {PRIVILEGED}")


OWNER = "its owner is neither root nor the user this process runs as"
EVERYONE = "everyone may write to it"
GROUP = f"its group may write to it and is not {PRIVILEGED}"
ADMIN_GID = 80

# (which directory, owner uid, group gid, mode, the process's uid, the rule
# it breaks or None for accepted)
TRUST_CASES = [
    ("site", 0, 0, 0o755, 0, None),                   # root's, owner-writable only
    ("site", 0, 0, 0o775, 0, None),                   # group-writable, group root's
    ("site", OTHER_UID, 0, 0o755, 0, OWNER),          # another unprivileged user's
    ("site", 0, OTHER_GID, 0o775, 0, GROUP),          # group-writable, unprivileged group
    ("site", 0, ADMIN_GID, 0o775, 0,                  # admin: privileged on macOS only
     None if sys.platform == "darwin" else GROUP),
    ("site", 0, 0, 0o777, 0, EVERYONE),               # world-writable
    ("site", 0, 0, 0o1777, 0, EVERYONE),              # world-writable, sticky (like /tmp)
    ("site", OTHER_UID, OTHER_UID, 0o755, OTHER_UID, None),   # the process's own user's
    ("site", 0, 0, 0o755, OTHER_UID, None),           # root's, seen by another user
    ("site", THIRD_UID, THIRD_UID, 0o755, OTHER_UID, OWNER),  # a third user's
    ("stdlib", OTHER_UID, 0, 0o755, 0, OWNER),        # the standard library is covered
    ("dynload", 0, OTHER_GID, 0o775, 0, GROUP),       # and the extension modules
]


@pytest.mark.parametrize("which,uid,gid,mode,euid,broken", TRUST_CASES,
                         ids=[f"{c[0]}-{c[1]}:{c[2]}-{c[3]:04o}-as-{c[4]}" for c in TRUST_CASES])
def test_trusted_directories(embedded, which, uid, gid, mode, euid, broken):
    directory = {"site": embedded.site, "stdlib": embedded.stdlib,
                 "dynload": embedded.dynload}[which]
    os.chown(directory, uid, gid)
    directory.chmod(mode)
    try:
        status, text = run_info(embedded, uid=euid)
    finally:
        os.chown(directory, 0, 0)
        directory.chmod(0o755)
    if broken is None:
        assert status == CODES["TSFFI_OK"], text
    else:
        assert status == CODES["TSFFI_ERR_RUNTIME"]
        assert text == _rule(directory, uid, gid, mode, broken, euid)
