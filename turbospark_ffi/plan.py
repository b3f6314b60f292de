"""Every decision of the library, in the engine's open's order
(TURBOSPARK_FACTS.md section 10): the options (parsed by options.py), the
directory, the manifest's `arch`, the resident index and its dtype gates,
then the original module's flow -- resolve the drafter, derive the draft
policies -- the drafter state the open builds (runner_open.py), the blocker
(blockers.py), and speculation resolved as the open resolves it, greedy
decoding assumed; then the turn the host sends (turn.py). Every failure of
the open the files show is a refusal with the open's status and message
(OpenRefused), never a reason. Also the settings pane's table of every
choice, each a plan; what install info previews; the two functions of the
original module a host calls without an install; and `request`, the one way
every entry point -- the C ABI, the command line, the Python API -- turns a
model_dir and an options text into the install and the options those are
decided for.

Decided afresh at each call, from the install's snapshot (snapshots.py: what
the files say): a warm C host never gets here (tsffi_embed.c remembers the
answers), and a snapshot that remembered decisions would be a second cache
of answers with rules of its own.
"""

from __future__ import annotations

import os

from ._value import Value
from .blockers import speculation_blocker
from .engine_texts import NOT_A_DIRECTORY
from .errors import OpenFailed, OpenRefused, SpeculationRefused
from .model_names import check_model_dir, resolve_model_name
from .options import ABSENT, DEFAULT_OPTIONS, Options, allowed_block, parse_options
from .policy import (ALLOWED_SPECULATION_BLOCKS, DraftPolicies, DrafterChoice, Speculation,
                     SpeculationDisabled, SpeculationEnabled, SpeculationPlan,
                     SpeculativeDrafter, draft_policies, resolve_drafter, resolve_speculation)
from .reasons import REASON_DFLASH_OPT_IN, REASON_ENGINE
from .reconcile_memory import Outcome, options_key, reported
from .runner_open import build_dflash, build_mtp, check_dtype_gates
from .snapshots import InstallSnapshot, snapshot
from .turn import Turn, turn

__all__ = ["PlanResult", "Request", "request", "decide", "check_opens", "open_refusal",
           "engine_plan", "SpeculationChoice", "SpeculationChoices", "table_speculations",
           "TABLE_DRAFTERS", "table", "choices", "install_verdicts", "policies_for_choice",
           "speculation_without_install"]


class PlanResult(Value):
    """`model_dir` is the directory the plan read (the model name resolved),
    None for a plan not made from an install. `reason_code` is the code of
    the speculation's reason (reasons.py), None when it has none.
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


def open_refusal(snap: InstallSnapshot) -> OpenRefused | None:
    """The first failure of the engine's open that the files of `snap` show
    before any drafter is built, in the open's order: the manifest's `arch`,
    then the resident index, then the index-wide dtype gates. None when the
    open gets past them."""
    if snap.arch_error is not None:
        return snap.arch_error
    if snap.index_error is not None:
        return OpenRefused(str(snap.index_error), stage="index")
    try:
        check_dtype_gates(snap.index)
    except OpenRefused as exc:
        return exc.with_traceback(None)
    return None


def check_opens(snap: InstallSnapshot, name: str | None = None) -> None:
    """Raise the open's refusal of the install itself, whatever the
    speculation and drafter asked (OpenRefused, status 2), in the open's
    order: the directory (`name`: the model name as the host passed it,
    which the engine's message quotes), then `open_refusal`'s."""
    if not os.path.isdir(snap.model_dir):
        raise OpenRefused(NOT_A_DIRECTORY.format(
            dir=snap.model_dir if name is None else name), stage="directory")
    refusal = open_refusal(snap)
    if refusal is not None:
        raise refusal.again()  # the snapshot keeps the first: each raise gets its own


class _Verdicts:
    """The open's verdicts on one install under one request's options, each
    made when first asked and kept for the rest of the call: a choices table
    asks the same drafter build, blocker and turn of up to 34 items. Made
    per call and dropped with it (never older than its snapshot)."""

    __slots__ = ("snap", "options", "_seen")

    def __init__(self, snap: InstallSnapshot, options: Options) -> None:
        self.snap = snap
        self.options = options
        self._seen: dict = {}

    def choice(self, requested: SpeculativeDrafter) -> DrafterChoice:
        """The original module's resolve_drafter on this install's index."""
        return resolve_drafter(requested, self.snap.index)

    def built(self, drafter: SpeculativeDrafter, mode: str) -> bool:
        """Whether the open builds `drafter`'s state under its policy's `mode`
        (raises OpenRefused where the build fails, under `auto` too)."""
        if mode == "off":
            return False
        key = ("built", drafter, mode == "fixed")
        outcome = self._seen.get(key)
        if outcome is None:
            build = build_dflash if drafter is SpeculativeDrafter.DFLASH else build_mtp
            try:
                outcome = build(self.snap.index, self.snap.arch, mode == "fixed")
            except OpenRefused as exc:
                outcome = exc.with_traceback(None)
            self._seen[key] = outcome
        if isinstance(outcome, OpenRefused):
            raise outcome.again()
        return outcome

    def blocker(self, drafter: SpeculativeDrafter, built: bool):
        """The engine's blocker function for `drafter` (blockers.py)."""
        arch = self.snap.arch
        # The open's vision sidecar attaches before the blocker is asked; a
        # path is taken to attach and "auto" to find none (what the preview
        # cannot know, a warning of options.py says).
        sidecar = self.options.vision_sidecar
        vision = arch.vision_depth > 0 or (sidecar is not None and sidecar != "auto")
        key = ("blocker", drafter, built)
        if key not in self._seen:
            self._seen[key] = speculation_blocker(arch, self.snap.index, drafter, built, vision)
        return self._seen[key]

    def turn(self, block: int | None) -> Turn:
        """The turn the options send on a session whose block is `block`
        (None: it does not draft): only whether it drafts matters."""
        key = ("turn", block is None)
        found = self._seen.get(key)
        if found is None:
            o = self.options
            found = self._seen[key] = turn(block, o.temperature, o.rate_capped,
                                           o.power_profile, o.low_power_mode)
        return found


def _column(verdicts: _Verdicts, drafter: SpeculativeDrafter) -> tuple:
    """The steps of the flow that do not depend on the speculation asked for
    (a choices table takes them once per drafter, not once per item): the
    drafter choice, and the blocker that outranks the engine's own, with its
    code (None, None: the engine's blocker function decides)."""
    choice = verdicts.choice(drafter)
    # The note outranks the engine's reason: that one would say "carries no
    # multi-token-prediction head" -- true, and the wrong thing to tell
    # someone holding a drafter this port can run.
    if choice.note is not None:
        return choice, choice.note, REASON_DFLASH_OPT_IN
    if verdicts.options.engine_blocker is not ABSENT:
        return choice, verdicts.options.engine_blocker, REASON_ENGINE
    return choice, None, None


def _decide(verdicts: _Verdicts, column: tuple, speculation: Speculation) -> tuple:
    """The open's flow for one (speculation, drafter) pair: the drafter
    choice, the draft policies, the speculation plan, its reason's code and
    the turn. Raises OpenRefused where the open fails building the drafter,
    SpeculationRefused for a named block that cannot be served."""
    choice, blocker, code = column
    policies = draft_policies(choice, speculation)
    # The open builds the drafter state its policies name -- at most one
    # through the C ABI -- before it asks any blocker; a build that fails
    # fails the open.
    built = {SpeculativeDrafter.MTP: verdicts.built(SpeculativeDrafter.MTP, policies.mtp.mode),
             SpeculativeDrafter.DFLASH: verdicts.built(SpeculativeDrafter.DFLASH,
                                                       policies.dflash.mode)}
    if code is None and speculation.kind != "off":
        found = verdicts.blocker(choice.drafter, built[choice.drafter])
        if found is not None:
            blocker, code = found.message, found.code
    # The open decides with greedy decoding assumed (FACTS section 13): the
    # original module's sampled arm is never reached through the C ABI.
    plan = resolve_speculation(speculation, choice.drafter, blocker, True)
    if plan.enabled or plan.reason is None:
        code = None
    return choice, policies, plan, code, verdicts.turn(plan.block if plan.enabled else None)


def decide(snap: InstallSnapshot, options: Options = DEFAULT_OPTIONS,
           name: str | None = None) -> PlanResult:
    """The whole decision for the install `snap` under `options` (`name`:
    the model name as passed, for the open's refusal of a non-directory)."""
    check_opens(snap, name)
    verdicts = _Verdicts(snap, options)
    choice, policies, plan, code, the_turn = _decide(
        verdicts, _column(verdicts, options.drafter), options.speculation)
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
    verdicts = _Verdicts(snap, options)
    choice = verdicts.choice(options.drafter)
    if engine.drafter is not None and engine.drafter != choice.drafter.value:
        choice = DrafterChoice(SpeculativeDrafter(engine.drafter), choice.install_has_mtp_head,
                               choice.install_has_dflash, choice.note)
    speculation = SpeculationDisabled(engine.reason) if engine.block is None \
        else SpeculationEnabled(engine.block)
    # The turn follows the engine's session, as it follows the preview's.
    return PlanResult(choice, draft_policies(choice, options.speculation), speculation,
                      options.ignored_keys, snap.model_dir, reason_code=None,
                      warnings=(*options.warnings, warning), turn=verdicts.turn(engine.block),
                      source="engine")


class SpeculationChoice(Value):
    """One item of a settings pane: what `decide` answers for one
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
    selected)`: `parts` the decision's parts for the pair (choice, policies,
    speculation plan, reason code, turn; None when it refused, `refusal` then
    its message), `selected` whether the pair is `options`' own. Each item
    IS the plan call's answer, so the table cannot disagree with a plan: an
    item whose open would fail building its drafter is a refusal. A block
    outside 1..15 in `options` is refused, since no item could be selected;
    an install the open refuses whatever is asked (`check_opens`) is refused
    whole, as every item would be."""
    if options.speculation.kind == "block":
        # Options built in Python, not parsed: refused in the parser's words.
        allowed_block(options.speculation.n)
    check_opens(snap, name)
    picked_speculation, picked_drafter = options.speculation, options.drafter
    verdicts = _Verdicts(snap, options)
    # _decide reads the requested drafter only through its first step, the
    # drafter choice: a drafter whose choice equals an earlier column's (auto
    # resolving to mtp without a note, on most installs) gets that column's
    # answers -- the very same parts -- a third of the table's decisions.
    # Every item is still checked against the plan call itself
    # (tests/test_choices.py).
    columns = [_column(verdicts, drafter) for drafter in TABLE_DRAFTERS]
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
                    parts, refusal = _decide(verdicts, columns[column], speculation), None
                except (SpeculationRefused, OpenRefused) as exc:
                    parts, refusal = None, str(exc)
            items.append((speculation, drafter, parts, refusal,
                          picked and drafter is picked_drafter))
    return items


def choices(snap: InstallSnapshot, options: Options = DEFAULT_OPTIONS,
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
    choice = resolve_drafter(SpeculativeDrafter.AUTO, snap.index)
    return SpeculationChoices(snap.model_dir, choice.install_has_mtp_head,
                              choice.install_has_dflash, tuple(entries), options.ignored_keys,
                              options.warnings)


def install_verdicts(snap: InstallSnapshot,
                     name: str | None = None) -> tuple[str | None, dict[str, str | None]]:
    """What install info previews of the open: its first refusal of the
    install as a plan of `name` would meet it (its message, or None), and
    each drafter's blocker as the open would ask it at speculation "auto"
    with no options (its message, None when nothing stands in the way; the
    build's refusal where the drafter cannot be built; all None when the
    install itself is refused)."""
    try:
        check_opens(snap, name)
    except OpenRefused as exc:
        return str(exc), {"mtp": None, "dflash": None}
    verdicts = _Verdicts(snap, DEFAULT_OPTIONS)
    previews: dict[str, str | None] = {}
    for drafter in (SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH):
        try:
            found = verdicts.blocker(drafter, verdicts.built(drafter, "auto"))
        except OpenRefused as exc:
            previews[drafter.value] = str(exc)
            continue
        previews[drafter.value] = None if found is None else found.message
    return None, previews


def policies_for_choice(choice: DrafterChoice, options: Options) -> DraftPolicies:
    """The original module's draft_policies for a drafter choice the host
    hands back (tsffi_draft_policies) at the options' speculation."""
    return draft_policies(choice, options.speculation)


def speculation_without_install(options: Options) -> tuple[SpeculationPlan, SpeculativeDrafter]:
    """The original module's resolve_speculation as the options ask it, with
    no install (tsffi_resolve_speculation): the plan, and the drafter it is
    reported as drafted by. The host's "tsffi" object gives the blocker
    and whether decoding is greedy."""
    # An absent or auto drafter takes the original module's non-DFlash2 arms,
    # which are the MTP drafter's, and is reported as such.
    drafter = SpeculativeDrafter.MTP if options.drafter is SpeculativeDrafter.AUTO \
        else options.drafter
    blocker = None if options.engine_blocker is ABSENT else options.engine_blocker
    return resolve_speculation(options.speculation, drafter, blocker,
                               options.deterministic), drafter


class Request:
    """One call's arguments as every entry point takes them: `model_dir`
    checked (`name`, as given), `options` parsed, the name resolved and the
    install it names read (`snapshot`). `text` is the options text as given
    (None for an `Options` built in Python), which the engine's remembered
    outcomes are keyed by."""

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

    def drafter_choice(self, auto: bool = False) -> DrafterChoice:
        """The original module's resolve_drafter for this request's drafter
        (`auto`: for "auto", whose flags are the install's)."""
        return resolve_drafter(SpeculativeDrafter.AUTO if auto else self.options.drafter,
                               self.snapshot.index)

    def preview(self) -> PlanResult:
        """`decide` for this request (raises OpenRefused or
        SpeculationRefused, as the open fails)."""
        return decide(self.snapshot, self.options, self.name)

    def plan(self) -> PlanResult:
        """The preview, or after a disagreement the engine's own outcome that
        a host reported to tsffi_reconcile (`engine_plan`). Raises
        SpeculationRefused, OpenRefused, or OpenFailed."""
        engine = None if self.text is None else reported(self.snapshot.model_dir,
                                                         self.snapshot.key, self.text)
        if engine is None:
            return self.preview()
        return engine_plan(self.snapshot, self.options, *engine)

    def choices(self) -> SpeculationChoices:
        """`choices` for this request."""
        return choices(self.snapshot, self.options, self.name)

    def install_verdicts(self) -> tuple[str | None, dict[str, str | None]]:
        """`install_verdicts` for this request."""
        return install_verdicts(self.snapshot, self.name)


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
