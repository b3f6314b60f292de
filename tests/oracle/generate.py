"""Writes tests/data/typed_json_oracle.jsonl: generated JSON texts with the
serde oracle's answers (tests/oracle/build.sh builds the two oracles).

The "open" root is the engine's open options struct as of revision 0a45c54:
18 optional fields (TURBOSPARK_FACTS.md section 10, "What 0a45c54 changed"),
declared in src/main.rs and listed in OPEN_FIELDS below in the same order,
which is also the positional order of a top-level array. Both lists change
together when the engine's struct does.

    python3 tests/oracle/generate.py /tmp/typed-json-oracle

Each text is decoded by both oracles. The table's answer is the patched one
(serde_json 1.0.151 / serde 1.0.229 behaviour); where Debian's unpatched
serde answers differently, the row also carries `debian` (its answer), so a
reader sees which rows follow the engine's pins rather than Debian's sources.
The texts are seeded-random, so the table is reproducible.

CI does not rebuild the oracle: that would need the two Debian packages and
two cargo builds (~2 minutes) on every run, for a table that only changes
when this generator or the patch does. Whoever changes either reruns
build.sh and this script and commits the table; tests/test_typed_json.py
then holds the decoder to it.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE = HERE.parent / "data" / "typed_json_oracle.jsonl"

# Revision 0a45c54's 18 fields in declaration (= positional) order, as
# src/main.rs declares them: expertResidency (3rd) and prefixReuse (18th) are
# that revision's, so arrays of 17 and 18 elements now fill fields and a
# 19th element is the first one with no field.
OPEN_FIELDS = [("maxContext", "any"), ("expertCacheSlots", "any"), ("expertResidency", "str"),
               ("powerProfile", "str"), ("loadGuard", "any"), ("minAutoContext", "u32"),
               ("maxTokensPerSec", "f64"), ("speculation", "any"),
               ("speculativeDrafter", "str"), ("steering", "str"), ("steeringMode", "str"),
               ("steeringScale", "f64"), ("steeringLayers", "str"), ("steeringTarget", "f64"),
               ("steeringGate", "f64"), ("visionSidecar", "str"), ("kvBits", "str"),
               ("prefixReuse", "bool")]
KEYS = [k for k, _ in OPEN_FIELDS]
UNKNOWN = ["x", "temperature", "engineBlocker", "tsffi", "Speculation", "", "é", "spec",
           "PrefixReuse", "prefix_reuse", "expert_residency"]

NUMBERS = [
    "0", "-0", "1", "-1", "2", "15", "16", "007", "01", "-01", "1.", "1.5", "-1.5", "0.0",
    "-0.0", "2.0", "1e5", "1E5", "1e+5", "1e-5", "1.e5", "1e", "1e+", "1e-", "-", "-a", "--1",
    "+1", ".5", "1.5e3", "4294967295", "4294967296", "18446744073709551615",
    "18446744073709551616", "18446744073709551615.", "18446744073709551616.",
    "18446744073709551616.5", "184467440737095516160", "-9223372036854775808",
    "-9223372036854775809", "-18446744073709551616", "123456789012345678901234567890",
    "1e308", "1.7976931348623157e308", "1.7976931348623158e308", "1.797693134862316e308",
    "2e308", "1e309", "1e400", "-1e400", "1e-400", "4.9e-324", "5e-324", "2.5e-324",
    "2.2250738585072011e-308", "2.2250738585072014e-308", "0.1", "0.2", "0.30000000000000004",
    "3.141592653589793", "1e22", "1e23", "1e16", "1e15", "123456789012345678", "1e-7",
    "1.5e-7", "0.000001", "0.0000001", "1e2147483647", "1e2147483648", "0e2147483648",
    "1e-2147483648", "1e-2147483649", "1e99999999999", "0e99999999999", "-0e99999999999",
    "0.0000000000000000000000000000001e30", "1" + "0" * 400, "1." + "0" * 400 + "1",
    "9" * 30 + "e-10", "0." + "0" * 30 + "1", "12345678901234567890.123e-5", "1.0e0",
    "0.5e-0", "100e-2", "1_000", "0x10", "Infinity", "NaN", "-Infinity", "1e5e5", "1.2.3",
]

STRINGS = [
    '""', '"x"', '"auto"', '"a\\"b"', '"a\\\\b"', '"\\/"', '"\\b\\f\\n\\r\\t"', '"\\u0041"',
    '"\\u00e9"', '"\\u00E9"', '"\\uD83D\\uDE00"', '"\\ud83d\\ude00"', '"\\uD83D"', '"\\uD83Dx"',
    '"\\uD83D\\n"', '"\\uD83D\\u0041"', '"\\uD83D\\uD83D"', '"\\uDE00"', '"\\u12"', '"\\u12G4"',
    '"\\uZZZZ"', '"\\u"', '"\\u00"', '"\\q"', '"\\x41"', '"\\"', '"\\', '"a', '"a\\u00e"',
    '"a\x00b"', '"a\nb"', '"a\tb"', '"\x1f"', '"\x7f"', '"é"', '"日本"', '"😀"', '"\\u0000"',
    '"\\u001f"', '"a\u0301"', '"\u200b"', '"\u00a0"', '"\\ud800\\udc00"', '"\\uDBFF\\uDFFF"',
    '"\\u0é"', '"\\u00é"', '"\\u000é"', '"x\\uD800é"', '"\\uD800\\é"', '"\'"', '"/tmp/x"',
    '"\u00ad\ufeff\u0600\ue000\u2028\u3000\u0378\u200d\u034f\u2066"',
    '"\u0b3e\U0001f3fb\U000e0041\u0903\u1160\ufffd\U0010ffff"',
]

LITERALS = ["null", "true", "false", "nul", "tru", "fals", "nulll", "nx", "tx", "fx", "n", "t",
            "f", "None", "True", "[]", "{}", "[1]", "[1,]", "[,1]", "[1 2]", "{\"a\":1}",
            "{\"a\":1,}", "{\"a\" 1}", "{\"a\":}", "{a:1}", "{,}", "[[]]", "[{}]", "{\"a\":[1,{\"b\":null}]}",
            "[\"x\", 1.5, -0, true]", "{\"a\":1,\"a\":2}", "{\"b\":1,\"a\":2,\"b\":3}", "'x'", "]", "}",
            ":", ",", "", " ", "\ufeff1", "\u00a01", "//1", "[1]]", "{}}"]


# For prefixReuse, serde's only `bool`: the two literals, and what a host might
# send instead (a number, a string, a near-literal), each a different refusal.
BOOLS = ["true", "false", "null", "1", "0", '"true"', '"false"', "tru", "True", "truee",
         "[]", "{}", "1.5", "-0"]


def ws(rng: random.Random) -> str:
    return rng.choice(["", "", "", " ", "  ", "\n", "\t", "\r\n", " \n  "])


def obj(pairs: list[tuple[str, str]], rng: random.Random) -> str:
    parts = [f"{ws(rng)}{json.dumps(k, ensure_ascii=False)}{ws(rng)}:{ws(rng)}{v}{ws(rng)}"
             for k, v in pairs]
    return "{" + ",".join(parts) + "}"


def slot_texts(rng: random.Random) -> list[str]:
    """Every literal in every kind of slot: each field type, an unknown key.
    (prefixReuse is the bool slot; expertResidency a string slot before
    powerProfile, where an error's position in the struct differs from kvBits'.)"""
    out = []
    values = NUMBERS + STRINGS + LITERALS
    for value in values:
        for key in ["speculation", "minAutoContext", "steeringScale", "kvBits", "x", "loadGuard",
                    "prefixReuse", "expertResidency"]:
            out.append(obj([(key, value)], rng) if value else "{\"" + key + "\":}")
        out.append(obj([("a", "1"), ("kvBits", value)], rng))
        out.append("[" + value + "]")
        out.append(value)
    return out


def deep_texts() -> list[str]:
    out = []
    for depth in (1, 2, 50, 125, 126, 127, 128, 129, 200):
        for key in ("speculation", "x", "kvBits", "minAutoContext"):
            out.append('{"%s":%s%s}' % (key, "[" * depth, "]" * depth))
            out.append('{"%s":%s%s' % (key, "[" * depth, "]" * (depth - 1)))
            out.append('{"%s":%s1%s}' % (key, '{"a":' * depth, "}" * depth))
        out.append("[" * depth + "]" * depth)
        out.append('{"a":' * depth + "1" + "}" * depth)
    out.append('{"x":' + "[" * 5000 + "]" * 5000 + ',"speculation":2}')
    out.append('{"x":' + '{"k":' * 3000 + "0" + "}" * 3000 + "}")
    out.append('{"x":' + "[" * 300 + "]" * 299 + "}")
    return out


def mutations(rng: random.Random, seeds: list[str], count: int) -> list[str]:
    alphabet = list('{}[]:,"\\ \n\t0123456789.-+eEnultrfasx') + ["é", "\x00", "\x01", "u"]
    out = []
    for _ in range(count):
        text = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            pos = rng.randint(0, len(text))
            op = rng.randint(0, 2)
            if op == 0:
                text = text[:pos] + rng.choice(alphabet) + text[pos:]
            elif op == 1 and text:
                text = text[:pos] + text[pos + 1:]
            elif text:
                text = text[:pos] + rng.choice(alphabet) + text[pos + 1:]
        out.append(text)
    return out


def random_value(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth > 3 or r < 0.5:
        return rng.choice(NUMBERS[:60] + STRINGS[:14] + ["null", "true", "false"])
    if r < 0.75:
        return "[" + ",".join(random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    return obj([(rng.choice(["a", "b", "c", "é"]), random_value(rng, depth + 1))
                for _ in range(rng.randint(0, 3))], rng)


def typed_value(rng: random.Random, kind: str) -> str:
    if rng.random() < 0.15:
        return random_value(rng)
    if kind == "str":
        return rng.choice(STRINGS[:20] + ["null"])
    if kind in ("u32", "f64"):
        return rng.choice(NUMBERS[:40] + ["null"])
    if kind == "bool":
        return rng.choice(BOOLS)
    return random_value(rng)


def random_objects(rng: random.Random, count: int) -> list[str]:
    out = []
    for _ in range(count):
        pairs = []
        for _ in range(rng.randint(0, 6)):
            if rng.random() < 0.7:
                key, kind = rng.choice(OPEN_FIELDS)
                pairs.append((key, typed_value(rng, kind)))
            else:
                pairs.append((rng.choice(UNKNOWN), random_value(rng)))
        out.append(obj(pairs, rng))
    return out


def positional(rng: random.Random, count: int) -> list[str]:
    # Around 18, the field count: 17 and 18 elements fill fields, 19 and 20 do not.
    out = ["[" + ",".join(["null"] * n) + "]" for n in (0, 1, 2, 3, 15, 16, 17, 18, 19, 20)]
    for _ in range(count):
        n = rng.randint(0, 20)
        items = [typed_value(rng, OPEN_FIELDS[i][1] if i < len(OPEN_FIELDS) else "any")
                 for i in range(n)]
        out.append("[" + f",{ws(rng)}".join(items) + ws(rng) + "]")
    return out


def new_key_texts() -> list[str]:
    """0a45c54's two keys, by name and by position: before that revision they
    were unknown keys (anything went) and arrays stopped at 16 elements."""
    nulls = ["null"] * 16
    out = []
    for value in BOOLS + ['"mapped"', "2", "true ", " false"]:
        out.append('{"prefixReuse":%s}' % value)
        out.append('{"speculation":2,"prefixReuse":%s,"kvBits":"4"}' % value)
        out.append("[" + ",".join(nulls + ["null", value]) + "]")          # 18th: prefixReuse
        out.append("[" + ",".join(nulls + ['"4"', value, "null"]) + "]")   # 19: one too many
        out.append("[" + ",".join(nulls + [value]) + "]")                  # 17th: kvBits
    for value in ['"auto"', '"streamed"', '"mapped"', '"Mapped"', '" mapped"', '"mapped "',
                  '"resident"', '""', "1", "true", "null", "[]", "{}"]:
        out.append('{"expertResidency":%s}' % value)
        out.append('{"maxContext":"auto","expertResidency":%s,"powerProfile":1}' % value)
        out.append("[null,null,%s]" % value)                                # 3rd: expertResidency
        out.append('[null,null,%s,"balanced"]' % value)
        out.append("[null,null,%s,1]" % value)                              # 4th: powerProfile
    out += ['{"prefixReuse":true,"prefixReuse":false}', '{"prefixReuse":null,"prefixReuse":true}',
            '{"expertResidency":"auto","expertResidency":"mapped"}',
            '{"expertResidency":null,"expertResidency":1}',
            '{"PrefixReuse":1,"prefix_reuse":"x","expert_residency":2}',
            "[" + ",".join(nulls + ['"off"', "true"]) + ",]",
            "[" + ",".join(nulls + ['"off"', "true"]) + "]]",
            "[" + ",".join(nulls + ['"off"', "true"]) + " ",
            "[" + ",".join(nulls + ['"off"', "false", "[1,2]"]) + "]",
            "[" + ",".join(nulls + ['"off"', "false", "{}", "1"]) + "]"]
    return out


def truncations(seeds: list[str]) -> list[str]:
    out = []
    for text in seeds:
        out.extend(text[:k] for k in range(len(text)))
    return out


def strict_texts(rng: random.Random) -> list[str]:
    good = '{"name":"n","count":3,"flags":[true,false],"mode":"fast","opt":1.5}'
    out = [good, '{"name":"n","count":3,"flags":[],"mode":"slow"}',
           '["n",3,[true],"off",null]', '["n",3,[true],"off"]', '["n"]', "[]", "{}",
           '{"name":"n"}', '{"count":1,"name":"a","flags":[],"mode":"fast","mode":"slow"}',
           '{"name":"n","count":3,"flags":[true],"mode":"Fast"}',
           '{"name":"n","count":3,"flags":[true],"mode":"x\\u0041"}',
           '{"name":"n","count":3,"flags":[true],"mode":{"fast":null}}',
           '{"name":"n","count":3,"flags":[true],"mode":{"fast":1}}',
           '{"name":"n","count":3,"flags":[true],"mode":{"fast":null,"slow":null}}',
           '{"name":"n","count":3,"flags":[true],"mode":{"zzz":null}}',
           '{"name":"n","count":3,"flags":[true],"mode":{"fast" null}}',
           '{"name":"n","count":3,"flags":[true],"mode":{1:null}}',
           '{"name":"n","count":3,"flags":[true],"mode":1}',
           '{"name":"n","count":3,"flags":[true],"mode":[]}',
           '{"name":"n","count":3,"flags":[true],"mode":null}',
           '{"name":"n","count":-3,"flags":[true],"mode":"fast"}',
           '{"name":"n","count":3.0,"flags":[true],"mode":"fast"}',
           '{"name":"n","count":3,"flags":true,"mode":"fast"}',
           '{"name":"n","count":3,"flags":[1],"mode":"fast"}',
           '{"name":"n","count":3,"flags":[true,],"mode":"fast"}',
           '{"name":"n","count":3,"flags":[null],"mode":"fast"}',
           '{"name":null,"count":3,"flags":[],"mode":"fast"}',
           '{"name":"n","count":3,"flags":[],"mode":"fast","opt":"1"}',
           '{"name":"n","count":3,"flags":' + "[" * 130 + "]" * 130 + ',"mode":"fast"}',
           '["n",3,[true],"off",null,1]', '["n",3,[true],"off",null,]']
    out += truncations([good, '["n",3,[true],"off",null]'])
    out += mutations(rng, [good], 400)
    return out


def texts() -> list[tuple[str, str]]:
    rng = random.Random(30)
    seeds = ['{"speculation":2,"speculativeDrafter":"mtp"}',
             '{\n  "maxContext": "auto",\n  "x": [1, {"y": "é"}],\n  "steeringScale": 1.5\n}',
             '{"kvBits":"3.5","minAutoContext":4096,"tsffi":{"temperature":0.7}}',
             # a positional text written for the 16 fields before 0a45c54 (now
             # "balanced" is expertResidency and 2.5 a u32's), and the same at 18
             '[null,null,"balanced",null,7,2.5,3,"dflash"]',
             '[null,null,null,"balanced",null,7,2.5,3,"dflash"]',
             '{"é":"日本","speculation":"\\u0032","steering":"a\\nb"}',
             '{"expertResidency":"streamed","prefixReuse":false,"kvBits":"4"}',
             '[null,8,"mapped",null,null,null,null,2,null,null,null,null,null,null,null,null,'
             '"3.5",true]']
    rows = [("open", t) for t in slot_texts(rng) + deep_texts() + truncations(seeds)]
    rows += [("open", t) for t in mutations(rng, seeds, 1500) + random_objects(rng, 1500)]
    rows += [("open", t) for t in positional(rng, 300) + new_key_texts()]
    rows += [("strict", t) for t in strict_texts(rng)]
    rows += [("value", t) for t in NUMBERS + STRINGS + LITERALS + [r for r in random_objects(rng, 200)]]
    rows += [("value", t) for t in ["[" * 127 + "]" * 127, "[" * 128 + "]" * 128, "[1,]", "{\"a\":1,}"]]
    seen = set()
    unique = []
    for row in rows:
        if row not in seen:
            seen.add(row)
            unique.append(row)
    return unique


def ask(binary: str, rows: list[tuple[str, str]]) -> list[dict]:
    request = "".join(json.dumps({"root": r, "text_hex": t.encode("utf-8").hex()}) + "\n"
                      for r, t in rows)
    done = subprocess.run([binary], input=request.encode(), capture_output=True, check=True,
                          timeout=600)
    # split("\n"), not splitlines(): a text may hold U+2028 and its kin
    return [json.loads(line) for line in done.stdout.decode().split("\n") if line]


def main(out_dir: str) -> None:
    rows = texts()
    patched = ask(str(Path(out_dir) / "v151"), rows)
    debian = ask(str(Path(out_dir) / "debian"), rows)
    header = {"oracle": "serde_json 1.0.87 + serde_derive 1.0.152 + serde 1.0.152 "
                        "(Debian bookworm sources) with tests/oracle/serde-1.0.151.patch: "
                        "the behaviour of serde_json 1.0.151 / serde 1.0.229",
              "debian": "the unpatched sources' answer, on the rows where it differs",
              "rows": len(rows)}
    with open(TABLE, "w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for (root, text), want, deb in zip(rows, patched, debian):
            row = {"root": root, "text": text, "ok": want["ok"], "message": want["message"],
                   "fields": want["fields"]}
            if (deb["ok"], deb["message"], deb["fields"]) != (want["ok"], want["message"],
                                                               want["fields"]):
                row["debian"] = {"ok": deb["ok"], "message": deb["message"],
                                 "fields": deb["fields"]}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{TABLE}: {len(rows)} rows")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/typed-json-oracle")
