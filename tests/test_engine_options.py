"""The engine's own answers: every line of tests/data/engine_options_sample.jsonl
(400 options texts, each measured by running the engine's option code: FACTS section 10) through
the C ABI, in process, compared on status, message and meaning. The file is a verbatim copy of
../shared/reference/engine_options_sample.jsonl (sha256 89bd7e74e3bbc508...), kept in the repository so
that a fresh clone, which has no ../shared beside it, runs this test.

Two calls per text. `tsffi_speculation_choices` on an MTP install gives the open's MEANING: its
"selected" item is the (speculation, speculativeDrafter) pair the options asked for, whatever the
install could serve (a plan would answer what the install makes of it instead: "auto" resolved to
mtp, a block refused). `tsffi_resolve_speculation`, which reads no install, must agree on status
and message (so every entry point reads options one way). Status 1 lines (text that is not UTF-8)
compare the status only: the engine's wording there was not measured.

On main before issue 30 (ABI 2, commit 603747b), 276 of the 400 lines failed test_sample_line
and 277 test_resolve_speculation_agrees (measured by running this file against that tree).

The sample was measured against revision 08aaf13's option code; 0a45c54 (the revision this library
follows: docs/ENGINE.md) reads two more keys (`expertResidency` third, `prefixReuse` last) and
refuses a resolved `maxContext` of 0. The 15 lines whose meaning changed -- those two keys of the
wrong type, `maxContext: 0`, positional arrays whose elements moved -- are answered by the new
rules, written out in `AT_0A45C54` (each worked by hand from TURBOSPARK_FACTS.md section 10:
the position a serde error names is where serde stops, as for every other line); every other line
is the measured answer.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest

from conftest import ROOT

SAMPLE = ROOT / "tests" / "data" / "engine_options_sample.jsonl"


def _lines() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


LINES = _lines()

_BOOL = "options: invalid type: {}, expected a boolean at line {} column {}"
# line number -> (status, message) under 0a45c54's rules.
AT_0A45C54 = {
    128: (4, "options: invalid type: integer `0`, expected a string at line 1 column 56"),
    129: (4, _BOOL.format("integer `-1`", 2, 2)),
    155: (2, 'maxContext must be at least 1, or "auto"'),
    159: (4, _BOOL.format("sequence", 2, 0)),
    168: (2, 'maxContext must be at least 1, or "auto"'),
    171: (4, _BOOL.format('string "fast"', 2, 6)),
    217: (4, _BOOL.format("integer `-1`", 1, 19)),
    244: (4, _BOOL.format("integer `3`", 3, 1)),
    271: (4, _BOOL.format('string "add"', 3, 47)),
    294: (4, _BOOL.format("integer `0`", 1, 17)),
    # Positional: element 6 is now maxTokensPerSec, 7 speculation.
    381: (2, 'speculation must be "off", "auto" or a block in 1..=15, got "dflash"'),
    384: (4, 'options: invalid type: string "auto", expected f64 at line 1 column 37'),
    385: (2, 'speculation must be "off", "auto" or a block in 1..=15, got "mtp"'),
    393: (4, _BOOL.format("integer `1`", 1, 16)),
    394: (4, "options: invalid type: integer `1`, expected a string at line 1 column 20"),
}


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> bytes:
    from turbospark_ffi.install_writer import write_install
    return str(write_install(tmp_path_factory.mktemp("engine-options") / "mtp", mtp=True)).encode()


def _text(line: dict) -> bytes | None:
    return None if line["text_hex"] == "null" else bytes.fromhex(line["text_hex"])


def _call(lib, fn, *args) -> tuple[int, str | None, dict | None]:
    out = ctypes.c_void_p()
    status = fn(*args, ctypes.byref(out))
    if status == 0:
        result = json.loads(ctypes.string_at(out.value).decode("utf-8", "strict"))
        lib.tsffi_string_free(out)
        return status, None, result
    n = lib.tsffi_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.tsffi_last_error(buf, n + 1)
    return status, buf.value.decode("utf-8"), None


def answer(lib, install: bytes, text: bytes | None) -> dict:
    """What the library answers for `text`, in the sample's own shape."""
    status, message, table = _call(lib, lib.tsffi_speculation_choices, install, text)
    got = {"status": status, "message": message, "speculation": None,
           "speculativeDrafter": None}
    if status == 0:
        picked = [item for item in table["choices"] if item["selected"]]
        assert len(picked) == 1, picked
        got["speculation"] = picked[0]["speculation"]
        got["speculativeDrafter"] = picked[0]["speculativeDrafter"]
    return got


def expected(line: dict) -> dict:
    now = AT_0A45C54.get(LINES.index(line))
    if now is not None:
        return {"status": now[0], "message": now[1], "speculation": None,
                "speculativeDrafter": None}
    return {"status": line["status"], "message": line["message"],
            "speculation": line.get("speculation"),
            "speculativeDrafter": line.get("speculativeDrafter")}


def _comparable(answer: dict) -> dict:
    # Status 1: the engine's wording was not measured, so only the status counts.
    return {**answer, "message": None} if answer["status"] == 1 else answer


@pytest.mark.parametrize("number", range(len(LINES)))
def test_sample_line(number, loaded, install):
    line = LINES[number]
    assert _comparable(answer(loaded.lib, install, _text(line))) == _comparable(expected(line)), \
        _text(line)


@pytest.mark.parametrize("number", range(len(LINES)))
def test_resolve_speculation_agrees(number, loaded):
    line = LINES[number]
    status, message, _ = _call(loaded.lib, loaded.lib.tsffi_resolve_speculation, _text(line))
    got = _comparable({"status": status, "message": message})
    want = expected(line)
    assert got == _comparable({"status": want["status"], "message": want["message"]}), \
        _text(line)


def test_the_changed_lines_are_the_ones_whose_meaning_changed():
    # Every rewritten line holds a new key, a maxContext of 0 or a
    # positional array; the measured answer differs from the new one.
    for number, (status, message) in AT_0A45C54.items():
        text = _text(LINES[number])
        assert (b"prefixReuse" in text or b"expertResidency" in text
                or b'"maxContext":\t0' in text or b'"maxContext"\t:  0' in text
                or text.startswith(b"[")), number
        assert (LINES[number]["status"], LINES[number]["message"]) != (status, message)


def test_the_sample_covers_every_status():
    # The fixture discriminates: it holds accepted texts, decoding refusals
    # (4), mapping refusals (2) and non-UTF-8 texts (1), and meanings that
    # differ from the defaults, so a library that accepted everything as
    # auto, or refused everything, fails most lines.
    statuses = {line["status"] for line in LINES}
    assert statuses == {0, 1, 2, 4}
    assert {line["speculation"] for line in LINES if line["status"] == 0} > {"auto", "off", 2}
    assert {line["speculativeDrafter"] for line in LINES if line["status"] == 0} >= \
        {"auto", "dflash"}
    assert sum(line["status"] == 2 for line in LINES) > 50
    assert sum(line["status"] == 4 for line in LINES) > 50


def test_a_wrong_answer_fails_a_line(loaded, install):
    # The comparison itself discriminates: a line's answer with any one part
    # changed no longer equals what the engine said.
    line = next(line for line in LINES if line["status"] == 2)
    got = answer(loaded.lib, install, _text(line))
    assert got == expected(line)
    for key, wrong in (("status", 1), ("message", got["message"] + " "),
                       ("speculation", "auto")):
        assert {**got, key: wrong} != expected(line)
