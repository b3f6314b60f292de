"""The `turbospark-ffi` console script, run as a subprocess against real
installs: inspect, plan, make-install (and config, which must keep working).

Every run is checked for the things that must hold of every run: no
traceback on stderr, errors as one line, human output within 80 columns and
free of ANSI escapes unless stdout is a terminal and NO_COLOR is unset. The
`--json` outputs are compared byte for byte with what the C ABI itself
returns, through ctypes on the built library.
"""

from __future__ import annotations

import ctypes
import json
import os
import pty
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine_texts import blocker
from original_texts import DFLASH_NOTE

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "turbospark_ffi" / "samples"
ESC = "\x1b"


# ---------------------------------------------------------------------------
# Running the command

def _env(**overrides: str | None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
    env.pop("NO_COLOR", None)
    env.pop("COLUMNS", None)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(*args, env: dict | None = None, json_out: bool | None = None, whole: tuple = ()):
    """Run `python -m turbospark_ffi ARGS` and check what holds of every run.

    `json_out`: the output is for machines (--json, config's flags), so it is
    not wrapped to 80 columns; by default, whether `--json` or `config` is in
    ARGS (config's --help is for people and is checked). `whole`: the paths
    in ARGS that may hold spaces, each printed on one line whatever its
    length."""
    result = subprocess.run([sys.executable, "-m", "turbospark_ffi", *map(_arg, args)],
                            cwd=ROOT, capture_output=True, text=True,
                            env=_env() if env is None else env, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr
    if result.returncode != 0:
        # Errors are ONE line.
        assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    if json_out is None:
        json_out = "--json" in args or (args[:1] == ("config",) and "--help" not in args)
    if not json_out:
        assert_fits_80(result.stdout, whole=tuple(map(str, whole)))
    assert ESC not in result.stdout and ESC not in result.stderr
    return result


def _arg(a):
    return a if isinstance(a, bytes) else str(a)


def assert_fits_80(text: str, whole: tuple[str, ...] = ()) -> None:
    """Every line within 80 columns, but for one that holds a path or a word
    longer than fits, whole (a copied path must be the real one): it ends
    the line (punctuation aside), after at most a label."""
    for line in text.splitlines():
        if len(line) <= 80:
            continue
        body = line.rstrip(":,;.")
        kept = [s for s in (*whole, *body.split()[-1:]) if body.endswith(s)]
        assert kept and len(body[:-len(kept[0])].split()) <= 1, \
            f"{len(line)} columns: {line!r}"


def squash(text: str) -> str:
    """Whitespace-normalised, so a wrapped message compares with its original."""
    return " ".join(text.split())


def run_on_tty(*args, env: dict):
    """Run with stdout on a pseudo-terminal; returns (status, stdout, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "turbospark_ffi", *map(str, args)],
                            cwd=ROOT, stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    status = proc.wait(timeout=120)
    assert "Traceback" not in stderr, stderr
    return status, b"".join(chunks).decode().replace("\r\n", "\n"), stderr


# ---------------------------------------------------------------------------
# The C ABI, through ctypes, for the --json comparisons

class Abi:
    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        out = ctypes.POINTER(ctypes.c_void_p)
        lib.tsffi_speculation_plan.argtypes = [ctypes.c_char_p, ctypes.c_char_p, out]
        lib.tsffi_speculation_plan.restype = ctypes.c_int32
        lib.tsffi_speculation_choices.argtypes = [ctypes.c_char_p, ctypes.c_char_p, out]
        lib.tsffi_speculation_choices.restype = ctypes.c_int32
        lib.tsffi_install_info_json.argtypes = [ctypes.c_char_p, out]
        lib.tsffi_install_info_json.restype = ctypes.c_int32
        lib.tsffi_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.tsffi_last_error.restype = ctypes.c_size_t
        lib.tsffi_string_free.argtypes = [ctypes.c_void_p]
        lib.tsffi_string_free.restype = None
        self.lib = lib

    def _take(self, status: int, ptr: ctypes.c_void_p):
        text = None
        if ptr.value:
            text = ctypes.string_at(ptr.value).decode("utf-8")
            self.lib.tsffi_string_free(ptr)
        size = self.lib.tsffi_last_error(None, 0)
        buf = ctypes.create_string_buffer(size + 1)
        self.lib.tsffi_last_error(buf, size + 1)
        return status, text, buf.value.decode("utf-8")

    def plan(self, model_dir, options: str):
        ptr = ctypes.c_void_p()
        status = self.lib.tsffi_speculation_plan(os.fsencode(str(model_dir)),
                                              options.encode("utf-8"), ctypes.byref(ptr))
        return self._take(status, ptr)

    def choices(self, model_dir, options: str):
        ptr = ctypes.c_void_p()
        status = self.lib.tsffi_speculation_choices(os.fsencode(str(model_dir)),
                                                    options.encode("utf-8"), ctypes.byref(ptr))
        return self._take(status, ptr)

    def info(self, model_dir):
        ptr = ctypes.c_void_p()
        status = self.lib.tsffi_install_info_json(os.fsencode(str(model_dir)), ctypes.byref(ptr))
        return self._take(status, ptr)


@pytest.fixture(scope="session")
def abi(library_path) -> Abi:
    return Abi(library_path)


# ---------------------------------------------------------------------------
# Installs: written by the command itself (make-install), plus shapes only the
# writer's API can make (partial drafters) and unreadable indexes.

SHAPES = {
    "none": [],
    "mtp": ["--mtp"],
    "dflash": ["--dflash"],
    "both": ["--mtp", "--dflash"],
    "moe": ["--mtp", "--experts", "256", "--layers", "8"],
    "bf16": ["--mtp", "--probe-dtype", "bf16"],
    "nolayer": ["--mtp", "--layers", "2"],
}


@pytest.fixture(scope="session")
def installs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli_installs")
    made: dict[str, Path] = {}
    for name, flags in SHAPES.items():
        result = run("make-install", root / name, *flags)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"wrote {root / name}: ")
        made[name] = root / name

    from turbospark_ffi.install_writer import DFLASH_TENSORS, MTP_HEAD_TENSORS, write_install
    made["partial_mtp"] = write_install(root / "partial_mtp", mtp_tensors=MTP_HEAD_TENSORS[:4])
    made["headless_mtp"] = write_install(root / "headless_mtp",
                                         mtp_tensors=MTP_HEAD_TENSORS[1:3])
    made["partial_dflash"] = write_install(root / "partial_dflash",
                                           dflash_tensors=DFLASH_TENSORS[:70])

    short = root / "short_header"
    short.mkdir()
    (short / "model_weights.bin").write_bytes(b"\x00" * 10)
    made["short_header"] = short

    past = write_install(root / "entry_table_past_index", mtp=True)
    weights = past / "model_weights.bin"
    data = bytearray(weights.read_bytes())
    data[16:24] = (10**6).to_bytes(8, "little")  # entry_count: a table far past indexSize
    weights.write_bytes(bytes(data))
    made["entry_table_past_index"] = past

    made["missing"] = root / "no_such_install"
    return made


# ---------------------------------------------------------------------------
# inspect

def entries(abi, path) -> str:
    """The entry count the C ABI reads, as inspect prints it."""
    return f"{json.loads(abi.info(path)[1])['entryCount']:,} entries"


def test_inspect_none(installs, abi):
    r = run("inspect", installs["none"])
    assert r.returncode == 0 and r.stderr == ""
    out = r.stdout
    assert f"install           {installs['none']}" in out
    assert f"readable: {entries(abi, installs['none'])}, index 16,384 bytes" in out
    assert "MTP head          absent (0 of 15 tensors)" in out
    assert "DFlash2 drafter   absent (0 of 81 tensors)" in out
    assert "layer 3, the first full-attention layer" in out
    assert "language_model.model.layers.3.self_attn.q_proj.weight" in out
    assert "dtype 4 (INT4 affine), which the batched verify covers" in out
    assert "dense: packed_experts/layout.json routes no experts" in out
    assert ("arch family qwen35, 4 layers, hidden size 5,120, vocabulary 248,320; dense; no "
            "vision tower (manifest.json)") in squash(out)
    assert ("open passes: the directory, the manifest's arch, the resident index and its dtypes "
            "pass the engine's open") in squash(out)
    assert "carries no multi-token-prediction head" in squash(out)
    assert "carries no DFlash2 drafter" in squash(out)


def test_inspect_mtp(installs, abi):
    out = run("inspect", installs["mtp"]).stdout
    assert f"readable: {entries(abi, installs['mtp'])}, index " in out
    assert "MTP head          complete: all 15 tensors" in out
    assert "DFlash2 drafter   absent (0 of 81 tensors)" in out
    assert "  mtp             none: nothing in the files stands in the way" in out


def test_inspect_dflash(installs, abi):
    out = run("inspect", installs["dflash"]).stdout
    assert f"readable: {entries(abi, installs['dflash'])}, index " in out
    assert "MTP head          absent (0 of 15 tensors)" in out
    assert "DFlash2 drafter   complete: all 81 tensors" in out
    assert "  dflash          none: nothing in the files stands in the way" in out


def test_inspect_both(installs, abi):
    out = run("inspect", installs["both"]).stdout
    # The drafters add exactly their 15 and 81 entries to the same trunk.
    def count(name):
        return json.loads(abi.info(installs[name])[1])["entryCount"]
    assert count("both") == count("none") + 15 + 81 == count("mtp") + 81
    assert f"readable: {entries(abi, installs['both'])}, index " in out
    assert "MTP head          complete: all 15 tensors" in out
    assert "DFlash2 drafter   complete: all 81 tensors" in out
    assert out.count("none: nothing in the files stands in the way") == 2


@pytest.mark.parametrize("name,entries", [("none", 851), ("mtp", 866), ("dflash", 932),
                                          ("both", 947)])
def test_inspect_shipped_samples(name, entries):
    out = run("inspect", SAMPLES / name).stdout
    assert f"readable: {entries} entries, index " in out


def test_inspect_moe(installs):
    out = run("inspect", installs["moe"]).stdout
    assert "MoE: 256 routed experts per layer, over 8 layers" in out
    preview = squash(out.split("blocker preview", 1)[1])
    # Each drafter's blocker function, in its own words.
    for drafter in ("mtp", "dflash"):
        assert preview.count(blocker(drafter, "moe", experts=256)) == 1, drafter
    assert "stream" not in preview


def test_inspect_probe_dtype_not_covered(installs):
    out = run("inspect", installs["bf16"]).stdout
    assert "dtype 1 (BF16), which the batched verify does NOT cover" in out
    probe = "language_model.model.layers.3.self_attn.q_proj.weight"
    # The DFlash2 text is the start of the MTP runner's: each drafter's line is
    # checked whole (dflash's is the last of the report).
    assert "mtp " + blocker("mtp", "probe-dtype", probe=probe, dtype=1) + " dflash " \
        in squash(out)
    assert squash(out).endswith(" dflash " + blocker("dflash", "probe-dtype", probe=probe,
                                                      dtype=1))


def test_inspect_no_full_attention_layer(installs):
    out = squash(run("inspect", installs["nolayer"]).stdout)
    assert "probe none: no full-attention layer" in out


def test_inspect_partial_mtp_lists_missing(installs):
    from turbospark_ffi.install_writer import MTP_HEAD_TENSORS
    out = run("inspect", installs["partial_mtp"]).stdout
    assert "MTP head          partial: 4 of 15 tensors, detected; missing:" in out
    lines = out.splitlines()
    for name in MTP_HEAD_TENSORS[4:]:
        assert " " * 20 + name in lines
    for name in MTP_HEAD_TENSORS[:4]:
        assert " " * 20 + name not in lines


def test_inspect_partial_without_presence_tensor(installs):
    out = squash(run("inspect", installs["headless_mtp"]).stdout)
    assert ("partial: 2 of 15 tensors, NOT detected: its presence test, mtp.fc.weight, "
            "is missing; missing: mtp.fc.weight") in out
    assert "carries no multi-token-prediction head" in out


def test_inspect_partial_dflash(installs):
    from turbospark_ffi.install_writer import DFLASH_TENSORS
    out = run("inspect", installs["partial_dflash"]).stdout
    assert "DFlash2 drafter   partial: 70 of 81 tensors, detected; missing:" in out
    for name in DFLASH_TENSORS[70:]:
        assert " " * 20 + name in out.splitlines()


@pytest.mark.parametrize("name,check", [("short_header", "short_header"),
                                        ("entry_table_past_index", "entry_table_past_index"),
                                        ("missing", "open")])
def test_inspect_unreadable_index(installs, abi, name, check):
    r = run("inspect", installs[name])
    assert r.returncode == 0 and r.stderr == ""
    status, info, _ = abi.info(installs[name])
    assert status == 0
    info = json.loads(info)
    assert info["indexCheck"] == check
    out = squash(r.stdout)
    # The exact reason, and the check that tripped.
    # (A path longer than the value column is broken across lines to fit.)
    assert "".join(f"index UNREADABLE ({check} check): {info['indexError']}".split()) \
        in "".join(r.stdout.split())
    assert '"unknown" (null), which is not "absent"' in out
    assert "MTP head unknown (the index is unreadable)" in out
    assert "DFlash2 drafter unknown (the index is unreadable)" in out
    # The open refuses it: the blocker preview is not asked ("none" would
    # say nothing stands in the way).
    assert f"open REFUSED: {squash(info['openError'])} the engine's open fails on this install " \
        "whatever the options ask: plan and choices exit 2 with this message" in out
    assert "mtp none asked (the open fails first) dflash none asked (the open fails first)" \
        in out
    assert "nothing in the files stands in the way" not in out


def test_inspect_manifest_refused(installs):
    out = squash(run("inspect", installs["short_header"]).stdout)
    assert (f"arch UNUSABLE: no manifest.json at {installs['short_header']}/manifest.json: No "
            "such file or directory (os error 2)") in out
    assert "probe unknown (the index is unreadable)" in out


def test_inspect_moe_arch(installs):
    out = squash(run("inspect", installs["moe"]).stdout)
    assert ("arch family qwen36, 8 layers, hidden size 5,120, vocabulary 248,320; MoE, 256 "
            "routed experts; no vision tower (manifest.json)") in out


ALL_INSTALLS = list(SHAPES) + ["partial_mtp", "headless_mtp", "partial_dflash",
                               "short_header", "entry_table_past_index", "missing"]


@pytest.mark.parametrize("name", ALL_INSTALLS)
def test_inspect_json_is_the_c_abi(installs, abi, name):
    r = run("inspect", installs[name], "--json")
    status, text, error = abi.info(installs[name])
    assert status == 0 and error == ""
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == text + "\n"


def test_inspect_json_shipped_sample(abi, monkeypatch):
    # A relative path, read from the same working directory the command runs in.
    monkeypatch.chdir(ROOT)
    r = run("inspect", "turbospark_ffi/samples/both", "--json")
    assert r.stdout == abi.info("turbospark_ffi/samples/both")[1] + "\n"


def test_inspect_invalid_dirs(abi):
    r = run("inspect", "")
    assert r.returncode == 1
    assert r.stderr.startswith("turbospark-ffi inspect: model_dir is empty")
    raw = os.fsencode("/tmp/not-utf8-") + b"\xff"
    r = run("inspect", raw)
    status, _, error = abi.info(os.fsdecode(raw))
    assert status == 1
    assert r.returncode == 1
    assert r.stderr == f"turbospark-ffi inspect: {error}\n"
    assert "not UTF-8" in r.stderr


# ---------------------------------------------------------------------------
# plan: plain words

def test_plan_none_auto(installs):
    r = run("plan", installs["none"])
    assert r.returncode == 0 and r.stderr == ""
    out = squash(r.stdout)
    assert "options {} (the object a host passes to tsffi_speculation_plan)" in out
    assert "speculation OFF (the reason is below)" in out
    assert "drafter mtp (MTP head), resolved by auto from the index" in out
    assert "the install carries an MTP head: no; a DFlash2 drafter: no" in out
    assert "open with mtp auto (built if the install carries it) dflash off" in out
    assert "reason this install carries no multi-token-prediction head" in out
    assert "note " not in out


def test_plan_mtp_auto_on(installs):
    out = squash(run("plan", installs["mtp"]).stdout)
    assert "speculation ON: block 2, drafted by the MTP head" in out
    assert "reason" not in out


def test_plan_dflash_auto_note(installs):
    from turbospark_ffi.policy import DFLASH_AUTO_NOTE
    out = squash(run("plan", installs["dflash"]).stdout)
    assert "speculation OFF" in out
    assert "the install carries an MTP head: no; a DFlash2 drafter: yes" in out
    assert f"note {DFLASH_AUTO_NOTE}" in out
    assert "reason the note above" in out


def test_plan_dflash_named(installs):
    r = run("plan", installs["dflash"], "--speculative-drafter", "dflash", "--speculation", "2")
    out = squash(r.stdout)
    assert r.returncode == 0
    assert 'options {"speculation":"2","speculativeDrafter":"dflash"}' in out
    assert "speculation ON: block 2, drafted by the DFlash2 drafter" in out
    assert "drafter dflash (DFlash2 drafter), as asked" in out
    assert ("open with mtp off dflash fixed at block 2 (the open fails if it is missing)"
            in out)


def test_plan_both_auto_is_mtp(installs):
    out = squash(run("plan", installs["both"]).stdout)
    assert "speculation ON: block 2, drafted by the MTP head" in out
    assert "the install carries an MTP head: yes; a DFlash2 drafter: yes" in out


def test_plan_off_as_asked(installs):
    out = squash(run("plan", installs["mtp"], "--speculation", "OFF").stdout)
    assert "speculation OFF, as asked (--speculation off)" in out
    assert "open with mtp off dflash off" in out


def test_plan_moe_auto_reason(installs):
    out = squash(run("plan", installs["moe"]).stdout)
    assert "speculation OFF" in out
    assert "reason " + blocker("mtp", "moe", experts=256) in out


def test_plan_engine_blocker(installs):
    r = run("plan", installs["mtp"], "--engine-blocker", "a vision tower is active")
    out = squash(r.stdout)
    assert r.returncode == 0
    assert "reason a vision tower is active" in out
    r = run("plan", installs["none"], "--no-engine-blocker")
    out = squash(r.stdout)
    assert 'options {"tsffi":{"engineBlocker":null}}' in out
    assert "speculation ON: block 2" in out


# The turn (ABI 4): whether a turn the host sends speculates, one row after
# the session's. Through the C ABI only a turn at temperature 0 without rate
# control does; the engine falls back silently, so the reason is shown whole.
TEMPERATURE_02 = ("SEQUENTIAL: this session drafts, but a turn speculates only at temperature 0 "
                  "and this turn's temperature is 0.2 (the engine binding's default): it "
                  "decodes sequentially (send temperature 0 to speculate)")
RATE_CONTROL = ("and a turn under rate control decodes sequentially")
TURNS = [
    # (install, flags, the turn row, whitespace-squashed, without its label)
    ("mtp", [], TEMPERATURE_02),
    ("mtp", ["--temperature", "0"], "SPECULATES at temperature 0"),
    ("mtp", ["--temperature", "0.7"],
     "SEQUENTIAL: this session drafts, but a turn speculates only at temperature 0 and this "
     "turn's temperature is 0.7: it decodes sequentially (send temperature 0 to speculate)"),
    # -0.0 is 0 to the engine's `== 0.0`.
    ("mtp", ["--options", '{"tsffi": {"temperature": -0.0}}'], "SPECULATES at temperature -0"),
    ("mtp", ["--temperature", "0", "--low-power-mode"],
     "SEQUENTIAL: this session drafts, but Low Power Mode resolves the absent powerProfile to "
     "\"efficiency\", which turns the engine's rate control on, " + RATE_CONTROL +
     " (set powerProfile \"performance\" to speculate)"),
    # A powerProfile given outranks Low Power Mode.
    ("mtp", ["--options", '{"powerProfile": "performance", "tsffi": {"temperature": 0, '
             '"lowPowerMode": true}}'], "SPECULATES at temperature 0"),
    ("mtp", ["--options", '{"powerProfile": "balanced", "tsffi": {"temperature": 0}}'],
     "SEQUENTIAL: this session drafts, but powerProfile \"balanced\" turns the engine's rate "
     "control on, " + RATE_CONTROL + " (powerProfile \"performance\" speculates)"),
    # Any maxTokensPerSec, 0 included, turns rate control on.
    ("mtp", ["--options", '{"maxTokensPerSec": 0, "tsffi": {"temperature": 0}}'],
     "SEQUENTIAL: this session drafts, but maxTokensPerSec turns the engine's rate control on, "
     + RATE_CONTROL + " (leave maxTokensPerSec unset to speculate)"),
    # The session does not draft: the session's reason says why.
    ("none", [], "sequential at temperature 0.2 (the engine binding's default): the session "
                 "does not draft"),
    ("moe", ["--temperature", "0"], "sequential at temperature 0: the session does not draft"),
    ("mtp", ["--speculation", "off", "--temperature", "0"],
     "sequential at temperature 0: the session does not draft"),
    # The session drafts DFlash2 at a sampled temperature too (it was refused
    # before ABI 4); it is the turn that will not speculate.
    ("both", ["--speculative-drafter", "dflash", "--speculation", "2", "--temperature", "0.7"],
     "SEQUENTIAL: this session drafts, but a turn speculates only at temperature 0 and this "
     "turn's temperature is 0.7: it decodes sequentially (send temperature 0 to speculate)"),
]


@pytest.mark.parametrize("name,flags,row", TURNS)
def test_plan_shows_the_turn(installs, abi, name, flags, row):
    r = run("plan", installs[name], *flags)
    assert r.returncode == 0 and r.stderr == ""
    out = squash(r.stdout)
    # The row after the session's, before the drafter's.
    assert out.split(" turn ", 1)[1].split(" drafter ", 1)[0] == row
    # The JSON agrees: a plain row is never the command's own verdict.
    turn = json.loads(abi.plan(installs[name], flags_to_options(flags))[1])["turn"]
    assert turn["speculates"] is row.startswith("SPECULATES")
    assert (turn["reason"] is None) is not row.startswith("SEQUENTIAL:")


@pytest.mark.parametrize("name,flags,row", [
    ("mtp", ["--temperature", "0"], "SPECULATES at temperature 0, in every cell that is on"),
    ("mtp", ["--temperature", "0", "--low-power-mode"],
     "SEQUENTIAL in every cell that is on: this session drafts, but Low Power Mode resolves the "
     "absent powerProfile to \"efficiency\", which turns the engine's rate control on, "
     + RATE_CONTROL + " (set powerProfile \"performance\" to speculate)"),
    ("moe", [], "sequential: no cell drafts, so no turn speculates"),
])
def test_choices_shows_the_turn(installs, name, flags, row):
    r = run("choices", installs[name], *flags)
    assert r.returncode == 0 and r.stderr == ""
    assert squash(r.stdout).split(" turn ", 1)[1].split(" speculation (rows)", 1)[0] == row


def test_low_power_mode_is_the_tsffi_key(installs, abi):
    r = run("plan", installs["mtp"], "--low-power-mode", "--json")
    assert r.stdout == abi.plan(installs["mtp"], '{"tsffi": {"lowPowerMode": true}}')[1] + "\n"
    assert "options      {\"tsffi\":{\"lowPowerMode\":true}}" in \
        run("plan", installs["mtp"], "--low-power-mode").stdout


# The engine's open fails on these installs whatever is asked (ABI 4): exit
# 2, the open's message alone on stderr, and on stdout where it stopped.
# (name, the words on stdout after "REFUSED: the engine's open fails on this
# install: ", the message with {dir} for the install's path)
OPEN_REFUSED = [
    ("short_header", "it reads manifest.json's arch first, and refuses this one",
     "no manifest.json at {dir}/manifest.json: No such file or directory (os error 2)"),
    ("missing", "DIR is not a directory the open can read",
     "{dir} is not a directory (and matched no installed alias)"),
    ("entry_table_past_index", "it cannot read the resident index of model_weights.bin",
     "resident index is corrupt: header+entries (72000024) > indexSize 16384"),
    ("partial_mtp", "it cannot build the MTP head's state from the resident tensors",
     "missing resident tensor: mtp.layers.0.input_layernorm.weight"),
]


@pytest.mark.parametrize("name,stage,message", OPEN_REFUSED)
@pytest.mark.parametrize("as_json", [False, True])
def test_plan_the_open_refuses_exits_2_with_its_message(installs, abi, name, stage, message,
                                                        as_json):
    message = message.format(dir=installs[name])
    r = run("plan", installs[name], *(["--json"] if as_json else []))
    assert (r.returncode, r.stderr) == (2, message + "\n")
    assert abi.plan(installs[name], "{}") == (2, None, message)
    if as_json:
        assert r.stdout == ""
    else:
        assert squash(r.stdout) == (
            f"install {installs[name]} options {{}} open REFUSED: the engine's open fails on "
            f"this install: {stage} (exit status 2); the message on stderr is the open's, "
            "verbatim")


@pytest.mark.parametrize("name,stage,message", OPEN_REFUSED)
def test_choices_the_open_refuses_exits_2_with_its_message(installs, abi, name, stage, message):
    """A table of an install the open fails on whatever is asked fails whole
    (every item would); partial_mtp is not one: only its MTP items fail."""
    message = message.format(dir=installs[name])
    if name == "partial_mtp":
        assert abi.choices(installs[name], "{}")[0] == 0
        return
    for flags in ([], ["--json"]):
        r = run("choices", installs[name], *flags)
        assert (r.returncode, r.stdout, r.stderr) == (2, "", message + "\n")
    assert abi.choices(installs[name], "{}") == (2, None, message)


# ---------------------------------------------------------------------------
# plan: refused (2) and invalid (1)

REFUSED = [
    ("none", ["--speculation", "2"]),
    ("dflash", ["--speculation", "2"]),
    ("moe", ["--speculation", "2"]),
    ("bf16", ["--speculation", "2"]),
    ("mtp", ["--speculation", "3", "--engine-blocker", "a vision tower is active"]),
]


def flags_to_options(flags: list[str]) -> str:
    """The test's own reading of the flags: the options object a host sends,
    the preview's inputs in the "tsffi" object (ABI 3)."""
    keys = {"--speculation": "speculation", "--speculative-drafter": "speculativeDrafter"}
    options: dict = {}
    preview: dict = {}
    it = iter(flags)
    for flag in it:
        if flag == "--no-engine-blocker":
            preview["engineBlocker"] = None
        elif flag == "--json":
            continue
        elif flag == "--options":
            return next(it)
        elif flag == "--engine-blocker":
            preview["engineBlocker"] = next(it)
        elif flag == "--low-power-mode":
            preview["lowPowerMode"] = True
        elif flag == "--temperature":
            text = next(it)
            try:
                number = float(text)
            except ValueError:
                number = None
            finite = number is not None and number - number == 0
            preview["temperature"] = number if finite else text
        else:
            options[keys[flag]] = next(it)
    if preview:
        options["tsffi"] = preview
    return json.dumps(options)


def test_flags_to_options_nests_the_preview_inputs():
    """The reading the tests compare against: a top-level "temperature"
    would be ignored by the library (and listed), so this must nest."""
    assert flags_to_options(["--temperature", "0.7", "--no-engine-blocker",
                             "--speculation", "2"]) == \
        '{"speculation": "2", "tsffi": {"temperature": 0.7, "engineBlocker": null}}'
    assert flags_to_options([]) == "{}"


@pytest.mark.parametrize("name,flags", REFUSED)
@pytest.mark.parametrize("as_json", [False, True])
def test_plan_refused_exits_2_with_the_message_verbatim(installs, abi, name, flags, as_json):
    args = ["plan", installs[name], *flags] + (["--json"] if as_json else [])
    r = run(*args)
    status, text, error = abi.plan(installs[name], flags_to_options(flags))
    assert status == 2 and text is None
    assert error.startswith("--speculative was asked for but cannot be served: ")
    assert r.returncode == 2
    # Plain words: what the refusal means on stdout (the message names the
    # engine's flag); --json: nothing, as the C ABI returns no result.
    if as_json:
        assert r.stdout == ""
    else:
        install, rest = r.stdout.split("\n", 1)
        options, rest = rest.split("\nspeculation  ", 1)
        assert install == f"install      {installs[name]}"
        assert options.startswith("options      ")
        # A long object wraps at its spaces, onto rows indented under it.
        assert json.loads(" ".join(line[13:] for line in options.split("\n"))) \
            == json.loads(flags_to_options(flags))
        assert "speculation  " + rest == REFUSED_WORDS
    assert r.stderr == error + "\n"


REFUSED_WORDS = ("speculation  REFUSED: the named block cannot be served on this install (exit\n"
                 "             status 2); the message on stderr is the engine's, verbatim, and\n"
                 "             its \"--speculative\" is the engine's own command-line flag: "
                 "here it\n"
                 "             is --speculation, option key speculation\n")


def test_plan_refused_says_the_message_names_the_engine_s_flag(installs):
    """The person typed --speculation and reads about --speculative: the
    words on stdout say whose flag that is (the message itself stays the
    engine's, verbatim, alone on stderr)."""
    r = run("plan", installs["dflash"], "--speculation", "2")
    assert r.returncode == 2
    assert r.stderr.startswith("--speculative was asked for but cannot be served: ")
    assert "\"--speculative\" is the engine's own command-line flag: here it" in r.stdout
    assert "is --speculation, option key speculation" in r.stdout
    helped = run("plan", "--help").stdout
    assert "the engine's own command line calls it --speculative" in squash(helped)


# The engine's open refuses these values in its mapping (status 2): its bare
# message, alone on stderr, exit status 2, before any install is read.
MAPPING_REFUSED = [
    (["--speculation", "bogus"], 'speculation must be "off", "auto" or a block in 1..=15, '
                                 'got "bogus"'),
    (["--speculation", "-1"], 'speculation must be "off", "auto" or a block in 1..=15, '
                              'got "-1"'),
    (["--speculation", "2.5"], 'speculation must be "off", "auto" or a block in 1..=15, '
                               'got "2.5"'),
    (["--speculation", "16"], "speculation block must be in 1..=15, got 16"),
    (["--speculation", "0"], "speculation block must be in 1..=15, got 0"),
    (["--speculation", "4294967295"], "speculation block must be in 1..=15, got 4294967295"),
    (["--speculative-drafter", "MTP"], 'speculativeDrafter must be auto, mtp or dflash, '
                                       'got "MTP"'),
    (["--options", '{"maxContext": "big", "speculation": 0}'],
     'maxContext must be a number or "auto", got "big"'),
    (["--options", '{"steeringMode": "add"}'],
     "steering options given without a steering vector path"),
]


@pytest.mark.parametrize("flags,message", MAPPING_REFUSED)
@pytest.mark.parametrize("as_json", [False, True])
def test_plan_mapping_refusal_exits_2_with_the_engine_s_message(installs, abi, flags, message,
                                                                as_json):
    r = run("plan", installs["mtp"], *flags, *(["--json"] if as_json else []))
    assert (r.returncode, r.stdout, r.stderr) == (2, "", message + "\n")
    # The same refusal a host gets from the C ABI for the same object.
    assert abi.plan(installs["mtp"], flags_to_options(flags)) == (2, None, message)


# What the open never sees: a bad tsffi object (status 1), one line naming
# the flag, the key, the value and the accepted set.
INVALID = [
    (["--temperature", "-1"], "-1.0"),
    (["--temperature", "nan"], '"nan"'),
    (["--temperature", "warm"], '"warm"'),
    (["--engine-blocker", ""], '""'),
]
INVALID_ACCEPTS = {
    "--temperature": "a finite number >= 0, or null (the engine binding's default "
                     "temperature, 0.2)",
    "--engine-blocker": ("a non-empty string without NUL characters or lone surrogates (the "
                         "engine's reason), or null (the engine reported none)"),
}
KEY_FOR_FLAG = {"--temperature": "tsffi.temperature", "--engine-blocker": "tsffi.engineBlocker"}


@pytest.mark.parametrize("command", ["plan", "choices"])
@pytest.mark.parametrize("flags,value", INVALID)
def test_invalid_preview_input_exits_1_naming_flag_key_value_and_set(installs, abi, command,
                                                                     flags, value):
    r = run(command, installs["mtp"], *flags)
    flag = flags[0]
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (f"turbospark-ffi {command}: {flag} (option key {KEY_FOR_FLAG[flag]}): "
                        f"got {value}; accepts {INVALID_ACCEPTS[flag]}\n")
    status, text, error = abi.plan(installs["mtp"], flags_to_options(flags))
    assert (status, text) == (1, None)
    assert error == f"{KEY_FOR_FLAG[flag]}: got {value}; accepts {INVALID_ACCEPTS[flag]}"


@pytest.mark.parametrize("name", ["moe", "dflash", "short_header", "missing"])
@pytest.mark.parametrize("block", ["0", "16"])
@pytest.mark.parametrize("blocker", [[], ["--engine-blocker", "a vision tower is active"]])
def test_plan_out_of_range_block_exits_2_whatever_the_install(installs, name, block, blocker):
    """Refused by the open's mapping, before the install is read: the same
    line on a MoE install, the DFlash2-only one, an unreadable one and a
    missing one, whatever blocker is given."""
    r = run("plan", installs[name], "--speculation", block, *blocker)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"speculation block must be in 1..=15, got {block}\n"


def test_plan_invalid_also_with_json(installs):
    r = run("plan", installs["mtp"], "--temperature", "hot", "--json")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("turbospark-ffi plan: --temperature (option key "
                               'tsffi.temperature): got "hot"; accepts ')


# --options: the text verbatim, so the answer is the one for that exact text.
OPTIONS_TEXTS = [
    '{"maxContext": 8192, "kvBits": "3.5", "speculation": 2}',
    '{"Speculation": 2}',
    '{"temperature": 0.7, "speculation": "+2"}',
    '{"speculation": 2, "tsffi": {"engineBlocker": "a vision tower is active"}}',
    '[null, null, null, null, null, null, 3]',
]


@pytest.mark.parametrize("command", ["plan", "choices"])
@pytest.mark.parametrize("text", OPTIONS_TEXTS)
def test_options_text_is_sent_verbatim(installs, abi, command, text):
    r = run(command, installs["mtp"], "--options", text, "--json")
    call = abi.plan if command == "plan" else abi.choices
    status, answer, error = call(installs["mtp"], text)
    if status == 0:
        assert (r.returncode, r.stderr, r.stdout) == (0, "", answer + "\n")
    else:
        assert (r.returncode, r.stdout, r.stderr) == (2, "", error + "\n")


@pytest.mark.parametrize("command,text,line", [
    ("plan", '{"maxContext": 1, "maxContext": 2}',
     "turbospark-ffi plan: options: duplicate field `maxContext` at line 1 column 30\n"),
    ("choices", '{"speculativeDrafter": 1}',
     "turbospark-ffi choices: options: invalid type: integer `1`, expected a string at line 1 "
     "column 24\n"),
])
def test_options_the_decoder_refuses_exit_1_with_serde_s_text(installs, abi, command, text,
                                                               line):
    r = run(command, installs["mtp"], "--options", text)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", line)
    call = abi.plan if command == "plan" else abi.choices
    assert call(installs["mtp"], text) == (4, None, line.split(": ", 1)[1].rstrip("\n"))


def test_options_and_an_option_flag_do_not_combine(installs):
    r = run("plan", installs["mtp"], "--options", "{}", "--speculation", "2")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == ("turbospark-ffi plan: --options is the whole options object, sent "
                        "verbatim; accepts it without --speculation, --speculative-drafter, "
                        "--temperature, --low-power-mode, --engine-blocker or "
                        "--no-engine-blocker (put those keys in the object)\n")


@pytest.mark.parametrize("command,label", [("plan", "warning      "), ("choices", "warning  ")])
def test_warnings_are_shown_verbatim(installs, abi, command, label):
    """A near-miss key and a key that moved into "tsffi" are ignored as the
    open ignores them (planned, exit 0), each with the library's hint."""
    text = '{"Speculation": 2, "temperature": 0.7}'
    status, answer, _ = abi.plan(installs["mtp"], text)
    warnings = json.loads(answer)["warnings"]
    assert status == 0 and len(warnings) == 2
    r = run(command, installs["mtp"], "--options", text)
    assert r.returncode == 0 and r.stderr == ""
    for warning in warnings:
        assert f"{label.strip()} {squash(warning)}" in squash(r.stdout)
    plain = run(command, installs["mtp"], "--options", '{"speculation": 2}')
    assert "warning" not in plain.stdout


def test_plan_invalid_dir():
    r = run("plan", "")
    assert r.returncode == 1
    assert r.stderr.startswith("turbospark-ffi plan: model_dir is empty")


USAGE_ERRORS = [
    ["plan"],
    ["plan", "x", "--engine-blocker", "a", "--no-engine-blocker"],
    ["plan", "x", "--speculation"],
    ["plan", "x", "--bogus"],
    ["inspect"],
    ["frobnicate"],
    [],
    ["make-install"],
    ["make-install", "x", "--experts", "many"],
    ["make-install", "x", "--experts", "-1"],
    ["make-install", "x", "--layers", "99999"],
    ["make-install", "x", "--probe-dtype", "int3"],
    ["config", "--bogus"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a) or "no-args")
def test_usage_errors_exit_1_in_one_line(args):
    r = run(*args)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith("turbospark-ffi")
    assert "--help" in r.stderr
    assert "usage:" not in r.stderr


# ---------------------------------------------------------------------------
# plan --json is exactly tsffi_speculation_plan

PLAN_FLAGS = [
    [],
    ["--speculation", "auto"],
    ["--speculation", "AUTO"],
    ["--speculation", "off"],
    ["--speculation", "2"],
    ["--speculation", "15"],
    ["--speculative-drafter", "mtp"],
    ["--speculative-drafter", "dflash"],
    ["--speculative-drafter", "dflash", "--speculation", "2"],
    ["--speculative-drafter", "mtp", "--speculation", "4"],
    ["--temperature", "0"],
    ["--temperature", "0.7", "--speculative-drafter", "dflash"],
    ["--no-engine-blocker"],
    ["--no-engine-blocker", "--speculation", "3"],
    ["--engine-blocker", "a vision tower is active"],
    ["--low-power-mode"],
    ["--temperature", "0", "--low-power-mode"],
]


@pytest.mark.parametrize("name", ["none", "mtp", "dflash", "both", "moe", "bf16",
                                  "headless_mtp", "short_header", "partial_mtp"])
@pytest.mark.parametrize("flags", PLAN_FLAGS, ids=lambda f: " ".join(f) or "defaults")
def test_plan_json_is_the_c_abi(installs, abi, name, flags):
    r = run("plan", installs[name], *flags, "--json")
    status, text, error = abi.plan(installs[name], flags_to_options(flags))
    assert status in (0, 2)
    if status == 0:
        assert r.returncode == 0 and r.stderr == ""
        assert r.stdout == text + "\n"
    else:
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr == error + "\n"
    # The plain-words run agrees on the status and shows the same object.
    plain = run("plan", installs[name], *flags)
    assert plain.returncode == r.returncode
    if status == 0:
        shown = [line for line in plain.stdout.splitlines() if line.startswith("options ")]
        assert len(shown) == 1
        assert json.loads(shown[0][len("options "):]) == json.loads(flags_to_options(flags))


def test_plan_block_as_string_is_the_block_as_integer(installs, abi):
    """--speculation N goes in as the string "N": the grammar reads it as the
    integer a host would send, so the answer is the same."""
    as_string = abi.plan(installs["mtp"], '{"speculation": "3"}')
    as_integer = abi.plan(installs["mtp"], '{"speculation": 3}')
    assert as_string == as_integer
    assert run("plan", installs["mtp"], "--speculation", "3", "--json").stdout \
        == as_integer[1] + "\n"


# ---------------------------------------------------------------------------
# choices: the grid, and --json exactly tsffi_speculation_choices

CHOICES_FLAGS = [
    [],
    ["--temperature", "0.7"],
    ["--temperature", "0"],
    ["--engine-blocker", "a vision tower is active"],
    ["--no-engine-blocker"],
    ["--temperature", "0", "--low-power-mode"],
]


# (short_header and missing: the open refuses them whole, a test of its own.)
@pytest.mark.parametrize("name", ["none", "mtp", "dflash", "both", "moe", "partial_mtp"])
@pytest.mark.parametrize("flags", CHOICES_FLAGS, ids=lambda f: " ".join(f) or "defaults")
def test_choices_json_is_the_c_abi(installs, abi, name, flags):
    r = run("choices", installs[name], *flags, "--json")
    status, text, error = abi.choices(installs[name], flags_to_options(flags))
    assert (status, error) == (0, "")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == text + "\n"


NO_HEAD_TEXT = blocker("mtp", "no-drafter")


def footnote(number: int, text: str) -> str:
    """A numbered text as the grid prints it: within 79 columns, its lines
    indented under the first, never broken inside a word or at a hyphen."""
    return textwrap.fill(text, 79, initial_indent=f"[{number}]  ", subsequent_indent="     ",
                         break_long_words=False, break_on_hyphens=False)


CHOICES_DFLASH = """\
install  {dir}
options  {{}}
         (held for every item; each cell is tsffi_speculation_plan with that
         row's speculation and that column's speculativeDrafter added)
carries  an MTP head: no; a DFlash2 drafter: yes
turn     SEQUENTIAL in every cell that is on: this session drafts, but a turn
         speculates only at temperature 0 and this turn's temperature is 0.2
         (the engine binding's default): it decodes sequentially (send
         temperature 0 to speculate)

speculation  (rows) x speculativeDrafter (columns)
        auto                    mtp                     dflash
auto    off: DFlash2 opt-in [1] off: no MTP head [2]    on 2 (dflash)
off     off                     off                     off
{blocks}
{notes}
refused: the plan call fails (status 2) with "--speculative was asked for but
cannot be served: " followed by the numbered text, verbatim
"""


def test_choices_grid_dflash_only(installs):
    r = run("choices", installs["dflash"])
    assert r.returncode == 0 and r.stderr == ""
    blocks = "\n".join(f"{n:<8}refused [1]             refused [2]             on {n} (dflash)"
                       for n in range(1, 16))
    notes = footnote(1, DFLASH_NOTE) + "\n" + footnote(2, NO_HEAD_TEXT)
    assert r.stdout == CHOICES_DFLASH.format(dir=installs["dflash"], blocks=blocks + "\n",
                                             notes=notes)


@pytest.mark.parametrize("name,flags,rows", [
    ("mtp", [], {"auto": ["on 2 (mtp)", "on 2 (mtp)", "off: no DFlash2 [1]"],
                 "off": ["off", "off", "off"],
                 "3": ["on 3 (mtp)", "on 3 (mtp)", "refused [1]"]}),
    # The session is the open's answer, greedy assumed, whatever the turn's
    # temperature (ABI 4): DFlash2 is on at 0.7 too (the turn row says the
    # turns will not speculate).
    ("both", ["--temperature", "0.7"], {
        "auto": ["on 2 (mtp)", "on 2 (mtp)", "on 2 (dflash)"],
        "15": ["on 15 (mtp)", "on 15 (mtp)", "on 15 (dflash)"]}),
    # Each drafter's own MoE text: the MTP runner's for auto and mtp [1],
    # the DFlash2 one's for dflash [2].
    ("moe", [], {"auto": ["off: MoE [1]", "off: MoE [1]", "off: MoE [2]"],
                 "1": ["refused [1]", "refused [1]", "refused [2]"]}),
    # The open cannot build a partial MTP head: its items fail, with the
    # open's message [1]; the DFlash2 column is asked as usual [2].
    ("partial_mtp", [], {"auto": ["open fails [1]", "open fails [1]", "off: no DFlash2 [2]"],
                         "off": ["off"] * 3,
                         "1": ["open fails [1]", "open fails [1]", "refused [2]"]}),
    ("mtp", ["--engine-blocker", "a vision tower is active"],
     {"auto": ["off: engine [1]"] * 3, "off": ["off"] * 3, "9": ["refused [1]"] * 3}),
    ("none", ["--no-engine-blocker"], {"auto": ["on 2 (mtp)", "on 2 (mtp)", "on 2 (dflash)"],
                                       "4": ["on 4 (mtp)", "on 4 (mtp)", "on 4 (dflash)"]}),
])
def test_choices_grid_cells(installs, name, flags, rows):
    import re
    r = run("choices", installs[name], *flags)
    assert r.returncode == 0 and r.stderr == ""
    grid = {}
    for line in r.stdout.splitlines():
        parts = re.split(r" {2,}", line.strip())
        if parts and (parts[0] in ("auto", "off") or parts[0].isdigit()) and len(parts) == 4:
            grid[parts[0]] = parts[1:]
    assert list(grid) == ["auto", "off", *map(str, range(1, 16))]
    for row, cells in rows.items():
        assert grid[row] == cells, row


def test_choices_open_failures_are_listed_apart(installs):
    out = run("choices", installs["partial_mtp"]).stdout
    assert "[1]  missing resident tensor: mtp.layers.0.input_layernorm.weight\n" in out
    assert out.endswith(
        'refused: the plan call fails (status 2) with "--speculative was asked for but\n'
        'cannot be served: " followed by the numbered text, verbatim\n'
        "open fails: the plan call fails (status 2) with the numbered text, verbatim:\n"
        "the engine's open cannot build that item's drafter\n")


def test_choices_lists_each_text_once(installs):
    out = run("choices", installs["none"]).stdout
    assert squash(out).count(NO_HEAD_TEXT) == 1
    assert "[1]  " + NO_HEAD_TEXT[:60] in out
    assert out.count("[3]") == 0 and out.count("[2]  ") == 1


def test_choices_long_engine_blocker_fits_80_columns(installs):
    reason = "the engine says " + "no " * 80
    r = run("choices", installs["mtp"], "--engine-blocker", reason)  # run() checks 80 columns
    assert r.returncode == 0
    assert squash(reason) in squash(r.stdout)


def test_choices_mapping_refusal_exits_2(installs, abi):
    text = '{"kvBits": "5"}'
    r = run("choices", installs["mtp"], "--options", text)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", 'kvBits must be off, 2, 3, 3.5 or 4, '
                                                        'got "5"\n')
    assert abi.choices(installs["mtp"], text) == (2, None, 'kvBits must be off, 2, 3, 3.5 or 4, '
                                                          'got "5"')


def test_choices_invalid_dir(abi):
    r = run("choices", "")
    assert r.returncode == 1
    assert r.stderr.startswith("turbospark-ffi choices: model_dir is empty")


# ---------------------------------------------------------------------------
# Colour, 80 columns, --help

def test_no_colour_when_not_a_terminal(installs):
    for args in (["inspect", installs["mtp"]], ["plan", installs["dflash"]]):
        r = run(*args)  # run() asserts no escape codes
        assert r.returncode == 0


def test_colour_on_a_terminal_unless_no_color(installs, abi):
    status, out, err = run_on_tty("plan", installs["mtp"], env=_env())
    assert status == 0 and err == ""
    assert "\x1b[32mON:\x1b[0m" in out
    status, out, err = run_on_tty("inspect", installs["partial_mtp"], env=_env())
    assert "\x1b[33mpartial:\x1b[0m" in out
    for env in (_env(NO_COLOR="1"), _env(NO_COLOR=""), _env(TERM="dumb")):
        status, out, _ = run_on_tty("plan", installs["mtp"], env=env)
        assert status == 0 and ESC not in out
        assert "ON: block 2" in out
    # --json is never coloured, on a terminal too.
    status, out, _ = run_on_tty("inspect", installs["mtp"], "--json", env=_env())
    assert out == abi.info(installs["mtp"])[1] + "\n"


def test_coloured_output_still_fits_80_columns(installs):
    import re
    _, out, _ = run_on_tty("inspect", installs["partial_dflash"], env=_env())
    assert ESC in out
    assert_fits_80(re.sub(r"\x1b\[[0-9;]*m", "", out))


def test_long_paths_and_reasons_fit_80_columns(tmp_path, abi):
    deep = tmp_path / ("a-very-long-directory-name-" * 3) / ("and-another-one-" * 4) / "install"
    r = run("make-install", deep, "--mtp", "--experts", "64")
    assert r.returncode == 0
    assert len(str(deep)) > 80
    for args in (["inspect", deep], ["plan", deep],
                 ["plan", deep, "--engine-blocker", "word " * 60],
                 ["plan", deep, "--engine-blocker", "x" * 200]):
        r = run(*args)  # run() checks 80 columns
        assert r.returncode == 0
    assert abi.info(deep)[0] == 0


@pytest.mark.parametrize("command,expect", [
    ([], ["config", "inspect", "plan", "choices", "make-install", "NO_COLOR"]),
    (["choices"], ["DIR", "--temperature", "--low-power-mode", "--engine-blocker",
                   "--no-engine-blocker", "--options", "--json", "tsffi_speculation_choices",
                   "refused [n]", "open fails [n]"]),
    (["config"], ["--cflags", "--libs", "--pkg-config-dir"]),
    (["inspect"], ["DIR", "--json", "tsffi_install_info_json"]),
    (["plan"], ["--speculation", "--speculative-drafter", "--temperature", "--low-power-mode",
                "--engine-blocker", "--no-engine-blocker", "--options", "--json",
                "tsffi_speculation_plan", "2 refused"]),
    (["make-install"], ["--mtp", "--dflash", "--experts", "--probe-dtype", "--layers",
                        "--samples", "--force"]),
])
@pytest.mark.parametrize("columns", [None, "200", "50"])
def test_help(command, expect, columns):
    r = run(*command, "--help", env=_env(COLUMNS=columns))
    assert r.returncode == 0 and r.stderr == ""
    prog = " ".join(["turbospark-ffi", *command])
    assert r.stdout.startswith(f"usage: {prog} ")
    for word in expect:
        assert word in r.stdout
    assert_fits_80(r.stdout)


# ---------------------------------------------------------------------------
# make-install

def _read_header(path: Path) -> tuple[int, int, int]:
    data = (path / "model_weights.bin").read_bytes()[:24]
    return tuple(int.from_bytes(data[i:i + 8], "little") for i in (0, 8, 16))


def test_make_install_engine_layout(tmp_path, abi):
    import hashlib
    target = tmp_path / "moe"
    r = run("make-install", target, "--mtp", "--experts", "16", "--layers", "8")
    assert r.returncode == 0
    assert r.stdout == textwrap.fill(
        f"wrote {target}: {entries(abi, target)}, MTP head, MoE, 16 experts per layer, "
        "probe dtype 4 (INT4 affine)", 79, subsequent_indent="  ", break_on_hyphens=False) + "\n"
    index_size, resident_size, entry_count = _read_header(target)
    assert f"{entry_count:,} entries" == entries(abi, target) and index_size % 16384 == 0
    assert (target / "model_weights.bin").stat().st_size == index_size + resident_size
    manifest = json.loads((target / "manifest.json").read_text())
    assert (manifest["magic"], manifest["versionMajor"], manifest["versionMinor"]) \
        == ("GTURBO", 1, 0)
    for rel, entry in manifest["files"].items():
        assert hashlib.sha256((target / rel).read_bytes()).hexdigest() == entry["sha256"]
    layout = json.loads((target / "packed_experts" / "layout.json").read_text())
    assert layout["expertsPerLayer"] == 16 and layout["numLayers"] == 8
    assert len(layout["layers"]) == 8 and len(layout["layers"][0]["experts"]) == 16


def test_make_install_is_what_write_install_writes(tmp_path):
    from turbospark_ffi.install_writer import write_install
    run("make-install", tmp_path / "cli", "--dflash", "--probe-dtype", "2", "--layers", "12")
    write_install(tmp_path / "api", dflash=True, probe_dtype=2, layers=12)
    for rel in ("model_weights.bin", "manifest.json", "packed_experts/layout.json"):
        assert (tmp_path / "cli" / rel).read_bytes() == (tmp_path / "api" / rel).read_bytes()


@pytest.mark.parametrize("spelling,tag", [("bf16", 1), ("FP16", 2), ("int4", 4),
                                          ("INT4 affine", 4), ("int8-affine", 5),
                                          ("q4_k", 7), ("GGUF Q4_K", 7), ("1-bit", 15),
                                          ("2-bit affine", 16), ("24", 24), ("200", 200)])
def test_make_install_probe_dtype_spellings(tmp_path, abi, spelling, tag):
    target = tmp_path / "install"
    r = run("make-install", target, "--mtp", "--probe-dtype", spelling)
    assert r.returncode == 0
    info = json.loads(abi.info(target)[1])
    assert info["probe"]["dtype"] == tag
    if tag == 200:
        assert "not a known dtype tag" in r.stdout
        assert "dtype 200 (not a known dtype tag)" in run("inspect", target).stdout


def test_make_install_refuses_to_overwrite_without_force(tmp_path):
    target = tmp_path / "install"
    assert run("make-install", target, "--mtp").returncode == 0
    before = (target / "model_weights.bin").read_bytes()
    before_entries = _read_header(target)[2]
    r = run("make-install", target)
    assert r.returncode == 1
    assert r.stderr == (f"turbospark-ffi make-install: {target / 'model_weights.bin'} already "
                        "exists; pass --force to overwrite it (check it is not a real install "
                        "first)\n")
    assert (target / "model_weights.bin").read_bytes() == before
    assert run("make-install", target, "--force").returncode == 0
    assert _read_header(target)[2] < before_entries


def test_make_install_cannot_write(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    r = run("make-install", blocker / "install")
    assert r.returncode == 1
    assert r.stderr.startswith(f"turbospark-ffi make-install: cannot write an install to "
                               f"{blocker / 'install'}: ")


def test_make_install_too_many_experts(tmp_path):
    r = run("make-install", tmp_path / "x", "--experts", "1024", "--layers", "40")
    assert r.returncode == 1
    assert "accepts at most 20,480 in all" in r.stderr
    assert not (tmp_path / "x").exists()


def test_make_install_samples(tmp_path):
    from turbospark_ffi.install_writer import write_samples
    r = run("make-install", "--samples", tmp_path / "cli")
    assert r.returncode == 0
    assert [line.split(":")[0] for line in r.stdout.splitlines() if line.startswith("wrote")] \
        == [f"wrote {tmp_path / 'cli' / n}" for n in ("none", "mtp", "dflash", "both")]
    write_samples(tmp_path / "api")
    for name in ("none", "mtp", "dflash", "both"):
        for rel in ("model_weights.bin", "manifest.json", "packed_experts/layout.json"):
            assert (tmp_path / "cli" / name / rel).read_bytes() \
                == (tmp_path / "api" / name / rel).read_bytes()
    # Regenerating over them needs --force, as for any install.
    assert run("make-install", "--samples", tmp_path / "cli").returncode == 1
    assert run("make-install", "--samples", tmp_path / "cli", "--force").returncode == 0


def test_make_install_samples_take_no_shape_flags(tmp_path):
    r = run("make-install", "--samples", tmp_path / "s", "--mtp", "--layers", "8")
    assert r.returncode == 1
    assert "takes no --mtp, --layers" in r.stderr
    assert not (tmp_path / "s").exists()


def test_shipped_samples_are_what_make_install_writes(tmp_path):
    run("make-install", "--samples", tmp_path)
    for name in ("none", "mtp", "dflash", "both"):
        for rel in ("model_weights.bin", "manifest.json", "packed_experts/layout.json"):
            assert (tmp_path / name / rel).read_bytes() == (SAMPLES / name / rel).read_bytes()


# ---------------------------------------------------------------------------
# config keeps working; the entry point; pipes

def test_config_unchanged():
    from turbospark_ffi import native
    r = run("config", "--cflags", "--libs")
    assert r.returncode == 0
    assert r.stdout == f"{native.cflags()} {native.libs()}\n"
    assert run("config").stdout == native.pkg_config()
    assert run("config", "--includedir", "--libdir").stdout \
        == f"{native.include_dir()} {native.package_dir()}\n"


def test_config_samples_is_the_shipped_samples_directory():
    from turbospark_ffi import native
    r = run("config", "--samples")
    samples = Path(native.package_dir()) / "samples"
    assert r.stdout == f"{samples}\n"
    assert sorted(p.name for p in samples.iterdir() if p.is_dir()) == ["both", "dflash", "mtp",
                                                                         "none"]


def test_config_pkg_config_dir(tmp_path):
    from turbospark_ffi import native
    r = run("config", "--pkg-config-dir", tmp_path / "pc")
    assert r.stdout == f"{tmp_path / 'pc' / 'tsffi.pc'}\n"
    assert (tmp_path / "pc" / "tsffi.pc").read_text() == native.pkg_config()


def test_console_script_entry_point(installs):
    import tomllib
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["turbospark-ffi"] == "turbospark_ffi.cli:main"
    # What the generated console script does: import main and exit with it.
    r = subprocess.run([sys.executable, "-c", "import sys; from turbospark_ffi.cli import main; "
                        "sys.exit(main())", "plan", str(installs["dflash"]), "--speculation", "2"],
                       cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("--speculative was asked for but cannot be served: ")


def test_closed_stdout_is_quiet(installs):
    proc = subprocess.Popen([sys.executable, "-m", "turbospark_ffi", "inspect",
                             str(installs["partial_dflash"])], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0
    assert stderr == ""


def test_main_in_process_returns_status(installs, capsys):
    from turbospark_ffi.cli import main
    assert main(["plan", str(installs["mtp"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["speculation"]["block"] == 2
    assert main(["plan", str(installs["none"]), "--speculation", "2"]) == 2
    assert capsys.readouterr().err.startswith("--speculative was asked for")


# ---------------------------------------------------------------------------
# Aliases: make-install --store/--alias writes a store in the engine's layout,
# and plan / inspect resolve a name as the engine's open does.

def _store_env(**env: str | None) -> dict:
    return _env(**{"TURBOSPARK_HOME": None, "HOME": None, **env})


def test_make_install_into_a_store_records_the_row(tmp_path, abi):
    store = tmp_path / "store"
    r = run("make-install", "--store", store, "--alias", "qwen-mtp", "--mtp")
    target = store / "models" / "text" / "qwen-mtp.gturbo"
    assert r.returncode == 0, r.stderr
    # The path whole on a line of its own when it does not fit beside the words.
    recorded = f"recorded 'qwen-mtp' in {store / 'installed.json'}"
    assert r.stdout.endswith(recorded + "\n" if len(recorded) <= 79 else
                             f"recorded 'qwen-mtp' in\n  {store / 'installed.json'}\n")
    elsewhere = tmp_path / "elsewhere" / "dfl"
    r = run("make-install", elsewhere, "--store", store, "--alias", "qwen-dflash", "--dflash")
    assert r.returncode == 0, r.stderr
    rows = json.loads((store / "installed.json").read_text())
    assert [(row["alias"], row["path"], row["modality"]) for row in rows] == [
        ("qwen-mtp", str(target), "text"), ("qwen-dflash", str(elsewhere), "text")]
    for row in rows:
        assert set(row) == {"alias", "repo", "revision", "path", "family", "install_bytes",
                            "installed_on", "status", "modality"}
        assert row["install_bytes"] == sum(f.stat().st_size for f in Path(row["path"]).rglob("*")
                                           if f.is_file())
    # Recording the same alias again replaces its row, keeping the others.
    again = tmp_path / "again"
    r = run("make-install", again, "--store", store, "--alias", "qwen-mtp", "--mtp")
    assert r.returncode == 0, r.stderr
    rows = json.loads((store / "installed.json").read_text())
    assert [(row["alias"], row["path"]) for row in rows] == [
        ("qwen-dflash", str(elsewhere)), ("qwen-mtp", str(again))]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli_store")
    for alias, flags in (("qm", ["--mtp"]), ("qd", ["--dflash"])):
        r = run("make-install", "--store", root / "store", "--alias", alias, *flags)
        assert r.returncode == 0, r.stderr
    # A complete row, as the installer writes it (the engine's decode is all
    # or nothing: a row holding only alias and path would empty the store).
    from turbospark_ffi.install_writer import record_install
    record_install(root / "home" / ".turbospark", "qm",
                   root / "store" / "models" / "text" / "qd.gturbo")
    return root


# (environment, command, name) -> the directory read, relative to the store fixture
# ("ROOT/..." is the repository root: the command's working directory).
ALIAS_CASES = [
    ({"TURBOSPARK_HOME": "store"}, "qm", "store/models/text/qm.gturbo"),
    ({"TURBOSPARK_HOME": "store"}, "qd", "store/models/text/qd.gturbo"),
    # $TURBOSPARK_HOME outranks $HOME, whose store maps qm to the DFlash2 install.
    ({"TURBOSPARK_HOME": "store", "HOME": "home"}, "qm", "store/models/text/qm.gturbo"),
    ({"HOME": "home"}, "qm", "store/models/text/qd.gturbo"),
    # No store at all: the name itself, in the working directory.
    ({}, "qm", "ROOT/qm"),
    ({"HOME": "home"}, "qx", "ROOT/qx"),
]


@pytest.mark.parametrize("env, name, reads", ALIAS_CASES,
                         ids=[f"{sorted(e)}-{n}" for e, n, _ in ALIAS_CASES])
@pytest.mark.parametrize("command", ["plan", "inspect"])
def test_plan_and_inspect_resolve_an_alias(store, abi, env, name, reads, command):
    env = _store_env(**{key: str(store / value) for key, value in env.items()})
    expected_dir = ROOT / reads[5:] if reads.startswith("ROOT/") else store / reads
    r = run(command, name, "--json", env=env)
    plain = run(command, name, env=env)
    # The "install" line names the directory read (wrapped at 80 columns).
    first = plain.stdout.split("\n" + ("options" if command == "plan" else "arch"), 1)[0]
    assert "".join(first.split()) == "install" + str(expected_dir)
    if command == "plan" and not expected_dir.is_dir():
        # A name that is no directory and no alias: the open's refusal (ABI
        # 4), naming the name as given.
        message = f"{name} is not a directory (and matched no installed alias)"
        assert (r.returncode, r.stdout, r.stderr) == (2, "", message + "\n")
        assert (plain.returncode, plain.stderr) == (2, message + "\n")
        return
    assert r.returncode == 0, r.stderr
    # Byte for byte what the C ABI answers for the directory itself.
    status, text, _ = (abi.plan(expected_dir, "{}") if command == "plan"
                       else abi.info(expected_dir))
    assert status == 0
    if not expected_dir.is_dir():
        # Install info's "openError" quotes the name as given, as the open
        # does: the only difference from the directory's own answer.
        text = text.replace(f'"openError":"{expected_dir} is', f'"openError":"{name} is')
    assert r.stdout == text + "\n"
    assert json.loads(text)["modelDir"] == str(expected_dir)
    assert plain.returncode == 0


def test_an_existing_directory_outranks_an_alias(store, abi, tmp_path):
    """A directory named like the alias, in the working directory, is read
    rather than the store's install: the engine never resolves an existing
    directory to a different model."""
    from turbospark_ffi.install_writer import write_install
    write_install(tmp_path / "qm", dflash=True)
    env = _store_env(TURBOSPARK_HOME=str(store / "store"))
    result = subprocess.run([sys.executable, "-m", "turbospark_ffi", "plan", "qm", "--json"],
                            cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["modelDir"] == str(tmp_path / "qm")
    assert json.loads(result.stdout)["drafter"]["installHasDflash"] is True


MAKE_STORE_ERRORS = [
    (["--alias", "x"], "turbospark-ffi make-install: --alias needs --store: --store ROOT "
                       "--alias NAME writes an install into the store at ROOT and records it "
                       "in ROOT/installed.json"),
    (["DIR", "--store", "STORE"], "turbospark-ffi make-install: --store needs --alias: "
                                  "--store ROOT --alias NAME writes an install into the store "
                                  "at ROOT and records it in ROOT/installed.json"),
    (["--store", "STORE", "--alias", "a/b"],
     "turbospark-ffi make-install: --alias: got 'a/b'; accepts a non-empty name without '/' "
     "(the engine looks it up as ROOT/models/text/NAME.gturbo)"),
    ([], "turbospark-ffi make-install: make-install needs DIR (or --store ROOT --alias NAME); "
         "see 'turbospark-ffi make-install --help'"),
    (["--samples", "DIR", "--store", "STORE", "--alias", "x"],
     "turbospark-ffi make-install: --samples writes four installs and takes no "
     "--store/--alias"),
]


@pytest.mark.parametrize("args, line", MAKE_STORE_ERRORS, ids=lambda v: str(v)[:40])
def test_make_install_store_errors(tmp_path, args, line):
    args = [str(tmp_path / "d") if a == "DIR" else str(tmp_path / "s") if a == "STORE" else a
            for a in args]
    r = run("make-install", *args)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", line + "\n")
    assert not (tmp_path / "s").exists() and not (tmp_path / "d").exists()


def test_make_install_never_overwrites_a_corrupt_installed_json(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "installed.json").write_text("[{not json")
    r = run("make-install", "--store", store, "--alias", "x", "--mtp")
    assert r.returncode == 1
    assert r.stderr.startswith(f"turbospark-ffi make-install: wrote "
                               f"{store / 'models' / 'text' / 'x.gturbo'}, but cannot record "
                               f"it in the store at {store}: {store / 'installed.json'} is not "
                               "valid JSON")
    assert (store / "installed.json").read_text() == "[{not json"


# ---------------------------------------------------------------------------
# Paths are never split: a path copied from the output is the real one.

# A directory name long enough that no row can hold it beside its label, with
# spaces where a wrap would otherwise break it.
LONG_DIR = ("a directory with spaces in its name",
            "and-a-very-long-component-name-that-goes-on-and-on-and-on-past-the-margin", "model")


@pytest.fixture(scope="module")
def long_install(tmp_path_factory) -> Path:
    from turbospark_ffi.install_writer import write_install
    return Path(write_install(tmp_path_factory.mktemp("paths").joinpath(*LONG_DIR), mtp=True))


# (command, where its output names the directory: the lines that must be
# printed exactly, {dir} standing for the path)
PATH_RENDERINGS = [
    (["plan"], ["install      {dir}"]),
    (["plan", "--speculation", "2"], ["install      {dir}"]),
    (["inspect"], ["install           {dir}"]),
    (["choices"], ["install  {dir}"]),
]


@pytest.mark.parametrize("command,lines", PATH_RENDERINGS,
                         ids=[" ".join(command) for command, _ in PATH_RENDERINGS])
def test_reports_print_the_install_path_whole(long_install, command, lines):
    r = run(command[0], long_install, *command[1:], whole=(long_install,))
    assert r.returncode == 0
    printed = r.stdout.splitlines()
    for line in lines:
        assert line.format(dir=long_install) in printed, r.stdout


def test_make_install_prints_the_path_it_wrote_whole(tmp_path):
    target = tmp_path.joinpath(*LONG_DIR)
    r = run("make-install", target, "--mtp", whole=(target,))
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"wrote\n  {target}:\n"
                        "  71 entries, MTP head, dense, probe dtype 4 (INT4 affine)\n")


WRAPS = [
    # (text, width, keep, lines)
    ("see /a/very/long/path/name now", 10, (), ["see", "/a/very/long/path/name", "now"]),
    ("in /models/my model/x then", 12, ("/models/my model/x",),
     ["in", "/models/my model/x", "then"]),
    ("in /models/my model/x then", 12, (), ["in", "/models/my", "model/x then"]),
    ("a mtp.fc.weight-like-name b", 8, (), ["a", "mtp.fc.weight-like-name", "b"]),
    ("short text", 79, ("short text",), ["short text"]),
]


@pytest.mark.parametrize("text,width,keep,lines", WRAPS)
def test_wrap_never_breaks_a_word_or_a_kept_path(text, width, keep, lines):
    from turbospark_ffi.cli.report import wrap
    assert wrap(text, width, keep=keep) == lines


# ---------------------------------------------------------------------------
# config --pkg-config-dir creates at most the directory named

def test_config_pkg_config_dir_creates_only_the_last_component(tmp_path):
    from turbospark_ffi import native
    r = run("config", "--pkg-config-dir", tmp_path / "new")
    assert r.returncode == 0 and r.stdout == f"{tmp_path / 'new' / 'tsffi.pc'}\n"
    assert (tmp_path / "new" / "tsffi.pc").read_text() == native.pkg_config()


PKG_CONFIG_DIR_REFUSALS = [
    # (DIR relative to tmp_path, what exists first, the error after "got 'DIR'")
    ("missing/x/y", None, ", whose parent {tmp}/missing/x is not an existing directory (no "
     "directory was created); accepts an existing directory, or a new one inside an existing "
     "directory (created as mkdir creates it)"),
    ("a-file", "file", ", which exists and is not a directory; accepts an existing directory, "
     "or a new one inside an existing directory (created as mkdir creates it)"),
]


@pytest.mark.parametrize("rel,exists,error", PKG_CONFIG_DIR_REFUSALS)
def test_config_pkg_config_dir_refuses_a_missing_parent(tmp_path, rel, exists, error):
    if exists == "file":
        (tmp_path / rel).write_text("not a directory")
    before = sorted(tmp_path.rglob("*"))
    r = run("config", "--pkg-config-dir", tmp_path / rel)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (f"turbospark-ffi config: --pkg-config-dir: got '{tmp_path / rel}'"
                        + error.format(tmp=tmp_path) + "\n")
    assert sorted(tmp_path.rglob("*")) == before  # nothing was created
