"""The package's layers only point down.

Every module has a layer; an import (at module level or inside a function,
where most of them are, for start-up time) may only name a module of a
lower layer or its own, and the imports form no cycle. A new module fails
here until it is given a layer.

    0  errors, _value, engine_texts, engine_revision, reasons
                                    values and errors; the engine's own words
                                    and the revision each rule follows; the
                                    one table of reason codes
    1  jsontext, typed_json, rust_text, regular_file
                                    JSON text in and out, no shapes; JSON
                                    text decoded into a declared type as
                                    serde_json decodes it; Rust's texts of
                                    values; the one bounded, non-blocking
                                    open of a file the library reads, file
                                    identity and the racy window
    2  resident_index, expert_layout, model_names, store, manifest_arch
                                    the install's files: the reader, the
                                    layout, model names, the store's rows,
                                    the manifest's `arch`
    3  policy, turn                 the original module's types and three decisions; the
                                    turn's gate
    4  options, blockers, runner_open
                                    option keys to the policy's typed requests;
                                    the engine's blocker; what the runner's
                                    open checks (dtype gates, drafter builds)
    5  snapshots                    the install snapshots: what an install's
                                    files say (manifest, index, layout), kept
                                    while stat() says they are unchanged
       reconcile_memory             the engine's reported outcome, compared
                                    and remembered per install and options
    6  plan                         every decision: the open end to end, the
                                    choices table, install info's verdicts;
                                    the one request of every entry point
       store_listing                the store as tsffi_store_json lists it
    7  wire                         every JSON shape of the C ABI
       reconcile                    tsffi_reconcile: the preview against the
                                    engine's report
    8  api                          the Python API and the C ABI's answers as
                                    bytes: request, decide, shape
    9  _abi, _boot, cli.*, bundle.*, install_writer, native, __main__
                                    the glue: C, the command line, bundles,
                                    test installs, build flags
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "turbospark_ffi"

LAYERS = {
    "errors": 0, "_value": 0, "engine_texts": 0, "engine_revision": 0, "reasons": 0,
    "jsontext": 1, "typed_json": 1, "rust_text": 1, "regular_file": 1,
    "resident_index": 2, "expert_layout": 2, "model_names": 2, "store": 2, "manifest_arch": 2,
    "policy": 3, "turn": 3,
    "options": 4, "blockers": 4, "runner_open": 4,
    "snapshots": 5, "reconcile_memory": 5,
    "plan": 6, "store_listing": 6,
    "wire": 7, "reconcile": 7,
    "api": 8,
    "_abi": 9, "_boot": 9, "cli": 9, "install_writer": 9, "native": 9, "__main__": 9,
    "bundle": 9, "bundle.common": 9, "bundle.elf": 9, "bundle.macho": 9, "bundle.macos": 9,
    "bundle.probe": 9, "bundle.runtime": 9, "bundle.write": 9, "bundle.codesign": 9,
    "bundle.release": 9,
    "cli.common": 9, "cli.report": 9, "cli.parser": 9, "cli.config": 9, "cli.inspect": 9,
    "cli.decisions": 9, "cli.reconcile": 9, "cli.make_install": 9, "cli.bundle": 9, "cli.store": 9,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_imports(path: Path) -> set[str]:
    """The package modules `path` imports, wherever the import statement is.
    `from . import __version__` names the package itself, not a module."""
    mod = module_name(path)
    is_package = path.name == "__init__.py"
    base = mod.split(".") if is_package else mod.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            anchor = base[:len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join(anchor + ([node.module] if node.module else []))
            if node.module is None:
                for alias in node.names:
                    name = ".".join(filter(None, [target, alias.name]))
                    if (PACKAGE / (name.replace(".", "/") + ".py")).exists() or \
                            (PACKAGE / name.replace(".", "/")).is_dir():
                        found.add(name)
            elif target:
                found.add(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("turbospark_ffi."):
                    found.add(alias.name[len("turbospark_ffi."):])
    found.discard(mod)
    return found


GRAPH = {module_name(p): package_imports(p) for p in sorted(PACKAGE.rglob("*.py"))
         if module_name(p)}


def test_every_module_has_a_layer():
    assert sorted(set(GRAPH) - set(LAYERS)) == []
    assert sorted(set(LAYERS) - set(GRAPH)) == []  # no stale rows


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    up = sorted(dep for dep in GRAPH[module] if LAYERS[dep] > LAYERS[module])
    assert up == [], f"{module} (layer {LAYERS[module]}) imports from higher layers"


def test_no_import_cycle():
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, path: list[str]) -> bool:
        state[node] = 1
        for dep in sorted(GRAPH[node]):
            if state.get(dep) == 1:
                cycle.extend(path[path.index(dep):] + [dep] if dep in path else [node, dep])
                return True
            if dep not in state and visit(dep, path + [dep]):
                return True
        state[node] = 2
        return False

    for node in sorted(GRAPH):
        if node not in state and visit(node, [node]):
            break
    assert cycle == []


def test_the_reader_of_the_imports_sees_them():
    """The graph this file checks is real: known edges are found, at module
    level and inside functions alike."""
    assert "jsontext" in GRAPH["options"]          # module level
    assert "resident_index" in GRAPH["policy"]     # inside a function
    assert "bundle.elf" in GRAPH["bundle.write"]   # a subpackage's relative import
    assert "policy" in GRAPH["wire"]
