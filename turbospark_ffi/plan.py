"""The seed's flow end to end, for a host: resolve the drafter, derive the
draft policies, take the blocker, resolve speculation. Plus what an install's
index says, for a GUI that must explain an "unknown".
"""

from __future__ import annotations

import os

from ._value import Value
from .options import ABSENT, DEFAULT_OPTIONS, Options
from .policy import (DraftPolicies, DrafterChoice, SpeculationPlan, SpeculativeDrafter,
                     choose_drafter, draft_policies, resolve_speculation)

__all__ = ["PlanResult", "speculation_plan", "plan_for_snapshot", "choice_for_snapshot",
           "install_info", "install_info_for_snapshot", "check_model_dir"]


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
