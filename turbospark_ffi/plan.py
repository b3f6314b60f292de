"""The seed's flow end to end, for a host: resolve the drafter, derive the
draft policies, take the blocker, resolve speculation. Plus what an install's
index says, for a GUI that must explain an "unknown".
"""

from __future__ import annotations

import os

from ._value import Value
from .options import ABSENT, DEFAULT_OPTIONS, Options
from .policy import (DraftPolicies, DrafterChoice, Speculation, SpeculationPlan,
                     SpeculativeDrafter, choose_drafter, draft_policies, resolve_speculation)

__all__ = ["PlanResult", "speculation_plan", "plan_for_snapshot", "choice_for_snapshot",
           "check_model_dir", "SpeculationChoice", "SpeculationChoices",
           "choices_for_snapshot"]


class PlanResult(Value):
    """`model_dir` is the directory the plan read (the model name resolved),
    None for a plan not made from an install."""

    __slots__ = ("choice", "policies", "speculation", "ignored_keys", "model_dir")

    def __init__(self, choice: DrafterChoice, policies: DraftPolicies,
                 speculation: SpeculationPlan, ignored_keys: tuple[str, ...] = (),
                 model_dir: str | None = None) -> None:
        self._init(choice=choice, policies=policies, speculation=speculation,
                   ignored_keys=ignored_keys, model_dir=model_dir)


def check_model_dir(model_dir: str | bytes | os.PathLike) -> str:
    """`model_names.check_model_dir`: the one check of a model_dir argument."""
    from .model_names import check_model_dir as check
    return check(model_dir)


def choice_for_snapshot(snap, requested: SpeculativeDrafter) -> DrafterChoice:
    """`policy.resolve_drafter` on an install snapshot (memoised on it)."""
    try:  # the memo's hit, without building its fallback (51 calls a table)
        return snap._memo[("choice", requested)]
    except KeyError:
        return snap.memo(("choice", requested), lambda: choose_drafter(requested, snap.index))


def plan_for_snapshot(snap, options: Options = DEFAULT_OPTIONS) -> PlanResult:
    """The whole decision for the install `snap` under `options`."""
    choice = choice_for_snapshot(snap, options.drafter)
    policies = draft_policies(choice, options.speculation)
    # The note outranks the engine's reason: that one would say "carries no
    # multi-token-prediction head" -- true, and the wrong thing to tell
    # someone holding a drafter this port can run.
    if choice.note is not None:
        blocker = choice.note
    elif options.engine_blocker is not ABSENT:
        blocker = options.engine_blocker
    else:
        blocker = snap.blocker_preview(choice.drafter)
    plan = resolve_speculation(options.speculation, choice.drafter, blocker,
                               options.deterministic)
    return PlanResult(choice, policies, plan, options.ignored_keys, snap.model_dir)


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


_TABLE_SPECULATIONS: tuple[Speculation, ...] | None = None


def _choice_item(speculation: Speculation, drafter: SpeculativeDrafter, plan: PlanResult | None,
                 refusal: str | None, selected: bool) -> SpeculationChoice:
    """`SpeculationChoice(...)` without the keyword packing of `_init`: 51
    a table."""
    item = object.__new__(SpeculationChoice)
    setter = object.__setattr__
    setter(item, "speculation", speculation)
    setter(item, "drafter", drafter)
    setter(item, "plan", plan)
    setter(item, "refusal", refusal)
    setter(item, "selected", selected)
    return item


def choices_for_snapshot(snap, options: Options = DEFAULT_OPTIONS) -> SpeculationChoices:
    """`plan_for_snapshot` for every item of the two pickers: speculation
    "auto", "off", 1..15 (outer) by drafter "auto", "mtp", "dflash" (inner),
    the other options held as given. Each item IS that call's answer, so the
    table cannot disagree with a plan. `selected` marks the item equal to
    `options`' own speculation and drafter; a block outside 1..15 there is
    refused, since no item could be selected."""
    from .errors import SpeculationRefused
    from .policy import ALLOWED_SPECULATION_BLOCKS

    if options.speculation.kind == "block" and \
            options.speculation.n not in ALLOWED_SPECULATION_BLOCKS:
        # Options built in Python, not parsed: refused in the parser's words.
        from .options import _block
        _block(options.speculation.n, options.speculation.n)
    global _TABLE_SPECULATIONS
    speculations = _TABLE_SPECULATIONS
    if speculations is None:  # made on the first table, not at import (cold start)
        speculations = _TABLE_SPECULATIONS = (
            Speculation.AUTO, Speculation.OFF, *map(Speculation.block, ALLOWED_SPECULATION_BLOCKS))
    drafters = (SpeculativeDrafter.AUTO, SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH)
    picked_speculation, picked_drafter = options.speculation, options.drafter
    # Each item's options: the host's, every field copied (whatever fields
    # Options grows), with the item's two set. Copied field by field rather
    # than through __init__: half the cost, 51 times a table.
    names, values, setter = Options._field_names, options._fields(), object.__setattr__
    # plan_for_snapshot reads the requested drafter only through its first
    # step, choice_for_snapshot: a drafter whose choice equals an earlier
    # column's (auto resolving to mtp without a note, on most installs) gets
    # that column's answers, a third of the table's decisions. Every item is
    # still checked against the plan call itself (tests/test_choices.py).
    resolved = [choice_for_snapshot(snap, drafter) for drafter in drafters]
    same_as = [next((j for j in range(i) if resolved[j] == resolved[i]), None)
               for i in range(len(drafters))]
    entries = []
    for speculation in speculations:
        picked = speculation == picked_speculation
        row = len(entries)
        for column, drafter in enumerate(drafters):
            earlier = same_as[column]
            if earlier is not None:
                twin = entries[row + earlier]
                entries.append(_choice_item(speculation, drafter, twin.plan, twin.refusal,
                                            picked and drafter is picked_drafter))
                continue
            item_options = object.__new__(Options)
            for name, value in zip(names, values):
                setter(item_options, name, value)
            setter(item_options, "speculation", speculation)
            setter(item_options, "drafter", drafter)
            try:
                plan = plan_for_snapshot(snap, item_options)
                refusal = None
            except SpeculationRefused as exc:
                plan, refusal = None, str(exc)
            entries.append(_choice_item(speculation, drafter, plan, refusal,
                                        picked and drafter is picked_drafter))
    # The install's flags as the drafter choice reads them: the same
    # three-state answer every plan above carries.
    choice = choice_for_snapshot(snap, SpeculativeDrafter.AUTO)
    return SpeculationChoices(snap.model_dir, choice.install_has_mtp_head,
                              choice.install_has_dflash, tuple(entries), options.ignored_keys)


def speculation_plan(model_dir: str | bytes | os.PathLike,
                     options: Options = DEFAULT_OPTIONS) -> PlanResult:
    """The whole decision for `model_dir` (a directory or an installed alias,
    resolved as the engine resolves it: model_names.py) under `options`.

    Raises `SpeculationRefused` (the seed's Err) for a named block that cannot
    be served, `InvalidArgument` for an empty, non-UTF-8 or NUL-holding
    model_dir.
    """
    from .install import snapshot
    from .model_names import resolve_model_dir
    return plan_for_snapshot(snapshot(resolve_model_dir(model_dir)), options)
