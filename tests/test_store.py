"""The store and every file the library reads (issue 32 items 1 and 6).

1. The one hardened reader (regular_file.py): what it refuses, in its words.
2. installed.json decoded as the engine decodes it (docs/c-api.md, "Model names",
   step 3): a table of store files, each rule with its answer written out,
   each fixture carrying a second alias that shows whether the whole file or
   only one row was dropped.
3. Through a C host: a FIFO, /dev/zero and an oversized file as the store
   answer at once with "no store" and a reason (tsffi_store_json); an
   unchanged store is read once however many alias calls follow.
4. One read per install at a time (snapshots.py's single flight): in Python
   with a reader that waits for every thread, and through the C ABI with 8
   host threads, counting the opens of model_weights.bin.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import types
from pathlib import Path

import pytest

from conftest import compile_c_host
from turbospark_ffi import model_names, snapshots, store
from turbospark_ffi.install_writer import write_install
from turbospark_ffi.regular_file import NotReadable, read_bounded

C_DIR = Path(__file__).resolve().parent / "c"
SECOND = 1_000_000_000


@pytest.fixture(autouse=True)
def fresh_caches():
    store.clear_cache()
    snapshots.clear_cache()
    yield
    store.clear_cache()
    snapshots.clear_cache()


# ---------------------------------------------------------------------------
# 1. The hardened reader.

def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _directory(path: Path) -> None:
    path.mkdir()


def _seventeen_bytes(path: Path) -> None:
    path.write_bytes(b"x" * 17)


def _sixteen_bytes(path: Path) -> None:
    path.write_bytes(b"x" * 16)


def _link_to_sixteen(path: Path) -> None:
    (path.parent / "target").write_bytes(b"y" * 16)
    path.symlink_to("target")


READER_CASES = [
    # id, make the file, the check, the text (None: read, with its bytes)
    ("fifo", _fifo, "not_regular_file", "is a FIFO, not a regular file"),
    ("dev-zero-by-symlink", _dev_zero, "not_regular_file",
     "is a character device, not a regular file"),
    ("directory", _directory, "not_regular_file", "is a directory, not a regular file"),
    ("one-byte-over", _seventeen_bytes, "too_large", "is 17 bytes; at most 16 bytes are read"),
    ("missing", lambda path: None, "open", "No such file or directory"),
    # The two that read: the bound is inclusive, and a symlink is followed.
    ("at-the-bound", _sixteen_bytes, None, b"x" * 16),
    ("symlink-to-a-file", _link_to_sixteen, None, b"y" * 16),
]


@pytest.mark.parametrize("case", READER_CASES, ids=[c[0] for c in READER_CASES])
def test_the_reader_refuses_what_it_cannot_bound(tmp_path, case):
    _id, make, check, expected = case
    path = tmp_path / "file"
    make(path)
    if check is None:
        data, info = read_bounded(str(path), 16)
        assert (data, info.st_size) == (expected, 16)
        return
    with pytest.raises(NotReadable) as caught:
        read_bounded(str(path), 16)
    assert (caught.value.check, caught.value.text) == (check, expected)


# ---------------------------------------------------------------------------
# 2. installed.json as the engine decodes it.
#
# Each file is JSON text in which A and B stand for two existing directories
# (x/a, x/b) and G for a missing one; R(...) is a complete row, its known keys
# in declaration order, then whatever else the case puts in it. Every file
# also records "qa" -> B in a row of its own, so a case whose "qm" finds no
# row shows whether the WHOLE file was dropped (qa finds nothing either) or
# only one row (qa still resolves): the fixture discriminates all-or-nothing
# from row-by-row.

_KNOWN = ('"repo": "r", "revision": "main", "family": "qwen", "install_bytes": 1, '
          '"installed_on": "2026-01-01", "status": "installed"')


def R(alias: str, path: str, extra: str = "") -> str:
    return '{"alias": "%s", "path": "%s", %s%s}' % (alias, path, _KNOWN, extra)


QA = R("qa", "B")


def F(*rows: str) -> str:
    """A file: the rows given, then QA."""
    return "[" + ", ".join(rows + (QA,)) + "]"


def _bytes_as(value: str) -> str:
    return R("qm", "A").replace('"install_bytes": 1', '"install_bytes": ' + value)


DECODE_FAILS = "does not decode as the engine's list of installs"
STORE_FILES = [
    # id, installed.json text, what "qm" resolves to, what "qa" does, the
    # store's reason fragment (None: read)
    ("one-row", F(R("qm", "A")), "x/a", "x/b", None),
    ("unknown-keys-ignored-and-repeated", F(R("qm", "A", ', "x": [1, {}], "x": null')), "x/a",
     "x/b", None),
    ("lone-surrogate-in-an-unknown-value", F(R("qm", "A", ', "note": "\\ud800"')), "x/a", "x/b",
     None),
    ("kind-null-is-text", F(R("qm", "A", ', "kind": null')), "x/a", "x/b", None),
    ("kind-text", F(R("qm", "A", ', "kind": "text"')), "x/a", "x/b", None),
    ("kind-Image-is-not-image", F(R("qm", "A", ', "kind": "Image"')), "x/a", "x/b", None),
    ("modality-text", F(R("qm", "A", ', "modality": "text"')), "x/a", "x/b", None),
    ("positional-row", F('["qm", "r", "main", "A", "qwen", 1, "2026-01-01", "installed"]'),
     "x/a", "x/b", None),
    ("later-row-wins", F(R("qm", "A"), R("qm", "B")), "x/b", "x/b", None),
    ("later-stale-row-skipped", F(R("qm", "A"), R("qm", "G")), "x/a", "x/b", None),
    # The row filter: only that row is skipped.
    ("kind-image-overrides-modality-text",
     F(R("qm", "A", ', "kind": "image", "modality": "text"')), "cwd/qm", "x/b", None),
    ("modality-image", F(R("qm", "A", ', "modality": "image"')), "cwd/qm", "x/b", None),
    ("modality-audio", F(R("qm", "A", ', "modality": "audio"')), "cwd/qm", "x/b", None),
    ("nul-in-path-skips-its-row", F(R("qm", "A"), R("qm", "A\\u0000")), "x/a", "x/b", None),
    ("stale-row", F(R("qm", "G")), "cwd/qm", "x/b", None),
    # All or nothing: the whole file is no rows.
    # serde_json's enum from a non-string, non-object: "expected value".
    ("modality-null", F(R("qm", "A", ', "modality": null')), "cwd/qm", "cwd/qa",
     "(expected value at line 1 column "),
    ("modality-Text", F(R("qm", "A", ', "modality": "Text"')), "cwd/qm", "cwd/qa",
     "unknown variant `Text`, expected one of `text`, `image`, `audio`"),
    ("duplicate-alias-key", F(R("qm", "A", ', "alias": "qm"')), "cwd/qm", "cwd/qa",
     "duplicate field `alias`"),
    ("lone-surrogate-in-alias", F(R("q\\ud800", "A")), "cwd/qm", "cwd/qa",
     "(unexpected end of hex escape at line 1 column 20)"),
    ("lone-trailing-surrogate-in-path", F(R("qm", "A\\udc00")), "cwd/qm", "cwd/qa",
     "lone leading surrogate in hex escape"),
    ("negative-install-bytes", F(_bytes_as("-1")), "cwd/qm", "cwd/qa",
     "invalid value: integer `-1`, expected u64"),
    ("fractional-install-bytes", F(_bytes_as("1.5")), "cwd/qm", "cwd/qa",
     "invalid type: floating point `1.5`, expected u64"),
    ("missing-repo", F(R("qm", "A").replace('"repo": "r", ', "")), "cwd/qm", "cwd/qa",
     "missing field `repo`"),
    ("a-row-not-an-object", "[" + QA + ', "qm"]', "cwd/qm", "cwd/qa",
     'invalid type: string "qm", expected struct InstalledModel'),
    ("not-an-array", QA, "cwd/qm", "cwd/qa", "invalid type: map, expected a sequence"),
    ("trailing-garbage", "[" + QA + "] x", "cwd/qm", "cwd/qa", "trailing characters"),
]


def _store_text(tmp: Path, text: str) -> str:
    for mark, rel in (("A", "x/a"), ("B", "x/b"), ("G", "x/gone")):
        text = text.replace(f'"{mark}', '"' + str(tmp / rel))
    return text


@pytest.mark.parametrize("case", STORE_FILES, ids=[c[0] for c in STORE_FILES])
def test_the_store_files_table(tmp_path, monkeypatch, case):
    _id, text, qm, qa, reason = case
    for rel in ("cwd", "x/a", "x/b", "S"):
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / "S" / "installed.json").write_text(_store_text(tmp_path, text), "utf-8")
    monkeypatch.setattr(model_names, "_getenv", {"TURBOSPARK_HOME": str(tmp_path / "S")}.get)
    monkeypatch.chdir(tmp_path / "cwd")
    assert model_names.resolve_model_name("qm") == str(tmp_path / qm)
    assert model_names.resolve_model_name("qa") == str(tmp_path / qa)
    read = store.read_store(str(tmp_path / "S"))
    if reason is None:
        assert (read.read, read.reason) == (True, None)
    else:
        assert read.read is False and read.rows == ()
        assert read.reason.startswith(f"{tmp_path}/S/installed.json {DECODE_FAILS} (")
        assert reason in read.reason, read.reason


def test_a_missing_absolute_directory_is_looked_up_in_the_store(tmp_path, monkeypatch):
    """The engine's rule consults the store for ANY name that is not an
    existing directory (c-api.md, "Model names": step 1, then step 3's exact match), an
    absolute one included: a row recorded under that absolute name counts.
    So the store is read for it -- bounded and non-blocking, which is what
    keeps a FIFO there harmless (test_a_store_the_engine_would_hang_on...)."""
    (tmp_path / "x").mkdir()
    missing = str(tmp_path / "gone" / "qm")
    (tmp_path / "S").mkdir()
    (tmp_path / "S" / "installed.json").write_text(
        "[" + R(missing, str(tmp_path / "x")) + "]", "utf-8")
    monkeypatch.setattr(model_names, "_getenv", {"TURBOSPARK_HOME": str(tmp_path / "S")}.get)
    assert model_names.resolve_model_name(missing) == str(tmp_path / "x")
    assert model_names.resolve_model_name(missing + "2") == missing + "2"


NOT_UTF8 = [
    ("not-utf8", b'[{"alias": "q\xff"}]',
     "S/installed.json is not UTF-8 (invalid byte 0xff at offset 13); the engine reads it as "
     "no installs"),
    ("utf8-encoded-surrogate", b'["\xed\xa0\x80"]',
     "S/installed.json is not UTF-8 (invalid byte 0xed at offset 2); the engine reads it as "
     "no installs"),
    ("missing", None, "S/installed.json cannot be read: No such file or directory"),
]


@pytest.mark.parametrize("case", NOT_UTF8, ids=[c[0] for c in NOT_UTF8])
def test_a_store_file_that_is_not_text(tmp_path, case):
    _id, data, reason = case
    (tmp_path / "S").mkdir()
    if data is not None:
        (tmp_path / "S" / "installed.json").write_bytes(data.decode("unicode_escape")
                                                        .encode("latin-1"))
    read = store.read_store(str(tmp_path / "S"))
    assert (read.read, read.reason, read.rows) == (
        False, reason.replace("S/", f"{tmp_path}/S/"), ())


def test_an_unchanged_store_is_decoded_once(tmp_path, monkeypatch, aged):
    """Per file identity: the same file, unchanged, is one decode however
    often it is asked; rewritten (a new identity), it is decoded again."""
    (tmp_path / "x").mkdir()
    root = tmp_path / "S"
    root.mkdir()
    path = root / "installed.json"
    path.write_text(f"[{R('qm', str(tmp_path / 'x'))}]")
    decodes = []
    real = store.read_store.__globals__["_decoded"]
    monkeypatch.setattr(store, "_decoded", lambda p, data: decodes.append(p) or real(p, data))
    for _ in range(5):
        assert store.recorded_path(str(root), "qm") == str(tmp_path / "x")
    assert len(decodes) == 1
    path.write_text(f"[{R('qm', str(tmp_path / 'x'))}, {R('qb', str(tmp_path / 'x'))}]")
    assert store.recorded_path(str(root), "qb") == str(tmp_path / "x")
    assert len(decodes) == 2


def test_a_store_modified_within_the_racy_window_is_decoded_each_time(tmp_path, monkeypatch):
    """The fixture of the test above without its aged clock: the file was
    written just now, so it is not remembered (a rewrite within one clock
    tick could keep its identity)."""
    (tmp_path / "x").mkdir()
    root = tmp_path / "S"
    root.mkdir()
    (root / "installed.json").write_text(f"[{R('qm', str(tmp_path / 'x'))}]")
    decodes = []
    real = store.read_store.__globals__["_decoded"]
    monkeypatch.setattr(store, "_decoded", lambda p, data: decodes.append(p) or real(p, data))
    for _ in range(5):
        assert store.recorded_path(str(root), "qm") == str(tmp_path / "x")
    assert len(decodes) == 5


# ---------------------------------------------------------------------------
# 3. Through a C host: the store as a FIFO, /dev/zero, an oversized file.

@pytest.fixture(scope="module")
def alias_host(tmp_path_factory) -> Path:
    return compile_c_host(C_DIR / "alias_host.c", tmp_path_factory.mktemp("alias_host") / "host")


@pytest.fixture(scope="module")
def open_counter(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("open_counter") / "libopen_counter.so"
    result = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
                             "-o", str(out), str(C_DIR / "open_counter.c"), "-ldl"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


def host_session(host: Path, cwd: Path, env: dict, commands: list[str]) -> tuple[list, str]:
    """Each command's answer line (a JSON answer decoded), and stderr. The
    timeout is a hang guard, not a measure: every answer here is immediate."""
    result = subprocess.run([str(host)], cwd=cwd, env=env, input="\n".join(commands) + "\n",
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    answers = []
    for line in result.stdout.splitlines():
        fn, status, text = line.split(" ", 2)
        assert status == "0", line
        answers.append(json.loads(text))
    return answers, result.stderr


def _oversized(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(store.MAX_STORE_BYTES + 1)  # sparse: no 1 MiB written


UNREADABLE_STORES = [
    # id, make installed.json, the reason tsffi_store_json gives (S: the store)
    ("fifo", _fifo, "S/installed.json is a FIFO, not a regular file; read as no store"),
    ("dev-zero", _dev_zero,
     "S/installed.json is a character device, not a regular file; read as no store"),
    ("over-1-mib", _oversized,
     "S/installed.json is 1048577 bytes; at most 1048576 bytes are read (the store's bound, "
     "far above any real store); read as no store"),
]


@pytest.mark.parametrize("case", UNREADABLE_STORES, ids=[c[0] for c in UNREADABLE_STORES])
def test_a_store_the_engine_would_hang_on_answers_at_once(alias_host, tmp_path, case):
    """A plan by alias, a drafter choice for a missing absolute directory
    (which the engine's rule also looks up in the store; a plan of it is the
    open's refusal of the name) and the listing all answer; the default
    install path still resolves, so the fixture shows resolution went on
    past the refused file."""
    _id, make, reason = case
    root = tmp_path / "S"
    default = write_install(root / "models" / "text" / "qm.gturbo", mtp=True)
    make(root / "installed.json")
    missing = tmp_path / "nowhere" / "qm"
    answers, _ = host_session(alias_host, tmp_path, {"TURBOSPARK_HOME": str(root)},
                              ["plan qm", f"drafter {missing}", "store"])
    plan, absolute, listing = answers
    assert plan["modelDir"] == str(default)
    assert plan["drafter"]["installHasMtpHead"] is True
    assert absolute["modelDir"] == str(missing)
    assert listing == {"root": str(root), "storeFile": str(root / "installed.json"),
                       "storeRead": False, "reason": reason.replace("S/", f"{root}/"),
                       "aliases": []}


def test_an_unchanged_store_is_read_once_by_a_c_host(alias_host, open_counter, tmp_path):
    """Ten alias plans and a listing on an unchanged store open installed.json
    once; rewritten (a new identity), it is opened once more -- the count of
    opens is what shows the file was re-read, and the answers that it was
    read right."""
    root = tmp_path / "S"
    a = write_install(tmp_path / "x" / "a", mtp=True)
    b = write_install(tmp_path / "x" / "b", dflash=True)
    root.mkdir()
    path = root / "installed.json"
    path.write_text("[" + R("qm", str(a)) + "]")
    _wait_until_aged([path])
    env = {"TURBOSPARK_HOME": str(root), "LD_PRELOAD": str(open_counter),
           "TSFFI_COUNT_OPENS_OF": "installed.json"}
    proc = subprocess.Popen([str(alias_host)], cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ask(line: str) -> dict:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        fn, status, text = proc.stdout.readline().rstrip("\n").split(" ", 2)
        assert status == "0", text
        return json.loads(text)

    try:
        for _ in range(10):
            assert ask("plan qm")["modelDir"] == str(a)
        assert [row["alias"] for row in ask("store")["aliases"]] == ["qm"]
        path.write_text("[" + R("qm", str(b)) + "]")
        _wait_until_aged([path])
        for _ in range(3):
            assert ask("plan qm")["drafter"]["installHasDflash"] is True
    finally:
        proc.stdin.close()
        stderr = proc.stderr.read()
        assert proc.wait(timeout=120) == 0
    assert stderr == "opens 2\n"


# ---------------------------------------------------------------------------
# 4. Single flight.

@pytest.fixture
def aged(monkeypatch):
    """A constant clock an hour ahead: files written now look an hour old."""
    fake_now = time.time_ns() + 3600 * SECOND
    monkeypatch.setattr(snapshots, "time", types.SimpleNamespace(time_ns=lambda: fake_now))
    monkeypatch.setattr(store, "time", types.SimpleNamespace(time_ns=lambda: fake_now))
    return fake_now


def _race(monkeypatch, model_dir: str, threads: int, shared: bool) -> int:
    """`threads` threads take the first snapshot of `model_dir` at once; the
    reader waits until every thread has come for the install (or 60 s, a
    guard), so without a single flight each of them would be inside it.
    Returns how many times the index was read."""
    reads = []
    boarded = []
    real_board, real_reader = snapshots._board, snapshots.load_resident_index

    def board(name):
        boarded.append(name)
        # shared=False: what the code did before -- nobody waits for anybody.
        return real_board(name) if shared else [threading.Lock(), 1]

    def reader(path):
        reads.append(path)
        deadline = time.monotonic() + 60
        while len(boarded) < threads and time.monotonic() < deadline:
            time.sleep(0.001)
        return real_reader(path)

    monkeypatch.setattr(snapshots, "_board", board)
    if not shared:
        monkeypatch.setattr(snapshots, "_land", lambda name, flight: None)
    monkeypatch.setattr(snapshots, "load_resident_index", reader)
    results = []
    workers = [threading.Thread(target=lambda: results.append(snapshots.snapshot(model_dir)))
               for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(results) == threads
    assert all(snap.index is not None for snap in results)
    return len(reads)


def test_concurrent_first_reads_of_one_install_share_one_read(tmp_path, monkeypatch, aged):
    d = str(write_install(tmp_path / "m", mtp=True))
    assert _race(monkeypatch, d, 8, shared=True) == 1


def test_the_race_fixture_discriminates(tmp_path, monkeypatch, aged):
    """Without the single flight, the same race reads the index 8 times."""
    d = str(write_install(tmp_path / "m", mtp=True))
    assert _race(monkeypatch, d, 8, shared=False) == 8


def _wait_until_aged(paths) -> None:
    """Until every file is older than the racy window (snapshots.py: a younger
    one is re-read on every call by design): a wait, not a measure."""
    newest = max(max(os.stat(p).st_mtime_ns, os.stat(p).st_ctime_ns) for p in paths)
    while time.time_ns() - newest <= 2 * snapshots.RACY_WINDOW_NS:
        time.sleep(0.02)


@pytest.fixture(scope="module")
def flight_host(tmp_path_factory) -> Path:
    return compile_c_host(C_DIR / "flight_host.c", tmp_path_factory.mktemp("flight") / "host")


@pytest.mark.parametrize("installs, opens", [(1, 1), (8, 8)], ids=["one-install", "eight"])
def test_eight_host_threads_read_an_install_once(flight_host, open_counter, tmp_path,
                                                 installs, opens):
    """8 threads' first plans: one install is opened once; 8 installs (one
    per thread) 8 times, which shows the counter counts every read."""
    # 100,000 entries: a read long enough (7 MB of entry table) for the
    # threads to meet inside it.
    dirs = [write_install(tmp_path / f"m{i}", mtp=True, extra_entries=100_000)
            for i in range(installs)]
    _wait_until_aged([d / "model_weights.bin" for d in dirs])
    env = {"LD_PRELOAD": str(open_counter), "TSFFI_COUNT_OPENS_OF": "model_weights.bin"}
    result = subprocess.run([str(flight_host), *map(str, dirs)], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:8] == ["plan 0"] * 8
    assert result.stderr == f"opens {opens}\n"


def _peak_rss_kib(flight_host, dirs) -> int:
    result = subprocess.run([str(flight_host), *map(str, dirs)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:8] == ["plan 0"] * 8 and lines[8].startswith("maxrss ")
    return int(lines[8].split()[1])


def test_one_install_under_eight_spellings_is_read_once(flight_host, open_counter, tmp_path):
    """Issue 40, item 7: 8 threads' first plans of ONE install, each under
    its own symlinked spelling. Single flight keyed by the name read it 8
    times (memory x6); keyed by the file's identity, and a snapshot of the
    very same files shared, it is opened once, and the process's peak RSS is
    that of one spelling's 8 threads (measured below against 8 distinct
    installs, which shows the measure sees one read per install)."""
    real = write_install(tmp_path / "real", mtp=True, extra_entries=100_000)
    spellings = []
    for i in range(8):
        link = tmp_path / f"spelling{i}"
        link.symlink_to(real if i % 2 else Path("real"))
        spellings.append(link)
    others = [write_install(tmp_path / f"m{i}", mtp=True, extra_entries=100_000)
              for i in range(8)]
    _wait_until_aged([d / "model_weights.bin" for d in [real, *others]])
    env = {"LD_PRELOAD": str(open_counter), "TSFFI_COUNT_OPENS_OF": "model_weights.bin"}
    result = subprocess.run([str(flight_host), *map(str, spellings)], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:8] == ["plan 0"] * 8
    assert result.stderr == "opens 1\n"
    one = _peak_rss_kib(flight_host, [real])
    eight_spellings = _peak_rss_kib(flight_host, spellings)
    eight_installs = _peak_rss_kib(flight_host, others)
    # One read of this index costs tens of MB (a 7 MB entry table and its
    # names, decoded); the measure must see it, and 8 spellings must cost
    # less than a quarter of what 7 more reads cost.
    assert eight_installs - one > 20_000, (one, eight_installs)
    assert eight_spellings - one < (eight_installs - one) / 4, (one, eight_spellings,
                                                               eight_installs)


# ---------------------------------------------------------------------------
# 5. One listing for every front end: the C ABI, the CLI's --json, its text.

def _c_store_json(lib) -> bytes:
    import ctypes
    out = ctypes.c_void_p()
    assert lib.tsffi_store_json(ctypes.byref(out)) == 0
    try:
        return ctypes.string_at(out.value)
    finally:
        lib.tsffi_string_free(out)


@pytest.fixture
def short_tmp():
    """A directory with a short path, so the report's rows fit 80 columns
    and its text can be written out."""
    import shutil
    import tempfile
    path = Path(tempfile.mkdtemp(prefix="ts", dir="/tmp"))
    yield path
    shutil.rmtree(path)


def test_the_listing_is_one_answer_for_the_c_abi_and_the_cli(loaded, short_tmp, monkeypatch):
    import sys
    from turbospark_ffi.install_writer import record_install
    tmp_path = short_tmp
    root = tmp_path / "S"
    mtp = write_install(tmp_path / "x" / "mtp", mtp=True)
    dflash = write_install(tmp_path / "x" / "dflash", dflash=True)
    record_install(root, "qm", mtp)
    record_install(root, "qd", dflash)
    record_install(root, "pictures", mtp, kind="image")  # not a text install: not listed
    record_install(root, "gone", tmp_path / "x" / "mtp")
    import shutil
    shutil.copytree(mtp, tmp_path / "x" / "gone")
    record_install(root, "gone", tmp_path / "x" / "gone")
    shutil.rmtree(tmp_path / "x" / "gone")             # a stale row: not listed
    monkeypatch.setenv("TURBOSPARK_HOME", str(root))
    monkeypatch.chdir(tmp_path)
    answer = _c_store_json(loaded.lib)
    assert json.loads(answer) == {
        "root": str(root), "storeFile": str(root / "installed.json"), "storeRead": True,
        "reason": None, "aliases": [
            {"alias": "qm", "path": str(mtp), "modelDir": str(mtp), "installHasMtpHead": True,
             "installHasDflash": False},
            {"alias": "qd", "path": str(dflash), "modelDir": str(dflash),
             "installHasMtpHead": False, "installHasDflash": True}]}
    # The checkout's package, whatever the working directory.
    env = {**os.environ, "TURBOSPARK_HOME": str(root), "NO_COLOR": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    cli = subprocess.run([sys.executable, "-m", "turbospark_ffi", "store", "--json"], env=env,
                         cwd=tmp_path, capture_output=True, timeout=120)
    assert (cli.returncode, cli.stdout, cli.stderr) == (0, answer + b"\n", b"")
    text = subprocess.run([sys.executable, "-m", "turbospark_ffi", "store"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (text.returncode, text.stderr) == (0, "")
    assert text.stdout.splitlines() == [
        f"store root        {root}",
        f"installed.json    read: {root / 'installed.json'}",
        f"qm                {mtp}",
        "                  MTP head yes, DFlash2 drafter no",
        f"qd                {dflash}",
        "                  MTP head no, DFlash2 drafter yes"]


def test_no_store_is_an_answer_with_its_reason(loaded, tmp_path, monkeypatch):
    monkeypatch.delenv("TURBOSPARK_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    assert json.loads(_c_store_json(loaded.lib)) == {
        "root": None, "storeFile": None, "storeRead": False,
        "reason": "no store: neither TURBOSPARK_HOME nor HOME is set, so a model name is only "
                  "a path", "aliases": []}
