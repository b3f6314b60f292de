"""The package's exceptions: one per concept, all `ValueError` subclasses, so a
caller that only wants "was my input bad" catches one type.

Each error a caller can cause carries its C ABI status code (`status`, the
header's TSFFI_ERR_* number); `STATUS_OK` is TSFFI_OK. These are the one
Python source of the numbers: `_abi.py` reports an error's own `status`, the
choices table's per-item status and the command line's exit statuses read
them here, and tests/test_c_abi.py holds them equal to include/tsffi.h.
ResidentIndexError has no status: the seed's `resolve_drafter` reads an
unreadable index as "unknown"; the open that follows refuses it, as
OpenRefused.
"""

from __future__ import annotations

__all__ = [
    "STATUS_OK",
    "TurbosparkError",
    "InvalidArgument",
    "JsonArgumentError",
    "SpeculationRefused",
    "OptionRefused",
    "OpenRefused",
    "ResidentIndexError",
    "OpenFailed",
]

STATUS_OK = 0  # TSFFI_OK


class TurbosparkError(ValueError):
    """Base of every error this package raises on purpose. `status` is the C
    ABI's code for it, or None for an error that never crosses the boundary."""

    status: int | None = None

    def again(self) -> TurbosparkError:
        """A fresh instance carrying the same message and fields, for raising
        a remembered error anew (raising one object again and again keeps
        growing its traceback, and two threads may raise it at once)."""
        fresh = self.__class__.__new__(self.__class__)
        fresh.args = self.args
        fresh.__dict__.update(self.__dict__)
        return fresh


class InvalidArgument(TurbosparkError):
    """An argument or option value outside its accepted set (TSFFI_ERR_INVALID_ARGUMENT).

    `option` is the option key refused when the option grammar refuses one
    (the message is then "<option>: <what was wrong>"), else None: so a
    front end can name its own flag for the key without reading the words.
    """

    status = 1

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class JsonArgumentError(TurbosparkError):
    """A JSON argument that does not parse, or is not an object (TSFFI_ERR_JSON)."""

    status = 4


class SpeculationRefused(TurbosparkError):
    """The original module's `Err`: a named block that cannot be served (TSFFI_ERR_REFUSED).

    The message is the original module's, verbatim; a host shows it to the user as is.
    `reason` is the part after the policy's refusal prefix (what stood in
    the way), for a front end that lists it apart from the prefix.
    """

    status = 2
    # Set by policy.resolve_speculation on the instance it raises (a keyword
    # of __init__ tripled the cost of raising one, 15 times a table).
    reason: str | None = None


class ResidentIndexError(TurbosparkError):
    """The resident index could not be read or failed one of the engine's checks.

    The message is the engine's shape: "resident index is corrupt: <detail>"
    or "<call> failed: <detail>". `check` names which check tripped, so tests
    (and a GUI's diagnostics) can tell the failures apart without parsing text.
    """

    def __init__(self, message: str, *, check: str) -> None:
        super().__init__(message)
        self.check = check


class OptionRefused(TurbosparkError):
    """An option the engine's open refuses in its mapping stage (TSFFI_ERR_REFUSED,
    the open's TS_ERR_OPEN): the message is the engine's own, bare, byte for
    byte (TURBOSPARK_FACTS.md section 10 item 4), so a host that shows the
    open's refusal and ours shows the same words."""

    status = 2


class OpenRefused(TurbosparkError):
    """A failure of the engine's open that the install's files show
    (TSFFI_ERR_REFUSED, the open's TS_ERR_OPEN): not a directory, the
    manifest's `arch`, the resident index, the index-wide dtype gates, the
    drafter state built at open (TURBOSPARK_FACTS.md sections 10-12). The
    message is the open's own, bare, byte for byte. `stage` names where the
    open stopped ("directory", "manifest", "index", "dtypeGate", "mtpBuild",
    "dflashBuild"), for a front end that labels it without reading the words.
    """

    status = 2

    def __init__(self, message: str, *, stage: str) -> None:
        super().__init__(message)
        self.stage = stage


class OpenFailed(TurbosparkError):
    """The engine's own open of this install with these options failed, as a
    host reported it to tsffi_reconcile: a plan of the pair then refuses with
    the engine's status (its number, whatever it is) and message, verbatim."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
