"""A module's underscore names are its own (beside tests/test_layers.py,
which holds where imports may point).

In the package, no module imports another module's underscore name, reads
one as an attribute of an imported module, or reaches into an object for an
underscore attribute its own module does not define: a fast path another
module needs is a public, named operation of the module that owns the data.
A leading underscore on a MODULE (`_abi`, `_value`, `_boot`) marks it private
to the package, not to itself, so importing it is allowed; dunders are not
private names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "turbospark_ffi"
SOURCES = sorted(p for p in PACKAGE.rglob("*.py"))


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def own_names(tree: ast.AST) -> set[str]:
    """Underscore names a module defines itself: its functions, classes and
    globals, the attributes it assigns on self/cls or lists in __slots__, and
    the keywords of its own methods."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            for elt in ast.walk(node.value):
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                    names.add(elt.value)
    return {n for n in names if private(n)}


def is_module(path: Path, module: str | None, level: int, name: str) -> bool:
    """Whether `from <level dots><module> import name` names a package module."""
    base = path.parent
    for _ in range(level - 1):
        base = base.parent
    if module:
        base = base.joinpath(*module.split("."))
    return (base / f"{name}.py").exists() or (base / name).is_dir()


def reach_ins(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    mine = own_names(tree)
    imported_modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                if is_module(path, node.module, node.level, alias.name):
                    imported_modules.add(alias.asname or alias.name)
                elif private(alias.name):
                    found.append(f"line {node.lineno}: imports {alias.name} from "
                                 f"{'.' * node.level}{node.module or ''}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in imported_modules:
                found.append(f"line {node.lineno}: reads {owner.id}.{node.attr}")
            elif isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            elif node.attr not in mine:
                found.append(f"line {node.lineno}: reaches into .{node.attr}, which "
                             f"{path.name} does not define")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PACKAGE)) for p in SOURCES])
def test_no_reach_into_another_modules_private_names(path):
    assert reach_ins(path) == []


FIXTURES = [
    # (module source, what the check must say): shown to discriminate.
    ("from .options import _block\n", "imports _block from .options"),
    ("from . import resident_index\nresident_index._native\n", "reads resident_index._native"),
    ("def f(snap):\n    return snap._memo\n", "reaches into ._memo"),
    ("class A:\n    __slots__ = ('_memo',)\n    def f(self, other):\n"
     "        return other._memo\n", None),
    ("from ._value import Value\n", None),
    ("from . import _abi\n", None),
    ("def f(x):\n    return x.__class__\n", None),
]


@pytest.mark.parametrize("source, says", FIXTURES, ids=[f[0][:30] for f in FIXTURES])
def test_the_check_sees_a_reach_in(tmp_path, source, says):
    # Laid out as the package is, so that relative imports resolve the same.
    package = tmp_path / "turbospark_ffi"
    package.mkdir()
    for module in ("options", "resident_index", "_value", "_abi"):
        (package / f"{module}.py").write_text("")
    probe = package / "probe.py"
    probe.write_text(source)
    found = reach_ins(probe)
    if says is None:
        assert found == []
    else:
        assert len(found) == 1 and says in found[0], found
