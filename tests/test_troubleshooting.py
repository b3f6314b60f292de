"""docs/c-api.md's Troubleshooting section names every start-up message the
library can give (status 9), so a new message without docs fails here; and
no page calls the original module "the seed" (a word no reader can open).

The messages are read from the sources themselves: every format string given
to `tsffi_runtime_fail` and every other runtime text of src/tsffi_embed.c,
and the start-up texts of cffi's init code (ffi_build.py) and of
turbospark_ffi/_boot.py. A message is found when its fixed beginning (the
text before its first printf conversion, `{` or comma) appears in the section.
"""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

SECTION_HEADING = "## Troubleshooting"


def section() -> str:
    text = (ROOT / "docs" / "c-api.md").read_text()
    assert SECTION_HEADING in text, "docs/c-api.md has no Troubleshooting section"
    body = text.split(SECTION_HEADING, 1)[1]
    return body.split("\n## ", 1)[0]


def c_literal(call_args: str) -> str:
    """The adjacent string literals at the start of a C argument list, joined."""
    parts = re.findall(r'\s*"((?:[^"\\]|\\.)*)"', call_args)
    out, rest = [], call_args
    for part in parts:
        head, _, rest = rest.partition('"' + part + '"')
        if head.strip():
            break
        out.append(part)
    return "".join(out).replace('\\"', '"')


def stem(message: str) -> str:
    """The fixed beginning of a message: before its first conversion, and
    before its first comma (the part a person searches for)."""
    head = re.split(r"%|\{|, ", message, maxsplit=1)[0]
    return head.rstrip(" (:").strip()


def c_messages() -> list[str]:
    src = (ROOT / "src" / "tsffi_embed.c").read_text()
    literals = r'((?:\s*"(?:[^"\\]|\\.)*")+)'
    found = [c_literal(m.group(1)) for m in re.finditer(r"tsffi_runtime_fail\(" + literals, src)]
    for name in ("tsffi_runtime_message[4096] =", "tsffi_forked_message[] ="):
        found.append(c_literal(src.split(name, 1)[1]))
    fallback = re.search(r'snprintf\(message, sizeof message,\s*("[^;]*?),\s*\(int\)status',
                         src)
    assert fallback, "the package-did-not-load fallback text moved: update this test"
    found.append(c_literal(fallback.group(1)))
    return found


def python_messages() -> list[str]:
    init = (ROOT / "ffi_build.py").read_text()
    boot = (ROOT / "turbospark_ffi" / "_boot.py").read_text()
    found = re.findall(r'"error": "([^"]+)"', init)
    found += re.findall(r'state\["error"\] = \("([^"]+)"', init)
    found += re.findall(r'raise ImportError\(f"([^"]+)"', boot)
    return found


MESSAGES = [stem(m) for m in c_messages() + python_messages()]


def test_the_sources_give_the_messages_this_test_expects():
    """The extraction itself: it sees the known messages (so an empty list
    cannot pass), each with a beginning long enough to mean something."""
    assert len(c_messages()) >= 13, c_messages()
    assert len(python_messages()) == 3, python_messages()
    assert "cffi is missing: cannot import its backend _cffi_backend" in MESSAGES
    assert "refusing to import Python code from" in MESSAGES
    assert all(len(m) >= 15 for m in MESSAGES), MESSAGES


@pytest.mark.parametrize("message", sorted(set(MESSAGES)))
def test_every_start_up_message_is_in_troubleshooting(message):
    assert message in section(), (f"docs/c-api.md's Troubleshooting has no row for "
                                  f"{message!r} (a message of the C side's start-up)")


def test_a_message_missing_from_the_section_is_caught():
    """The check must fail on what it is there to catch."""
    trimmed = section().replace("`cffi is missing: cannot import", "`cffi gone")
    assert "cffi is missing: cannot import its backend _cffi_backend" not in trimmed


def test_troubleshooting_names_status_9():
    assert "Status 9 (`TSFFI_ERR_RUNTIME`)" in section()


@pytest.mark.parametrize("page", ["README.md", *sorted(p.name for p in (ROOT / "docs")
                                                       .glob("*.md"))])
def test_no_page_calls_the_original_module_the_seed(page):
    path = ROOT / page if page == "README.md" else ROOT / "docs" / page
    assert not re.findall(r".{0,30}\bseeds?\b.{0,30}", path.read_text(), flags=re.I)
