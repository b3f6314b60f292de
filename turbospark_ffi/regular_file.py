"""The one way the library opens a file it reads: the resident index
(`model_weights.bin`), the expert layout and the store's `installed.json`.

Every file the library reads is named by someone else (an install, a store,
a symlink in either), so each read must end, at once and in bounded memory,
whatever is there:

* opened O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  writer forever (the engine's own plain read blocks there);
* a regular file only, checked with fstat() AFTER the open (on the file
  actually opened, so a swap between a check and the open cannot slip a FIFO
  or `/dev/zero` in): a character device or a FIFO has no size to bound a
  read by, and `/dev/zero` would be read until memory runs out;
* at most a stated number of bytes per kind of file, checked against the
  size fstat() reports before anything is read (each caller says its bound
  and why); a file that grows while it is read is read only up to that size.

A regular file's read is then bounded in time by its size (a hung network
file system excepted, which no read can bound). The caller owns the
descriptor `open_regular` returns and closes it.
"""

from __future__ import annotations

import os

__all__ = ["NotReadable", "open_regular", "read_all", "read_bounded", "describe_file_type",
           "RACY_WINDOW_NS", "COARSE_RACY_WINDOW_NS", "racy_window_ns", "settled",
           "file_identity"]


def file_identity(info: os.stat_result) -> tuple[int, int, int, int, int]:
    """What says a file is unchanged, for every reader's cache (snapshots.py,
    store.py) and the C warm path's `struct tsffi_file_key`, which holds the
    same five fields: device and inode (which file), size, and the times of
    its last modification and change in ns (ctime catches a rewrite that
    restored mtime)."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


# What a reader's cache may trust (snapshots.py, store.py; the C warm path is
# offered only what snapshots.py trusts): a file modified within one tick of
# the clock that stamps it can be rewritten within that tick keeping its
# size and mtime, so an answer read from it is not remembered until the
# file is older than the window. 100 ms: well above the kernel's coarse
# clock tick (a few ms) on a file system that keeps nanoseconds.
RACY_WINDOW_NS = 100_000_000
# A file system that keeps whole seconds (HFS+, ext4 with 128-byte inodes,
# some network mounts; FAT's mtime: 2 s): a same-size rewrite within the
# second after a read kept every field stat() shows, and the stale answer
# stood until the file changed again (issue 40). Such a file's times have
# no nanoseconds, so a time with none is taken as coarse and gets this
# window: above FAT's 2 s, the coarsest tick in use. The cost when a fine
# file system happens to give a whole second (one in 10^9, or a `touch -d`):
# its answer is trusted 3 s later instead of 100 ms.
COARSE_RACY_WINDOW_NS = 3_000_000_000
_SECOND_NS = 1_000_000_000


def racy_window_ns(times_ns) -> int:
    """The window for files whose modification and change times (ns) are
    `times_ns`: COARSE_RACY_WINDOW_NS when any of them is a whole second,
    else RACY_WINDOW_NS."""
    return (COARSE_RACY_WINDOW_NS if any(t % _SECOND_NS == 0 for t in times_ns)
            else RACY_WINDOW_NS)


def settled(read_started_ns: int, times_ns) -> bool:
    """Whether a read that started at `read_started_ns` (time.time_ns) of
    files whose modification and change times are `times_ns` may be
    remembered: every time older than the window at the read's start. The
    one rule of every cache of the library (no time at all: nothing seen,
    nothing to race)."""
    times = tuple(times_ns)
    return not times or read_started_ns - max(times) > racy_window_ns(times)


class NotReadable(Exception):
    """The file cannot be read as the library reads files. `check` is one
    of "open", "stat", "not_regular_file", "too_large", "read"; `text` says
    what was found, in words a host can show ("is a FIFO, not a regular
    file", "is 20000000 bytes; at most 16777216 are read"); `errno` is the
    OS error's number for "open", "stat" and "read" (else None); `size`
    the file's size for "too_large" (else None)."""

    def __init__(self, check: str, text: str, errno: int | None = None,
                 size: int | None = None) -> None:
        super().__init__(text)
        self.check = check
        self.text = text
        self.errno = errno
        self.size = size


def describe_file_type(mode: int) -> str:
    """What a non-regular file is, as "a FIFO", "a directory", ..."""
    import stat as st
    for test, what in ((st.S_ISDIR, "a directory"), (st.S_ISFIFO, "a FIFO"),
                       (st.S_ISCHR, "a character device"), (st.S_ISBLK, "a block device"),
                       (st.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def open_regular(path: str, limit: int | None = None) -> tuple[int, os.stat_result]:
    """(descriptor, fstat of it) for the regular file at `path`, of at most
    `limit` bytes when a limit is given. Raises NotReadable; the caller
    closes the descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise NotReadable("open", exc.strerror or str(exc), exc.errno) from None
    except ValueError as exc:  # an embedded NUL: no file has that name
        raise NotReadable("open", str(exc)) from None
    try:
        info = os.fstat(fd)
        import stat as st
        if not st.S_ISREG(info.st_mode):
            raise NotReadable("not_regular_file",
                              f"is {describe_file_type(info.st_mode)}, not a regular file")
        if limit is not None and info.st_size > limit:
            raise NotReadable("too_large",
                              f"is {info.st_size} bytes; at most {limit} bytes are read",
                              size=info.st_size)
    except OSError as exc:
        os.close(fd)
        raise NotReadable("stat", exc.strerror or str(exc), exc.errno) from None
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_all(fd: int, size: int, offset: int = 0) -> bytes:
    """Up to `size` bytes from `offset`; shorter only at end of file."""
    first = os.pread(fd, size, offset)
    if len(first) == size or not first:
        return first
    chunks = [first]
    got = len(first)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break
        chunks.append(more)
        got += len(more)
    return b"".join(chunks)


def read_bounded(path: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The whole regular file at `path` (at most `limit` bytes) and what
    fstat() said of it when it was opened. Raises NotReadable."""
    fd, info = open_regular(path, limit)
    try:
        return read_all(fd, info.st_size), info
    except OSError as exc:
        raise NotReadable("read", exc.strerror or str(exc), exc.errno) from None
    finally:
        os.close(fd)
