"""One install as the policy sees it -- its resident index and its expert
layout -- read once and reused while the files are unchanged.

A GUI re-plans every time the user touches a control. Reading and validating
the index costs tens of microseconds to milliseconds; proving it unchanged
costs two `stat()` calls (about 1.5 us each here). So a snapshot is keyed by
what `stat` says of both files, and any change to either -- replaced,
rewritten, truncated, touched, made a symlink elsewhere -- is a new key and a
fresh read.

The cache must be invisible, and a timestamp alone is not proof: file times
come from a coarse clock (a few milliseconds), so a rewrite within one tick of
the previous write can keep size and mtime. As git does with its index, a
snapshot whose files were modified within `RACY_WINDOW_NS` of being read is
not trusted, and is re-read on every call until the files have aged.
"""

from __future__ import annotations

import os
import time

from .errors import ResidentIndexError, TurbosparkError
from .expert_layout import LAYOUT_PATH, ExpertLayout, load_expert_layout
from .resident_index import ResidentIndex, load_resident_index

__all__ = ["InstallSnapshot", "snapshot", "MAX_CACHED_INSTALLS", "RACY_WINDOW_NS"]

MAX_CACHED_INSTALLS = 64
MAX_MEMO = 256  # derived answers kept per snapshot
RACY_WINDOW_NS = 100_000_000  # 100 ms: well above any coarse-clock tick


def _stat_key(path: str) -> tuple:
    try:
        s = os.stat(path)
    except OSError as exc:
        return ("error", exc.errno)
    except ValueError:  # embedded NUL
        return ("invalid",)
    # struct tsffi_file_key's fields in its order (_abi._offer_to_c fills it by name).
    return (s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_mode)


class InstallSnapshot:
    """What the files of one install said when they were read. Derived answers
    (the drafter choice per request, the blocker preview per drafter) are
    memoised on the snapshot, so they share its lifetime and its validity."""

    __slots__ = ("model_dir", "key", "trusted", "index", "index_error", "layout",
                 "layout_error", "_memo", "__weakref__")

    def __init__(self, model_dir: str, key: tuple, trusted: bool) -> None:
        self.model_dir = model_dir
        self.key = key
        self.trusted = trusted
        self.index: ResidentIndex | None = None
        self.index_error: ResidentIndexError | None = None
        self.layout: ExpertLayout | None = None
        self.layout_error: TurbosparkError | None = None
        self._memo: dict = {}
        try:
            self.index = load_resident_index(os.path.join(model_dir, "model_weights.bin"))
        except ResidentIndexError as exc:
            self.index_error = exc
        try:
            self.layout = load_expert_layout(model_dir)
        except TurbosparkError as exc:
            self.layout_error = exc

    def memo(self, key, compute):
        """`compute()`, remembered under `key` for this snapshot's lifetime.
        Bounded: a host varying its options endlessly (a temperature slider)
        starts the memo afresh past MAX_MEMO answers."""
        memo = self._memo
        try:
            return memo[key]
        except KeyError:
            pass
        if len(memo) >= MAX_MEMO:
            memo.clear()
        value = memo[key] = compute()
        return value

    def blocker_preview(self, drafter) -> str | None:
        """The engine's blocker as far as the files can tell (see blockers.py).
        An unreadable index or layout has no preview: the engine's open would
        fail on it, so the reason is the reader's own error."""
        try:
            return self._memo[("preview", drafter)]
        except KeyError:
            pass

        def compute():
            if self.index_error is not None:
                return str(self.index_error)
            if self.layout_error is not None:
                return str(self.layout_error)
            from .blockers import architecture_blocker, drafter_blocker
            reason = self.memo(("architecture",), lambda: architecture_blocker(
                self.index, self.layout.experts_per_layer))
            return reason if reason is not None else drafter_blocker(self.index, drafter)
        return self.memo(("preview", drafter), compute)


_cache: dict[str, InstallSnapshot] = {}


def snapshot(model_dir: str) -> InstallSnapshot:
    """The install at `model_dir` as it is now: cached while unchanged."""
    weights = os.path.join(model_dir, "model_weights.bin")
    key = (_stat_key(weights), _stat_key(os.path.join(model_dir, LAYOUT_PATH)))
    cached = _cache.get(model_dir)
    if cached is not None and cached.trusted and cached.key == key:
        return cached
    started = time.time_ns()
    # mtime and ctime of whichever files exist (error keys have no times).
    newest = max((t for part in key if len(part) == 6 for t in part[3:5]), default=0)
    fresh = InstallSnapshot(model_dir, key, trusted=started - newest > RACY_WINDOW_NS)
    # A file that changed while it was being read must not be remembered.
    if (_stat_key(weights), _stat_key(os.path.join(model_dir, LAYOUT_PATH))) != key:
        fresh.trusted = False
    _cache.pop(model_dir, None)
    while len(_cache) >= MAX_CACHED_INSTALLS:
        # pop with a default: another host thread may evict the same entry
        # between choosing it and removing it.
        _cache.pop(next(iter(_cache), None), None)
    _cache[model_dir] = fresh
    return fresh


def clear_cache() -> None:
    _cache.clear()
