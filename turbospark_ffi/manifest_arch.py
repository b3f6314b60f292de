"""The install's architecture, as the engine's open reads it first: the
`arch` object of `manifest.json` (TURBOSPARK_FACTS.md section 11; the
manifest peek and `ManifestArch` of revision 54bc43a).

The open reads `manifest.json` whole, parses it as a serde_json `Value`,
takes `value["arch"]` (null when the file is not an object or has no such
key) and decodes that into `ManifestArch`: 21 required fields, 67 optional
ones, camelCase, unknown keys ignored. Then the family: absent is `gemma4`, an
unknown one and `deepseekV4Flash` are refused. Every refusal is status 2 with
the open's bare message (errors.OpenRefused, stage "manifest"), and this
module words them as serde does when it decodes a `Value` into a derived
struct -- no line and column, since the text was parsed already:

- a field's value of the wrong JSON type: `invalid type: <what>, expected
  <type>` (`i64`, `f64`, `a boolean`, `a string`, `a sequence`, `an array of
  length 3`), checked in the order the keys appear in the file;
- an integer past i64: `invalid value: integer `N`, expected i64`;
- then the first required field missing, in declaration order:
  ``missing field `hiddenSize` ``;
- `arch` that is not an object: `invalid type: <what>, expected struct
  ManifestArch`; an array is read positionally, as a derived struct reads a
  sequence.

What the speculation decision then uses: `numExperts` (the blockers' MoE
arm, and the DFlash2 drafter's MoE refusal), `numLayers` and
`fullAttentionLayerMask` (the probe layer), `visionDepth` (the vision arm),
`hiddenSize` and `vocabSize` (the DFlash2 shape checks), and the family
(only `qwen35` and `qwen36` build a drafter).
"""

from __future__ import annotations

import os

from ._value import Value
from .engine_texts import (FAMILY_NOT_SUPPORTED, MANIFEST_ARCH, MANIFEST_JSON, NO_MANIFEST,
                           OS_ERROR, UNKNOWN_FAMILY)
from .errors import OpenRefused
from .regular_file import NotReadable, read_bounded
from .typed_json import ANY, TypedJsonError, decode, fast_float, shallow

__all__ = ["MANIFEST_NAME", "MAX_MANIFEST_BYTES", "FAMILIES", "DRAFTER_FAMILIES",
           "ManifestArch", "load_manifest_arch", "arch_from_value"]

MANIFEST_NAME = "manifest.json"
# The open has no cap; this library's, so a runaway file is refused in
# bounded memory: a real manifest (a SHA-256 per file and the arch) is a
# few kilobytes.
MAX_MANIFEST_BYTES = 64 << 20

# `ModelFamily::parse`: the spellings the engine knows, exact.
FAMILIES = ("gemma4", "qwen36", "deepseekV4Flash", "llama", "qwen3moe", "gptOss", "qwen35",
            "museGlimmer", "qwen4exp", "spark2_5", "qwen3", "minimax_m2", "qwen2",
            "deepseek2", "qwen3_vl")
DEFAULT_FAMILY = "gemma4"
# The families whose runner builds a speculative drafter (FACTS section 12):
# qwen35 is the dense one, qwen36 the MoE one.
DRAFTER_FAMILIES = frozenset(("qwen35", "qwen36"))

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

_U64_MAX = (1 << 64) - 1
_BYTE = 0xFF  # the engine's peek stores each mask value `as u8`

# serde's names of what a JSON value of each kind is, and of what a Rust
# type expects (its `expecting`).
_I64, _F64, _BOOL, _STRING = "i64", "f64", "a boolean", "a string"
_VEC_I64 = ("seq", _I64)
_ARRAY3_I64 = ("array3", _I64)

# ManifestArch's fields in declaration order: (JSON key, type, required).
_REQUIRED = (
    ("hiddenSize", _I64), ("ffnIntermediate", _I64), ("moeIntermediateSize", _I64),
    ("numHeads", _I64), ("numKVHeads", _I64), ("numFullKVHeads", _I64), ("headDim", _I64),
    ("fullHeadDim", _I64), ("vocabSize", _I64), ("slidingWindow", _I64),
    ("finalLogitSoftcap", _F64), ("ropeTheta", _F64), ("fullRopeTheta", _F64),
    ("partialRotaryFactor", _F64), ("numLayers", _I64), ("numExperts", _I64),
    ("topKExperts", _I64), ("tieWordEmbeddings", _BOOL), ("attentionKEqV", _BOOL),
    ("hiddenActivation", _STRING), ("fullAttentionLayerMask", _VEC_I64),
)
_OPTIONAL = (
    ("family", _STRING), ("attnOutputGate", _BOOL), ("attentionScale", _F64),
    ("embeddingScaledBySqrtHidden", _BOOL), ("routerScaled", _BOOL),
    ("ffnSandwichNorms", _BOOL), ("sharedExpertGated", _BOOL), ("ropeNeoxSubdim", _BOOL),
    ("linearNumKHeads", _I64), ("linearNumVHeads", _I64), ("linearKeyHeadDim", _I64),
    ("linearValueHeadDim", _I64), ("linearConvKernelSize", _I64),
    ("linearOutputGateSigmoid", _BOOL),
    ("caQLoraRank", _I64), ("caOLoraRank", _I64), ("caOGroups", _I64), ("caRopeHeadDim", _I64),
    ("caIndexNHeads", _I64), ("caIndexHeadDim", _I64), ("caIndexTopK", _I64),
    ("caCSACompressRate", _I64), ("caHCACompressRate", _I64), ("caCompressRopeTheta", _F64),
    ("caRopeScalingFactor", _F64), ("caRopeScalingOriginalMax", _I64),
    ("caRopeScalingBetaFast", _F64), ("caRopeScalingBetaSlow", _F64),
    ("caIndexKvHeads", _I64), ("caIndexBudget", _I64),
    ("hcMult", _I64), ("hcSinkhornIters", _I64), ("hcEps", _F64), ("hcLowrank", _I64),
    ("pleNgramSize", _I64), ("pleHeadsPerNgram", _I64), ("pleNgramVocabSizeBase", _I64),
    ("pleMakeDivisibleBy", _I64), ("pleSplitNgramParts", _I64), ("pleEmbedDim", _I64),
    ("pleConvKernelSize", _I64), ("pleLayerIds", _VEC_I64), ("pleSeed", _I64),
    ("pleEosTokenId", _I64), ("numHashRoutedLayers", _I64), ("routerScoringFunc", _STRING),
    ("routedScalingFactor", _F64), ("swigluLimit", _F64),
    ("ropeScalingFactor", _F64), ("ropeScalingOriginalContext", _I64),
    ("ropeScalingBetaFast", _F64), ("ropeScalingBetaSlow", _F64),
    ("visionDepth", _I64), ("visionHiddenSize", _I64), ("visionIntermediateSize", _I64),
    ("visionNumHeads", _I64), ("visionPatchSize", _I64), ("visionTemporalPatchSize", _I64),
    ("visionInChannels", _I64), ("visionSpatialMergeSize", _I64),
    ("visionNumPositionEmbeddings", _I64), ("visionOutHiddenSize", _I64),
    ("visionMropeSection", _ARRAY3_I64), ("visionStartTokenId", _I64),
    ("visionEndTokenId", _I64), ("visionImageTokenId", _I64), ("visionVideoTokenId", _I64),
)
_FIELDS = tuple((key, tp, True) for key, tp in _REQUIRED) + \
    tuple((key, tp, False) for key, tp in _OPTIONAL)
_BY_KEY = {key: (tp, required) for key, tp, required in _FIELDS}
_REQUIRED_KEYS = frozenset(key for key, _tp in _REQUIRED)
_STRUCT = "struct ManifestArch"


class ManifestArch(Value):
    """What the speculation decision reads of the manifest's `arch`.
    `full_attention_layer_mask` holds each value truncated to a byte, as the
    engine's peek stores it (`v as u8`)."""

    __slots__ = ("family", "hidden_size", "vocab_size", "num_layers", "num_experts",
                 "full_attention_layer_mask", "vision_depth")

    def __init__(self, family: str, hidden_size: int, vocab_size: int, num_layers: int,
                 num_experts: int, full_attention_layer_mask: tuple[int, ...],
                 vision_depth: int) -> None:
        self._init(family=family, hidden_size=hidden_size, vocab_size=vocab_size,
                   num_layers=num_layers, num_experts=num_experts,
                   full_attention_layer_mask=full_attention_layer_mask,
                   vision_depth=vision_depth)

    @property
    def builds_drafters(self) -> bool:
        """Whether the family's runner builds a speculative drafter at all."""
        return self.family in DRAFTER_FAMILIES

    def first_full_attention_layer(self) -> int | None:
        """The first layer L in 0..numLayers the mask does not mark linear (2):
        full attention (1) and sliding window (0) both count, as for the
        engine's blockers. A mask shorter than numLayers ends the search."""
        mask = self.full_attention_layer_mask
        for layer in range(min(max(self.num_layers, 0), len(mask))):
            if mask[layer] != 2:
                return layer
        return None

    def to_dict(self) -> dict:
        """The facts as `tsffi_install_info_json` reports them."""
        return {"family": self.family, "hiddenSize": self.hidden_size,
                "vocabSize": self.vocab_size, "numLayers": self.num_layers,
                "numExperts": self.num_experts,
                "fullAttentionLayerMask": list(self.full_attention_layer_mask),
                "visionDepth": self.vision_depth,
                "firstFullAttentionLayer": self.first_full_attention_layer()}


def _refuse(template: str, **fields: str) -> OpenRefused:
    return OpenRefused(template.format(**fields), stage="manifest")


def _io_error(exc) -> str:
    """An io::Error's Display for what the bounded reader could not read."""
    import errno as errnos
    if exc.check == "not_regular_file" and exc.text.startswith("is a directory"):
        # The engine's plain read opens a directory and fails reading it.
        return OS_ERROR.format(text=os.strerror(errnos.EISDIR), errno=errnos.EISDIR)
    if exc.errno is not None:
        return OS_ERROR.format(text=os.strerror(exc.errno), errno=exc.errno)
    # A FIFO, a device, a runaway size: the engine's plain read would wait or
    # read on; this preview refuses in its own words.
    return f"{exc.text} (this preview reads only a regular file)"


def load_manifest_arch(model_dir: str) -> ManifestArch:
    """The architecture of the install at `model_dir` (the directory as the
    open names it: the refusals quote its path), or OpenRefused in the
    open's words."""
    path = os.path.join(model_dir, MANIFEST_NAME)
    try:
        data, _info = read_bounded(path, MAX_MANIFEST_BYTES)
    except NotReadable as exc:
        raise _refuse(NO_MANIFEST, path=path, error=_io_error(exc)) from None
    return arch_from_text(data)


def arch_from_text(data: bytes) -> ManifestArch:
    """`manifest.json`'s bytes to its architecture, or OpenRefused."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # serde_json reads bytes: invalid UTF-8 is refused where a string
        # holds it. The lossy text parses the same structure, so a file
        # invalid only inside strings is still refused, at that string.
        text = data.decode("utf-8", "replace")
        bad_inside_strings = True
    else:
        bad_inside_strings = False
    value = _scanned(text)
    if value is _SLOW:
        try:
            value = decode(text, ANY)
        except TypedJsonError as exc:
            raise _refuse(MANIFEST_JSON, error=exc.text) from None
        except RecursionError:
            raise _refuse(MANIFEST_JSON, error="recursion limit exceeded") from None
    if bad_inside_strings:
        raise _refuse(MANIFEST_JSON, error="invalid unicode code point")
    arch = value.get("arch") if isinstance(value, dict) else None
    return arch_from_value(arch)


def arch_from_value(arch: object) -> ManifestArch:
    """The `arch` value (as typed_json decodes JSON: None, bool, int, float,
    str, list, dict) to its architecture, or OpenRefused in the open's words."""
    try:
        fields = _decode_struct(arch)
    except _Invalid as exc:
        raise _refuse(MANIFEST_ARCH, error=str(exc)) from None
    family = fields.get("family")
    if family is None:
        family = DEFAULT_FAMILY
    elif family not in FAMILIES:
        from .rust_text import rust_debug_str
        raise _refuse(UNKNOWN_FAMILY, raw=rust_debug_str(family))
    if family == "deepseekV4Flash":
        raise _refuse(FAMILY_NOT_SUPPORTED)
    vision_depth = fields.get("visionDepth")
    return ManifestArch(family, fields["hiddenSize"], fields["vocabSize"], fields["numLayers"],
                        fields["numExperts"],
                        tuple(map(_BYTE.__and__, fields["fullAttentionLayerMask"])),
                        0 if vision_depth is None else vision_depth)


_SLOW = object()


class _Refused(Exception):
    """A literal serde_json's Value refuses: the exact path words it."""


def _finite(literal: str) -> float:
    number = fast_float(literal)
    if type(number) is not float:
        raise _Refused(literal)
    return number


def _refuse_constant(name: str) -> object:
    raise _Refused(name)  # NaN, Infinity: not JSON to serde either


_scan = None


def _scanned(text: str) -> object:
    """The document as serde_json's `Value` holds it, from the C scanner of
    `_json`, or _SLOW when the scan cannot vouch for serde's answer: a text
    too deep for its C stack, an escape that may be a lone surrogate, a
    `-0` (an f64 to serde, 0 to the scanner), a number serde refuses, or
    any syntax error (typed_json words those). Measured: 1.6 KB of a real
    manifest in ~10 us, against ~40 us through typed_json's own fast path,
    which checks every value of a document it could not pre-screen."""
    global _scan
    if not shallow(text) or "\\ud" in text or "\\uD" in text or "-0" in text:
        return _SLOW
    if _scan is None:
        import _json

        class _Context:
            strict = True
            object_hook = None
            object_pairs_hook = None
            parse_float = staticmethod(_finite)
            parse_int = int
            parse_constant = staticmethod(_refuse_constant)
            memo = None
        _scan = _json.make_scanner(_Context)
    start, end = 0, len(text)
    while start < end and text[start] in " \t\n\r":
        start += 1
    try:
        value, at = _scan(text, start)
    except Exception:  # StopIteration, _Refused, a syntax error: the exact path's
        return _SLOW
    while at < end and text[at] in " \t\n\r":
        at += 1
    return value if at == end else _SLOW


class _Invalid(Exception):
    """serde's de::Error::custom text."""


def _unexpected(value: object) -> str:
    """serde's `Unexpected` of a decoded JSON value."""
    from .rust_text import json_f64, rust_debug_str
    if value is None:
        return "null"
    if value is True or value is False:
        return f"boolean `{'true' if value else 'false'}`"
    if type(value) is int:
        return f"integer `{value}`"
    if type(value) is float:
        return f"floating point `{json_f64(value)}`"
    if type(value) is str:
        return "string " + rust_debug_str(value)
    if type(value) is list:
        return "sequence"
    return "map"


def _invalid_type(value: object, expecting: str) -> _Invalid:
    return _Invalid(f"invalid type: {_unexpected(value)}, expected {expecting}")


def _all_i64(values: list) -> bool:
    """Whether a non-empty list holds only ints within i64, checked in C
    (the common case of a layer mask): serde decodes it unchanged."""
    return bool(values) and set(map(type, values)) == {int} and \
        _I64_MIN <= min(values) and max(values) <= _I64_MAX


def _decode(value: object, tp) -> object:
    if tp == _I64:
        if type(value) is int:
            if _I64_MIN <= value <= _I64_MAX:
                return value
            if value > _U64_MAX or value < _I64_MIN:
                # serde_json's Value holds such a literal as an f64.
                raise _invalid_type(fast_float(str(value)), _I64)
            raise _Invalid(f"invalid value: integer `{value}`, expected i64")
        raise _invalid_type(value, _I64)
    if tp == _F64:
        if type(value) in (int, float):
            return float(value)
        raise _invalid_type(value, _F64)
    if tp == _BOOL:
        if value is True or value is False:
            return value
        raise _invalid_type(value, _BOOL)
    if tp == _STRING:
        if type(value) is str:
            return value
        raise _invalid_type(value, _STRING)
    kind, element = tp
    if kind == "seq":
        if type(value) is not list:
            raise _invalid_type(value, "a sequence")
        if element == _I64 and _all_i64(value):
            return value
        return [_decode(item, element) for item in value]
    # [i64; 3]
    if type(value) is not list:
        raise _invalid_type(value, "an array of length 3")
    items = [_decode(item, element) for item in value[:3]]
    if len(value) < 3:
        raise _Invalid(f"invalid length {len(value)}, expected an array of length 3")
    if len(value) > 3:
        raise _Invalid(f"invalid length {len(value)}, expected fewer elements in array")
    return items


# What a well-formed arch holds, checked in one pass: the required fields
# by type (Python's int is not a bool here: `type(...) is`), and no
# optional field but these two of the types the decision reads. Measured:
# ~3 us against ~10 us for serde's visit, key by key.
_INT_KEYS = tuple(key for key, tp in _REQUIRED if tp == _I64)
_FLOAT_KEYS = tuple(key for key, tp in _REQUIRED if tp == _F64)
_BOOL_KEYS = tuple(key for key, tp in _REQUIRED if tp == _BOOL)
_PLAIN_OPTIONAL = {"family": str, "visionDepth": int}


def _plain_fields(value: dict) -> dict | None:
    """`value`'s fields when every one is plainly what serde accepts (the
    answer serde's visit gives then), else None: serde's visit decides and
    words any refusal."""
    get = value.get
    for key in _INT_KEYS:
        v = get(key)
        if type(v) is not int or not _I64_MIN <= v <= _I64_MAX:
            return None
    for key in _FLOAT_KEYS:
        if type(get(key)) not in (int, float):
            return None
    for key in _BOOL_KEYS:
        if type(get(key)) is not bool:
            return None
    mask = get("fullAttentionLayerMask")
    if type(get("hiddenActivation")) is not str or type(mask) is not list or \
            (mask and not _all_i64(mask)):
        return None
    for key in value.keys() - _REQUIRED_KEYS:
        if key in _BY_KEY and not (key in _PLAIN_OPTIONAL and (
                value[key] is None or type(value[key]) is _PLAIN_OPTIONAL[key])):
            return None
    if type(get("visionDepth")) is int and not _I64_MIN <= value["visionDepth"] <= _I64_MAX:
        return None
    return value


def _decode_struct(value: object) -> dict:
    """serde's derived `visit_map` (an object) or `visit_seq` (an array) of
    ManifestArch over a Value; the fields it decoded, by JSON key."""
    if type(value) is dict:
        plain = _plain_fields(value)
        if plain is not None:
            return plain
        return _visit(value)
    return _visit_seq(value)


def _visit(value: dict) -> dict:
    """serde's derived `visit_map`, key by key in the map's order."""
    fields: dict = {}
    # A Value's map holds each key once (the last value, in the first key's
    # place), as Python's dict does.
    for key, item in value.items():
        known = _BY_KEY.get(key)
        if known is None:
            continue
        tp, required = known
        fields[key] = None if item is None and not required else _decode(item, tp)
    for key, _tp, required in _FIELDS:
        if required and key not in fields:
            raise _Invalid(f"missing field `{key}`")
    return fields


def _visit_seq(value: object) -> dict:
    """serde's derived `visit_seq` (an array read positionally), or the
    refusal of any other JSON value."""
    if type(value) is not list:
        raise _invalid_type(value, _STRUCT)
    fields = {}
    for position, (key, tp, required) in enumerate(_FIELDS):
        if position >= len(value):
            if required:
                raise _Invalid(f"invalid length {position}, expected {_STRUCT} with "
                               f"{len(_FIELDS)} elements")
            break
        item = value[position]
        fields[key] = None if item is None and not required else _decode(item, tp)
    if len(value) > len(_FIELDS):
        raise _Invalid(f"invalid length {len(value)}, expected fewer elements in array")
    return fields
