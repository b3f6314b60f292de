"""The resident index of `model_weights.bin`: the reader and the two presence
predicates the original module's `resolve_drafter` asks.

Layout (little-endian, no magic, no version):

    0..24   header: indexSize u64, residentSize u64, entryCount u64
    24..    entryCount entries of 72 bytes:
              nameOffset u32, nameLength u16, dtype u8, reserved u8,
              fileOffset u64, sizeBytes u64, shape 4 x u32,
              scaleOffset u64, scaleSize u64, biasOffset u64, biasSize u64
    ..      the string table (names concatenated, no separator), then zero
            padding up to indexSize; tensor data starts at indexSize.

The checks run in the engine's order and each raises `ResidentIndexError`
with its own `check` tag and the engine's own words for it
(engine_texts.READER_DETAILS, docs/ENGINE.md section 1). Two properties matter
more than speed:

* It reads the entry table and the names it points at -- never the padding,
  never the tensor data -- so a 14 GB sparse file costs what a 100 KB one does.
  What it does cost is memory of the order of the entry table plus the names
  (measured: an index region of 1 GiB costs 1.06 GB while it is read), once
  per install at a time: concurrent first reads of one install share one read
  (install.snapshot's single flight).
* Nothing is allocated or read before the header has been checked against the
  file's real length (check 5), so a header claiming 2^63 entries or an index
  larger than the file is refused before a byte of it is read. The file is
  opened non-blocking and must be a regular file, so a FIFO or `/dev/zero`
  behind a symlink answers at once instead of hanging or filling memory.
"""

from __future__ import annotations

import os
import sys

from ._value import Value
from .engine_texts import INDEX_CORRUPT, IO_FAILED, NUL_IN_PATH, OS_ERROR, READER_DETAILS
from .errors import ResidentIndexError

__all__ = [
    "HEADER_SIZE",
    "DTYPE_NAMES",
    "ENTRY_SIZE",
    "MTP_PRESENCE_TENSOR",
    "DFLASH_PRESENCE_TENSOR",
    "MTP_HEAD_TENSORS",
    "DFLASH_TENSORS",
    "TRUNK_LAYER_PREFIX",
    "SELF_ATTN",
    "IndexEntry",
    "ResidentIndex",
    "load_resident_index",
    "use_native_scan",
    "native_scan",
    "install_has_mtp_head",
    "install_has_dflash",
]

HEADER_SIZE = 24
ENTRY_SIZE = 72
_U64_MAX = (1 << 64) - 1

# docs/ENGINE.md section 2: only the first tensor of each drafter is the presence test.
MTP_PRESENCE_TENSOR = "mtp.fc.weight"
DFLASH_PRESENCE_TENSOR = "dflash.fc.weight"

# Trunk layer N's tensors are named "<TRUNK_LAYER_PREFIX>N.<...>"; those of a
# full-attention layer are under SELF_ATTN (blockers.py says why that is the
# evidence). `ResidentIndex.first_self_attn_layer` answers from the names.
TRUNK_LAYER_PREFIX = b"language_model.model.layers."
SELF_ATTN = b".self_attn."

# What a complete drafter holds (for install info: "present but partial").
_MTP_LAYER = (
    "input_layernorm.weight", "post_attention_layernorm.weight",
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
)
# docs/ENGINE.md section 2: the full head is 15 tensors, `mtp.fc.weight` first.
MTP_HEAD_TENSORS = (
    "mtp.fc.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight",
    "mtp.norm.weight",
) + tuple("mtp.layers.0." + t for t in _MTP_LAYER)

# docs/ENGINE.md section 2: the 81 tensors the engine's DFlash2 state loads, in its
# order: 6 top-level, then 15 in each of 5 layers (4 convolution tensors, then
# an MTP-style layer); `dflash.fc.weight` is the presence test.
_DFLASH_TOP = ("dflash.fc.weight", "dflash.hidden_norm.weight", "dflash.norm.weight",
               "dflash.candidate_selector.hidden_projection.weight",
               "dflash.candidate_selector.predecessor_codebook",
               "dflash.candidate_selector.successor_codebook")
_DFLASH_LAYER = ("attention_conv.base_kernel", "attention_conv.kernel_projection.weight",
                 "mlp_conv.base_kernel", "mlp_conv.kernel_projection.weight") + _MTP_LAYER
DFLASH_TENSORS = _DFLASH_TOP + tuple(
    f"dflash.layers.{i}.{t}" for i in range(5) for t in _DFLASH_LAYER)


# docs/ENGINE.md section 1, dtype tags. The reader does not validate the tag.
DTYPE_NAMES = {
    1: "BF16", 2: "FP16", 3: "FP32", 4: "INT4 affine", 5: "INT8 affine",
    6: "GGUF Q8_0", 7: "GGUF Q4_K", 8: "GGUF Q6_K", 9: "GGUF Q4_0", 10: "GGUF IQ3_XXS",
    11: "GGUF IQ4_NL", 12: "GGUF IQ4_XS", 13: "GGUF Q5_K", 14: "GGUF MXFP4",
    15: "1-bit affine", 16: "2-bit affine", 17: "GGUF Q2_K", 18: "GGUF IQ2_XXS",
    19: "GGUF IQ2_XS", 20: "GGUF IQ1_S", 21: "GGUF IQ3_S", 22: "GGUF IQ2_S",
    23: "GGUF IQ1_M", 24: "GGUF Q3_K", 25: "GGUF Q2_0",
}


def _corrupt(check: str, **fields) -> ResidentIndexError:
    """The engine's refusal for `check`, in its words (engine_texts.py)."""
    detail = READER_DETAILS[check].format(**fields)
    return ResidentIndexError(INDEX_CORRUPT.format(detail=detail), check=check)


def _not_readable(path: str, exc) -> ResidentIndexError:
    """regular_file's refusal in the engine's words where the engine has
    them (`open failed: No such file or directory (os error 2)`); a file that
    is not a regular one has no engine text (its plain read would block on a
    FIFO), so that refusal is ours and names the file."""
    if exc.check == "not_regular_file":
        return ResidentIndexError(f"read failed: {path} {exc.text}", check=exc.check)
    if exc.errno:
        detail = OS_ERROR.format(text=os.strerror(exc.errno), errno=exc.errno)
    elif exc.check == "open":  # an embedded NUL: no C string holds the name
        detail = NUL_IN_PATH
    else:
        detail = exc.text
    return ResidentIndexError(IO_FAILED.format(call=exc.check, detail=detail), check=exc.check)

# What check 7 reads of each 72-byte entry, as (byte offset, width):
# nameOffset, nameLength, then each plane's offset and size -- payload,
# scale, bias.
_CHECKED_FIELDS = ((0, 4), (4, 2), (8, 8), (16, 8), (40, 8), (48, 8), (56, 8), (64, 8))
_FORMAT_OF_WIDTH = {2: "H", 4: "I", 8: "Q"}


class IndexEntry(Value):
    """One resident tensor, as the index describes it."""

    __slots__ = (
        "name", "dtype", "file_offset", "size_bytes", "shape",
        "scale_offset", "scale_size", "bias_offset", "bias_size",
    )

    def __init__(self, name: str, dtype: int, file_offset: int, size_bytes: int,
                 shape: tuple[int, int, int, int], scale_offset: int, scale_size: int,
                 bias_offset: int, bias_size: int) -> None:
        self._init(name=name, dtype=dtype, file_offset=file_offset, size_bytes=size_bytes,
                   shape=shape, scale_offset=scale_offset, scale_size=scale_size,
                   bias_offset=bias_offset, bias_size=bias_size)


class ResidentIndex:
    """A validated resident index. Read-only; entries are decoded on demand,
    because a 100,000-entry index is read far more often than it is listed.

    The names are held one of two ways, whichever the reader produced: as
    `_joined`, every name followed by "\\n" behind one leading "\\n" (the C
    pass's output; a plan asks three or four names, and searching the 4 MB
    of a 100,000-entry index's names for each is cheaper than building a
    100,000-key dict), and as
    `_slot_by_name`, built on the first call that needs many lookups.

    The C pass also hands over what it found while it had every name in hand
    (`facts`: the presence tensors' slots, the first self-attention layer);
    an index the Python pass read answers the same questions from its
    names when first asked.
    """

    __slots__ = ("path", "index_size", "resident_size", "entry_count", "file_size",
                 "_region", "_slot_by_name", "_joined", "_searches_left", "_searched",
                 "_first_layer", "bytes_read")

    # Lookups served by searching `_joined` before the dict is built: enough
    # for a plan (two presence tests, the probe's dtype), not for install
    # info's 96 names.
    _SEARCHES_BEFORE_DICT = 6

    def __init__(self, path: str, index_size: int, resident_size: int, entry_count: int,
                 file_size: int, region: bytes, slot_by_name: dict[bytes, int] | None,
                 bytes_read: int, joined: bytes | None = None,
                 facts: tuple[int | None, dict[bytes, int | None]] | None = None) -> None:
        self.path = path
        self.index_size = index_size
        self.resident_size = resident_size
        self.entry_count = entry_count
        self.file_size = file_size
        self._region = region
        # Keys are the names' canonical UTF-8 (decoded leniently, as the
        # engine does, then re-encoded), values the entry's position.
        self._slot_by_name = slot_by_name
        self._joined = joined
        self._searches_left = self._SEARCHES_BEFORE_DICT
        # What the searches found, by name: a choices table asks the two
        # presence names once per requested drafter, and without this the
        # repeats would exhaust the searches and build the dict (~150 us at
        # 866 entries, measured).
        self._searched: dict[bytes, int | None] = {}
        self._first_layer: int | None | _Unknown = _UNKNOWN
        if facts is not None:
            self._first_layer, found = facts
            self._searched.update(found)
        self.bytes_read = bytes_read

    def _slots(self) -> dict[bytes, int]:
        slots = self._slot_by_name
        if slots is None:
            # Only a C-read index lacks the dict, and its names hold no "\n".
            names = self._joined[1:-1].split(b"\n") if self.entry_count else []
            slots = self._slot_by_name = dict(zip(names, range(self.entry_count)))
        return slots

    def _joined_names(self) -> bytes | None:
        """The names as `_joined`, or None when some name holds a "\\n" itself
        (a hostile index only): then lines are not names."""
        joined = self._joined
        if joined is None and self._slot_by_name is not None:
            joined = b"\n" + b"".join(name + b"\n" for name in self._slot_by_name)
            if joined.count(b"\n") != self.entry_count + 1:
                return None
            self._joined = joined
        return joined

    def _slot(self, key: bytes) -> int | None:
        if self._slot_by_name is None:
            searched = self._searched
            if key in searched:
                return searched[key]
            if self._searches_left > 0:
                self._searches_left -= 1
                if b"\n" in key:
                    return None
                joined = self._joined
                at = joined.find(b"\n" + key + b"\n")
                # Every "\n" before the match ends one earlier name (the
                # first one is the leading "\n").
                slot = searched[key] = None if at < 0 else joined.count(b"\n", 0, at)
                return slot
        return self._slots().get(key)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            name = name.encode("utf-8", "surrogatepass")
        if not isinstance(name, bytes):
            return False
        if self._slot_by_name is None:
            # Presence needs no slot: a search of the joined names, without
            # counting the names before it and without spending a lookup.
            # The open's MTP check asks 15 names; as slots they cost the
            # 866-entry dict (~150 us) on every first plan (measured).
            searched = self._searched.get(name, _UNKNOWN)
            if searched is not _UNKNOWN:
                return searched is not None
            if b"\n" in name:
                return False
            return self._joined.find(b"\n" + name + b"\n") >= 0
        return name in self._slot_by_name

    def __len__(self) -> int:
        return self.entry_count

    def __repr__(self) -> str:
        return (f"<ResidentIndex {self.path!r} entries={self.entry_count} "
                f"indexSize={self.index_size}>")

    @property
    def names(self) -> tuple[str, ...]:
        """Every tensor name, in entry order."""
        return tuple(name.decode("utf-8") for name in self._slots())

    def name_bytes(self) -> list[bytes]:
        """The canonical UTF-8 of every name, in entry order (no decoding cost)."""
        return list(self._slots())

    def names_containing(self, fragment: bytes) -> list[bytes]:
        """Every name (canonical UTF-8) that contains `fragment`, in entry
        order, found by searching the string table rather than iterating
        100,000 names."""
        blob = self._joined_names()
        if blob is None or b"\n" in fragment:
            return [name for name in self._slots() if fragment in name]
        found = []
        at = blob.find(fragment, 1)
        while at >= 0:
            start = blob.rfind(b"\n", 0, at) + 1
            end = blob.find(b"\n", at)
            if end < 0:  # an empty fragment matches after the last "\n" too
                break
            found.append(blob[start:end])
            at = blob.find(fragment, end + 1)
        return found

    def first_self_attn_layer(self) -> int | None:
        """The smallest N of a trunk tensor named "<TRUNK_LAYER_PREFIX>N<SELF_ATTN>..."
        (N: the text between the prefix and the first SELF_ATTN, ASCII digits),
        or None when the index has none."""
        layer = self._first_layer
        if layer is _UNKNOWN:
            layer = self._first_layer = _first_layer_of(self.names_containing(SELF_ATTN))
        return layer

    def entry(self, name: str) -> IndexEntry | None:
        """The entry named `name`, or None when the index has none."""
        slot = self._slot(name.encode("utf-8", "surrogatepass"))
        if slot is None:
            return None
        return _decode_entry(self._region, slot, name)

    def dtypes(self) -> bytes:
        """Every entry's dtype tag, in entry order: one column of the entry
        table, sliced whole (100,000 entries in microseconds)."""
        return self._region[HEADER_SIZE + 6:HEADER_SIZE + ENTRY_SIZE * self.entry_count:
                            ENTRY_SIZE]

    def dtype_of(self, name: str) -> int | None:
        """The dtype tag of the tensor named `name` (cheaper than `entry`)."""
        slot = self._slot(name.encode("utf-8", "surrogatepass"))
        if slot is None:
            return None
        return self._region[HEADER_SIZE + slot * ENTRY_SIZE + 6]


class _Unknown:
    __slots__ = ()


_UNKNOWN = _Unknown()  # a fact not yet worked out (None is an answer: "there is none")


def _first_layer_of(names: list[bytes]) -> int | None:
    """The reference rule of `ResidentIndex.first_self_attn_layer` over the
    names that contain SELF_ATTN (tsffi_index_scan.c applies it to every
    name in its pass)."""
    best = None
    for name in names:
        if name.startswith(TRUNK_LAYER_PREFIX):
            number = name[len(TRUNK_LAYER_PREFIX):name.find(SELF_ATTN)]
            if number.isdigit() and number.isascii():
                layer = int(number)
                if best is None or layer < best:
                    best = layer
    return best


def install_has_mtp_head(index: ResidentIndex) -> bool:
    """True exactly when the index has an entry named `mtp.fc.weight`."""
    return MTP_PRESENCE_TENSOR in index


def install_has_dflash(index: ResidentIndex) -> bool:
    """True exactly when the index has an entry named `dflash.fc.weight`."""
    return DFLASH_PRESENCE_TENSOR in index


def _u64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 8], "little")


def _decode_entry(region: bytes, slot: int, name: str) -> IndexEntry:
    base = HEADER_SIZE + slot * ENTRY_SIZE
    e = region[base:base + ENTRY_SIZE]
    shape = tuple(int.from_bytes(e[24 + 4 * k:28 + 4 * k], "little") for k in range(4))
    return IndexEntry(name, e[6], _u64(e, 8), _u64(e, 16), shape,
                      _u64(e, 40), _u64(e, 48), _u64(e, 56), _u64(e, 64))


def _pread_full(fd: int, length: int, offset: int) -> bytes:
    """Up to `length` bytes at `offset`; shorter only at end of file."""
    from .regular_file import read_all
    return read_all(fd, length, offset)


def load_resident_index(path: str | os.PathLike) -> ResidentIndex:
    """Read and validate the resident index at `path` (a `model_weights.bin`).

    Raises `ResidentIndexError` for every way the engine finds an index
    unreadable; never anything else for a bad file.
    """
    path = os.fspath(path)
    # regular_file: non-blocking, a regular file only. No size bound of its
    # own: check 5 bounds every read by the file's length, and only the entry
    # table and the names are read (never the padding or the tensor data).
    from .regular_file import NotReadable, open_regular
    try:
        fd, info = open_regular(path)
    except NotReadable as exc:
        raise _not_readable(path, exc) from None
    try:
        return _read_validated(fd, path, info.st_size)
    finally:
        os.close(fd)


def _checked_header(header: bytes, file_size: int) -> tuple[int, int, int, int]:
    """Checks 1-5 on the header: (indexSize, residentSize, entryCount, the
    end of the resident region). Check 5 is also what bounds every read
    after it by the file's real length."""
    # Check 1.
    if len(header) < HEADER_SIZE:
        raise _corrupt("short_header")
    index_size = _u64(header, 0)
    resident_size = _u64(header, 8)
    entry_count = _u64(header, 16)
    # Check 2.
    if index_size < HEADER_SIZE:
        raise _corrupt("index_size_below_header", index_size=index_size)
    # Check 3: the engine does this arithmetic in u64, so overflow is its own failure.
    table_bytes = entry_count * ENTRY_SIZE
    if table_bytes > _U64_MAX:
        raise _corrupt("entry_count_overflow", entry_count=entry_count)
    table_end = HEADER_SIZE + table_bytes
    if table_end > _U64_MAX:
        raise _corrupt("entry_table_overflow")
    # Check 4.
    if table_end > index_size:
        raise _corrupt("entry_table_past_index", table_end=table_end, index_size=index_size)
    # Check 5: also what bounds every read below by the file's real length.
    resident_end = index_size + resident_size
    if resident_end > _U64_MAX:
        raise _corrupt("resident_end_overflow")
    if resident_end > file_size:
        raise _corrupt("resident_end_past_file", index_size=index_size,
                       resident_size=resident_size, end=resident_end, length=file_size)
    return index_size, resident_size, entry_count, resident_end


def _read_region(fd: int, length: int, offset: int) -> bytes:
    """Check 6: `length` bytes of the index region at `offset`, in full. The
    engine reads the region whole and reports any failure of that read, a
    read error or the file shrinking under it, as one short read."""
    try:
        data = _pread_full(fd, length, offset)
    except OSError:
        data = b""
    if len(data) != length:
        raise _corrupt("short_read")
    return data


def _read_validated(fd: int, path: str, file_size: int) -> ResidentIndex:
    try:
        header = _pread_full(fd, HEADER_SIZE, 0)
    except OSError:  # the engine's read_exact: any failure is a short read
        header = b""
    index_size, resident_size, entry_count, resident_end = _checked_header(header, file_size)
    table_bytes = entry_count * ENTRY_SIZE
    table_end = HEADER_SIZE + table_bytes

    # Check 6, first half: the entry table.
    table = _read_region(fd, table_bytes, HEADER_SIZE)
    native = _native
    # Only the names are read past the table; names that point outside the
    # index region are check 7's business and are not read at all.
    if native is not None:
        names_end = native[0](table, entry_count, index_size, table_end)
    else:
        name_ends = _name_ranges(table)[1]
        names_end = max((end for end in name_ends if end <= index_size), default=table_end)
        names_end = max(names_end, table_end)
    # Check 6, second half: the names (the padding after them is never read).
    if names_end - table_end > _SPARSE_FROM:
        table, tail = _packed_names(fd, table, entry_count, index_size, table_end)
    else:
        tail = (_read_region(fd, names_end - table_end, table_end) if names_end > table_end
                else b"")
    head = header + table
    if native is not None:
        scanned = native[1](head, tail, entry_count, index_size, resident_end, _QUERIES,
                            len(_QUERIED_NAMES))
        if scanned is not None:
            joined, first_layer, slots = scanned
            facts = (None if first_layer < 0 else first_layer,
                     {name: None if slot < 0 else slot
                      for name, slot in zip(_QUERIED_NAMES, slots)})
            # The names live in `joined`; entries are decoded from `head`.
            return ResidentIndex(path, index_size, resident_size, entry_count, file_size,
                                 head, None, len(head) + len(tail), joined, facts)
    region = head + tail
    slot_by_name = _validated_names(region, table, index_size, resident_end)
    return ResidentIndex(path, index_size, resident_size, entry_count, file_size, region,
                         slot_by_name, len(region))


# The loaded library's C pass (tsffi_index_scan.c), as two plain callables
# handed down by _abi.bind: `names_end(table, count, index_size, table_end)`,
# where the names end, and `scan(head, tail, count, index_size, resident_end,
# queries, names_asked)`, when check 7 passes (else None: the Python pass
# decides and words the failure) a tuple of the names "\n"-joined with a leading
# "\n", the first self-attention layer (-1: none) and the slot of each name
# asked (-1: absent). None: the Python pass alone.
_native = None

# The questions the C pass answers in passing (its `queries` text): the
# self-attention layer's two parts, then the names whose slot a plan asks for:
# the two presence tensors, and the MTP head's other 14, which the open's
# build checks on every first plan of an install that has its presence
# tensor (searched one by one in the joined names, ~9 us each at 866
# entries: most of a first plan, measured).
_QUERIED_NAMES = tuple(name.encode() for name in (*MTP_HEAD_TENSORS, DFLASH_PRESENCE_TENSOR))
_QUERIES = b"".join(part + b"\n" for part in (TRUNK_LAYER_PREFIX, SELF_ATTN, *_QUERIED_NAMES))


def use_native_scan(names_end, scan) -> None:
    """Let the reader use the library's C pass (`_abi.bind` hands it down when
    the library starts); `use_native_scan(None, None)` goes back to Python.

    Both paths accept exactly the same indexes and name the same first
    failure: the C pass only ever accepts, and hands everything else, with
    every non-ASCII name, back to the Python pass (tests compare them)."""
    global _native
    _native = None if scan is None else (names_end, scan)


def native_scan() -> tuple | None:
    """The C pass in use, as `use_native_scan` was given it (None: Python)."""
    return _native


# Past this many bytes from the entry table's end to the last name's, the
# names are read where they lie (`_packed_names`) instead of as one block: a
# valid index may put one name 4 GiB into a sparse index region, and reading
# up to it cost 8.4 GB of memory and 33 s for one plan (issue 40). Below it,
# one block is the cheaper read (a 100,000-entry install's names are ~4 MB).
_SPARSE_FROM = 16 << 20
# Names closer than this are read as one range: fewer reads, at most this
# much padding read per name.
_GAP_READ = 4096


def _packed_names(fd: int, table: bytes, count: int, index_size: int,
                  table_end: int) -> tuple[bytes, bytes]:
    """(the entry table with every name it reads re-pointed, the names' bytes):
    only the byte ranges the names occupy are read, laid one after the other
    from `table_end` on, and each such name's nameOffset is rewritten to
    where its bytes now lie. The reader then sees an index whose string
    table holds the same names for the same entries, so its checks, answers
    and error texts are those of the file as written: a re-pointed name still
    lies inside [table_end, index_size) (it only moves down), a name failing
    check 7's range test keeps its offset (and is never read, as before),
    no other field moves, and nameOffset is read by nothing after check 7.
    Memory: the table plus the names, whatever the index region's size.
    Raises check 6's short read as the block read does (the last range read
    ends where the last name ends)."""
    offsets, ends = _name_ranges(table)
    # Names reaching past the table (ones starting inside it are re-pointed
    # to nothing: the first range then starts at table_end, where they need
    # it); a name below the header or past the region fails check 7 unread.
    wanted = sorted((max(start, table_end), end, k)
                    for k, (start, end) in enumerate(zip(offsets, ends))
                    if start >= HEADER_SIZE and table_end < end <= index_size)
    starts: list[int] = []
    stops: list[int] = []
    range_of: dict[int, int] = {}  # entry -> the range its name is read in
    for start, end, k in wanted:
        if stops and start <= stops[-1] + _GAP_READ:
            stops[-1] = max(stops[-1], end)
        else:
            starts.append(start)
            stops.append(end)
        range_of[k] = len(starts) - 1
    parts = [_read_region(fd, stop - start, start) for start, stop in zip(starts, stops)]
    bases = []
    at = table_end
    for part in parts:
        bases.append(at)
        at += len(part)
    moved = bytearray(table)
    for k in range(count):
        start, end = offsets[k], ends[k]
        if start < table_end or end > index_size:
            continue  # in the table (read whole), or check 7's failure
        r = range_of.get(k)
        if r is None:
            new = table_end  # an empty name at table_end: it needs no bytes
        else:
            new = bases[r] + (start - starts[r])
        moved[k * ENTRY_SIZE:k * ENTRY_SIZE + 4] = new.to_bytes(4, "little")
    return bytes(moved), b"".join(parts)


def _column(table: bytes, at: int, width: int) -> memoryview | list[int]:
    """The little-endian field of `width` bytes at byte `at` of every entry."""
    if sys.byteorder != "little":  # pragma: no cover - no big-endian machine here
        return [int.from_bytes(table[k:k + width], "little")
                for k in range(at, len(table), ENTRY_SIZE)]
    return memoryview(table).cast(_FORMAT_OF_WIDTH[width])[at // width::ENTRY_SIZE // width]


def _name_ranges(table: bytes) -> tuple[memoryview | list[int], list[int]]:
    offsets = _column(table, 0, 4)
    return offsets, list(map(int.__add__, offsets, _column(table, 4, 2)))


# Check 7 in Python: one walk of the entries, in the engine's order, that
# raises the first failure in its words and builds the name -> slot dict as
# it goes (the C pass, when bound, accepts the same indexes and hands every
# failure here). It replaced a vectorised pass (memoryview columns, min/max)
# that a second walk followed to word a failure, and is faster than that
# pass was alone (40 ms against 48 at 100,000 entries). Pure Python first
# read (load_resident_index, timeit best of 9, 2-core shared VM): 866
# entries 420 us (was 550), 100,000 entries 75 ms (was 87). The three plane
# tests are written out, not looped over: a loop over the planes cost 17 ms
# more at 100,000 entries.
def _validated_names(region: bytes, table: bytes, index_size: int,
                     resident_end: int) -> dict[bytes, int]:
    """Check 7 for every entry; the names (canonical UTF-8) keyed to their
    entry positions."""
    # Iterated as memoryview columns, not lists: .tolist() on the eight cost
    # 20 ms more at 100,000 entries.
    columns = [_column(table, at, width) for at, width in _CHECKED_FIELDS]
    slot_by_name: dict[bytes, int] = {}
    for k, (start, length, payload, payload_size, scale, scale_size, bias,
            bias_size) in enumerate(zip(*columns)):
        stop = start + length
        if start < HEADER_SIZE or stop > index_size:
            raise _corrupt("name_out_of_range", i=k, start=start, stop=stop,
                           index_size=index_size)
        name = region[start:stop]
        # A plane of size 0 is accepted wherever it claims to be; any other
        # lies inside [index_size, resident_end).
        if payload_size and not index_size <= payload <= resident_end - payload_size:
            raise _plane_out_of_range("payload", k, name, payload, payload_size,
                                      index_size, resident_end)
        if scale_size and not index_size <= scale <= resident_end - scale_size:
            raise _plane_out_of_range("scale_plane", k, name, scale, scale_size,
                                      index_size, resident_end)
        if bias_size and not index_size <= bias <= resident_end - bias_size:
            raise _plane_out_of_range("bias_plane", k, name, bias, bias_size,
                                      index_size, resident_end)
        # ASCII names (every real install) are their own canonical form. The
        # engine decodes leniently; two different invalid byte strings can
        # decode to the same name, and that is a duplicate.
        if not name.isascii():
            name = name.decode("utf-8", "replace").encode("utf-8")
        if name in slot_by_name:
            raise _corrupt("duplicate_name", name=name.decode("utf-8"))
        slot_by_name[name] = k
    return slot_by_name


def _plane_out_of_range(what: str, k: int, name: bytes, offset: int, size: int,
                        index_size: int, resident_end: int) -> ResidentIndexError:
    return _corrupt(what + "_out_of_range", i=k, name=name.decode("utf-8", "replace"),
                    offset=offset, size=size, index_size=index_size, end=resident_end)
