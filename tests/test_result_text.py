"""Every result is text Swift's decoders accept, and its size is bounded by its input's (issue 32
items 12 and 13), through the C ABI in process.

Swift's JSONDecoder and JSONSerialization refuse a whole result that holds a lone surrogate, as
raw bytes or as a "\\ud800" escape; Python's strict UTF-8 decoding and a scan for unpaired
surrogate escapes stand in for them here. A choices table used to repeat the ignored keys in each
of its 51 items' plans (1 MiB of ignored keys: a 32-39 MB answer); it now holds them once.
On main before ABI 3 (commit 603747b) 14 of this file's 27 tests failed (run against that tree).
"""

from __future__ import annotations

import ctypes
import json

import pytest

FUNCTIONS = ("tsffi_speculation_plan", "tsffi_speculation_choices", "tsffi_resolve_drafter")


@pytest.fixture(scope="module")
def install(tmp_path_factory) -> bytes:
    from turbospark_ffi.install_writer import write_install
    return str(write_install(tmp_path_factory.mktemp("result-text") / "both", mtp=True,
                             dflash=True)).encode()


def call(lib, name: str, *args) -> tuple[int, bytes | None, str]:
    out = ctypes.c_void_p()
    status = getattr(lib, name)(*args, ctypes.byref(out))
    text = ctypes.string_at(out.value) if out.value else None
    lib.tsffi_string_free(out)
    n = lib.tsffi_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.tsffi_last_error(buf, n + 1)
    return status, text, buf.value.decode("utf-8", "strict")


def lone_surrogate_escapes(text: str) -> list[int]:
    """Offsets of "\\uD8xx".."\\uDFxx" escapes that are not a high-low pair."""
    lone, i = [], text.find("\\u")
    while i != -1:
        if text[i - 1:i] == "\\" and (i < 2 or text[i - 2] != "\\"):
            i = text.find("\\u", i + 1)    # an escaped backslash followed by "u"
            continue
        unit = int(text[i + 2:i + 6], 16)
        if 0xD800 <= unit <= 0xDBFF:
            after = text[i + 6:i + 12]
            if after[:2] == "\\u" and 0xDC00 <= int(after[2:], 16) <= 0xDFFF:
                i = text.find("\\u", i + 12)
                continue
            lone.append(i)
        elif 0xDC00 <= unit <= 0xDFFF:
            lone.append(i)
        i = text.find("\\u", i + 6)
    return lone


def swift_accepts(result: bytes) -> bool:
    try:
        text = result.decode("utf-8", "strict")  # a lone surrogate's bytes are not UTF-8
    except UnicodeDecodeError:
        return False
    json.loads(text)
    return not lone_surrogate_escapes(text)


def test_the_check_discriminates():
    # What the library answered before ABI 3 for an ignored key "\ud800".
    assert not swift_accepts(b'{"ignoredKeys":["\\ud800"]}')
    assert not swift_accepts(b'{"reason":"\\udc00 vision"}')
    assert not swift_accepts(b'{"reason":"\xed\xa0\x80"}'.replace(b"\xed\xa0\x80", b"\xed\xa0"))
    assert swift_accepts(b'{"reason":"\\ud83d\\ude00 \\\\ud800"}')   # a pair; an escaped "\"


SURROGATE_TEXTS = [
    # The open skips an ignored VALUE unchecked: accepted, and nothing of it
    # reaches the result.
    (b'{"x": "\\ud800", "speculation": 2}', 0),
    (b'{"x": ["\\udfff\\ud800"], "tsffi": {"temperature": 0}}', 0),
    # A key is a str to serde: a lone surrogate there is the open's refusal.
    (b'{"\\ud800": 1}', 4),
    (b'{"a\\udc00b": 1}', 4),
    # The engine's reason is this library's: refused, never echoed back.
    (b'{"tsffi": {"engineBlocker": "\\ud800 vision"}}', 1),
    (b'{"tsffi": {"engineBlocker": "vision \\udc00"}}', 1),
    # A pair is a character like any other.
    ('{{"tsffi": {{"engineBlocker": "{0}"}}, "{0}": 1}}'.format("\U0001F600").encode(), 0),
    (b'{"tsffi": {"engineBlocker": "\\ud83d\\ude00"}, "\\ud83d\\ude00": 1}', 0),
]


@pytest.mark.parametrize("text,status", SURROGATE_TEXTS, ids=[t[0][:40] for t in SURROGATE_TEXTS])
@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_lone_surrogate_ever_reaches_a_result(loaded, install, function, text, status):
    got, result, message = call(loaded.lib, function, install, text)
    assert got == status, message
    if status == 0:
        assert swift_accepts(result)
        assert "\ufffd" not in result.decode()
    else:
        assert result is None and message      # the message decoded strictly above


def test_a_pair_comes_back_as_the_character(loaded, install):
    _, result, _ = call(loaded.lib, "tsffi_speculation_plan", install,
                        b'{"tsffi": {"engineBlocker": "\\ud83d\\ude00"}, "\\ud83d\\ude00": 1}')
    plan = json.loads(result)
    assert plan["ignoredKeys"] == ["\U0001F600"]


def test_a_choices_table_is_bounded_by_its_input(loaded, install):
    # 1 MiB of ignored keys: the table holds them once, so it is about as
    # large as its input plus the 51 decisions, not 51 times the input.
    keys = {f"k{n:07d}": 0 for n in range(80_000)}
    text = json.dumps(keys).encode()
    assert len(text) > 1 << 20
    status, table, message = call(loaded.lib, "tsffi_speculation_choices", install, text)
    assert status == 0, message
    _, empty, _ = call(loaded.lib, "tsffi_speculation_choices", install, b"{}")
    assert len(table) - len(empty) < len(text)
    result = json.loads(table)
    assert result["ignoredKeys"] == list(keys)
    assert all(item["plan"] is None or "ignoredKeys" not in item["plan"]
               for item in result["choices"])
    assert swift_accepts(table)
