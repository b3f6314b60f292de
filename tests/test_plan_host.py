"""examples/plan_host.c, the main job `make demo` runs: each plan printed
whole, then its turn and (when there are any) its warnings, each exactly
the plan's own member -- the host cuts them out of the text by the header's
key order, so a member added between two keys must not leak into a line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, compile_c_host

SAMPLES = ROOT / "turbospark_ffi" / "samples"


@pytest.fixture(scope="module")
def plan_host(tmp_path_factory):
    return compile_c_host(ROOT / "examples" / "plan_host.c",
                          tmp_path_factory.mktemp("plan_host") / "plan_host")


def run(host: Path, options: str, *dirs: Path) -> list[str]:
    result = subprocess.run([str(host), options, *map(str, dirs)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("options, warned", [
    ('{"speculation": 2}', False),
    ('{"speculation": 2, "temperature": 0.7, "tsffi": {"temperature": 0}}', True),
])
def test_each_plan_its_turn_and_warnings(plan_host, options, warned):
    lines = run(plan_host, options, SAMPLES / "mtp", SAMPLES / "both")
    assert lines[0] == f"options {options}"
    for name in ("mtp", "both"):
        at = lines.index(str(SAMPLES / name))
        assert lines[at + 1].startswith("  plan: ")
        plan = json.loads(lines[at + 1][len("  plan: "):])
        assert lines[at + 2] == "  turn: " + json.dumps(plan["turn"], separators=(",", ":"))
        following = lines[at + 3] if at + 3 < len(lines) else ""
        if warned:
            assert plan["warnings"]  # the fixture discriminates: there is one to print
            assert following == "  warnings: " + json.dumps(plan["warnings"],
                                                            separators=(",", ":"))
        else:
            assert plan["warnings"] == [] and not following.startswith("  warnings:")
