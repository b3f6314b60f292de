"""`turbospark-ffi plan DIR` and `turbospark-ffi choices DIR`: what the library
decides for an install under the options a host would pass -- one plan, or
every item of a settings pane's two pickers."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, EXIT_REFUSED, CliError, Formatter, request_for, text_arg, write_json
from .report import WIDTH, Report, plural, wrap, yes_no

__all__ = ["register", "plan_options", "run_plan", "run_choices"]

PLAN_DESCRIPTION = """
What the library decides for the install in DIR: which drafter to open, the
draft policies to open it with, whether the session speculates -- with the
note and the reason in plain words -- and whether a turn sent at
--temperature actually does (through the C ABI a turn speculates only at
temperature 0, without rate control; the engine binding's default is 0.2). The flags build the same options object
a host passes to tsffi_speculation_plan; --json prints exactly what that call
returns for it. DIR may be an installed alias, resolved as in inspect.

Exit status: 0 planned (speculation on or off); 2 refused, as the engine's
open refuses with its status 2: an option value the open's mapping refuses,
with the engine's message alone on stderr; an install the open fails on (not
a directory, its manifest.json's arch, its resident index, a dtype gate, a
drafter it cannot build), with the open's message on stderr, verbatim, and
what failed on stdout; or a named block that cannot be served, with the
engine's message on stderr, verbatim (it names the engine's own flag,
--speculative, which is --speculation here) and what that means on stdout;
1 anything else: options the engine's decoder refuses ("options: "
and serde's text), an invalid argument (one line naming the option key, the
value and the accepted set).
"""

PLAN_EPILOG = """
examples:
  turbospark-ffi plan DIR                       auto: what a default open does
  turbospark-ffi plan DIR --speculation 2       a named block (may be refused)
  turbospark-ffi plan DIR --speculative-drafter dflash --speculation 2
  turbospark-ffi plan DIR --temperature 0       does a greedy turn speculate?
  turbospark-ffi plan DIR --no-engine-blocker --json
  turbospark-ffi plan DIR --options '{"maxContext": 8192, "speculation": 2}'
"""

CHOICES_DESCRIPTION = """
What every item of a settings pane's two pickers would do for the install in
DIR: speculation auto, off and each block 1..15 (rows) by drafter auto, mtp
and dflash (columns), each cell the answer tsffi_speculation_plan gives for
the options with that row and column added. A cell is "on B (drafter)",
"off" (asked for), "off: WHY [n]", "refused [n]" (a named block that cannot
be served) or "open fails [n]" (the open cannot build that drafter); each
numbered text is listed once below the grid, verbatim. The "turn" line says
whether a turn sent at --temperature speculates in the cells that are on.
--json prints exactly what tsffi_speculation_choices returns. DIR may be an
installed alias, resolved as in inspect.

Exit status: 0 when the table was made (refused items included); 2 an
option value the engine's open refuses, or an install it fails on whatever
is asked (its message alone on stderr); 1
anything else (options the engine's decoder refuses, an invalid argument).
"""

CHOICES_EPILOG = """
examples:
  turbospark-ffi choices DIR                    what each item does by default
  turbospark-ffi choices DIR --temperature 0    greedy turns: which speculate
  turbospark-ffi choices DIR --engine-blocker "the vision tower is active"
  turbospark-ffi choices DIR --json
"""


def register(sub) -> None:
    plan = sub.add_parser("plan", help="what the library decides for an install",
                          formatter_class=Formatter, description=PLAN_DESCRIPTION,
                          epilog=PLAN_EPILOG)
    plan.add_argument("dir", metavar="DIR", help="the install directory, or an installed alias")
    plan.add_argument("--speculation", metavar="auto|off|N",
                      help="whether and how far to draft: auto (the default), off, or a "
                           "block N in 1..15 (option key speculation; the engine's own "
                           "command line calls it --speculative)")
    plan.add_argument("--speculative-drafter", dest="drafter", metavar="auto|mtp|dflash",
                      help="which drafter: auto (whichever the install carries; the "
                           "default), mtp or dflash (option key speculativeDrafter)")
    add_preview_inputs(plan)
    add_options_text(plan)
    plan.add_argument("--json", action="store_true",
                      help="print exactly what tsffi_speculation_plan returns")
    plan.set_defaults(run=run_plan)

    choices = sub.add_parser("choices", help="what every speculation / drafter item would do",
                             formatter_class=Formatter, description=CHOICES_DESCRIPTION,
                             epilog=CHOICES_EPILOG)
    choices.add_argument("dir", metavar="DIR",
                         help="the install directory, or an installed alias")
    add_preview_inputs(choices)
    add_options_text(choices)
    choices.add_argument("--json", action="store_true",
                         help="print exactly what tsffi_speculation_choices returns")
    # Every item varies these two: the options hold neither.
    choices.set_defaults(run=run_choices, speculation=None, drafter=None)


def add_preview_inputs(command: argparse.ArgumentParser) -> None:
    """The options `plan` and `choices` share: the ones a whole table holds
    fixed while it varies speculation and the drafter."""
    command.add_argument("--temperature", metavar="T",
                         help="the temperature the host sends its turns at (a number >= 0; "
                              "without this flag the engine binding's default, 0.2): only a "
                              "turn at 0 speculates. The session itself is decided as the "
                              "open decides it, greedy assumed, whatever this says (option key "
                              "tsffi.temperature)")
    command.add_argument("--low-power-mode", action="store_true",
                         help="the Mac is in Low Power Mode, so an absent powerProfile "
                              "resolves to efficiency, whose rate control makes every turn "
                              "sequential (option key tsffi.lowPowerMode)")
    blocker = command.add_mutually_exclusive_group()
    blocker.add_argument("--engine-blocker", metavar="TEXT",
                         help="the engine's own reason not to speculate, as a host that has "
                              "opened the install would pass it (option key "
                              "tsffi.engineBlocker)")
    blocker.add_argument("--no-engine-blocker", action="store_true",
                         help="the engine reported no reason (tsffi.engineBlocker null); "
                              "without either flag the library previews the engine's "
                              "blocker from the files")


def add_options_text(command: argparse.ArgumentParser) -> None:
    command.add_argument("--options", metavar="JSON", dest="options_text",
                         help="the whole options object a host passes, sent verbatim: the "
                              "engine's keys (maxContext, loadGuard, kvBits, ...), the tsffi "
                              "object, and any other key, which is ignored as the open "
                              "ignores it; not combined with the other option flags")


def temperature_value(text: str):
    """--temperature as the JSON value a host would send: a number when it
    reads as a finite one, else the text itself, which the option grammar
    then refuses in its own words (naming the key, the value, the set)."""
    import math
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def plan_options(args: argparse.Namespace) -> dict:
    """The options object a host would pass to tsffi_speculation_plan for these
    flags: only the keys given (absent keys are the defaults); --speculation
    as the string typed (the open takes "auto", "off" and decimal blocks as
    strings); the preview's own inputs in the "tsffi" object, where
    --no-engine-blocker is engineBlocker null."""
    options: dict = {}
    if args.speculation is not None:
        options["speculation"] = text_arg(args.speculation, "--speculation")
    if args.drafter is not None:
        options["speculativeDrafter"] = text_arg(args.drafter, "--speculative-drafter")
    preview: dict = {}
    if args.temperature is not None:
        preview["temperature"] = temperature_value(args.temperature)
    if args.low_power_mode:
        preview["lowPowerMode"] = True
    if args.no_engine_blocker:
        preview["engineBlocker"] = None
    elif args.engine_blocker is not None:
        preview["engineBlocker"] = text_arg(args.engine_blocker, "--engine-blocker")
    if preview:
        options["tsffi"] = preview
    return options


def options_text(args: argparse.Namespace) -> str:
    """The options text the call is made with: --options verbatim (so the
    answer is the one for that exact text: a key given twice, a top-level
    array, an ignored key's spelling), else the flags' object."""
    from ..jsontext import dumps
    flags = plan_options(args)
    if args.options_text is None:
        return dumps(flags)
    if flags:
        raise CliError("--options is the whole options object, sent verbatim; accepts it "
                       "without --speculation, --speculative-drafter, --temperature, "
                       "--low-power-mode, --engine-blocker or --no-engine-blocker (put those "
                       "keys in the object)")
    return text_arg(args.options_text, "--options")


def option_refused(exc: Exception) -> int:
    """The engine's open refuses an option value, or the install whatever is
    asked (its status 2): its message, bare and verbatim, alone on stderr, as
    the host shows it."""
    sys.stderr.write(str(exc) + "\n")
    sys.stderr.flush()
    return EXIT_REFUSED


# ---------------------------------------------------------------------------
# plan

def run_plan(args: argparse.Namespace) -> int:
    from ..errors import OpenRefused, OptionRefused, SpeculationRefused
    from ..api import plan_json
    from ..wire import plan_to_dict

    options_json = options_text(args)
    try:
        req = request_for(args.dir, options_json)
    except OptionRefused as exc:
        return option_refused(exc)
    try:
        if args.json:
            return write_json(plan_json(req))
        plan = plan_to_dict(req.plan())
    except (SpeculationRefused, OpenRefused) as exc:
        if not args.json:
            refused_report(req.model_dir, options_json, exc)
        # The engine's (or the original module's) message, verbatim: a host
        # shows exactly this.
        sys.stderr.write(str(exc) + "\n")
        sys.stderr.flush()
        return EXIT_REFUSED
    plan_report(req.model_dir, options_json, args.drafter, plan,
                req.options.temperature is None)
    return EXIT_OK


# Where the engine's open stopped (OpenRefused.stage), in words: the message
# on stderr is the open's own, which does not always say which file it read.
OPEN_STAGES = {
    "directory": "DIR is not a directory the open can read",
    "manifest": "it reads manifest.json's arch first, and refuses this one",
    "index": "it cannot read the resident index of model_weights.bin",
    "dtypeGate": "a tensor's dtype is one no reader of the open serves",
    "mtpBuild": "it cannot build the MTP head's state from the resident tensors",
    "dflashBuild": "it cannot build the DFlash2 drafter's state for this trunk",
}


def refused_report(model_dir: str, options_json: str, exc: Exception) -> None:
    """What a refusal means, on stdout before the message goes to stderr
    (alone, verbatim, one line). The open's failure: where it stopped. A
    named block: the message is the engine's, and the flag it names,
    --speculative, is the engine's own command line's, not this one's (a
    person who typed --speculation would look for a flag they never gave)."""
    from ..errors import OpenRefused
    out = Report(sys.stdout, 13)
    out.row("install", model_dir, keep=(model_dir,))
    out.row("options", options_json)
    if isinstance(exc, OpenRefused):
        stage = OPEN_STAGES.get(exc.stage, "it fails on this install")
        out.row("open", f"the engine's open fails on this install: {stage} (exit status "
                f"{EXIT_REFUSED}); the message on stderr is the open's, verbatim",
                status="REFUSED:", tone="bad")
    else:
        out.row("speculation", f"the named block cannot be served on this install (exit "
                f"status {EXIT_REFUSED}); the message on stderr is the engine's, verbatim, "
                'and its "--speculative" is the engine\'s own command-line flag: here it is '
                "--speculation, option key speculation", status="REFUSED:", tone="bad")
    out.flush()


DRAFTER_NAMES = {"mtp": "MTP head", "dflash": "DFlash2 drafter"}
MODE_WORDS = {"off": "off", "auto": "auto (built if the install carries it)"}


def mode_words(policy: dict) -> str:
    if policy["mode"] == "fixed":
        return f"fixed at block {policy['block']} (the open fails if it is missing)"
    return MODE_WORDS.get(policy["mode"], policy["mode"])


def plan_report(model_dir: str, options_json: str, requested: str | None, plan: dict,
                default_temperature: bool) -> None:
    out = Report(sys.stdout, 13)
    choice, policies, spec = plan["drafter"], plan["draftPolicies"], plan["speculation"]
    out.row("install", model_dir, keep=(model_dir,))
    out.row("options", options_json)
    out.more("(the object a host passes to tsffi_speculation_plan)", tone="dim")
    if spec["block"] is not None:
        out.row("speculation", f"block {spec['block']}, drafted by the "
                f"{DRAFTER_NAMES[spec['drafter']]}", status="ON:", tone="good")
    elif spec["reason"] is None:
        out.row("speculation", "as asked (--speculation off)", status="OFF,", tone="dim")
    else:
        out.row("speculation", "(the reason is below)", status="OFF", tone="warn")
    turn_row(out, plan["turn"], default_temperature)
    how = "as asked" if requested in ("mtp", "dflash") else "resolved by auto from the index"
    out.row("drafter", f"{choice['drafter']} ({DRAFTER_NAMES[choice['drafter']]}), {how}")
    out.more(f"the install carries an MTP head: {yes_no(choice['installHasMtpHead'])}; "
             f"a DFlash2 drafter: {yes_no(choice['installHasDflash'])}")
    if choice["installHasMtpHead"] is None:
        out.more('(unknown: the resident index is unreadable, which is not "absent")',
                 tone="warn")
    out.row("open with", f"mtp {mode_words(policies['mtp'])}")
    out.more(f"dflash {mode_words(policies['dflash'])}")
    note, reason = choice["note"], spec["reason"]
    if note is not None:
        out.row("note", note, tone="warn")
    if reason is not None:
        out.row("reason", "the note above" if reason == note else reason)
    warning_rows(out, plan["warnings"])
    out.flush()


def turn_words(turn: dict, default_temperature: bool) -> tuple[str, str, str]:
    """(status, text, tone) of a plan's turn: whether a turn the host sends
    speculates (the session drafting is not enough: the engine falls back
    to sequential decoding silently, so the reason is shown whole)."""
    at = f"at temperature {temperature_words(turn['temperature'])}" + (
        " (the engine binding's default)" if default_temperature else "")
    if turn["speculates"]:
        return "SPECULATES", at, "good"
    if turn["reason"] is not None:
        return "SEQUENTIAL:", turn["reason"], "warn"
    return "sequential", f"{at}: the session does not draft", "dim"


def temperature_words(t: float) -> str:
    """A turn's temperature as a person reads it: the JSON's number without a
    trailing ".0" (0, 0.2, 1)."""
    from ..rust_text import compact
    text = compact(float(t))
    return text[:-2] if text.endswith(".0") else text


def turn_row(out: Report, turn: dict, default_temperature: bool) -> None:
    status, text, tone = turn_words(turn, default_temperature)
    out.row("turn", text, status=status, tone=tone)


def warning_rows(out: Report, warnings: list[str] | tuple[str, ...]) -> None:
    """The hints about the options (a near-miss key, a key that moved into
    "tsffi"), verbatim: keys the open ignores, so nothing was refused."""
    for warning in warnings:
        out.row("warning", warning, tone="warn")


# ---------------------------------------------------------------------------
# choices

def run_choices(args: argparse.Namespace) -> int:
    from ..errors import OpenRefused, OptionRefused
    from ..api import choices_json

    options_json = options_text(args)
    try:
        req = request_for(args.dir, options_json)
        if args.json:
            return write_json(choices_json(req))
        table = req.choices()
    except (OptionRefused, OpenRefused) as exc:
        # An install the open fails on whatever is asked: the call fails
        # whole, as every item would, with the open's message.
        return option_refused(exc)
    choices_report(table, options_json, req.options.temperature is None)
    return EXIT_OK


CELL = 24  # 8 + 24 + 24 + 23 columns: the grid fits 79


class Footnotes:
    """The texts a grid's cells point at, each numbered once, in order."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def number(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1


def cell(item, short: dict, notes: Footnotes) -> tuple[str, str]:
    """A grid cell's text and tone for one item of the table."""
    from ..policy import REFUSAL_PREFIX
    if item.plan is None:
        if item.refusal.startswith(REFUSAL_PREFIX):
            return f"refused [{notes.number(item.refusal[len(REFUSAL_PREFIX):])}]", "bad"
        # The open's own failure building the item's drafter: its message
        # whole (it has no prefix to take off).
        return f"open fails [{notes.number(item.refusal)}]", "bad"
    spec = item.plan.speculation
    if spec.enabled:
        return f"on {spec.block} ({item.plan.choice.drafter.value})", "good"
    if spec.reason is None:
        return "off", "dim"
    label = short.get(item.plan.reason_code)
    number = notes.number(spec.reason)
    return (f"off: {label} [{number}]" if label else f"off [{number}]"), "warn"


def grid_lines(out: Report, items, notes: Footnotes) -> list[str]:
    from ..policy import DRAFTER_SPELLINGS
    from ..reasons import REASON_LABELS as short
    lines = ["", "speculation  (rows) x speculativeDrafter (columns)",
             " " * 8 + "".join(name.ljust(CELL) for name in DRAFTER_SPELLINGS).rstrip()]
    for row in range(0, len(items), 3):
        cells = []
        for item in items[row:row + 3]:
            text, tone = cell(item, short, notes)
            cells.append(out.paint(text, tone) + " " * (CELL - len(text)))
        speculation = items[row].speculation
        label = str(speculation.n) if speculation.kind == "block" else speculation.kind
        lines.append((label.ljust(8) + "".join(cells)).rstrip())
    return lines


def table_turn_row(out: Report, items, default_temperature: bool) -> None:
    """The turn of the cells that are on. The table holds the temperature and
    rate control fixed, so their turns agree; each distinct one is shown
    (with its cells' count) rather than assumed to."""
    turns: dict = {}
    for item in items:
        if item.plan is not None and item.plan.speculation.enabled:
            turn = item.plan.turn
            key = (turn.temperature, turn.speculates, turn.reason)
            turns[key] = turns.get(key, 0) + 1
    if not turns:
        out.row("turn", "no cell drafts, so no turn speculates", status="sequential:",
                tone="dim")
        return
    for (temperature, speculates, reason), count in turns.items():
        status, text, tone = turn_words({"temperature": temperature, "speculates": speculates,
                                         "reason": reason}, default_temperature)
        cells = "every cell that is on" if len(turns) == 1 else plural(count, "cell")
        text = f"{text}, in {cells}" if speculates else f"in {cells}: {text}"
        out.row("turn", text, status=status.rstrip(":"), tone=tone)


def choices_report(table, options_json: str, default_temperature: bool) -> None:
    from ..errors import SpeculationRefused
    from ..policy import REFUSAL_PREFIX
    out = Report(sys.stdout, 9)
    out.row("install", table.model_dir, keep=(table.model_dir,))
    out.row("options", options_json)
    out.more("(held for every item; each cell is tsffi_speculation_plan with that "
             "row's speculation and that column's speculativeDrafter added)", tone="dim")
    out.row("carries", f"an MTP head: {yes_no(table.install_has_mtp_head)}; a DFlash2 "
            f"drafter: {yes_no(table.install_has_dflash)}")
    table_turn_row(out, table.choices, default_temperature)
    warning_rows(out, table.warnings)
    notes = Footnotes()
    out.lines.extend(grid_lines(out, table.choices, notes))
    out.lines.append("")
    for number, text in enumerate(notes.texts, 1):
        out.lines.extend(wrap(text, WIDTH, initial_indent=f"[{number}] ".ljust(5),
                              subsequent_indent=" " * 5))
    refusals = [item.refusal for item in table.choices if item.plan is None]
    if any(text.startswith(REFUSAL_PREFIX) for text in refusals):
        out.lines.extend(wrap(
            f'refused: the plan call fails (status {SpeculationRefused.status}) with '
            f'"{REFUSAL_PREFIX.strip()} " followed by the numbered text, verbatim', WIDTH))
    if not all(text.startswith(REFUSAL_PREFIX) for text in refusals):
        out.lines.extend(wrap(
            f"open fails: the plan call fails (status {SpeculationRefused.status}) with the "
            "numbered text, verbatim: the engine's open cannot build that item's drafter",
            WIDTH))
    out.flush()
