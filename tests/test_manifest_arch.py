"""The manifest's `arch`, read as the engine's open reads it first
(TURBOSPARK_FACTS.md section 11; the manifest peek of revision 54bc43a): a
table of manifests with the open's refusal written out (status 2, the bare
message), through the plan call, and the facts the decision takes from an
accepted one. Every install this project writes carries an `arch` the open
accepts, consistent with its index: the shipped samples are held to that."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from installs import write_manifest
from turbospark_ffi.errors import OpenRefused
from turbospark_ffi.install_writer import arch_for, write_install
from turbospark_ffi.manifest_arch import arch_from_value, load_manifest_arch
from turbospark_ffi.api import speculation_plan
from turbospark_ffi.resident_index import load_resident_index

GOOD = arch_for(["language_model.model.layers.3.self_attn.q_proj.weight"], layers=4)
REQUIRED = ["hiddenSize", "ffnIntermediate", "moeIntermediateSize", "numHeads", "numKVHeads",
            "numFullKVHeads", "headDim", "fullHeadDim", "vocabSize", "slidingWindow",
            "finalLogitSoftcap", "ropeTheta", "fullRopeTheta", "partialRotaryFactor", "numLayers",
            "numExperts", "topKExperts", "tieWordEmbeddings", "attentionKEqV", "hiddenActivation",
            "fullAttentionLayerMask"]


def without(key):
    return {k: v for k, v in GOOD.items() if k != key}


def with_(**fields):
    return {**GOOD, **fields}


# arch value -> the open's message after "manifest.json arch: " (None: accepted)
ARCH_ROWS = [
    ("accepted", GOOD, None),
    ("absent", None, "invalid type: null, expected struct ManifestArch"),
    ("integer", 5, "invalid type: integer `5`, expected struct ManifestArch"),
    ("string", "qwen35", 'invalid type: string "qwen35", expected struct ManifestArch'),
    ("bool", True, "invalid type: boolean `true`, expected struct ManifestArch"),
    ("float", 1.5, "invalid type: floating point `1.5`, expected struct ManifestArch"),
    ("empty-array", [], "invalid length 0, expected struct ManifestArch with 88 elements"),
    ("empty-object", {}, "missing field `hiddenSize`"),
    # The first required field missing, in declaration order.
    *[(f"missing-{key}", without(key), f"missing field `{key}`") for key in REQUIRED],
    ("string-for-i64", with_(hiddenSize="5120"), 'invalid type: string "5120", expected i64'),
    ("float-for-i64", with_(numLayers=8.0), "invalid type: floating point `8.0`, expected i64"),
    ("null-for-i64", with_(vocabSize=None), "invalid type: null, expected i64"),
    ("past-i64", with_(numExperts=1 << 63),
     "invalid value: integer `9223372036854775808`, expected i64"),
    ("bool-for-f64", with_(ropeTheta=True), "invalid type: boolean `true`, expected f64"),
    ("int-for-bool", with_(tieWordEmbeddings=1), "invalid type: integer `1`, expected a boolean"),
    ("int-for-string", with_(hiddenActivation=1), "invalid type: integer `1`, expected a string"),
    ("int-for-mask", with_(fullAttentionLayerMask=1),
     "invalid type: integer `1`, expected a sequence"),
    ("string-in-mask", with_(fullAttentionLayerMask=[2, "1"]),
     'invalid type: string "1", expected i64'),
    ("map-for-family", with_(family={}), "invalid type: map, expected a string"),
    ("seq-for-vision", with_(visionDepth=[27]), "invalid type: sequence, expected i64"),
    ("mrope-short", with_(visionMropeSection=[1, 2]),
     "invalid length 2, expected an array of length 3"),
    ("mrope-long", with_(visionMropeSection=[1, 2, 3, 4]),
     "invalid length 4, expected fewer elements in array"),
    # A wrong type is met while the keys are visited, before the missing
    # field is looked for; keys the struct does not know are skipped.
    ("wrong-type-before-missing", {**without("numHeads"), "hiddenSize": "x"},
     'invalid type: string "x", expected i64'),
    ("unknown-keys-skipped", with_(somethingNew={"deep": [1, 2]}, other=None), None),
    ("null-optional", with_(family=None, visionDepth=None), None),
]


@pytest.mark.parametrize("arch, error", [r[1:] for r in ARCH_ROWS], ids=[r[0] for r in ARCH_ROWS])
def test_arch(tmp_path, arch, error):
    d = write_install(tmp_path / "i", mtp=True)
    write_manifest(d, arch)
    if error is None:
        assert speculation_plan(str(d)).speculation.enabled or arch.get("family") is None
        return
    with pytest.raises(OpenRefused) as info:
        speculation_plan(str(d))
    assert (info.value.status, info.value.stage, str(info.value)) == (
        2, "manifest", "manifest.json arch: " + error)


# manifest.json's text -> the open's whole message ({dir}: the install)
TEXT_ROWS = [
    ("eof", b"{", "manifest.json: EOF while parsing an object at line 1 column 1"),
    ("no-colon", b'{"arch" 1}', "manifest.json: expected `:` at line 1 column 9"),
    ("no-value", b'{"arch": }', "manifest.json: expected value at line 1 column 10"),
    ("empty", b"", "manifest.json: EOF while parsing a value at line 1 column 0"),
    ("trailing", b"{} x", "manifest.json: trailing characters at line 1 column 4"),
    # Not an object: value["arch"] is null.
    ("top-level-string", b'"manifest"',
     "manifest.json arch: invalid type: null, expected struct ManifestArch"),
    ("top-level-array", b"[1]",
     "manifest.json arch: invalid type: null, expected struct ManifestArch"),
    ("unknown-family", json.dumps({"arch": with_(family="qwen3.5")}).encode(),
     'unknown arch.family "qwen3.5"'),
    ("family-debug-quoted", json.dumps({"arch": with_(family='a"b\t')}).encode(),
     'unknown arch.family "a\\"b\\t"'),
    ("deepseek", json.dumps({"arch": with_(family="deepseekV4Flash")}).encode(),
     "manifest family deepseekV4Flash is not supported by real generation yet"),
    # The family is checked after the whole struct decoded.
    ("struct-before-family", json.dumps({"arch": {**without("numLayers"),
                                                  "family": "mamba"}}).encode(),
     "manifest.json arch: missing field `numLayers`"),
]


@pytest.mark.parametrize("text, message", [r[1:] for r in TEXT_ROWS], ids=[r[0] for r in TEXT_ROWS])
def test_manifest_text(tmp_path, text, message):
    d = write_install(tmp_path / "i", mtp=True)
    (d / "manifest.json").write_bytes(text)
    with pytest.raises(OpenRefused) as info:
        speculation_plan(str(d))
    assert str(info.value) == message.replace("{dir}", str(d))


def test_no_manifest_and_a_manifest_directory(tmp_path):
    d = write_install(tmp_path / "i", mtp=True, manifest=False)
    with pytest.raises(OpenRefused) as info:
        speculation_plan(str(d))
    assert str(info.value) == (f"no manifest.json at {d}/manifest.json: No such file or "
                               "directory (os error 2)")
    (d / "manifest.json").mkdir()
    with pytest.raises(OpenRefused) as info:
        speculation_plan(str(d))
    assert str(info.value) == f"no manifest.json at {d}/manifest.json: Is a directory (os error 21)"


def test_a_fifo_manifest_is_refused_at_once(tmp_path):
    # The engine's plain read would wait for a writer; the preview never blocks.
    d = write_install(tmp_path / "i", mtp=True, manifest=False)
    os.mkfifo(d / "manifest.json")
    with pytest.raises(OpenRefused) as info:
        speculation_plan(str(d))
    assert str(info.value) == (f"no manifest.json at {d}/manifest.json: is a FIFO, not a regular "
                               "file (this preview reads only a regular file)")


@pytest.mark.parametrize("family", ["gemma4", "qwen36", "llama", "qwen3moe", "gptOss", "qwen35",
                                    "museGlimmer", "qwen4exp", "spark2_5", "qwen3", "minimax_m2",
                                    "qwen2", "deepseek2", "qwen3_vl"])
def test_every_family_the_engine_knows_is_accepted(family):
    assert arch_from_value(with_(family=family)).family == family


def test_the_facts_the_decision_reads():
    arch = arch_from_value(with_(family=None, numExperts=256, visionDepth=27,
                                 fullAttentionLayerMask=[258, 257, -1, 2]))
    assert (arch.family, arch.num_experts, arch.vision_depth,
            arch.full_attention_layer_mask) == ("gemma4", 256, 27, (2, 1, 255, 2))
    assert arch.first_full_attention_layer() == 1


def test_the_seq_form_reads_positionally():
    values = [GOOD[key] for key in REQUIRED]
    arch = arch_from_value(values + ["qwen36"])
    assert (arch.family, arch.hidden_size, arch.num_layers) == ("qwen36", 5120, 4)


# --------------------------------------------------------------------------
# Every install the project writes carries an arch the open accepts,
# consistent with its index.

SAMPLES = Path(__file__).resolve().parent.parent / "turbospark_ffi" / "samples"


@pytest.mark.parametrize("sample", ["none", "mtp", "dflash", "both"])
def test_the_shipped_samples_carry_an_accepted_arch(sample):
    d = SAMPLES / sample
    arch = load_manifest_arch(str(d))
    index = load_resident_index(d / "model_weights.bin")
    layers = sorted({int(name.split(".")[3]) for name in index.names
                     if name.startswith("language_model.model.layers.")})
    assert (arch.family, arch.num_layers, arch.num_experts, arch.vision_depth) == \
        ("qwen35", 64, 0, 0)
    assert layers == list(range(64))
    full = [layer for layer in layers
            if f"language_model.model.layers.{layer}.self_attn.q_proj.weight" in index]
    assert [i for i, v in enumerate(arch.full_attention_layer_mask) if v != 2] == full
    assert full[0] == arch.first_full_attention_layer() == 3
    # The open builds the drafters they carry: each plan opens.
    for drafter in ("mtp", "dflash"):
        plan = speculation_plan(str(d), f'{{"speculativeDrafter": "{drafter}"}}')
        has = {"mtp": sample in ("mtp", "both"), "dflash": sample in ("dflash", "both")}[drafter]
        assert plan.speculation.enabled is has


def test_make_install_writes_an_accepted_arch(tmp_path):
    from turbospark_ffi.cli import main
    assert main(["make-install", str(tmp_path / "moe"), "--experts", "8", "--mtp"]) == 0
    arch = load_manifest_arch(str(tmp_path / "moe"))
    assert (arch.family, arch.num_experts) == ("qwen36", 8)


def test_the_plain_check_answers_only_what_serdes_visit_answers():
    """manifest_arch's one-pass check of a well-formed arch is the same rule
    as serde's visit: over every row above (and their mutations of one
    field's type), it either declines or gives the visit's own fields."""
    from turbospark_ffi import manifest_arch as m
    values = [r[1] for r in ARCH_ROWS if isinstance(r[1], dict)]
    for key in REQUIRED + ["family", "visionDepth", "attentionScale"]:
        for odd in (None, True, 1, 1.5, "x", [], {}, 1 << 63, [1, "x"]):
            values.append({**GOOD, key: odd})
    declined = 0
    for value in values:
        plain = m._plain_fields(value)
        if plain is None:
            declined += 1
            continue
        # The keys the struct declares are the same, each with the same value.
        assert m._visit(value) == {k: v for k, v in plain.items() if k in m._BY_KEY}
    assert 0 < declined < len(values)


def test_the_scan_and_the_decoder_agree_on_mutated_manifests(monkeypatch):
    """manifest_arch's fast path (the C scanner of `_json`, ~10 us for a real
    manifest against ~40 us through typed_json's decode: bench row 2, a
    first plan, reads one) is the same rule as the decoder: 3,000 seeded
    mutations of the samples' manifests (a raw lone surrogate, NUL, `-0`, a
    \\ud escape among the inserted texts) give one answer or one refusal
    text through both. The fixture discriminates: some mutations are
    refused and some are read, and the scan answers most of them."""
    import random
    from turbospark_ffi import manifest_arch as m
    samples = Path(m.__file__).parent / "samples"
    seeds = [(d / "manifest.json").read_bytes() for d in sorted(samples.iterdir())
             if (d / "manifest.json").is_file()]
    rng = random.Random(41)
    inserts = list('{}[]:,"\\ \n0123456789.-eE') + ["null", "true", "-0", "1e999", "\\ud800",
                                                       "\ud800", "\x00", "é", '"family"']

    def outcome(data: bytes):
        try:
            return "ok", m.arch_from_text(data)
        except OpenRefused as exc:
            return "refused", str(exc)
    scanned = m._scanned
    counts = {"ok": 0, "refused": 0, "scanned": 0}
    differ = []
    for _ in range(3000):
        text = rng.choice(seeds).decode()
        for _ in range(rng.randint(0, 2)):
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(inserts) + text[at + rng.randint(0, 1):]
        data = text.encode("utf-8", "surrogatepass")
        counts["scanned"] += scanned(data.decode("utf-8", "replace")) is not m._SLOW
        fast = outcome(data)
        monkeypatch.setattr(m, "_scanned", lambda text: m._SLOW)
        slow = outcome(data)
        monkeypatch.setattr(m, "_scanned", scanned)
        counts[fast[0]] += 1
        if fast != slow:
            differ.append((text, fast, slow))
    assert differ == []
    assert counts["ok"] > 300 and counts["refused"] > 300 and counts["scanned"] > 1000, counts
