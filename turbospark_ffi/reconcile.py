"""`tsffi_reconcile`: the preview held against what the engine's real open
reported for the same install and options, and the library's memory of the
engine's outcome after a disagreement (reconcile_memory.py).

The preview side is exactly what `tsffi_speculation_plan` answers for the
same arguments -- its speculation, or its refusal where the refusal is the
open's own (status 2, and 4 for options the open's decoder refuses): the
pure preview, never a remembered engine outcome, or a second reconcile
would compare the engine with itself. An argument this call cannot use (a
bad model_dir, a bad "tsffi" object, a malformed engine_json) is an error
of the call (status 1), not an outcome.
"""

from __future__ import annotations

import os

from .engine_revision import mirrored_revision
from .errors import InvalidArgument, JsonArgumentError, SpeculationRefused, TurbosparkError
from .options import Options
from .plan import request
from .reconcile_memory import (Outcome, Reconciliation, differences, disagreement_warning,
                               forget, read_engine_json, remember)

__all__ = ["reconcile"]


# The statuses of the open's own refusals: 2 (TS_ERR_OPEN: its option
# mapping, the install, a block that cannot be served) and 4 (its options
# decoder). Any other status of the preview is this call's own error.
_OPEN_STATUSES = (SpeculationRefused.status, JsonArgumentError.status)


def _preview(model_dir, options) -> tuple[Outcome, object]:
    """The preview's outcome, and the request it was made from (None when
    the options were refused before any install was read)."""
    try:
        req = request(model_dir, options)
    except TurbosparkError as exc:
        if exc.status not in _OPEN_STATUSES:
            raise
        return Outcome.failed(exc.status, str(exc)), None
    try:
        result = req.preview()
    except TurbosparkError as exc:
        if exc.status not in _OPEN_STATUSES:
            raise
        return Outcome.failed(exc.status, str(exc)), req
    speculation = result.speculation
    if speculation.enabled:
        return Outcome.opened(speculation.block, result.choice.drafter.value, None), req
    return Outcome.opened(None, None, speculation.reason), req


def reconcile(model_dir: str | bytes | os.PathLike, options: str | bytes | None,
              engine_json: str | bytes) -> Reconciliation:
    """Compare the preview for `model_dir` and the `options` text with what
    the engine's open reported (`engine_json`), and remember the engine's
    outcome for later plans of the pair when they disagree (forget it when
    they agree). Raises InvalidArgument for a bad argument (a malformed
    engine_json included)."""
    from .model_names import check_model_dir
    check_model_dir(model_dir)
    if isinstance(options, Options):
        # The memory is keyed by the text the open was given; a value has none.
        raise InvalidArgument("options: got an Options value; accepts the options text the "
                              "engine's open was given (str or bytes), or None")
    engine = read_engine_json(engine_json)
    preview, req = _preview(model_dir, options)
    found = differences(preview, engine)
    # Options the open refuses before it reads an install are refused by the
    # plan before it reads one too: there is no install to remember them for.
    if req is not None and req.text is not None:
        snap = req.snapshot
        if found:
            remember(snap.model_dir, snap.key, req.text, engine,
                     disagreement_warning(preview, engine, found))
        else:
            forget(snap.model_dir, req.text)
    return Reconciliation(preview, engine, found, mirrored_revision())
