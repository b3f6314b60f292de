"""The library's calls, as every entry point makes them: the Python API (the
functions a Python program, the command line and the tests call) and the
answers of the C ABI's functions as the very bytes C returns (`*_json`).
_abi.py only converts C's arguments into these calls and their bytes back;
`turbospark-ffi ... --json` prints the same bytes, so the three cannot
answer differently.

Each call that takes a model makes one `plan.request` (check, parse,
resolve, snapshot), asks plan.py for the decision and wire.py for its shape.
"""

from __future__ import annotations

import os

from .plan import PlanResult, Request, request

__all__ = ["request", "speculation_plan", "speculation_choices", "install_info",
           "reconcile_dict", "plan_json", "choices_json", "drafter_json", "install_info_json",
           "policies_json", "speculation_json", "store_json", "reconcile_json",
           "build_info_json"]


# The Python API: values and dicts, the same objects the C ABI returns.

def speculation_plan(model_dir: str | bytes | os.PathLike,
                     options=None) -> PlanResult:
    """The whole decision for `model_dir` (a directory or an installed alias,
    resolved as the engine resolves it: model_names.py) under `options` (an
    `Options`, or the options JSON a host passes; None: the defaults).

    Raises `SpeculationRefused` (the original module's Err) for a named block
    that cannot be served, `OpenRefused` where the engine's open fails on the
    install, `InvalidArgument` for an empty, non-UTF-8 or NUL-holding
    model_dir or an invalid option.
    """
    return request(model_dir, options).plan()


def speculation_choices(model_dir: str | bytes | os.PathLike, options=None) -> dict:
    """Every item of the speculation and drafter pickers for `model_dir`, as
    the `tsffi_speculation_choices` object. Raises what the plan call raises
    for bad options, and `OptionRefused` for a block outside 1..15."""
    from .jsontext import parse_json_document
    return parse_json_document(choices_json(request(model_dir, options)).decode("ascii"),
                               "choices")


def install_info(model_dir: str | bytes | os.PathLike) -> dict:
    """What the install's files say, as the `tsffi_install_info_json` object
    (`model_dir` resolved as in `speculation_plan`)."""
    from .wire import install_info_to_dict
    req = request(model_dir)
    return install_info_to_dict(req.snapshot, *req.install_verdicts())


def reconcile_dict(model_dir: str | bytes | os.PathLike, options: str | bytes | None,
                   engine_json: str | bytes) -> dict:
    """`reconcile_json`'s object (reconcile.py says what it compares)."""
    from .reconcile import reconcile
    from .wire import reconcile_to_dict
    return reconcile_to_dict(reconcile(model_dir, options, engine_json))


# The C ABI's answers, as the bytes it returns (ASCII JSON, as every answer).

def plan_json(req: Request) -> bytes:
    """What `tsffi_speculation_plan` returns for `req` (raises
    SpeculationRefused or OpenRefused, as the open refuses; OpenFailed for an
    open the engine reported failing)."""
    from .wire import plan_text
    return plan_text(req.plan()).encode("ascii")


def choices_json(req: Request) -> bytes:
    """What `tsffi_speculation_choices` returns for `req`."""
    from .plan import table
    from .wire import choices_text
    # plan.table checks the open's refusal of the install first.
    items = table(req.snapshot, req.options, req.name)
    return choices_text(items, req.model_dir, req.drafter_choice(auto=True),
                        req.options).encode("ascii")


def drafter_json(req: Request) -> bytes:
    """What `tsffi_resolve_drafter` returns for `req`."""
    from .wire import choice_text
    return choice_text(req.drafter_choice(), req.model_dir).encode("ascii")


def install_info_json(req: Request) -> bytes:
    """What `tsffi_install_info_json` returns for `req`'s install."""
    from .jsontext import dumps
    from .wire import install_info_to_dict
    return dumps(install_info_to_dict(req.snapshot, *req.install_verdicts())).encode("ascii")


def policies_json(choice_json: bytes, options: bytes | str | None) -> bytes:
    """What `tsffi_draft_policies` returns: the draft policies of a drafter
    choice a host hands back (what tsffi_resolve_drafter returned) at the
    options' speculation."""
    from .errors import InvalidArgument
    from .options import MAX_OPTIONS_BYTES, decode_text, parse_options
    from .plan import policies_for_choice
    from .wire import choice_from_json, policies_text
    if len(choice_json) > MAX_OPTIONS_BYTES:
        raise InvalidArgument(f"choice_json is {len(choice_json)} bytes; accepts at most "
                              f"{MAX_OPTIONS_BYTES} bytes (what tsffi_resolve_drafter returns)")
    choice = choice_from_json(decode_text(choice_json, "choice_json"))
    return policies_text(policies_for_choice(choice, parse_options(options))).encode("ascii")


def speculation_json(options: bytes | str | None) -> bytes:
    """What `tsffi_resolve_speculation` returns: the original module's
    resolve_speculation as the options ask it, with no install."""
    from .options import parse_options
    from .plan import speculation_without_install
    from .wire import speculation_text
    return speculation_text(*speculation_without_install(parse_options(options))).encode(
        "ascii")


def store_json() -> bytes:
    """What `tsffi_store_json` returns."""
    from .jsontext import dumps
    from .store_listing import store_listing
    from .wire import store_listing_to_dict
    return dumps(store_listing_to_dict(store_listing())).encode("ascii")


def reconcile_json(model_dir: str | bytes | os.PathLike, options: str | bytes | None,
                   engine_json: str | bytes) -> bytes:
    """What `tsffi_reconcile` returns."""
    from .reconcile import reconcile
    from .wire import reconcile_text
    return reconcile_text(reconcile(model_dir, options, engine_json)).encode("ascii")


def build_info_json(abi_version: int, library: str, owns_interpreter: bool) -> bytes:
    """What `tsffi_build_info_json` returns (wire.build_info_to_dict)."""
    from .jsontext import dumps
    from .wire import build_info_to_dict
    return dumps(build_info_to_dict(abi_version, library, owns_interpreter)).encode("ascii")
