"""Model names, resolved as the engine's open resolves them (docs/ENGINE.md section 8):
every arm of the rule and their precedence in one table, in Python; then the
same through the C ABI from a host that changes its environment, its working
directory and the store's files between calls; then the one model_dir check
that every entry point makes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import compile_c_host
from turbospark_ffi import model_names
from turbospark_ffi.errors import InvalidArgument
from turbospark_ffi.install_writer import record_install, write_install

C_DIR = Path(__file__).resolve().parent / "c"


# ---------------------------------------------------------------------------
# The rule, arm by arm. Paths in a case are relative to the test's directory:
# "cwd" is the working directory, "S" a store named by $TURBOSPARK_HOME, "H"
# a home directory (its store is H/.turbospark), "x" somewhere else. A row's
# path is made absolute; "@p" as the name is the absolute path of p.

def _row(alias, path, **extra):
    return {"alias": alias, "repo": "r", "revision": "main", "path": path, "family": "qwen",
            "install_bytes": 1, "installed_on": "2026-01-01", "status": "installed", **extra}


TEXT = "S/models/text/qm.gturbo"
CASES = [
    # id, env, directories, files ({path: text}), name, the directory read
    # 1. an existing directory always wins, whatever its name
    ("dir-in-cwd-beats-default-path", {"TURBOSPARK_HOME": "S"}, ["cwd/qm", TEXT], {}, "qm",
     "cwd/qm"),
    ("dir-in-cwd-beats-row", {"TURBOSPARK_HOME": "S"}, ["cwd/qm", "x/a"],
     {"S/installed.json": [_row("qm", "x/a")]}, "qm", "cwd/qm"),
    ("absolute-dir", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT], {}, "@x/a", "x/a"),
    ("relative-dir-with-dot", {}, ["cwd/qm"], {}, "./qm", "cwd/qm"),
    # 2. the store root: $TURBOSPARK_HOME, else $HOME/.turbospark, else none
    ("no-store-name-unchanged", {}, [TEXT, "H/.turbospark/models/text/qm.gturbo"], {}, "qm",
     "cwd/qm"),
    ("missing-home", {"TURBOSPARK_HOME": None, "HOME": None}, [TEXT], {}, "qm", "cwd/qm"),
    ("home-store", {"HOME": "H"}, ["H/.turbospark/models/text/qm.gturbo"], {}, "qm",
     "H/.turbospark/models/text/qm.gturbo"),
    ("turbospark-home-beats-home", {"TURBOSPARK_HOME": "S", "HOME": "H"},
     [TEXT, "H/.turbospark/models/text/qm.gturbo"], {}, "qm", TEXT),
    # Set but empty counts as set (the engine's rule): an empty
    # $TURBOSPARK_HOME is the current directory, never a fall-back to $HOME.
    ("empty-turbospark-home-is-the-cwd", {"TURBOSPARK_HOME": "", "HOME": "H"},
     [TEXT, "H/.turbospark/models/text/qm.gturbo", "cwd/models/text/qm.gturbo"], {}, "qm",
     "cwd/models/text/qm.gturbo"),
    ("empty-turbospark-home-reads-the-cwds-store", {"TURBOSPARK_HOME": ""}, ["x/a"],
     {"cwd/installed.json": [_row("qm", "x/a")]}, "qm", "x/a"),
    ("empty-home-is-dot-turbospark-in-the-cwd", {"HOME": ""},
     ["cwd/.turbospark/models/text/qm.gturbo"], {}, "qm",
     "cwd/.turbospark/models/text/qm.gturbo"),
    # 3. installed.json: text rows whose path is an existing directory
    ("row", {"TURBOSPARK_HOME": "S"}, ["x/a"], {"S/installed.json": [_row("qm", "x/a")]},
     "qm", "x/a"),
    ("row-beats-default-path", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": [_row("qm", "x/a")]}, "qm", "x/a"),
    ("row-modality-text", {"TURBOSPARK_HOME": "S"}, ["x/a"],
     {"S/installed.json": [_row("qm", "x/a", modality="text")]}, "qm", "x/a"),
    # modality null fails the engine's typed decode: the whole file is no rows.
    ("row-modality-null-empties-the-store", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": [_row("qm", "x/a", modality=None)]}, "qm", TEXT),
    ("row-kind-text", {"TURBOSPARK_HOME": "S"}, ["x/a"],
     {"S/installed.json": [_row("qm", "x/a", kind="text")]}, "qm", "x/a"),
    ("image-row-ignored", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": [_row("qm", "x/a", modality="image")]}, "qm", TEXT),
    ("image-kind-row-ignored", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": [_row("qm", "x/a", kind="image", modality="text")]}, "qm", TEXT),
    ("audio-row-ignored", {"TURBOSPARK_HOME": "S"}, ["x/a"],
     {"S/installed.json": [_row("qm", "x/a", modality="audio")]}, "qm", "cwd/qm"),
    ("image-row-then-text-row", {"TURBOSPARK_HOME": "S"}, ["x/a", "x/b"],
     {"S/installed.json": [_row("qm", "x/a", modality="image"), _row("qm", "x/b")]}, "qm",
     "x/b"),
    ("stale-row-then-valid-row", {"TURBOSPARK_HOME": "S"}, ["x/b"],
     {"S/installed.json": [_row("qm", "x/gone"), _row("qm", "x/b")]}, "qm", "x/b"),
    ("stale-row-falls-to-default-path", {"TURBOSPARK_HOME": "S"}, [TEXT],
     {"S/installed.json": [_row("qm", "x/gone")]}, "qm", TEXT),
    ("row-path-is-a-file", {"TURBOSPARK_HOME": "S"}, [TEXT],
     {"S/installed.json": [_row("qm", "x/file")], "x/file": "not a directory"}, "qm", TEXT),
    ("last-counting-row-wins", {"TURBOSPARK_HOME": "S"}, ["x/a", "x/b"],
     {"S/installed.json": [_row("qm", "x/a"), _row("qm", "x/b")]}, "qm", "x/b"),
    ("valid-row-then-stale-row", {"TURBOSPARK_HOME": "S"}, ["x/a"],
     {"S/installed.json": [_row("qm", "x/a"), _row("qm", "x/gone")]}, "qm", "x/a"),
    ("other-alias-row-ignored", {"TURBOSPARK_HOME": "S"}, ["x/a"],
     {"S/installed.json": [_row("qx", "x/a")]}, "qm", "cwd/qm"),
    ("alias-is-case-sensitive", {"TURBOSPARK_HOME": "S"}, ["x/a"],
     {"S/installed.json": [_row("QM", "x/a")]}, "qm", "cwd/qm"),
    # A missing or unparsable installed.json is an empty store, never an error.
    ("corrupt-installed-json", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": '[{"alias": "qm", "path": '}, "qm", TEXT),
    ("installed-json-not-an-array", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": _row("qm", "x/a")}, "qm", TEXT),
    ("installed-json-a-row-not-an-object", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": [_row("qm", "x/a"), "qm"]}, "qm", TEXT),
    ("installed-json-a-row-without-path", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": [_row("qm", "x/a"), {"alias": "qm"}]}, "qm", TEXT),
    ("installed-json-modality-not-a-string", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": [_row("qm", "x/a", modality=3)]}, "qm", TEXT),
    ("installed-json-not-utf8", {"TURBOSPARK_HOME": "S"}, ["x/a", TEXT],
     {"S/installed.json": b'[{"alias": "qm\xff", "path": "x"}]'}, "qm", TEXT),
    ("installed-json-empty", {"TURBOSPARK_HOME": "S"}, [TEXT], {"S/installed.json": ""}, "qm",
     TEXT),
    ("installed-json-is-a-directory", {"TURBOSPARK_HOME": "S"}, ["S/installed.json", TEXT], {},
     "qm", TEXT),
    # 4. the default install paths, in order
    ("text-gturbo-beats-text-vision", {"TURBOSPARK_HOME": "S"},
     [TEXT, "S/models/text/qm.gturbo-vision", "S/models/qm.gturbo"], {}, "qm", TEXT),
    ("text-vision", {"TURBOSPARK_HOME": "S"},
     ["S/models/text/qm.gturbo-vision", "S/models/qm.gturbo"], {}, "qm",
     "S/models/text/qm.gturbo-vision"),
    ("legacy-gturbo", {"TURBOSPARK_HOME": "S"},
     ["S/models/qm.gturbo", "S/models/qm.gturbo-vision"], {}, "qm", "S/models/qm.gturbo"),
    ("legacy-vision", {"TURBOSPARK_HOME": "S"}, ["S/models/qm.gturbo-vision"], {}, "qm",
     "S/models/qm.gturbo-vision"),
    ("default-path-that-is-a-file-skipped", {"TURBOSPARK_HOME": "S"}, ["S/models/qm.gturbo"],
     {TEXT: "a file"}, "qm", "S/models/qm.gturbo"),
    # 5. otherwise the name itself
    ("unknown-name-with-a-store", {"TURBOSPARK_HOME": "S"}, [TEXT], {}, "qx", "cwd/qx"),
    ("unknown-absolute-path", {"TURBOSPARK_HOME": "S"}, [], {}, "@x/none", "x/none"),
    # The engine's join: an absolute name replaces the root in a default path.
    ("absolute-name-default-path", {"TURBOSPARK_HOME": "S"},
     ["x/none.gturbo", "S/models/text/x/none.gturbo"], {}, "@x/none", "x/none.gturbo"),
    ("name-with-a-slash-stays-under-the-root", {"TURBOSPARK_HOME": "S"},
     ["S/models/text/x/none.gturbo"], {}, "x/none", "S/models/text/x/none.gturbo"),
]


def build(tmp: Path, dirs, files) -> None:
    (tmp / "cwd").mkdir()
    for d in dirs:
        (tmp / d).mkdir(parents=True)
    for rel, content in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content)
        else:  # rows: their paths made absolute
            def absolute(row):
                return {**row, "path": str(tmp / row["path"])} if isinstance(row, dict) \
                    and isinstance(row.get("path"), str) else row
            rows = [absolute(r) for r in content] if isinstance(content, list) \
                else absolute(content)
            path.write_text(json.dumps(rows))


def environment(tmp: Path, env: dict) -> dict:
    return {key: (str(tmp / value) if value else value) for key, value in env.items()
            if value is not None}


@pytest.fixture
def live_env(monkeypatch):
    """The resolver's environment reader, pointed at a dict the test edits."""
    values: dict = {}
    monkeypatch.setattr(model_names, "_getenv", values.get)
    return values


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_rule(tmp_path, monkeypatch, live_env, case):
    _, env, dirs, files, name, reads = case
    build(tmp_path, dirs, files)
    live_env.update(environment(tmp_path, env))
    monkeypatch.chdir(tmp_path / "cwd")
    if name.startswith("@"):
        name = str(tmp_path / name[1:])
    assert model_names.resolve_model_name(name) == str(tmp_path / reads)


def test_the_environment_is_read_at_each_resolution(tmp_path, monkeypatch, live_env):
    build(tmp_path, ["S/models/text/qm.gturbo", "H/.turbospark/models/qm.gturbo"], {})
    monkeypatch.chdir(tmp_path / "cwd")
    assert model_names.resolve_model_name("qm") == str(tmp_path / "cwd/qm")
    live_env["HOME"] = str(tmp_path / "H")
    assert model_names.resolve_model_name("qm") == str(tmp_path / "H/.turbospark/models/qm.gturbo")
    live_env["TURBOSPARK_HOME"] = str(tmp_path / "S")
    assert model_names.resolve_model_name("qm") == str(tmp_path / TEXT)
    del live_env["TURBOSPARK_HOME"], live_env["HOME"]
    assert model_names.resolve_model_name("qm") == str(tmp_path / "cwd/qm")


def removed_cwd_message(path: str, what: str = "model_dir") -> str:
    return (f"{what} resolves to the relative path \"{path}\", and the working directory it is "
            "relative to was removed (No such file or directory): a result names the directory "
            "it read by its absolute path, and this one has none; accepts an absolute path (or "
            "a relative one while the working directory exists)")


@pytest.mark.parametrize("name, shown", [("qm", "qm"), (".", "."), ("./mtp", "./mtp"),
                                         ("a/../b", "a/../b")])
def test_a_removed_working_directory_refuses_a_relative_name(tmp_path, monkeypatch, live_env,
                                                             name, shown):
    """Issue 40, item 8: the name came back as given ("modelDir": "mtp" or
    "."), where a result promises an absolute path. `.` is still a
    directory then (the removed one), and still has no name."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(InvalidArgument) as info:
        model_names.resolve_model_name(name)
    assert str(info.value) == removed_cwd_message(shown)
    assert info.value.status == 1
    # An absolute name is its own answer, working directory or not.
    assert model_names.resolve_model_name(str(tmp_path)) == str(tmp_path)


def test_python_entry_points_resolve_aliases(tmp_path, monkeypatch, live_env):
    from turbospark_ffi.api import speculation_plan
    from turbospark_ffi.api import install_info
    from turbospark_ffi.plan import request
    from turbospark_ffi.policy import SpeculativeDrafter, resolve_drafter
    from turbospark_ffi.wire import plan_to_dict
    store = tmp_path / "S"
    mtp = write_install(tmp_path / "x" / "mtp", mtp=True)
    record_install(store, "qm", mtp)
    live_env["TURBOSPARK_HOME"] = str(store)
    monkeypatch.chdir(tmp_path)
    assert plan_to_dict(speculation_plan("qm"))["modelDir"] == str(mtp)
    assert install_info("qm")["modelDir"] == str(mtp)
    assert request("qm").drafter_choice().install_has_mtp_head is True
    assert request(b"qm").drafter_choice().install_has_mtp_head is True
    index = request("qm").snapshot.index
    assert resolve_drafter(SpeculativeDrafter.MTP, index).install_has_mtp_head
    del live_env["TURBOSPARK_HOME"]
    assert request("qm").drafter_choice().install_has_mtp_head is None


# ---------------------------------------------------------------------------
# The one model_dir check, at every entry point: the same outcome for the same
# argument, from Python (str, bytes, os.PathLike) and through the C ABI.

NOT_UTF8 = ("model_dir is not UTF-8 (invalid byte 0xff at offset 5); accepts UTF-8 text")
ARGUMENTS = [
    ("empty-str", "", "model_dir is empty; accepts the path of an install directory or an "
                      "installed alias (an empty path is not read as the current directory)"),
    ("empty-bytes", b"", "model_dir is empty; accepts the path of an install directory or an "
                         "installed alias (an empty path is not read as the current directory)"),
    # Path("") is Path("."): pathlib has already made it the working directory.
    ("empty-pathlike", Path(""), None),
    ("nul-str", "/tmp/a\x00b", "model_dir contains a NUL character (at offset 6); accepts a "
                               "path or an alias without NUL characters"),
    ("nul-bytes", b"/tmp/a\x00b", "model_dir contains a NUL character (at offset 6); accepts a "
                                  "path or an alias without NUL characters"),
    ("not-utf8-bytes", b"/tmp/\xff", NOT_UTF8),
    ("not-utf8-surrogate-str", os.fsdecode(b"/tmp/\xff"), NOT_UTF8),
    ("lone-surrogate", "/tmp/\ud800", "model_dir is not UTF-8 (a lone surrogate U+D800 at "
                                      "offset 5); accepts UTF-8 text"),
]


def _entry_points():
    from turbospark_ffi.api import speculation_plan
    from turbospark_ffi.api import install_info
    from turbospark_ffi.plan import request
    return {"speculation_plan": speculation_plan, "install_info": install_info,
            "request": request, "check_model_dir": model_names.check_model_dir}


@pytest.mark.parametrize("entry", sorted(_entry_points()))
@pytest.mark.parametrize("label, argument, message", ARGUMENTS, ids=[a[0] for a in ARGUMENTS])
def test_every_python_entry_point_checks_model_dir_alike(tmp_path, monkeypatch, entry, label,
                                                         argument, message):
    monkeypatch.chdir(tmp_path)
    call = _entry_points()[entry]
    if message is None:
        # Accepted as a model_dir: the working directory, which holds no
        # install, so a plan is the open's refusal of it (not an argument
        # error).
        from turbospark_ffi.errors import OpenRefused
        try:
            call(argument)
        except OpenRefused as exc:
            assert entry == "speculation_plan" and exc.stage == "manifest", exc
        return
    with pytest.raises(InvalidArgument) as info:
        call(argument)
    assert str(info.value) == message


@pytest.mark.parametrize("entry", sorted(_entry_points()))
def test_a_non_path_is_a_type_error(entry):
    with pytest.raises(TypeError, match="expected str, bytes or os.PathLike object"):
        _entry_points()[entry](3)


C_ARGUMENTS = [a for a in ARGUMENTS if isinstance(a[1], bytes) and b"\x00" not in a[1]]


@pytest.mark.parametrize("fn", ["speculation_plan", "resolve_drafter", "install_info"])
@pytest.mark.parametrize("label, argument, message", C_ARGUMENTS,
                         ids=[a[0] for a in C_ARGUMENTS])
def test_the_c_abi_checks_model_dir_alike(loaded, fn, label, argument, message):
    import ctypes
    lib = loaded.lib
    out = ctypes.c_void_p()
    args = {"speculation_plan": (argument, b"{}"), "resolve_drafter": (argument, None),
            "install_info": (argument,)}[fn]
    status = getattr(lib, {"install_info": "tsffi_install_info_json"}.get(fn, "tsffi_" + fn))(
        *args, ctypes.byref(out))
    n = lib.tsffi_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.tsffi_last_error(buf, n + 1)
    assert (status, out.value, buf.value.decode()) == (1, None, message)


# ---------------------------------------------------------------------------
# Through the C ABI: a host whose environment is what it was at its first call
# (a setenv() after it is not seen: tsffi_getenv says why), that chdir()s,
# and whose store is rewritten between two calls.

@pytest.fixture(scope="module")
def alias_host(tmp_path_factory) -> Path:
    return compile_c_host(C_DIR / "alias_host.c", tmp_path_factory.mktemp("alias_host") / "host")


class Host:
    def __init__(self, exe: Path, cwd: Path, env: dict | None = None) -> None:
        # By default no environment at all: neither $TURBOSPARK_HOME nor $HOME.
        self.proc = subprocess.Popen([str(exe)], cwd=cwd, env=env or {}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def say(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().rstrip("\n")

    def call(self, fn: str, name: str) -> dict:
        answer = self.say(f"{fn} {name}")
        got_fn, status, text = answer.split(" ", 2)
        assert (got_fn, status) == (fn, "0"), answer
        return json.loads(text)

    def read(self, name: str) -> str:
        """The directory each function says it read (they agree); where the
        name resolves to no directory, the plan is the open's refusal of
        the name as given."""
        dirs = {fn: self.call(fn, name)["modelDir"] for fn in ("drafter", "info")}
        assert len(set(dirs.values())) == 1, dirs
        answer = self.say(f"plan {name}")
        got_fn, status, text = answer.split(" ", 2)
        if status == "0":
            assert json.loads(text)["modelDir"] == dirs["drafter"], answer
        else:
            assert (got_fn, status, text) == (
                "plan", "2", f"{name} is not a directory (and matched no installed alias)")
            assert not os.path.isdir(dirs["drafter"]), answer
        return dirs["drafter"]

    def close(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def test_a_c_host_sees_every_change_on_its_next_call(alias_host, tmp_path):
    store, home, work = tmp_path / "S", tmp_path / "H", tmp_path / "work"
    work.mkdir()
    default = write_install(store / "models" / "text" / "qm.gturbo", mtp=True)
    dflash = write_install(tmp_path / "x" / "dflash", dflash=True)
    both = write_install(tmp_path / "x" / "both", mtp=True, dflash=True)
    in_home = write_install(home / ".turbospark" / "models" / "qm.gturbo-vision")
    host = Host(alias_host, work, {"TURBOSPARK_HOME": str(store)})
    try:
        # The store the environment named at the first call.
        assert host.read("qm") == str(default)
        assert host.call("drafter", "qm")["installHasMtpHead"] is True
        # The alias recorded, then re-pointed: each seen on the next call.
        record_install(store, "qm", dflash)
        assert host.read("qm") == str(dflash)
        assert host.call("plan", "qm")["drafter"]["installHasDflash"] is True
        record_install(store, "qm", both)
        assert host.read("qm") == str(both)
        # A stale row (its install removed) falls back to the default path.
        shutil.rmtree(both)
        assert host.read("qm") == str(default)
        record_install(store, "qm", dflash)
        assert host.read("qm") == str(dflash)
        # A corrupt installed.json is an empty store, never an error.
        (store / "installed.json").write_text("[{")
        assert host.read("qm") == str(default)
        # An image row is not a text install.
        (store / "installed.json").write_text(json.dumps([_row("qm", str(dflash),
                                                               modality="image")]))
        assert host.read("qm") == str(default)
        # A directory named like the alias in the working directory wins...
        local = write_install(work / "qm", dflash=True, mtp=True)
        assert host.read("qm") == str(local)
        # ... and so does the working directory the host moved to.
        other = tmp_path / "other"
        other.mkdir()
        assert host.say(f"chdir {other}") == "ok"
        assert host.read("qm") == str(default)
        assert host.say(f"chdir {work}") == "ok"
        shutil.rmtree(local)
        assert host.read("qm") == str(default)
        # A setenv() or unsetenv() after the first call changes nothing: the
        # library copied both variables then.
        assert host.say("unsetenv TURBOSPARK_HOME") == "ok"
        assert host.say(f"setenv HOME {home}") == "ok"
        assert host.read("qm") == str(default)
        # An absolute install path is read as itself throughout.
        assert host.read(str(dflash)) == str(dflash)
    finally:
        host.close()


@pytest.mark.parametrize("env, expected", [
    ({}, "work/qm"),  # neither variable: the name as a path, unread
    ({"HOME": "H"}, "H/.turbospark/models/qm.gturbo-vision"),
    ({"HOME": "H", "TURBOSPARK_HOME": "S"}, "S/models/text/qm.gturbo"),
])
def test_a_c_host_s_store_is_named_by_its_environment_at_its_first_call(alias_host, tmp_path,
                                                                        env, expected):
    work = tmp_path / "work"
    work.mkdir()
    write_install(tmp_path / "S" / "models" / "text" / "qm.gturbo", mtp=True)
    write_install(tmp_path / "H" / ".turbospark" / "models" / "qm.gturbo-vision")
    host = Host(alias_host, work, {k: str(tmp_path / v) for k, v in env.items()})
    try:
        assert host.read("qm") == str(tmp_path / expected)
        # Set after the first call: not seen.
        assert host.say(f"setenv TURBOSPARK_HOME {tmp_path / 'S'}") == "ok"
        assert host.read("qm") == str(tmp_path / expected)
    finally:
        host.close()
    # Set before the first call (after the library was loaded: it is
    # linked): seen, as a sandboxed app setting TURBOSPARK_HOME needs.
    host = Host(alias_host, work, {k: str(tmp_path / v) for k, v in env.items()})
    try:
        assert host.say(f"setenv TURBOSPARK_HOME {tmp_path / 'S'}") == "ok"
        assert host.read("qm") == str(tmp_path / "S/models/text/qm.gturbo")
    finally:
        host.close()


@pytest.fixture(scope="module")
def setenv_race(tmp_path_factory) -> Path:
    return compile_c_host(C_DIR / "setenv_race.c",
                          tmp_path_factory.mktemp("setenv_race") / "setenv_race")


@pytest.mark.parametrize("run", range(3))
def test_a_host_setenv_racing_alias_plans_cannot_crash_it(setenv_race, tmp_path, run):
    """Issue 40, item 2: from the worker's first answer on, the main thread
    setenv()s new names, clears the environment now and then (glibc frees
    its array) and flips TURBOSPARK_HOME, while the worker plans an alias
    20,000 times. Before: SIGSEGV in getenv (3 of 3 runs of the issue's host;
    3 of 5 of this one against d055cb0's library). Every answer is the store
    named at the first call. The timeout is the watchdog."""
    store = tmp_path / "store"
    install = write_install(store / "models" / "text" / "qm.gturbo", mtp=True)
    done = subprocess.run([str(setenv_race), "qm", "20000"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={"TURBOSPARK_HOME": str(store)})
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [f"20000 x 0 {install}", "setenv calls: some"]


def test_a_c_host_with_a_removed_working_directory(alias_host, tmp_path):
    """With the working directory gone, a relative name (`.` too) has no
    absolute path: status 1 (TSFFI_ERR_INVALID_ARGUMENT) saying so, from
    every function that resolves a name; an absolute one still answers."""
    work = tmp_path / "work"
    work.mkdir()
    mtp = write_install(tmp_path / "mtp", mtp=True)
    host = Host(alias_host, work)
    try:
        assert host.read("qm") == str(work / "qm")
        work.rmdir()
        for fn in ("plan", "drafter", "info"):
            for name in ("qm", "."):
                assert host.say(f"{fn} {name}") == f"{fn} 1 {removed_cwd_message(name)}"
        assert host.read(str(mtp)) == str(mtp)
    finally:
        host.close()


NOT_UTF8 = b"caf\xe9"


def not_utf8_message(path: bytes, offset: int, what: str = "model_dir") -> str:
    shown = path.decode("utf-8", "backslashreplace")
    return (f"{what} resolves to {shown}, which is not UTF-8 (invalid byte 0xe9 at offset "
            f"{offset}; shown escaped): results name the directory read in UTF-8, so the library "
            "cannot name this one; the bytes come from the working directory, $TURBOSPARK_HOME "
            "or $HOME: use ones whose paths are UTF-8")


@pytest.mark.parametrize("where", ["cwd", "TURBOSPARK_HOME", "HOME"])
def test_a_path_that_is_not_utf8_is_refused_not_passed_through(alias_host, tmp_path, where):
    """Issue 40, item 6: bytes that are not UTF-8 in the working directory,
    $TURBOSPARK_HOME or $HOME came back as lone surrogates in "modelDir" and
    "storeFile", and Swift's decoders refuse such a result whole. Now every
    line the host prints is UTF-8 (Host reads it as strict UTF-8 text): a
    plan whose directory would hold such bytes is status 1 saying which
    byte, and the store listing says why it lists nothing."""
    base = os.fsencode(tmp_path)
    odd = base + b"/" + NOT_UTF8
    os.mkdir(odd)
    work, env = tmp_path, {}
    if where == "cwd":
        work = Path(os.fsdecode(odd))
        named, offset, expected_store = odd + b"/qm", len(base) + 4, None
    else:
        store = odd if where == "TURBOSPARK_HOME" else odd + b"/.turbospark"
        os.makedirs(store + b"/models/text/qm.gturbo", exist_ok=True)
        env = {where: os.fsdecode(odd)}
        named, offset = store + b"/models/text/qm.gturbo", len(base) + 4
        expected_store = store + b"/installed.json"
    host = Host(alias_host, work, env)
    try:
        for fn in ("plan", "drafter", "info"):
            assert host.say(f"{fn} qm") == f"{fn} 1 {not_utf8_message(named, offset)}"
        listing = host.say("store")
        fn, status, text = listing.split(" ", 2)
        assert (fn, status) == ("store", "0")
        if expected_store is None:  # no store at all: HOME and TURBOSPARK_HOME unset
            assert json.loads(text)["storeFile"] is None
        else:
            assert json.loads(text) == {
                "root": None, "storeFile": None, "storeRead": False, "aliases": [],
                "reason": "no store listing: " + not_utf8_message(
                    expected_store, offset, "the store's installed.json")}
    finally:
        host.close()

