"""The C ABI's JSON shapes: every object a function of the header returns
is built here from the package's values (the decisions, the plan, the
choices table, install info, build info, the store, a reconcile), and a
drafter choice a host hands back is read here. Shapes only: what to answer
is plan.py's, which call answers it api.py's. Above the policy: it knows
every value, and nothing below it knows a shape. The text itself is
jsontext's.
"""

from __future__ import annotations

from .jsontext import encode_string, parse_json_document
from .policy import SpeculativeDrafter

# For the annotations only (never imported at run time: `typing` would cost
# start-up, and a module-level import of options would run on every call).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .options import Options
    from .plan import PlanResult
    from .policy import DraftPolicies, DrafterChoice, SpeculationPlan
    from .reconcile_memory import Outcome, Reconciliation
    from .snapshots import InstallSnapshot
    from .store_listing import StoreListing

__all__ = ["choice_text", "policies_text", "speculation_text", "plan_text", "choices_text",
           "plan_to_dict", "policies_to_dict", "choice_from_json",
           "install_info_to_dict", "build_info_to_dict", "store_listing_to_dict",
           "outcome_text", "reconcile_text", "reconcile_to_dict"]


# Every shape a decision takes is written as text from a template, and is
# defined only there: its dict (for the Python API) is that text parsed. A
# choices table holds 51 plans; encoding them as 51 nested dicts, key by key,
# cost more than all of the table's decisions (profiled), and a template
# filled with the few distinct parts' texts costs a fraction of it.
_CHOICE = '{"drafter":%s,"installHasMtpHead":%s,"installHasDflash":%s,"note":%s}'
# What tsffi_resolve_drafter returns: the choice and the directory read (a
# plan nests the choice without it: the plan names it once).
_RESOLVED_CHOICE = _CHOICE[:-1] + ',"modelDir":%s}'
_POLICY = '{"mode":%s,"block":%s}'
_POLICIES = '{"mtp":%s,"dflash":%s}'
# `block` null is the "is it on" test; `drafter` is non-null exactly when
# `block` is; `reason` is null when on, and when the caller asked for off.
_SPECULATION = '{"block":%s,"drafter":%s,"reason":%s}'
# The turn: whether a turn at the host's temperature speculates (turn.py).
_TURN = '{"temperature":%s,"speculates":%s,"reason":%s}'
# `source`: "preview", or "engine" when a host reported the engine's own
# outcome for this install and options to tsffi_reconcile after a
# disagreement (reconcile_memory.py); a choices item is always the preview.
_PLAN_CORE = '{"drafter":%s,"draftPolicies":%s,"speculation":%s,"turn":%s,"source":%s'
# A plan: its decision, then what the options text said beside it (the keys
# the open ignores, the hints about them) and the directory read.
_PLAN = _PLAN_CORE + ',"ignoredKeys":%s,"warnings":%s,"modelDir":%s}'
# A choices item's plan: the decision only. The table says ignoredKeys,
# warnings and modelDir once for all 51 items, so its size is bounded by its
# input's (1 MiB of ignored keys once, not 51 times).
_ITEM_PLAN = _PLAN_CORE + '}'
_ITEM = ('{"speculation":%s,"speculativeDrafter":%s,"status":%d,"plan":%s,"error":%s,'
         '"selected":%s}')
_TABLE = ('{"modelDir":%s,"install":{"installHasMtpHead":%s,"installHasDflash":%s},'
          '"choices":[%s],"ignoredKeys":%s,"warnings":%s}')
_FLAG = {True: "true", False: "false", None: "null"}
_SOURCES = {"preview": '"preview"', "engine": '"engine"'}


def _string(text: str | None) -> str:
    return "null" if text is None else encode_string(text)


def _int(n: int | None) -> str:
    return "null" if n is None else "%d" % n


def choice_text(choice: DrafterChoice, model_dir: str | None = None) -> str:
    """A drafter choice; with `model_dir`, what tsffi_resolve_drafter returns."""
    fields = (encode_string(choice.drafter.value), _FLAG[choice.install_has_mtp_head],
              _FLAG[choice.install_has_dflash], _string(choice.note))
    return _CHOICE % fields if model_dir is None else _RESOLVED_CHOICE % (*fields,
                                                                          _string(model_dir))


def policies_text(policies: DraftPolicies) -> str:
    """What tsffi_draft_policies returns."""
    mtp, dflash = policies.mtp, policies.dflash
    return _POLICIES % (_POLICY % (encode_string(mtp.mode), _int(mtp.block)),
                        _POLICY % (encode_string(dflash.mode), _int(dflash.block)))


def speculation_text(plan: SpeculationPlan, drafter: SpeculativeDrafter) -> str:
    """What tsffi_resolve_speculation returns for `plan`, drafted by `drafter`."""
    if plan.enabled:
        return _SPECULATION % ("%d" % plan.block, encode_string(drafter.value), "null")
    return _SPECULATION % ("null", "null", _string(plan.reason))


def turn_text(turn) -> str:
    """A plan's "turn" object."""
    from .turn import temperature_text
    return _TURN % (temperature_text(turn.temperature), _FLAG[turn.speculates],
                    _string(turn.reason))


def _plan_text(texts: dict, choice: DrafterChoice, policies: DraftPolicies,
               speculation: SpeculationPlan, the_turn, tail: tuple[str, ...],
               source: str = "preview") -> str:
    """A plan of these parts. `texts` remembers each part's text for one
    call: within one table the choices are the table's own three, and equal
    policies and speculations recur across rows."""
    choice_json = texts.get(id(choice))
    if choice_json is None:
        choice_json = texts[id(choice)] = choice_text(choice)
    key = (policies.mtp.mode, policies.mtp.block, policies.dflash.mode, policies.dflash.block)
    policies_json = texts.get(key)
    if policies_json is None:
        policies_json = texts[key] = policies_text(policies)
    key = (speculation.enabled, speculation.block if speculation.enabled else speculation.reason,
           choice.drafter)
    speculation_json = texts.get(key)
    if speculation_json is None:
        speculation_json = texts[key] = speculation_text(speculation, choice.drafter)
    key = (the_turn.temperature, the_turn.speculates, the_turn.reason)
    turn_json = texts.get(key)
    if turn_json is None:
        turn_json = texts[key] = turn_text(the_turn)
    return (_PLAN if tail else _ITEM_PLAN) % (choice_json, policies_json, speculation_json,
                                              turn_json, _SOURCES[source], *tail)


def _strings(texts: tuple[str, ...]) -> str:
    return "[%s]" % ",".join(map(encode_string, texts))


def _tail(ignored_keys: tuple[str, ...], warnings: tuple[str, ...],
          model_dir: str | None) -> tuple[str, str, str]:
    return _strings(ignored_keys), _strings(warnings), _string(model_dir)


def plan_text(result: PlanResult) -> str:
    """What tsffi_speculation_plan returns for the plan `result`."""
    return _plan_text({}, result.choice, result.policies, result.speculation, result.turn,
                      _tail(result.ignored_keys, result.warnings, result.model_dir),
                      result.source)


def plan_to_dict(result: PlanResult) -> dict:
    """`plan_text` as a dict."""
    return parse_json_document(plan_text(result), "plan")


def policies_to_dict(policies: DraftPolicies) -> dict:
    """`policies_text` as a dict."""
    return parse_json_document(policies_text(policies), "draft policies")


def choices_text(items: list[tuple], model_dir: str, install: DrafterChoice,
                 options: Options) -> str:
    """What tsffi_speculation_choices returns for plan.table's `items` of
    the install at `model_dir` (`install`: its drafter choice at "auto", for
    the install's flags). Each item's `plan` is the plan call's text for that
    item without the three members the table holds once (ignoredKeys,
    warnings, modelDir), and `error` the refusal's message, so an item reads
    as the plan call for it would."""
    from .errors import STATUS_OK, SpeculationRefused
    # Every item's refusal is the open's (status 2: a drafter build, a named
    # block): one status.
    drafters = {drafter: encode_string(drafter.value) for drafter in
                (SpeculativeDrafter.AUTO, SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH)}
    texts: dict = {}  # each part's text, each answer a column shares, each refusal
    rendered = []
    row, value = None, ""
    for speculation, drafter, parts, refusal, selected in items:
        if speculation is not row:
            row = speculation
            value = "%d" % row.n if row.kind == "block" else encode_string(row.kind)
        if parts is None:
            plan, status = "null", SpeculationRefused.status
            error = texts.get(refusal)
            if error is None:
                error = texts[refusal] = encode_string(refusal)
        else:
            plan, status, error = texts.get(id(parts)), STATUS_OK, "null"
            if plan is None:
                choice, policies, speculation_plan, _code, the_turn = parts
                plan = texts[id(parts)] = _plan_text(texts, choice, policies, speculation_plan,
                                                     the_turn, ())
        rendered.append(_ITEM % (value, drafters[drafter], status, plan, error,
                                 _FLAG[selected]))
    ignored, warnings, model_dir_json = _tail(options.ignored_keys, options.warnings, model_dir)
    return _TABLE % (model_dir_json, _FLAG[install.install_has_mtp_head],
                     _FLAG[install.install_has_dflash], ",".join(rendered), ignored, warnings)


_CHOICE_KEYS = ("drafter", "installHasMtpHead", "installHasDflash", "note")
# Also in what tsffi_resolve_drafter returns: which directory it read. Not
# part of the decision, so optional here and not checked beyond its type.
_CHOICE_OPTIONAL_KEYS = ("modelDir",)


def choice_from_json(text: str, what: str = "choice_json"):
    """A `DrafterChoice` from the JSON `tsffi_resolve_drafter` returned. Strict:
    exactly the four keys (and optionally "modelDir"), each with its own type,
    since a host that edits this object by hand would otherwise get a plan
    for an install it made up."""
    from .errors import InvalidArgument
    from .jsontext import parse_json_object, show_value
    from .policy import DRAFTER_SPELLINGS, DrafterChoice

    fields: dict = {}
    for key, value in parse_json_object(text, what):
        if key not in _CHOICE_KEYS and key not in _CHOICE_OPTIONAL_KEYS:
            raise InvalidArgument(f"{what}: unknown key {show_value(key)}; accepts exactly the keys "
                                  f"{', '.join(_CHOICE_KEYS)} and optionally modelDir (what "
                                  "tsffi_resolve_drafter returns)")
        if key in fields:
            raise InvalidArgument(f"{what}: key {show_value(key)} given more than once")
        fields[key] = value
    missing = [k for k in _CHOICE_KEYS if k not in fields]
    if missing:
        raise InvalidArgument(f"{what}: missing key {', '.join(missing)}; accepts exactly the "
                              f"keys {', '.join(_CHOICE_KEYS)} (what tsffi_resolve_drafter returns)")
    drafter = fields["drafter"]
    if not isinstance(drafter, str) or drafter not in DRAFTER_SPELLINGS:
        raise InvalidArgument(f"{what}: drafter: got {show_value(drafter)}; accepts \"auto\", "
                              "\"mtp\" or \"dflash\"")
    for key in ("installHasMtpHead", "installHasDflash"):
        if fields[key] is not None and type(fields[key]) is not bool:
            raise InvalidArgument(f"{what}: {key}: got {show_value(fields[key])}; accepts true, "
                                  "false or null (unknown)")
    if "modelDir" in fields and not isinstance(fields["modelDir"], str):
        raise InvalidArgument(f"{what}: modelDir: got {show_value(fields['modelDir'])}; "
                              "accepts a string (the directory tsffi_resolve_drafter read)")
    note = fields["note"]
    if note is not None and not isinstance(note, str):
        raise InvalidArgument(f"{what}: note: got {show_value(note)}; accepts a string or null")
    return DrafterChoice(SpeculativeDrafter(drafter), fields["installHasMtpHead"],
                         fields["installHasDflash"], note)


def build_info_to_dict(abi_version: int, library: str, owns_interpreter: bool) -> dict:
    """The `tsffi_build_info_json` object: this package and the interpreter
    running it, with the library's ABI version, its own path, whether it
    started that interpreter, and the engine whose policy and words it
    follows."""
    import os
    import sys
    from . import __version__
    from .engine_revision import mirrored_revision
    return {"abiVersion": abi_version, "version": __version__, **mirrored_revision(),
            "python": "%d.%d.%d" % sys.version_info[:3], "library": library,
            "package": os.path.dirname(os.path.abspath(__file__)),
            "pythonHome": sys.base_prefix, "pythonExecutable": sys.executable or None,
            "sysPath": list(sys.path), "ownsInterpreter": owns_interpreter}


def install_info_to_dict(snap: InstallSnapshot, open_error: str | None,
                         blocker_preview: dict[str, str | None]) -> dict:
    """The `tsffi_install_info_json` object of an install snapshot: what the
    index and the manifest's `arch` say, and what plan.install_verdicts
    previews of the open (`openError`: its message, or null; each drafter's
    blocker at speculation "auto")."""
    from .blockers import probe_tensor_name, verify_covers
    from .resident_index import (DFLASH_TENSORS, DTYPE_NAMES, MTP_HEAD_TENSORS,
                                 install_has_dflash, install_has_mtp_head)

    index, arch = snap.index, snap.arch
    info: dict = {"modelDir": snap.model_dir, "indexReadable": index is not None,
                  "indexError": None if index is not None else str(snap.index_error),
                  "indexCheck": None if index is not None else snap.index_error.check,
                  "arch": None if arch is None else arch.to_dict(),
                  "manifestError": None if snap.arch_error is None else str(snap.arch_error)}
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
        layer = None if arch is None else arch.first_full_attention_layer()
        probe = None
        if layer is not None:
            name = probe_tensor_name(layer)
            dtype = index.dtype_of(name)
            probe = {"layer": layer, "tensor": name, "present": dtype is not None,
                     "dtype": dtype, "dtypeName": DTYPE_NAMES.get(dtype),
                     "verifyCovers": verify_covers(dtype)}
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
    info["openError"] = open_error
    info["blockerPreview"] = blocker_preview
    return info


def store_listing_to_dict(listing: StoreListing) -> dict:
    """The `tsffi_store_json` object."""
    return {"root": listing.root, "storeFile": listing.store_file, "storeRead": listing.read,
            "reason": listing.reason, "aliases": [
                {"alias": a.alias, "path": a.path, "modelDir": a.model_dir,
                 "installHasMtpHead": a.has_mtp_head, "installHasDflash": a.has_dflash}
                for a in listing.aliases]}


# tsffi_reconcile's answer. Both sides have one shape, the open's outcome:
# its session's speculation (the engine's sessionInfo shape), or its refusal.
_OPENED = '{"status":0,"speculation":%s}'
_FAILED = '{"status":%d,"message":%s}'
_RECONCILE = '{"agrees":%s,"preview":%s,"engine":%s,"differences":%s,"revision":%s}'


def outcome_text(outcome: Outcome) -> str:
    """One side of a reconcile."""
    if outcome.status != 0:
        return _FAILED % (outcome.status, _string(outcome.message))
    return _OPENED % (_SPECULATION % (_int(outcome.block), _string(outcome.drafter),
                                      _string(outcome.reason)))


def reconcile_text(result: Reconciliation) -> str:
    """What `tsffi_reconcile` returns."""
    from .jsontext import dumps
    return _RECONCILE % (_FLAG[result.agrees], outcome_text(result.preview),
                         outcome_text(result.engine), _strings(result.differences),
                         dumps(dict(result.revision)))


def reconcile_to_dict(result: Reconciliation) -> dict:
    """`reconcile_text` as a dict."""
    return parse_json_document(reconcile_text(result), "reconcile")
