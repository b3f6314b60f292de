"""The store's `installed.json`: read bounded, decoded as the engine decodes
it, remembered while the file is unchanged.

The engine (docs/c-api.md, "Model names", step 3) reads `<root>/installed.json`
whole and decodes it in ONE typed pass into a list of rows, all or nothing:
a file that is missing, not UTF-8, not JSON, not an array, or has any row
that fails to decode is an EMPTY list, never an error. Then, at each
resolution, a row counts when its effective modality is text (`kind ==
"image"` overrides `modality`) and its `path` is an existing directory; a
later counting row of an alias wins over an earlier one.

Where the engine itself would hang or exhaust memory, we answer "no store"
with a reason instead (`StoreFile.reason`, shown by tsffi_store_json): a
FIFO or a device there (regular_file.py), or a file over MAX_STORE_BYTES.

The typed decode costs ~0.3 s per MiB (MAX_STORE_BYTES says how that bounds
it), and a GUI resolves an alias on every change of a control, so the
decoded rows are remembered per file IDENTITY (regular_file.file_identity,
as an install snapshot's files) and an unchanged file is one
stat() per resolution. The directory check of a row is made at each
resolution (a directory may appear or vanish without the file changing).
As snapshots.py does, a file modified within the racy window of being read
(regular_file.settled) is not remembered: a rewrite within one clock tick
can keep size and mtime.
"""

from __future__ import annotations

import _thread
import os
import time

from ._value import Value
from .regular_file import file_identity, settled

__all__ = ["MAX_STORE_BYTES", "StoreFile", "StoreRow", "read_store",
           "recorded_path", "counting_rows", "clear_cache"]

# Far above any real store, and what bounds the one decode per identity: a
# row as the installer writes it is ~350 bytes, so 1 MiB holds ~3,000
# installs where a real store has tens (~10 KB). The engine's typed decode
# (typed_json's exact path) costs ~0.3 s per MiB here (measured: 0.40 s for
# 4,000 such rows, 1.36 MiB), so the bound keeps the first alias call on any
# store well under a second. What lies past it is not a store a user made.
MAX_STORE_BYTES = 1 << 20
_MAX_CACHED = 8


class StoreRow(Value):
    """One decoded row, as far as resolution reads it."""

    __slots__ = ("alias", "path", "kind", "modality")

    def __init__(self, alias: str, path: str, kind: str | None, modality: str) -> None:
        self._init(alias=alias, path=path, kind=kind, modality=modality)

    @property
    def is_text(self) -> bool:
        """The effective modality is text: `kind == "image"` (exact) overrides
        `modality`."""
        return self.kind != "image" and self.modality == "text"


class StoreFile(Value):
    """What `<root>/installed.json` said. `read` is True when it was read and
    decoded (its rows, possibly none); False with `reason` saying why there
    are no rows (missing, refused, or failing the engine's decode)."""

    __slots__ = ("path", "read", "reason", "rows")

    def __init__(self, path: str, read: bool, reason: str | None,
                 rows: tuple[StoreRow, ...]) -> None:
        self._init(path=path, read=read, reason=reason, rows=rows)


_row_type = None


def _store_type():
    """The engine's list of rows: a serde struct (no deny_unknown_fields, no
    renames), its fields in declaration order (a row may be positional)."""
    global _row_type
    if _row_type is None:
        from .typed_json import STRING, U64, Enum, Field, Option, Seq, Struct
        required = ("alias", "repo", "revision", "path", "family")
        fields = [Field(name, STRING, True) for name in required]
        fields += [Field("install_bytes", U64, True), Field("installed_on", STRING, True),
                   Field("status", STRING, True), Field("kind", Option(STRING)),
                   Field("modality", Enum("Modality", ("text", "image", "audio")))]
        _row_type = Seq(Struct("InstalledModel", tuple(fields)))
    return _row_type


def _decoded(path: str, data: bytes) -> StoreFile:
    """All or nothing, as the engine: any failure is no rows, with its reason."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return StoreFile(path, False, f"{path} is not UTF-8 (invalid byte "
                                      f"0x{data[exc.start]:02x} at offset {exc.start}); the "
                                      "engine reads it as no installs", ())
    # A store is at most MAX_STORE_BYTES, decoded once per identity, so the
    # decode's cost is the bound's to keep small.
    from .typed_json import TypedJsonError, decode
    try:
        values = decode(text, _store_type())
    except TypedJsonError as exc:
        return StoreFile(path, False, f"{path} does not decode as the engine's list of "
                                      f"installs ({exc.text}); the engine reads it as no "
                                      "installs", ())
    rows = tuple(StoreRow(v.fields["alias"], v.fields["path"], v.fields.get("kind"),
                          v.fields.get("modality", "text")) for v in values)
    return StoreFile(path, True, None, rows)


_cache: dict[tuple, StoreFile] = {}


def read_store(root: str) -> StoreFile:
    """`<root>/installed.json` as the engine would decode it, remembered while
    stat() says the file is unchanged. Never raises for a bad file."""
    path = os.path.join(root, "installed.json")
    known = _remembered(path)
    if known is not None:
        return known
    # One read at a time (a store is one file per process, mostly): threads
    # racing on a first read wait for it rather than each decoding the file.
    with _reading:
        known = _remembered(path)
        return known if known is not None else _read_fresh(path)


_reading = _thread.allocate_lock()


def _remembered(path: str) -> StoreFile | None:
    """The answer for `path` without reading it, when stat() gives one: a
    file that cannot be stat()ed, or one remembered under its identity."""
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        return StoreFile(path, False, f"{path} cannot be read: "
                                      f"{getattr(exc, 'strerror', None) or exc}", ())
    return _cache.get((path, *file_identity(info)))


def _read_fresh(path: str) -> StoreFile:
    from .regular_file import NotReadable, open_regular, read_all
    started = time.time_ns()
    try:
        fd, info = open_regular(path, MAX_STORE_BYTES)
    except NotReadable as exc:
        extra = (" (the store's bound, far above any real store)"
                 if exc.check == "too_large" else "")
        return StoreFile(path, False, f"{path} {_said(exc)}{extra}; read as no store", ())
    try:
        data = read_all(fd, info.st_size)
        after = os.fstat(fd)
    except OSError as exc:
        return StoreFile(path, False, f"{path} cannot be read: {exc.strerror or exc}", ())
    finally:
        os.close(fd)
    store = _decoded(path, data)
    key = file_identity(info)
    # Remembered only when nothing changed while it was read and the file is
    # older than the racy window (regular_file.settled says why).
    if file_identity(after) == key and settled(started, (key[3], key[4])):
        while len(_cache) >= _MAX_CACHED:
            _cache.pop(next(iter(_cache), None), None)
        _cache[(path, *key)] = store
    return store


def _said(exc) -> str:
    return (exc.text if exc.check in ("not_regular_file", "too_large")
            else f"cannot be read: {exc.text}")


def _is_dir(path: str) -> bool:
    return os.path.isdir(path)  # False on any error (a NUL included), as the engine's


def recorded_path(root: str, name: str) -> str | None:
    """The path the store records for alias `name`: the LAST row of that
    alias that counts (text, an existing directory), as written; None when
    none does."""
    for row in reversed(read_store(root).rows):
        if row.alias == name and row.is_text and _is_dir(row.path):
            return row.path
    return None


def counting_rows(store: StoreFile) -> dict[str, str]:
    """Each alias that counts now, with the path it resolves to, in the order
    the aliases first appear among the counting rows."""
    found: dict[str, str] = {}
    for row in store.rows:
        if row.is_text and _is_dir(row.path):
            found[row.alias] = row.path
    return found


def clear_cache() -> None:
    _cache.clear()
