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
           "install_info", "install_info_for_snapshot", "check_model_dir",
           "SpeculationChoice", "SpeculationChoices", "speculation_choices",
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


def speculation_choices(model_dir: str | bytes | os.PathLike,
                        options: Options | str | bytes | None = None) -> dict:
    """Every item of the speculation and drafter pickers for `model_dir`, as
    the `tsffi_speculation_choices` object (`options`: an `Options`, or the
    options JSON a host passes). Raises what the plan call raises for bad
    options, and `InvalidArgument` for a block outside 1..15."""
    from .install import snapshot
    from .options import parse_options
    from .wire import choices_to_dict
    from .model_names import resolve_model_dir
    snap = snapshot(resolve_model_dir(model_dir))
    if not isinstance(options, Options):
        options = parse_options(options)
    return choices_to_dict(choices_for_snapshot(snap, options))


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


def install_info(model_dir: str | bytes | os.PathLike) -> dict:
    """What the install's files say, as the `tsffi_install_info_json` object
    (`model_dir` resolved as in `speculation_plan`)."""
    from .install import snapshot
    from .model_names import resolve_model_dir
    return install_info_for_snapshot(snapshot(resolve_model_dir(model_dir)))


def install_info_for_snapshot(snap) -> dict:
    """`install_info` of an install snapshot."""
    from .blockers import VERIFY_PROBE_DTYPES, first_full_attention_layer, probe_tensor_name
    from .resident_index import (DFLASH_TENSORS, DTYPE_NAMES, MTP_HEAD_TENSORS,
                                 install_has_dflash, install_has_mtp_head)

    index = snap.index
    info: dict = {"modelDir": snap.model_dir, "indexReadable": index is not None,
                  "indexError": None if index is not None else str(snap.index_error),
                  "indexCheck": None if index is not None else snap.index_error.check}
    if index is None:
        info.update(entryCount=None, indexBytes=None, residentBytes=None,
                    installHasMtpHead=None, installHasDflash=None, mtpHead=None,
                    dflashDrafter=None, probe=None)
    else:
        def drafter_info(expected: tuple[str, ...], present: bool) -> dict:
            have = [name for name in expected if name in index]
            return {"present": present, "tensors": len(have),
                    "expected": len(expected), "complete": len(have) == len(expected),
                    # Listed only for a partial drafter: for an absent one
                    # "all 81" says nothing `present: false` does not.
                    "missing": [name for name in expected if name not in index]
                    if have else []}
        layer = first_full_attention_layer(index)
        probe = None
        if layer is not None:
            name = probe_tensor_name(layer)
            dtype = index.dtype_of(name)
            probe = {"layer": layer, "tensor": name, "present": dtype is not None,
                     "dtype": dtype, "dtypeName": DTYPE_NAMES.get(dtype),
                     "verifyCovers": dtype in VERIFY_PROBE_DTYPES}
        has_mtp, has_dflash = install_has_mtp_head(index), install_has_dflash(index)
        info.update(entryCount=index.entry_count, indexBytes=index.index_size,
                    residentBytes=index.resident_size,
                    installHasMtpHead=has_mtp, installHasDflash=has_dflash,
                    mtpHead=drafter_info(MTP_HEAD_TENSORS, has_mtp),
                    dflashDrafter=drafter_info(DFLASH_TENSORS, has_dflash),
                    probe=probe)
    layout = snap.layout
    info["experts"] = {
        # null when the layout could not be read: present or not is unknown.
        "layoutPresent": layout.present if layout is not None else None,
        "expertsPerLayer": layout.experts_per_layer if layout is not None else None,
        "numLayers": layout.num_layers if layout is not None else None,
        "error": None if snap.layout_error is None else str(snap.layout_error)}
    info["blockerPreview"] = {"mtp": snap.blocker_preview(SpeculativeDrafter.MTP),
                              "dflash": snap.blocker_preview(SpeculativeDrafter.DFLASH)}
    return info
