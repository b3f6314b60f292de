"""The install snapshots: one install as the engine's open reads it -- the
manifest's `arch`, the resident index, and (for install info) the expert
layout -- read once and reused while the files are unchanged. Data only:
what the files say (or why they could not be read), with the identity they
were read under. Nothing here decides: every verdict of the open on these
files is plan.py's, made afresh per call (the C warm path remembers answers).

A GUI re-plans every time the user touches a control. Reading and validating
the index costs tens of microseconds to milliseconds; proving it unchanged
costs three `stat()` calls (about 1.5 us each here). So a snapshot is keyed by
what `stat` says of its files, and any change to one -- replaced,
rewritten, truncated, touched, made a symlink elsewhere -- is a new key and a
fresh read.

The cache must be invisible, and a timestamp alone is not proof: a rewrite
within one tick of the clock that stamps files can keep size and mtime. A
snapshot whose files were modified within the racy window of being read
(regular_file.py: the rule and its windows, for every reader's cache) is not
trusted, and is re-read on every call until the files have aged.

The key is `struct tsffi_file_key[TSFFI_INSTALL_FILES]` of src/tsffi_embed.c
(one per file of `LEAVES`, in that order), as bytes: the library's warm path
compares exactly these bytes, so inside the library the key is the library's
own (`use_native_keys`: tsffi_install_keys, the one computation of it there)
and an answer is offered to the warm path under the very key this snapshot
was read with. Without the library, `python_file_keys` writes the same
fields (regular_file.file_identity, framed by `ok` and `mode`).
"""

from __future__ import annotations

import _thread
import itertools
import os
import sys
import time

from .errors import OpenRefused, ResidentIndexError, TurbosparkError
from .expert_layout import LAYOUT_PATH, ExpertLayout, load_expert_layout
from .manifest_arch import MANIFEST_NAME, ManifestArch, load_manifest_arch
from .regular_file import RACY_WINDOW_NS, file_identity, settled
from .resident_index import ResidentIndex, load_resident_index

__all__ = ["InstallSnapshot", "snapshot", "clear_cache", "use_native_keys", "file_keys",
           "keys_in_use", "python_file_keys", "LEAVES",
           "MAX_CACHED_INSTALLS", "RACY_WINDOW_NS"]

MAX_CACHED_INSTALLS = 64

# The files an install's answers depend on, in the key's order (the C side's
# tsffi_install_keys stats the same three).
LEAVES = ("model_weights.bin", LAYOUT_PATH, MANIFEST_NAME)
# struct tsffi_file_key: ok, dev, ino, size, mtime_ns, ctime_ns, mode (int64 each).
_FIELDS = 7
_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def python_file_keys(model_dir: str) -> bytes:
    """What tsffi_install_keys writes, from os.stat: per file its fields, or
    ok 0 with the errno in dev when stat() fails."""
    values: list[int] = []
    for leaf in LEAVES:
        try:
            s = os.stat(os.path.join(model_dir, leaf))
        except OSError as exc:
            values += (0, exc.errno or 0, 0, 0, 0, 0, 0)
            continue
        except ValueError:  # not representable as a C path: no file has it
            values += (0, -1, 0, 0, 0, 0, 0)
            continue
        values += (1, *file_identity(s), s.st_mode)
    # C stores each as int64: the same bits (st_ino may exceed 2**63).
    return b"".join((v - _U64 if v > _I64_MAX else v).to_bytes(8, sys.byteorder, signed=True)
                    for v in values)


_keys = python_file_keys


def use_native_keys(keys) -> None:
    """Compute the key with `keys(model_dir) -> bytes` from now on (`_abi.bind`
    hands in the library's tsffi_install_keys); None goes back to Python."""
    global _keys
    _keys = python_file_keys if keys is None else keys


def file_keys(model_dir: str) -> bytes:
    """The key of the install at `model_dir` now."""
    return _keys(model_dir)


def keys_in_use():
    """The computation `file_keys` uses: `python_file_keys`, or what
    `use_native_keys` was given."""
    return _keys



def _file_times(key: bytes) -> list[int]:
    """Every mtime and ctime of the files stat() saw."""
    fields = memoryview(key).cast("q")
    return [fields[at + t] for at in range(0, len(fields), _FIELDS) if fields[at]
            for t in (4, 5)]


class InstallSnapshot:
    """What the files of one install said when they were read: the manifest's
    architecture (or the open's refusal of it), the resident index (or the
    reader's error), and the expert layout, read when install info first
    asks."""

    __slots__ = ("model_dir", "key", "trusted", "arch", "arch_error", "index", "index_error",
                 "_layout", "__weakref__")

    def __init__(self, model_dir: str, key: bytes, trusted: bool) -> None:
        self.model_dir = model_dir
        self.key = key
        self.trusted = trusted
        self.arch: ManifestArch | None = None
        self.arch_error: OpenRefused | None = None
        self.index: ResidentIndex | None = None
        self.index_error: ResidentIndexError | None = None
        self._layout: tuple | None = None
        try:
            self.arch = load_manifest_arch(model_dir)
        except OpenRefused as exc:
            self.arch_error = exc.with_traceback(None)
        try:
            self.index = load_resident_index(os.path.join(model_dir, LEAVES[0]))
        except ResidentIndexError as exc:
            self.index_error = exc

    @property
    def layout(self) -> ExpertLayout | None:
        """`packed_experts/layout.json` (None: unreadable, `layout_error`
        says why). Read on first use: no decision reads it (the engine's
        blockers take the expert count from the manifest), only install info."""
        if self._layout is None:
            try:
                self._layout = (load_expert_layout(self.model_dir), None)
            except TurbosparkError as exc:
                self._layout = (None, exc)
        return self._layout[0]

    @property
    def layout_error(self) -> TurbosparkError | None:
        self.layout  # noqa: B018 - reads it on first use
        return self._layout[1]


_cache: dict[str, InstallSnapshot] = {}


def snapshot(model_dir: str) -> InstallSnapshot:
    """The install at `model_dir` as it is now: cached while unchanged.

    Cost: a cached install is one key (three stat() calls); a first read holds
    at most one copy of the index's entry table and names per install at a
    time, whatever the number of threads: concurrent first reads of one
    install wait for one read (single flight: `_board`) and share it."""
    key = _keys(model_dir)
    cached = _cache.get(model_dir)
    if cached is not None and cached.trusted and cached.key == key:
        return cached
    asked = next(_reads)
    flight_id = _file_identity(model_dir, key)
    flight = _board(flight_id)
    try:
        with flight[0]:
            # The read this thread waited for may have been of these very
            # files: then it is the answer.
            key = _keys(model_dir)
            cached = _cache.get(model_dir)
            if cached is not None and cached.trusted and cached.key == key:
                return cached
            return _read(model_dir, key, asked)
    finally:
        _land(flight_id, flight)


def _read(model_dir: str, key: bytes, asked: int | None = None) -> InstallSnapshot:
    number = next(_reads)
    twin = _twin(key, number if asked is None else asked)
    if twin is not None:
        fresh, number = _shared(model_dir, twin), _read_number.get(twin.model_dir, 0)
    else:
        started = time.time_ns()
        fresh = InstallSnapshot(model_dir, key, trusted=settled(started, _file_times(key)))
        # A file that changed while it was being read must not be remembered.
        if _keys(model_dir) != key:
            fresh.trusted = False
    _cache.pop(model_dir, None)
    while len(_cache) >= MAX_CACHED_INSTALLS:
        # pop with a default: another host thread may evict the same entry
        # between choosing it and removing it.
        victim = next(iter(_cache), None)
        _cache.pop(victim, None)
        _read_number.pop(victim, None)
    _cache[model_dir] = fresh
    _read_number[model_dir] = number
    return fresh


# One install under many names (symlinks, `a/../a`, an alias and its path):
# single flight is keyed by the identity of its model_weights.bin (device,
# inode), not by the name, and a snapshot already read of the very same
# files (the whole stat key equal) is shared, not read again. Keyed by the
# name, 8 threads' first plans of one install under 8 symlinked spellings
# each read the index at once: memory x6 (issue 40). `_reads` numbers every
# call that boards a flight and every read, in the order they happen, and
# `_read_number` says which read each cached snapshot holds: a snapshot is
# shared when it is trusted (its files older than the racy window: what
# trusted means for its own name), or when its read began after the asking
# call did -- the read that call waited for, as the name's own single flight
# always shared it. Shared from an untrusted read, the answer is untrusted
# too: the next call reads again.
_reads = itertools.count(1)
_read_number: dict[str, int] = {}


def _file_identity(model_dir: str, key: bytes) -> tuple:
    """What one install's single flight is keyed by: (device, inode) of its
    model_weights.bin as the key says; the name when stat() could not see it."""
    fields = memoryview(key).cast("q")
    return ("file", fields[1], fields[2]) if fields[0] else ("name", model_dir)


def _twin(key: bytes, asked: int) -> InstallSnapshot | None:
    """A cached snapshot of exactly these files that may answer for another
    name (see above), or None."""
    for name, cached in list(_cache.items()):  # other threads may insert meanwhile
        if cached.key == key and (cached.trusted or _read_number.get(name, 0) > asked):
            return cached
    return None


def _shared(model_dir: str, twin: InstallSnapshot) -> InstallSnapshot:
    """`twin`'s reading of the files under the name `model_dir`: the same
    index and layout objects (no second copy)."""
    fresh = object.__new__(InstallSnapshot)
    for slot in InstallSnapshot.__slots__:
        if slot != "__weakref__" and hasattr(twin, slot):
            setattr(fresh, slot, getattr(twin, slot))
    fresh.model_dir = model_dir
    if twin.arch_error is not None:
        # The open's refusal of the manifest quotes its path: this name's.
        try:
            fresh.arch, fresh.arch_error = load_manifest_arch(model_dir), None
        except OpenRefused as exc:
            fresh.arch, fresh.arch_error = None, exc.with_traceback(None)
    return fresh


# Single flight: per install being read, [its lock, the threads holding or
# waiting for it]. Without it, 8 host threads racing on one install's first
# plan each read the index (the reads release the GIL): measured 7.8 GB for
# a 1 GiB index region where one read costs 1.06 GB. Installs are not
# serialised against each other: each has its own lock, dropped when no
# thread needs it (so the board holds only installs being read now).
_flights: dict = {}
_flights_guard = _thread.allocate_lock()


def _board(identity) -> list:
    with _flights_guard:
        flight = _flights.get(identity)
        if flight is None:
            flight = _flights[identity] = [_thread.allocate_lock(), 0]
        flight[1] += 1
    return flight


def _land(identity, flight: list) -> None:
    with _flights_guard:
        flight[1] -= 1
        if flight[1] == 0:
            del _flights[identity]


def clear_cache() -> None:
    _cache.clear()
    _read_number.clear()
