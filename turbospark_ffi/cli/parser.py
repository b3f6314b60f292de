"""The command line's grammar: the top-level parser, each subcommand family
registering its own subcommands (config, inspect, plan and choices,
make-install, bundle)."""

from __future__ import annotations

import argparse

from . import bundle, config, decisions, inspect, make_install, reconcile, store
from .common import EXIT_ERROR, Formatter

__all__ = ["Parser", "build_parser"]

EPILOG = """
Exit status: 0 done; 2 refused (plan, choices: an option value or an install
the engine's open refuses, or a named block that cannot be served, the
message on stderr, verbatim); 1 anything else (an invalid
argument, an install that cannot be written), as one line on stderr.

Colour only when stdout is a terminal and NO_COLOR is unset.
"""


class Parser(argparse.ArgumentParser):
    """Usage errors are ONE line and exit 1 (argparse's default, 2, is this
    command's "refused")."""

    def error(self, message: str):  # type: ignore[override]
        message = " ".join(message.split())
        self.exit(EXIT_ERROR, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="turbospark-ffi", formatter_class=Formatter, epilog=EPILOG,
        description="The turbospark-runtime speculation policy: inspect installs, preview "
                    "plans, and link the C library.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for family in (config, inspect, decisions, reconcile, make_install, store, bundle):
        family.register(sub)
    return parser
