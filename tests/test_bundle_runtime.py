"""What an app carries (turbospark_ffi/bundle/runtime.py): the package's
runtime, derived from the package, and a DECLARED standard-library list.

1. Every standard-library import of every runtime module -- found in the
   source, at module level or inside a function -- is declared (a module of
   the list, an extension module, or a built-in one). A runtime module added
   by anyone is scanned too: it needs no listing, but its imports do.
2. The declared list is closed: a `python -I -S` whose sys.path is only a
   zip of exactly the declared modules (as .pyc, as the macOS bundle writes
   it), the runtime's files and the declared extension modules imports each
   runtime module and then each of its lazy imports, by name.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path, PurePath

import pytest

from conftest import ROOT
from turbospark_ffi.bundle import runtime
from turbospark_ffi.bundle.write import _zip_stdlib

PACKAGE = ROOT / "turbospark_ffi"


def runtime_modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if "__pycache__" in rel.parts or not runtime.is_runtime_file(rel):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["turbospark_ffi", *parts])] = path
    return out


def stdlib_imports(path: Path) -> set[str]:
    """Every absolute import of a standard-library module in the file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {n for n in names if n.split(".")[0] in sys.stdlib_module_names}


def test_the_runtime_is_the_package_but_the_tooling():
    mods = runtime_modules()
    assert {"turbospark_ffi", "turbospark_ffi.plan", "turbospark_ffi.wire",
            "turbospark_ffi.options", "turbospark_ffi.policy", "turbospark_ffi._abi",
            "turbospark_ffi._boot", "turbospark_ffi.resident_index"} <= set(mods)
    assert not [m for m in mods if m.split(".")[1:2] and m.split(".")[1] in
                ("bundle", "cli", "install_writer", "__main__", "samples")]
    assert runtime.is_runtime_file(PurePath("typed_json.py"))  # a newcomer is shipped
    assert not runtime.is_runtime_file(PurePath("cli/report.py"))


def test_every_stdlib_import_of_the_runtime_is_declared():
    declared = set(runtime.STDLIB_MODULES) | set(runtime.EXTENSION_MODULES) | \
        set(runtime.BUILTIN_MODULES)
    missing = {name: mod for mod, path in runtime_modules().items()
               for name in stdlib_imports(path) if name not in declared}
    assert missing == {}, (f"runtime modules import standard-library modules that "
                           f"turbospark_ffi/bundle/runtime.py does not declare: {missing}")


CHECK = r"""
import sys, importlib
names = sys.argv[1].split(",")
lazy = sys.argv[2].split(",")
for name in names + lazy:
    importlib.import_module(name)
print("ok", len(names), len(lazy))
"""


def test_the_declared_list_is_closed(tmp_path):
    stdlib = Path(sysconfig.get_path("stdlib"))
    files = runtime.stdlib_files(stdlib)
    zip_path = tmp_path / "stdlib.zip"
    _zip_stdlib(zip_path, stdlib, files)
    site = tmp_path / "site"
    for rel_path in runtime_modules().values():
        rel = rel_path.relative_to(PACKAGE.parent)
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rel_path, site / rel)
    dynload = tmp_path / "dynload"
    dynload.mkdir()
    here = Path(sysconfig.get_config_var("DESTSHARED") or stdlib / "lib-dynload")
    for name in runtime.EXTENSION_MODULES + ("_cffi_backend",):
        found = sorted(here.glob(f"{name}.*.so"))
        if not found:
            import importlib.util
            spec = importlib.util.find_spec(name)
            found = [Path(spec.origin)] if spec and spec.origin and \
                spec.origin.endswith(".so") else []
        for so in found:
            shutil.copyfile(so, dynload / so.name)
    lazy = sorted({n for p in runtime_modules().values() for n in stdlib_imports(p)
                   if n not in sys.builtin_module_names})
    code = f"import sys; sys.path[:] = {[str(site), str(zip_path), str(dynload)]!r}\n" + CHECK
    proc = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", code,
                           ",".join(runtime_modules()), ",".join(lazy)],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok "), proc.stdout


def test_the_closure_check_catches_a_missing_module(tmp_path, monkeypatch):
    """Shown to discriminate: the list without `warnings` (which importlib
    imports) fails the check above."""
    monkeypatch.setattr(runtime, "STDLIB_MODULES",
                        tuple(m for m in runtime.STDLIB_MODULES if m != "warnings"))
    with pytest.raises(AssertionError, match="No module named 'warnings'"):
        test_the_declared_list_is_closed(tmp_path)
