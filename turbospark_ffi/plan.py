"""The seed's flow end to end, for a host: resolve the drafter, derive the
draft policies, take the blocker, resolve speculation; the settings pane's
table of every choice, each a plan; and `request`, the one way every entry
point -- the C ABI and the command line alike -- turns a model_dir and an
options text into the install and the options those are computed for.
"""

from __future__ import annotations

import os

from ._value import Value
from .errors import SpeculationRefused
from .install import InstallSnapshot, snapshot
from .model_names import check_model_dir, resolve_model_name
from .options import ABSENT, DEFAULT_OPTIONS, Options, allowed_block, parse_options
from .policy import (ALLOWED_SPECULATION_BLOCKS, REASON_DFLASH_OPT_IN, REASON_ENGINE,
                     REASON_SAMPLED, SAMPLED_BLOCK_DRAFTER_REASON, DraftPolicies,
                     DrafterChoice, Speculation, SpeculationPlan, SpeculativeDrafter,
                     draft_policies, resolve_speculation)

__all__ = ["PlanResult", "Request", "request", "speculation_plan", "plan_for_snapshot",
           "SpeculationChoice", "SpeculationChoices", "choices_for_snapshot"]


class PlanResult(Value):
    """`model_dir` is the directory the plan read (the model name resolved),
    None for a plan not made from an install. `reason_code` is the code of
    the speculation's reason (policy.REASON_* and the codes blockers.py,
    resident_index.py and expert_layout.py own), None when it has none."""

    __slots__ = ("choice", "policies", "speculation", "ignored_keys", "model_dir",
                 "reason_code")

    def __init__(self, choice: DrafterChoice, policies: DraftPolicies,
                 speculation: SpeculationPlan, ignored_keys: tuple[str, ...] = (),
                 model_dir: str | None = None, reason_code: str | None = None) -> None:
        self._init(choice=choice, policies=policies, speculation=speculation,
                   ignored_keys=ignored_keys, model_dir=model_dir, reason_code=reason_code)


def plan_for_snapshot(snap: InstallSnapshot, options: Options = DEFAULT_OPTIONS) -> PlanResult:
    """The whole decision for the install `snap` under `options`."""
    choice = snap.resolve_drafter(options.drafter)
    policies = draft_policies(choice, options.speculation)
    # The note outranks the engine's reason: that one would say "carries no
    # multi-token-prediction head" -- true, and the wrong thing to tell
    # someone holding a drafter this port can run.
    if choice.note is not None:
        blocker, code = choice.note, REASON_DFLASH_OPT_IN
    elif options.engine_blocker is not ABSENT:
        blocker, code = options.engine_blocker, REASON_ENGINE
    else:
        preview = snap.blocker_preview(choice.drafter)
        blocker, code = (None, None) if preview is None else (preview.message, preview.code)
    plan = resolve_speculation(options.speculation, choice.drafter, blocker,
                               options.deterministic)
    reason = None if plan.enabled else plan.reason
    # resolve_speculation gives the blocker it was handed as the reason, or
    # its own sampled reason: told apart by identity, never by the words.
    if reason is None:
        code = None
    elif reason is not blocker:
        code = REASON_SAMPLED if reason is SAMPLED_BLOCK_DRAFTER_REASON else None
    return PlanResult(choice, policies, plan, options.ignored_keys, snap.model_dir, code)


class SpeculationChoice(Value):
    """One item of a settings pane: what `plan_for_snapshot` answers for one
    (speculation, drafter) pair -- its `plan`, or the refusal message when it
    refused (then `plan` is None) -- and whether it is the host's own pick."""

    __slots__ = ("speculation", "drafter", "plan", "refusal", "selected")

    def __init__(self, speculation: Speculation, drafter: SpeculativeDrafter,
                 plan: PlanResult | None, refusal: str | None, selected: bool) -> None:
        self._init(speculation=speculation, drafter=drafter, plan=plan, refusal=refusal,
                   selected=selected)


class SpeculationChoices(Value):
    """Every item of both pickers for one install snapshot. The install flags
    are the drafter choice's (None: the index could not be read)."""

    __slots__ = ("model_dir", "install_has_mtp_head", "install_has_dflash", "choices",
                 "ignored_keys")

    def __init__(self, model_dir: str, install_has_mtp_head: bool | None,
                 install_has_dflash: bool | None, choices: tuple[SpeculationChoice, ...],
                 ignored_keys: tuple[str, ...] = ()) -> None:
        self._init(model_dir=model_dir, install_has_mtp_head=install_has_mtp_head,
                   install_has_dflash=install_has_dflash, choices=choices,
                   ignored_keys=ignored_keys)


# The table's rows and columns, in the order a settings pane lists them.
TABLE_SPECULATIONS = (Speculation.AUTO, Speculation.OFF,
                      *map(Speculation.block, ALLOWED_SPECULATION_BLOCKS))
TABLE_DRAFTERS = (SpeculativeDrafter.AUTO, SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH)


def _item(snap: InstallSnapshot, options: Options) -> tuple[PlanResult | None, str | None]:
    try:
        return plan_for_snapshot(snap, options), None
    except SpeculationRefused as exc:
        return None, str(exc)


def choices_for_snapshot(snap: InstallSnapshot,
                         options: Options = DEFAULT_OPTIONS) -> SpeculationChoices:
    """`plan_for_snapshot` for every item of the two pickers: speculation
    "auto", "off", 1..15 (outer) by drafter "auto", "mtp", "dflash" (inner),
    the other options held as given. Each item IS that call's answer, so the
    table cannot disagree with a plan. `selected` marks the item equal to
    `options`' own speculation and drafter; a block outside 1..15 there is
    refused, since no item could be selected."""
    if options.speculation.kind == "block":
        # Options built in Python, not parsed: refused in the parser's words.
        allowed_block(options.speculation.n)
    picked_speculation, picked_drafter = options.speculation, options.drafter
    # plan_for_snapshot reads the requested drafter only through its first
    # step, the snapshot's resolve_drafter: a drafter whose choice equals an
    # earlier column's (auto resolving to mtp without a note, on most
    # installs) gets that column's answers, a third of the table's decisions.
    # Every item is still checked against the plan call itself
    # (tests/test_choices.py).
    resolved = [snap.resolve_drafter(drafter) for drafter in TABLE_DRAFTERS]
    same_as = [next((j for j in range(i) if resolved[j] == resolved[i]), None)
               for i in range(len(TABLE_DRAFTERS))]
    entries: list[SpeculationChoice] = []
    for speculation in TABLE_SPECULATIONS:
        picked = speculation == picked_speculation
        row: list[tuple[PlanResult | None, str | None]] = []
        for column, drafter in enumerate(TABLE_DRAFTERS):
            earlier = same_as[column]
            answer = row[earlier] if earlier is not None else \
                _item(snap, options.replace(speculation, drafter))
            row.append(answer)
            entries.append(SpeculationChoice(speculation, drafter, answer[0], answer[1],
                                             picked and drafter is picked_drafter))
    # The install's flags as the drafter choice reads them: the same
    # three-state answer every plan above carries.
    choice = resolved[0]
    return SpeculationChoices(snap.model_dir, choice.install_has_mtp_head,
                              choice.install_has_dflash, tuple(entries), options.ignored_keys)


class Request:
    """One call's arguments as every entry point takes them: `model_dir`
    checked (`name`, as given), `options` parsed, the name resolved and the
    install it names read (`snapshot`). Its answers are remembered on the
    snapshot, so they live and die with it."""

    __slots__ = ("name", "options", "snapshot")

    def __init__(self, name: str, options: Options, snap: InstallSnapshot) -> None:
        self.name = name
        self.options = options
        self.snapshot = snap

    @property
    def model_dir(self) -> str:
        """The directory read: the name resolved."""
        return self.snapshot.model_dir

    @property
    def names_the_directory(self) -> bool:
        """Whether the name IS the directory read -- an absolute path that
        was an existing directory, which the resolution answers without the
        environment or the working directory -- so that an answer about it
        may be remembered by the name alone (tsffi_embed.c's warm path checks
        the same at every lookup and store)."""
        return self.snapshot.model_dir == self.name

    def memo(self, what: str, compute, *args):
        """`compute(*args)`, remembered on the snapshot as this request's
        `what` (a refusal too, raised anew)."""
        return self.snapshot.memo((what, self.options), compute, *args)

    def resolve_drafter(self) -> DrafterChoice:
        return self.snapshot.resolve_drafter(self.options.drafter)

    def plan(self) -> PlanResult:
        """`plan_for_snapshot` for this request (raises SpeculationRefused)."""
        return self.memo("plan", plan_for_snapshot, self.snapshot, self.options)

    def choices(self) -> SpeculationChoices:
        """`choices_for_snapshot` for this request."""
        return self.memo("choices", choices_for_snapshot, self.snapshot, self.options)


def request(model_dir: str | bytes | os.PathLike,
            options: Options | str | bytes | None = None) -> Request:
    """The one order of every entry point: `model_dir` checked
    (model_names.check_model_dir), then the options parsed -- so a bad option
    is refused before any install is read, whatever the install or the
    blocker -- then the name resolved as the engine resolves it and the
    install read (a snapshot, cached while its files are unchanged).
    `options`: an `Options`, or the options JSON a host passes (None or
    empty: the defaults)."""
    name = check_model_dir(model_dir)
    if not isinstance(options, Options):
        options = parse_options(options)
    return Request(name, options, snapshot(resolve_model_name(name)))


def speculation_plan(model_dir: str | bytes | os.PathLike,
                     options: Options | str | bytes | None = DEFAULT_OPTIONS) -> PlanResult:
    """The whole decision for `model_dir` (a directory or an installed alias,
    resolved as the engine resolves it: model_names.py) under `options`.

    Raises `SpeculationRefused` (the seed's Err) for a named block that cannot
    be served, `InvalidArgument` for an empty, non-UTF-8 or NUL-holding
    model_dir or an invalid option.
    """
    return request(model_dir, options).plan()
