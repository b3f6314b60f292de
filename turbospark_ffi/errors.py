"""The package's exceptions: one per concept, all `ValueError` subclasses, so a
caller that only wants "was my input bad" catches one type.

`_abi.py` maps InvalidArgument, JsonArgumentError and SpeculationRefused to
their C ABI status codes (one each); the mapping lives there and nowhere
else. ResidentIndexError never reaches the C boundary: an unreadable index
is an answer ("unknown"), not a failure.
"""

from __future__ import annotations

__all__ = [
    "TurbosparkError",
    "InvalidArgument",
    "JsonArgumentError",
    "SpeculationRefused",
    "ResidentIndexError",
]


class TurbosparkError(ValueError):
    """Base of every error this package raises on purpose."""

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidArgument(TurbosparkError):
    """An argument or option value outside its accepted set (TSFFI_ERR_INVALID_ARGUMENT)."""


class JsonArgumentError(TurbosparkError):
    """A JSON argument that does not parse, or is not an object (TSFFI_ERR_JSON)."""


class SpeculationRefused(TurbosparkError):
    """The seed's `Err`: a named block that cannot be served (TSFFI_ERR_REFUSED).

    The message is the seed's, verbatim; a host shows it to the user as is.
    """


class ResidentIndexError(TurbosparkError):
    """The resident index could not be read or failed one of the engine's checks.

    The message is the engine's shape: "resident index is corrupt: <detail>"
    or "<call> failed: <detail>". `check` names which check tripped, so tests
    (and a GUI's diagnostics) can tell the failures apart without parsing text.
    """

    def __init__(self, message: str, *, check: str) -> None:
        super().__init__(message)
        self.check = check
