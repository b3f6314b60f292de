"""tsffi_reconcile: the preview against what the engine's real open reported,
and the plans after a disagreement, which answer in the engine's words
(source "engine") until an agreement or a change to the install's files.

Every case runs twice, through the Python API and through the C ABI (the
library loaded into this process, so both share one memory; each test starts
with none). The C runs plan each pair twice before and after the reconcile,
with the install's files aged (`aged_clock`), so the second plan of each
pair is the warm path's: a warm answer of the preview must not outlive the
reconcile (test_the_warm_path_* prove the warm path did answer).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading

import pytest

from turbospark_ffi import reconcile_memory
from turbospark_ffi.install_writer import write_install
from turbospark_ffi.plan import request
from turbospark_ffi.api import reconcile_json
from turbospark_ffi.api import plan_json

VISION = "the vision tower is active"
REVISION = {"engine": "turbospark-runtime", "engineVersion": "0.3.0",
            "engineRevisions": {"policy": "0.3.0", "open": "0a45c54", "manifest": "54bc43a",
                                "residentIndex": "08aaf13", "dtypeGates": "0a45c54",
                                "drafterBuild": "22f47a2", "blockers": "22f47a2",
                                "turn": "0a45c54"}}
ON2 = {"block": 2, "drafter": "mtp", "reason": None}
OFF_ASKED = {"block": None, "drafter": None, "reason": None}
BLOCKER = json.dumps({"tsffi": {"engineBlocker": VISION}})
BLOCK2_BLOCKED = json.dumps({"speculation": 2, "tsffi": {"engineBlocker": VISION}})
CANNOT_SERVE = "--speculative was asked for but cannot be served: " + VISION
PREFIX = ("this answer is the engine's own: its open of this install with these options, "
          "reported to tsffi_reconcile, disagreed with the preview (which mirrors "
          "turbospark-runtime 0.3.0) on ")


def session_info(speculation: dict) -> str:
    """ts_session_info_json's text: the speculation among the open's other keys."""
    return json.dumps({"modelDir": "/Users/me/models/qwen-27b.gturbo", "contextWindow": 32768,
                       "speculation": speculation, "kvBits": "off",
                       "expertResidency": {"mode": "streamed", "slots": [8, 16]},
                       "status": "ready"})


def opened(speculation: dict) -> dict:
    return {"status": 0, "speculation": speculation}


def failed(status: int, message: str) -> dict:
    return {"status": status, "message": message}


# id, options text, engine_json, the whole reconcile answer, and what the
# next plan of the pair answers: "preview" (as before), ("engine",
# speculation, warning) or ("refused", status, message).
CASES = [
    ("agree-on", "{}", session_info(ON2),
     {"agrees": True, "preview": opened(ON2), "engine": opened(ON2), "differences": [],
      "revision": REVISION}, "preview"),
    ("agree-off-as-asked", '{"speculation": "off"}', session_info(OFF_ASKED),
     {"agrees": True, "preview": opened(OFF_ASKED), "engine": opened(OFF_ASKED),
      "differences": [], "revision": REVISION}, "preview"),
    ("agree-blocked", BLOCKER,
     session_info({"block": None, "drafter": None, "reason": VISION}),
     {"agrees": True, "preview": opened({"block": None, "drafter": None, "reason": VISION}),
      "engine": opened({"block": None, "drafter": None, "reason": VISION}),
      "differences": [], "revision": REVISION}, "preview"),
    ("differ-reason", BLOCKER,
     session_info({"block": None, "drafter": None, "reason": "the session is text-only"}),
     {"agrees": False, "preview": opened({"block": None, "drafter": None, "reason": VISION}),
      "engine": opened({"block": None, "drafter": None, "reason": "the session is text-only"}),
      "differences": ["speculation.reason"], "revision": REVISION},
     ("engine", {"block": None, "drafter": None, "reason": "the session is text-only"},
      PREFIX + 'speculation.reason (the preview: "the vision tower is active"; the engine: '
               '"the session is text-only")')),
    ("differ-block", "{}", session_info({"block": 3, "drafter": "mtp", "reason": None}),
     {"agrees": False, "preview": opened(ON2),
      "engine": opened({"block": 3, "drafter": "mtp", "reason": None}),
      "differences": ["speculation.block"], "revision": REVISION},
     ("engine", {"block": 3, "drafter": "mtp", "reason": None},
      PREFIX + "speculation.block (the preview: 2; the engine: 3)")),
    ("differ-drafter", "{}", session_info({"block": 2, "drafter": "dflash", "reason": None}),
     {"agrees": False, "preview": opened(ON2),
      "engine": opened({"block": 2, "drafter": "dflash", "reason": None}),
      "differences": ["speculation.drafter"], "revision": REVISION},
     ("engine", {"block": 2, "drafter": "dflash", "reason": None},
      PREFIX + 'speculation.drafter (the preview: "mtp"; the engine: "dflash")')),
    ("differ-all-three", "{}", session_info({"block": None, "drafter": None, "reason": VISION}),
     {"agrees": False, "preview": opened(ON2),
      "engine": opened({"block": None, "drafter": None, "reason": VISION}),
      "differences": ["speculation.block", "speculation.drafter", "speculation.reason"],
      "revision": REVISION},
     ("engine", {"block": None, "drafter": None, "reason": VISION},
      PREFIX + 'speculation.block (the preview: 2; the engine: null); speculation.drafter '
               '(the preview: "mtp"; the engine: null); speculation.reason (the preview: '
               'null; the engine: "the vision tower is active")')),
    ("engine-failed-preview-opened", "{}",
     '{"status": 2, "message": "failed to load a tokenizer from /m: no tokenizer.json"}',
     {"agrees": False, "preview": opened(ON2),
      "engine": failed(2, "failed to load a tokenizer from /m: no tokenizer.json"),
      "differences": ["status"], "revision": REVISION},
     ("refused", 2, "failed to load a tokenizer from /m: no tokenizer.json")),
    ("engine-failed-with-its-own-status", "{}", '{"status": 5, "message": "unsupported"}',
     {"agrees": False, "preview": opened(ON2), "engine": failed(5, "unsupported"),
      "differences": ["status"], "revision": REVISION}, ("refused", 5, "unsupported")),
    ("preview-refused-engine-opened", BLOCK2_BLOCKED, session_info(ON2),
     {"agrees": False, "preview": failed(2, CANNOT_SERVE), "engine": opened(ON2),
      "differences": ["status"], "revision": REVISION},
     ("engine", ON2, PREFIX + 'status (the preview: a failed open, status 2: "--speculative '
      'was asked for but cannot be served: the vision tower is active"; the engine: an open '
      'speculating 2 tokens a round with mtp)')),
    ("both-failed-other-words", BLOCK2_BLOCKED, '{"status": 2, "message": "out of memory"}',
     {"agrees": False, "preview": failed(2, CANNOT_SERVE), "engine": failed(2, "out of memory"),
      "differences": ["message"], "revision": REVISION}, ("refused", 2, "out of memory")),
    ("both-failed-other-status", BLOCK2_BLOCKED, '{"status": 6, "message": "panic"}',
     {"agrees": False, "preview": failed(2, CANNOT_SERVE), "engine": failed(6, "panic"),
      "differences": ["status", "message"], "revision": REVISION}, ("refused", 6, "panic")),
    ("both-failed-alike", BLOCK2_BLOCKED, json.dumps({"status": 2, "message": CANNOT_SERVE}),
     {"agrees": True, "preview": failed(2, CANNOT_SERVE), "engine": failed(2, CANNOT_SERVE),
      "differences": [], "revision": REVISION}, ("refused", 2, CANNOT_SERVE)),
    # The open's own option stage: previewed as the open refuses (status 2,
    # and 4 for its decoder), and never remembered (the plan refuses such
    # options before it reads an install).
    ("option-refusal-agrees", '{"speculation": 0}',
     '{"status": 2, "message": "speculation block must be in 1..=15, got 0"}',
     {"agrees": True, "preview": failed(2, "speculation block must be in 1..=15, got 0"),
      "engine": failed(2, "speculation block must be in 1..=15, got 0"), "differences": [],
      "revision": REVISION}, ("refused", 2, "speculation block must be in 1..=15, got 0")),
    ("decoding-refusal-agrees", '{"speculation": 2, "speculation": 3}',
     '{"status": 4, "message": "options: duplicate field `speculation` at line 1 column 32"}',
     {"agrees": True,
      "preview": failed(4, "options: duplicate field `speculation` at line 1 column 32"),
      "engine": failed(4, "options: duplicate field `speculation` at line 1 column 32"),
      "differences": [], "revision": REVISION},
     ("refused", 4, "options: duplicate field `speculation` at line 1 column 32")),
    ("decoding-refusal-against-an-open", '{"speculation": 2, "speculation": 3}',
     session_info(ON2),
     {"agrees": False,
      "preview": failed(4, "options: duplicate field `speculation` at line 1 column 32"),
      "engine": opened(ON2), "differences": ["status"], "revision": REVISION},
     ("refused", 4, "options: duplicate field `speculation` at line 1 column 32")),
]


@pytest.fixture(autouse=True)
def no_memory():
    reconcile_memory.clear()
    yield
    reconcile_memory.clear()


@pytest.fixture
def install(tmp_path):
    return write_install(tmp_path / "install", mtp=True)


@pytest.fixture(scope="module")
def lib(loaded):
    return loaded.lib


def c_answer(lib, name: str, *args) -> tuple[int, str]:
    """(status, the result) or (status, the last error) of `name`."""
    out = ctypes.c_void_p()
    status = getattr(lib, name)(*args, ctypes.byref(out))
    if status == 0:
        text = ctypes.string_at(out.value).decode("utf-8")
        lib.tsffi_string_free(out)
        return status, text
    assert out.value is None
    buf = ctypes.create_string_buffer(8192)
    n = lib.tsffi_last_error(buf, len(buf))
    return status, buf.raw[:n].decode("utf-8")


class Python:
    """The Python API: the very request the command line makes."""

    def reconcile(self, model_dir, options, engine):
        try:
            return 0, reconcile_json(str(model_dir), options, engine).decode("ascii")
        except Exception as exc:
            return exc.status, str(exc)

    def plan(self, model_dir, options):
        try:
            return 0, plan_json(request(str(model_dir).encode(), options.encode())).decode()
        except Exception as exc:
            return exc.status, str(exc)


class C:
    """The C ABI, each plan made twice (the second may be the warm path's)."""

    def __init__(self, lib):
        self.lib = lib

    def reconcile(self, model_dir, options, engine):
        return c_answer(self.lib, "tsffi_reconcile", str(model_dir).encode(),
                        options.encode(), engine.encode())

    def plan(self, model_dir, options):
        first = c_answer(self.lib, "tsffi_speculation_plan", str(model_dir).encode(),
                         options.encode())
        again = c_answer(self.lib, "tsffi_speculation_plan", str(model_dir).encode(),
                         options.encode())
        assert again == first
        return first


@pytest.fixture(params=["python", "c"])
def via(request, lib, aged_clock):
    return Python() if request.param == "python" else C(lib)


def expected_plan(before: tuple[int, str], after) -> tuple[int, object]:
    """The next plan, from the plan before and the case's `after`."""
    if after == "preview":
        return before[0], json.loads(before[1]) if before[0] == 0 else before[1]
    if after[0] == "refused":
        return after[1], after[2]
    plan = json.loads(before[1]) if before[0] == 0 else None
    _, speculation, warning = after
    return 0, {"speculation": speculation, "source": "engine", "warning": warning,
               "was": plan}


@pytest.mark.parametrize("case_id, options, engine, answer, after", CASES,
                         ids=[c[0] for c in CASES])
def test_reconcile_then_plan(via, install, case_id, options, engine, answer, after):
    before = via.plan(install, options)
    status, text = via.reconcile(install, options, engine)
    assert (status, json.loads(text)) == (0, answer)
    assert list(json.loads(text)) == ["agrees", "preview", "engine", "differences", "revision"]
    now = via.plan(install, options)
    want = expected_plan(before, after)
    if want[0] != 0 or after == "preview":
        assert (now[0], json.loads(now[1]) if now[0] == 0 else now[1]) == want
        return
    plan = json.loads(now[1])
    # The fixture discriminates: the plan before was the preview, and said
    # something else.
    if before[0] == 0:
        was = json.loads(before[1])
        assert was["source"] == "preview" and was["speculation"] != want[1]["speculation"]
    else:
        assert before[1] == answer["preview"]["message"]
    assert plan["speculation"] == want[1]["speculation"]
    assert plan["source"] == "engine"
    assert plan["warnings"] == [want[1]["warning"]]
    assert list(plan) == ["drafter", "draftPolicies", "speculation", "turn", "source",
                          "ignoredKeys", "warnings", "modelDir"]
    assert plan["modelDir"] == str(install)


ANSWERED_BY_THE_ENGINE = [c for c in CASES if c[4] != "preview" and c[4][0] == "engine"]


@pytest.mark.parametrize("case_id, options, engine, answer, after", ANSWERED_BY_THE_ENGINE,
                         ids=[c[0] for c in ANSWERED_BY_THE_ENGINE])
def test_the_engines_words_last_until_the_install_changes(via, install, case_id, options,
                                                          engine, answer, after):
    before = via.plan(install, options)
    via.reconcile(install, options, engine)
    assert json.loads(via.plan(install, options)[1])["source"] == "engine"
    weights = install / "model_weights.bin"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = via.plan(install, options)
    assert again == before and (before[0] != 0 or json.loads(before[1])["source"] == "preview")


@pytest.mark.parametrize("via_name", ["python", "c"])
def test_an_agreement_forgets_the_disagreement(lib, install, aged_clock, via_name):
    via = Python() if via_name == "python" else C(lib)
    before = via.plan(install, "{}")
    via.reconcile(install, "{}", session_info({"block": 3, "drafter": "mtp", "reason": None}))
    assert json.loads(via.plan(install, "{}")[1])["speculation"]["block"] == 3
    status, text = via.reconcile(install, "{}", session_info(ON2))
    assert (status, json.loads(text)["agrees"]) == (0, True)
    assert via.plan(install, "{}") == before


def test_another_options_text_is_another_pair(lib, install, aged_clock):
    """Keyed by the text the host sent: the engine reads keys the preview
    does not model, so `{}` and `{"visionSidecar": "auto"}` may open apart."""
    via = C(lib)
    other = '{"visionSidecar": "auto"}'
    before = via.plan(install, other)
    via.reconcile(install, "{}", session_info(OFF_ASKED | {"reason": VISION}))
    assert json.loads(via.plan(install, "{}")[1])["source"] == "engine"
    assert via.plan(install, other) == before


def test_an_alias_shares_its_installs_memory(lib, tmp_path, monkeypatch, aged_clock):
    root = tmp_path / "store"
    write_install(root / "models" / "qwen.gturbo", mtp=True)
    monkeypatch.setenv("TURBOSPARK_HOME", str(root))
    via = C(lib)
    via.reconcile(root / "models" / "qwen.gturbo", "{}",
                  session_info({"block": 3, "drafter": "mtp", "reason": None}))
    status, text = c_answer(lib, "tsffi_speculation_plan", b"qwen", b"{}")
    assert (status, json.loads(text)["speculation"]["block"]) == (0, 3)


def _served_warm(lib, install, options: bytes, monkeypatch) -> bool:
    """Whether the C side answers the plan without reaching Python."""
    from turbospark_ffi import _abi
    fn = _abi._lib.TSFFI__FN_SPECULATION_PLAN
    original = _abi._handlers[fn]
    calls = []

    def spy(a, b):
        calls.append(a)
        return original(a, b)
    monkeypatch.setitem(_abi._handlers, fn, spy)
    try:
        status, _ = c_answer(lib, "tsffi_speculation_plan", str(install).encode(), options)
    finally:
        monkeypatch.setitem(_abi._handlers, fn, original)
    assert status in (0, 2)
    return not calls


def test_the_warm_path_serves_the_engines_answer_not_the_old_preview(lib, install, aged_clock,
                                                                      monkeypatch):
    c = C(lib)
    before = c.plan(install, "{}")
    assert _served_warm(lib, install, b"{}", monkeypatch), "the fixture must be warm"
    c.reconcile(install, "{}", session_info({"block": 3, "drafter": "mtp", "reason": None}))
    assert not _served_warm(lib, install, b"{}", monkeypatch)  # the old preview is gone
    first = c.plan(install, "{}")
    assert json.loads(first[1])["speculation"]["block"] == 3
    # The engine's answer is warm in its turn, and stays the engine's.
    assert _served_warm(lib, install, b"{}", monkeypatch)
    assert c.plan(install, "{}") == first
    c.reconcile(install, "{}", session_info(ON2))
    assert c.plan(install, "{}") == before


def test_the_warm_path_serves_the_engines_refusal(lib, install, aged_clock, monkeypatch):
    c = C(lib)
    c.plan(install, "{}")
    assert _served_warm(lib, install, b"{}", monkeypatch)
    c.reconcile(install, "{}", '{"status": 2, "message": "the open failed"}')
    for _ in range(3):
        assert c_answer(lib, "tsffi_speculation_plan", str(install).encode(), b"{}") == \
            (2, "the open failed")


def test_the_choices_table_stays_the_preview(lib, install, aged_clock):
    c = C(lib)
    before = c_answer(lib, "tsffi_speculation_choices", str(install).encode(), b"{}")
    c.reconcile(install, "{}", session_info({"block": 3, "drafter": "mtp", "reason": None}))
    assert c_answer(lib, "tsffi_speculation_choices", str(install).encode(), b"{}") == before
    assert all(item["plan"] is None or item["plan"]["source"] == "preview"
               for item in json.loads(before[1])["choices"])


# ---------------------------------------------------------------------------
# Malformed arguments: status 1, the message naming what, what it got, what
# it accepts; nothing remembered.

FORMS = ("ts_session_info_json's text (an object whose \"speculation\" is {\"block\", "
         "\"drafter\", \"reason\"}) or, for an open that failed, {\"status\": n, \"message\": "
         "\"...\"} with the open's nonzero status and ts_last_error's text")
BLOCK_ACCEPTS = "accepts null (speculation off) or an integer in 1..=15"
STATUS_ACCEPTS = ("accepts the failed open's status, an integer in 1..=2147483647 (a successful "
                  "open is reported by ts_session_info_json's text)")
MESSAGE_ACCEPTS = ("accepts ts_last_error's text after the failed open (a string of at most "
                   "65536 characters, without NUL or lone surrogate)")
REASON_ACCEPTS = ("accepts null or a string of at most 65536 characters (without a lone "
                  "surrogate)")
DRAFTER_WITH = ("accepts a drafter exactly when block is not null, as the engine reports it")


def spec(**fields) -> bytes:
    return json.dumps({"speculation": fields}).encode()


MALFORMED = [
    ("empty", b"",
     "engine_json is not valid JSON: Expecting value at line 1 column 1 (char 0); accepts "
     + FORMS),
    ("truncated", b"{",
     "engine_json is not valid JSON: Expecting property name enclosed in double quotes at line "
     "1 column 2 (char 1); accepts " + FORMS),
    ("not-utf8", b"\xff{}",
     "engine_json is not UTF-8 (invalid byte 0xff at offset 0); accepts UTF-8 text"),
    ("too-deep", b"[" * 100 + b"]" * 100,
     "engine_json nests 100 levels deep; accepts at most 64 (" + FORMS + ")"),
    ("an-array", b"[]", "engine_json: the whole text: got an array; accepts an object: " + FORMS),
    ("a-string", b'"ok"', 'engine_json: the whole text: got "ok"; accepts an object: ' + FORMS),
    ("no-speculation", b'{"contextWindow": 32768}',
     'engine_json: the object: got neither "speculation" nor "status" among its keys; '
     "accepts " + FORMS),
    ("speculation-null", b'{"speculation": null}',
     'engine_json: speculation: got null; accepts an object {"block", "drafter", "reason"}, as '
     "ts_session_info_json writes it"),
    ("speculation-missing-reason", spec(block=2, drafter="mtp"),
     'engine_json: speculation: got no reason; accepts an object holding all of "block", '
     '"drafter" and "reason", as ts_session_info_json writes it'),
    ("block-0", spec(block=0, drafter=None, reason=None),
     "engine_json: speculation.block: got 0; " + BLOCK_ACCEPTS),
    ("block-16", spec(block=16, drafter="mtp", reason=None),
     "engine_json: speculation.block: got 16; " + BLOCK_ACCEPTS),
    ("block-float", spec(block=2.0, drafter="mtp", reason=None),
     "engine_json: speculation.block: got 2.0; " + BLOCK_ACCEPTS),
    ("block-bool", spec(block=True, drafter="mtp", reason=None),
     "engine_json: speculation.block: got true; " + BLOCK_ACCEPTS),
    ("drafter-unknown", spec(block=2, drafter="eagle", reason=None),
     'engine_json: speculation.drafter: got "eagle"; accepts null, "mtp" or "dflash"'),
    ("drafter-missing-with-block", spec(block=2, drafter=None, reason=None),
     "engine_json: speculation.drafter: got null with block 2; " + DRAFTER_WITH),
    ("drafter-without-block", spec(block=None, drafter="mtp", reason=None),
     'engine_json: speculation.drafter: got "mtp" with block null; ' + DRAFTER_WITH),
    ("reason-number", spec(block=None, drafter=None, reason=7),
     "engine_json: speculation.reason: got 7; " + REASON_ACCEPTS),
    ("reason-lone-surrogate", b'{"speculation": {"block": null, "drafter": null, '
                              b'"reason": "\\ud800"}}',
     'engine_json: speculation.reason: got "\\ud800"; ' + REASON_ACCEPTS),
    ("reason-past-the-bound", spec(block=None, drafter=None, reason="r" * 65537),
     "engine_json: speculation.reason: got a string of 65537 characters; " + REASON_ACCEPTS),
    ("block-twice", b'{"speculation": {"block": 2, "block": 3, "drafter": "mtp", '
                    b'"reason": null}}',
     "engine_json: speculation.block is given more than once; accepts " + FORMS),
    ("speculation-twice", b'{"speculation": {"block": 2, "drafter": "mtp", "reason": null}, '
                          b'"speculation": {"block": 2, "drafter": "mtp", "reason": null}}',
     "engine_json: speculation is given more than once; accepts " + FORMS),
    ("status-0", b'{"status": 0, "message": "ok"}', "engine_json: status: got 0; "
     + STATUS_ACCEPTS),
    ("status-negative", b'{"status": -1, "message": "x"}', "engine_json: status: got -1; "
     + STATUS_ACCEPTS),
    ("status-string", b'{"status": "2", "message": "x"}', 'engine_json: status: got "2"; '
     + STATUS_ACCEPTS),
    ("status-without-message", b'{"status": 2}',
     'engine_json: a failed open\'s object: got no "message"; accepts "message": '
     "ts_last_error's text after the failed open"),
    ("message-null", b'{"status": 2, "message": null}', "engine_json: message: got null; "
     + MESSAGE_ACCEPTS),
    ("message-with-nul", b'{"status": 2, "message": "a\\u0000b"}',
     'engine_json: message: got "a\\u0000b"; ' + MESSAGE_ACCEPTS),
    ("message-past-the-bound", json.dumps({"status": 2, "message": "m" * 65537}).encode(),
     "engine_json: message: got a string of 65537 characters; " + MESSAGE_ACCEPTS),
    ("failed-open-extra-key", b'{"status": 2, "message": "x", "detail": 1}',
     'engine_json: a failed open\'s object: got the key "detail"; accepts exactly "status" and '
     '"message" (or ts_session_info_json\'s text, which holds "speculation")'),
]


@pytest.mark.parametrize("case_id, engine, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_error_malformed_engine_json(via, install, case_id, engine, message):
    before = via.plan(install, "{}")
    if isinstance(via, C):
        status, said = c_answer(via.lib, "tsffi_reconcile", str(install).encode(), b"{}", engine)
    else:
        status, said = via.reconcile(install, "{}", engine)
    assert (status, said) == (1, message)
    assert via.plan(install, "{}") == before


def test_error_null_arguments(lib, install):
    assert c_answer(lib, "tsffi_reconcile", str(install).encode(), b"{}", None) == (
        1, 'engine_json is NULL; accepts ts_session_info_json\'s text, or {"status": n, '
           '"message": "..."} for an open that failed')
    assert c_answer(lib, "tsffi_reconcile", None, b"{}", session_info(ON2).encode()) == (
        1, "model_dir is NULL; accepts the path of an install directory, as UTF-8")
    # NULL options are the defaults, as for the open.
    status, text = c_answer(lib, "tsffi_reconcile", str(install).encode(), None,
                            session_info(ON2).encode())
    assert (status, json.loads(text)["agrees"]) == (0, True)


def test_error_a_bad_argument_of_the_preview_is_the_calls_error(lib, install):
    """Status 1 from the preview is not an outcome of the open: the call fails."""
    status, said = c_answer(lib, "tsffi_reconcile", str(install).encode(),
                            b'{"tsffi": {"temperature": -1}}', session_info(ON2).encode())
    assert (status, said) == (1, "tsffi.temperature: got -1; accepts a finite number >= 0, "
                                 "or null (the engine binding's default temperature, 0.2)")
    assert c_answer(lib, "tsffi_reconcile", b"", b"{}", session_info(ON2).encode())[0] == 1


# ---------------------------------------------------------------------------
# Threads

def test_eight_threads_reconciling_and_planning_give_no_mixed_answer(lib, install,
                                                                     aged_clock):
    c = C(lib)
    preview = c.plan(install, "{}")
    engine_info = session_info({"block": 3, "drafter": "mtp", "reason": None})
    c.reconcile(install, "{}", engine_info)
    engine = c.plan(install, "{}")
    c.reconcile(install, "{}", session_info(ON2))
    assert preview != engine and json.loads(engine[1])["source"] == "engine"
    disagree = {"agrees": False, "preview": opened(ON2),
                "engine": opened({"block": 3, "drafter": "mtp", "reason": None}),
                "differences": ["speculation.block"], "revision": REVISION}
    agree = {"agrees": True, "preview": opened(ON2), "engine": opened(ON2),
             "differences": [], "revision": REVISION}
    seen: list = []
    wrong: list = []

    def reconciler(k: int) -> None:
        for i in range(150):
            if (i + k) % 2:
                status, text = c.reconcile(install, "{}", engine_info)
                ok = status == 0 and json.loads(text) == disagree
            else:
                status, text = c.reconcile(install, "{}", session_info(ON2))
                ok = status == 0 and json.loads(text) == agree
            if not ok:
                wrong.append((status, text))

    def planner() -> None:
        for _ in range(300):
            answer = c_answer(lib, "tsffi_speculation_plan", str(install).encode(), b"{}")
            seen.append(answer)
            if answer not in (preview, engine):
                wrong.append(answer)

    threads = [threading.Thread(target=reconciler, args=(k,)) for k in range(4)] + \
        [threading.Thread(target=planner) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert len(seen) == 1200
    # Settled: the last reconcile decides.
    c.reconcile(install, "{}", engine_info)
    assert c.plan(install, "{}") == engine


# ---------------------------------------------------------------------------
# The command line: the same request, --json byte for byte the C ABI's.

CLI_CASES = [c for c in CASES if c[0] in ("agree-on", "differ-reason",
                                           "engine-failed-preview-opened",
                                           "preview-refused-engine-opened",
                                           "decoding-refusal-agrees")]


@pytest.mark.parametrize("case_id, options, engine, answer, after", CLI_CASES,
                         ids=[c[0] for c in CLI_CASES])
def test_cli_json_is_the_c_abi(lib, install, tmp_path, case_id, options, engine, answer, after):
    from test_cli import run
    info = tmp_path / "session.json"
    info.write_text(engine)
    r = run("reconcile", install, "--options", options, "--session-info", info, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == answer
    assert r.stdout == C(lib).reconcile(install, options, engine)[1] + "\n"


def test_cli_report(install, tmp_path):
    from test_cli import run
    info = tmp_path / "session.json"
    info.write_text(session_info({"block": 3, "drafter": "mtp", "reason": None}))
    r = run("reconcile", install, "--session-info", info, whole=(install,))
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.splitlines() == [
        f"install     {install}",
        "options     (none: the open's defaults)",
        "result      DISAGREES on speculation.block",
        "preview     speculation on, block 2 with mtp",
        "engine      speculation on, block 3 with mtp",
        "mirrors     turbospark-runtime 0.3.0"]


def test_error_cli_malformed_session_info(install, tmp_path):
    from test_cli import run
    info = tmp_path / "session.json"
    info.write_text('{"speculation": {"block": 16, "drafter": "mtp", "reason": null}}')
    r = run("reconcile", install, "--session-info", info)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == ("turbospark-ffi reconcile: engine_json: speculation.block: got 16; "
                        + BLOCK_ACCEPTS + "\n")


def test_the_memory_is_bounded_and_forgets_the_oldest_first(install):
    py = Python()
    texts = ['{"host": %d}' % k for k in range(reconcile_memory.MAX_REMEMBERED + 1)]
    preview = py.plan(install, texts[0])
    for text in texts:
        py.reconcile(install, text, session_info({"block": 3, "drafter": "mtp", "reason": None}))
    assert py.plan(install, texts[0]) == preview  # the oldest, dropped for the newest
    assert json.loads(py.plan(install, texts[1])[1])["source"] == "engine"
    assert json.loads(py.plan(install, texts[-1])[1])["source"] == "engine"


def test_error_an_options_value_has_no_text_to_remember(install):
    from turbospark_ffi import InvalidArgument
    from turbospark_ffi.options import Options
    from turbospark_ffi.reconcile import reconcile
    with pytest.raises(InvalidArgument) as refused:
        reconcile(str(install), Options(), session_info(ON2))
    assert str(refused.value) == ("options: got an Options value; accepts the options text the "
                                  "engine's open was given (str or bytes), or None")


def test_a_warning_quotes_at_most_300_characters_of_each_side(install):
    """The whole texts are in the reconcile result; the plan's warning says
    how they differ, so a 16 MiB engineBlocker is not remembered 256 times."""
    py = Python()
    long_reason = "x" * 299 + "yz"
    options = json.dumps({"tsffi": {"engineBlocker": long_reason}})
    py.reconcile(install, options, session_info({"block": None, "drafter": None,
                                                 "reason": "short"}))
    assert json.loads(py.plan(install, options)[1])["warnings"] == [
        PREFIX + 'speculation.reason (the preview: "' + "x" * 299 + 'y..."; the engine: '
                 '"short")']


def test_the_memory_is_bounded_in_bytes_of_options_text(install, monkeypatch):
    py = Python()
    first, second = '{"host": "%s"}' % ("a" * 40), '{"host": "%s"}' % ("b" * 40)
    monkeypatch.setattr(reconcile_memory, "MAX_REMEMBERED_BYTES", len(first) + len(second) - 1)
    preview = py.plan(install, first)
    for text in (first, second):
        py.reconcile(install, text, session_info({"block": 3, "drafter": "mtp", "reason": None}))
    assert py.plan(install, first) == preview  # made room for the second
    assert json.loads(py.plan(install, second)[1])["source"] == "engine"
