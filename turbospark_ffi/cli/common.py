"""What every subcommand shares: the exit statuses, the one-line error, the
help formatter, arguments read as a host would send them, JSON out."""

from __future__ import annotations

import argparse
import sys

from ..errors import STATUS_OK, SpeculationRefused

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_REFUSED", "CliError", "Formatter", "text_arg",
           "write_json", "request_for"]

# Exit statuses: done and refused are the C ABI's TSFFI_OK and
# TSFFI_ERR_REFUSED (errors.py holds the numbers); anything else that went
# wrong is this command's own 1.
EXIT_OK = STATUS_OK
EXIT_ERROR = 1
EXIT_REFUSED = SpeculationRefused.status


class CliError(Exception):
    """An error this command reports as one line and exit status 1."""


class Formatter(argparse.HelpFormatter):
    """Help that fits 80 columns on any terminal. Paragraphs (blank-line
    separated) are re-wrapped one by one; a paragraph with an indented line is
    kept as written (examples)."""

    def __init__(self, prog: str, **kwargs) -> None:
        import shutil
        columns = shutil.get_terminal_size((80, 24)).columns
        kwargs.setdefault("width", max(40, min(columns, 80) - 2))
        super().__init__(prog, **kwargs)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap
        paragraphs = []
        for para in text.strip("\n").split("\n\n"):
            if any(line.startswith(" ") for line in para.splitlines()):
                paragraphs.append("\n".join(indent + line for line in para.splitlines()))
            else:
                paragraphs.append(textwrap.fill(" ".join(para.split()), width,
                                                initial_indent=indent,
                                                subsequent_indent=indent,
                                                break_on_hyphens=False))
        return "\n\n".join(paragraphs)


def text_arg(value: str, what: str) -> str:
    """`value` as the UTF-8 text a host would send: an argument that is not
    UTF-8 is refused, as the C ABI refuses it."""
    import os
    from ..options import decode_text
    return decode_text(os.fsencode(value), what)


def write_json(data: bytes) -> int:
    """The C ABI's answer on stdout: ASCII by construction (wire.py), one
    trailing newline, nothing else."""
    sys.stdout.write(data.decode("ascii") + "\n")
    sys.stdout.flush()
    return EXIT_OK


def request_for(model_dir: str, options_json: str | None = None):
    """`api.request` for a DIR argument and an options object, made exactly
    as the C ABI makes it for the same two arguments: DIR as the bytes a
    host would pass, so it is checked, resolved and read as there (and the
    answer is the same bytes: api's *_json)."""
    import os
    from ..api import request
    return request(os.fsencode(model_dir), options_json)
