"""The store and every file the library reads (issue 32 items 1 and 6).

1. The one hardened reader (regular_file.py): what it refuses, in its words.
2. installed.json decoded as the engine decodes it (docs/ENGINE.md section 8,
   step 3): a table of store files, each rule with its answer written out,
   each fixture carrying a second alias that shows whether the whole file or
   only one row was dropped.
3. Through a C host: a FIFO, /dev/zero and an oversized file as the store
   answer at once with "no store" and a reason (tsffi_store_json); an
   unchanged store is read once however many alias calls follow.
4. One read per install at a time (install.py's single flight): in Python
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
from turbospark_ffi import install, model_names, store
from turbospark_ffi.install_writer import write_install
from turbospark_ffi.regular_file import NotReadable, read_bounded

C_DIR = Path(__file__).resolve().parent / "c"
SECOND = 1_000_000_000


@pytest.fixture(autouse=True)
def fresh_caches():
    store.clear_cache()
    install.clear_cache()
    yield
    store.clear_cache()
    install.clear_cache()


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
        f.truncate(store.MAX_STORE_BYTES + 1)  # sparse: no 16 MiB written


UNREADABLE_STORES = [
    # id, make installed.json, the reason tsffi_store_json gives (S: the store)
    ("fifo", _fifo, "S/installed.json is a FIFO, not a regular file; read as no store"),
    ("dev-zero", _dev_zero,
     "S/installed.json is a character device, not a regular file; read as no store"),
    ("over-16-mib", _oversized,
     "S/installed.json is 16777217 bytes; at most 16777216 bytes are read (the store's bound, "
     "far above any real store); read as no store"),
]


@pytest.mark.parametrize("case", UNREADABLE_STORES, ids=[c[0] for c in UNREADABLE_STORES])
def test_a_store_the_engine_would_hang_on_answers_at_once(alias_host, tmp_path, case):
    """A plan by alias, a plan of a missing absolute directory (which the
    engine's rule also looks up in the store) and the listing all answer; the
    default install path still resolves, so the fixture shows resolution went
    on past the refused file."""
    _id, make, reason = case
    root = tmp_path / "S"
    default = write_install(root / "models" / "text" / "qm.gturbo", mtp=True)
    make(root / "installed.json")
    missing = tmp_path / "nowhere" / "qm"
    answers, _ = host_session(alias_host, tmp_path, {"TURBOSPARK_HOME": str(root)},
                              ["plan qm", f"plan {missing}", "store"])
    plan, absolute, listing = answers
    assert plan["modelDir"] == str(default)
    assert plan["drafter"]["installHasMtpHead"] is True
    assert absolute["modelDir"] == str(missing)
    assert listing == {"root": str(root), "storeFile": str(root / "installed.json"),
                       "storeRead": False, "reason": reason.replace("S/", f"{root}/"),
                       "aliases": []}


# ---------------------------------------------------------------------------
# 4. Single flight.

@pytest.fixture
def aged(monkeypatch):
    """A constant clock an hour ahead: files written now look an hour old."""
    fake_now = time.time_ns() + 3600 * SECOND
    monkeypatch.setattr(install, "time", types.SimpleNamespace(time_ns=lambda: fake_now))
    monkeypatch.setattr(store, "time", types.SimpleNamespace(time_ns=lambda: fake_now))
    return fake_now


def _race(monkeypatch, model_dir: str, threads: int, shared: bool) -> int:
    """`threads` threads take the first snapshot of `model_dir` at once; the
    reader waits until every thread has come for the install (or 60 s, a
    guard), so without a single flight each of them would be inside it.
    Returns how many times the index was read."""
    reads = []
    boarded = []
    real_board, real_reader = install._board, install.load_resident_index

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

    monkeypatch.setattr(install, "_board", board)
    if not shared:
        monkeypatch.setattr(install, "_land", lambda name, flight: None)
    monkeypatch.setattr(install, "load_resident_index", reader)
    results = []
    workers = [threading.Thread(target=lambda: results.append(install.snapshot(model_dir)))
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
    """Until every file is older than the racy window (install.py: a younger
    one is re-read on every call by design): a wait, not a measure."""
    newest = max(max(os.stat(p).st_mtime_ns, os.stat(p).st_ctime_ns) for p in paths)
    while time.time_ns() - newest <= 2 * install.RACY_WINDOW_NS:
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
    assert result.stdout == "plan 0\n" * 8
    assert result.stderr == f"opens {opens}\n"
