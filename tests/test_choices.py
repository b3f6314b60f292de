"""tsffi_speculation_choices through the C ABI (ctypes on the built library):
every one of the 51 items is what tsffi_speculation_plan answers for the
host's options with that item's two keys -- status, result bytes and last
error -- on every install shape, under the option sets a settings pane
meets; and what those answers are, written out as grids.

Also: which item is `selected`, the top-level shape, the index read once per
table, the table served warm from C and read again after a change, and the
Python API returning the same object.
"""

from __future__ import annotations

import ctypes
import json
import os
import time

import pytest

import abi_cases
from engine_texts import blocker, corrupt
from original_texts import DFLASH_NOTE, REFUSAL_PREFIX, SAMPLED_REASON

SPECULATIONS = ["auto", "off", *range(1, 16)]
DRAFTERS = ["auto", "mtp", "dflash"]

VISION = "the vision tower is active"

# The reasons, each from its one home: the original module's (original_texts.py) where it
# has them; the engine's otherwise (engine_texts.py): the blocker function of
# the drafter the item resolves to, and the reader.
REASONS = {
    "NOTE": DFLASH_NOTE,
    "SAMPLED": SAMPLED_REASON,
    "VISION": VISION,
    "NO_HEAD": blocker("mtp", "no-drafter"),
    "NO_DFLASH": blocker("dflash", "no-drafter"),
    "MOE": blocker("mtp", "moe", experts=8),
    "MOE_DFLASH": blocker("dflash", "moe", experts=8),
    "UNREADABLE": corrupt("short_header"),
}

OPTION_SETS = {
    "defaults": b"{}",
    "sampled": b'{"tsffi": {"temperature": 0.7}}',
    "blocker": json.dumps({"tsffi": {"engineBlocker": VISION}}).encode(),
    "blocker-null": b'{"tsffi": {"engineBlocker": null}}',
    # A pick in another spelling, and keys the library ignores.
    "picked": b'{"speculation": "OFF", "speculativeDrafter": "dflash", "contextLength": 8192}',
    "utf8-blocker": json.dumps({"tsffi": {"engineBlocker": abi_cases.UTF8_BLOCKER},
                                "speculation": "7"}, ensure_ascii=False).encode(),
    # Keys the open ignores, a near miss among them: listed and hinted once.
    "ignored": b'{"Speculation": 3, "theme": "dark", "temperature": 0.7}',
}

SHAPES = ["none", "mtp", "dflash", "both", "moe"]
# Installs the open refuses whatever is asked: the whole call is the open's
# refusal (status 2), as every item's plan call is.
REFUSED_SHAPES = ["unreadable", "missing"]


@pytest.fixture(scope="module")
def installs(tmp_path_factory):
    paths = abi_cases.materialize(tmp_path_factory.mktemp("choices-installs"))
    abi_cases.verify_installs(paths)
    return paths


class Abi:
    def __init__(self, lib) -> None:
        self.lib = lib

    def _take(self, status: int, out: ctypes.c_void_p) -> tuple[int, bytes | None, bytes]:
        text = None
        if out.value:
            text = ctypes.string_at(out.value)
            self.lib.tsffi_string_free(out)
        n = self.lib.tsffi_last_error(None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        self.lib.tsffi_last_error(buf, n + 1)
        return status, text, buf.raw[:n]

    def plan(self, model_dir, options: bytes):
        out = ctypes.c_void_p()
        return self._take(self.lib.tsffi_speculation_plan(os.fsencode(model_dir), options,
                                                          ctypes.byref(out)), out)

    def choices(self, model_dir, options: bytes | None):
        out = ctypes.c_void_p()
        return self._take(self.lib.tsffi_speculation_choices(os.fsencode(model_dir), options,
                                                             ctypes.byref(out)), out)


@pytest.fixture(scope="module")
def abi(loaded):
    return Abi(loaded.lib)


def with_pick(options: bytes, speculation, drafter) -> bytes:
    """The host's options object with the item's two keys set (a host
    building the plan call for one item)."""
    obj = json.loads(options)
    obj["speculation"] = speculation
    obj["speculativeDrafter"] = drafter
    return json.dumps(obj, ensure_ascii=False).encode()


def table(abi, model_dir, options: bytes) -> dict:
    status, text, err = abi.choices(model_dir, options)
    assert (status, err) == (0, b""), err
    # Compact ASCII JSON in the library's key order, as json.dumps writes it
    # (the text is assembled from templates: wire.py).
    assert json.dumps(json.loads(text), separators=(",", ":")).encode() == text
    return json.loads(text)


# ---------------------------------------------------------------------------
# Each item is the plan call, byte for byte.

@pytest.mark.parametrize("options", OPTION_SETS, ids=list(OPTION_SETS))
@pytest.mark.parametrize("shape", SHAPES)
def test_every_item_is_the_plan_call_byte_for_byte(abi, installs, shape, options):
    host = OPTION_SETS[options]
    result = table(abi, installs[shape], host)
    items = result["choices"]
    assert [(i["speculation"], i["speculativeDrafter"]) for i in items] == \
        [(s, d) for s in SPECULATIONS for d in DRAFTERS]
    for item in items:
        assert list(item) == ["speculation", "speculativeDrafter", "status", "plan", "error",
                              "selected"]
        status, text, err = abi.plan(installs[shape],
                                     with_pick(host, item["speculation"],
                                               item["speculativeDrafter"]))
        where = (item["speculation"], item["speculativeDrafter"])
        assert item["status"] == status, where
        assert status in (0, 2), (where, err)
        if status == 0:
            # The plan object exactly as the plan call's bytes (compact,
            # ASCII, in the library's key order), without the three members
            # the table holds once.
            plan = json.loads(text)
            assert list(plan)[-3:] == ["ignoredKeys", "warnings", "modelDir"]
            assert (plan.pop("ignoredKeys"), plan.pop("warnings"), plan.pop("modelDir")) == \
                (result["ignoredKeys"], result["warnings"], result["modelDir"]), where
            assert json.dumps(item["plan"], separators=(",", ":")) == \
                json.dumps(plan, separators=(",", ":")), where
            assert text.startswith(json.dumps(item["plan"], separators=(",", ":"))[:-1]
                                   .encode()), where
            assert item["error"] is None and err == b""
        else:
            assert item["plan"] is None and text is None
            assert item["error"].encode("utf-8") == err, where
    # The install flags are what every plan says of the install.
    some_plan = next(i["plan"] for i in items if i["plan"] is not None)
    assert result["install"] == {
        "installHasMtpHead": some_plan["drafter"]["installHasMtpHead"],
        "installHasDflash": some_plan["drafter"]["installHasDflash"]}
    assert list(some_plan) == ["drafter", "draftPolicies", "speculation", "turn", "source"]
    assert list(result) == ["modelDir", "install", "choices", "ignoredKeys", "warnings"]
    assert result["modelDir"] == str(installs[shape])


@pytest.mark.parametrize("options", OPTION_SETS, ids=list(OPTION_SETS))
@pytest.mark.parametrize("shape", REFUSED_SHAPES)
def test_an_install_the_open_refuses_refuses_the_table(abi, installs, shape, options):
    host = OPTION_SETS[options]
    status, text, err = abi.choices(installs[shape], host)
    assert (status, text) == (2, None)
    for speculation, drafter in (("auto", "auto"), ("off", "mtp"), (7, "dflash")):
        assert abi.plan(installs[shape], with_pick(host, speculation, drafter)) == (2, None, err)
    where = str(installs[shape])
    assert err.decode() == {
        "unreadable": REASONS["UNREADABLE"],
        "missing": f"{where} is not a directory (and matched no installed alias)"}[shape]


def test_the_fixture_discriminates(abi, installs):
    """The shapes give different tables, and the option sets change them."""
    def items(shape, options):
        return json.dumps(table(abi, installs[shape], OPTION_SETS[options])["choices"])
    assert len({items(s, "defaults") for s in SHAPES}) == 5
    assert len({items("dflash", o) for o in ("defaults", "sampled", "blocker-null")}) == 3
    assert items("both", "defaults") != items("both", "sampled")
    assert items("none", "defaults") != items("none", "blocker-null")


# ---------------------------------------------------------------------------
# What the items say, written out. A grid row per speculation value ("N":
# every block 1..15, with N standing for the block), a cell per drafter:
# "on B DRAFTER", "off" (asked for), "off: REASON", "refused: REASON".

def cell(item) -> str:
    if item["status"] == 2:
        message = item["error"]
        assert message.startswith(REFUSAL_PREFIX), message
        return "refused: " + _reason_key(message[len(REFUSAL_PREFIX):])
    spec = item["plan"]["speculation"]
    if spec["block"] is not None:
        return f"on {spec['block']} {spec['drafter']}"
    return "off" if spec["reason"] is None else "off: " + _reason_key(spec["reason"])


def _reason_key(text: str) -> str:
    for key, reason in REASONS.items():
        if text == reason:
            return key
    raise AssertionError(f"a reason the table does not write out: {text!r}")


OFF3 = ("off", "off", "off")

GRIDS = {
    ("none", "defaults"): {
        "auto": ("off: NO_HEAD", "off: NO_HEAD", "off: NO_DFLASH"), "off": OFF3,
        "N": ("refused: NO_HEAD", "refused: NO_HEAD", "refused: NO_DFLASH")},
    ("mtp", "defaults"): {
        "auto": ("on 2 mtp", "on 2 mtp", "off: NO_DFLASH"), "off": OFF3,
        "N": ("on N mtp", "on N mtp", "refused: NO_DFLASH")},
    ("dflash", "defaults"): {
        "auto": ("off: NOTE", "off: NO_HEAD", "on 2 dflash"), "off": OFF3,
        "N": ("refused: NOTE", "refused: NO_HEAD", "on N dflash")},
    ("both", "defaults"): {
        "auto": ("on 2 mtp", "on 2 mtp", "on 2 dflash"), "off": OFF3,
        "N": ("on N mtp", "on N mtp", "on N dflash")},
    ("moe", "defaults"): {
        "auto": ("off: MOE", "off: MOE", "off: MOE_DFLASH"), "off": OFF3,
        "N": ("refused: MOE", "refused: MOE", "refused: MOE_DFLASH")},
    # A sampled turn temperature no longer changes the session (the open
    # assumes greedy): the same grid as the defaults'; only each item's turn
    # says the turn will not speculate (test_turns_follow_the_temperature).
    ("both", "sampled"): {
        "auto": ("on 2 mtp", "on 2 mtp", "on 2 dflash"), "off": OFF3,
        "N": ("on N mtp", "on N mtp", "on N dflash")},
    ("dflash", "sampled"): {
        "auto": ("off: NOTE", "off: NO_HEAD", "on 2 dflash"), "off": OFF3,
        "N": ("refused: NOTE", "refused: NO_HEAD", "on N dflash")},
    ("mtp", "blocker"): {
        "auto": ("off: VISION",) * 3, "off": OFF3, "N": ("refused: VISION",) * 3},
    # The note outranks the engine's reason (it names the drafter to pick).
    ("dflash", "blocker"): {
        "auto": ("off: NOTE", "off: VISION", "off: VISION"), "off": OFF3,
        "N": ("refused: NOTE", "refused: VISION", "refused: VISION")},
    ("none", "blocker-null"): {
        "auto": ("on 2 mtp", "on 2 mtp", "on 2 dflash"), "off": OFF3,
        "N": ("on N mtp", "on N mtp", "on N dflash")},
    ("dflash", "blocker-null"): {
        "auto": ("off: NOTE", "on 2 mtp", "on 2 dflash"), "off": OFF3,
        "N": ("refused: NOTE", "on N mtp", "on N dflash")},
}


def test_turns_follow_the_temperature(abi, installs):
    """Each item's turn: at the binding's default 0.2 no turn speculates, at
    0 every drafting session's turn does; a session that does not draft has
    no turn reason (its own reason says why)."""
    for options, temperature in ((b"{}", 0.2), (b'{"tsffi": {"temperature": 0}}', 0.0),
                                 (OPTION_SETS["sampled"], 0.7)):
        items = table(abi, installs["both"], options)["choices"]
        for item in items:
            if item["plan"] is None:
                continue
            turn = item["plan"]["turn"]
            drafts = item["plan"]["speculation"]["block"] is not None
            assert turn["temperature"] == temperature
            assert turn["speculates"] is (drafts and temperature == 0)
            assert (turn["reason"] is not None) is (drafts and temperature != 0)


@pytest.mark.parametrize("shape,options", list(GRIDS), ids=[f"{s}-{o}" for s, o in GRIDS])
def test_what_the_items_say(abi, installs, shape, options):
    items = table(abi, installs[shape], OPTION_SETS[options])["choices"]
    grid = GRIDS[(shape, options)]
    for row, speculation in enumerate(SPECULATIONS):
        want = grid["N"] if isinstance(speculation, int) else grid[speculation]
        want = tuple(w.replace(" N ", f" {speculation} ") for w in want)
        got = tuple(cell(items[row * 3 + col]) for col in range(3))
        assert got == want, speculation


# ---------------------------------------------------------------------------
# The selected item, and a pick that cannot be an item.

@pytest.mark.parametrize("options,selected", [
    (b"{}", ("auto", "auto")),
    (b"", ("auto", "auto")),
    (None, ("auto", "auto")),
    (b'{"speculation": null, "speculativeDrafter": null}', ("auto", "auto")),
    (b'{"speculation": "AUTO"}', ("auto", "auto")),
    (b'{"speculation": "Off", "speculativeDrafter": "dflash"}', ("off", "dflash")),
    (b'{"speculation": "07"}', (7, "auto")),
    (b'{"speculation": 15, "speculativeDrafter": "mtp"}', (15, "mtp")),
    (b'{"speculation": 1, "speculativeDrafter": "dflash"}', (1, "dflash")),
])
def test_selected_marks_the_hosts_pick(abi, installs, options, selected):
    items = table(abi, installs["dflash"], options)["choices"]
    picked = [(i["speculation"], i["speculativeDrafter"]) for i in items if i["selected"]]
    assert picked == [selected]


@pytest.mark.parametrize("options,status,message", [
    (b'{"speculation": 16}', 2, "speculation block must be in 1..=15, got 16"),
    (b'{"speculation": "0"}', 2, "speculation block must be in 1..=15, got 0"),
    (b'{"speculativeDrafter": "Mtp"}', 2,
     'speculativeDrafter must be auto, mtp or dflash, got "Mtp"'),
    (b'{"maxContext": "big"}', 2, 'maxContext must be a number or "auto", got "big"'),
    (b'{"kvBits": 4}', 4,
     "options: invalid type: integer `4`, expected a string at line 1 column 12"),
    (b'{"tsffi": {"temperature": "warm"}}', 1,
     'tsffi.temperature: got "warm"; accepts a finite number >= 0, or null (the engine '
     "binding's default temperature, 0.2)"),
])
def test_an_invalid_pick_makes_the_call_invalid(abi, installs, options, status, message):
    got = abi.choices(installs["mtp"], options)
    assert got == (status, None, message.encode())
    # Exactly as the plan call refuses the same options.
    assert abi.plan(installs["mtp"], options) == got


def test_bad_arguments_are_the_plan_calls(abi, installs):
    for model_dir, options in ((b"", b"{}"), (b"/tmp/\xffx", b"{}"),
                               (os.fsencode(installs["mtp"]), b"{,}"),
                               (os.fsencode(installs["mtp"]), b'{"tsffi": {"x": 2}}')):
        got = abi.choices(os.fsdecode(model_dir), options)
        assert got[0] in (1, 4) and got[1] is None
        assert got == abi.plan(os.fsdecode(model_dir), options)


# ---------------------------------------------------------------------------
# One install snapshot per table; the Python API.

def test_the_index_is_read_once_per_table(installs, monkeypatch):
    from turbospark_ffi import api, snapshots
    snapshots.clear_cache()
    reads = []
    real = snapshots.load_resident_index
    monkeypatch.setattr(snapshots, "load_resident_index",
                        lambda path: reads.append(path) or real(path))
    result = api.speculation_choices(str(installs["both"]), "{}")
    assert len(result["choices"]) == 51
    assert reads == [os.path.join(str(installs["both"]), "model_weights.bin")]


@pytest.mark.parametrize("options", ["defaults", "sampled", "picked"])
@pytest.mark.parametrize("shape", ["none", "dflash", "moe"])
def test_python_api_returns_the_same_object(abi, installs, shape, options):
    import turbospark_ffi
    from turbospark_ffi.options import parse_options
    raw = OPTION_SETS[options]
    from_c = table(abi, installs[shape], raw)
    assert turbospark_ffi.speculation_choices(installs[shape], raw) == from_c
    assert turbospark_ffi.speculation_choices(str(installs[shape]), raw.decode()) == from_c
    assert turbospark_ffi.speculation_choices(installs[shape], parse_options(raw)) == from_c


def test_python_api_refuses_what_the_c_call_refuses(installs):
    import turbospark_ffi
    from turbospark_ffi.errors import InvalidArgument, OptionRefused
    with pytest.raises(OptionRefused, match="^speculation block must be in 1..=15, got 16$"):
        turbospark_ffi.speculation_choices(installs["mtp"], '{"speculation": 16}')
    # Options built in Python, never parsed: refused in the open's words too.
    from turbospark_ffi.options import Options
    from turbospark_ffi.policy import Speculation
    with pytest.raises(OptionRefused, match="^speculation block must be in 1..=15, got 16$"):
        turbospark_ffi.speculation_choices(installs["mtp"],
                                           Options(speculation=Speculation.block(16)))
    with pytest.raises(InvalidArgument, match="model_dir is empty"):
        turbospark_ffi.speculation_choices("", None)


# ---------------------------------------------------------------------------
# Warm: answered from C while the install is unchanged, read again after.

def _answered_by_python(abi, model_dir, monkeypatch) -> bool:
    from turbospark_ffi import _abi
    fn = _abi._lib.TSFFI__FN_SPECULATION_CHOICES
    original = _abi._handlers[fn]
    calls = []
    monkeypatch.setitem(_abi._handlers, fn, lambda a, b: calls.append(a) or original(a, b))
    try:
        assert abi.choices(model_dir, b"{}")[0] == 0
    finally:
        monkeypatch.setitem(_abi._handlers, fn, original)
    return bool(calls)


def test_warm_table_is_served_from_c_and_a_change_is_read_again(abi, tmp_path, monkeypatch,
                                                                aged_clock):
    from turbospark_ffi.install_writer import write_install
    d = write_install(tmp_path / "install", mtp=True)
    first = table(abi, d, b"{}")
    assert first["install"] == {"installHasMtpHead": True, "installHasDflash": False}
    assert not _answered_by_python(abi, d, monkeypatch), "the warm table must come from C"
    other = write_install(tmp_path / "other", dflash=True)
    os.replace(other / "model_weights.bin", d / "model_weights.bin")
    assert _answered_by_python(abi, d, monkeypatch), "a replaced index must reach Python"
    second = table(abi, d, b"{}")
    assert second["install"] == {"installHasMtpHead": False, "installHasDflash": True}
    assert cell(second["choices"][0]) == "off: NOTE"


def test_a_fresh_install_is_not_served_from_c(abi, tmp_path, monkeypatch):
    from turbospark_ffi.install_writer import write_install
    d = write_install(tmp_path / "fresh", mtp=True)
    table(abi, d, b"{}")
    assert _answered_by_python(abi, d, monkeypatch)
