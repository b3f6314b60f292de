"""`turbospark-ffi reconcile MODEL --options JSON --session-info FILE`: the
preview held against what the engine's open reported for the same model and
options, through the one request tsffi_reconcile makes."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, CliError, Formatter, text_arg, write_json
from .report import Report

__all__ = ["register", "run"]

DESCRIPTION = """
Whether the library's preview for MODEL under the options agrees with what the
engine's real open reported for them: FILE holds ts_session_info_json's text
after the open, verbatim (only its "speculation" is read), or, for an open that
failed, {"status": n, "message": "..."} with the open's status and
ts_last_error's text ("-" reads it from stdin). --json prints exactly what
tsffi_reconcile returns. MODEL may be an installed alias.

A disagreement is remembered only by the process that reconciled (a host's,
through the C ABI): this command reports it. Across launches, a host passes
the engine's reason back as tsffi.engineBlocker.

Exit status: 0 compared (agreeing or not); 1 anything else (a malformed FILE,
a bad argument: one line naming what was wrong).
"""

EPILOG = """
examples:
  turbospark-ffi reconcile DIR --session-info session.json
  turbospark-ffi reconcile DIR --options '{"speculation": 2}' --session-info failed.json --json
"""


def register(sub) -> None:
    command = sub.add_parser("reconcile", help="the preview against what the engine's open "
                             "reported", formatter_class=Formatter, description=DESCRIPTION,
                             epilog=EPILOG)
    command.add_argument("dir", metavar="MODEL", help="the install directory, or an installed "
                         "alias, the open was given")
    command.add_argument("--options", metavar="JSON", dest="options_text", default="",
                         help="the options object the open was given, verbatim (default: "
                              "none, the open's defaults)")
    command.add_argument("--session-info", metavar="FILE", required=True,
                         help="what the engine reported: ts_session_info_json's text, or "
                              "{\"status\": n, \"message\": \"...\"} for a failed open; - is "
                              "stdin")
    command.add_argument("--json", action="store_true",
                         help="print exactly what tsffi_reconcile returns")
    command.set_defaults(run=run)


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise CliError(f"--session-info {path}: {exc.strerror}; accepts a readable file "
                       "holding what the engine reported") from None


def _side(outcome: dict) -> str:
    if outcome["status"] != 0:
        return f"the open fails, status {outcome['status']}: {outcome['message']}"
    spec = outcome["speculation"]
    if spec["block"] is not None:
        return f"speculation on, block {spec['block']} with {spec['drafter']}"
    return "speculation off" + (f": {spec['reason']}" if spec["reason"] is not None else
                                " (as asked)")


def run(args: argparse.Namespace) -> int:
    import os
    from ..api import reconcile_json
    from ..jsontext import parse_json_document
    options = text_arg(args.options_text, "--options")
    engine = _read(args.session_info)
    # The very arguments the C ABI takes (the name as bytes), so the answer is
    # its answer: reconcile makes the one request every entry point makes.
    result = reconcile_json(os.fsencode(args.dir), options, engine)
    if args.json:
        return write_json(result)
    answer = parse_json_document(result.decode("ascii"), "reconcile")
    out = Report(sys.stdout, 12)
    out.row("install", args.dir, keep=(args.dir,))
    out.row("options", options or "(none: the open's defaults)")
    if answer["agrees"]:
        out.row("result", "the preview agrees with the engine's open", status="AGREES:",
                tone="good")
    else:
        out.row("result", "on " + ", ".join(answer["differences"]), status="DISAGREES",
                tone="bad")
    out.row("preview", _side(answer["preview"]))
    out.row("engine", _side(answer["engine"]))
    revision = answer["revision"]
    out.row("mirrors", f"{revision['engine']} {revision['engineVersion']}", tone="dim")
    out.flush()
    return EXIT_OK
