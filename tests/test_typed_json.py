"""turbospark_ffi.typed_json decodes as serde_json 1.0.151 does, and
rust_text writes values as Rust does.

Three tables hold it:
- tests/data/typed_json_oracle.jsonl: 6,745 generated texts with the answers
  of a serde oracle (tests/oracle/: the engine's option struct of revision
  0a45c54 under serde derive, built from Debian's serde sources patched to
  the engine's pins);
- tests/data/engine_options_sample.jsonl (a copy of ../shared/reference's): the engine's own measured
  answers; every status-4 line's message is "options: " + our text (the lines
  whose meaning changed at 0a45c54 read as test_engine_options.AT_0A45C54 says);
- the written-out tables below, for the API's shapes and Rust's value texts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from turbospark_ffi import typed_json as tj
from turbospark_ffi.rust_text import compact, json_f64, rust_debug_str, rust_display_f64
from turbospark_ffi.typed_json import (ANY, BOOL, F64, STRING, U32, U64, Enum, Field, Option,
                                       Seq, Struct, StructValue, TypedJsonError, decode)

ROOT = Path(__file__).resolve().parent.parent
ORACLE_TABLE = ROOT / "tests" / "data" / "typed_json_oracle.jsonl"
ENGINE_SAMPLE = ROOT / "tests" / "data" / "engine_options_sample.jsonl"

# TURBOSPARK_FACTS.md section 10 ("What 0a45c54 changed"): the open's 18
# fields in declaration (= positional) order, as tests/oracle/src/main.rs
# declares them; every one is optional (null = absent). Written out here, not
# taken from turbospark_ffi.options, so the table checks the library's struct.
OPEN_OPTIONS = Struct("OpenOptions", tuple(Field(name, Option(tp)) for name, tp in [
    ("maxContext", ANY), ("expertCacheSlots", ANY), ("expertResidency", STRING),
    ("powerProfile", STRING), ("loadGuard", ANY), ("minAutoContext", U32),
    ("maxTokensPerSec", F64), ("speculation", ANY), ("speculativeDrafter", STRING),
    ("steering", STRING), ("steeringMode", STRING), ("steeringScale", F64),
    ("steeringLayers", STRING), ("steeringTarget", F64), ("steeringGate", F64),
    ("visionSidecar", STRING), ("kvBits", STRING), ("prefixReuse", BOOL)]))
# The oracle's `Strict` (tests/oracle/src/main.rs): required fields, a Vec, an enum.
STRICT = Struct("Strict", (
    Field("name", STRING, True), Field("count", U64, True), Field("flags", Seq(BOOL), True),
    Field("mode", Enum("Mode", ("fast", "slow", "off")), True),
    Field("opt", Option(F64), True)))
ROOTS = {"open": OPEN_OPTIONS, "strict": STRICT, "value": ANY}


def oracle_rows() -> tuple[dict, list[dict]]:
    # split("\n"), not splitlines(): a row's text may hold U+2028 and its kin
    lines = ORACLE_TABLE.read_text(encoding="utf-8").rstrip("\n").split("\n")
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def answer(root: str, text: str) -> tuple:
    """Our answer in the oracle's shape: (ok, message, fields as serde_json text)."""
    try:
        value = decode(text, ROOTS[root], capture=frozenset())
    except TypedJsonError as exc:
        return False, exc.text, None
    if root == "value":
        return True, None, {"value": compact(value)}
    return True, None, {name: compact(v) for name, v in value.fields.items()}


def test_the_oracle_table_records_its_serde_version():
    header, rows = oracle_rows()
    assert header["oracle"].startswith("serde_json 1.0.87 + serde_derive 1.0.152")
    assert "serde_json 1.0.151 / serde 1.0.229" in header["oracle"]
    assert header["rows"] == len(rows) == 6745


def test_the_librarys_option_struct_is_the_oracles():
    """The table is decoded against OPEN_OPTIONS; the open's preview decodes
    against the struct options.OPTION_TABLE declares: they must be one."""
    from turbospark_ffi import options
    assert options._open_options() == OPEN_OPTIONS


def test_every_oracle_row_gets_the_oracles_answer():
    _, rows = oracle_rows()
    wrong = [(r["root"], r["text"][:200], (r["ok"], r["message"], r["fields"]), got)
             for r in rows if (got := answer(r["root"], r["text"]))
             != (r["ok"], r["message"], r["fields"])]
    assert wrong == []


def test_the_oracle_table_reaches_every_error_and_every_patched_rule():
    """Discrimination: every serde error kind is some row's answer, so a
    decoder wrong on any one fails the table; and the rows where Debian's
    unpatched serde answers otherwise cover each of the four patched rules,
    so a decoder following Debian's sources fails too."""
    _, rows = oracle_rows()
    messages = [r["message"] for r in rows if r["message"]]
    kinds = [value for name, value in vars(tj).items()
             if name.isupper() and not name.startswith("_") and isinstance(value, str)]
    assert len(kinds) == 19
    for kind in kinds + ["invalid type: ", "invalid value: ", "duplicate field `",
                         "missing field `", "invalid length ", "unknown variant `"]:
        assert any(m.startswith(kind) for m in messages), kind
    debian = [r for r in rows if "debian" in r]
    assert any("floating point `1`" in (r["debian"]["message"] or "")
               and "floating point `1.0`" in r["message"] for r in debian)
    assert any(r["text"].startswith("[") and r["ok"] and r["debian"]["message"].startswith(
        "invalid length") for r in debian)
    assert any("\\u" in r["text"] and (r["message"] or "").startswith("invalid escape")
               and r["debian"]["message"] != r["message"] for r in debian)
    assert any(r["ok"] and r["debian"]["message"] and "invalid number" in r["debian"]["message"]
               for r in debian)
    assert any(r["ok"] and r["debian"]["ok"] and "e+" in json.dumps(r["fields"])
               and "e+" not in json.dumps(r["debian"]["fields"]) for r in debian)


def test_rust_display_f64_is_what_debians_serde_printed_for_the_same_float():
    """Debian's serde shows a float with Rust's `{}`, 1.0.151 with zmij: each
    row where they differ pairs the two texts of one double."""
    _, rows = oracle_rows()
    pairs = []
    for r in rows:
        old, new = (r.get("debian") or {}).get("message") or "", r["message"] or ""
        if "floating point `" in old and "floating point `" in new:
            shown = old.split("floating point `")[1].split("`")[0]
            zmij = new.split("floating point `")[1].split("`")[0]
            pairs.append((shown, rust_display_f64(float(zmij)), zmij, json_f64(float(zmij))))
    assert len(pairs) > 100
    assert [(a, c) for a, b, c, d in pairs if a != b or c != d] == []


def engine_sample() -> list[dict]:
    """The sample's lines with the status and message of 0a45c54's open: the
    sample was measured before it (08aaf13, 16 fields), and the lines whose
    meaning changed are answered by test_engine_options.AT_0A45C54, the one
    place they are written out (the regenerated oracle gives the same texts)."""
    from test_engine_options import AT_0A45C54
    lines = [json.loads(line) for line in ENGINE_SAMPLE.read_text().splitlines()]
    for number, (status, message) in AT_0A45C54.items():
        lines[number] = {**lines[number], "status": status, "message": message}
    return lines


def sample_text(line: dict) -> str | None:
    """The text the open decodes: the C string up to its NUL, as UTF-8."""
    if line["text_hex"] == "null":
        return None
    raw = bytes.fromhex(line["text_hex"]).split(b"\0")[0]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_every_status_4_line_of_the_engine_sample_is_our_text():
    refused = [line for line in engine_sample() if line["status"] == 4]
    # 123 measured; 0a45c54 refuses 8 more (the two new keys typed, positions moved)
    assert len(refused) == 131
    got = []
    for line in refused:
        with pytest.raises(TypedJsonError) as caught:
            decode(sample_text(line), OPEN_OPTIONS)
        got.append("options: " + caught.value.text)
    assert got == [line["message"] for line in refused]


def test_the_engine_sample_lines_the_decoder_passes_are_not_refused():
    passed = [line for line in engine_sample() if line["status"] in (0, 2)
              and sample_text(line)]
    assert len(passed) == 265  # 273 measured, less those 8
    for line in passed:
        decode(sample_text(line), OPEN_OPTIONS)


def test_the_sample_discriminates_a_json_module_decoder():
    """Python's json accepts texts the engine refuses (a duplicate key, an
    integer for a string field) and words its refusals otherwise."""
    refused = [sample_text(line) for line in engine_sample() if line["status"] == 4]
    accepted_by_json = 0
    for text in refused:
        try:
            json.loads(text)
            accepted_by_json += 1
        except (ValueError, RecursionError):
            pass
    assert accepted_by_json > 50


STRUCT_CASES = [
    # text, fields, unknown_keys, captured
    ('{"speculativeDrafter":"mtp","speculation":2}',
     {"speculativeDrafter": "mtp", "speculation": 2}, (), {}),
    ('{"speculation":null,"kvBits":null,"x":1}', {}, ("x",), {}),
    ('{"x":1,"y":[1e400],"x":{"deep":[[[[-0]]]]},"":0}', {}, ("x", "y", ""), {}),
    ('{"tsffi":{"temperature":0.7},"speculation":3,"tsffi" : [ 1 , 2 ] }',
     {"speculation": 3}, (), {"tsffi": "[ 1 , 2 ]"}),
    ('{"maxContext":{"b":1,"a":2,"b":3},"loadGuard":[1,-1,1.5,-0,18446744073709551616]}',
     {"maxContext": {"b": 3, "a": 2}, "loadGuard": [1, -1, 1.5, -0.0, 1.8446744073709552e19]},
     (), {}),
    ('{"spec\\u0075lation":"2","steeringScale":3,"minAutoContext":4294967295}',
     {"speculation": "2", "steeringScale": 3.0, "minAutoContext": 4294967295}, (), {}),
    # 0a45c54's positions: expertResidency is third, so powerProfile fourth
    ('[null,null,null,"balanced",null,7,2.5,3,"dflash"]',
     {"powerProfile": "balanced", "minAutoContext": 7, "maxTokensPerSec": 2.5,
      "speculation": 3, "speculativeDrafter": "dflash"}, (), {}),
    ("[]", {}, (), {}),
    ('{"Speculation":2,"speculation ":3}', {}, ("Speculation", "speculation "), {}),
]


@pytest.mark.parametrize("text,fields,unknown,captured", STRUCT_CASES)
def test_a_struct_decodes_to_its_fields_unknown_keys_and_captured_text(
        text, fields, unknown, captured):
    value = decode(text, OPEN_OPTIONS)
    assert (value.fields, value.unknown_keys, value.captured) == (fields, unknown, captured)
    assert list(value.fields) == list(fields)  # the text's order


def test_fields_keep_the_texts_order_and_values_their_json_types():
    value = decode('{"kvBits":"4","maxContext":1.0,"speculation":-0,"loadGuard":true}',
                   OPEN_OPTIONS)
    assert list(value.fields) == ["kvBits", "maxContext", "speculation", "loadGuard"]
    assert [type(v) for v in value.fields.values()] == [str, float, float, bool]
    assert str(value.fields["speculation"]) == "-0.0"
    assert value == StructValue({"kvBits": "4", "maxContext": 1.0, "speculation": -0.0,
                                 "loadGuard": True}, (), {})


def test_without_capture_the_tsffi_key_is_an_unknown_key():
    value = decode('{"tsffi":{"a":1}}', OPEN_OPTIONS, capture=frozenset())
    assert (value.unknown_keys, value.captured) == (("tsffi",), {})


ERROR_CASES = [
    # text, serde_json's Display
    ('{"speculation":2,"speculation":3}', "duplicate field `speculation` at line 1 column 30"),
    ('{"speculation":2,"speculation"\n:3}', "duplicate field `speculation` at line 2 column 0"),
    ('{"speculativeDrafter":1}',
     "invalid type: integer `1`, expected a string at line 1 column 23"),
    ('{"powerProfile":1.0}',
     "invalid type: floating point `1.0`, expected a string at line 1 column 19"),
    ('{"minAutoContext":-1}', "invalid value: integer `-1`, expected u32 at line 1 column 20"),
    ('{"minAutoContext":1.0}',
     "invalid type: floating point `1.0`, expected u32 at line 1 column 21"),
    ('{"minAutoContext":"x"}', 'invalid type: string "x", expected u32 at line 1 column 21'),
    ('{"kvBits":[]}', "invalid type: sequence, expected a string at line 1 column 10"),
    ('{"kvBits":{"a":1}}', "invalid type: map, expected a string at line 1 column 10"),
    ('{"steeringGate":"a\\u0000b"}',
     'invalid type: string "a\\0b", expected f64 at line 1 column 26'),
    ("true", "invalid type: boolean `true`, expected struct OpenOptions at line 1 column 4"),
    ("null", "invalid type: null, expected struct OpenOptions at line 1 column 4"),
    ('"x"', 'invalid type: string "x", expected struct OpenOptions at line 1 column 3'),
    ("", "EOF while parsing a value at line 1 column 0"),
    (" ", "EOF while parsing a value at line 1 column 1"),
    ("{", "EOF while parsing an object at line 1 column 1"),
    ("[", "EOF while parsing a list at line 1 column 1"),
    ('{"a', "EOF while parsing a string at line 1 column 3"),
    ('{"x":1', "EOF while parsing an object at line 1 column 6"),
    ('{"x":[1', "EOF while parsing a list at line 1 column 7"),
    ('{"x":1 "y":2}', "expected `,` or `}` at line 1 column 8"),
    ('{"x":[1 2]}', "expected `,` or `]` at line 1 column 9"),
    ('{"loadGuard":[1 2]}', "expected `,` or `]` at line 1 column 17"),
    ('{"loadGuard":[1,]}', "trailing comma at line 1 column 17"),
    ('{"x":[1,]}', "expected value at line 1 column 9"),
    ('{"x":1,}', "trailing comma at line 1 column 8"),
    ('{"x" 1}', "expected `:` at line 1 column 6"),
    ("{x:1}", "key must be a string at line 1 column 2"),
    ('{"x":tru}', "expected ident at line 1 column 9"),
    ('{"x":01}', "invalid number at line 1 column 7"),
    ('{"loadGuard":1e400}', "number out of range at line 1 column 18"),
    ('{"x":"a\nb"}', "control character (\\u0000-\\u001F) found while parsing a string"
                     " at line 1 column 7"),
    ('{"kvBits":"a\nb"}', "control character (\\u0000-\\u001F) found while parsing a string"
                          " at line 2 column 0"),
    ('{"x":"\\q"}', "invalid escape at line 1 column 8"),
    ('{"kvBits":"\\u00zz"}', "invalid escape at line 1 column 17"),
    ('{"kvBits":"\\udc00"}', "lone leading surrogate in hex escape at line 1 column 17"),
    ('{"kvBits":"\\ud800"}', "unexpected end of hex escape at line 1 column 18"),
    ('{"kvBits":"\\ud800\\u0041"}', "lone leading surrogate in hex escape at line 1 column 23"),
    ('{"speculation":2}[]', "trailing characters at line 1 column 18"),
    # 18 fields since 0a45c54: the 18th element is prefixReuse, a 19th has no field
    ("[" + "null," * 17 + "1]",
     "invalid type: integer `1`, expected a boolean at line 1 column 87"),
    ("[" + "null," * 18 + "1]", "trailing characters at line 1 column 92"),
    ("\ufeff{}", "expected value at line 1 column 1"),
    ('{"é":1,"kvBits":1}', "invalid type: integer `1`, expected a string at line 1 column 18"),
]


@pytest.mark.parametrize("text,message", ERROR_CASES)
def test_each_refusal_is_serde_jsons_text(text, message):
    with pytest.raises(TypedJsonError) as caught:
        decode(text, OPEN_OPTIONS)
    assert caught.value.text == message
    assert str(caught.value) == message
    assert caught.value.text == (f"{caught.value.message} at line {caught.value.line}"
                                 f" column {caught.value.column}")


def test_an_ignored_value_is_skipped_unconverted_and_unchecked_for_range():
    assert decode('{"x":1e400,"y":18446744073709551616,"z":-0}', OPEN_OPTIONS).fields == {}


STRICT_CASES = [
    ('{"name":"n"}', "missing field `count` at line 1 column 12"),
    ('["n",3]', "invalid length 2, expected struct Strict with 5 elements at line 1 column 7"),
    ('{"name":"n","count":1,"flags":[],"mode":"Fast"}',
     "unknown variant `Fast`, expected one of `fast`, `slow`, `off` at line 1 column 46"),
    ('{"name":"n","count":-1,"flags":[],"mode":"fast"}',
     "invalid value: integer `-1`, expected u64 at line 1 column 22"),
    ('{"name":"n","count":1,"flags":true,"mode":"fast"}',
     "invalid type: boolean `true`, expected a sequence at line 1 column 34"),
    ('{"name":"n","count":1,"flags":[1],"mode":"fast"}',
     "invalid type: integer `1`, expected a boolean at line 1 column 32"),
    ('{"name":"n","count":1,"flags":[],"mode":{"fast":null},"x":0}', None),
]


@pytest.mark.parametrize("text,message", STRICT_CASES)
def test_required_fields_sequences_and_enums_refuse_as_serde_does(text, message):
    if message is None:
        value = decode(text, STRICT)
        assert value.fields == {"name": "n", "count": 1, "flags": [], "mode": "fast"}
        assert value.unknown_keys == ("x",)
        return
    with pytest.raises(TypedJsonError) as caught:
        decode(text, STRICT)
    assert caught.value.text == message


def test_values_past_128_levels_are_refused_where_serde_counts_them():
    """The struct counts as one level: the 127th `[` under a known key is
    refused; an ignored key's value has no limit at all (ignore_value is
    iterative, and so is ours: no RecursionError, no C stack)."""
    ok = '{"speculation":' + "[" * 126 + "]" * 126 + "}"
    nested, depth = decode(ok, OPEN_OPTIONS).fields["speculation"], 1
    while nested:
        nested, depth = nested[0], depth + 1
    assert depth == 126
    with pytest.raises(TypedJsonError) as caught:
        decode('{"speculation":' + "[" * 127 + "]" * 127 + "}", OPEN_OPTIONS)
    assert caught.value.text == "recursion limit exceeded at line 1 column 142"
    deep = '{"x":' + "[" * 100_000 + "]" * 100_000 + ',"y":' + '{"a":' * 50_000 + "0" + \
        "}" * 50_000 + ',"speculation":2}'
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)  # ours needs no deep Python stack for an ignored value
    try:
        value = decode(deep, OPEN_OPTIONS)
    finally:
        sys.setrecursionlimit(limit)
    assert (value.fields, value.unknown_keys) == ({"speculation": 2}, ("x", "y"))
    with pytest.raises(TypedJsonError) as caught:
        decode('{"loadGuard":' + "[" * 100_000, OPEN_OPTIONS)
    assert caught.value.text == "recursion limit exceeded at line 1 column 140"


def test_floats_are_parsed_as_serde_json_parses_them_not_correctly_rounded():
    """serde_json without float_roundtrip multiplies the decimal significand
    by a power of ten: 12345678901234567.0 is 1.2345678901234566e16 to the
    engine, where Python's float() says 1.2345678901234568e16."""
    value = decode('{"maxContext":12345678901234567.0,"loadGuard":0.1}', OPEN_OPTIONS)
    assert value.fields == {"maxContext": 1.2345678901234566e16, "loadGuard": 0.1}
    assert float("12345678901234567.0") == 1.2345678901234568e16


def test_the_declared_types_are_frozen_values():
    assert Option(STRING) == Option(STRING) and hash(Seq(U32)) == hash(Seq(U32))
    assert Option(STRING) != Option(U32)
    with pytest.raises(AttributeError):
        STRING.kind = "x"
    with pytest.raises(AttributeError):
        OPEN_OPTIONS.fields[0].name = "x"
    with pytest.raises(TypeError, match="decode: text must be str, got bytes"):
        decode(b"{}", OPEN_OPTIONS)
    with pytest.raises(TypeError, match="decode: root must be a typed_json type"):
        decode("{}", dict)


COMPACT = [
    (None, "null"), (True, "true"), (False, "false"), (0, "0"), (-1, "-1"),
    (18446744073709551615, "18446744073709551615"), (1.5, "1.5"), (2.0, "2.0"),
    (-0.0, "-0.0"), (1e300, "1e+300"), (1e-7, "1e-7"), (1.5e-7, "1.5e-7"), (1e16, "1e+16"),
    (1e15, "1000000000000000.0"), (1e-5, "0.00001"), (1e-6, "1e-6"), (0.001234, "0.001234"),
    (1.8446744073709552e19, "1.8446744073709552e+19"), (5e-324, "5e-324"), (-2.5e-8, "-2.5e-8"),
    (12340000000.0, "12340000000.0"), (12.34, "12.34"), (1.2345678901234566e16, "1.2345678901234566e+16"),
    ("x", '"x"'), ('a"\\\n\x01é\x7f\b\f', '"a\\"\\\\\\n\\u0001é\x7f\\b\\f"'),
    ([], "[]"), ({}, "{}"), ({"a": 1}, '{"a":1}'), ([1, {"b": [None, True]}], '[1,{"b":[null,true]}]'),
]


@pytest.mark.parametrize("value,text", COMPACT)
def test_compact_is_serde_json_to_string(value, text):
    assert compact(value) == text


DISPLAY_F64 = [
    (2.0, "2"), (-0.0, "-0"), (0.0, "0"), (1.5, "1.5"), (-2.5, "-2.5"), (1e-7, "0.0000001"),
    (0.1, "0.1"), (1e21, "1" + "0" * 21), (1e300, "1" + "0" * 300),
    (1.8446744073709552e19, "18446744073709552000"), (5e-324, "0." + "0" * 323 + "5"),
    (float("inf"), "inf"), (float("-inf"), "-inf"), (float("nan"), "NaN"),
]


@pytest.mark.parametrize("value,text", DISPLAY_F64)
def test_rust_display_f64(value, text):
    assert rust_display_f64(value) == text


DEBUG_STR = [
    ("x", '"x"'), ('a"b', '"a\\"b"'), ("a\\b", '"a\\\\b"'), ("a\nb\t\r\0", '"a\\nb\\t\\r\\0"'),
    ("\x01\x1f\x7f", '"\\u{1}\\u{1f}\\u{7f}"'), ("é日本😀", '"é日本😀"'), ("'", '"\'"'),
    ("a\u0301", '"a\\u{301}"'), ("\u200b\u00a0", '"\\u{200b}\\u{a0}"'), ("", '""'),
]


@pytest.mark.parametrize("value,text", DEBUG_STR)
def test_rust_debug_str(value, text):
    assert rust_debug_str(value) == text


def test_a_host_thread_with_a_small_stack_decodes_anything():
    """decode recurses in Python frames, which use no C stack: a host
    thread's small stack decodes any depth (a C scanner would not)."""
    import threading
    texts = ['{"speculation":' + "[" * 60 + "]" * 60 + "}",
             '{"loadGuard":' + "[" * 126 + "]" * 126 + "}",
             '{"x":' + "[" * 100_000 + "]" * 100_000 + "}"]
    results = []
    old = threading.stack_size(256 * 1024)
    try:
        worker = threading.Thread(target=lambda: results.extend(
            sorted(decode(t, OPEN_OPTIONS).fields) for t in texts))
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old)
    assert results == [["speculation"], ["loadGuard"], []]


ANY_KEYS = ("maxContext", "expertCacheSlots", "loadGuard", "speculation")


def test_compact_writes_floats_as_the_engine_quoted_them():
    """The engine's status-2 messages quote a float option's value with
    serde_json 1.0.151 (`100.0`, `2.0`, `1.8446744073709552e+19`): compact of
    our decoded value is that text, on every such line of the sample."""
    quoted = []
    for line in engine_sample():
        text = sample_text(line)
        if line["status"] != 2 or text is None:
            continue
        key = line["message"].split(" ")[0]
        value = decode(text, OPEN_OPTIONS).fields.get(key)
        if key in ANY_KEYS and isinstance(value, float):
            quoted.append((line["message"].rsplit(", got ", 1)[1], compact(value)))
    assert len(quoted) >= 10
    assert ("1.8446744073709552e+19", "1.8446744073709552e+19") in quoted
    assert [(want, got) for want, got in quoted if want != got] == []


def test_compact_writes_a_deep_value_without_recursing():
    """The options layer quotes a decoded value (up to 127 levels) in its
    messages: compact never recurses, so neither Python's limit nor a small
    C stack is reached (here 100,000 levels under a recursion limit of 100)."""
    deep: list = []
    for _ in range(100_000):
        deep = [deep, {"a": None}]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100)
    try:
        text = compact(deep)
    finally:
        sys.setrecursionlimit(limit)
    assert text.startswith("[[[[") and text.endswith(',{"a":null}]') and len(text) == 1_300_002
