"""The engine's decision and words (issue 31), as tables with the engine's
texts written out (tests/engine_texts.py, transcribed from docs/ENGINE.md
sections 1, 2 and 4):

* the blocker preview blocks exactly where the engine's two blocker
  functions block -- every dtype tag 0..24, both drafters -- and speaks the
  function of the drafter the plan resolved, arm for arm, in its order;
* the plan composes that text into the original module's own messages
  (the reason under auto, the refusal under a named block);
* the reader's refusals are the engine's, check by check, from the Python
  passes and with the library's C pass bound alike;
* the DFlash2 drafter is the engine's 81 tensors, and an install in the
  engine's layout is complete;
* build info names the engine whose words these are.
"""

from __future__ import annotations

import errno
import os
import struct

import pytest

import turbospark_ffi.resident_index as ri
from engine_texts import (CORRUPT, ENGINE, ENGINE_VERSION, MOE_MARKER, blocker, corrupt,
                          io_failed)
from installs import (ENTRY, HEADER, U64_MAX, base_file, dflash_specs, get_entry, get_header,
                      mtp_specs, raw_index, set_entry, set_header, shape_of,
                      write_bytes, write_custom_install)
from original_texts import REFUSAL_PREFIX
from turbospark_ffi.errors import OpenRefused, ResidentIndexError, SpeculationRefused
from turbospark_ffi.snapshots import clear_cache, snapshot
from turbospark_ffi.install_writer import trunk_tensors, write_install
from turbospark_ffi.api import speculation_plan
from turbospark_ffi.policy import SpeculativeDrafter
from turbospark_ffi.resident_index import load_resident_index

MTP, DFLASH = SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH
DRAFTERS = {"mtp": MTP, "dflash": DFLASH}
PROBE = "language_model.model.layers.3.self_attn.q_proj.weight"


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


def preview(model_dir, drafter: str) -> str | None:
    """The session's reason when the host names `drafter` at speculation
    "auto" (None: it speculates); the open's message, prefixed "refused: ",
    when the open fails."""
    try:
        result = speculation_plan(str(model_dir), f'{{"speculativeDrafter": "{drafter}"}}')
    except OpenRefused as exc:
        return "refused: " + str(exc)
    return None if result.speculation.enabled else result.speculation.reason


# --------------------------------------------------------------------------
# Item 0: what a probe of each dtype tag gets, for both drafters (blockers of
# 22f47a2 and the runner's dtype gates): 4, 15 and 16 are served; a tag no
# reader honours, or a GGUF tag without a resident kernel, fails the OPEN
# before any blocker is asked; every other readable tag is the probe-dtype arm.

GATE_GGUF = ("refused: unsupported: tensor {probe} carries GGUF block dtype {tag}, which has no "
             "RESIDENT kernel in this port (ROADMAP Phase G Stage 2; resident-executable tags: "
             "[6, 7, 8, 10, 11, 12, 13, 17, 18, 19, 20, 21, 22, 23, 24])")
GATE_UNREADABLE = ("refused: unsupported: tensor {probe} carries resident dtype {tag}, which no "
                   "reader in this crate honours; unquantized tensors must be narrowed to BF16 "
                   "(tag 1) at repack time")
# tag -> "served", "arm" (the probe-dtype arm) or the gate that refuses it.
DTYPE_ANSWERS = {0: GATE_UNREADABLE, 1: "arm", 2: GATE_UNREADABLE, 3: GATE_UNREADABLE,
                 4: "served", 5: "arm", 6: "arm", 7: "arm", 8: "arm", 9: GATE_GGUF,
                 10: "arm", 11: "arm", 12: "arm", 13: "arm", 14: GATE_GGUF, 15: "served",
                 16: "served", 17: "arm", 18: "arm", 19: "arm", 20: "arm", 21: "arm",
                 22: "arm", 23: "arm", 24: "arm", 25: GATE_GGUF, 26: GATE_UNREADABLE,
                 255: GATE_UNREADABLE}
DTYPE_CASES = [(drafter, tag) for drafter in DRAFTERS for tag in DTYPE_ANSWERS]


@pytest.mark.parametrize("drafter, tag", DTYPE_CASES,
                         ids=[f"{d}-dtype{t}" for d, t in DTYPE_CASES])
def test_what_each_probe_dtype_gets(tmp_path, drafter, tag):
    # Only the probe (and layer 3's other q_proj-like weights: none) carries
    # the tag; the rest of the install is INT4 and BF16.
    d = write_install(tmp_path / "i", probe_dtype=tag, mtp=True, dflash=True)
    s = shape_of(d)
    # Every other arm passes: dense, layer 3 is full attention, the probe is
    # there with this tag, both drafters are carried.
    assert (s["experts"], s["first_layer"], s["probe_dtype"], s["has_mtp"], s["has_dflash"]) \
        == (0, 3, tag, True, True)
    answer = DTYPE_ANSWERS[tag]
    expected = {"served": None,
                "arm": blocker(drafter, "probe-dtype", probe=PROBE, dtype=tag)}.get(answer)
    if expected is None and answer != "served":
        expected = answer.format(probe=PROBE, tag=tag)
    assert preview(d, drafter) == expected


def test_no_covered_dtype_set_remains():
    import turbospark_ffi.blockers as blockers
    import turbospark_ffi.wire as wire
    assert not hasattr(blockers, "VERIFY_PROBE_DTYPES")
    assert "VERIFY_PROBE_DTYPES" not in open(wire.__file__).read()


@pytest.mark.parametrize("tag, covers", [(4, True), (15, True), (16, True), (1, False),
                                         (5, False)])
def test_install_info_says_what_the_verify_covers(tmp_path, tag, covers):
    from turbospark_ffi.api import install_info
    d = write_install(tmp_path / "i", probe_dtype=tag, mtp=True)
    info = install_info(str(d))
    assert (info["probe"]["dtype"], info["probe"]["verifyCovers"]) == (tag, covers)
    assert info["blockerPreview"]["mtp"] == (
        None if covers else blocker("mtp", "probe-dtype", probe=PROBE, dtype=tag))


# --------------------------------------------------------------------------
# Item 1: each arm in the engine's words, for the drafter the plan resolved.

def _without_probe(tmp_path):
    tensors = [t for t in trunk_tensors() if t.name != PROBE]
    return write_custom_install(tmp_path / "i", tensors + mtp_specs() + dflash_specs())


ARM_INSTALLS = {
    # arm: how to write an install on which it is the FIRST arm that applies
    # (each also fails every later arm it can, so the order is shown too)
    "vision": lambda p: write_install(p / "i", experts=8, full_attention_every=0,
                                      vision_depth=27),
    "moe": lambda p: write_install(p / "i", experts=8, full_attention_every=0),
    "no-probe-layer": lambda p: write_install(p / "i", full_attention_every=0, probe_dtype=1),
    "probe-absent": _without_probe,
    "probe-dtype": lambda p: write_install(p / "i", probe_dtype=5),
    "no-drafter": lambda p: write_install(p / "i"),
}
ARM_FIELDS = {"moe": {"experts": 8}, "probe-absent": {"probe": PROBE},
              "probe-dtype": {"probe": PROBE, "dtype": 5}}
ARM_CASES = [(arm, drafter) for arm in ARM_INSTALLS for drafter in DRAFTERS]


@pytest.mark.parametrize("arm, drafter", ARM_CASES, ids=[f"{a}-{d}" for a, d in ARM_CASES])
def test_each_arm_speaks_the_engines_text(tmp_path, arm, drafter):
    d = ARM_INSTALLS[arm](tmp_path)
    expected = blocker(drafter, arm, **ARM_FIELDS.get(arm, {}))
    assert preview(d, drafter) == expected


def test_the_texts_differ_by_drafter_where_the_engine_s_do():
    # The fixture discriminates: only the no-probe-layer arm reads the same.
    same = [arm for arm in ARM_INSTALLS
            if blocker("mtp", arm, **{"experts": 8, "probe": PROBE, "dtype": 5})
            == blocker("dflash", arm, **{"experts": 8, "probe": PROBE, "dtype": 5})]
    assert same == ["vision", "no-probe-layer"]
    for drafter in DRAFTERS:
        assert blocker(drafter, "moe", experts=8).startswith(MOE_MARKER + ": ")


PLAN_CASES = [
    # install arm, requested drafter, the drafter it resolves to
    ("no-drafter", "auto", "mtp"),
    ("no-drafter", "mtp", "mtp"),
    ("no-drafter", "dflash", "dflash"),
    ("moe", "auto", "mtp"),
    ("moe", "dflash", "dflash"),
    ("probe-dtype", "auto", "mtp"),
    ("probe-dtype", "dflash", "dflash"),
    ("vision", "auto", "mtp"),
    ("vision", "dflash", "dflash"),
]


@pytest.mark.parametrize("arm, asked, resolved", PLAN_CASES,
                         ids=[f"{a}-{q}" for a, q, _ in PLAN_CASES])
def test_the_plan_shows_the_resolved_drafters_text(tmp_path, arm, asked, resolved):
    """auto's reason is the engine's text verbatim; a named block's refusal
    is the original module's prefix around it."""
    d = ARM_INSTALLS[arm](tmp_path)
    text = blocker(resolved, arm, **ARM_FIELDS.get(arm, {}))
    result = speculation_plan(str(d), f'{{"speculativeDrafter": "{asked}"}}')
    assert result.choice.drafter.value == resolved
    assert result.speculation.reason == text
    with pytest.raises(SpeculationRefused) as info:
        speculation_plan(str(d), f'{{"speculativeDrafter": "{asked}", "speculation": 2}}')
    assert str(info.value) == REFUSAL_PREFIX + text


# --------------------------------------------------------------------------
# Item 2: the reader's refusals, check by check, in the engine's words.

@pytest.fixture(params=["python", "c"])
def reader(request):
    """Both readers: the Python pass alone, and with the library's C pass
    bound (which only accepts: every refusal must still read the same)."""
    saved = ri._native
    if request.param == "c":
        ri.use_native_scan(*request.getfixturevalue("native_scan"))
    else:
        ri.use_native_scan(None, None)
    yield request.param
    ri._native = saved


def _header(index_size, resident_size, count, tail=b""):
    return bytearray(struct.pack("<QQQ", index_size, resident_size, count) + tail)


def _case_index_below_header():
    return _header(23, 0, 0, bytes(100)), ("index_size_below_header", {"index_size": 23})


def _case_table_past_index():
    data = base_file()
    index_size = get_header(data, "index_size")
    count = (index_size - HEADER) // ENTRY + 1
    set_header(data, "entry_count", count)
    return data, ("entry_table_past_index",
                  {"table_end": HEADER + ENTRY * count, "index_size": index_size})


def _case_past_file():
    data = base_file()
    i, r = get_header(data, "index_size"), get_header(data, "resident_size") + 4096
    set_header(data, "resident_size", r)
    return data, ("resident_end_past_file", {"index_size": i, "resident_size": r,
                                             "end": i + r, "length": len(data)})


def _case_name_range():
    data = base_file()
    index_size = get_header(data, "index_size")
    start = get_entry(data, 1, "name_offset")
    set_entry(data, 1, "name_length", 10_000)
    return data, ("name_out_of_range", {"i": 1, "start": start, "stop": start + 10_000,
                                        "index_size": index_size})


def _case_plane(plane, off_field, size_field):
    def case():
        data = base_file()
        index_size = get_header(data, "index_size")
        end = index_size + get_header(data, "resident_size")
        set_entry(data, 2, off_field, end - 4)
        set_entry(data, 2, size_field, 8)
        return data, (plane, {"i": 2, "name": "mtp.fc.weight", "offset": end - 4, "size": 8,
                              "index_size": index_size, "end": end})
    return case


def _case_duplicate():
    # Two different invalid byte strings that decode to one name: the engine
    # names the lossily decoded name.
    return raw_index([b"first", b"x\xff", b"x\xfe"]), ("duplicate_name", {"name": "x\ufffd"})


READER_CASES = {
    "1-empty-file": lambda: (b"", ("short_header", {})),
    "1-23-bytes": lambda: (b"\xff" * 23, ("short_header", {})),
    "2-index-size-0": lambda: (_header(0, 0, 5, bytes(100)),
                               ("index_size_below_header", {"index_size": 0})),
    "2-index-size-23": _case_index_below_header,
    "3-count-times-72": lambda: (_header(HEADER, 0, 2**63),
                                 ("entry_count_overflow", {"entry_count": 2**63})),
    "3-header-plus-table": lambda: (_header(HEADER, 0, U64_MAX // ENTRY),
                                    ("entry_table_overflow", {})),
    "4-table-past-index": _case_table_past_index,
    "5-overflow": lambda: (_header(U64_MAX, 1, 0), ("resident_end_overflow", {})),
    "5-past-file": _case_past_file,
    "7-name-range": _case_name_range,
    "7-payload": _case_plane("payload_out_of_range", "file_offset", "size_bytes"),
    "7-scale-plane": _case_plane("scale_plane_out_of_range", "scale_offset", "scale_size"),
    "7-bias-plane": _case_plane("bias_plane_out_of_range", "bias_offset", "bias_size"),
    "7-duplicate": _case_duplicate,
}


@pytest.mark.parametrize("case", list(READER_CASES))
def test_reader_refusals_are_the_engines(tmp_path, reader, case):
    data, (check, fields) = READER_CASES[case]()
    path = write_bytes(tmp_path / "model_weights.bin", data)
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(path)
    assert (info.value.check, str(info.value)) == (check, corrupt(check, **fields))


def _shrinking_pread(path, shrink_to, after_calls):
    real, calls = os.pread, [0]

    def pread(fd, length, offset):
        if calls[0] == after_calls:
            os.truncate(path, shrink_to)
        calls[0] += 1
        return real(fd, length, offset)
    return pread


@pytest.mark.parametrize("shrink_to, after", [(HEADER + 10, 1), (HEADER + 3 * ENTRY + 3, 2)],
                         ids=["in-the-entry-table", "in-the-names"])
def test_check6_a_short_read_of_the_index_region(tmp_path, monkeypatch, reader, shrink_to,
                                                  after):
    path = write_bytes(tmp_path / "model_weights.bin", base_file())
    monkeypatch.setattr(ri.os, "pread", _shrinking_pread(path, shrink_to, after))
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(path)
    assert (info.value.check, str(info.value)) == ("short_read", corrupt("short_read"))


def test_check8_open_fails_with_the_os_error(tmp_path, reader):
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(tmp_path / "missing" / "model_weights.bin")
    assert (info.value.check, str(info.value)) == ("open", io_failed("open", errno.ENOENT))
    assert str(info.value) == "open failed: No such file or directory (os error 2)"


def test_entry_order_first_failing_entry_and_its_first_check(tmp_path, reader):
    """Entry 1's bias plane and entry 2's name: entry 1 is reported, and its
    payload is checked before its planes."""
    data = base_file()
    index_size = get_header(data, "index_size")
    end = index_size + get_header(data, "resident_size")
    set_entry(data, 1, "bias_offset", 7)
    set_entry(data, 1, "bias_size", 1)
    set_entry(data, 2, "name_offset", 0)
    path = write_bytes(tmp_path / "model_weights.bin", data)
    with pytest.raises(ResidentIndexError) as info:
        load_resident_index(path)
    assert str(info.value) == (f"{CORRUPT}entry 1 (b.weight) bias plane [7, +1) outside the "
                               f"resident region [{index_size}, {end})")


def test_an_unreadable_index_is_the_opens_refusal_in_the_readers_text(tmp_path):
    d = write_install(tmp_path / "i", mtp=True)
    (d / "model_weights.bin").write_bytes(b"\x00" * 30)
    with pytest.raises(OpenRefused) as info:
        speculation_plan(str(d), "{}")
    assert str(info.value) == corrupt("index_size_below_header", index_size=0)


# --------------------------------------------------------------------------
# Item 3: the DFlash2 drafter is the engine's 81 tensors.

DFLASH_TOP = ("dflash.fc.weight", "dflash.hidden_norm.weight", "dflash.norm.weight",
              "dflash.candidate_selector.hidden_projection.weight",
              "dflash.candidate_selector.predecessor_codebook",
              "dflash.candidate_selector.successor_codebook")
DFLASH_LAYER = ("attention_conv.base_kernel", "attention_conv.kernel_projection.weight",
                "mlp_conv.base_kernel", "mlp_conv.kernel_projection.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight",
                "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
ENGINE_DFLASH = DFLASH_TOP + tuple(f"dflash.layers.{layer}.{t}" for layer in range(5)
                                   for t in DFLASH_LAYER)


def test_the_dflash2_list_is_the_engines():
    from turbospark_ffi.resident_index import DFLASH_TENSORS
    assert len(ENGINE_DFLASH) == len(set(ENGINE_DFLASH)) == 81
    assert DFLASH_TENSORS == ENGINE_DFLASH


def test_an_install_in_the_engines_layout_is_complete(tmp_path):
    from turbospark_ffi.api import install_info
    d = write_custom_install(tmp_path / "i", trunk_tensors() + dflash_specs(ENGINE_DFLASH))
    got = install_info(str(d))["dflashDrafter"]
    assert got == {"present": True, "tensors": 81, "expected": 81, "complete": True,
                   "missing": []}


@pytest.mark.parametrize("sample", ["dflash", "both"])
def test_the_samples_and_make_install_write_the_engines_layout(tmp_path, sample):
    import turbospark_ffi
    from turbospark_ffi.cli import main
    shipped = os.path.join(os.path.dirname(turbospark_ffi.__file__), "samples", sample)
    assert main(["make-install", str(tmp_path / "made"), "--dflash"]) == 0
    for d in (shipped, tmp_path / "made"):
        names = load_resident_index(os.path.join(d, "model_weights.bin")).names
        assert tuple(n for n in names if n.startswith("dflash.")) == ENGINE_DFLASH


# --------------------------------------------------------------------------
# Item 5: which engine's words these are.

def test_build_info_names_the_engine(library_path):
    from turbospark_ffi.wire import build_info_to_dict
    info = build_info_to_dict(4, str(library_path), True)
    assert (info["engine"], info["engineVersion"]) == (ENGINE, ENGINE_VERSION)
    # The revision of each rule (TURBOSPARK_FACTS.md, the table at its top).
    assert info["engineRevisions"] == {
        "policy": "0.3.0", "open": "0a45c54", "manifest": "54bc43a", "residentIndex": "08aaf13",
        "dtypeGates": "0a45c54", "drafterBuild": "22f47a2", "blockers": "22f47a2",
        "turn": "0a45c54"}
    # The original module's first line names the same engine.
    from turbospark_ffi import policy
    assert f"({ENGINE} {ENGINE_VERSION})" in policy.__doc__.replace("\n", " ")


# --------------------------------------------------------------------------
# "Done when", as one table: on each install, every text a host is shown --
# each of the 51 pickers' items (its reason, its note, its refusal) under
# greedy and sampled options, and install info's previews and reader error --
# is the original module's or the engine's, byte for byte, and the engine's
# texts the install calls for are all among them.

def _reader_install(case):
    def write(p):
        d = write_install(p / "i", mtp=True)
        (d / "model_weights.bin").write_bytes(bytes(READER_CASES[case]()[0]))
        return d
    return write


def _original_texts():
    from original_texts import DFLASH_NOTE, SAMPLED_REASON
    return {DFLASH_NOTE, SAMPLED_REASON}


DONE_WHEN = {
    # install: (how to write it, the engine's texts it must show)
    **{arm: (ARM_INSTALLS[arm], {blocker(d, arm, **ARM_FIELDS.get(arm, {})) for d in DRAFTERS})
       for arm in ARM_INSTALLS},
    "dflash-only": (lambda p: write_install(p / "i", dflash=True), {blocker("mtp", "no-drafter")}),
    "mtp-only": (lambda p: write_install(p / "i", mtp=True), {blocker("dflash", "no-drafter")}),
    "both": (lambda p: write_install(p / "i", mtp=True, dflash=True), set()),
}


def _shown(model_dir) -> set[str]:
    from turbospark_ffi.api import install_info, speculation_choices
    shown = set()
    for options in ("{}", '{"tsffi": {"temperature": 0.7}}'):
        for item in speculation_choices(str(model_dir), options)["choices"]:
            if item["error"] is not None:
                assert item["error"].startswith(REFUSAL_PREFIX), item
                shown.add(item["error"][len(REFUSAL_PREFIX):])
            else:
                shown |= {item["plan"]["speculation"]["reason"], item["plan"]["drafter"]["note"]}
    info = install_info(str(model_dir))
    shown |= set((info["blockerPreview"] or {}).values()) | {info["indexError"]}
    return shown - {None}


@pytest.mark.parametrize("case", ["1-23-bytes", "2-index-size-0", "5-overflow"])
def test_an_unreadable_index_shows_the_readers_text_everywhere(tmp_path, case):
    from turbospark_ffi.api import install_info, speculation_choices
    d = _reader_install(case)(tmp_path)
    text = corrupt(READER_CASES[case]()[1][0], **READER_CASES[case]()[1][1])
    with pytest.raises(OpenRefused) as info:
        speculation_choices(str(d), "{}")
    assert str(info.value) == text
    info = install_info(str(d))
    assert (info["indexError"], info["openError"], info["blockerPreview"]) == (
        text, text, {"mtp": None, "dflash": None})


@pytest.mark.parametrize("name", list(DONE_WHEN))
def test_every_text_shown_is_the_seeds_or_the_engines(tmp_path, name):
    write, engine = DONE_WHEN[name]
    shown = _shown(write(tmp_path))
    assert engine <= shown, (name, engine - shown)
    assert shown <= engine | _original_texts(), (name, shown - engine - _original_texts())
