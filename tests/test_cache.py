"""snapshots.snapshot's cache must be invisible: any change to model_weights.bin,
packed_experts/layout.json or manifest.json is seen on the next
speculation_plan call.

No sleeps and no timing assertions. Two tools make this deterministic:

* os.utime sets a file's mtime to an exact nanosecond value;
* the `aged` fixture replaces the clock snapshots.py reads with a constant one
  hour ahead, which is what "these files were written long ago" means to the
  racy-window rule (a file's ctime cannot be set, so this is the only way to
  get a TRUSTED snapshot without waiting). With it, the cache is shown to be
  live (`snapshot(d) is snapshot(d)`), so the invalidation tests below are
  tests of the key, not of the racy rule.
"""

from __future__ import annotations

import gc
import os
import traceback
import types
import weakref
from pathlib import Path

import pytest

import turbospark_ffi.snapshots as snapshots
from installs import mtp_specs, shape_of, write_custom_install, write_weights
from turbospark_ffi.errors import TurbosparkError
from turbospark_ffi.snapshots import MAX_CACHED_INSTALLS, RACY_WINDOW_NS, snapshot
from turbospark_ffi.install_writer import (TensorSpec, expert_layout_json, trunk_tensors,
                                           write_install)
from turbospark_ffi.options import parse_options
from turbospark_ffi.api import speculation_plan
from turbospark_ffi.policy import DFLASH_AUTO_NOTE
from turbospark_ffi.wire import plan_to_dict

SECOND = 1_000_000_000
MTP_ON = {"block": 2, "drafter": "mtp", "reason": None}
NOTE_OFF = {"block": None, "drafter": None, "reason": DFLASH_AUTO_NOTE}
DFLASH_ON = {"block": 2, "drafter": "dflash", "reason": None}
# The whole MTP head (the open builds it: its 15 names must be there), and a
# same-size DFlash2-only side: the presence tensor, and the head's other 14
# renamed out of the "mtp." namespace, so both indexes have the same length.
MTP_HEAD = mtp_specs()
DFLASH_SIDE = [TensorSpec("dflash.fc.weight", 4, 64, True)] + [
    TensorSpec("xtp." + t.name[4:], t.dtype, t.size, t.quantized) for t in MTP_HEAD[1:]]


def answer(d, options=""):
    return plan_to_dict(speculation_plan(str(d), parse_options(options)))["speculation"]


def weights(d):
    return Path(d) / "model_weights.bin"


def layout(d):
    return Path(d) / "packed_experts" / "layout.json"


def manifest(d):
    return Path(d) / "manifest.json"


def set_mtime(path, ns):
    os.utime(path, ns=(ns, ns))
    assert os.stat(path).st_mtime_ns == ns  # the filesystem kept the exact value


def same_size_indexes(tmp_path):
    """Two model_weights.bin contents of IDENTICAL length: one carries only an
    MTP head's presence tensor, the other only DFlash2's."""
    a = write_weights(tmp_path / "a.bin", trunk_tensors() + MTP_HEAD)
    b = write_weights(tmp_path / "b.bin", trunk_tensors() + DFLASH_SIDE)
    da, db = a.read_bytes(), b.read_bytes()
    assert len(da) == len(db) and da != db
    return da, db


def mtp_install(tmp_path, name="inst"):
    d = write_custom_install(tmp_path / name, trunk_tensors() + MTP_HEAD)
    s = shape_of(d)
    assert s["has_mtp"] and not s["has_dflash"] and s["experts"] == 0
    return d


@pytest.fixture(autouse=True)
def _fresh_cache():
    snapshots.clear_cache()
    yield
    snapshots.clear_cache()


@pytest.fixture
def aged(monkeypatch):
    """A constant clock one hour ahead: files written now look an hour old."""
    fake_now = snapshots.time.time_ns() + 3600 * SECOND
    monkeypatch.setattr(snapshots, "time", types.SimpleNamespace(time_ns=lambda: fake_now))
    return fake_now


def age(d, ns):
    for p in (weights(d), layout(d), manifest(d)):
        if p.exists():
            set_mtime(p, ns)


def assert_cached(d):
    first = snapshot(str(d))
    assert first.trusted is True
    assert snapshot(str(d)) is first
    return first


# --------------------------------------------------------------------------
# The racy window.

def test_aged_snapshot_is_cached(tmp_path, aged):
    d = mtp_install(tmp_path)
    age(d, aged - 10 * SECOND)
    assert_cached(d)
    assert answer(d) == MTP_ON


@pytest.mark.parametrize("which", ["weights", "layout", "manifest"])
@pytest.mark.parametrize("before_now, trusted", [
    (RACY_WINDOW_NS // 2, False),
    (RACY_WINDOW_NS, False),          # exactly the window: not yet trusted
    (RACY_WINDOW_NS + 1, True),
    (-3600 * SECOND, False),          # modified "in the future"
])
def test_files_modified_within_the_window_are_never_trusted(tmp_path, aged, which,
                                                           before_now, trusted):
    d = mtp_install(tmp_path)
    age(d, aged - 10 * SECOND)
    set_mtime({"weights": weights, "layout": layout, "manifest": manifest}[which](d),
              aged - before_now)
    s = snapshot(str(d))
    assert s.trusted is trusted
    assert (snapshot(str(d)) is s) is trusted


def test_just_written_install_is_reread_every_call(tmp_path):
    # The real clock: files written a moment ago are inside the window.
    d = mtp_install(tmp_path)
    future = snapshots.time.time_ns() + 3600 * SECOND
    age(d, future)  # deterministic: a modification time the clock has not reached
    s = snapshot(str(d))
    assert s.trusted is False and snapshot(str(d)) is not s


def test_rewrite_immediately_same_size_in_place(tmp_path):
    """The racy case: rewritten in place, same size, same inode, and its mtime
    put back to the old value (what a coarse clock that did not tick looks
    like). Whether the ctime also fails to tick depends on the kernel (one with
    multigrain timestamps always ticks it); either way the answer must change,
    and the racy-window rule is what guarantees it where the ctime does not.
    The rule itself is pinned deterministically by the boundary tests above."""
    da, db = same_size_indexes(tmp_path)
    d = mtp_install(tmp_path)
    path = weights(d)
    path.write_bytes(da)
    ino, mtime = os.stat(path).st_ino, os.stat(path).st_mtime_ns
    for k in range(12):
        data, expected = (db, NOTE_OFF) if k % 2 == 0 else (da, MTP_ON)
        with open(path, "r+b") as f:
            f.write(data)
        os.utime(path, ns=(mtime, mtime))
        st = os.stat(path)
        assert (st.st_ino, st.st_size, st.st_mtime_ns) == (ino, len(da), mtime)
        assert answer(d) == expected


def test_manifest_rewrite_immediately_same_size(tmp_path):
    """The manifest's routed experts decide the MoE arm: a same-size rewrite
    of it, its mtime put back, is seen as the index's is."""
    d = mtp_install(tmp_path)
    dense = manifest(d).read_bytes()
    moe = dense.replace(b'"numExperts": 0', b'"numExperts": 8')
    assert len(dense) == len(moe) and dense != moe
    mtime = os.stat(manifest(d)).st_mtime_ns
    for k in range(8):
        with open(manifest(d), "r+b") as f:
            f.write(moe if k % 2 == 0 else dense)
        os.utime(manifest(d), ns=(mtime, mtime))
        got = answer(d)
        if k % 2 == 0:
            assert got["block"] is None and "8 experts" in got["reason"]
        else:
            assert got == MTP_ON


# --------------------------------------------------------------------------
# A trusted snapshot is invalidated by every change to either file.

def test_a_file_changed_while_it_was_read_is_not_remembered(tmp_path, aged, monkeypatch):
    """snapshots._read's second key: the files are re-keyed after the read, and
    a snapshot whose files moved under it is not trusted.

    The reader is wrapped so that, between the key and the read, the
    weights symlink is re-pointed from the MTP index to the DFlash2 one (the
    read sees DFlash2), and after the read it is put back (the files are
    again exactly what the key said: a symlink change leaves its target's
    stat untouched). Remembered, the DFlash2 answer would be served under
    the MTP files' key until they change. Mutation check: with
    `if _keys(model_dir) != key: fresh.trusted = False` deleted, the read is
    trusted (`assert first.trusted is False` fails: True), and without that
    line the third call answers NOTE_OFF where MTP_ON is right."""
    da, db = same_size_indexes(tmp_path)
    d = mtp_install(tmp_path)
    a, b = tmp_path / "ta.bin", tmp_path / "tb.bin"
    a.write_bytes(da)
    b.write_bytes(db)
    weights(d).unlink()
    weights(d).symlink_to(a)
    for p in (a, b, layout(d), manifest(d)):
        set_mtime(p, aged - 20 * SECOND)

    def point_at(target):
        link = tmp_path / "link"
        link.symlink_to(target)
        os.replace(link, weights(d))

    real = snapshots.load_resident_index
    moves = []

    def read_while_repointed(path):
        point_at(b)
        try:
            return real(path)
        finally:
            moves.append(snapshots.file_keys(str(d)))
    monkeypatch.setattr(snapshots, "load_resident_index", read_while_repointed)
    first = snapshot(str(d))
    monkeypatch.setattr(snapshots, "load_resident_index", real)
    assert moves and first.index is not None and "mtp.fc.weight" not in first.index  # read: DFlash2
    point_at(a)
    assert first.key == snapshots.file_keys(str(d))  # the key it was read under is back
    assert first.trusted is False
    assert answer(d) == MTP_ON
    # The fixture discriminates: the same files, read undisturbed, are trusted.
    assert_cached(d)


def _baseline(tmp_path, aged):
    d = mtp_install(tmp_path)
    age(d, aged - 20 * SECOND)
    assert_cached(d)
    assert answer(d) == MTP_ON
    return d


def test_replaced_weights(tmp_path, aged):
    _, db = same_size_indexes(tmp_path)
    d = _baseline(tmp_path, aged)
    new = tmp_path / "new.bin"
    new.write_bytes(db)
    set_mtime(new, aged - 20 * SECOND)  # even the same mtime: a new inode
    os.replace(new, weights(d))
    assert answer(d) == NOTE_OFF
    assert_cached(d)


def test_symlink_retargeted(tmp_path, aged):
    da, db = same_size_indexes(tmp_path)
    d = mtp_install(tmp_path)
    a, b = tmp_path / "ta.bin", tmp_path / "tb.bin"
    a.write_bytes(da)
    b.write_bytes(db)
    weights(d).unlink()
    weights(d).symlink_to(a)
    for p in (a, b, layout(d), manifest(d)):
        set_mtime(p, aged - 20 * SECOND)
    assert_cached(d)
    assert answer(d) == MTP_ON
    tmp_link = tmp_path / "link"
    tmp_link.symlink_to(b)
    os.replace(tmp_link, weights(d))
    assert answer(d) == NOTE_OFF


def test_rewritten_same_size_and_touched(tmp_path, aged):
    da, db = same_size_indexes(tmp_path)
    d = _baseline(tmp_path, aged)
    weights(d).write_bytes(da)
    set_mtime(weights(d), aged - 20 * SECOND)
    assert answer(d) == MTP_ON
    ino = os.stat(weights(d)).st_ino
    with open(weights(d), "r+b") as f:
        f.write(db)
    set_mtime(weights(d), aged - 19 * SECOND)
    assert os.stat(weights(d)).st_ino == ino and os.path.getsize(weights(d)) == len(da)
    assert answer(d) == NOTE_OFF


def refusal(d) -> str:
    with pytest.raises(TurbosparkError) as info:
        answer(d)
    assert info.value.status == 2
    return str(info.value)


def test_truncated(tmp_path, aged):
    d = _baseline(tmp_path, aged)
    os.truncate(weights(d), 10)
    set_mtime(weights(d), aged - 20 * SECOND)
    assert refusal(d).startswith("resident index is corrupt: ")


def test_grown(tmp_path, aged):
    d = _baseline(tmp_path, aged)
    header = weights(d).read_bytes()[:24]
    # Extend the file and its residentSize: still readable, a new size.
    with open(weights(d), "r+b") as f:
        resident = int.from_bytes(header[8:16], "little") + 4096
        f.seek(8)
        f.write(resident.to_bytes(8, "little"))
        f.truncate(int.from_bytes(header[0:8], "little") + resident)
    set_mtime(weights(d), aged - 20 * SECOND)
    s = snapshot(str(d))
    assert s.index.resident_size == resident
    assert answer(d) == MTP_ON


def test_touched_only_is_reread(tmp_path, aged):
    d = _baseline(tmp_path, aged)
    before = snapshot(str(d))
    set_mtime(weights(d), aged - 5 * SECOND)
    after = snapshot(str(d))
    assert after is not before and after.trusted
    assert answer(d) == MTP_ON


def test_deleted_weights(tmp_path, aged):
    d = _baseline(tmp_path, aged)
    weights(d).unlink()
    assert refusal(d).startswith("open failed: ")


def test_manifest_replaced_with_moe(tmp_path, aged):
    d = _baseline(tmp_path, aged)
    new = tmp_path / "manifest.json"
    new.write_bytes(manifest(d).read_bytes().replace(b'"numExperts": 0', b'"numExperts": 256'))
    set_mtime(new, aged - 20 * SECOND)  # even the same mtime: a new inode
    os.replace(new, manifest(d))
    got = answer(d)
    assert got["block"] is None and "256 experts" in got["reason"]


def test_manifest_removed_then_created(tmp_path, aged):
    d = write_install(tmp_path / "moe", experts=256, mtp=True)
    age(d, aged - 20 * SECOND)
    assert_cached(d)
    assert "256 experts" in answer(d)["reason"]
    text = manifest(d).read_bytes()
    manifest(d).unlink()
    assert refusal(d).startswith("no manifest.json at ")
    manifest(d).write_bytes(text.replace(b'"numExperts": 256', b'"numExperts": 16'))
    set_mtime(manifest(d), aged - 20 * SECOND)
    assert "16 experts" in answer(d)["reason"]


def test_the_layout_is_still_watched(tmp_path, aged):
    """No decision reads the layout, but install info reports it: a change
    to it is a new snapshot, as for the other two files."""
    d = _baseline(tmp_path, aged)
    before = snapshot(str(d))
    new = tmp_path / "layout.json"
    new.write_bytes(expert_layout_json(256, 2))
    os.replace(new, layout(d))
    after = snapshot(str(d))
    assert after is not before and after.layout.experts_per_layer == 256
    assert answer(d) == MTP_ON


def test_options_change_on_a_cached_snapshot(tmp_path, aged):
    d = write_install(tmp_path / "both", mtp=True, dflash=True)
    age(d, aged - 20 * SECOND)
    assert_cached(d)
    assert answer(d) == MTP_ON
    assert answer(d, '{"speculativeDrafter": "dflash"}') == DFLASH_ON
    # The turn's temperature never changes the session (ABI 4).
    assert answer(d, '{"speculativeDrafter": "dflash", "tsffi": {"temperature": 1}}') == DFLASH_ON
    assert answer(d, '{"speculativeDrafter": "mtp", "tsffi": {"temperature": 1}}') == MTP_ON
    assert answer(d, '{"speculation": "off"}') == {"block": None, "drafter": None,
                                                  "reason": None}


# --------------------------------------------------------------------------
# Bounded.

def test_cache_is_bounded(tmp_path, aged):
    dirs = []
    for k in range(MAX_CACHED_INSTALLS + 8):
        d = write_install(tmp_path / f"i{k}", mtp=(k % 2 == 0), dflash=(k % 2 == 1),
                          layers=1, full_attention_every=1)
        age(d, aged - 20 * SECOND)
        dirs.append(d)
    first = weakref.ref(snapshot(str(dirs[0])))
    for k, d in enumerate(dirs):
        assert answer(d) == (MTP_ON if k % 2 == 0 else NOTE_OFF)
        assert len(snapshots._cache) <= MAX_CACHED_INSTALLS
    assert len(snapshots._cache) == MAX_CACHED_INSTALLS
    gc.collect()
    assert first() is None  # the evicted snapshot is gone, not just unlisted
    # An evicted install still answers correctly.
    assert answer(dirs[0]) == MTP_ON
    assert len(snapshots._cache) == MAX_CACHED_INSTALLS


# --------------------------------------------------------------------------
# The key: one computation inside the library (tsffi_install_keys, which the
# warm path compares), the same bytes from the Python fallback.

def test_python_key_is_the_librarys_key(tmp_path, loaded):
    full = write_install(tmp_path / "full", mtp=True, experts=8)
    dense = write_install(tmp_path / "dense", mtp=True)
    layout(dense).unlink()
    os.chmod(full / "packed_experts", 0o700)
    cases = [full, dense, tmp_path / "missing", tmp_path / ("x" * 300) / "deep"]
    native = snapshots.keys_in_use()
    assert native is not snapshots.python_file_keys  # the library bound its own
    for d in cases:
        key = snapshots.python_file_keys(str(d))
        assert len(key) == 3 * 7 * 8  # three files, seven int64 fields each
        assert key == native(str(d)), d
    # The fixture discriminates: a file's change changes both keys alike.
    before = native(str(full))
    set_mtime(weights(full), os.stat(weights(full)).st_mtime_ns + SECOND)
    assert native(str(full)) != before
    assert native(str(full)) == snapshots.python_file_keys(str(full))


# --------------------------------------------------------------------------
# A refusal is raised as a fresh object per call (errors.py `again`), never
# one object again, also where it is remembered (the manifest's refusal on
# the install snapshot; a drafter build's within a choices table). Raising one
# object again and again grows its traceback by the raising frames each time
# (and two host threads could raise, and mutate, the same object at once).

def _refused_options(tmp_path, aged):
    return lambda: parse_options('{"speculation": "bogus"}')


def _refused_plan(tmp_path, aged):
    d = mtp_install(tmp_path)
    age(d, aged - 20 * SECOND)
    assert_cached(d)
    options = parse_options('{"speculation": 2, "tsffi": {"engineBlocker": "a vision tower"}}')
    return lambda: speculation_plan(str(d), options)


def _refused_open(tmp_path, aged):
    # The open's refusal of the manifest, kept on the snapshot (arch_error)
    # and raised anew by plan.check_opens.
    d = mtp_install(tmp_path)
    (d / "manifest.json").write_text('{"arch": {}}')
    age(d, aged - 20 * SECOND)
    assert_cached(d)
    assert snapshot(str(d)).arch_error is not None  # the remembered one
    return lambda: speculation_plan(str(d), "{}")


def _refused_build(tmp_path, aged):
    # A drafter build's failure, kept for the call (plan._Verdicts.built).
    d = write_custom_install(tmp_path / "partial", trunk_tensors() + MTP_HEAD[:2])
    age(d, aged - 20 * SECOND)
    assert_cached(d)
    return lambda: speculation_plan(str(d), "{}")


# (what raises the refusal, the call that reaches it)
REMEMBERED_REFUSALS = [
    ("options.parse_options", _refused_options),
    ("plan.decide", _refused_plan),
    ("plan.check_opens", _refused_open),
    ("plan._Verdicts.built", _refused_build),
]


@pytest.mark.parametrize("where, make_call", REMEMBERED_REFUSALS,
                         ids=[r[0] for r in REMEMBERED_REFUSALS])
def test_a_remembered_refusal_is_raised_as_a_fresh_object(tmp_path, aged, where, make_call):
    """Mutation check: with `raise refusal.again()` (plan.check_opens)
    replaced by raising the remembered object, this fails for that row: the
    ten exceptions are one object (`len(set(...))` is 1, not 10), and each
    call's traceback holds the frames of the calls before it. The last test
    of this section fails too: it counts the `.again()` sites."""
    call = make_call(tmp_path, aged)
    raised = []
    for _ in range(10):
        with pytest.raises(TurbosparkError) as info:
            call()
        raised.append(info.value)
    assert len({id(e) for e in raised}) == 10   # kept alive in `raised`: ids are distinct
    depths = [len(traceback.extract_tb(e.__traceback__)) for e in raised]
    assert depths == [depths[0]] * 10
    assert {(type(e), str(e), e.__dict__ == raised[0].__dict__) for e in raised} == \
        {(type(raised[0]), str(raised[0]), True)}


def test_every_remembered_refusal_is_in_the_table():
    """The table above covers each place the package raises a remembered error
    anew: a new `.again()` without a row here fails."""
    package = Path(snapshots.__file__).parent
    places = sorted(p.name for p in package.glob("*.py") if ".again()" in p.read_text())
    assert places == ["plan.py"]
    assert sorted({r[0].split(".")[0] for r in REMEMBERED_REFUSALS}) == ["options", "plan"]
