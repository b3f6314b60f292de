"""The turn: whether a turn the host sends on the session actually
speculates (TURBOSPARK_FACTS.md section 13; the engine's generate of revision
0a45c54).

The session's answer (`speculation`) is settled at open as though every turn
were greedy. Through the C ABI a turn then runs the speculative loop only
when ALL of these hold, and otherwise decodes sequentially, SILENTLY (no
warning, no error, by the engine's design):

1. the session drafts (its block is not null);
2. the turn's temperature is exactly 0 (-0.0 counts);
3. rate control is off: `maxTokensPerSec` was not given (any value, 0
   included, turns it on), and the power profile resolves to `performance`
   (an absent one resolves from the OS: `efficiency` under Low Power Mode).

The engine's binding and its own Mac app default to temperature 0.2, so an
app left at its defaults opens a session that drafts and never speculates.
That silence is what a settings pane must not repeat: `reason` names the
cause in words a person can act on.
"""

from __future__ import annotations

from ._value import Value

__all__ = ["DEFAULT_TURN_TEMPERATURE", "Turn", "turn", "temperature_text", "REASON_TEMPERATURE",
           "REASON_RATE_CAP", "REASON_POWER_PROFILE", "REASON_LOW_POWER_MODE"]

# The C ABI's (and the Swift binding's) generate default.
DEFAULT_TURN_TEMPERATURE = 0.2

# Our own words (the engine says nothing): each names the cause and what
# would change it.
REASON_TEMPERATURE = (
    "this session drafts, but a turn speculates only at temperature 0 and this turn's "
    "temperature is {t}{default}: it decodes sequentially (send temperature 0 to speculate)")
REASON_RATE_CAP = (
    "this session drafts, but maxTokensPerSec turns the engine's rate control on, and a turn "
    "under rate control decodes sequentially (leave maxTokensPerSec unset to speculate)")
REASON_POWER_PROFILE = (
    "this session drafts, but powerProfile \"{profile}\" turns the engine's rate control on, "
    "and a turn under rate control decodes sequentially (powerProfile \"performance\" "
    "speculates)")
REASON_LOW_POWER_MODE = (
    "this session drafts, but Low Power Mode resolves the absent powerProfile to "
    "\"efficiency\", which turns the engine's rate control on, and a turn under rate control "
    "decodes sequentially (set powerProfile \"performance\" to speculate)")


class Turn(Value):
    """`{"temperature", "speculates", "reason"}`: the turn's temperature,
    whether it speculates, and -- only when the session drafts and the turn
    does not -- why not (None when it speculates, or when the session does
    not draft: the session's reason says why)."""

    __slots__ = ("temperature", "speculates", "reason")

    def __init__(self, temperature: float, speculates: bool, reason: str | None) -> None:
        self._init(temperature=temperature, speculates=speculates, reason=reason)


def _number(t: float) -> str:
    from .rust_text import compact
    return compact(t)


def temperature_text(t: float) -> str:
    """serde_json's text of the turn's temperature: repr's shortest digits
    where the two agree (no exponent; what every slider gives), else
    rust_text's full rule."""
    text = repr(t)
    if "e" in text or "n" in text:  # an exponent, inf or nan
        return _number(t)
    return text


def turn(session_block: int | None, temperature: float | None, rate_capped: bool,
         power_profile: str | None, low_power_mode: bool) -> Turn:
    """The turn a host sends on a session whose block is `session_block`,
    at `temperature` (None: the binding's default), with the open's
    `maxTokensPerSec` given or not (`rate_capped`) and its `powerProfile`
    (None: absent, resolved from `low_power_mode`)."""
    given = temperature is not None
    t = temperature if given else DEFAULT_TURN_TEMPERATURE
    if session_block is None:
        return Turn(t, False, None)
    if t != 0:
        return Turn(t, False, REASON_TEMPERATURE.format(
            t=temperature_text(t), default="" if given else " (the engine binding's default)"))
    if rate_capped:
        return Turn(t, False, REASON_RATE_CAP)
    if power_profile is not None and power_profile != "performance":
        return Turn(t, False, REASON_POWER_PROFILE.format(profile=power_profile))
    if power_profile is None and low_power_mode:
        return Turn(t, False, REASON_LOW_POWER_MODE)
    return Turn(t, True, None)
