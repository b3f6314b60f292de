"""`turbospark-ffi store`: the installed aliases a model name may be."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, Formatter, write_json
from .report import Report

__all__ = ["register", "run"]

DESCRIPTION = """
The store a model name is resolved against, as the library reads it: its
root ($TURBOSPARK_HOME, else $HOME/.turbospark; set but empty is the current
directory), whether <root>/installed.json was read (or why not), and each
alias that counts -- its last text row names an existing directory -- with
the directory a plan of it reads and whether that install carries the MTP
head or the DFlash2 drafter. The same answer as the C ABI's
tsffi_store_json (--json prints it).

Exit status 0 whenever the store was looked at, even when there is none.
"""


def register(sub) -> None:
    store = sub.add_parser("store", help="the installed aliases a model name may be",
                           formatter_class=Formatter, description=DESCRIPTION)
    store.add_argument("--json", action="store_true",
                       help="print the C ABI's tsffi_store_json object instead")
    store.set_defaults(run=run)


def _badge(value) -> str:
    return "unknown" if value is None else ("yes" if value else "no")


def run(args: argparse.Namespace) -> int:
    from ..api import store_json
    from ..jsontext import parse_json_document
    answer = store_json()
    if args.json:
        return write_json(answer)
    info = parse_json_document(answer.decode("ascii"), "store")
    out = Report(sys.stdout, 18)
    out.row("store root", "(none)" if info["root"] is None else (info["root"] or "(empty: "
            "the current directory)"))
    if info["storeRead"]:
        out.row("installed.json", info["storeFile"], status="read:", tone="good",
                keep=(info["storeFile"],))
    else:
        out.row("installed.json", info["reason"], status="no rows:", tone="warn")
    for alias in info["aliases"]:
        out.row(alias["alias"], alias["modelDir"], keep=(alias["modelDir"],))
        out.more(f"MTP head {_badge(alias['installHasMtpHead'])}, DFlash2 drafter "
                 f"{_badge(alias['installHasDflash'])}", tone="dim")
    if info["storeRead"] and not info["aliases"]:
        out.more("no alias counts (none is a text row naming an existing directory)",
                 tone="dim")
    out.flush()
    return EXIT_OK
