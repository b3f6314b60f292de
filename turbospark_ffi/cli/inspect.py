"""`turbospark-ffi inspect DIR`: what an install's files say."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, Formatter, request_for, write_json
from .report import Report, plural

__all__ = ["register", "run"]

DESCRIPTION = """
What the files of the install in DIR say, as the library reads them: the
architecture in manifest.json's arch (which the engine's open reads first,
and refuses when it is missing or invalid), whether the resident index of
model_weights.bin is readable (or the exact reason and the check that
tripped), its entry count and size, whether the MTP head (15 tensors) and
the DFlash2 drafter (81) are present and complete or partial (and which
tensors are missing), the verify probe's layer and dtype, the routed
experts, whether the open gets past the install's files (or its message),
and the blocker the engine would give for each drafter.

DIR is a directory or an installed alias, resolved as the engine's open
resolves it: an existing directory wins, then the rows of installed.json
under $TURBOSPARK_HOME (else $HOME/.turbospark), then its default install
paths; the "install" line names the directory read.

Exit status 0 whenever DIR was read, even when its index is not readable or
the open would refuse it (that is what this command is for); 1 for an
invalid DIR.
"""


def register(sub) -> None:
    inspect = sub.add_parser("inspect", help="what an install's files say",
                             formatter_class=Formatter, description=DESCRIPTION)
    inspect.add_argument("dir", metavar="DIR",
                         help="the install directory, or an installed alias")
    inspect.add_argument("--json", action="store_true",
                         help="print the C ABI's tsffi_install_info_json object instead")
    inspect.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..api import install_info_json
    from ..jsontext import parse_json_document
    req = request_for(args.dir)
    answer = install_info_json(req)
    if args.json:
        return write_json(answer)
    info = parse_json_document(answer.decode("ascii"), "install info")
    out = Report(sys.stdout, 18)
    out.row("install", info["modelDir"], keep=(info["modelDir"],))
    arch_rows(out, info)
    index_rows(out, info)
    drafter_rows(out, "MTP head", info["mtpHead"], "mtp.fc.weight")
    drafter_rows(out, "DFlash2 drafter", info["dflashDrafter"], "dflash.fc.weight")
    probe_rows(out, info)
    experts_row(out, info["experts"])
    open_row(out, info["openError"])
    preview_rows(out, info["blockerPreview"], info["openError"])
    out.flush()
    return EXIT_OK


def arch_rows(out: Report, info: dict) -> None:
    """manifest.json's arch, as the engine's open reads it (first): the facts
    its blockers and drafter checks take, or its refusal."""
    arch = info["arch"]
    if arch is None:
        out.row("arch", info["manifestError"], status="UNUSABLE:", tone="bad")
        return
    experts = ("dense" if arch["numExperts"] == 0
               else f"MoE, {plural(arch['numExperts'], 'routed expert')}")
    vision = ("no vision tower" if arch["visionDepth"] == 0
              else f"a vision tower of depth {arch['visionDepth']}")
    out.row("arch", f"family {arch['family']}, {plural(arch['numLayers'], 'layer')}, "
            f"hidden size {arch['hiddenSize']:,}, vocabulary {arch['vocabSize']:,}; "
            f"{experts}; {vision} (manifest.json)")


def index_rows(out: Report, info: dict) -> None:
    if info["indexReadable"]:
        out.row("index", f"{plural(info['entryCount'], 'entry', 'entries')}, index "
                f"{plural(info['indexBytes'], 'byte')}, resident data "
                f"{plural(info['residentBytes'], 'byte')}", status="readable:", tone="good")
        return
    out.row("index", f"({info['indexCheck']} check): {info['indexError']}",
            status="UNREADABLE", tone="bad")
    out.more('so whether it carries either drafter is "unknown" (null), which is not '
             '"absent": the engine\'s open is the one that refuses a broken install',
             tone="dim")


def drafter_rows(out: Report, label: str, drafter: dict | None, presence: str) -> None:
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


def probe_rows(out: Report, info: dict) -> None:
    if not info["indexReadable"]:
        out.row("probe", "(the index is unreadable)", status="unknown", tone="warn")
        return
    if info["arch"] is None:
        out.row("probe", "(the manifest's arch, which names the layers, is unusable)",
                status="unknown", tone="warn")
        return
    probe = info["probe"]
    if probe is None:
        out.row("probe", "no full-attention layer (the manifest's fullAttentionLayerMask "
                "marks every layer linear) for the verify pass to probe", status="none:",
                tone="warn")
        return
    out.row("probe", f"layer {probe['layer']}, the first full-attention layer (the "
            "manifest's fullAttentionLayerMask)")
    out.more(probe["tensor"])
    if not probe["present"]:
        out.more("is absent from the resident index", tone="warn")
        return
    name = probe["dtypeName"] or "not a known dtype tag"
    covers = ("which the batched verify covers" if probe["verifyCovers"]
              else "which the batched verify does NOT cover")
    out.more(f"dtype {probe['dtype']} ({name}), {covers}",
             tone="good" if probe["verifyCovers"] else "warn")


def experts_row(out: Report, experts: dict) -> None:
    if experts["error"] is not None:
        out.row("experts", experts["error"], status="unusable:", tone="bad")
    elif not experts["layoutPresent"]:
        out.row("experts", "no packed_experts/layout.json, so nothing is routed",
                status="dense:")
    elif experts["expertsPerLayer"] == 0:
        out.row("experts", "packed_experts/layout.json routes no experts", status="dense:")
    else:
        out.row("experts", f"{plural(experts['expertsPerLayer'], 'routed expert')} per "
                f"layer, over {plural(experts['numLayers'], 'layer')}", status="MoE:",
                tone="warn")


def open_row(out: Report, error: str | None) -> None:
    if error is None:
        out.row("open", "the directory, the manifest's arch, the resident index and its "
                "dtypes pass the engine's open", status="passes:", tone="good")
        return
    out.row("open", error, status="REFUSED:", tone="bad")
    out.more("the engine's open fails on this install whatever the options ask: plan and "
             "choices exit 2 with this message", tone="dim")


def preview_rows(out: Report, preview: dict, open_error: str | None) -> None:
    out.row("blocker preview", "what the engine would give as its reason not to speculate, "
            "read from the files (before any open)", tone="dim")
    for key, label in (("mtp", "mtp"), ("dflash", "dflash")):
        reason = preview[key]
        if open_error is not None:
            # null here is "not asked", not "nothing stands in the way".
            out.row(label, "(the open fails first)", status="none asked", tone="dim",
                    indent=2)
        elif reason is None:
            out.row(label, "nothing in the files stands in the way", status="none:",
                    tone="good", indent=2)
        else:
            out.row(label, reason, indent=2)
