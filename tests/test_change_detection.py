"""The change-detection promise, exactly (include/tsffi.h on
tsffi_speculation_plan and tsffi_speculation_choices, docs/reliability.md):
an answer is remembered with what stat() said of the install's two files
(model_weights.bin, packed_experts/layout.json) -- whether stat succeeded,
device, inode, size, mtime, ctime, mode -- and a change that moves any of
them is seen on the next call; a change to the bytes that moves none of them
is not.

The change is the same in every case: `mtp.fc.weight`, the MTP head's presence
test, renamed in place to `mtp.fc.weighX` (same size, the index still reads),
so the fresh answer is the engine's missing-head text and the stale one is
"speculating, drafted by the MTP head". How it is written decides whether
stat() shows it:

* write(2): the kernel sets mtime and ctime, always (the file was aged first,
  so "now" differs from what was remembered) -- seen.
* a store through a MAP_SHARED mapping into a page that was already dirty in
  that mapping: no page fault, so the kernel updates no time (Linux updates
  them on the write fault of a clean page; measured here: every field the
  same) -- NOT seen, the remembered answer is given.
* a store through a fresh mapping into a clean page: whether the times move
  depends on the kernel and the filesystem, so the test asserts only that the
  answer follows stat().

Files written moments ago are never trusted (the racy window), so, as in
test_c_warm_cache.py, the package's clock is moved an hour ahead, and each
case first shows the answer WAS remembered by the C warm path.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os

import pytest

from conftest import declare
from engine_texts import blocker
from turbospark_ffi.install_writer import write_install
from turbospark_ffi.resident_index import install_has_mtp_head, load_resident_index

OLD_NS = 10**18  # 2001: a time a fresh write can never set
NAME, RENAMED = b"mtp.fc.weight", b"mtp.fc.weighX"


@pytest.fixture(scope="module")
def lib(library_path):
    return declare(ctypes.CDLL(str(library_path)))


def plan(lib, model_dir) -> dict:
    out = ctypes.c_void_p()
    status = lib.tsffi_speculation_plan(str(model_dir).encode(), b"{}", ctypes.byref(out))
    assert status == 0
    text = ctypes.string_at(out.value).decode()
    lib.tsffi_string_free(out)
    return json.loads(text)["speculation"]


def remembered(lib, model_dir, monkeypatch) -> bool:
    """True when the C warm path answers without reaching Python."""
    from turbospark_ffi import _abi
    fn = _abi._lib.TSFFI__FN_SPECULATION_PLAN
    calls, original = [], _abi._handlers[fn]

    def spy(a, b):
        calls.append(a)
        return original(a, b)
    monkeypatch.setitem(_abi._handlers, fn, spy)
    plan(lib, model_dir)
    monkeypatch.setitem(_abi._handlers, fn, original)
    return not calls


def stat_key(model_dir) -> tuple:
    """Every field the library compares, of both files (None: stat failed)."""
    out = []
    for leaf in ("model_weights.bin", "packed_experts/layout.json"):
        try:
            s = os.stat(os.path.join(model_dir, leaf))
        except OSError as exc:
            out.append(("failed", exc.errno))
            continue
        out.append((s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_mode))
    return tuple(out)


ON = {"block": 2, "drafter": "mtp", "reason": None}
FRESH = {"block": None, "drafter": None, "reason": blocker("mtp", "no-drafter")}


class Install:
    """An install with an MTP head whose weights file is aged and mapped."""

    def __init__(self, path) -> None:
        self.dir = write_install(path, mtp=True, layers=8)
        self.weights = self.dir / "model_weights.bin"
        self.at = self.weights.read_bytes().index(NAME)
        self.fd = os.open(self.weights, os.O_RDWR)
        self.map = None

    def mapped(self) -> mmap.mmap:
        if self.map is None:
            self.map = mmap.mmap(self.fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        return self.map

    def age(self) -> None:
        os.utime(self.weights, ns=(OLD_NS, OLD_NS))

    def rename_by_write(self) -> None:
        os.pwrite(self.fd, RENAMED, self.at)

    def rename_through_map(self) -> None:
        self.mapped()[self.at:self.at + len(RENAMED)] = RENAMED

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
        os.close(self.fd)

    def has_head_now(self) -> bool:
        """What the file says, read afresh (no cache is asked)."""
        return install_has_mtp_head(load_resident_index(self.weights))


def _change(lib, monkeypatch, install: Install, how: str) -> tuple[bool, dict]:
    """Plan (remembered), change the file `how`, plan again: whether stat()
    moved, and the answer."""
    if how == "map-dirty-page":
        # Dirty the page now (the same bytes): its write fault sets the
        # times, which age() then winds back; the later store faults no more.
        m = install.mapped()
        m[install.at:install.at + 1] = m[install.at:install.at + 1]
    install.age()
    assert plan(lib, install.dir) == ON
    assert remembered(lib, install.dir, monkeypatch), "the fixture must be served warm"
    before = stat_key(install.dir)
    {"write": install.rename_by_write, "map-dirty-page": install.rename_through_map,
     "map-clean-page": install.rename_through_map}[how]()
    assert install.has_head_now() is False  # the bytes did change
    return stat_key(install.dir) != before, plan(lib, install.dir)


@pytest.mark.parametrize("how", ["write", "map-dirty-page", "map-clean-page"])
def test_change_detection_is_what_stat_shows(lib, tmp_path, monkeypatch, aged_clock, how):
    # A writeback between the two stores (another process's sync) would clean
    # the page and let the second store fault: the dirty-page case is then
    # arranged again, at most three times, and the answer follows stat()
    # every time.
    outcomes = []
    for attempt in range(3 if how == "map-dirty-page" else 1):
        install = Install(tmp_path / f"install-{attempt}")
        try:
            moved, answer = _change(lib, monkeypatch, install, how)
        finally:
            install.close()
        outcomes.append(moved)
        assert answer == (FRESH if moved else ON), (how, moved)
        if not moved:
            # Not seen, yet the next stat-visible change (a touch) is.
            os.utime(install.weights)
            assert plan(lib, install.dir) == FRESH
            break
    if how == "write":
        assert outcomes == [True], "a write(2) must move mtime"
    if how == "map-dirty-page":
        assert outcomes[-1] is False, (
            "a store into a dirty mapped page moved a stat() field every time: the case the "
            "promise leaves out did not occur", outcomes)


def test_the_fields_compared_are_the_documented_ones():
    """The key the header and docs/reliability.md describe is the key the
    library builds: seven int64 per file, in this order."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    embed = (root / "src" / "tsffi_embed.c").read_text()
    fields = re.search(r"struct tsffi_file_key \{\s*int64_t ([^;]+);", embed).group(1)
    assert [f.strip() for f in fields.split(",")] == [
        "ok", "dev", "ino", "size", "mtime_ns", "ctime_ns", "mode"]
    assert re.findall(r'tsffi_file_key_of\(model_dir, "([^"]+)"', embed) == [
        "model_weights.bin", "packed_experts/layout.json", "manifest.json"]
    header = (root / "include" / "tsffi.h").read_text()
    for function in ("tsffi_speculation_plan", "tsffi_speculation_choices"):
        comment = header[:header.index(f"TSFFI_API int32_t {function}(")]
        comment = " ".join(line.strip().lstrip("*") for line in
                           comment[comment.rindex("/*"):].splitlines())
        comment = " ".join(comment.split())
        assert ("device, inode, size, mode, modification time and change time" in comment
                and "shared memory mapping" in comment), function
    promises = " ".join((root / "docs" / "reliability.md").read_text().split())
    assert "device, inode, size, mode, modification time and change time" in promises
    assert "shared memory mapping (`MAP_SHARED`)" in promises
    assert "`test_change_detection.py::test_change_detection_is_what_stat_shows`" in promises
