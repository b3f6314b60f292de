"""ONE table of C-ABI cases, fed to the C host (tests/c/case_host.c, via
tests/test_c_abi.py), to the in-process ctypes host (tests/test_ctypes_abi.py)
and, exported as JSON (table_json, written by swift/run-tests.sh), to the Swift
tests, so that the layers cannot drift apart.

A case names the function, the install it runs against (a shape from INSTALLS),
the options JSON (bytes; None is a NULL pointer), the expected status (by its
header name) and either the expected JSON (exactly, with `Has(...)` where the
text is the library's own wording rather than the contract's) or the expected
last-error message (exactly for the original module's messages, by required substrings
for the library's own wording: the key, the value received, what is accepted).

Expected texts are written out here, copied from the original module (the engine's
speculation policy, transcribed in tests/original_texts.py), from the engine
around it (its blocker functions and its reader, transcribed in
tests/engine_texts.py) and docs/ENGINE.md section 5, never computed
by the package under test; test_table_constants_are_the_packages cross-checks
them against turbospark_ffi.policy.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------------------
# The original module's messages, verbatim.

from original_texts import DFLASH_NOTE, REFUSAL_PREFIX, SAMPLED_REASON  # noqa: E402,F401
from engine_texts import ENGINE, ENGINE_VERSION, blocker, corrupt, io_failed  # noqa: E402
VISION_BLOCKER = "the vision tower is active"
# A blocker with non-ASCII text: the message must come back as UTF-8, verbatim.
UTF8_BLOCKER = "la t\u00eate de vision est active \u2014 \u00e9t\u00e9"


def out_of_range(n: int) -> str:
    """The original module's own range refusal (resolve_speculation's arm), which a
    Python caller still gets for `Speculation.block(16)`."""
    return f"{REFUSAL_PREFIX}block {n} is outside allowed range 1..=15"


# A call that is refused (TSFFI_ERR_REFUSED) with a known message of the original module's:
# the hosts' last-error tests use it as their failing call.
REFUSED_OPTIONS = b'{"speculativeDrafter": "dflash", "tsffi": {"temperature": 0.7}, "speculation": 2}'
REFUSED_MESSAGE = REFUSAL_PREFIX + SAMPLED_REASON


def invalid_block(shown: str) -> str:
    """A block outside 1..=15 given as an option: the engine's open refuses it
    in its mapping (status 2) with this message, the block as parsed (a
    string's digits without their quotes: FACTS section 10)."""
    return "speculation block must be in 1..=15, got " + shown.strip('"')


def serde(text: str) -> str:
    """A decoding refusal (status 4): the open's "options: " + serde's text."""
    return "options: " + text


class Has:
    """Matches a string that contains every one of `parts`."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __repr__(self) -> str:
        return f"Has{self.parts!r}"


class Subset:
    """Matches a JSON object that has at least these keys with these values."""

    def __init__(self, **items) -> None:
        self.items = items

    def __repr__(self) -> str:
        return f"Subset({self.items!r})"


# The engine's texts, whole: each blocker function's (the MTP runner's for
# mtp, the DFlash2 one for dflash) and the reader's.
NO_HEAD = blocker("mtp", "no-drafter")
MOE_8 = blocker("mtp", "moe", experts=8)
MOE_8_DFLASH = blocker("dflash", "moe", experts=8)
# The "unreadable" install is 10 bytes of 0x01: shorter than the header.
UNREADABLE = corrupt("short_header")
# The "missing" install does not exist: the engine's open refuses the name
# (the message quotes it, so the table matches its tail).
MISSING = Has(" is not a directory (and matched no installed alias)")
# What a turn at the binding's default temperature says on a session that
# drafts (turbospark_ffi/turn.py's words, written out).
TURN_AT_DEFAULT = ("this session drafts, but a turn speculates only at temperature 0 and this "
                   "turn's temperature is 0.2 (the engine binding's default): it decodes "
                   "sequentially (send temperature 0 to speculate)")


# ---------------------------------------------------------------------------
# Installs: shapes written with turbospark_ffi.install_writer.write_install, the
# engine's real layout. `mtp`/`dflash` are what the Python reader must say of
# them (checked before any case is believed); None is "index unreadable".

@dataclass(frozen=True)
class Install:
    write: dict | str          # write_install kwargs, or "unreadable" / "missing"
    mtp: bool | None
    dflash: bool | None
    experts: int | None = 0


INSTALLS = {
    "none": Install({}, False, False),
    "mtp": Install({"mtp": True}, True, False),
    "dflash": Install({"dflash": True}, False, True),     # DFlash2-only
    "both": Install({"mtp": True, "dflash": True}, True, True),
    "moe": Install({"mtp": True, "experts": 8}, True, False, 8),
    "unreadable": Install("unreadable", None, None, None),
    "missing": Install("missing", None, None, None),
}


def materialize(root: Path) -> dict[str, Path]:
    """Write every install shape under `root`; return name -> directory."""
    from turbospark_ffi.install_writer import write_install

    paths = {}
    for name, spec in INSTALLS.items():
        path = root / name
        if spec.write == "unreadable":
            # A valid install whose index is shorter than the 24-byte
            # header: the open gets past the manifest and fails on it.
            write_install(path)
            (path / "model_weights.bin").write_bytes(b"\x01" * 10)
        elif spec.write == "missing":
            pass  # never created
        else:
            write_install(path, **spec.write)
        paths[name] = path
    return paths


def verify_installs(paths: dict[str, Path]) -> None:
    """The fixture must discriminate before any case is believed: the Python
    reader (not the library) says each install is the shape the table claims."""
    from turbospark_ffi.errors import ResidentIndexError
    from turbospark_ffi.resident_index import (install_has_dflash, install_has_mtp_head,
                                               load_resident_index)
    for name, spec in INSTALLS.items():
        weights = paths[name] / "model_weights.bin"
        try:
            index = load_resident_index(str(weights))
        except ResidentIndexError:
            index = None
        got = (None, None) if index is None else (install_has_mtp_head(index),
                                                  install_has_dflash(index))
        assert got == (spec.mtp, spec.dflash), f"install {name}: reader says {got}"
    # The DFlash2-only install really carries the drafter and no head.
    assert (paths["dflash"] / "model_weights.bin").stat().st_size > 16_384
    assert not paths["missing"].exists()


# ---------------------------------------------------------------------------
# Cases.

FUNCTIONS = ("build_info", "resolve_drafter", "draft_policies", "resolve_speculation",
             "speculation_plan", "install_info", "speculation_choices")
# Which argument slots each function takes: "dir" (model_dir), "choice", "options".
SIGNATURES = {
    "build_info": (),
    "resolve_drafter": ("dir", "options"),
    "draft_policies": ("choice", "options"),
    "resolve_speculation": ("options",),
    "speculation_plan": ("dir", "options"),
    "install_info": ("dir",),
    "speculation_choices": ("dir", "options"),
}
NULL = None
UNSET = object()


@dataclass(frozen=True)
class Chain:
    """choice_json = exactly what tsffi_resolve_drafter returned for this install
    and these options (the call is made first, by the same host)."""
    install: str
    options: bytes | None = None


@dataclass(frozen=True)
class Case:
    id: str
    fn: str
    status: str                                # "TSFFI_OK", "TSFFI_ERR_REFUSED", ...
    install: str | None = None                 # INSTALLS key, for "dir"
    model_dir: bytes | None | object = UNSET   # a raw model_dir instead (None = NULL)
    options: bytes | None = None               # None = NULL pointer
    choice: Chain | bytes | None = None        # for draft_policies
    # For "dir" functions that succeed: the INSTALLS key of the directory the
    # result's "modelDir" names (None: the case's own install).
    reads: str | None = None
    null_out: bool = False
    json: object = None                        # expected result (dict / Subset)
    message: str | Has | None = None           # expected last error


# This library's own inputs, which the engine's open never reads: since ABI 3
# they live in the "tsffi" object. The table writes them where a host writes
# them; `_j` moves them there, so each case keeps its meaning.
_PREVIEW_KEYS = ("temperature", "engineBlocker")


def _j(obj, **dumps) -> bytes:
    preview = {key: obj[key] for key in _PREVIEW_KEYS if key in obj}
    if preview:
        obj = {**{k: v for k, v in obj.items() if k not in _PREVIEW_KEYS}, "tsffi": preview}
    return json.dumps(obj, **dumps).encode()


def _top(obj) -> bytes:
    """`obj` exactly as written: top-level preview keys stay top-level."""
    return json.dumps(obj).encode()


def _spec(block, drafter, reason=None) -> dict:
    return {"block": block, "drafter": drafter, "reason": reason}


OFF_OFF = {"mtp": {"mode": "off", "block": None}, "dflash": {"mode": "off", "block": None}}


def _pol(mtp=("off", None), dflash=("off", None)) -> dict:
    return {"mtp": {"mode": mtp[0], "block": mtp[1]},
            "dflash": {"mode": dflash[0], "block": dflash[1]}}


def _choice(drafter, mtp, dflash, note=None) -> dict:
    return {"drafter": drafter, "installHasMtpHead": mtp, "installHasDflash": dflash,
            "note": note}


CHOICE_MTP = _choice("mtp", True, False)
CHOICE_NOTE = _choice("mtp", False, True, DFLASH_NOTE)

def _turn(speculation, temperature=None) -> dict:
    """The turn at `temperature` (None: the binding's default 0.2) on a
    session whose answer is `speculation`."""
    t = 0.2 if temperature is None else temperature
    if speculation["block"] is None:
        return {"temperature": t, "speculates": False, "reason": None}
    if t == 0:
        return {"temperature": t, "speculates": True, "reason": None}
    reason = TURN_AT_DEFAULT if temperature is None else TURN_AT_DEFAULT.replace(
        "0.2 (the engine binding's default)", str(t))
    return {"temperature": t, "speculates": False, "reason": reason}


def _plan(choice, policies, speculation, ignored=(), warnings=(), temperature=None) -> dict:
    return {"drafter": choice, "draftPolicies": policies, "speculation": speculation,
            "turn": _turn(speculation, temperature), "source": "preview",
            "ignoredKeys": list(ignored), "warnings": list(warnings)}


MOVED = ('"{0}" at the top level is ignored, as the engine\'s open ignores it; since ABI 3 this '
         'library reads it inside the "tsffi" object: {{"tsffi": {{"{0}": ...}}}}')
NEAR = ('"{0}" is not a key the engine\'s open reads, so it ignores it (and so does this '
        'preview); did you mean "{1}"?')


CASES: list[Case] = [
    # ----- tsffi_build_info_json
    Case("build-info", "build_info", "TSFFI_OK",
         json=Subset(abiVersion=4, version=Has("."), python=Has("3."))),
    Case("build-info-null-out", "build_info", "TSFFI_ERR_INVALID_ARGUMENT", null_out=True,
         message=Has("out_json")),

    # ----- tsffi_resolve_speculation: the original module's arms without an install
    Case("spec-null-options", "resolve_speculation", "TSFFI_OK", options=NULL,
         json=_spec(2, "mtp")),
    Case("spec-empty-options", "resolve_speculation", "TSFFI_OK", options=b"",
         json=_spec(2, "mtp")),
    Case("spec-empty-object", "resolve_speculation", "TSFFI_OK", options=b"{}",
         json=_spec(2, "mtp")),
    Case("spec-auto-drafter-reports-mtp", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculativeDrafter": "auto"}), json=_spec(2, "mtp")),
    Case("spec-all-null", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculation": None, "speculativeDrafter": None, "temperature": None,
                     "engineBlocker": None}), json=_spec(2, "mtp")),
    Case("spec-auto-sampled-is-mtp", "resolve_speculation", "TSFFI_OK",
         options=_j({"temperature": 0.7}), json=_spec(2, "mtp")),
    Case("spec-off", "resolve_speculation", "TSFFI_OK", options=_j({"speculation": "off"}),
         json=_spec(None, None)),
    Case("spec-off-any-case", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculation": "OfF"}), json=_spec(None, None)),
    Case("spec-auto-any-case", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculation": "AUTO"}), json=_spec(2, "mtp")),
    Case("spec-block-3", "resolve_speculation", "TSFFI_OK", options=_j({"speculation": 3}),
         json=_spec(3, "mtp")),
    Case("spec-block-string-15", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculation": "15"}), json=_spec(15, "mtp")),
    Case("spec-block-1", "resolve_speculation", "TSFFI_OK", options=_j({"speculation": 1}),
         json=_spec(1, "mtp")),
    Case("spec-dflash", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculativeDrafter": "dflash"}), json=_spec(2, "dflash")),
    Case("spec-dflash-block-temp0", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculativeDrafter": "dflash", "speculation": 4, "temperature": 0}),
         json=_spec(4, "dflash")),
    Case("spec-dflash-sampled-auto", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculativeDrafter": "dflash", "temperature": 0.7}),
         json=_spec(None, None, SAMPLED_REASON)),
    Case("spec-dflash-sampled-block", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculativeDrafter": "dflash", "temperature": 0.7, "speculation": 2}),
         message=REFUSAL_PREFIX + SAMPLED_REASON),
    Case("spec-dflash-sampled-off", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculativeDrafter": "dflash", "temperature": 0.7, "speculation": "off"}),
         json=_spec(None, None)),
    Case("spec-mtp-sampled-block", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculativeDrafter": "mtp", "temperature": 0.7, "speculation": 2}),
         json=_spec(2, "mtp")),
    Case("spec-blocker-auto", "resolve_speculation", "TSFFI_OK",
         options=_j({"engineBlocker": VISION_BLOCKER}), json=_spec(None, None, VISION_BLOCKER)),
    Case("spec-blocker-block", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"engineBlocker": VISION_BLOCKER, "speculation": 2}),
         message=REFUSAL_PREFIX + VISION_BLOCKER),
    Case("spec-blocker-off", "resolve_speculation", "TSFFI_OK",
         options=_j({"engineBlocker": VISION_BLOCKER, "speculation": "off"}),
         json=_spec(None, None)),
    # A block outside 1..=15: the open's mapping refuses it, before any blocker.
    Case("spec-range-outranks-blocker", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"engineBlocker": VISION_BLOCKER, "speculation": 16}),
         message=invalid_block("16")),
    Case("spec-blocker-outranks-sampled", "resolve_speculation", "TSFFI_OK",
         options=_j({"engineBlocker": VISION_BLOCKER, "speculativeDrafter": "dflash",
                     "temperature": 0.7}),
         json=_spec(None, None, VISION_BLOCKER)),
    Case("spec-blocker-null", "resolve_speculation", "TSFFI_OK",
         options=_j({"engineBlocker": None, "speculation": 4}), json=_spec(4, "mtp")),
    Case("spec-blocker-utf8", "resolve_speculation", "TSFFI_OK",
         options=_j({"engineBlocker": UTF8_BLOCKER}, ensure_ascii=False),
         json=_spec(None, None, UTF8_BLOCKER)),
    Case("spec-blocker-utf8-block", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"engineBlocker": UTF8_BLOCKER, "speculation": 2}, ensure_ascii=False),
         message=REFUSAL_PREFIX + UTF8_BLOCKER),
    Case("spec-block-16", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculation": 16}), message=invalid_block("16")),
    Case("spec-block-16-string", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculation": "16"}), message=invalid_block('"16"')),
    Case("spec-block-0", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculation": 0}), message=invalid_block("0")),
    Case("spec-block-0-string", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculation": "0"}), message=invalid_block('"0"')),
    Case("spec-block-u32-max", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculation": 4294967295}), message=invalid_block("4294967295")),
    Case("spec-dflash-block-16", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculativeDrafter": "dflash", "speculation": 16}),
         message=invalid_block("16")),
    Case("spec-sampled-dflash-block-16", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculativeDrafter": "dflash", "speculation": 16, "temperature": 0.7}),
         message=invalid_block("16")),
    Case("spec-ignored-keys", "resolve_speculation", "TSFFI_OK",
         options=_j({"contextLength": 4096, "kvCacheBits": 8, "speculation": 3}),
         json=_spec(3, "mtp")),
    # bad values: the open's mapping refuses them (status 2, its own message)
    Case("spec-bad-drafter-case", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculativeDrafter": "DFlash"}),
         message='speculativeDrafter must be auto, mtp or dflash, got "DFlash"'),
    Case("spec-bad-drafter-type", "resolve_speculation", "TSFFI_ERR_JSON",
         options=_j({"speculativeDrafter": 1}),
         message=serde("invalid type: integer `1`, expected a string at line 1 column 24")),
    Case("spec-bad-speculation-word", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculation": "fast"}),
         message='speculation must be "off", "auto" or a block in 1..=15, got "fast"'),
    Case("spec-bad-speculation-bool", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculation": True}),
         message='speculation must be "off", "auto" or a block in 1..=15, got true'),
    Case("spec-bad-speculation-float", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=b'{"speculation": 2.5}', message=invalid_block("2.5")),
    Case("spec-bad-speculation-negative", "resolve_speculation", "TSFFI_ERR_REFUSED",
         options=_j({"speculation": -1}), message=invalid_block("-1")),
    # a bad "tsffi" object: status 1, naming the key, what it got, what it accepts
    Case("spec-bad-temperature", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT",
         options=_j({"temperature": -1}), message=Has("tsffi.temperature", "-1", ">= 0")),
    Case("spec-bad-temperature-string", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT",
         options=_j({"temperature": "hot"}), message=Has("tsffi.temperature", '"hot"')),
    Case("spec-bad-blocker-empty", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT",
         options=_j({"engineBlocker": ""}), message=Has("tsffi.engineBlocker", '""')),
    Case("spec-bad-blocker-number", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT",
         options=_j({"engineBlocker": 3}), message=Has("tsffi.engineBlocker", "3")),
    Case("spec-tsffi-unknown-key", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT",
         options=_top({"tsffi": {"temprature": 0.7}}),
         message=Has("tsffi", '"temprature"', '"engineBlocker"', '"temperature"')),
    Case("spec-tsffi-not-object", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT",
         options=_top({"tsffi": [0.7]}), message=Has("tsffi", "an array", "object")),
    # the preview's keys at the top level are ignored, as the open ignores them
    Case("spec-top-level-temperature-ignored", "resolve_speculation", "TSFFI_OK",
         options=_top({"speculativeDrafter": "dflash", "temperature": 0.7, "speculation": 2}),
         json=_spec(2, "dflash")),
    Case("spec-top-level-blocker-ignored", "resolve_speculation", "TSFFI_OK",
         options=_top({"engineBlocker": VISION_BLOCKER, "speculation": 2}),
         json=_spec(2, "mtp")),
    Case("spec-duplicate-key", "resolve_speculation", "TSFFI_ERR_JSON",
         options=b'{"speculation": 2, "speculation": 3}',
         message=serde("duplicate field `speculation` at line 1 column 32")),
    # near-miss keys: the open ignores them (auto), so the call succeeds; the
    # plan and the table carry a warning
    Case("spec-near-miss-typo", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculaton": 3}), json=_spec(2, "mtp")),
    Case("spec-near-miss-case", "resolve_speculation", "TSFFI_OK",
         options=_j({"Speculation": "off"}), json=_spec(2, "mtp")),
    Case("spec-near-miss-drafter", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculativeDrafer": "dflash"}), json=_spec(2, "mtp")),
    Case("spec-near-miss-snake", "resolve_speculation", "TSFFI_OK",
         options=_j({"speculative_drafter": "dflash"}), json=_spec(2, "mtp")),
    Case("spec-near-miss-temperature", "resolve_speculation", "TSFFI_OK",
         options=_top({"temprature": 0.7, "speculativeDrafter": "dflash"}),
         json=_spec(2, "dflash")),
    Case("spec-near-miss-blocker", "resolve_speculation", "TSFFI_OK",
         options=_top({"EngineBlocker": "x"}), json=_spec(2, "mtp")),
    # not UTF-8
    Case("spec-non-utf8", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT",
         options=b'{"contextName": "\xff\xfe"}', message=Has("options_json", "UTF-8")),
    Case("spec-non-utf8-truncated-sequence", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT",
         options=b'{"engineBlocker": "caf\xc3"}', message=Has("options_json", "UTF-8")),
    # text the open's decoder refuses: status 4, serde's words and position
    Case("spec-json-unterminated", "resolve_speculation", "TSFFI_ERR_JSON", options=b"{",
         message=serde("EOF while parsing an object at line 1 column 1")),
    Case("spec-json-garbage", "resolve_speculation", "TSFFI_ERR_JSON", options=b"speculation=2",
         message=serde("expected value at line 1 column 1")),
    Case("spec-json-trailing", "resolve_speculation", "TSFFI_ERR_JSON",
         options=b'{"speculation": 2} x', message=serde("trailing characters at line 1 column 20")),
    Case("spec-json-nan", "resolve_speculation", "TSFFI_ERR_JSON",
         options=b'{"temperature": NaN}', message=serde("expected value at line 1 column 17")),
    # a top-level array is read positionally, as the open reads it
    Case("spec-json-array", "resolve_speculation", "TSFFI_OK", options=b"[]",
         json=_spec(2, "mtp")),
    # 0a45c54's 18 fields: speculation is element 7, the drafter 8.
    Case("spec-json-array-positional", "resolve_speculation", "TSFFI_OK",
         options=b'[null, null, null, null, null, null, null, 4, "dflash"]',
         json=_spec(4, "dflash")),
    Case("spec-json-null", "resolve_speculation", "TSFFI_ERR_JSON", options=b"null",
         message=serde("invalid type: null, expected struct OpenOptions at line 1 column 4")),
    Case("spec-json-number", "resolve_speculation", "TSFFI_ERR_JSON", options=b"42",
         message=serde("invalid type: integer `42`, expected struct OpenOptions at line 1 "
                       "column 2")),
    Case("spec-json-string", "resolve_speculation", "TSFFI_ERR_JSON", options=b'"auto"',
         message=serde('invalid type: string "auto", expected struct OpenOptions at line 1 '
                       "column 6")),
    Case("spec-json-whitespace", "resolve_speculation", "TSFFI_ERR_JSON", options=b"   ",
         message=serde("EOF while parsing a value at line 1 column 3")),
    Case("spec-null-out", "resolve_speculation", "TSFFI_ERR_INVALID_ARGUMENT", options=b"{}",
         null_out=True, message=Has("out_json")),

    # ----- tsffi_resolve_drafter
    Case("drafter-none", "resolve_drafter", "TSFFI_OK", install="none",
         json=_choice("mtp", False, False)),
    Case("drafter-mtp", "resolve_drafter", "TSFFI_OK", install="mtp", json=CHOICE_MTP),
    Case("drafter-dflash-only-note", "resolve_drafter", "TSFFI_OK", install="dflash",
         json=CHOICE_NOTE),
    Case("drafter-dflash-only-note-empty-options", "resolve_drafter", "TSFFI_OK",
         install="dflash", options=b"", json=CHOICE_NOTE),
    Case("drafter-dflash-only-note-auto", "resolve_drafter", "TSFFI_OK", install="dflash",
         options=_j({"speculativeDrafter": "auto", "speculation": 2}), json=CHOICE_NOTE),
    Case("drafter-both", "resolve_drafter", "TSFFI_OK", install="both",
         json=_choice("mtp", True, True)),
    Case("drafter-moe", "resolve_drafter", "TSFFI_OK", install="moe", json=CHOICE_MTP),
    Case("drafter-unreadable-unknown", "resolve_drafter", "TSFFI_OK", install="unreadable",
         json=_choice("mtp", None, None)),
    Case("drafter-missing-unknown", "resolve_drafter", "TSFFI_OK", install="missing",
         json=_choice("mtp", None, None)),
    Case("drafter-dflash-explicit", "resolve_drafter", "TSFFI_OK", install="dflash",
         options=_j({"speculativeDrafter": "dflash"}), json=_choice("dflash", False, True)),
    Case("drafter-mtp-explicit-no-note", "resolve_drafter", "TSFFI_OK", install="dflash",
         options=_j({"speculativeDrafter": "mtp"}), json=_choice("mtp", False, True)),
    Case("drafter-dflash-on-none", "resolve_drafter", "TSFFI_OK", install="none",
         options=_j({"speculativeDrafter": "dflash"}), json=_choice("dflash", False, False)),
    Case("drafter-dflash-on-unreadable", "resolve_drafter", "TSFFI_OK", install="unreadable",
         options=_j({"speculativeDrafter": "dflash"}), json=_choice("dflash", None, None)),
    Case("drafter-null-dir", "resolve_drafter", "TSFFI_ERR_INVALID_ARGUMENT", model_dir=NULL,
         message=Has("model_dir")),
    Case("drafter-empty-dir", "resolve_drafter", "TSFFI_ERR_INVALID_ARGUMENT", model_dir=b"",
         message=Has("model_dir", "empty")),
    Case("drafter-non-utf8-dir", "resolve_drafter", "TSFFI_ERR_INVALID_ARGUMENT",
         model_dir=b"/tmp/mod\xffels", message=Has("model_dir", "UTF-8")),
    Case("drafter-bad-drafter", "resolve_drafter", "TSFFI_ERR_REFUSED", install="mtp",
         options=_j({"speculativeDrafter": "MTP"}),
         message='speculativeDrafter must be auto, mtp or dflash, got "MTP"'),
    Case("drafter-validates-speculation-too", "resolve_drafter", "TSFFI_ERR_REFUSED",
         install="mtp", options=_j({"speculation": "fast"}),
         message='speculation must be "off", "auto" or a block in 1..=15, got "fast"'),
    Case("drafter-validates-engine-keys", "resolve_drafter", "TSFFI_ERR_REFUSED",
         install="mtp", options=_j({"kvBits": "5", "speculation": 3}),
         message='kvBits must be off, 2, 3, 3.5 or 4, got "5"'),
    Case("drafter-near-miss", "resolve_drafter", "TSFFI_OK", install="dflash",
         options=_j({"speculativedrafter": "dflash"}), json=CHOICE_NOTE),
    Case("drafter-non-utf8-options", "resolve_drafter", "TSFFI_ERR_INVALID_ARGUMENT",
         install="mtp", options=b'{"\x80": 1}', message=Has("options_json", "UTF-8")),
    Case("drafter-json-array", "resolve_drafter", "TSFFI_ERR_REFUSED", install="mtp",
         options=b'["dflash"]', message='maxContext must be a number or "auto", got "dflash"'),
    Case("drafter-json-broken", "resolve_drafter", "TSFFI_ERR_JSON", install="mtp",
         options=b'{"speculativeDrafter": }', message=serde("expected value at line 1 column 24")),
    Case("drafter-null-out", "resolve_drafter", "TSFFI_ERR_INVALID_ARGUMENT", install="mtp",
         null_out=True, message=Has("out_json")),
    Case("drafter-block-16", "resolve_drafter", "TSFFI_ERR_REFUSED", install="moe",
         options=_j({"speculation": 16}), message=invalid_block("16")),
    Case("drafter-block-0-missing-install", "resolve_drafter", "TSFFI_ERR_REFUSED",
         install="missing", options=_j({"speculation": "0"}), message=invalid_block('"0"')),

    # ----- tsffi_draft_policies, fed exactly what tsffi_resolve_drafter returned
    Case("policies-mtp-auto", "draft_policies", "TSFFI_OK", choice=Chain("mtp"),
         json=_pol(mtp=("auto", None))),
    Case("policies-mtp-block", "draft_policies", "TSFFI_OK", choice=Chain("mtp"),
         options=_j({"speculation": 3}), json=_pol(mtp=("fixed", 3))),
    Case("policies-mtp-off", "draft_policies", "TSFFI_OK", choice=Chain("mtp"),
         options=_j({"speculation": "off"}), json=OFF_OFF),
    Case("policies-note-auto", "draft_policies", "TSFFI_OK", choice=Chain("dflash"),
         json=OFF_OFF),
    Case("policies-note-block-does-not-ask-open", "draft_policies", "TSFFI_OK",
         choice=Chain("dflash"), options=_j({"speculation": 2}), json=OFF_OFF),
    Case("policies-dflash-explicit-block", "draft_policies", "TSFFI_OK",
         choice=Chain("dflash", _j({"speculativeDrafter": "dflash"})),
         options=_j({"speculation": 2}), json=_pol(dflash=("fixed", 2))),
    Case("policies-dflash-explicit-auto", "draft_policies", "TSFFI_OK",
         choice=Chain("dflash", _j({"speculativeDrafter": "dflash"})),
         json=_pol(dflash=("auto", None))),
    Case("policies-headless-mtp-block", "draft_policies", "TSFFI_OK", choice=Chain("none"),
         options=_j({"speculation": 2}), json=OFF_OFF),
    Case("policies-headless-mtp-auto", "draft_policies", "TSFFI_OK", choice=Chain("none"),
         json=_pol(mtp=("auto", None))),
    Case("policies-headless-dflash-block", "draft_policies", "TSFFI_OK",
         choice=Chain("none", _j({"speculativeDrafter": "dflash"})),
         options=_j({"speculation": 2}), json=OFF_OFF),
    Case("policies-unknown-keeps-asking-mtp", "draft_policies", "TSFFI_OK",
         choice=Chain("unreadable"), options=_j({"speculation": 2}),
         json=_pol(mtp=("fixed", 2))),
    Case("policies-unknown-keeps-asking-dflash", "draft_policies", "TSFFI_OK",
         choice=Chain("missing", _j({"speculativeDrafter": "dflash"})),
         options=_j({"speculation": 2}), json=_pol(dflash=("fixed", 2))),
    Case("policies-both-block", "draft_policies", "TSFFI_OK", choice=Chain("both"),
         options=_j({"speculation": "5"}), json=_pol(mtp=("fixed", 5))),
    Case("policies-hand-written-choice", "draft_policies", "TSFFI_OK",
         choice=_j(_choice("dflash", True, True)), options=_j({"speculation": 7}),
         json=_pol(dflash=("fixed", 7))),
    Case("policies-null-choice", "draft_policies", "TSFFI_ERR_INVALID_ARGUMENT", choice=NULL,
         message=Has("choice_json")),
    Case("policies-choice-not-json", "draft_policies", "TSFFI_ERR_JSON", choice=b"{drafter}",
         message=Has("choice_json")),
    Case("policies-choice-empty", "draft_policies", "TSFFI_ERR_JSON", choice=b"",
         message=Has("choice_json")),
    Case("policies-choice-array", "draft_policies", "TSFFI_ERR_JSON", choice=b"[]",
         message=Has("choice_json", "object")),
    Case("policies-choice-missing-keys", "draft_policies", "TSFFI_ERR_INVALID_ARGUMENT",
         choice=_j({"drafter": "mtp"}), message=Has("choice_json", "installHasMtpHead")),
    Case("policies-choice-extra-key", "draft_policies", "TSFFI_ERR_INVALID_ARGUMENT",
         choice=_j({**CHOICE_MTP, "block": 2}), message=Has("choice_json", '"block"')),
    Case("policies-choice-bad-drafter", "draft_policies", "TSFFI_ERR_INVALID_ARGUMENT",
         choice=_j({**CHOICE_MTP, "drafter": "eagle"}), message=Has("choice_json", '"eagle"')),
    Case("policies-choice-bad-flag", "draft_policies", "TSFFI_ERR_INVALID_ARGUMENT",
         choice=_j({**CHOICE_MTP, "installHasMtpHead": "yes"}),
         message=Has("choice_json", "installHasMtpHead")),
    Case("policies-choice-non-utf8", "draft_policies", "TSFFI_ERR_INVALID_ARGUMENT",
         choice=b'{"drafter": "mtp\xff"}', message=Has("choice_json", "UTF-8")),
    Case("policies-bad-option", "draft_policies", "TSFFI_ERR_REFUSED",
         choice=Chain("mtp"), options=_j({"speculation": "fast"}),
         message='speculation must be "off", "auto" or a block in 1..=15, got "fast"'),
    Case("policies-near-miss", "draft_policies", "TSFFI_OK",
         choice=Chain("mtp"), options=_j({"speculatio": 2}), json=_pol(mtp=("auto", None))),
    Case("policies-options-json", "draft_policies", "TSFFI_ERR_JSON", choice=Chain("mtp"),
         options=b"[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]",
         message=serde("invalid type: integer `4`, expected a string at line 1 column 8")),
    Case("policies-null-out", "draft_policies", "TSFFI_ERR_INVALID_ARGUMENT",
         choice=_j(CHOICE_MTP), null_out=True, message=Has("out_json")),
    Case("policies-block-16", "draft_policies", "TSFFI_ERR_REFUSED",
         choice=Chain("mtp"), options=_j({"speculation": 16}), message=invalid_block("16")),
    Case("policies-block-16-string-note", "draft_policies", "TSFFI_ERR_REFUSED",
         choice=Chain("dflash"), options=_j({"speculation": "16"}),
         message=invalid_block('"16"')),
    Case("policies-block-u32-max-moe", "draft_policies", "TSFFI_ERR_REFUSED",
         choice=Chain("moe"), options=_j({"speculation": 4294967295}),
         message=invalid_block("4294967295")),
    Case("policies-block-0", "draft_policies", "TSFFI_ERR_REFUSED",
         choice=Chain("none"), options=_j({"speculation": 0}), message=invalid_block("0")),

    # ----- tsffi_speculation_plan: the whole flow
    Case("plan-dflash-only-auto-note", "speculation_plan", "TSFFI_OK", install="dflash",
         options=b"{}", json=_plan(CHOICE_NOTE, OFF_OFF, _spec(None, None, DFLASH_NOTE))),
    Case("plan-dflash-only-null-options", "speculation_plan", "TSFFI_OK", install="dflash",
         options=NULL, json=_plan(CHOICE_NOTE, OFF_OFF, _spec(None, None, DFLASH_NOTE))),
    Case("plan-dflash-only-block-refused", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="dflash", options=_j({"speculation": 2}), message=REFUSAL_PREFIX + DFLASH_NOTE),
    Case("plan-note-outranks-engine-blocker", "speculation_plan", "TSFFI_OK", install="dflash",
         options=_j({"engineBlocker": VISION_BLOCKER}),
         json=_plan(CHOICE_NOTE, OFF_OFF, _spec(None, None, DFLASH_NOTE))),
    Case("plan-dflash-opt-in", "speculation_plan", "TSFFI_OK", install="dflash",
         options=_j({"speculativeDrafter": "dflash", "speculation": 2}),
         json=_plan(_choice("dflash", False, True), _pol(dflash=("fixed", 2)),
                    _spec(2, "dflash"))),
    Case("plan-dflash-opt-in-auto", "speculation_plan", "TSFFI_OK", install="dflash",
         options=_j({"speculativeDrafter": "dflash"}),
         json=_plan(_choice("dflash", False, True), _pol(dflash=("auto", None)),
                    _spec(2, "dflash"))),
    # The session is the open's answer (greedy assumed): a sampled turn
    # leaves DFlash2 on, and the turn says it will not speculate.
    Case("plan-dflash-opt-in-sampled-auto", "speculation_plan", "TSFFI_OK", install="dflash",
         options=_j({"speculativeDrafter": "dflash", "temperature": 0.7}),
         json=_plan(_choice("dflash", False, True), _pol(dflash=("auto", None)),
                    _spec(2, "dflash"), temperature=0.7)),
    Case("plan-dflash-opt-in-sampled-block", "speculation_plan", "TSFFI_OK",
         install="dflash",
         options=_j({"speculativeDrafter": "dflash", "speculation": 2, "temperature": 0.7}),
         json=_plan(_choice("dflash", False, True), _pol(dflash=("fixed", 2)),
                    _spec(2, "dflash"), temperature=0.7)),
    Case("plan-dflash-greedy-turn", "speculation_plan", "TSFFI_OK", install="dflash",
         options=_j({"speculativeDrafter": "dflash", "temperature": 0}),
         json=_plan(_choice("dflash", False, True), _pol(dflash=("auto", None)),
                    _spec(2, "dflash"), temperature=0.0)),
    Case("plan-mtp-auto", "speculation_plan", "TSFFI_OK", install="mtp", options=b"{}",
         json=_plan(CHOICE_MTP, _pol(mtp=("auto", None)), _spec(2, "mtp"))),
    Case("plan-mtp-block", "speculation_plan", "TSFFI_OK", install="mtp",
         options=_j({"speculation": 3}),
         json=_plan(CHOICE_MTP, _pol(mtp=("fixed", 3)), _spec(3, "mtp"))),
    Case("plan-mtp-off", "speculation_plan", "TSFFI_OK", install="mtp",
         options=_j({"speculation": "off"}), json=_plan(CHOICE_MTP, OFF_OFF, _spec(None, None))),
    Case("plan-mtp-block-16", "speculation_plan", "TSFFI_ERR_REFUSED", install="mtp",
         options=_j({"speculation": 16}), message=invalid_block("16")),
    # Refused by the open's mapping whatever blocker stands: the MoE install's,
    # the DFlash2 note, the host's, an unreadable or missing install.
    Case("plan-moe-block-16", "speculation_plan", "TSFFI_ERR_REFUSED", install="moe",
         options=_j({"speculation": 16}), message=invalid_block("16")),
    Case("plan-moe-block-16-string", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="moe", options=_j({"speculation": "16"}), message=invalid_block('"16"')),
    Case("plan-moe-block-0", "speculation_plan", "TSFFI_ERR_REFUSED", install="moe",
         options=_j({"speculation": 0}), message=invalid_block("0")),
    Case("plan-moe-block-u32-max", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="moe", options=_j({"speculation": 4294967295}),
         message=invalid_block("4294967295")),
    Case("plan-dflash-only-block-16", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="dflash", options=_j({"speculation": 16}), message=invalid_block("16")),
    Case("plan-engine-blocker-block-16", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="mtp", options=_j({"engineBlocker": VISION_BLOCKER, "speculation": 16}),
         message=invalid_block("16")),
    Case("plan-unreadable-block-0", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="unreadable", options=_j({"speculation": "0"}), message=invalid_block('"0"')),
    Case("plan-missing-block-16", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="missing", options=_j({"speculation": 16}), message=invalid_block("16")),
    Case("plan-mtp-engine-blocker", "speculation_plan", "TSFFI_OK", install="mtp",
         options=_j({"engineBlocker": VISION_BLOCKER}),
         json=_plan(CHOICE_MTP, _pol(mtp=("auto", None)), _spec(None, None, VISION_BLOCKER))),
    Case("plan-mtp-engine-blocker-block", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="mtp", options=_j({"engineBlocker": VISION_BLOCKER, "speculation": 2}),
         message=REFUSAL_PREFIX + VISION_BLOCKER),
    Case("plan-both-auto", "speculation_plan", "TSFFI_OK", install="both", options=b"{}",
         json=_plan(_choice("mtp", True, True), _pol(mtp=("auto", None)), _spec(2, "mtp"))),
    Case("plan-none-auto-preview", "speculation_plan", "TSFFI_OK", install="none",
         options=b"{}",
         json=_plan(_choice("mtp", False, False), _pol(mtp=("auto", None)),
                    _spec(None, None, NO_HEAD))),
    Case("plan-none-block-refused", "speculation_plan", "TSFFI_ERR_REFUSED", install="none",
         options=_j({"speculation": 2}), message=REFUSAL_PREFIX + NO_HEAD),
    Case("plan-none-engine-blocker-null", "speculation_plan", "TSFFI_OK", install="none",
         options=_j({"engineBlocker": None}),
         json=_plan(_choice("mtp", False, False), _pol(mtp=("auto", None)), _spec(2, "mtp"))),
    Case("plan-moe-auto", "speculation_plan", "TSFFI_OK", install="moe", options=b"{}",
         json=_plan(CHOICE_MTP, _pol(mtp=("auto", None)), _spec(None, None, MOE_8))),
    # An install the open refuses: its message, bare, whatever is asked.
    Case("plan-unreadable-auto", "speculation_plan", "TSFFI_ERR_REFUSED", install="unreadable",
         options=b"{}", message=UNREADABLE),
    Case("plan-unreadable-off", "speculation_plan", "TSFFI_ERR_REFUSED", install="unreadable",
         options=_j({"speculation": "off"}), message=UNREADABLE),
    Case("plan-missing-block-refused", "speculation_plan", "TSFFI_ERR_REFUSED",
         install="missing", options=_j({"speculation": 2}), message=MISSING),
    Case("plan-ignored-keys", "speculation_plan", "TSFFI_OK", install="mtp",
         options=_j({"contextLength": 4096, "speculation": "auto", "kvCache": {"bits": 8}}),
         json=_plan(CHOICE_MTP, _pol(mtp=("auto", None)), _spec(2, "mtp"),
                    ignored=("contextLength", "kvCache"))),
    Case("plan-near-miss", "speculation_plan", "TSFFI_OK", install="dflash",
         options=_j({"speculativeDrafters": "dflash"}),
         json=_plan(CHOICE_NOTE, OFF_OFF, _spec(None, None, DFLASH_NOTE),
                    ignored=("speculativeDrafters",),
                    warnings=(NEAR.format("speculativeDrafters", "speculativeDrafter"),))),
    Case("plan-top-level-preview-keys", "speculation_plan", "TSFFI_OK", install="mtp",
         options=_top({"engineBlocker": VISION_BLOCKER, "temperature": 0.7, "speculation": 2}),
         json=_plan(CHOICE_MTP, _pol(mtp=("fixed", 2)), _spec(2, "mtp"),
                    ignored=("engineBlocker", "temperature"),
                    warnings=(MOVED.format("engineBlocker"), MOVED.format("temperature")))),
    Case("plan-bad-value", "speculation_plan", "TSFFI_ERR_REFUSED", install="dflash",
         options=_j({"speculativeDrafter": "DFLASH"}),
         message='speculativeDrafter must be auto, mtp or dflash, got "DFLASH"'),
    Case("plan-open-order", "speculation_plan", "TSFFI_ERR_REFUSED", install="mtp",
         options=_j({"speculation": 0, "maxContext": "big"}),
         message='maxContext must be a number or "auto", got "big"'),
    Case("plan-json", "speculation_plan", "TSFFI_ERR_JSON", install="dflash", options=b"{,}",
         message=serde("key must be a string at line 1 column 2")),
    Case("plan-json-not-object", "speculation_plan", "TSFFI_ERR_JSON", install="dflash",
         options=b"true",
         message=serde("invalid type: boolean `true`, expected struct OpenOptions at line 1 "
                       "column 4")),
    Case("plan-null-dir", "speculation_plan", "TSFFI_ERR_INVALID_ARGUMENT", model_dir=NULL,
         options=b"{}", message=Has("model_dir")),
    Case("plan-empty-dir", "speculation_plan", "TSFFI_ERR_INVALID_ARGUMENT", model_dir=b"",
         options=b"{}", message=Has("model_dir")),
    Case("plan-non-utf8-dir", "speculation_plan", "TSFFI_ERR_INVALID_ARGUMENT",
         model_dir=b"\xc0\xafetc", message=Has("model_dir", "UTF-8")),
    Case("plan-null-out", "speculation_plan", "TSFFI_ERR_INVALID_ARGUMENT", install="mtp",
         null_out=True, message=Has("out_json")),

    # ----- tsffi_install_info_json
    Case("info-mtp", "install_info", "TSFFI_OK", install="mtp", json=Subset(
        indexReadable=True, indexError=None, installHasMtpHead=True, installHasDflash=False,
        mtpHead=Subset(present=True, tensors=15, expected=15, complete=True, missing=[]),
        dflashDrafter=Subset(present=False, tensors=0, expected=81, complete=False),
        probe=Subset(layer=3, present=True, dtype=4, verifyCovers=True),
        experts=Subset(expertsPerLayer=0), blockerPreview=Subset(mtp=None))),
    Case("info-dflash-only", "install_info", "TSFFI_OK", install="dflash", json=Subset(
        indexReadable=True, indexError=None, installHasMtpHead=False, installHasDflash=True,
        mtpHead=Subset(present=False, tensors=0, complete=False),
        dflashDrafter=Subset(present=True, tensors=81, expected=81, complete=True, missing=[]),
        blockerPreview=Subset(dflash=None, mtp=NO_HEAD))),
    Case("info-both", "install_info", "TSFFI_OK", install="both", json=Subset(
        indexReadable=True, installHasMtpHead=True, installHasDflash=True,
        blockerPreview={"mtp": None, "dflash": None})),
    Case("info-none", "install_info", "TSFFI_OK", install="none", json=Subset(
        indexReadable=True, installHasMtpHead=False, installHasDflash=False,
        blockerPreview=Subset(mtp=NO_HEAD))),
    Case("info-moe", "install_info", "TSFFI_OK", install="moe", json=Subset(
        indexReadable=True, installHasMtpHead=True,
        experts=Subset(layoutPresent=True, expertsPerLayer=8, numLayers=4, error=None),
        blockerPreview=Subset(mtp=MOE_8, dflash=MOE_8_DFLASH))),
    Case("info-unreadable", "install_info", "TSFFI_OK", install="unreadable", json=Subset(
        indexReadable=False, indexError=UNREADABLE, entryCount=None,
        indexBytes=None, installHasMtpHead=None, installHasDflash=None, probe=None,
        manifestError=None, openError=UNREADABLE)),
    # Install info describes even what the open refuses, and says so.
    Case("info-missing", "install_info", "TSFFI_OK", install="missing", json=Subset(
        indexReadable=False, indexError=io_failed("open", 2), entryCount=None,
        installHasMtpHead=None, installHasDflash=None, arch=None,
        manifestError=Has("/manifest.json: No such file or directory (os error 2)"))),
    Case("info-null-dir", "install_info", "TSFFI_ERR_INVALID_ARGUMENT", model_dir=NULL,
         message=Has("model_dir")),
    Case("info-empty-dir", "install_info", "TSFFI_ERR_INVALID_ARGUMENT", model_dir=b"",
         message=Has("model_dir")),
    Case("info-non-utf8-dir", "install_info", "TSFFI_ERR_INVALID_ARGUMENT",
         model_dir=b"/\xfe", message=Has("model_dir", "UTF-8")),
    Case("info-null-out", "install_info", "TSFFI_ERR_INVALID_ARGUMENT", install="mtp",
         null_out=True, message=Has("out_json")),

    # ----- tsffi_speculation_choices (every item against the plan call: test_choices.py)
    Case("choices-mtp", "speculation_choices", "TSFFI_OK", install="mtp", options=b"{}",
         json=Subset(modelDir=Has("mtp"),
                     install={"installHasMtpHead": True, "installHasDflash": False},
                     ignoredKeys=[], warnings=[])),
    Case("choices-null-options", "speculation_choices", "TSFFI_OK", install="dflash",
         options=NULL,
         json=Subset(install={"installHasMtpHead": False, "installHasDflash": True})),
    Case("choices-unreadable-refused", "speculation_choices", "TSFFI_ERR_REFUSED",
         install="unreadable", options=b"{}", message=UNREADABLE),
    Case("choices-missing-refused", "speculation_choices", "TSFFI_ERR_REFUSED",
         install="missing", options=b"{}", message=MISSING),
    Case("choices-ignored-keys", "speculation_choices", "TSFFI_OK", install="both",
         options=_j({"contextLength": 4096, "kvCache": {"bits": 8}}),
         json=Subset(ignoredKeys=["contextLength", "kvCache"])),
    # A refused selection is not a failure: the table holds the refusal.
    Case("choices-selected-refused-item", "speculation_choices", "TSFFI_OK", install="none",
         options=_j({"speculation": 2}), json=Subset(ignoredKeys=[])),
    Case("choices-block-16", "speculation_choices", "TSFFI_ERR_REFUSED",
         install="mtp", options=_j({"speculation": 16}), message=invalid_block("16")),
    Case("choices-block-0", "speculation_choices", "TSFFI_ERR_REFUSED",
         install="mtp", options=_j({"speculation": "0"}), message=invalid_block("0")),
    Case("choices-bad-drafter", "speculation_choices", "TSFFI_ERR_REFUSED",
         install="mtp", options=_j({"speculativeDrafter": "eagle"}),
         message='speculativeDrafter must be auto, mtp or dflash, got "eagle"'),
    Case("choices-bad-temperature", "speculation_choices", "TSFFI_ERR_INVALID_ARGUMENT",
         install="mtp", options=_j({"temperature": -1}),
         message=Has("tsffi.temperature", "-1")),
    Case("choices-near-miss", "speculation_choices", "TSFFI_OK",
         install="mtp", options=_j({"speculativ": 2}),
         json=Subset(ignoredKeys=["speculativ"],
                     warnings=[NEAR.format("speculativ", "speculation")])),
    Case("choices-json", "speculation_choices", "TSFFI_ERR_JSON", install="mtp", options=b"{",
         message=serde("EOF while parsing an object at line 1 column 1")),
    Case("choices-json-not-object", "speculation_choices", "TSFFI_ERR_JSON", install="mtp",
         options=b"7", message=serde("invalid type: integer `7`, expected struct OpenOptions "
                                     "at line 1 column 1")),
    Case("choices-null-dir", "speculation_choices", "TSFFI_ERR_INVALID_ARGUMENT",
         model_dir=NULL, options=b"{}", message=Has("model_dir")),
    Case("choices-empty-dir", "speculation_choices", "TSFFI_ERR_INVALID_ARGUMENT",
         model_dir=b"", options=b"{}", message=Has("model_dir", "empty")),
    Case("choices-non-utf8-dir", "speculation_choices", "TSFFI_ERR_INVALID_ARGUMENT",
         model_dir=b"/tmp/\xffm", message=Has("model_dir", "UTF-8")),
    Case("choices-null-out", "speculation_choices", "TSFFI_ERR_INVALID_ARGUMENT",
         install="mtp", null_out=True, message=Has("out_json")),
]

assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
assert all(c.fn in FUNCTIONS for c in CASES)


# ---------------------------------------------------------------------------
# The status codes, from the header (the one source of the numbers). Read
# tolerating a trailing comment on the #define line, as the header writes them.

CONTRACT_CODES = {"TSFFI_OK": 0, "TSFFI_ERR_INVALID_ARGUMENT": 1, "TSFFI_ERR_REFUSED": 2,
                  "TSFFI_ERR_JSON": 4, "TSFFI_ERR_INTERNAL": 6, "TSFFI_ERR_RUNTIME": 9}


def header_codes(header: Path) -> dict[str, int]:
    from turbospark_ffi.native import header_constants
    return header_constants(header.read_text())


# ---------------------------------------------------------------------------
# Calls: a case as the concrete calls a host makes (a Chain case is two).

@dataclass
class Call:
    fn: str
    args: list            # bytes, None (NULL) or PREVIOUS
    null_out: bool = False


PREVIOUS = "@"


def model_dir_of(case: Case, paths: dict[str, Path]) -> bytes | None:
    if case.model_dir is not UNSET:
        return case.model_dir
    return os.fsencode(paths[case.install])


def calls_for(case: Case, paths: dict[str, Path]) -> list[Call]:
    """The calls that run `case`; the LAST one's outcome is the case's."""
    before: list[Call] = []
    args = []
    for slot in SIGNATURES[case.fn]:
        if slot == "dir":
            args.append(model_dir_of(case, paths))
        elif slot == "options":
            args.append(case.options)
        elif isinstance(case.choice, Chain):
            before.append(Call("resolve_drafter",
                               [os.fsencode(paths[case.choice.install]), case.choice.options]))
            args.append(PREVIOUS)
        else:
            args.append(case.choice)
    return before + [Call(case.fn, args, case.null_out)]


# ---------------------------------------------------------------------------
# Checking an outcome: the same function for every host.

def match(expected, actual, where: str = "$") -> list[str]:
    """Mismatches between `expected` (JSON value, Has, Subset) and `actual`."""
    if isinstance(expected, Has):
        if not isinstance(actual, str):
            return [f"{where}: expected a string containing {expected.parts!r}, got {actual!r}"]
        return [f"{where}: {actual!r} does not contain {p!r}"
                for p in expected.parts if p not in actual]
    if isinstance(expected, Subset):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        out = []
        for key, value in expected.items.items():
            if key not in actual:
                out.append(f"{where}: missing key {key!r}")
            else:
                out += match(value, actual[key], f"{where}.{key}")
        return out
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        out = []
        if set(expected) != set(actual):
            out.append(f"{where}: keys {sorted(actual)} != expected {sorted(expected)}")
        for key, value in expected.items():
            if key in actual:
                out += match(value, actual[key], f"{where}.{key}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {expected!r}, got {actual!r}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += match(e, a, f"{where}[{i}]")
        return out
    # Scalars: also tell 1 from True and 2 from 2.0.
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    return []


@dataclass
class Outcome:
    status: int
    out: str | None          # the result text, None for a NULL out
    err: str                 # the last error after the call ("" = none)
    out_untouched: bool = False   # the pre-filled garbage pointer was left in place
    problems: list = field(default_factory=list)   # host-side inconsistencies


def check_call(outcome: Outcome, codes: dict[str, int], where: str) -> list[str]:
    """The invariants every call keeps, whatever the case."""
    problems = list(outcome.problems)
    if outcome.out_untouched:
        problems.append(f"{where}: *out_json was left as the caller's garbage pointer")
    if outcome.status == codes["TSFFI_OK"]:
        if outcome.out is None:
            problems.append(f"{where}: TSFFI_OK with a NULL result")
        if outcome.err != "":
            problems.append(f"{where}: TSFFI_OK left a last error {outcome.err!r} "
                            "(it must be cleared on entry)")
    else:
        if outcome.out is not None:
            problems.append(f"{where}: status {outcome.status} with a non-NULL result "
                            f"{outcome.out!r}")
        if outcome.err == "":
            problems.append(f"{where}: status {outcome.status} with no last error")
    return problems


# The functions that take a model_dir: each successful result names the
# directory it read, as an absolute path ("modelDir"), checked for every
# case here (and then left out of the comparison with the case's `json`).
DIR_FUNCTIONS = ("resolve_drafter", "speculation_plan", "install_info")


def check(case: Case, outcomes: list[Outcome], codes: dict[str, int],
          paths: dict[str, Path] | None = None) -> None:
    """Assert that `outcomes` (one per call of calls_for(case)) are what the
    table says. Raises AssertionError listing every mismatch. With `paths`
    (the materialized installs), "modelDir" must be exactly the directory
    read; without, an absolute path."""
    problems = []
    for i, outcome in enumerate(outcomes):
        problems += check_call(outcome, codes, f"call {i}")
    for outcome in outcomes[:-1]:
        if outcome.status != codes["TSFFI_OK"]:
            problems.append(f"the chained tsffi_resolve_drafter failed: {outcome.status} "
                            f"{outcome.err!r}")
    last = outcomes[-1]
    want = codes[case.status]
    if last.status != want:
        problems.append(f"status {last.status} (err {last.err!r}), expected {case.status} "
                        f"({want})")
    elif want == codes["TSFFI_OK"]:
        try:
            value = json.loads(last.out)
        except (TypeError, ValueError) as exc:
            problems.append(f"result is not JSON: {last.out!r} ({exc})")
        else:
            if not isinstance(value, dict):
                problems.append(f"result is not a JSON object: {last.out!r}")
            elif case.fn in DIR_FUNCTIONS:
                read = value.pop("modelDir", "(missing)")
                name = case.reads or case.install
                want_dir = (os.fsdecode(paths[name]) if paths is not None and name is not None
                            else None)
                if not (isinstance(read, str) and read.startswith("/")) or \
                        (want_dir is not None and read != want_dir):
                    problems.append(f"modelDir {read!r}, expected "
                                    f"{want_dir or 'an absolute path'}")
            if case.json is not None:
                problems += match(case.json, value)
    elif case.message is not None:
        if isinstance(case.message, Has):
            problems += match(case.message, last.err, "last_error")
        elif last.err != case.message:
            problems.append(f"last error {last.err!r}\n   expected {case.message!r}")
    assert not problems, f"case {case.id}:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------------
# The C host's wire: case files in, result lines out.

def _field(arg) -> str:
    if arg is None:
        return "-"
    if arg == PREVIOUS:
        return "@"
    return "x" + bytes(arg).hex()


def case_file_lines(cases: list[Case], paths: dict[str, Path]) -> tuple[list[str], list[slice]]:
    """The case file for tests/c/case_host.c and, per case, the slice of output
    lines (after the leading "abi N" line) that hold its calls."""
    lines, spans = [], []
    for case in cases:
        start = len(lines)
        lines += call_lines(calls_for(case, paths))
        spans.append(slice(start, len(lines)))
    return lines, spans


def call_lines(calls: list[Call]) -> list[str]:
    out = []
    for call in calls:
        a = _field(call.args[0]) if len(call.args) > 0 else "-"
        b = _field(call.args[1]) if len(call.args) > 1 else "-"
        out.append("\t".join((call.fn, a, b, "nullout" if call.null_out else "-")))
    return out


def unescape(text: str) -> str:
    """Undo case_host.c's escaping (\\xNN for bytes outside 0x20..0x7e and '\\')."""
    raw = bytearray()
    i = 0
    data = text.encode("ascii")
    while i < len(data):
        if data[i] == 0x5C and data[i + 1:i + 2] == b"x":
            raw.append(int(data[i + 2:i + 4], 16))
            i += 4
        else:
            raw.append(data[i])
            i += 1
    return raw.decode("utf-8")


def parse_host_line(line: str, fn: str) -> Outcome:
    """One result line of case_host.c: FN status=N out=... err=...[ ERRLEN=...]"""
    prefix = f"{fn} status="
    assert line.startswith(prefix), f"unexpected host line {line!r} (for {fn})"
    rest = line[len(prefix):]
    status_text, rest = rest.split(" out=", 1)
    out_text, err_text = rest.rsplit(" err=", 1) if " err=" in rest else (rest, "")
    problems = []
    if " ERRLEN=" in err_text:
        err_text, lengths = err_text.split(" ERRLEN=", 1)
        problems.append(f"tsffi_last_error lengths disagree (NULL query/full copy/strlen): "
                        f"{lengths}")
    untouched = out_text == "GARBAGE"
    out = None if out_text in ("NULL", "GARBAGE") else unescape(out_text)
    return Outcome(int(status_text), out, unescape(err_text), untouched, problems)


# Every function with valid arguments, for the library that cannot start its
# runtime: each must return TSFFI_ERR_RUNTIME (twice: "every later call returns
# it too"), never TSFFI_OK.
def runtime_calls(paths: dict[str, Path]) -> list[Call]:
    d = os.fsencode(paths["mtp"])
    choice = json.dumps(CHOICE_MTP).encode()
    once = [Call("build_info", []),
            Call("resolve_drafter", [d, None]),
            Call("draft_policies", [choice, b"{}"]),
            Call("resolve_speculation", [b"{}"]),
            Call("speculation_plan", [d, b"{}"]),
            Call("install_info", [d]),
            Call("speculation_choices", [d, b"{}"])]
    return once + once


# ---------------------------------------------------------------------------
# The table as JSON, for a host that cannot import this module (the Swift
# tests): the original module's texts, the header's status codes, the install names
# (written by materialize) and every case. Byte arguments are
# {"null": true} (a NULL pointer), {"text": ...} (UTF-8 without a NUL) or
# {"hex": ...}; expectations are tagged, {"has": [parts]}, {"subset": {...}},
# {"object": {...}}, {"array": [...]} or {"value": scalar}, so that no
# expected value can be mistaken for a matcher.

def _arg_json(arg) -> dict:
    if arg is None:
        return {"null": True}
    try:
        text = bytes(arg).decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": bytes(arg).hex()}
    return {"text": text} if "\0" not in text else {"hex": bytes(arg).hex()}


def _expect_json(expected) -> dict:
    if isinstance(expected, Has):
        return {"has": list(expected.parts)}
    if isinstance(expected, Subset):
        return {"subset": {k: _expect_json(v) for k, v in expected.items.items()}}
    if isinstance(expected, dict):
        return {"object": {k: _expect_json(v) for k, v in expected.items()}}
    if isinstance(expected, list):
        return {"array": [_expect_json(v) for v in expected]}
    assert expected is None or isinstance(expected, (bool, int, float, str)), expected
    return {"value": expected}


def _case_json(case: Case) -> dict:
    out = {"id": case.id, "fn": case.fn, "status": case.status, "install": case.install,
           "options": _arg_json(case.options), "reads": case.reads, "nullOut": case.null_out}
    if case.model_dir is not UNSET:
        out["modelDir"] = _arg_json(case.model_dir)
    if isinstance(case.choice, Chain):
        out["chain"] = {"install": case.choice.install, "options": _arg_json(case.choice.options)}
    else:
        out["choice"] = _arg_json(case.choice)
    if case.json is not None:
        out["json"] = _expect_json(case.json)
    if case.message is not None:
        out["message"] = _expect_json(case.message)
    return out


def table_json(header: Path) -> dict:
    """The whole table as one JSON object (see above)."""
    statuses = {name: value for name, value in header_codes(header).items()
                if name == "TSFFI_OK" or name.startswith("TSFFI_ERR_")}
    return {
        "originalModule": {"dflashNote": DFLASH_NOTE, "sampledReason": SAMPLED_REASON,
                 "refusalPrefix": REFUSAL_PREFIX, "visionBlocker": VISION_BLOCKER,
                 "utf8Blocker": UTF8_BLOCKER},
        "engine": {"engine": ENGINE, "engineVersion": ENGINE_VERSION, "noHead": NO_HEAD},
        "statuses": statuses,
        "installs": list(INSTALLS),
        "cases": [_case_json(case) for case in CASES],
    }


if __name__ == "__main__":
    # python3 tests/abi_cases.py OUT.json: what swift/run-tests.sh runs, with
    # the repository root on PYTHONPATH.
    import sys

    _root = Path(__file__).resolve().parent.parent
    _target = Path(sys.argv[1])
    _target.parent.mkdir(parents=True, exist_ok=True)
    _target.write_text(json.dumps(table_json(_root / "include" / "tsffi.h"),
                                  ensure_ascii=False, indent=1) + "\n")
