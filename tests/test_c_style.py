"""The C sources in one voice: src/*.c and the public header include/tsffi.h
as the repository's .clang-format writes them. (clang-format comes from Debian's clang-format package, which
.ci/run installs; without it this fails, naming it.)"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import ROOT

from turbospark_ffi.native import HEADER_NAME  # noqa: E402

SOURCES = sorted((ROOT / "src").glob("*.c")) + [ROOT / "include" / HEADER_NAME]


def test_there_are_sources_to_check():
    assert [p.name for p in SOURCES] == ["tsffi_embed.c", "tsffi_index_scan.c", HEADER_NAME]


@pytest.mark.parametrize("source", SOURCES, ids=[p.name for p in SOURCES])
def test_formatted_as_clang_format_writes_it(source):
    tool = shutil.which("clang-format")
    if tool is None:
        pytest.fail("clang-format is not on PATH: apt-get install --no-install-recommends "
                    "clang-format (.ci/run does)")
    result = subprocess.run([tool, "--dry-run", "--Werror", f"--style=file:{ROOT / '.clang-format'}",
                             str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def test_no_reserved_identifiers_at_file_scope():
    """Identifiers starting with an underscore and a lowercase letter (or two
    underscores, or an underscore and a capital) are reserved at file scope
    in C; the library's own names are tsffi_ / TSFFI_."""
    import re
    for source in SOURCES:
        defined = re.findall(r"^(?:static\s+)?[A-Za-z_][\w\s\*]*?\b(_\w+)\s*\(", source.read_text(),
                             re.M)
        assert defined == [], (source.name, defined)
