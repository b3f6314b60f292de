"""Every key each result carries, and every limit, is documented in the
header (the contract) and on the one page that owns the result shapes,
docs/c-api.md.

The keys are read off real answers, through the C ABI in this process, for
readable installs of every shape and for unreadable ones (no index, a broken
index, no directory), so a key that only appears on one of them is held too.
For each function, every key its results carry must be named ("key") in the
header comment of that function or of the conventions block, and (as `key`
or "key") in docs/c-api.md.
"""

from __future__ import annotations

import os
import ctypes
import json
import re
from pathlib import Path

import pytest

from conftest import HEADER, OUT, ROOT

# The one page that states the shapes and limits (the README points to it).
SHAPES_PAGE = (ROOT / "docs" / "c-api.md").read_text()
HEADER_TEXT = HEADER.read_text()


def header_comment_of(function: str) -> str:
    """The comment right above `function`'s declaration, plus the header's
    opening conventions comment (keys every result shares, like modelDir)."""
    decl = re.search(rf"TSFFI_API [^;]*?\b{function}\(", HEADER_TEXT)
    assert decl, function
    comment_end = HEADER_TEXT.rindex("*/", 0, decl.start())
    comment_start = HEADER_TEXT.rindex("/*", 0, comment_end)
    conventions = HEADER_TEXT[:HEADER_TEXT.index("*/")]
    return HEADER_TEXT[comment_start:comment_end] + conventions


def keys_of(value, into: set[str]) -> set[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            into.add(key)
            keys_of(inner, into)
    elif isinstance(value, list):
        for inner in value:
            keys_of(inner, into)
    return into


@pytest.fixture(scope="module")
def installs(tmp_path_factory) -> dict[str, Path]:
    from turbospark_ffi.install_writer import write_install
    root = tmp_path_factory.mktemp("documented")
    out = {name: write_install(root / name, **kw) for name, kw in {
        "none": {}, "mtp": {"mtp": True}, "dflash": {"dflash": True},
        "both": {"mtp": True, "dflash": True}, "moe": {"mtp": True, "experts": 8},
        "partial": {"mtp_tensors": ("mtp.fc.weight", "mtp.norm.weight")}}.items()}
    broken = root / "broken"
    broken.mkdir()
    (broken / "model_weights.bin").write_bytes(b"\xff" * 64)
    (root / "empty").mkdir()
    out.update(broken=broken, empty=root / "empty", missing=root / "missing")
    return out


def call(lib, name: str, *args: bytes | None) -> dict:
    out = ctypes.c_void_p()
    status = getattr(lib, name)(*args, ctypes.byref(out))
    assert status == 0, (name, args, status)
    try:
        return json.loads(ctypes.string_at(out.value).decode())
    finally:
        lib.tsffi_string_free(out)


OPTION_SETS = [b"", b'{"speculativeDrafter": "dflash", "speculation": 2, "hostKey": 1}',
               b'{"speculation": "off", "tsffi": {"engineBlocker": null}}',
               b'{"speculation": "auto", "tsffi": {"temperature": 0.7, "engineBlocker": "no"}}',
               b'{"Speculation": 2, "temperature": 0.7, "maxContext": 8192}']


@pytest.fixture(scope="module")
def answers(loaded, installs) -> dict[str, list[dict]]:
    lib = loaded.lib
    lib.tsffi_speculation_choices.argtypes = [ctypes.c_char_p, ctypes.c_char_p, OUT]
    lib.tsffi_speculation_choices.restype = ctypes.c_int32
    got: dict[str, list[dict]] = {name: [] for name in (
        "tsffi_speculation_plan", "tsffi_resolve_drafter", "tsffi_draft_policies",
        "tsffi_resolve_speculation", "tsffi_speculation_choices", "tsffi_install_info_json",
        "tsffi_build_info_json")}
    got["tsffi_build_info_json"].append(call(lib, "tsffi_build_info_json"))
    for path in installs.values():
        d = str(path).encode()
        got["tsffi_install_info_json"].append(call(lib, "tsffi_install_info_json", d))
        for options in OPTION_SETS:
            choice = call(lib, "tsffi_resolve_drafter", d, options)
            got["tsffi_resolve_drafter"].append(choice)
            got["tsffi_draft_policies"].append(call(lib, "tsffi_draft_policies",
                                                    json.dumps(choice).encode(), b""))
            if not os.path.isfile(os.path.join(d, b"manifest.json")) or path.name == "broken":
                # The open refuses these installs whatever is asked: the
                # choices call is its refusal, not a table.
                continue
            got["tsffi_speculation_choices"].append(call(lib, "tsffi_speculation_choices", d,
                                                         options))
            for item in got["tsffi_speculation_choices"][-1]["choices"]:
                if item["plan"] is not None:
                    got["tsffi_speculation_plan"].append(item["plan"])
    for options in (b"", b'{"speculation": "off"}', b'{"tsffi": {"engineBlocker": "no"}}'):
        got["tsffi_resolve_speculation"].append(call(lib, "tsffi_resolve_speculation", options))
    return got


FUNCTIONS = ["tsffi_speculation_plan", "tsffi_resolve_drafter", "tsffi_draft_policies",
             "tsffi_resolve_speculation", "tsffi_speculation_choices", "tsffi_install_info_json",
             "tsffi_build_info_json"]


def test_the_answers_cover_readable_and_unreadable_installs(answers):
    """The fixture discriminates: both kinds of install were answered."""
    readable = {a["indexReadable"] for a in answers["tsffi_install_info_json"]}
    assert readable == {True, False}
    flags = {a["installHasMtpHead"] for a in answers["tsffi_resolve_drafter"]}
    assert flags == {True, False, None}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_key_is_documented_in_the_header(function, answers):
    keys = set()
    for answer in answers[function]:
        keys_of(answer, keys)
    assert keys, function
    comment = header_comment_of(function)
    # A plan nests what the other functions document: their comments count.
    if function in ("tsffi_speculation_plan", "tsffi_speculation_choices"):
        comment += "".join(header_comment_of(f) for f in (
            "tsffi_resolve_drafter", "tsffi_draft_policies", "tsffi_resolve_speculation",
            "tsffi_speculation_plan"))
    missing = sorted(k for k in keys if f'"{k}"' not in comment)
    assert missing == [], f"{function} returns keys its header comment does not name"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_key_is_documented_on_the_shapes_page(function, answers):
    keys = set()
    for answer in answers[function]:
        keys_of(answer, keys)
    missing = sorted(k for k in keys
                     if f"`{k}`" not in SHAPES_PAGE and f'"{k}"' not in SHAPES_PAGE)
    assert missing == [], f"{function} returns keys docs/c-api.md does not name"


def test_the_limits_are_the_documented_ones():
    from turbospark_ffi.options import MAX_OPTIONS_BYTES
    from turbospark_ffi.jsontext import MAX_JSON_DEPTH
    assert MAX_OPTIONS_BYTES == 16_777_216 and MAX_JSON_DEPTH == 64
    for text in (HEADER_TEXT, SHAPES_PAGE):
        assert "16 MiB" in " ".join(text.split()) and "16,777,216 bytes" in text
        assert "recursion limit" in text and "64 levels" in text


def test_warnings_are_in_the_answers(answers):
    """The fixture discriminates: a near-miss and a moved key were sent, so
    "warnings" carried strings (and its documentation is about real ones)."""
    plans = answers["tsffi_speculation_plan"]
    tables = answers["tsffi_speculation_choices"]
    assert any(table["warnings"] for table in tables)
    assert all("warnings" not in plan for plan in plans)  # an item's plan: the table's


@pytest.mark.parametrize("size,status", [(16_777_216 - 20, 0), (16_777_216 + 1, 1)])
def test_the_size_limit_is_where_it_is_documented(loaded, size, status):
    body = b'{"hostKey": "' + b"x" * (size - 15) + b'"}'
    body = body[:size - 2] + b'"}' if len(body) > size else body
    out = ctypes.c_void_p()
    got = loaded.lib.tsffi_resolve_speculation(body, ctypes.byref(out))
    loaded.lib.tsffi_string_free(out)
    assert got == status, (len(body), got)


@pytest.mark.parametrize("depth,status", [(64, 0), (65, 4)])
def test_the_depth_limit_is_where_it_is_documented(loaded, depth, status):
    # choice_json's bound; an ignored options key has none, as the open's.
    choice = b'{"drafter": "mtp", "installHasMtpHead": true, "installHasDflash": false, ' \
        b'"note": null, "modelDir": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    out = ctypes.c_void_p()
    got = loaded.lib.tsffi_draft_policies(choice, b"", ctypes.byref(out))
    loaded.lib.tsffi_string_free(out)
    # 64 levels parse, and the shape check refuses the array (status 1).
    assert got == {0: 1, 4: 4}[status]
    body = b'{"hostKey": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert loaded.lib.tsffi_resolve_speculation(body, ctypes.byref(out)) == 0
    loaded.lib.tsffi_string_free(out)


@pytest.mark.parametrize("text,status", [
    # An ignored key is skipped at any depth, as the open skips it...
    (b'{"hostKey": ' + b"[" * 200 + b"]" * 200 + b"}", 0),
    # ...a known "any" key past serde's recursion limit of 128 is the open's status 4.
    (b'{"maxContext": ' + b"[" * 200 + b"]" * 200 + b"}", 4),
])
def test_the_depth_rules_are_the_documented_ones(loaded, text, status):
    out = ctypes.c_void_p()
    got = loaded.lib.tsffi_resolve_speculation(text, ctypes.byref(out))
    loaded.lib.tsffi_string_free(out)
    assert got == status


# ---------------------------------------------------------------------------
# The 18-key table: docs/c-api.md's, the Swift Options type's and the
# header's follow options.OPTION_TABLE, the single source.

TABLE_MARKER = "<!-- option-table:"
# typed_json's type names, in the words the page uses for them.
TYPE_WORDS = {"ANY": "any", "STRING": "string", "U32": "integer (u32)", "F64": "number (f64)",
              "BOOL": "boolean"}


def documented_option_table(page: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(key, JSON type, messages) of each row of the page's 18-key table:
    the messages are the cell's code spans that contain a space (a value
    quoted beside them, like `2.0`, has none)."""
    lines = page[page.index(TABLE_MARKER):].split("\n")[3:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        assert len(cells) == 4, line
        spans = re.findall(r"`([^`]+)`", cells[3])
        rows.append((cells[0].strip("`"), cells[1], tuple(s for s in spans if " " in s)))
    return rows


def source_option_table() -> list[tuple[str, str, tuple[str, ...]]]:
    from turbospark_ffi.options import OPTION_TABLE
    return [(key.name, TYPE_WORDS[key.serde_type], tuple(key.messages)) for key in OPTION_TABLE]


def test_the_documented_option_table_is_options_table():
    documented = documented_option_table(SHAPES_PAGE)
    assert len(documented) == 18
    assert documented == source_option_table()


def test_the_option_table_check_discriminates():
    """One changed character of one message, or a row left out, is seen."""
    source = source_option_table()
    changed = SHAPES_PAGE.replace("got {x}` |\n| `steeringGate`", "got {v}` |\n| `steeringGate`")
    assert changed != SHAPES_PAGE
    assert documented_option_table(changed) != source
    dropped = re.sub(r"\n\| `visionSidecar` \|[^\n]*", "", SHAPES_PAGE)
    assert dropped != SHAPES_PAGE
    assert documented_option_table(dropped) != source


def test_the_swift_options_keys_are_options_table():
    """Options.Key, the keys the Swift package sends: the 18 in declaration
    order, then tsffi; PreviewOptions.Key, the tsffi object's, sorted (as
    Options.json() writes them)."""
    from turbospark_ffi.options import OPTION_KEYS, TSFFI_KEY, TSFFI_KEYS
    swift = (ROOT / "swift" / "Sources" / "SpeculationPreview" / "Options.swift").read_text()
    body = swift[swift.index("public struct Options:"):]
    body = body[body.index("public enum Key: String, CodingKey"):]
    body = body[:body.index("public static let engineKeys")]
    assert re.findall(r"^\s+case (\w+)$", body, re.M) == [*OPTION_KEYS, TSFFI_KEY]
    preview = swift[swift.index("public struct PreviewOptions"):]
    preview = preview[preview.index("public enum Key"):]
    preview = preview[:preview.index("}")]
    assert tuple(re.findall(r"^\s+case (\w+)$", preview, re.M)) == tuple(sorted(TSFFI_KEYS))
    for key in (*OPTION_KEYS, TSFFI_KEY, *TSFFI_KEYS):
        assert f"`{key}`" in SHAPES_PAGE, key
