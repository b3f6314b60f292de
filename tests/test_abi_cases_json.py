"""The ABI case table as JSON (abi_cases.table_json), which the Swift tests
read instead of a copy of their own: read back, it is the table, case for
case, and the command swift/run-tests.sh runs writes exactly it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import abi_cases
import engine_texts
import original_texts
from abi_cases import CASES, CONTRACT_CODES, INSTALLS, UNSET, Chain, Has, Subset
from conftest import HEADER, ROOT


def _arg(exported: dict):
    if exported.get("null"):
        return None
    if "text" in exported:
        return exported["text"].encode()
    return bytes.fromhex(exported["hex"])


def _expected(exported: dict):
    (tag, value), = exported.items()
    if tag == "has":
        return Has(*value)
    if tag == "subset":
        return Subset(**{k: _expected(v) for k, v in value.items()})
    if tag == "object":
        return {k: _expected(v) for k, v in value.items()}
    if tag == "array":
        return [_expected(v) for v in value]
    assert tag == "value"
    return value


def _same(a, b) -> bool:
    # Has and Subset compare by what they hold; scalars also by type (1 is
    # not True), as abi_cases.match compares them.
    return repr(a) == repr(b) and type(a) is type(b)


def test_the_export_reads_back_as_the_table():
    table = json.loads(json.dumps(abi_cases.table_json(HEADER)))
    assert table["statuses"] == CONTRACT_CODES
    assert table["installs"] == list(INSTALLS)
    assert table["originalModule"]["dflashNote"] == original_texts.DFLASH_NOTE
    assert table["originalModule"]["sampledReason"] == original_texts.SAMPLED_REASON
    assert table["originalModule"]["refusalPrefix"] == original_texts.REFUSAL_PREFIX
    assert table["engine"] == {"engine": engine_texts.ENGINE,
                               "engineVersion": engine_texts.ENGINE_VERSION,
                               "noHead": engine_texts.blocker("mtp", "no-drafter")}
    assert [c["id"] for c in table["cases"]] == [c.id for c in CASES]
    for case, exported in zip(CASES, table["cases"]):
        assert (exported["fn"], exported["status"], exported["install"], exported["reads"],
                exported["nullOut"]) == (case.fn, case.status, case.install, case.reads,
                                         case.null_out), case.id
        assert _arg(exported["options"]) == case.options, case.id
        if case.model_dir is UNSET:
            assert "modelDir" not in exported, case.id
        else:
            assert _arg(exported["modelDir"]) == case.model_dir, case.id
        if isinstance(case.choice, Chain):
            chain = exported["chain"]
            assert (chain["install"], _arg(chain["options"])) == (case.choice.install,
                                                                  case.choice.options), case.id
        else:
            assert _arg(exported["choice"]) == case.choice, case.id
        for key, value in (("json", case.json), ("message", case.message)):
            if value is None:
                assert key not in exported, case.id
            else:
                assert _same(_expected(exported[key]), value), case.id


def test_the_command_run_tests_sh_runs_writes_the_export(tmp_path):
    target = tmp_path / "out" / "abi_cases.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "tests/abi_cases.py", str(target)], cwd=ROOT, env=env,
                   check=True, timeout=120)
    assert json.loads(target.read_text()) == json.loads(json.dumps(abi_cases.table_json(HEADER)))
    # The texts stay UTF-8 as written, not escaped.
    assert "t\u00eate" in target.read_text(encoding="utf-8")
