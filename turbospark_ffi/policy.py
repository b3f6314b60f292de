"""The original module's speculation policy (turbospark-runtime 0.3.0), in Python: its
types, its constants, its three decisions and its messages -- the one place
each of them lives.

Which drafter an install carries, whether this run may use it, and the
`DraftPolicies` to open with. The original module's comments (docs/ENGINE.md)
are the specification; the ones kept here are the ones a maintainer of this module needs at hand. Pure:
the original module's `resolve_drafter` reads the resident index first, and here that
read is the install snapshot's (snapshots.py), made once for every decision
about the install; this module decides from what it read.
"""

from __future__ import annotations

from ._value import Value
from .errors import SpeculationRefused

# The fields of the values a plan builds are set one by one rather than
# through Value._init's keywords: half the cost, and a choices table builds
# a hundred of them (profiled).
_set = object.__setattr__

__all__ = [
    "DEFAULT_SPECULATION_BLOCK",
    "DFLASH_SERVING_BLOCK",
    "ALLOWED_SPECULATION_BLOCKS",
    "DRAFTER_SPELLINGS",
    "U32_MAX",
    "DFLASH_AUTO_NOTE",
    "SAMPLED_BLOCK_DRAFTER_REASON",
    "REFUSAL_PREFIX",
    "Speculation",
    "SpeculativeDrafter",
    "DrafterChoice",
    "SpeculationPlan",
    "SpeculationEnabled",
    "SpeculationDisabled",
    "DraftMode",
    "MtpDraftPolicy",
    "DflashDraftPolicy",
    "DraftPolicies",
    "resolve_drafter",
    "draft_policies",
    "resolve_speculation",
]

# The MTP head's measured optimum (docs/ENGINE.md section 6): 1.44x at 2; 4 reads 1.03x,
# 8 0.71x, 15 0.44x as rollbacks rise from 10% to 98%.
DEFAULT_SPECULATION_BLOCK = 2
# The DFlash2 drafter's own serving block, measured independently of the MTP
# head's; the two agree today, which is not the same as being one number.
DFLASH_SERVING_BLOCK = 2
# Block B verifies B+1 rows and the batched verify kernel's cap is 16 rows.
ALLOWED_SPECULATION_BLOCKS = range(1, 16)
# How the engine's messages write the range (Rust's Debug of `1..=15`).
ALLOWED_SPECULATION_BLOCKS_TEXT = "1..=15"
# A block is a u32 in the engine's types (the option parser refuses beyond).
U32_MAX = (1 << 32) - 1
# The drafter's spellings, exact, in the order a settings pane lists them:
# the option values, the JSON values and the Python values alike.
DRAFTER_SPELLINGS = ("auto", "mtp", "dflash")

# NAMES BOTH SPELLINGS, because there are three front ends and one of them has
# no command line: a GUI driving the C ABI reads this note verbatim, and
# telling it to pass a flag it cannot pass is an instruction it cannot follow.
DFLASH_AUTO_NOTE = (
    "this install carries a DFlash2 drafter, which auto leaves OFF: measured "
    "0.90x throughput on prose against 1.33-1.47x on code and math, and "
    "+17.4% J/token, so it is opt-in. Select the dflash drafter to use it "
    "(--speculative-drafter dflash, or speculativeDrafter \"dflash\" on the "
    "C ABI)"
)

SAMPLED_BLOCK_DRAFTER_REASON = (
    "sampled speculation cannot be served by the block drafter: DFlash2's "
    "selection is a greedy structured search, not a distribution, so exact "
    "rejection sampling has no q(x) to ratio against; use the mtp drafter or "
    "temperature 0"
)

# How every refusal of a named block begins; the rest is what stood in the way
# (SpeculationRefused.reason).
REFUSAL_PREFIX = "--speculative was asked for but cannot be served: "


class SpeculativeDrafter(Value):
    """Which drafter `Speculation` drives: `AUTO` (whichever the install
    carries), `MTP` (the checkpoint's own head, a token at a time) or `DFLASH`
    (the DFlash2 block-diffusion drafter, a whole block per pass). The two are
    alternatives; a third value is not a spectrum."""

    __slots__ = ("value",)
    AUTO: SpeculativeDrafter
    MTP: SpeculativeDrafter
    DFLASH: SpeculativeDrafter
    _by_value: dict[str, SpeculativeDrafter] = {}

    def __new__(cls, value: str) -> SpeculativeDrafter:
        try:
            return cls._by_value[value]
        except (KeyError, TypeError):
            raise ValueError(f"invalid SpeculativeDrafter {value!r} "
                             f"(accepts {', '.join(map(repr, DRAFTER_SPELLINGS))})") from None

    @classmethod
    def _make(cls, value: str) -> SpeculativeDrafter:
        obj = object.__new__(cls)
        object.__setattr__(obj, "value", value)
        cls._by_value[value] = obj
        return obj

    def __reduce__(self):
        return (SpeculativeDrafter, (self.value,))

    # One object per value (__new__, _make and unpickling all intern), so
    # identity is equality: a call's verdicts (plan.py) are keyed by drafter.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"SpeculativeDrafter.{self.value.upper()}"


SpeculativeDrafter.AUTO, SpeculativeDrafter.MTP, SpeculativeDrafter.DFLASH = (
    SpeculativeDrafter._make(spelling) for spelling in DRAFTER_SPELLINGS)


class Speculation(Value):
    """Whether and how far this run drafts ahead: `AUTO` (draft if the install
    can, warn and continue if it cannot), `OFF` (never), or `block(n)` (draft n
    tokens per round, or fail naming the reason). `n` is any u32, as in the
    original module: the allowed range is `resolve_speculation`'s to enforce."""

    __slots__ = ("kind", "n")
    AUTO: Speculation
    OFF: Speculation

    def __init__(self, kind: str, n: int | None = None) -> None:
        if kind in ("auto", "off"):
            if n is not None:
                raise ValueError(f"Speculation {kind!r} takes no block, got {n!r}")
        elif kind == "block":
            if type(n) is not int or not 0 <= n <= U32_MAX:
                raise ValueError(f"Speculation block must be an int in 0..={U32_MAX}, "
                                 f"got {n!r}")
        else:
            raise ValueError(f"invalid Speculation kind {kind!r} "
                             "(accepts 'auto', 'off', 'block')")
        self._init(kind=kind, n=n)

    @classmethod
    def block(cls, n: int) -> Speculation:
        return cls("block", n)

    def __repr__(self) -> str:
        return f"Speculation.block({self.n})" if self.kind == "block" \
            else f"Speculation.{self.kind.upper()}"


Speculation.AUTO = Speculation("auto")
Speculation.OFF = Speculation("off")


class DrafterChoice(Value):
    """What `resolve_drafter` decided: the drafter to open, and a note for the
    case where `auto` FOUND a drafter and deliberately did not enable it.

    `install_has_mtp_head` / `install_has_dflash` are three-state: True,
    False, or None when nobody could tell (an unreadable index). None is
    deliberately NOT folded into False: "there is no head" and "nobody
    looked" license different things, and only the first licenses
    `draft_policies` declining to ask the open for one.
    """

    __slots__ = ("drafter", "install_has_mtp_head", "install_has_dflash", "note")

    def __init__(self, drafter: SpeculativeDrafter, install_has_mtp_head: bool | None,
                 install_has_dflash: bool | None, note: str | None = None) -> None:
        if not isinstance(drafter, SpeculativeDrafter):
            raise TypeError(f"drafter must be a SpeculativeDrafter, got {drafter!r}")
        for name, flag in (("install_has_mtp_head", install_has_mtp_head),
                           ("install_has_dflash", install_has_dflash)):
            if flag is not None and type(flag) is not bool:
                raise TypeError(f"{name} must be True, False or None, got {flag!r}")
        if note is not None and not isinstance(note, str):
            raise TypeError(f"note must be a str or None, got {note!r}")
        _set(self, "drafter", drafter)
        _set(self, "install_has_mtp_head", install_has_mtp_head)
        _set(self, "install_has_dflash", install_has_dflash)
        _set(self, "note", note)


class SpeculationPlan(Value):
    """What a front end decided about speculative decoding, resolved once:
    `SpeculationEnabled(block)` or `SpeculationDisabled(reason)`."""

    __slots__ = ()
    enabled: bool


class SpeculationEnabled(SpeculationPlan):
    __slots__ = ("block",)
    enabled = True

    def __init__(self, block: int) -> None:
        _set(self, "block", block)


class SpeculationDisabled(SpeculationPlan):
    """`reason` is set when the caller might have expected otherwise, and None
    when they asked for `off` and got it."""

    __slots__ = ("reason",)
    enabled = False

    def __init__(self, reason: str | None = None) -> None:
        _set(self, "reason", reason)


# The answers that carry no text, as constants (immutable values, made once
# at import like the draft policies' OFF and AUTO below).
_ENABLED = {n: SpeculationEnabled(n) for n in ALLOWED_SPECULATION_BLOCKS}
_DISABLED_AS_ASKED = SpeculationDisabled(None)


class DraftMode:
    """The three modes of a draft policy at open (docs/ENGINE.md section 3)."""

    OFF = "off"    # the drafter's state is never built
    AUTO = "auto"  # built if and only if the install carries it
    FIXED = "fixed"  # built at n; the OPEN FAILS if the install lacks it


class _DraftPolicy(Value):
    __slots__ = ("mode", "block")

    def __init__(self, mode: str, block: int | None = None) -> None:
        if mode == DraftMode.FIXED:
            if type(block) is not int or block < 0:
                raise ValueError(f"a fixed draft policy needs a block >= 0, got {block!r}")
        elif mode in (DraftMode.OFF, DraftMode.AUTO):
            if block is not None:
                raise ValueError(f"draft policy {mode!r} takes no block, got {block!r}")
        else:
            raise ValueError(f"invalid draft mode {mode!r} (accepts 'off', 'auto', 'fixed')")
        _set(self, "mode", mode)
        _set(self, "block", block)

    @classmethod
    def fixed(cls, n: int):
        return cls(DraftMode.FIXED, n)

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}.fixed({self.block})" if self.mode == DraftMode.FIXED \
            else f"{name}.{self.mode.upper()}"


class MtpDraftPolicy(_DraftPolicy):
    __slots__ = ()
    OFF: MtpDraftPolicy
    AUTO: MtpDraftPolicy


class DflashDraftPolicy(_DraftPolicy):
    __slots__ = ()
    OFF: DflashDraftPolicy
    AUTO: DflashDraftPolicy


for _cls in (MtpDraftPolicy, DflashDraftPolicy):
    _cls.OFF = _cls(DraftMode.OFF)
    _cls.AUTO = _cls(DraftMode.AUTO)
del _cls


class DraftPolicies(Value):
    __slots__ = ("mtp", "dflash")

    def __init__(self, mtp: MtpDraftPolicy, dflash: DflashDraftPolicy) -> None:
        if type(mtp) is not MtpDraftPolicy or type(dflash) is not DflashDraftPolicy:
            raise TypeError("DraftPolicies takes an MtpDraftPolicy and a DflashDraftPolicy, "
                            f"got {mtp!r} and {dflash!r}")
        _set(self, "mtp", mtp)
        _set(self, "dflash", dflash)

    @classmethod
    def mtp_only(cls, policy: MtpDraftPolicy) -> DraftPolicies:
        """The engine's `DraftPolicies::mtp(p)`: `{mtp: p, dflash: Off}`."""
        return cls(policy, DflashDraftPolicy.OFF)


# Every pair draft_policies answers a servable request with, as constants made
# once at import (immutable values, like OFF and AUTO): keyed by the policy of
# the drafter that owns the request -- "off", "auto", or its fixed block. A
# choices table asks for each of them; building them per call was a tenth of
# a first table (profiled).
_OWNED_BY_MTP = {key: DraftPolicies(policy, DflashDraftPolicy.OFF) for key, policy in (
    ("off", MtpDraftPolicy.OFF), ("auto", MtpDraftPolicy.AUTO),
    *((n, MtpDraftPolicy.fixed(n)) for n in ALLOWED_SPECULATION_BLOCKS))}
_OWNED_BY_DFLASH = {key: DraftPolicies(MtpDraftPolicy.OFF, policy) for key, policy in (
    ("off", DflashDraftPolicy.OFF), ("auto", DflashDraftPolicy.AUTO),
    *((n, DflashDraftPolicy.fixed(n)) for n in ALLOWED_SPECULATION_BLOCKS))}


def resolve_drafter(requested: SpeculativeDrafter, index) -> DrafterChoice:
    """Which drafter an install actually carries, for `SpeculativeDrafter.AUTO`.

    `index` is the install's resident index as read (a `ResidentIndex`), or
    None when it could not be read -- the original module's
    `load_resident_index(...).ok()`. The original module reads it inside this function;
    here the install snapshot reads it (snapshots.py), once for every decision
    about the install, whatever the request (an explicit ask still needs the
    presence flags, for `draft_policies`). An unreadable index is not an
    error here: this function picks a drafter, and `open` is entitled to be
    the one that refuses a broken install.
    """
    from .resident_index import install_has_dflash, install_has_mtp_head

    has_mtp = None if index is None else install_has_mtp_head(index)
    has_dflash = None if index is None else install_has_dflash(index)
    if requested is not SpeculativeDrafter.AUTO:
        # Naming a drafter is a promise the caller made to themselves.
        return DrafterChoice(requested, has_mtp, has_dflash)
    if index is None:
        return DrafterChoice(SpeculativeDrafter.MTP, has_mtp, has_dflash)
    if has_mtp is False and has_dflash is True:
        # DETECTION IS NOT ENABLEMENT: DFlash2 at block 2 reads 1.33x on code
        # and 1.47x on math but 0.90x on PROSE, and +17.4% J/token on the
        # energy A/B; a default that switched it on would make a common
        # workload slower and hungrier unasked. Resolving to MTP also means
        # the open allocates no DFlash2 state (213 MiB on the real 27B).
        return DrafterChoice(SpeculativeDrafter.MTP, has_mtp, has_dflash, DFLASH_AUTO_NOTE)
    # BOTH resolves to MTP (the default before auto existed: no run that
    # worked changes); NEITHER too, with no note, so the "no drafter" message
    # such a caller sees is the one they have always seen.
    return DrafterChoice(SpeculativeDrafter.MTP, has_mtp, has_dflash)


def draft_policies(choice: DrafterChoice, speculation: Speculation) -> DraftPolicies:
    """The `DraftPolicies` to open a runner with.

    THE DRAFTER THE FLAG NAMED OWNS THE REQUEST, and the other is pinned OFF,
    so a dflash-carrying install never silently opens both drafters' state.

    The note arm: A NOTE MEANS THE DECISION IS ALREADY MADE, so do not ask the
    open for a head we know is not there -- otherwise `--speculative 2` on a
    DFlash2-only install fails at OPEN with advice to download a different
    drafter. The headless arms (one per drafter, each asking about its own)
    are the same argument on a wider input and deliberately not collapsed into
    the note's condition: on a MoE install a failed open would send the caller
    after an artifact that cannot help; `Off` lets the open succeed so that
    `resolve_speculation` refuses with the architectural reason instead.
    Both test `is False`, never falsiness: None is an unreadable index, which
    must keep failing at open with the engine's own message.
    """
    kind = speculation.kind
    if choice.drafter is SpeculativeDrafter.MTP:
        if kind == "off" or choice.note is not None:
            key = "off"
        elif kind == "auto":
            key = "auto"
        elif choice.install_has_mtp_head is False:
            key = "off"
        else:
            key = speculation.n
        policies = _OWNED_BY_MTP.get(key)
        # A block outside 1..15 (a Python caller's Speculation.block(16)):
        # not servable, so not among the constants.
        return policies if policies is not None else \
            DraftPolicies.mtp_only(MtpDraftPolicy.fixed(key))
    # AUTO is resolved by resolve_drafter before this is called and cannot
    # reach here; it shares the DFlash2 arm if it ever does.
    if kind == "off":
        key = "off"
    elif kind == "auto":
        key = "auto"
    elif choice.install_has_dflash is False:
        key = "off"
    else:
        key = speculation.n
    policies = _OWNED_BY_DFLASH.get(key)
    return policies if policies is not None else \
        DraftPolicies(MtpDraftPolicy.OFF, DflashDraftPolicy.fixed(key))


def resolve_speculation(requested: Speculation, drafter: SpeculativeDrafter,
                        engine_blocker: str | None, deterministic: bool) -> SpeculationPlan:
    """Decide speculation from the request and what the install turned out to be.

    THE TWO OUTCOMES DIFFER BY WHO ASKED. A named block is a promise the
    caller made to themselves -- they are measuring -- so failing to keep it
    raises `SpeculationRefused` carrying the reason; `auto` asked for
    "speculate if you can", so the same condition is a warning
    (`SpeculationDisabled(reason)`) and the run continues.

    Sampled runs are refused only for the BLOCK drafter: the MTP step drafter
    serves any temperature through exact rejection sampling; DFlash2's
    selection has no q(x) to ratio against.
    """
    if engine_blocker is not None:
        unavailable = engine_blocker
    elif not deterministic and drafter is SpeculativeDrafter.DFLASH:
        unavailable = SAMPLED_BLOCK_DRAFTER_REASON
    else:
        unavailable = None

    auto_block = DFLASH_SERVING_BLOCK if drafter is SpeculativeDrafter.DFLASH \
        else DEFAULT_SPECULATION_BLOCK

    kind = requested.kind
    if kind == "off":
        return _DISABLED_AS_ASKED
    if kind == "auto":
        if unavailable is not None:
            return SpeculationDisabled(unavailable)
        return _ENABLED[auto_block]
    if unavailable is None:
        n = requested.n
        if n in ALLOWED_SPECULATION_BLOCKS:
            return _ENABLED[n]
        unavailable = f"block {n} is outside allowed range {ALLOWED_SPECULATION_BLOCKS_TEXT}"
    refused = SpeculationRefused(REFUSAL_PREFIX + unavailable)
    refused.reason = unavailable
    raise refused
