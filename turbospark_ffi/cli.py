"""The `turbospark-ffi` command (also `python -m turbospark_ffi`).

    config         how a native host compiles and links the library
    inspect DIR    what an install's files say (the resident index, the two
                   drafters, the verify probe, the routed experts)
    plan DIR       what the library decides for an install under the options
                   a host would pass, in plain words or as the C ABI's JSON
    choices DIR    what every speculation / drafter item of a settings pane
                   would do, as a grid or as the C ABI's JSON
    make-install   write a small install in the engine's layout (or the four
                   sample installs that ship with the package)

Exit status: 0 done (for `plan`: planned, whether speculation is on or off),
2 refused (a named block that cannot be served: the seed's message, verbatim,
on stderr), 1 anything else that went wrong (an invalid argument, an install
that cannot be written) -- always one line on stderr, never a traceback.

HOW `--json` STAYS BYTE-IDENTICAL TO THE C ABI: it calls the very functions
`_abi.py` calls for `tsffi_speculation_plan`, `tsffi_speculation_choices` and
`tsffi_install_info_json` (`parse_options` on the same options object,
`plan_for_snapshot`, `plan_to_dict`, `choices_for_snapshot`,
`choices_to_dict`, `install_info`, `wire.dumps`), rather than loading
libtsffi.so with ctypes. Loading the library would start a second
copy of the policy behind a C boundary for no new answer, fail wherever the
library is not built (a source checkout, a platform without a wheel), and
cost its embedded start-up on every command; the shared functions give the
same bytes by construction, and tests/test_cli.py holds the two to it by
comparing against the C ABI itself.

Imports are lazy (inside the functions): this module is imported on every
command, and the package's import time matters.
"""

from __future__ import annotations

import argparse
import sys

from .errors import STATUS_OK, SpeculationRefused

__all__ = ["main"]

# Output fits an 80-column terminal; one column spare so that a line of full
# width never makes a terminal wrap on its own.
WIDTH = 79

# Exit statuses: done and refused are the C ABI's TSFFI_OK and
# TSFFI_ERR_REFUSED (errors.py holds the numbers); anything else that went
# wrong is this command's own 1.
EXIT_OK = STATUS_OK
EXIT_ERROR = 1
EXIT_REFUSED = SpeculationRefused.status

# Option key -> the flag that sets it, so that the grammar's refusal names
# both what the person typed and what a host would send.
_FLAG_FOR_KEY = {"speculation": "--speculation", "speculativeDrafter": "--speculative-drafter",
                 "temperature": "--temperature", "engineBlocker": "--engine-blocker"}


class _CliError(Exception):
    """An error this command reports as one line and exit status 1."""


# ---------------------------------------------------------------------------
# argparse, made to speak the way the rest of the command does.

class _Formatter(argparse.HelpFormatter):
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


class _Parser(argparse.ArgumentParser):
    """Usage errors are ONE line and exit 1 (argparse's default, 2, is this
    command's "refused")."""

    def error(self, message: str):  # type: ignore[override]
        message = " ".join(message.split())
        self.exit(EXIT_ERROR, f"{self.prog}: {message} (see '{self.prog} --help')\n")


# ---------------------------------------------------------------------------
# Output: wrapping to 80 columns, colour only on a terminal without NO_COLOR.

def _colour_wanted(stream) -> bool:
    import os
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class _Report:
    """Rows of `label  value`, the value wrapped under itself. A row may
    start with a status word, coloured by tone when colour is on."""

    _TONES = {"good": "32", "warn": "33", "bad": "31", "dim": "2"}

    def __init__(self, stream, label_width: int) -> None:
        self.stream = stream
        self.colour = _colour_wanted(stream)
        self.label_width = label_width
        self.lines: list[str] = []

    def paint(self, text: str, tone: str | None) -> str:
        if not self.colour or not tone or not text:
            return text
        return f"\033[{self._TONES[tone]}m{text}\033[0m"

    def bold(self, text: str) -> str:
        return f"\033[1m{text}\033[0m" if self.colour and text else text

    def row(self, label: str, text: str = "", *, status: str = "", tone: str | None = None,
            indent: int = 0) -> None:
        import textwrap
        lead = " " * indent + label
        pad = max(self.label_width, len(lead) + 2)
        body = status + (" " + text if status and text else text)
        width = WIDTH - pad
        lines = textwrap.wrap(body, width, break_on_hyphens=False) or [""]
        if status and lines[0].startswith(status):
            lines[0] = self.paint(status, tone) + lines[0][len(status):]
        head = self.bold(lead) + " " * (pad - len(lead))
        self.lines.append((head + lines[0]).rstrip())
        self.lines.extend(" " * pad + line for line in lines[1:])

    def more(self, text: str, *, tone: str | None = None, extra_indent: int = 0) -> None:
        """A continuation line (or lines) under the value column."""
        import textwrap
        pad = self.label_width + extra_indent
        for line in textwrap.wrap(text, WIDTH - pad, break_on_hyphens=False) or [""]:
            self.lines.append(" " * pad + self.paint(line, tone))

    def flush(self) -> None:
        self.stream.write("\n".join(self.lines) + "\n")
        self.stream.flush()


def _number(n: int) -> str:
    return f"{n:,}"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{_number(n)} {one if n == 1 else (many or one + 's')}"


# ---------------------------------------------------------------------------
# Arguments shared with the C ABI's checks.

def _text_arg(value: str, what: str) -> str:
    """`value` as the UTF-8 text a host would send: an argument that is not
    UTF-8 is refused, as the C ABI refuses it."""
    import os
    from .options import decode_text
    return decode_text(os.fsencode(value), what)


def _write_json(text: str) -> int:
    # ASCII by construction (wire.dumps); one trailing newline, nothing else.
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return EXIT_OK


# ---------------------------------------------------------------------------
# config (unchanged)

def _cmd_config(args: argparse.Namespace) -> int:
    from . import native
    parts = []
    if args.cflags:
        parts.append(native.cflags())
    if args.libs:
        parts.append(native.libs())
    if args.includedir:
        parts.append(native.include_dir())
    if args.libdir:
        parts.append(native.package_dir())
    if args.samples:
        import os
        parts.append(os.path.join(native.package_dir(), "samples"))
    if args.pkg_config_dir:
        import os
        os.makedirs(args.pkg_config_dir, exist_ok=True)
        path = os.path.join(args.pkg_config_dir, f"{native.PKG_CONFIG_NAME}.pc")
        with open(path, "w") as f:
            f.write(native.pkg_config())
        parts.append(path)
    if not parts:
        print(native.pkg_config(), end="")
        return 0
    print(" ".join(parts))
    return 0


# ---------------------------------------------------------------------------
# inspect

def _cmd_inspect(args: argparse.Namespace) -> int:
    from .wire import install_info_json, install_info_to_dict
    req = _request(args)
    if args.json:
        return _write_json(install_info_json(req).decode("ascii"))
    info = install_info_to_dict(req.snapshot)
    out = _Report(sys.stdout, 18)
    out.row("install", info["modelDir"])
    if info["indexReadable"]:
        out.row("index", f"{_plural(info['entryCount'], 'entry', 'entries')}, index "
                f"{_plural(info['indexBytes'], 'byte')}, resident data "
                f"{_plural(info['residentBytes'], 'byte')}", status="readable:", tone="good")
    else:
        out.row("index", f"({info['indexCheck']} check): {info['indexError']}",
                status="UNREADABLE", tone="bad")
        out.more('so whether it carries either drafter is "unknown" (null), which is not '
                 '"absent": the engine\'s open is the one that refuses a broken install',
                 tone="dim")
    _drafter_rows(out, "MTP head", info["mtpHead"], "mtp.fc.weight")
    _drafter_rows(out, "DFlash2 drafter", info["dflashDrafter"], "dflash.fc.weight")
    _probe_rows(out, info)
    _experts_row(out, info["experts"])
    preview = info["blockerPreview"]
    out.row("blocker preview", "what the engine would give as its reason not to speculate, "
            "read from the files (before any open)", tone="dim")
    for key, label in (("mtp", "mtp"), ("dflash", "dflash")):
        reason = preview[key]
        if reason is None:
            out.row(label, "nothing in the files stands in the way", status="none:",
                    tone="good", indent=2)
        else:
            out.row(label, reason, indent=2)
    out.flush()
    return EXIT_OK


def _drafter_rows(out: _Report, label: str, drafter: dict | None, presence: str) -> None:
    if drafter is None:
        out.row(label, "(the index is unreadable)", status="unknown", tone="warn")
        return
    have, expected = drafter["tensors"], drafter["expected"]
    if drafter["complete"]:
        out.row(label, f"all {expected} tensors", status="complete:", tone="good")
        return
    if have == 0:
        out.row(label, f"(0 of {expected} tensors)", status="absent", tone="dim")
        return
    detected = ("detected" if drafter["present"] else
                f"NOT detected: its presence test, {presence}, is missing")
    out.row(label, f"{have} of {expected} tensors, {detected}; missing:",
            status="partial:", tone="warn")
    for name in drafter["missing"]:
        out.more(name, extra_indent=2)


def _probe_rows(out: _Report, info: dict) -> None:
    if not info["indexReadable"]:
        out.row("probe", "(the index is unreadable)", status="unknown", tone="warn")
        return
    probe = info["probe"]
    if probe is None:
        out.row("probe", "no full-attention layer (no language_model.model.layers.N."
                "self_attn.* tensor) for the verify pass to probe", status="none:", tone="warn")
        return
    out.row("probe", f"layer {probe['layer']}, the first full-attention layer")
    out.more(probe["tensor"])
    if not probe["present"]:
        out.more("is absent from the resident index", tone="warn")
        return
    name = probe["dtypeName"] or "not a known dtype tag"
    covers = ("which the batched verify covers" if probe["verifyCovers"]
              else "which the batched verify does NOT cover")
    out.more(f"dtype {probe['dtype']} ({name}), {covers}",
             tone="good" if probe["verifyCovers"] else "warn")


def _experts_row(out: _Report, experts: dict) -> None:
    if experts["error"] is not None:
        out.row("experts", experts["error"], status="unusable:", tone="bad")
    elif not experts["layoutPresent"]:
        out.row("experts", "no packed_experts/layout.json, so nothing is routed",
                status="dense:")
    elif experts["expertsPerLayer"] == 0:
        out.row("experts", "packed_experts/layout.json routes no experts", status="dense:")
    else:
        out.row("experts", f"{_plural(experts['expertsPerLayer'], 'routed expert')} per "
                f"layer, over {_plural(experts['numLayers'], 'layer')}", status="MoE:",
                tone="warn")


# ---------------------------------------------------------------------------
# plan

def _temperature_value(text: str):
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
    as the string typed (the grammar takes "auto", "off" and decimal blocks
    as strings); --no-engine-blocker is engineBlocker null."""
    options: dict = {}
    if args.speculation is not None:
        options["speculation"] = _text_arg(args.speculation, "--speculation")
    if args.drafter is not None:
        options["speculativeDrafter"] = _text_arg(args.drafter, "--speculative-drafter")
    if args.temperature is not None:
        options["temperature"] = _temperature_value(args.temperature)
    if args.no_engine_blocker:
        options["engineBlocker"] = None
    elif args.engine_blocker is not None:
        options["engineBlocker"] = _text_arg(args.engine_blocker, "--engine-blocker")
    return options


def _request(args: argparse.Namespace, options_json: str | None = None):
    """`plan.request` for DIR and the options, exactly as the C ABI makes it
    for the same two arguments: DIR as the bytes a host would pass."""
    import os
    from .plan import request
    return request(os.fsencode(args.dir), options_json)


def _cmd_plan(args: argparse.Namespace) -> int:
    from .errors import SpeculationRefused
    from .jsontext import dumps
    from .wire import plan_json, plan_to_dict

    options_json = dumps(plan_options(args))
    req = _request(args, options_json)
    try:
        if args.json:
            return _write_json(plan_json(req).decode("ascii"))
        plan = plan_to_dict(req.plan())
    except SpeculationRefused as exc:
        # The seed's message, verbatim: a host shows exactly this.
        sys.stderr.write(str(exc) + "\n")
        sys.stderr.flush()
        return EXIT_REFUSED
    _plan_report(req.model_dir, options_json, args.drafter, plan)
    return EXIT_OK


_DRAFTER_NAMES = {"mtp": "MTP head", "dflash": "DFlash2 drafter"}
_MODE_WORDS = {"off": "off", "auto": "auto (built if the install carries it)"}


def _yes_no(flag: bool | None) -> str:
    return "unknown" if flag is None else ("yes" if flag else "no")


def _plan_report(model_dir: str, options_json: str, requested: str | None, plan: dict) -> None:
    out = _Report(sys.stdout, 13)
    choice, policies, spec = plan["drafter"], plan["draftPolicies"], plan["speculation"]
    out.row("install", model_dir)
    out.row("options", options_json)
    out.more("(the object a host passes to tsffi_speculation_plan)", tone="dim")
    if spec["block"] is not None:
        out.row("speculation", f"block {spec['block']}, drafted by the "
                f"{_DRAFTER_NAMES[spec['drafter']]}", status="ON:", tone="good")
    elif spec["reason"] is None:
        out.row("speculation", "as asked (--speculation off)", status="OFF,", tone="dim")
    else:
        out.row("speculation", "(the reason is below)", status="OFF", tone="warn")
    how = "as asked" if requested in ("mtp", "dflash") else "resolved by auto from the index"
    out.row("drafter", f"{choice['drafter']} ({_DRAFTER_NAMES[choice['drafter']]}), {how}")
    out.more(f"the install carries an MTP head: {_yes_no(choice['installHasMtpHead'])}; "
             f"a DFlash2 drafter: {_yes_no(choice['installHasDflash'])}")
    if choice["installHasMtpHead"] is None:
        out.more('(unknown: the resident index is unreadable, which is not "absent")',
                 tone="warn")

    def mode(policy: dict) -> str:
        if policy["mode"] == "fixed":
            return f"fixed at block {policy['block']} (the open fails if it is missing)"
        return _MODE_WORDS.get(policy["mode"], policy["mode"])
    out.row("open with", f"mtp {mode(policies['mtp'])}")
    out.more(f"dflash {mode(policies['dflash'])}")
    note, reason = choice["note"], spec["reason"]
    if note is not None:
        out.row("note", note, tone="warn")
    if reason is not None:
        if reason == note:
            out.row("reason", "the note above")
        else:
            out.row("reason", reason)
    out.flush()


# ---------------------------------------------------------------------------
# choices

def _cmd_choices(args: argparse.Namespace) -> int:
    from .jsontext import dumps
    from .wire import choices_json

    options_json = dumps(plan_options(args))
    req = _request(args, options_json)
    if args.json:
        return _write_json(choices_json(req).decode("ascii"))
    _choices_report(req.choices(), options_json)
    return EXIT_OK


# Short names for the reasons a grid cell shows, by the reason's code
# (PlanResult.reason_code, owned by the module that words the reason); a
# reason without one is shown as its footnote only. The full text is always
# listed below the grid.
def _short_names() -> dict:
    from . import blockers, expert_layout, policy, resident_index
    return {policy.REASON_DFLASH_OPT_IN: "DFlash2 opt-in", policy.REASON_ENGINE: "engine",
            policy.REASON_SAMPLED: "sampled", blockers.REASON_NO_MTP_HEAD: "no MTP head",
            blockers.REASON_NO_DFLASH: "no DFlash2", blockers.REASON_MOE: "MoE",
            blockers.REASON_NO_PROBE_LAYER: "no probe layer",
            blockers.REASON_PROBE_ABSENT: "verify probe",
            blockers.REASON_PROBE_DTYPE: "verify probe",
            resident_index.REASON_UNREADABLE_INDEX: "bad index",
            expert_layout.REASON_UNREADABLE_LAYOUT: None}


_CELL = 24  # 8 + 24 + 24 + 23 columns: the grid fits 79


def _cell(item, short: dict, note) -> tuple[str, str]:
    """A grid cell's text and tone for one item of the table."""
    from .policy import REFUSAL_PREFIX
    if item.plan is None:
        return f"refused [{note(item.refusal[len(REFUSAL_PREFIX):])}]", "bad"
    spec = item.plan.speculation
    if spec.enabled:
        return f"on {spec.block} ({item.plan.choice.drafter.value})", "good"
    if spec.reason is None:
        return "off", "dim"
    label = short.get(item.plan.reason_code)
    number = note(spec.reason)
    return (f"off: {label} [{number}]" if label else f"off [{number}]"), "warn"


def _choices_report(table, options_json: str) -> None:
    from .policy import DRAFTER_SPELLINGS, REFUSAL_PREFIX
    out = _Report(sys.stdout, 9)
    out.row("install", table.model_dir)
    out.row("options", options_json)
    out.more("(held for every item; each cell is tsffi_speculation_plan with that "
             "row's speculation and that column's speculativeDrafter added)", tone="dim")
    out.row("carries", f"an MTP head: {_yes_no(table.install_has_mtp_head)}; a DFlash2 "
            f"drafter: {_yes_no(table.install_has_dflash)}")
    texts: list[str] = []

    def note(reason: str) -> int:
        if reason not in texts:
            texts.append(reason)
        return texts.index(reason) + 1

    short = _short_names()
    lines = ["", "speculation  (rows) x speculativeDrafter (columns)",
             " " * 8 + "".join(name.ljust(_CELL) for name in DRAFTER_SPELLINGS).rstrip()]
    items = table.choices
    for row in range(0, len(items), 3):
        cells = []
        for item in items[row:row + 3]:
            text, tone = _cell(item, short, note)
            cells.append(out.paint(text, tone) + " " * (_CELL - len(text)))
        speculation = items[row].speculation
        label = str(speculation.n) if speculation.kind == "block" else speculation.kind
        lines.append((label.ljust(8) + "".join(cells)).rstrip())
    out.lines.extend(lines)
    out.lines.append("")
    import textwrap
    for number, text in enumerate(texts, 1):
        out.lines.extend(textwrap.wrap(text, WIDTH, initial_indent=f"[{number}] ".ljust(5),
                                       subsequent_indent=" " * 5, break_on_hyphens=False))
    if any(item.plan is None for item in items):
        out.lines.extend(textwrap.wrap(
            f'refused: the plan call fails (status {SpeculationRefused.status}) with '
            f'"{REFUSAL_PREFIX.strip()} " followed by the numbered text, verbatim', WIDTH,
            break_on_hyphens=False))
    out.flush()


# ---------------------------------------------------------------------------
# make-install

# Bounds that keep a test install small: the layout of the real MoE install
# is 40 layers x 256 experts (about 22 MB); twice that in all is plenty and
# stays under the engine's 64 MiB limit on a layout.
MAX_LAYERS = 1024
MAX_EXPERTS = 1024
MAX_ROUTED_EXPERTS = 2 * 40 * 256


def _bounded_int(low: int, high: int):
    def parse(text: str) -> int:
        value = text.strip()
        if not (value.isascii() and value.isdigit()) or not low <= int(value) <= high:
            raise argparse.ArgumentTypeError(
                f"got {text!r}; accepts an integer in {low}..={high}")
        return int(value)
    return parse


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def probe_dtype(text: str) -> int:
    """--probe-dtype: a dtype tag (0..255: the reader does not validate the
    tag, so an unknown one is a shape worth testing) or a name from
    resident_index.DTYPE_NAMES, in any case and spacing ("INT4 affine",
    "int4", "q4_k", "GGUF Q4_K", "bf16")."""
    from .resident_index import DTYPE_NAMES
    value = text.strip()
    if value.isascii() and value.isdigit():
        if int(value) <= 255:
            return int(value)
    else:
        wanted = _squash(value)
        for tag, name in DTYPE_NAMES.items():
            spellings = {name, name.removeprefix("GGUF "), name.removesuffix(" affine")}
            if wanted and wanted in {_squash(s) for s in spellings}:
                return tag
    names = ", ".join(f"{tag} {name}" for tag, name in DTYPE_NAMES.items() if tag != 14)
    raise argparse.ArgumentTypeError(f"got {text!r}; accepts a dtype tag in 0..=255 or one of "
                                     f"the names {names}")


def _refuse_overwrite(path, force: bool) -> None:
    import os
    if not force and os.path.lexists(os.path.join(path, "model_weights.bin")):
        raise _CliError(f"{os.path.join(path, 'model_weights.bin')} already exists; pass "
                        "--force to overwrite it (check it is not a real install first)")


def _cmd_make_install(args: argparse.Namespace) -> int:
    import os
    from .install_writer import (SAMPLE_SHAPES, record_install, store_install_dir,
                                 write_install, write_samples)

    if (args.store is None) != (args.alias is None):
        given, missing = ("--store", "--alias") if args.alias is None else ("--alias", "--store")
        raise _CliError(f"{given} needs {missing}: --store ROOT --alias NAME writes an install "
                        "into the store at ROOT and records it in ROOT/installed.json")
    if args.alias is not None:
        if args.samples:
            raise _CliError("--samples writes four installs and takes no --store/--alias")
        alias = _text_arg(args.alias, "--alias")
        if not alias or "/" in alias or alias in (".", ".."):
            raise _CliError(f"--alias: got {alias!r}; accepts a non-empty name without '/' "
                            "(the engine looks it up as ROOT/models/text/NAME.gturbo)")
        if args.dir is None:
            args.dir = os.fspath(store_install_dir(args.store, alias))
    elif args.dir is None:
        raise _CliError("make-install needs DIR (or --store ROOT --alias NAME); see "
                        "'turbospark-ffi make-install --help'")

    if args.samples:
        given = [flag for flag, on in (("--mtp", args.mtp), ("--dflash", args.dflash),
                                       ("--experts", args.experts is not None),
                                       ("--probe-dtype", args.probe_dtype is not None),
                                       ("--layers", args.layers is not None)) if on]
        if given:
            raise _CliError(f"--samples writes the four fixed sample shapes and takes no "
                            f"{', '.join(given)}")
        for name in SAMPLE_SHAPES:
            _refuse_overwrite(os.path.join(args.dir, name), args.force)
        try:
            written = write_samples(args.dir)
        except OSError as exc:
            raise _CliError(f"cannot write the samples under {args.dir}: "
                            f"{exc.strerror or exc}") from None
        for path in written:
            _summary(os.fspath(path))
        return EXIT_OK

    experts = args.experts or 0
    layers = 4 if args.layers is None else args.layers
    if experts * layers > MAX_ROUTED_EXPERTS:
        raise _CliError(f"--experts {experts} over --layers {layers} is "
                        f"{_number(experts * layers)} routed experts; accepts at most "
                        f"{_number(MAX_ROUTED_EXPERTS)} in all (twice the real MoE install's "
                        "40 x 256), which keeps the layout a test-sized file")
    _refuse_overwrite(args.dir, args.force)
    try:
        path = write_install(args.dir, mtp=args.mtp, dflash=args.dflash, experts=experts,
                             layers=layers,
                             probe_dtype=4 if args.probe_dtype is None else args.probe_dtype)
    except OSError as exc:
        raise _CliError(f"cannot write an install to {args.dir}: "
                        f"{exc.strerror or exc}") from None
    _summary(os.fspath(path))
    if args.alias is not None:
        try:
            recorded = record_install(args.store, alias, path)
        except (OSError, ValueError) as exc:
            raise _CliError(f"wrote {path}, but cannot record it in the store at {args.store}: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None
        import textwrap
        sys.stdout.write(textwrap.fill(f"recorded {alias!r} in {recorded}", WIDTH,
                                       subsequent_indent="  ", break_on_hyphens=False) + "\n")
        sys.stdout.flush()
    return EXIT_OK


def _summary(path: str) -> None:
    """One line per install written, read back through the library's reader."""
    from .wire import install_info
    info = install_info(path)
    if not info["indexReadable"]:  # pragma: no cover - the writer's own bug
        raise _CliError(f"wrote {path}, but its index does not read back: "
                        f"{info['indexError']}")
    parts = [_plural(info["entryCount"], "entry", "entries")]
    parts += [label for key, label in (("installHasMtpHead", "MTP head"),
                                       ("installHasDflash", "DFlash2 drafter")) if info[key]]
    experts = info["experts"]["expertsPerLayer"]
    parts.append(f"MoE, {experts} experts per layer" if experts else "dense")
    probe = info["probe"]
    if probe is not None and probe["present"]:
        parts.append(f"probe dtype {probe['dtype']} "
                     f"({probe['dtypeName'] or 'not a known dtype tag'})")
    elif probe is None:
        parts.append("no full-attention layer")
    import textwrap
    sys.stdout.write(textwrap.fill(f"wrote {path}: " + ", ".join(parts), WIDTH,
                                   subsequent_indent="  ", break_on_hyphens=False) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------

_MAIN_EPILOG = """
Exit status: 0 done; 2 refused (plan: a named block that cannot be served,
the library's message on stderr, verbatim); 1 anything else (an invalid
argument, an install that cannot be written), as one line on stderr.

Colour only when stdout is a terminal and NO_COLOR is unset.
"""

_INSPECT_DESCRIPTION = """
What the files of the install in DIR say, as the library reads them: whether
the resident index of model_weights.bin is readable (or the exact reason and
the check that tripped), its entry count and size, whether the MTP head (15
tensors) and the DFlash2 drafter (81) are present and complete or partial
(and which tensors are missing), the verify probe's layer and dtype, the
routed experts, and the blocker the engine would give for each drafter.

DIR is a directory or an installed alias, resolved as the engine's open
resolves it: an existing directory wins, then the rows of installed.json
under $TURBOSPARK_HOME (else $HOME/.turbospark), then its default install
paths; the "install" line names the directory read.

Exit status 0 whenever DIR was read, even when its index is not readable
(that is what this command is for); 1 for an invalid DIR.
"""

_PLAN_DESCRIPTION = """
What the library decides for the install in DIR: which drafter to open, the
draft policies to open it with, and whether speculation runs -- with the
note and the reason in plain words. The flags build the same options object
a host passes to tsffi_speculation_plan; --json prints exactly what that call
returns for it. DIR may be an installed alias, resolved as in inspect.

Exit status: 0 planned (speculation on or off); 2 refused: a named block
that cannot be served, with the library's message on stderr, verbatim; 1 an
invalid argument: one line naming the option key, the value and the
accepted set.
"""

_PLAN_EPILOG = """
examples:
  turbospark-ffi plan DIR                       auto: what a default open does
  turbospark-ffi plan DIR --speculation 2       a named block (may be refused)
  turbospark-ffi plan DIR --speculative-drafter dflash --speculation 2
  turbospark-ffi plan DIR --no-engine-blocker --json
"""

_CHOICES_DESCRIPTION = """
What every item of a settings pane's two pickers would do for the install in
DIR: speculation auto, off and each block 1..15 (rows) by drafter auto, mtp
and dflash (columns), each cell the answer tsffi_speculation_plan gives for
the options with that row and column added. A cell is "on B (drafter)",
"off" (asked for), "off: WHY [n]" or "refused [n]" (a named block that cannot
be served); each numbered text is listed once below the grid, verbatim.
--json prints exactly what tsffi_speculation_choices returns.

Exit status: 0 when the table was made (refused items included); 1 an
invalid argument.
"""

_CHOICES_EPILOG = """
examples:
  turbospark-ffi choices DIR                    what each item does by default
  turbospark-ffi choices DIR --temperature 0.7  a sampled run
  turbospark-ffi choices DIR --engine-blocker "the vision tower is active"
  turbospark-ffi choices DIR --json
"""

_MAKE_DESCRIPTION = """
Write a small install into DIR in the engine's real layout: model_weights.bin
(the resident index, 16 KiB-aligned, and a sparse data region),
manifest.json and packed_experts/layout.json. The library and the engine's
own reader accept it. Without flags it is dense, carries neither drafter and
has 4 trunk layers, the first full-attention one at layer 3 with an INT4
affine probe.

With --samples, write the four sample installs that ship with the package
(none, mtp, dflash, both: 64 layers, the real dense 27B's entry counts) as
subdirectories of DIR; regenerate the shipped ones with
'turbospark-ffi make-install --samples turbospark_ffi/samples --force'.

With --store ROOT --alias NAME, the install is written to DIR (by default
ROOT/models/text/NAME.gturbo, the engine's own layout) and recorded under
NAME in ROOT/installed.json, so that `plan NAME` with TURBOSPARK_HOME=ROOT
reads it, as the engine's open would.

An existing model_weights.bin is never overwritten without --force.
"""

_MAKE_EPILOG = """
examples:
  turbospark-ffi make-install /tmp/ts/mtp --mtp
  turbospark-ffi make-install /tmp/ts/moe --mtp --experts 256
  turbospark-ffi make-install /tmp/ts/bf16 --mtp --probe-dtype bf16
  turbospark-ffi make-install --samples /tmp/ts/samples
  turbospark-ffi make-install --store /tmp/ts/store --alias qwen-mtp --mtp
"""


def _add_temperature_and_blocker(command: argparse.ArgumentParser) -> None:
    """The options `plan` and `choices` share: the ones a whole table holds
    fixed while it varies speculation and the drafter."""
    command.add_argument("--temperature", metavar="T",
                         help="the sampling temperature, a number >= 0; absent means the "
                              "open-time decision, which assumes greedy (option key "
                              "temperature)")
    blocker = command.add_mutually_exclusive_group()
    blocker.add_argument("--engine-blocker", metavar="TEXT",
                         help="the engine's own reason not to speculate, as a host that has "
                              "opened the install would pass it (option key engineBlocker)")
    blocker.add_argument("--no-engine-blocker", action="store_true",
                         help="the engine reported no reason (engineBlocker null); without "
                              "either flag the library previews the engine's blocker from "
                              "the files")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="turbospark-ffi", formatter_class=_Formatter, epilog=_MAIN_EPILOG,
        description="The turbospark-runtime speculation policy: inspect installs, preview "
                    "plans, and link the C library.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    config = sub.add_parser("config", help="how a native host compiles and links the library",
                            formatter_class=_Formatter,
                            description="Print compiler and linker flags for the installed "
                                        "library; with no flag, print a pkg-config file.")
    config.add_argument("--cflags", action="store_true", help="compiler flags (-I...)")
    config.add_argument("--libs", action="store_true", help="linker flags (-L... -l... rpath)")
    config.add_argument("--includedir", action="store_true", help="the header's directory")
    config.add_argument("--libdir", action="store_true", help="the library's directory")
    config.add_argument("--samples", action="store_true",
                        help="the directory of the four sample installs shipped with the package")
    config.add_argument("--pkg-config-dir", metavar="DIR",
                        help="write tsffi.pc into DIR and print its path")
    config.set_defaults(run=_cmd_config)

    inspect = sub.add_parser("inspect", help="what an install's files say",
                             formatter_class=_Formatter, description=_INSPECT_DESCRIPTION)
    inspect.add_argument("dir", metavar="DIR",
                         help="the install directory, or an installed alias")
    inspect.add_argument("--json", action="store_true",
                         help="print the C ABI's tsffi_install_info_json object instead")
    inspect.set_defaults(run=_cmd_inspect)

    plan = sub.add_parser("plan", help="what the library decides for an install",
                          formatter_class=_Formatter, description=_PLAN_DESCRIPTION,
                          epilog=_PLAN_EPILOG)
    plan.add_argument("dir", metavar="DIR",
                      help="the install directory, or an installed alias")
    plan.add_argument("--speculation", metavar="auto|off|N",
                      help="whether and how far to draft: auto (the default), off, or a "
                           "block N in 1..15 (option key speculation)")
    plan.add_argument("--speculative-drafter", dest="drafter", metavar="auto|mtp|dflash",
                      help="which drafter: auto (whichever the install carries; the "
                           "default), mtp or dflash (option key speculativeDrafter)")
    _add_temperature_and_blocker(plan)
    plan.add_argument("--json", action="store_true",
                      help="print exactly what tsffi_speculation_plan returns")
    plan.set_defaults(run=_cmd_plan)

    choices = sub.add_parser("choices", help="what every speculation / drafter item would do",
                             formatter_class=_Formatter, description=_CHOICES_DESCRIPTION,
                             epilog=_CHOICES_EPILOG)
    choices.add_argument("dir", metavar="DIR", help="the install directory")
    _add_temperature_and_blocker(choices)
    choices.add_argument("--json", action="store_true",
                         help="print exactly what tsffi_speculation_choices returns")
    # Every item varies these two: the options hold neither.
    choices.set_defaults(run=_cmd_choices, speculation=None, drafter=None)

    make = sub.add_parser("make-install", help="write a small install in the engine's layout",
                          formatter_class=_Formatter, description=_MAKE_DESCRIPTION,
                          epilog=_MAKE_EPILOG)
    make.add_argument("dir", metavar="DIR", nargs="?",
                      help="the install directory (with --samples: where the four go; with "
                           "--store/--alias: default ROOT/models/text/NAME.gturbo)")
    make.add_argument("--mtp", action="store_true", help="add the full MTP head (15 tensors)")
    make.add_argument("--dflash", action="store_true",
                      help="add the full DFlash2 drafter (81 tensors)")
    make.add_argument("--experts", metavar="N", type=_bounded_int(0, MAX_EXPERTS),
                      help="route N experts per layer: a MoE install (default 0: dense)")
    make.add_argument("--probe-dtype", metavar="D", type=probe_dtype,
                      help="the verify probe's dtype, a tag or a name: int4 (the default), "
                           "bf16, fp16, 1-bit, 2-bit, q4_k, ...")
    make.add_argument("--layers", metavar="N", type=_bounded_int(0, MAX_LAYERS),
                      help="trunk layers (default 4); every 4th is full attention, so "
                           "fewer than 4 leaves no layer for the verify to probe")
    make.add_argument("--samples", action="store_true",
                      help="write the four sample installs (none, mtp, dflash, both) "
                           "under DIR")
    make.add_argument("--force", action="store_true",
                      help="overwrite an existing model_weights.bin")
    make.add_argument("--store", metavar="ROOT",
                      help="a model store's root (what $TURBOSPARK_HOME names): with --alias, "
                           "record the install in ROOT/installed.json")
    make.add_argument("--alias", metavar="NAME",
                      help="the alias to record the install under (with --store)")
    make.set_defaults(run=_cmd_make_install)
    bundle = sub.add_parser(
        "bundle", formatter_class=_Formatter,
        help="write a relocatable folder: the library, the Python it needs, header, module "
             "map, pkg-config file",
        description="Write a relocatable folder holding libtsffi, its header, module "
                    "map and pkg-config file, and the Python it embeds (only what it imports), "
                    "for an application to ship. Run it with the Python the library was built "
                    "with.")
    bundle.add_argument("out_dir", metavar="OUT_DIR",
                        help="the folder to write (must not exist, or be empty)")
    bundle.add_argument("--force", action="store_true",
                        help="replace OUT_DIR if it holds an earlier bundle")
    bundle.add_argument("--no-verify", dest="verify", action="store_false",
                        help="skip re-running the import probe against the written bundle")
    bundle.set_defaults(run=_cmd_bundle)
    return parser


def _cmd_bundle(args: argparse.Namespace) -> int:
    from .bundle import BundleError, write_bundle
    try:
        info = write_bundle(args.out_dir, force=args.force, verify=args.verify)
    except (BundleError, OSError) as exc:
        raise _CliError(str(exc)) from None
    print(info.report())
    return EXIT_OK


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null, so that the
    interpreter's own flush at exit does not print a second error."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _error_line(command: str | None, exc: BaseException) -> str:
    """One line for an error: the option grammar's refusals also name the
    flag that set the key they name."""
    prog = "turbospark-ffi" + (f" {command}" if command else "")
    message = " ".join(str(exc).split()) or type(exc).__name__
    for key, flag in _FLAG_FOR_KEY.items():
        if message.startswith(key + ": "):
            message = f"{flag} (option key {key}): {message[len(key) + 2:]}"
            break
    return f"{prog}: {message}\n"


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        try:  # text a terminal cannot encode is escaped, never a crash
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
    parser = build_parser()
    args = parser.parse_args(argv)
    command = getattr(args, "command", None)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except Exception as exc:  # the boundary: one line, never a traceback
        from .errors import TurbosparkError
        if isinstance(exc, (TurbosparkError, _CliError)):
            line = _error_line(command, exc)
        else:
            line = _error_line(command, f"internal error: {type(exc).__name__}: {exc}")
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except OSError:
            pass
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
