"""The recipes of README.md and docs/*.md, run as printed against a fresh
install, and every link between them followed.

Every ```sh, ```c, ```swift and ```python block of those pages is preceded
by a `<!-- readme-test: NAME -->` marker (NAME unique across the pages), and
NAME is run here: the block's text is taken from the page itself, so a
recipe that stops working fails this file. A ```text block may carry a
marker too: its runner compares it with what a recipe printed. The install is conftest's `pip_installed` (pip's isolated build, a
fresh venv); its `bin/` comes first on PATH, as after `make demo` with the
venv on PATH, but for the README's C build recipe, which runs from a shell
without it (the recipe's own first line puts it there). Each shell block runs with `bash -euo pipefail` in a fresh
directory holding `app.c` (the C block), never in the checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import LIBRARY, ROOT
from original_texts import DFLASH_NOTE

README = ROOT / "README.md"
# The pages whose blocks are run and whose links are followed: the front door
# and the reference beside it.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("sh", "c", "swift", "python")
TIMEOUT = 900

NOTE = DFLASH_NOTE  # the original module's text, transcribed once
LIBRARY_FILE = LIBRARY.name
NOTE_IN_JSON = json.dumps(NOTE)[1:-1]


def readme_blocks(text: str) -> list[tuple[str | None, str, str, int]]:
    """(marker name or None, language, body, line) of every fenced block of
    one page."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if m:
            start = i
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            before = lines[start - 1] if start > 0 else ""
            marker = re.fullmatch(r"<!-- readme-test: ([a-z0-9-]+) -->", before)
            skipped = re.fullmatch(r"<!-- readme-test-skip: (.+) -->", before)
            name = marker.group(1) if marker else ("skip" if skipped else None)
            blocks.append((name, m.group(1), "\n".join(lines[start + 1:j]) + "\n", start + 1))
            i = j + 1
        else:
            i += 1
    return blocks


def page_blocks() -> list[tuple[str | None, str, str, str]]:
    """(marker name or None, language, body, "page:line") of every fenced
    block of every page."""
    return [(name, lang, body, f"{page.relative_to(ROOT)}:{line}")
            for page in PAGES for name, lang, body, line in readme_blocks(page.read_text())]


BLOCKS = page_blocks()
BY_NAME = {name: body for name, _, body, _ in BLOCKS if name and name != "skip"}


def test_every_recipe_block_is_run_here():
    """Every block is run here, but for illustrations that cannot run on
    this platform (`readme-test-skip: why`), which a shell or C block never
    is."""
    unmarked = [f"{where}: ```{lang}" for name, lang, _, where in BLOCKS
                if lang in RUNNABLE and name is None]
    assert unmarked == [], "blocks nobody runs (add a readme-test marker and a runner)"
    assert not [where for name, lang, _, where in BLOCKS if name == "skip" and lang in ("sh", "c")]
    names = [name for name, *_ in BLOCKS if name and name != "skip"]
    assert sorted(names) == sorted(RUNNERS), "markers and runners must match one to one"


def run_block(body: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, (f"README block failed ({result.returncode}):\n{body}\n"
                                    f"stdout:\n{result.stdout[-3000:]}\nstderr:\n"
                                    f"{result.stderr[-3000:]}")
    return result


@pytest.fixture
def user_env(pip_installed) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PKG_CONFIG"))}
    env["PATH"] = f"{pip_installed.bin}:/opt/swift/usr/bin:{env.get('PATH', '/usr/bin:/bin')}"
    return env


@pytest.fixture
def workdir(tmp_path) -> Path:
    (tmp_path / "app.c").write_text(BY_NAME["c-app"])
    return tmp_path


def samples(pip_installed) -> Path:
    return pip_installed.site / "turbospark_ffi" / "samples"


# ---------------------------------------------------------------------------
# Runners, one per marker.

def run_ci(**_):
    """The two commands are what .ci/run runs; check it runs each of them."""
    ci = (ROOT / ".ci" / "run").read_text()
    for line in BY_NAME["ci"].splitlines():
        command = line.split("#", 1)[0].split()
        if command:
            assert command[0] == "make"
            assert re.search(rf"^\s*make\b[^\n]*\b{command[1]}\b", ci, re.M), command


def run_c_app(workdir, pip_installed, **_):
    """The C block is a whole program and compiles as printed, strictly."""
    include = pip_installed.site / "turbospark_ffi" / "include"
    for compiler in ("cc", "clang"):
        result = subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic",
                                 f"-I{include}", "-c", "-o", str(workdir / "app.o"),
                                 str(workdir / "app.c")], capture_output=True, text=True)
        assert result.returncode == 0, (compiler, result.stderr)


def newcomer_env(user_env: dict, pip_installed) -> dict:
    """A fresh shell: the install's bin/ NOT on PATH (the recipe must put it
    there itself, as a newcomer types it)."""
    env = dict(user_env)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if p != str(pip_installed.bin))
    assert shutil.which("turbospark-ffi", path=env["PATH"]) is None
    return env


def run_c_build(workdir, user_env, pip_installed, **_):
    """The build recipe, run as a newcomer runs it: in the checkout after
    `make demo` (its .venv here is the fresh install), from a shell whose
    PATH does not hold .venv/bin; and the output the README shows for it,
    word for word but for where the samples are installed."""
    (workdir / ".venv").symlink_to(pip_installed.venv)
    out = run_block(BY_NAME["c-build"], workdir, newcomer_env(user_env, pip_installed)).stdout
    assert NOTE_IN_JSON in out
    assert out.replace(str(samples(pip_installed)), "$SAMPLES") == BY_NAME["c-build-output"]
    config = run_block("turbospark-ffi config --cflags", workdir, user_env).stdout
    assert config.strip() == f"-I{pip_installed.site / 'turbospark_ffi' / 'include'}"


def run_c_build_output(**_):
    """Checked by run_c_build, which produces it; here only that it is the
    one line a plan prints."""
    assert BY_NAME["c-build-output"].count("\n") == 1


def run_c_choices(workdir, user_env, pip_installed, **_):
    """The settings-pane C block: compiled strictly with the installed
    command's flags, run on the DFlash2-only sample: 51 items."""
    (workdir / "choices.c").write_text(BY_NAME["c-choices"])
    out = run_block('cc -std=c99 -Wall -Wextra -Werror -pedantic -o choices choices.c '
                    '$(turbospark-ffi config --cflags --libs)\n'
                    f'./choices "{samples(pip_installed) / "dflash"}"', workdir, user_env).stdout
    table = json.loads(out)
    assert len(table["choices"]) == 51 and table["install"]["installHasDflash"] is True


def run_c_reconcile(workdir, user_env, pip_installed, **_):
    """The c-api.md reconcile block: compiled strictly, run on the MTP sample
    with a session info whose speculation differs from the preview's; the
    plan after it is the engine's."""
    (workdir / "reconcile.c").write_text(BY_NAME["c-reconcile"])
    (workdir / "session.json").write_text(json.dumps({
        "modelDir": "/Users/me/models/qwen-27b.gturbo", "contextWindow": 32768,
        "speculation": {"block": None, "drafter": None, "reason": "the vision tower is active"},
        "kvBits": "off"}))
    out = run_block('cc -std=c99 -Wall -Wextra -Werror -pedantic -o reconcile reconcile.c '
                    '$(turbospark-ffi config --cflags --libs)\n'
                    f'./reconcile "{samples(pip_installed) / "mtp"}" session.json', workdir,
                    user_env).stdout
    verdict, plan = map(json.loads, out.splitlines())
    assert (verdict["agrees"], verdict["differences"]) == (
        False, ["speculation.block", "speculation.drafter", "speculation.reason"])
    assert verdict["preview"]["speculation"]["block"] == 2
    assert (plan["source"], plan["speculation"]["reason"]) == ("engine",
                                                              "the vision tower is active")


def run_python(workdir, user_env, **_):
    # From "/": the venv's package, never a source tree.
    result = subprocess.run([shutil.which("python3", path=user_env["PATH"]), "-c",
                             BY_NAME["python"]], cwd="/", env=user_env, capture_output=True,
                            text=True, timeout=TIMEOUT)
    assert result.returncode == 0 and result.stdout, result.stderr


def _swift_checkout(workdir: Path) -> Path:
    """The swift/ folder of a fresh clone (no build products)."""
    repo = workdir / "repo"
    shutil.copytree(ROOT / "swift", repo / "swift",
                    ignore=shutil.ignore_patterns(".build", ".build-pc", ".build-cases",
                                                  ".swiftpm"))
    return repo


def run_swift_build(workdir, user_env, **_):
    run_block(BY_NAME["swift-build"], _swift_checkout(workdir), user_env)


SNIPPET_PACKAGE = """// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "Snippet",
    dependencies: [.package(path: "%s")],
    targets: [.executableTarget(name: "Snippet",
                                dependencies: [.product(name: "SpeculationPreview", package: "swift")])]
)
"""


def _run_swift(workdir, user_env, pip_installed, main_swift: str) -> str:
    """Compile `main_swift` in a package of its own that depends on the
    checkout's swift/ package, run it on the DFlash2-only sample, and return
    what it printed."""
    repo = _swift_checkout(workdir)
    package = workdir / "snippet"
    (package / "Sources" / "Snippet").mkdir(parents=True)
    (package / "Package.swift").write_text(SNIPPET_PACKAGE % (repo / "swift"))
    (package / "Sources" / "Snippet" / "main.swift").write_text(main_swift)
    env = dict(user_env)
    pc = workdir / "pc"
    run_block(f'turbospark-ffi config --pkg-config-dir "{pc}"', workdir, env)
    env["PKG_CONFIG_PATH"] = str(pc)
    libdir = pip_installed.site / "turbospark_ffi"
    run_block(f'swift build -Xlinker -rpath -Xlinker "{libdir}"', package, env)
    return run_block(f'.build/debug/Snippet "{samples(pip_installed) / "dflash"}"', package,
                     env).stdout


def run_swift_snippet(workdir, user_env, pip_installed, **_):
    """docs/swift.md's block: the plan, and which options are valid."""
    out = _run_swift(workdir, user_env, pip_installed,
                     BY_NAME["swift-snippet"] + "\nshowPlan(modelDir: CommandLine.arguments[1])\n"
                     'print(try optionsAreValid("{}"), try optionsAreValid(#"{"speculation": 16}"#),\n'
                     '      try optionsAreValid("{nope"))\n')
    # The named context window gets the preview's warning: whether the
    # machine's memory holds it is the open's to know.
    assert out == NOTE + ("\nmaxContext 32768: whether this machine's memory holds that context "
                          "window is the open's to decide, and this preview cannot know; it "
                          "takes the window to fit\ntrue false false\n")


def run_swift_readme(workdir, user_env, pip_installed, **_):
    """The README's Swift block prints the DFlash2 note, as its comment says."""
    out = _run_swift(workdir, user_env, pip_installed,
                     BY_NAME["swift-readme"] + "\nshowPlan(modelDir: CommandLine.arguments[1])\n")
    assert out == NOTE + "\n"


def run_bundle_app(workdir, user_env, **_):
    out = run_block(BY_NAME["bundle-app"], workdir, user_env).stdout
    assert NOTE_IN_JSON in out
    assert not (workdir / "dist").exists() and (workdir / "moved" / "app").exists()


def run_python_check(pip_installed, user_env, **_):
    """From a copy of the checkout (pip_installed's source), with the
    installed venv's python3 first on PATH: the described Python is accepted
    and build.json names its libpython."""
    import sysconfig
    source = pip_installed.source
    shutil.rmtree(source / "build" / "check", ignore_errors=True)
    out = run_block(BY_NAME["python-check"], source, user_env).stdout
    printed, text = out.split("\n", 1)  # ffi_build.py prints where it wrote build.json
    assert printed == "build/check/build.json"
    spec = json.loads(text)
    assert spec["libraries"][-1] == f"python{sysconfig.get_config_var('VERSION')}"
    assert spec["output"] == str(source / "build" / "check" / LIBRARY_FILE)
    assert json.loads((source / "python.json").read_text())["base_prefix"]


RUNNERS = {"ci": run_ci, "python-check": run_python_check, "c-app": run_c_app, "c-build": run_c_build,
           "c-build-output": run_c_build_output, "c-choices": run_c_choices,
           "c-reconcile": run_c_reconcile,
           "python": run_python,
           "swift-build": run_swift_build, "swift-snippet": run_swift_snippet,
           "swift-readme": run_swift_readme,
           "bundle-app": run_bundle_app}


@pytest.mark.parametrize("name", sorted(RUNNERS))
def test_readme_block(name, request):
    runner = RUNNERS[name]
    wanted = runner.__code__.co_varnames[:runner.__code__.co_argcount]
    runner(**{arg: request.getfixturevalue(arg) for arg in wanted})


# ---------------------------------------------------------------------------
# Links: every relative link of every page names a file that exists, and an
# anchor that one of its headings makes.

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub makes from a page's headings: lower case, spaces to
    hyphens, punctuation but hyphens and underscores dropped (code fences
    skipped, so a `#` line inside a block is not a heading)."""
    anchors, fenced = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def page_links() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for m in LINK.finditer(text):
            out.append((str(page.relative_to(ROOT)), m.group(1) or m.group(2)))
    return out


def broken(page: str, target: str) -> str | None:
    if re.match(r"^[a-z]+:", target):
        return None  # an outside address: not ours to check offline
    path, _, anchor = target.partition("#")
    file = (ROOT / page).parent / path if path else ROOT / page
    if not file.exists():
        return f"{page}: {target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}"
    if anchor and anchor not in heading_anchors(file.read_text()):
        return f"{page}: {target}: no heading makes #{anchor} in {file.name}"
    return None


def test_link_checker_catches_a_missing_file_and_a_missing_anchor():
    """The checker must fail on what it is there to catch before its silence
    means anything."""
    assert broken("README.md", "docs/nope.md") is not None
    assert broken("README.md", "docs/c-api.md#no-such-heading") is not None
    assert broken("README.md", "docs/c-api.md#model-names") is None
    assert broken("docs/c-api.md", "#model-names") is None
    assert broken("docs/c-api.md", "ENGINE.md#1-an-install-and-its-resident-index") is None


def test_every_link_resolves():
    links = page_links()
    assert len(links) > 20, links  # the map in the README alone has 11
    assert [problem for page, target in links if (problem := broken(page, target))] == []
