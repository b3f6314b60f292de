"""The experts layout gives the same answer whatever its size: every case runs
through the head-only way of reading it (the head at its real size, and cut
shorter) and the whole-file way (a head as large as the file), small and
padded past the real head, and every way must give the case's written-out
answer. The rule both ways apply is in expert_layout.py's docstring."""

from __future__ import annotations

import json

import pytest

from turbospark_ffi import expert_layout
from turbospark_ffi.expert_layout import ExpertLayoutError, load_expert_layout
from turbospark_ffi.install_writer import expert_layout_json, write_install

P = "packed_experts/layout.json"
DUPLICATE = f"{P} gives {{}} more than once; accepts it once (the engine refuses a duplicate field)"
HEAD = b'{"expertStride": 9, "numLayers": 4, "expertsPerLayer": 8, '
LAYERS = b'"layers": [{"layer": 0, "file": "layer_00.bin", "experts": []}]'

# id -> (layout bytes, (experts per layer, layers) or the refusal's message)
CASES = {
    "writer-order": (HEAD + LAYERS + b"}", (8, 4)),
    "install-writer": (expert_layout_json(8, 4), (8, 4)),
    "dense": (b'{"expertStride": 0, "numLayers": 0, "expertsPerLayer": 0, "layers": []}', (0, 0)),
    "layers-first": (b"{" + LAYERS + b', "expertStride": 9, "numLayers": 4, '
                     b'"expertsPerLayer": 8}', (8, 4)),
    "a-count-after-layers": (b'{"numLayers": 4, ' + LAYERS + b', "expertsPerLayer": 8}', (8, 4)),
    "a-nested-value-before-layers": (b'{"numLayers": 4, "expertsPerLayer": 8, "meta": {"a": 1}, '
                                     + LAYERS + b"}", (8, 4)),
    "bracket-in-a-head-string": (b'{"note": "a[b{c", "numLayers": 4, "expertsPerLayer": 8, '
                                 + LAYERS + b"}", (8, 4)),
    "comma-in-the-layers-key": (b'{"numLayers": 4, "expertsPerLayer": 8, "la,yers": []}',
                                (8, 4)),
    "leading-whitespace": (b" \n\t\r" + HEAD + LAYERS + b"}", (8, 4)),
    # Invalid UTF-8 among the head members: refused, at its byte, whatever the size.
    "not-utf8-in-the-head": (b'{"note": "\xff", "numLayers": 4, "expertsPerLayer": 8, '
                             + LAYERS + b"}", f"{P} is not UTF-8 (byte 10)"),
    "not-utf8-layers-first": (b'{"layers": ["\xc3"], "numLayers": 4, "expertsPerLayer": 8}',
                              f"{P} is not UTF-8 (byte 13)"),
    # After the head members nothing is read, small file or large: the engine's
    # open refuses a layout that does not parse, not the preview.
    "not-utf8-after-the-head": (HEAD + b'"layers": ["\xff"]}', (8, 4)),
    "broken-after-the-head": (HEAD + b'"layers": [{"layer": }', (8, 4)),
    "a-count-repeated-after-layers": (HEAD + LAYERS + b', "expertsPerLayer": 256}', (8, 4)),
    # A count given twice where it is read: refused.
    "a-count-repeated-in-the-head": (b'{"expertsPerLayer": 7, "numLayers": 4, '
                                     b'"expertsPerLayer": 8, ' + LAYERS + b"}",
                                     DUPLICATE.format("expertsPerLayer")),
    "a-count-repeated-layers-first": (b"{" + LAYERS + b', "numLayers": 4, "numLayers": 5, '
                                      b'"expertsPerLayer": 8}', DUPLICATE.format("numLayers")),
    "bad-json-in-the-head": (b'{"numLayers": 4 "expertsPerLayer": 8, ' + LAYERS + b"}",
                             f"{P} is not valid JSON"),
    "bad-key-before-layers": (b'{"numLayers": 4, "expertsPerLayer": 8, layers: []}',
                              f"{P} is not valid JSON"),
    "byte-order-mark": (b"\xef\xbb\xbf" + HEAD + LAYERS + b"}", f"{P} is not valid JSON"),
    "an-array": (b"[" + HEAD + LAYERS + b"}]", f"{P} is not a JSON object"),
    "no-experts-count": (b'{"numLayers": 4, ' + LAYERS + b"}",
                         f"{P} has no top-level 'expertsPerLayer'"),
    "negative": (b'{"numLayers": 4, "expertsPerLayer": -3, ' + LAYERS + b"}",
                 f"{P} expertsPerLayer is -3; accepts an integer >= 0"),
    "float": (b'{"numLayers": 4, "expertsPerLayer": 8.0, ' + LAYERS + b"}",
              f"{P} expertsPerLayer is 8.0; accepts an integer >= 0"),
    "nan-in-the-head": (b'{"numLayers": NaN, "expertsPerLayer": 8, ' + LAYERS + b"}",
                        f"{P} is not valid JSON"),
}

# Head sizes: the reader's own, and shorter ones that cut each case at every
# kind of place (before the first brace, inside a member, inside `layers`);
# None: a head as large as the file (the whole-file way).
HEADS = [None, expert_layout._HEAD_BYTES, 1, 7, 40, 64]
PADDED = 100_000  # trailing whitespace: valid JSON, and past the real head


def outcome(model_dir) -> object:
    try:
        layout = load_expert_layout(str(model_dir))
    except ExpertLayoutError as exc:
        return str(exc)
    return (layout.experts_per_layer, layout.num_layers)


@pytest.fixture(scope="module")
def install_dir(tmp_path_factory):
    return write_install(tmp_path_factory.mktemp("layout") / "i", mtp=True)


@pytest.mark.parametrize("padded", [False, True], ids=["small", "padded"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_way_of_reading_gives_the_same_answer(install_dir, monkeypatch, name, padded):
    body, expected = CASES[name]
    if padded:
        body += b" " * PADDED
        assert len(body) > expert_layout._HEAD_BYTES
    (install_dir / P).write_bytes(body)
    answers = {}
    for head in HEADS:
        monkeypatch.setattr(expert_layout, "_HEAD_BYTES", len(body) + 1 if head is None else head)
        answers[head] = outcome(install_dir)
    got = set(map(repr, answers.values()))
    assert len(got) == 1, answers
    answer = answers[None]
    if isinstance(expected, str) and expected.endswith("is not valid JSON"):
        assert isinstance(answer, str) and answer.startswith(expected), answer
    else:
        assert answer == expected


def test_the_cases_reach_both_rules(install_dir, monkeypatch):
    """The table discriminates: some cases are decided by the head members
    alone (a head just past them suffices), others need the whole file."""
    decided_by_head = []
    real = expert_layout._read_all
    calls: list = []

    def spy(fd, size):
        calls.append(size)
        return real(fd, size)
    monkeypatch.setattr(expert_layout, "_read_all", spy)
    for name, (body, expected) in CASES.items():
        (install_dir / P).write_bytes(body)
        calls.clear()
        monkeypatch.setattr(expert_layout, "_HEAD_BYTES", body.find(b'"layers"') + 12
                            if b'"layers"' in body else 1)
        outcome(install_dir)
        if not calls:
            decided_by_head.append(name)
    assert "writer-order" in decided_by_head and "a-count-repeated-after-layers" in \
        decided_by_head and "broken-after-the-head" in decided_by_head
    assert "layers-first" not in decided_by_head and "bracket-in-a-head-string" not in \
        decided_by_head and "a-count-after-layers" not in decided_by_head


def test_a_real_size_layout_is_read_from_its_head(install_dir, monkeypatch):
    """The engine's writer's order on a layout of the real size (22 MB class):
    only the head is read."""
    layers = [{"layer": i, "file": f"layer_{i:02d}.bin", "experts": [
        {"expert": j, "offset": j, "size": 1, "tensors": {"w": {"offset": 0, "size": 1,
                                                                  "dtype": 4, "shape": [1]}}}
        for j in range(256)]} for i in range(40)]
    body = json.dumps({"expertStride": 1, "numLayers": 40, "expertsPerLayer": 256,
                       "layers": layers}).encode()
    assert len(body) > 1 << 20
    (install_dir / P).write_bytes(body)
    monkeypatch.setattr(expert_layout, "_read_all", lambda fd, size: pytest.fail("read all"))
    assert outcome(install_dir) == (256, 40)
