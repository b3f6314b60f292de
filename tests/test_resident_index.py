"""The resident-index reader: every check of docs/ENGINE.md section 1, in the engine's
order, each tripped by a hand-crafted file; hostile files; byte accounting;
and property tests against a plain reference reader."""

from __future__ import annotations

import errno
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import turbospark_ffi.resident_index as ri
from engine_texts import CORRUPT, corrupt, io_failed
from installs import (CHECK_TAGS, ENTRY, HEADER, U64_MAX, CountingPread, base_file,
                      get_entry, get_header, raw_index, reference_read, set_entry, set_header,
                      write_bytes)
from turbospark_ffi.errors import ResidentIndexError
from turbospark_ffi.install_writer import MTP_HEAD_TENSORS, TensorSpec, write_install
from turbospark_ffi.resident_index import (ResidentIndex, install_has_dflash,
                                           install_has_mtp_head, load_resident_index)


@pytest.fixture(autouse=True, params=["python", "c"])
def reader(request):
    """Every test here runs against both readers: the Python pass alone and
    the C pass the library binds in (tsffi_index_scan.c), which must accept
    exactly what the Python pass accepts and hand every refusal back to it."""
    saved = ri._native
    if request.param == "c":
        ri.use_native_scan(*request.getfixturevalue("native_scan"))
    else:
        ri.use_native_scan(None, None)
    yield request.param
    ri._native = saved


def load_bytes(tmp_path, data, name="model_weights.bin"):
    return load_resident_index(write_bytes(tmp_path / name, data))


def refused(tmp_path, data, check):
    with pytest.raises(ResidentIndexError) as info:
        load_bytes(tmp_path, data)
    assert info.value.check == check, str(info.value)
    return str(info.value)


# --------------------------------------------------------------------------
# The base file is valid: every case below starts from a file that reads.

def test_base_file_reads(tmp_path):
    data = base_file()
    assert reference_read(bytes(data)) == ("ok", ["a.weight", "b.weight", "mtp.fc.weight"])
    index = load_bytes(tmp_path, data)
    assert isinstance(index, ResidentIndex)
    assert index.names == ("a.weight", "b.weight", "mtp.fc.weight")
    assert len(index) == 3 and index.entry_count == 3
    assert index.index_size == get_header(data, "index_size")
    assert index.resident_size == get_header(data, "resident_size")
    assert install_has_mtp_head(index) and not install_has_dflash(index)
    e = index.entry("a.weight")
    assert e.dtype == 4 and e.size_bytes == 64 and e.shape == (64, 1, 1, 1)
    assert e.file_offset == index.index_size and e.scale_size == 8 and e.bias_size == 8
    assert index.entry("nope") is None and index.dtype_of("b.weight") == 1


# --------------------------------------------------------------------------
# Checks 1..7, each tripped alone.

@pytest.mark.parametrize("size", [0, 1, 23])
def test_check1_shorter_than_header(tmp_path, size):
    msg = refused(tmp_path, bytes(base_file()[:size]), "short_header")
    assert msg == corrupt("short_header") == CORRUPT + "short read for IndexHeader"


@pytest.mark.parametrize("index_size", [0, 1, 23])
def test_check2_index_size_below_header(tmp_path, index_size):
    data = set_header(base_file(), "index_size", index_size)
    msg = refused(tmp_path, data, "index_size_below_header")
    assert msg == corrupt("index_size_below_header", index_size=index_size)


def test_check3_entry_count_times_72_overflows(tmp_path):
    data = set_header(base_file(), "entry_count", 2**63)
    msg = refused(tmp_path, data, "entry_count_overflow")
    assert msg == corrupt("entry_count_overflow", entry_count=2**63)


def test_check3_header_plus_table_overflows(tmp_path):
    count = (U64_MAX // ENTRY)  # count * 72 fits; + 24 does not
    assert count * ENTRY <= U64_MAX < HEADER + count * ENTRY
    data = set_header(base_file(), "entry_count", count)
    msg = refused(tmp_path, data, "entry_table_overflow")
    assert msg == corrupt("entry_table_overflow")


def test_check4_entry_table_past_index_size(tmp_path):
    data = base_file()
    index_size = get_header(data, "index_size")
    count = (index_size - HEADER) // ENTRY + 1  # one entry too many
    set_header(data, "entry_count", count)
    msg = refused(tmp_path, data, "entry_table_past_index")
    assert msg == corrupt("entry_table_past_index", table_end=HEADER + ENTRY * count,
                          index_size=index_size)


def test_check4_boundary_table_exactly_filling_index(tmp_path):
    # Table end == indexSize is allowed (no names needed for zero entries).
    data = bytearray(struct.pack("<QQQ", HEADER, 0, 0))
    index = load_bytes(tmp_path, data)
    assert len(index) == 0 and index.names == ()


def test_check5_index_plus_resident_overflows(tmp_path):
    data = bytearray(struct.pack("<QQQ", U64_MAX, 1, 0))
    msg = refused(tmp_path, data, "resident_end_overflow")
    assert msg == corrupt("resident_end_overflow")


@pytest.mark.parametrize("extra", [1, 4096, 2**40])
def test_check5_resident_region_past_file(tmp_path, extra):
    data = base_file()
    index_size = get_header(data, "index_size")
    resident = get_header(data, "resident_size") + extra
    set_header(data, "resident_size", resident)
    msg = refused(tmp_path, data, "resident_end_past_file")
    assert msg == corrupt("resident_end_past_file", index_size=index_size,
                          resident_size=resident, end=index_size + resident, length=len(data))


def test_check5_index_larger_than_file(tmp_path):
    data = set_header(base_file(), "index_size", 10**12)
    resident = get_header(data, "resident_size")
    msg = refused(tmp_path, data, "resident_end_past_file")
    assert msg == corrupt("resident_end_past_file", index_size=10**12, resident_size=resident,
                          end=10**12 + resident, length=len(data))


def test_check5_trailing_bytes_are_allowed(tmp_path):
    data = base_file(trailing=b"\xaa" * 1000)
    assert load_bytes(tmp_path, data).names == ("a.weight", "b.weight", "mtp.fc.weight")


def _shrinking_pread(path: Path, shrink_to: int, after_calls: int):
    """os.pread that truncates the REAL file after `after_calls` reads: the
    file shrinking while it is read (the only way check 6 can trip once
    check 5 has bounded everything by the file's length)."""
    real = os.pread
    calls = [0]

    def pread(fd, length, offset):
        if calls[0] == after_calls:
            os.truncate(path, shrink_to)
        calls[0] += 1
        return real(fd, length, offset)
    return pread


def test_check6_entry_table_cannot_be_read_in_full(tmp_path, monkeypatch):
    path = write_bytes(tmp_path / "model_weights.bin", base_file())
    monkeypatch.setattr(ri.os, "pread", _shrinking_pread(path, HEADER + 10, 1))
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(path)
    assert (info.value.check, str(info.value)) == ("short_read", corrupt("short_read"))


def test_check6_names_cannot_be_read_in_full(tmp_path, monkeypatch):
    data = base_file()
    table_end = HEADER + 3 * ENTRY
    path = write_bytes(tmp_path / "model_weights.bin", data)
    monkeypatch.setattr(ri.os, "pread", _shrinking_pread(path, table_end + 3, 2))
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(path)
    assert (info.value.check, str(info.value)) == ("short_read", corrupt("short_read"))


@pytest.mark.parametrize("name_offset, name_length", [
    (0, 8), (23, 8),            # starts inside the header
    (None, 10**4),              # runs past indexSize
    ("end", 1),                 # starts at indexSize
])
def test_check7_name_outside_index_region(tmp_path, name_offset, name_length):
    data = base_file()
    index_size = get_header(data, "index_size")
    if name_offset is None:
        name_offset = get_entry(data, 1, "name_offset")
    elif name_offset == "end":
        name_offset = index_size
    name_length = min(name_length, 0xFFFF)
    set_entry(data, 1, "name_offset", name_offset)
    set_entry(data, 1, "name_length", name_length)
    msg = refused(tmp_path, data, "name_out_of_range")
    assert msg == corrupt("name_out_of_range", i=1, start=name_offset,
                          stop=name_offset + name_length, index_size=index_size)


def test_check7_name_boundaries_accepted(tmp_path):
    data = base_file()
    index_size = get_header(data, "index_size")
    # The last name already ends exactly at indexSize (alignment 0).
    last = get_entry(data, 2, "name_offset") + get_entry(data, 2, "name_length")
    assert last == index_size
    # A name may start at byte 24 (inside the entry table; decoded leniently).
    set_entry(data, 1, "name_offset", 24)
    set_entry(data, 1, "name_length", 4)
    index = load_bytes(tmp_path, data)
    assert len(index.names) == 3 and index.names[1] == bytes(data[24:28]).decode("utf-8", "replace")


@pytest.mark.parametrize("plane, off_field, size_field, check", [
    ("payload", "file_offset", "size_bytes", "payload_out_of_range"),
    ("scale plane", "scale_offset", "scale_size", "scale_plane_out_of_range"),
    ("bias plane", "bias_offset", "bias_size", "bias_plane_out_of_range"),
])
@pytest.mark.parametrize("where", ["before", "after", "straddles_end", "one_byte_past_end", "huge"])
def test_check7_plane_outside_resident_region(tmp_path, plane, off_field, size_field,
                                              check, where):
    data = base_file()
    index_size = get_header(data, "index_size")
    end = index_size + get_header(data, "resident_size")
    offset, size = {"before": (index_size - 1, 8), "after": (end, 8),
                    "straddles_end": (end - 4, 8),
                    # The smallest overrun: [end - 7, end + 1). The C pass's bound
                    # `size <= resident_end - offset` made `<= ... + 1` survives
                    # every other row here (each overruns by 4 or more).
                    "one_byte_past_end": (end - 7, 8), "huge": (U64_MAX, U64_MAX)}[where]
    set_entry(data, 0, off_field, offset)
    set_entry(data, 0, size_field, size)
    msg = refused(tmp_path, data, check)
    assert msg == corrupt(check, i=0, name="a.weight", offset=offset, size=size,
                          index_size=index_size, end=end)
    assert msg == (f"{CORRUPT}entry 0 (a.weight) {plane} [{offset}, +{size}) outside the "
                   f"resident region [{index_size}, {end})")


@pytest.mark.parametrize("off_field, size_field", [
    ("file_offset", "size_bytes"), ("scale_offset", "scale_size"), ("bias_offset", "bias_size")])
def test_check7_plane_boundaries_accepted(tmp_path, off_field, size_field):
    data = base_file()
    index_size = get_header(data, "index_size")
    end = index_size + get_header(data, "resident_size")
    for offset, size in ((index_size, 1), (end - 1, 1), (index_size, end - index_size)):
        set_entry(data, 0, off_field, offset)
        set_entry(data, 0, size_field, size)
        assert load_bytes(tmp_path, data).names[0] == "a.weight"


@pytest.mark.parametrize("offset", [0, 1, 23, "inside", "end", U64_MAX])
@pytest.mark.parametrize("off_field, size_field", [
    ("file_offset", "size_bytes"), ("scale_offset", "scale_size"), ("bias_offset", "bias_size")])
def test_zero_size_planes_are_accepted_anywhere(tmp_path, offset, off_field, size_field):
    data = base_file()
    index_size = get_header(data, "index_size")
    offset = {"inside": index_size + 1,
              "end": index_size + get_header(data, "resident_size")}.get(offset, offset)
    for k in range(3):
        set_entry(data, k, off_field, offset)
        set_entry(data, k, size_field, 0)
    assert load_bytes(tmp_path, data).names == ("a.weight", "b.weight", "mtp.fc.weight")


def test_check7_duplicate_name(tmp_path):
    data = base_file()
    # Entry 2 points at entry 0's name.
    set_entry(data, 2, "name_offset", get_entry(data, 0, "name_offset"))
    set_entry(data, 2, "name_length", get_entry(data, 0, "name_length"))
    msg = refused(tmp_path, data, "duplicate_name")
    assert msg == corrupt("duplicate_name", name="a.weight")


def test_duplicate_empty_names(tmp_path):
    data = raw_index([b"", b"x", b""])
    assert reference_read(bytes(data)) == ("error", "duplicate_name")
    # The engine names the name, empty here: the message ends in "name ".
    assert refused(tmp_path, data, "duplicate_name") == corrupt("duplicate_name", name="")


# --------------------------------------------------------------------------
# Check ORDER: a file failing two checks reports the earlier one.

ORDER_CASES = [
    # (description, header fields, expected check)
    ("2 before 4 and 5", dict(index_size=0, entry_count=10**6, resident_size=2**60),
     "index_size_below_header"),
    ("3 before 4 and 5", dict(index_size=HEADER, entry_count=2**63, resident_size=2**60),
     "entry_count_overflow"),
    ("3b before 4 and 5", dict(index_size=HEADER, entry_count=U64_MAX // ENTRY,
                               resident_size=2**62), "entry_table_overflow"),
    ("4 before 5", dict(index_size=HEADER + ENTRY, entry_count=2, resident_size=U64_MAX),
     "entry_table_past_index"),
    ("5 overflow before 5 past file", dict(index_size=U64_MAX, entry_count=0,
                                           resident_size=U64_MAX), "resident_end_overflow"),
]


@pytest.mark.parametrize("fields, check", [c[1:] for c in ORDER_CASES],
                         ids=[c[0] for c in ORDER_CASES])
def test_check_order_header(tmp_path, fields, check):
    data = base_file()
    for k, v in fields.items():
        set_header(data, k, v)
    assert reference_read(bytes(data)) == ("error", check)
    refused(tmp_path, data, check)


def test_check_order_1_before_everything(tmp_path):
    # 23 bytes whose header fields (as far as they go) are hostile too.
    refused(tmp_path, b"\xff" * 23, "short_header")


def test_check_order_5_before_7(tmp_path):
    data = base_file()
    set_entry(data, 0, "name_offset", 0)           # check 7
    set_entry(data, 1, "file_offset", 0)           # check 7
    set_header(data, "resident_size", 2**40)       # check 5
    refused(tmp_path, data, "resident_end_past_file")


def test_check_order_6_before_7(tmp_path, monkeypatch):
    data = base_file()
    set_entry(data, 0, "name_offset", 0)           # check 7 on entry 0
    path = write_bytes(tmp_path / "model_weights.bin", data)
    monkeypatch.setattr(ri.os, "pread", _shrinking_pread(path, HEADER + 5, 1))
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(path)
    assert info.value.check == "short_read"


def test_check_order_8_open_before_anything(tmp_path):
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(tmp_path / "missing" / "model_weights.bin")
    assert info.value.check == "open"
    assert str(info.value) == io_failed("open", errno.ENOENT)


# Per entry: name, then payload, then scale, then bias, then duplicate; and
# the FIRST failing entry is the one reported.
def _bad(data, k, what):
    index_size = get_header(data, "index_size")
    if what == "name":
        set_entry(data, k, "name_offset", 1)
    elif what == "payload":
        set_entry(data, k, "file_offset", 2)
    elif what == "scale":
        set_entry(data, k, "scale_offset", 3)
        set_entry(data, k, "scale_size", 1)
    elif what == "bias":
        set_entry(data, k, "bias_offset", 4)
        set_entry(data, k, "bias_size", 1)
    elif what == "dup":  # k's name becomes entry 0's
        set_entry(data, k, "name_offset", get_entry(data, 0, "name_offset"))
        set_entry(data, k, "name_length", get_entry(data, 0, "name_length"))
    assert index_size == get_header(data, "index_size")
    return data


TAG = {"name": "name_out_of_range", "payload": "payload_out_of_range",
       "scale": "scale_plane_out_of_range", "bias": "bias_plane_out_of_range",
       "dup": "duplicate_name"}


@pytest.mark.parametrize("first, second", [
    ("name", "payload"), ("name", "scale"), ("name", "bias"), ("payload", "scale"),
    ("payload", "bias"), ("scale", "bias"), ("payload", "dup"), ("bias", "dup"),
    ("name", "dup")])
def test_per_entry_check_order_within_one_entry(tmp_path, first, second):
    data = base_file()
    _bad(data, 2, second)
    _bad(data, 2, first)
    assert reference_read(bytes(data)) == ("error", TAG[first])
    msg = refused(tmp_path, data, TAG[first])
    assert msg.startswith(CORRUPT + "entry 2 ")


@pytest.mark.parametrize("early, late", [
    ("bias", "name"), ("payload", "name"), ("dup", "name"), ("name", "payload"),
    ("scale", "payload")])
def test_first_failing_entry_is_reported(tmp_path, early, late):
    names = [f"t{k}.weight".encode() for k in range(6)]
    data = raw_index(names, planes={k: ((100, 4), (200, 4)) for k in range(6)})
    assert reference_read(bytes(data))[0] == "ok"
    _bad(data, 4, late)
    _bad(data, 2 if early != "dup" else 3, early)
    assert reference_read(bytes(data)) == ("error", TAG[early])
    msg = refused(tmp_path, data, TAG[early])
    if early == "dup":  # entry 3 repeats entry 0's name; the engine names the name
        assert msg == corrupt("duplicate_name", name="t0.weight")
    else:
        assert msg.startswith(CORRUPT + "entry 2 ")


# --------------------------------------------------------------------------
# Names: lenient UTF-8.

def test_invalid_utf8_names_are_replaced(tmp_path):
    data = raw_index([b"ok.weight", b"bad\xff.weight", "caf\u00e9".encode()])
    index = load_bytes(tmp_path, data)
    assert index.names == ("ok.weight", "bad\ufffd.weight", "caf\u00e9")
    assert "bad\ufffd.weight" in index
    assert index.entry("bad\ufffd.weight").size_bytes == 16


@pytest.mark.parametrize("a, b", [
    (b"x\xff", b"x\xfe"),               # two different invalid bytes
    (b"x\xff", "x\ufffd".encode()),     # invalid vs the replacement char itself
    (b"x\xc3", b"x\xe2\x82"),           # two different truncated sequences
])
def test_names_that_decode_the_same_are_a_duplicate(tmp_path, a, b):
    assert a != b and a.decode("utf-8", "replace") == b.decode("utf-8", "replace")
    data = raw_index([b"first", a, b])
    msg = refused(tmp_path, data, "duplicate_name")
    assert msg == corrupt("duplicate_name", name=a.decode("utf-8", "replace"))


def test_presence_predicates_are_exact_names(tmp_path):
    for names, mtp, dflash in [
        ([b"mtp.fc.weight"], True, False),
        ([b"dflash.fc.weight"], False, True),
        ([b"mtp.fc.weight", b"dflash.fc.weight"], True, True),
        ([b"mtp.fc.weight\xff", b"MTP.fc.weight", b"mtp.fc.weight ", b"x.mtp.fc.weight",
          b"mtp.fc.bias", b"dflash.fc.weigh", b"mtp.norm.weight"], False, False),
    ]:
        index = load_bytes(tmp_path, raw_index(names))
        assert install_has_mtp_head(index) is mtp
        assert install_has_dflash(index) is dflash


def test_partial_mtp_head_without_fc_is_not_a_head(tmp_path):
    d = write_install(tmp_path / "p", mtp_tensors=MTP_HEAD_TENSORS[1:])
    index = load_resident_index(d / "model_weights.bin")
    assert "mtp.norm.weight" in index and not install_has_mtp_head(index)
    d = write_install(tmp_path / "q", mtp_tensors=MTP_HEAD_TENSORS[:1])
    assert install_has_mtp_head(load_resident_index(d / "model_weights.bin"))


def test_real_sized_install_entry_counts(tmp_path):
    # docs/ENGINE.md section 1: the real dense 27B has 851 entries without its head, 866 with.
    with_head = load_resident_index(write_install(tmp_path / "a", layers=64, mtp=True)
                                    / "model_weights.bin")
    without = load_resident_index(write_install(tmp_path / "b", layers=64)
                                  / "model_weights.bin")
    assert (len(with_head), len(without)) == (866, 851)
    assert with_head.index_size % 16384 == 0


# --------------------------------------------------------------------------
# Hostile files: each a prompt ResidentIndexError.

@pytest.mark.parametrize("kind", ["directory", "dev_zero", "dev_urandom", "missing",
                                  "dangling_symlink", "symlink_loop", "not_a_dir", "nul"])
def test_hostile_paths(tmp_path, kind):
    p = tmp_path / "model_weights.bin"
    check = "not_regular_file"
    if kind == "directory":
        p.mkdir()
    elif kind == "dev_zero":
        p.symlink_to("/dev/zero")
    elif kind == "dev_urandom":
        p.symlink_to("/dev/urandom")
    elif kind == "missing":
        check = "open"
    elif kind == "dangling_symlink":
        p.symlink_to(tmp_path / "nowhere")
        check = "open"
    elif kind == "symlink_loop":
        p.symlink_to(p)
        check = "open"
    elif kind == "not_a_dir":
        (tmp_path / "file").write_bytes(b"x")
        p = tmp_path / "file" / "model_weights.bin"
        check = "open"
    elif kind == "nul":
        p = str(p) + "\x00x"
        check = "open"
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(p)
    assert info.value.check == check
    assert "failed" in str(info.value)


def test_fifo_is_refused_without_blocking(tmp_path):
    """Run in a child process so that a reader that blocks on the FIFO makes
    this test fail (the child is killed) instead of hanging the suite."""
    fifo = tmp_path / "model_weights.bin"
    os.mkfifo(fifo)
    code = ("import sys; from turbospark_ffi.resident_index import load_resident_index\n"
            "from turbospark_ffi.errors import ResidentIndexError\n"
            "try:\n    load_resident_index(sys.argv[1])\n"
            "except ResidentIndexError as e:\n    print(e.check, '|', e)\n")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True,
                         text=True, timeout=120, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("not_regular_file | ") and "a FIFO" in out.stdout


@pytest.mark.parametrize("header", [
    struct.pack("<QQQ", 2**62, 0, 2**63),          # 2^63 entries
    struct.pack("<QQQ", 2**62, 0, 2**50),          # a huge table that does not overflow
    struct.pack("<QQQ", 2**40, 2**40, 1000),       # an index far larger than the file
    struct.pack("<QQQ", U64_MAX, 0, (U64_MAX - 24) // 72),
])
def test_hostile_headers_read_nothing_past_the_header(tmp_path, monkeypatch, header):
    counter = CountingPread(os.pread)
    monkeypatch.setattr(ri.os, "pread", counter)
    with pytest.raises(ResidentIndexError) as info:
        load_bytes(tmp_path, header + bytes(1000))
    assert info.value.check in CHECK_TAGS
    # Nothing but the header was asked for: no allocation sized by the header.
    assert counter.bytes_requested == HEADER and counter.bytes_read == HEADER


# --------------------------------------------------------------------------
# Byte accounting: the index region only, never the tensor data.

def test_sparse_14gb_reads_what_a_100kb_one_reads(tmp_path, monkeypatch):
    small = write_install(tmp_path / "small", layers=40, mtp=True) / "model_weights.bin"
    big = write_install(tmp_path / "big", layers=40, mtp=True,
                        resident_size=14 * 2**30) / "model_weights.bin"
    # The fixtures discriminate: same index, wildly different files.
    assert small.stat().st_size < 150_000
    assert big.stat().st_size > 14 * 2**30
    assert big.stat().st_blocks * 512 < 10 * 2**20  # sparse: a hole, not 14 GB of disk
    with open(big, "rb") as f, open(small, "rb") as g:
        big_head, small_head = f.read(24), g.read(24)
    assert big_head[16:24] == small_head[16:24] and big_head[0:8] == small_head[0:8]

    counts = {}
    for name, path in (("small", small), ("big", big)):
        counter = CountingPread(os.pread)
        monkeypatch.setattr(ri.os, "pread", counter)
        index = load_resident_index(path)
        monkeypatch.undo()
        assert install_has_mtp_head(index)
        assert counter.bytes_read == index.bytes_read
        # Everything read lies inside the index region.
        assert all(off + length <= index.index_size for length, off in counter.calls)
        counts[name] = counter.bytes_read
    assert counts["small"] == counts["big"]
    assert counts["big"] <= load_resident_index(big).index_size


# One name 4 GiB into a sparse index region (issue 40, item 4): nameOffset is
# a u32, so this is as far as a name can lie. Written out: the header, two
# entries, "a.weight" right after the table and "mtp.fc.weight" at FAR; the
# region's 4 GiB between them is a hole.
FAR = 2**32 - 64
FAR_INDEX_SIZE = 2**32 + 4096


def far_name_file(path, second_name=b"mtp.fc.weight"):
    import struct
    table_end = HEADER + 2 * ENTRY
    names = [(b"a.weight", table_end), (second_name, FAR)]
    with open(path, "wb") as f:
        f.write(struct.pack("<3Q", FAR_INDEX_SIZE, 16, 2))
        for k, (name, at) in enumerate(names):
            # nameOffset, nameLength, dtype 1, reserved; payload [index + 8k, +8);
            # shape (8, 0, 0, 0); no scale or bias plane.
            f.write(struct.pack("<IHBBQQ4IQQQQ", at, len(name), 1, 0,
                                FAR_INDEX_SIZE + 8 * k, 8, 8, 0, 0, 0, 0, 0, 0, 0))
        f.write(names[0][0])
        f.seek(FAR)
        f.write(names[1][0])
        f.truncate(FAR_INDEX_SIZE + 16)
    return path


def test_a_name_4_gib_into_the_region_reads_what_the_file_holds(tmp_path, monkeypatch):
    path = far_name_file(tmp_path / "model_weights.bin")
    assert path.stat().st_size == FAR_INDEX_SIZE + 16
    assert path.stat().st_blocks * 512 < 1 << 20  # a hole, not 4 GiB of disk
    counter = CountingPread(os.pread)
    monkeypatch.setattr(ri.os, "pread", counter)
    index = load_resident_index(path)
    assert index.names == ("a.weight", "mtp.fc.weight")
    assert install_has_mtp_head(index) and not install_has_dflash(index)
    assert index.entry("mtp.fc.weight").file_offset == FAR_INDEX_SIZE + 8
    # Read: the header, the table, and the two names' ranges (the first one
    # up to _GAP_READ long at most) -- not the 4 GiB up to the far name.
    assert counter.calls[:2] == [(HEADER, 0), (2 * ENTRY, HEADER)]
    assert counter.calls[2:] == [(len("a.weight"), HEADER + 2 * ENTRY),
                                 (len("mtp.fc.weight"), FAR)]
    assert index.bytes_read == HEADER + 2 * ENTRY + len("a.weightmtp.fc.weight")


def test_a_far_name_s_failure_is_worded_as_before(tmp_path):
    """A duplicate found through the far name: the error text names it as the
    block read did (the far name's bytes are the name's bytes)."""
    path = far_name_file(tmp_path / "model_weights.bin", second_name=b"a.weight")
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(path)
    assert info.value.check == "duplicate_name"
    assert str(info.value) == f"{CORRUPT}duplicate tensor name a.weight"


def test_padding_is_not_read(tmp_path, monkeypatch):
    # An index padded to a huge (sparse) region: only header+table+names read.
    tensors = [TensorSpec("a.weight"), TensorSpec("mtp.fc.weight")]
    from turbospark_ffi.install_writer import encode_index
    region, resident = encode_index(tensors, alignment=2**22)
    p = tmp_path / "model_weights.bin"
    with open(p, "wb") as f:
        f.write(region[:4096])
        f.truncate(len(region) + resident)
    counter = CountingPread(os.pread)
    monkeypatch.setattr(ri.os, "pread", counter)
    index = load_resident_index(p)
    assert index.index_size == 2**22
    assert counter.bytes_read == HEADER + 2 * ENTRY + len("a.weightmtp.fc.weight")


# --------------------------------------------------------------------------
# Property tests: random and mutated bytes. Either an index or the package's
# error, never anything else; and the same verdict as the reference reader.

@pytest.fixture(scope="module")
def fuzz_path(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "model_weights.bin"


BASE = bytes(base_file())
BASE_COUNT = 3
INTERESTING = st.sampled_from([0, 1, 23, 24, 25, 71, 72, len(BASE) - 1, len(BASE),
                               len(BASE) + 1, 2**32 - 1, 2**32, 2**63, U64_MAX - 23,
                               U64_MAX // ENTRY, U64_MAX])
U64 = st.one_of(INTERESTING, st.integers(0, U64_MAX), st.integers(0, 2 * len(BASE)))
U32 = st.one_of(st.sampled_from([0, 23, 24, 2**32 - 1]), st.integers(0, 2**32 - 1),
                st.integers(0, 2 * len(BASE)))


def _entry_u64_offsets():
    return [HEADER + k * ENTRY + f for k in range(BASE_COUNT) for f in (8, 16, 40, 48, 56, 64)]


MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, len(BASE) * 8 - 1)),
    st.tuples(st.just("truncate"), st.integers(0, len(BASE))),
    st.tuples(st.just("header"), st.sampled_from([0, 8, 16]), U64),
    st.tuples(st.just("entry64"), st.sampled_from(_entry_u64_offsets()), U64),
    st.tuples(st.just("name32"), st.sampled_from([HEADER + k * ENTRY
                                                  for k in range(BASE_COUNT)]), U32),
    st.tuples(st.just("len16"), st.sampled_from([HEADER + k * ENTRY + 4
                                                 for k in range(BASE_COUNT)]),
              st.integers(0, 0xFFFF)),
    st.tuples(st.just("append"), st.binary(max_size=64)),
)


def _apply(data: bytearray, mutation) -> bytearray:
    kind = mutation[0]
    if kind == "flip":
        bit = mutation[1]
        if bit // 8 < len(data):
            data[bit // 8] ^= 1 << (bit % 8)
    elif kind == "truncate":
        del data[mutation[1]:]
    elif kind in ("header", "entry64"):
        at, value = mutation[1], mutation[2]
        if at + 8 <= len(data):
            data[at:at + 8] = value.to_bytes(8, "little")
    elif kind == "name32":
        at, value = mutation[1], mutation[2]
        if at + 4 <= len(data):
            data[at:at + 4] = value.to_bytes(4, "little")
    elif kind == "len16":
        at, value = mutation[1], mutation[2]
        if at + 2 <= len(data):
            data[at:at + 2] = value.to_bytes(2, "little")
    elif kind == "append":
        data += mutation[1]
    return data


LAYER_PREFIX = "language_model.model.layers."
SELF_ATTN = ".self_attn."


def reference_facts(names: list[str]) -> tuple:
    """What a plan asks of every name, worked out plainly from the names:
    the two presence tests and the first self-attention layer (the text
    between the prefix and the first ".self_attn.", ASCII digits)."""
    layers = []
    for name in names:
        if name.startswith(LAYER_PREFIX) and SELF_ATTN in name:
            number = name[len(LAYER_PREFIX):name.find(SELF_ATTN)]
            if number.isascii() and number.isdigit():
                layers.append(int(number))
    return ("mtp.fc.weight" in names, "dflash.fc.weight" in names, min(layers, default=None))


def reference(data) -> tuple:
    verdict = reference_read(bytes(data))
    return verdict + (reference_facts(verdict[1]),) if verdict[0] == "ok" else verdict


def _verdict(path, data):
    path.write_bytes(bytes(data))
    try:
        index = load_resident_index(path)
    except ResidentIndexError as exc:
        assert exc.check in CHECK_TAGS
        message = str(exc)
        assert message.startswith(CORRUPT) or " failed: " in message
        return "error", exc.check
    assert isinstance(index, ResidentIndex)
    # Asked before anything lists the names: a C-read index answers these
    # from its pass, not from the names.
    facts = (install_has_mtp_head(index), install_has_dflash(index),
             index.first_self_attn_layer())
    assert len(index.names) == index.entry_count == len(set(index.names))
    assert index.bytes_read <= len(data)
    return "ok", list(index.names), facts


FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@pytest.fixture(params=["block", "packed"])
def name_reads(request, monkeypatch):
    """The names read as one block (every install under 16 MiB of names), or
    range by range with the table re-pointed (`_packed_names`, what a sparse
    index region gets): every property below holds for both, so packing
    changes no verdict, name, fact or error text."""
    if request.param == "packed":
        monkeypatch.setattr(ri, "_SPARSE_FROM", -1)
    return request.param


@FUZZ
@given(st.lists(MUTATION, min_size=1, max_size=4))
@pytest.mark.usefixtures("name_reads")
def test_mutated_index_matches_reference(fuzz_path, mutations):
    data = bytearray(BASE)
    for m in mutations:
        _apply(data, m)
    assert _verdict(fuzz_path, data) == reference(data)


@FUZZ
@given(st.binary(max_size=600))
@pytest.mark.usefixtures("name_reads")
def test_random_bytes_matches_reference(fuzz_path, data):
    assert _verdict(fuzz_path, data) == reference(data)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=6), min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["name", "payload", "scale",
                                                              "bias", "dup"])), max_size=3))
@pytest.mark.usefixtures("name_reads")
def test_random_names_and_entry_faults_match_reference(fuzz_path, names, faults):
    """Many-entry files with arbitrary (often invalid UTF-8, often colliding)
    names and faults in random entries: the reader must name the same first
    failure as a plain in-order walk."""
    data = raw_index(names, planes={k: ((0, 4), (4, 4)) for k in range(len(names))})
    for k, what in faults:
        if k < len(names):
            _bad(data, k, what)
    assert _verdict(fuzz_path, data) == reference(data)


# --------------------------------------------------------------------------
# The C pass against the Python pass, directly: same verdict, same names,
# same lookups; and proof that the C pass is the one that answered.

def _both_verdicts(path, data, native):
    verdicts = []
    for chosen in (None, native):
        ri._native = chosen
        verdicts.append(_verdict(path, data))
    return verdicts


def _read_by_c(index) -> bool:
    # Only the C pass leaves the name -> slot dict unbuilt.
    return index._slot_by_name is None


def test_c_pass_answers_a_valid_ascii_index(tmp_path, native_scan):
    path = write_bytes(tmp_path / "model_weights.bin", BASE)
    ri.use_native_scan(*native_scan)
    by_c = load_resident_index(path)
    ri.use_native_scan(None, None)
    by_python = load_resident_index(path)
    # The fixture discriminates: the two paths are visibly different readers.
    assert _read_by_c(by_c) and not _read_by_c(by_python)
    assert by_c.names == by_python.names and by_c.bytes_read == by_python.bytes_read
    for name in by_python.names + ("absent", "", "a\nb", by_python.names[0][:-1]):
        assert (name in by_c) == (name in by_python)
        assert by_c.dtype_of(name) == by_python.dtype_of(name)
        assert by_c.entry(name) == by_python.entry(name)
    for fragment in (b".", b"weight", b"", b"zz", b"\n"):
        assert by_c.names_containing(fragment) == by_python.names_containing(fragment)


def test_c_pass_lookups_past_the_search_budget_use_the_dict(tmp_path, native_scan):
    names = [f"t.{k}.weight".encode() for k in range(40)]
    path = write_bytes(tmp_path / "model_weights.bin", raw_index(names))
    ri.use_native_scan(*native_scan)
    index = load_resident_index(path)
    assert _read_by_c(index)
    # Every name found at its own slot, the first few by searching the joined
    # names and the rest through the dict built when the budget ran out.
    for k, name in enumerate(names):
        assert index._slot(name) == k
    assert index._slot_by_name is not None and len(index._slot_by_name) == 40
    assert index._slot(b"t.40.weight") is None


@pytest.mark.parametrize("names, why", [
    ([b"caf\xc3\xa9", b"x"], "non-ASCII (canonicalised by Python)"),
    ([b"a\nb", b"a"], "a name holding a newline"),
])
def test_c_pass_hands_unusual_names_back(tmp_path, native_scan, names, why):
    path = write_bytes(tmp_path / "model_weights.bin", raw_index(names))
    ri.use_native_scan(*native_scan)
    index = load_resident_index(path)
    assert not _read_by_c(index), why
    assert index.name_bytes() == [n.decode("utf-8", "replace").encode() for n in names]


def test_c_pass_asks_for_room_when_names_share_bytes(tmp_path, native_scan):
    # Ten entries whose names are all slices of the same 12 bytes: valid and
    # distinct, and joined they need more room than the bytes they lie in.
    table = b"abcdefghijkl"
    names = [table[k:] for k in range(10)]
    data = raw_index(names)
    table_end = HEADER + 10 * ENTRY
    for k in range(10):
        set_entry(data, k, "name_offset", table_end + k)
    path = write_bytes(tmp_path / "model_weights.bin", data)
    ri.use_native_scan(*native_scan)
    by_c = load_resident_index(path)
    assert _read_by_c(by_c)
    # The fixture discriminates: the reader read only the 12 shared bytes past
    # the table, and the first guess (those bytes plus one "\n" a name) is
    # too small, so the C pass had to ask for more.
    assert by_c.bytes_read == table_end + len(table)
    assert sum(len(n) + 1 for n in names) > len(table) + len(names)
    assert by_c.name_bytes() == names
    ri.use_native_scan(None, None)
    assert load_resident_index(path).name_bytes() == names


ASCII_NAME = st.binary(max_size=6).map(lambda b: bytes(c % 128 for c in b))


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(ASCII_NAME, min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["name", "payload", "scale",
                                                              "bias", "dup"])), max_size=3),
       st.lists(MUTATION, max_size=2))
def test_c_pass_and_python_passes_agree(fuzz_path, native_scan, names, faults, mutations):
    """ASCII names (the ones the C pass does not hand back), faults in random
    entries and random mutations: both readers give the same verdict."""
    data = raw_index(names, planes={k: ((0, 4), (4, 4)) for k in range(len(names))})
    for k, what in faults:
        if k < len(names):
            _bad(data, k, what)
    for m in mutations:
        _apply(data, m)
    by_python, by_c = _both_verdicts(fuzz_path, data, native_scan)
    assert by_c == by_python == reference(data)


@pytest.mark.parametrize("where, by_c", [
    ("in the entry table", True),      # the C pass reads it from the header + table
    ("straddling the table's end", False),  # handed back to the Python pass
])
def test_names_inside_the_index_region_but_not_the_string_table(tmp_path, native_scan,
                                                                 where, by_c):
    data = raw_index([b"alpha", b"beta"])
    table_end = HEADER + 2 * ENTRY
    # Entry 1 is renamed to two bytes of entry 0 (its dtype 1 and reserved 0:
    # ASCII) or to the last two bytes of the table plus the first two names'.
    offset, length = (HEADER + 6, 2) if by_c else (table_end - 2, 4)
    set_entry(data, 1, "name_offset", offset)
    set_entry(data, 1, "name_length", length)
    expected = [b"alpha", bytes(data[offset:offset + length])]
    path = write_bytes(tmp_path / "model_weights.bin", data)
    ri.use_native_scan(*native_scan)
    index = load_resident_index(path)
    assert _read_by_c(index) is by_c, where
    assert index.name_bytes() == expected
    ri.use_native_scan(None, None)
    assert load_resident_index(path).name_bytes() == expected


# --------------------------------------------------------------------------
# What the C pass answers beside the names (the presence tensors' slots, the
# first self-attention layer), against the Python pass and the plain rule,
# on names built to sit on every edge of the rule.

NAME_PIECES = st.tuples(
    st.sampled_from([LAYER_PREFIX, "language_model.model.layer.", "xlanguage_model.model.layers.",
                     ""]),
    st.sampled_from(["3", "0", "007", "12", "", "x", "1x", "99999999999999999999", "٣"]),
    st.sampled_from([SELF_ATTN, ".linear_attn.", ".self_attn", "self_attn.", ""]),
    st.sampled_from(["q_proj.weight", ".self_attn.k", "", "mtp.fc.weight"]),
).map(lambda p: "".join(p).encode())
FACT_NAME = st.one_of(NAME_PIECES, st.sampled_from([b"mtp.fc.weight", b"dflash.fc.weight",
                                                    b"mtp.fc.weigh", b"dflash.fc.weight\x00"]))


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(FACT_NAME, min_size=1, max_size=10, unique=True))
def test_c_pass_facts_match_python_and_the_rule(fuzz_path, native_scan, names):
    data = raw_index(names)
    by_python, by_c = _both_verdicts(fuzz_path, data, native_scan)
    assert by_c == by_python == reference(data)


FACT_CASES = [
    # names -> (has mtp, has dflash, first self-attention layer), and whether
    # the C pass answers (False: it hands the index back to Python)
    ([b"language_model.model.layers.7.self_attn.q", b"language_model.model.layers.3.self_attn.k"],
     (False, False, 3), True),
    ([b"language_model.model.layers.007.self_attn.q"], (False, False, 7), True),
    ([b"language_model.model.layers..self_attn.q"], (False, False, None), True),
    ([b"language_model.model.layers.3.linear_attn.q", b"mtp.layers.0.self_attn.q"],
     (False, False, None), True),
    ([b"language_model.model.layers.4.self_attn.self_attn.", b"mtp.fc.weight",
      b"dflash.fc.weight"], (True, True, 4), True),
    # A number past int64: the Python pass answers, exactly.
    ([b"language_model.model.layers.99999999999999999999.self_attn.q"],
     (False, False, 99999999999999999999), False),
    ([], (False, False, None), True),
]


@pytest.mark.parametrize("names, facts, by_c", FACT_CASES, ids=[str(i) for i in range(7)])
def test_c_pass_facts(tmp_path, native_scan, names, facts, by_c):
    path = write_bytes(tmp_path / "model_weights.bin", raw_index(names))
    for scan in (native_scan, None):
        ri.use_native_scan(*(scan or (None, None)))
        index = load_resident_index(path)
        assert _read_by_c(index) is (by_c and scan is not None)
        assert (install_has_mtp_head(index), install_has_dflash(index),
                index.first_self_attn_layer()) == facts
