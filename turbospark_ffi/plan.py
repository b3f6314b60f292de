"""The engine's open end to end, for a host, in the open's order
(TURBOSPARK_FACTS.md section 10): the options (options.py), the directory,
the manifest's `arch`, the resident index and its dtype gates (the
install's snapshot), then the original module's flow -- resolve the drafter,
derive the draft policies -- the drafter state the open builds
(runner_open.py), the blocker, and speculation resolved as the open resolves
it, greedy decoding assumed; then the turn the host sends (turn.py). Every
failure of the open the files show is a refusal with the open's status and
message (OpenRefused), never a reason. Also the settings pane's table of
every choice, each a plan; and `request`, the one way every entry point --
the C ABI and the command line alike -- turns a model_dir and an options
text into the install and the options those are computed for.
"""

from __future__ import annotations

import os

from ._value import Value
from .blockers import speculation_blocker
from .engine_texts import NOT_A_DIRECTORY
from .errors import OpenFailed, OpenRefused, SpeculationRefused
from .install import InstallSnapshot, snapshot
from .model_names import check_model_dir, resolve_model_name
from .options import ABSENT, DEFAULT_OPTIONS, Options, allowed_block, parse_options
from .policy import (ALLOWED_SPECULATION_BLOCKS, REASON_DFLASH_OPT_IN, REASON_ENGINE,
                     DraftPolicies, DrafterChoice, Speculation, SpeculationDisabled,
                     SpeculationEnabled, SpeculationPlan, SpeculativeDrafter, draft_policies,
                     resolve_speculation)
from .reconcile_memory import Outcome, options_key, reported
from .turn import Turn, turn

__all__ = ["PlanResult", "Request", "request", "speculation_plan", "decide", "plan_for_snapshot",
           "engine_plan",
           "SpeculationChoice", "SpeculationChoices", "table_speculations", "TABLE_DRAFTERS",
           "table", "choices_for_snapshot"]


class PlanResult(Value):
    """`model_dir` is the directory the plan read (the model name resolved),
    None for a plan not made from an install. `reason_code` is the code of
    the speculation's reason (policy.REASON_* and the codes blockers.py,
    resident_index.py and expert_layout.py own), None when it has none.
    `source` is "preview", or "engine" for the engine's own outcome that a
    host reported to tsffi_reconcile after the preview disagreed."""

    __slots__ = ("choice", "policies", "speculation", "ignored_keys", "model_dir",
                 "reason_code", "warnings", "turn", "source")

    def __init__(self, choice: DrafterChoice, policies: DraftPolicies,
                 speculation: SpeculationPlan, ignored_keys: tuple[str, ...] = (),
                 model_dir: str | None = None, reason_code: str | None = None,
                 warnings: tuple[str, ...] = (), turn: Turn | None = None,
                 source: str = "preview") -> None:
        # One by one rather than through Value._init's keywords: half the
        # cost, 34 times a table (as policy.py's values).
        setter = object.__setattr__
        setter(self, "choice", choice)
        setter(self, "policies", policies)
        setter(self, "speculation", speculation)
        setter(self, "ignored_keys", ignored_keys)
        setter(self, "model_dir", model_dir)
        setter(self, "reason_code", reason_code)
        setter(self, "warnings", warnings)
        setter(self, "turn", turn)
        setter(self, "source", source)


def check_opens(snap: InstallSnapshot, name: str | None = None) -> None:
    """Raise the open's refusal of the install itself, whatever the
    speculation and drafter asked (OpenRefused, status 2), in the open's
    order: the directory (`name`: the model name as the host passed it,
    which the engine's message quotes), the manifest's `arch`, the resident
    index, the dtype gates."""
    if not os.path.isdir(snap.model_dir):
        raise OpenRefused(NOT_A_DIRECTORY.format(
            dir=snap.model_dir if name is None else name), stage="directory")
    refusal = snap.open_refusal()
    if refusal is not None:
        raise refusal.again()


def decide(snap: InstallSnapshot, speculation: Speculation, drafter: SpeculativeDrafter,
           options: Options) -> tuple:
    """The open's flow for the install `snap` (one `check_opens` accepts)
    under `options` with `speculation` and `drafter` in place of its own:
    the drafter choice, the draft policies, the speculation plan, its
    reason's code and the turn. Raises OpenRefused where the open fails
    building the drafter, SpeculationRefused for a named block that cannot
    be served. What `plan_for_snapshot` answers, as its parts."""
    return _decide(snap, _column(snap, drafter, options), speculation, options)


def _column(snap: InstallSnapshot, drafter: SpeculativeDrafter, options: Options) -> tuple:
    """The steps of the flow that do not depend on the speculation asked for
    (a choices table takes them once per drafter, not once per item): the
    drafter choice, and the blocker that outranks the engine's own, with its
    code (None, None: the engine's blocker function decides)."""
    choice = snap.resolve_drafter(drafter)
    # The note outranks the engine's reason: that one would say "carries no
    # multi-token-prediction head" -- true, and the wrong thing to tell
    # someone holding a drafter this port can run.
    if choice.note is not None:
        return choice, choice.note, REASON_DFLASH_OPT_IN
    if options.engine_blocker is not ABSENT:
        return choice, options.engine_blocker, REASON_ENGINE
    return choice, None, None


def _built(snap: InstallSnapshot, drafter: SpeculativeDrafter, mode: str) -> bool:
    """Whether the open builds `drafter`'s state under its policy's `mode`
    (raises OpenRefused where the build fails)."""
    return mode != "off" and snap.builds(drafter, mode == "fixed")


def _decide(snap: InstallSnapshot, column: tuple, speculation: Speculation,
            options: Options) -> tuple:
    choice, blocker, code = column
    policies = draft_policies(choice, speculation)
    # The open builds the drafter state its policies name -- at most one
    # through the C ABI -- before it asks any blocker; a build that fails
    # fails the open, under `auto` too.
    built = {SpeculativeDrafter.MTP: _built(snap, SpeculativeDrafter.MTP, policies.mtp.mode),
             SpeculativeDrafter.DFLASH: _built(snap, SpeculativeDrafter.DFLASH,
                                               policies.dflash.mode)}
    if code is None and speculation.kind != "off":
        # Remembered on the snapshot: a choices table asks it of each item,
        # and it depends only on these three (and the files).
        vision = snap.arch.vision_depth > 0 or _sidecar_attaches(options)
        found = snap.memo(("blocker", choice.drafter, built[choice.drafter], vision),
                          speculation_blocker, snap.arch, snap.index, choice.drafter,
                          built[choice.drafter], vision)
        if found is not None:
            blocker, code = found.message, found.code
    # The open decides with greedy decoding assumed (FACTS section 13): the
    # original module's sampled arm is never reached through the C ABI.
    plan = resolve_speculation(speculation, choice.drafter, blocker, True)
    if plan.enabled or plan.reason is None:
        code = None
    return choice, policies, plan, code, _session_turn(snap, plan.block if plan.enabled else None,
                                                       options)


def _session_turn(snap: InstallSnapshot, block: int | None, options: Options) -> Turn:
    """The turn `options` send on a session whose block is `block` (None:
    it does not draft). Remembered on the snapshot (a table asks the same
    turn of up to 34 decisions): only whether the session drafts matters,
    not its block, and the temperature by its repr, since 0.0, -0.0 and 0
    are one key to a dict and the turn carries it as given."""
    t = options.temperature
    return snap.memo(("turn", block is None, None if t is None else repr(t),
                      options.rate_capped, options.power_profile, options.low_power_mode),
                     turn, block, t, options.rate_capped, options.power_profile,
                     options.low_power_mode)


def _sidecar_attaches(options: Options) -> bool:
    """Whether the open attaches a vision sidecar (its attach replaces the
    runner's vision config before the blocker is asked). A path is taken to
    attach and "auto" to find none: what the preview cannot know, a warning
    of options.py says."""
    sidecar = options.vision_sidecar
    return sidecar is not None and sidecar != "auto"


def plan_for_snapshot(snap: InstallSnapshot, options: Options = DEFAULT_OPTIONS,
                      name: str | None = None) -> PlanResult:
    """The whole decision for the install `snap` under `options` (`name`:
    the model name as passed, for the open's refusal of a non-directory)."""
    check_opens(snap, name)
    choice, policies, plan, code, the_turn = decide(snap, options.speculation, options.drafter,
                                                    options)
    return PlanResult(choice, policies, plan, options.ignored_keys, snap.model_dir, code,
                      options.warnings, the_turn)


def engine_plan(snap: InstallSnapshot, options: Options, engine: Outcome,
                warning: str) -> PlanResult:
    """The plan in the engine's words: its reported speculation in place of
    the preview's (the drafter named after the one it speculated with, the
    draft policies derived as the preview derives them), `warning` added; a
    failed open raises OpenFailed with its status and message."""
    if engine.status != 0:
        raise OpenFailed(engine.message, engine.status)
    choice = snap.resolve_drafter(options.drafter)
    if engine.drafter is not None and engine.drafter != choice.drafter.value:
        choice = DrafterChoice(SpeculativeDrafter(engine.drafter), choice.install_has_mtp_head,
                               choice.install_has_dflash, choice.note)
    speculation = SpeculationDisabled(engine.reason) if engine.block is None \
        else SpeculationEnabled(engine.block)
    # The turn follows the engine's session, as it follows the preview's.
    return PlanResult(choice, draft_policies(choice, options.speculation), speculation,
                      options.ignored_keys, snap.model_dir, reason_code=None,
                      warnings=(*options.warnings, warning),
                      turn=_session_turn(snap, engine.block, options), source="engine")


class SpeculationChoice(Value):
    """One item of a settings pane: what `plan_for_snapshot` answers for one
    (speculation, drafter) pair -- its `plan`, or the refusal message when it
    refused (then `plan` is None) -- and whether it is the host's own pick."""

    __slots__ = ("speculation", "drafter", "plan", "refusal", "selected")

    def __init__(self, speculation: Speculation, drafter: SpeculativeDrafter,
                 plan: PlanResult | None, refusal: str | None, selected: bool) -> None:
        setter = object.__setattr__  # as PlanResult's: 51 times a table
        setter(self, "speculation", speculation)
        setter(self, "drafter", drafter)
        setter(self, "plan", plan)
        setter(self, "refusal", refusal)
        setter(self, "selected", selected)


class SpeculationChoices(Value):
    """Every item of both pickers for one install snapshot. The install flags
    are the drafter choice's (None: the index could not be read)."""

    __slots__ = ("model_dir", "install_has_mtp_head", "install_has_dflash", "choices",
                 "ignored_keys", "warnings")

    def __init__(self, model_dir: str, install_has_mtp_head: bool | None,
                 install_has_dflash: bool | None, choices: tuple[SpeculationChoice, ...],
                 ignored_keys: tuple[str, ...] = (), warnings: tuple[str, ...] = ()) -> None:
        self._init(model_dir=model_dir, install_has_mtp_head=install_has_mtp_head,
                   install_has_dflash=install_has_dflash, choices=choices,
                   ignored_keys=ignored_keys, warnings=warnings)


# The table's columns, in the order a settings pane lists them; its rows are
# `table_speculations()`.
TABLE_DRAFTERS = (SpeculativeDrafter.AUTO, SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH)
_speculations: tuple[Speculation, ...] = ()


def table_speculations() -> tuple[Speculation, ...]:
    """The table's rows: speculation "auto", "off", then each block 1..15.
    Made by the first table rather than at import: a plan needs none of
    them, and every import is the library's start-up."""
    global _speculations
    if not _speculations:
        _speculations = (Speculation.AUTO, Speculation.OFF,
                         *map(Speculation.block, ALLOWED_SPECULATION_BLOCKS))
    return _speculations


def table(snap: InstallSnapshot, options: Options = DEFAULT_OPTIONS,
          name: str | None = None) -> list[tuple]:
    """Every item of the two pickers, in order -- speculation "auto", "off",
    1..15 (outer) by drafter "auto", "mtp", "dflash" (inner), the other
    options held as given -- as `(speculation, drafter, parts, refusal,
    selected)`: `parts` what `decide` answers for the pair (None when it
    refused, `refusal` then its message), `selected` whether the pair is
    `options`' own. Each item IS the plan call's answer, so the table cannot
    disagree with a plan: an item whose open would fail building its drafter
    is a refusal. A block outside 1..15 in `options` is refused, since no
    item could be selected; an install the open refuses whatever is asked
    (`check_opens`) is refused whole, as every item would be."""
    if options.speculation.kind == "block":
        # Options built in Python, not parsed: refused in the parser's words.
        allowed_block(options.speculation.n)
    check_opens(snap, name)
    picked_speculation, picked_drafter = options.speculation, options.drafter
    # decide reads the requested drafter only through its first step, the
    # snapshot's resolve_drafter: a drafter whose choice equals an earlier
    # column's (auto resolving to mtp without a note, on most installs) gets
    # that column's answers -- the very same parts -- a third of the table's
    # decisions. Every item is still checked against the plan call itself
    # (tests/test_choices.py).
    columns = [_column(snap, drafter, options) for drafter in TABLE_DRAFTERS]
    same_as = [next(j for j in range(i + 1) if columns[j][0] == columns[i][0])
               for i in range(len(TABLE_DRAFTERS))]
    items: list[tuple] = []
    for speculation in table_speculations():
        picked = speculation == picked_speculation
        row = len(items)
        for column, drafter in enumerate(TABLE_DRAFTERS):
            earlier = same_as[column]
            if earlier != column:
                parts, refusal = items[row + earlier][2:4]
            else:
                try:
                    parts, refusal = _decide(snap, columns[column], speculation, options), None
                except (SpeculationRefused, OpenRefused) as exc:
                    parts, refusal = None, str(exc)
            items.append((speculation, drafter, parts, refusal,
                          picked and drafter is picked_drafter))
    return items


def choices_for_snapshot(snap: InstallSnapshot, options: Options = DEFAULT_OPTIONS,
                         name: str | None = None) -> SpeculationChoices:
    """`table` as values: each item's plan is the `PlanResult` the plan call
    answers (items that share their parts share it)."""
    results: dict[int, PlanResult] = {}
    entries = []
    for speculation, drafter, parts, refusal, selected in table(snap, options, name):
        result = None
        if parts is not None:
            result = results.get(id(parts))
            if result is None:
                choice, policies, plan, code, the_turn = parts
                result = results[id(parts)] = PlanResult(choice, policies, plan,
                                                         options.ignored_keys, snap.model_dir,
                                                         code, options.warnings, the_turn)
        entries.append(SpeculationChoice(speculation, drafter, result, refusal, selected))
    # The install's flags as the drafter choice reads them: the same
    # three-state answer every plan carries.
    choice = snap.resolve_drafter(SpeculativeDrafter.AUTO)
    return SpeculationChoices(snap.model_dir, choice.install_has_mtp_head,
                              choice.install_has_dflash, tuple(entries), options.ignored_keys,
                              options.warnings)


class Request:
    """One call's arguments as every entry point takes them: `model_dir`
    checked (`name`, as given), `options` parsed, the name resolved and the
    install it names read (`snapshot`). Its answers are remembered on the
    snapshot, so they live and die with it. `text` is the options text as
    given (None for an `Options` built in Python), which the engine's
    remembered outcomes are keyed by."""

    __slots__ = ("name", "options", "snapshot", "text")

    def __init__(self, name: str, options: Options, snap: InstallSnapshot,
                 text: bytes | None = None) -> None:
        self.name = name
        self.options = options
        self.snapshot = snap
        self.text = text

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

    def preview(self) -> PlanResult:
        """`plan_for_snapshot` for this request (raises OpenRefused or
        SpeculationRefused, as the open fails)."""
        # plan_for_snapshot checks the open's refusal (never remembered: a
        # refusal is raised, not an answer of the memo).
        return self.memo("plan", plan_for_snapshot, self.snapshot, self.options, self.name)

    def reported(self) -> tuple[Outcome, str] | None:
        """The engine's outcome (and its warning) that tsffi_reconcile
        remembered for this install and options text, else None."""
        if self.text is None:
            return None
        return reported(self.snapshot.model_dir, self.snapshot.key, self.text)

    def plan(self) -> PlanResult:
        """The preview, or after a disagreement the engine's own outcome
        (`engine_plan`). Raises SpeculationRefused, or OpenFailed."""
        engine = self.reported()
        if engine is None:
            return self.preview()
        return engine_plan(self.snapshot, self.options, *engine)

    def choices(self) -> SpeculationChoices:
        """`choices_for_snapshot` for this request."""
        return self.memo("choices", choices_for_snapshot, self.snapshot, self.options, self.name)


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
    text = None
    if not isinstance(options, Options):
        text = options_key(options)
        options = parse_options(options)
    return Request(name, options, snapshot(resolve_model_name(name)), text)


def speculation_plan(model_dir: str | bytes | os.PathLike,
                     options: Options | str | bytes | None = DEFAULT_OPTIONS) -> PlanResult:
    """The whole decision for `model_dir` (a directory or an installed alias,
    resolved as the engine resolves it: model_names.py) under `options`.

    Raises `SpeculationRefused` (the original module's Err) for a named block that cannot
    be served, `InvalidArgument` for an empty, non-UTF-8 or NUL-holding
    model_dir or an invalid option.
    """
    return request(model_dir, options).plan()
