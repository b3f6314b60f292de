"""What an app carries of this package and of the standard library: the
runtime, not the tooling.

The runtime is every module of the package but the named tooling -- so a
module added later (a new reader, say) is shipped without anyone listing it,
and tests/test_bundle_runtime.py fails loudly if it imports a standard-library
module this file does not declare. The tooling never runs inside an app:
`bundle/` (this command), `cli/` (the command line), `install_writer` (writes
test installs), `__main__`, and the sample installs.

The standard library is a DECLARED list, not a trace of calls: a trace
covers the paths the probe happened to take, and a lazy import on any other
path would fail only in a user's app. The list is every standard-library
module the runtime imports, at module level or inside a function, closed
over what those modules import in turn (CPython 3.11's own sources):
tests/test_bundle_runtime.py imports each runtime module and each of its
lazy imports with only a bundled copy of this list on sys.path.
"""

from __future__ import annotations

from pathlib import Path, PurePath

__all__ = ["TOOLING", "STDLIB_MODULES", "EXTENSION_MODULES", "BUILTIN_MODULES",
           "WHOLE_PACKAGES", "is_runtime_file", "stdlib_files"]

# Top-level names under turbospark_ffi/ that are tooling (a package folder or
# a module's stem).
TOOLING = ("bundle", "cli", "install_writer", "__main__", "samples")

# Standard-library modules shipped as .pyc in the zip. The runtime's own
# imports: __future__, json, os, re, stat, warnings (via importlib),
# importlib; the rest is what those import.
STDLIB_MODULES = (
    "__future__", "_collections_abc", "abc", "codecs", "collections", "copyreg", "enum",
    "functools", "genericpath", "importlib", "io", "json", "json.decoder", "json.encoder",
    "json.scanner", "keyword", "operator", "os", "posixpath", "re", "re._casefix",
    "re._compiler", "re._constants", "re._parser", "reprlib", "stat", "types", "warnings",
    "zipimport",
)
# Packages shipped whole: a host's locale picks the codec its stdio and file
# names use, which cannot be known here (bundle/write.py, _WHOLE_PACKAGES).
# The dependencies of the bytes-to-bytes codecs (idna's unicodedata, the
# compression codecs' zlib and bz2) are not: no locale names them.
WHOLE_PACKAGES = ("encodings",)
# Extension modules (lib-dynload): json's accelerator and the CJK codecs the
# text encodings load. One a Python compiled in is not looked for.
EXTENSION_MODULES = ("_codecs_cn", "_codecs_hk", "_codecs_iso2022", "_codecs_jp",
                     "_codecs_kr", "_codecs_tw", "_json", "_multibytecodec")
# Compiled into every CPython 3.11 (sys.builtin_module_names) or frozen: never
# files, named so that the test can tell a declared import from a missing one.
BUILTIN_MODULES = ("sys", "time", "itertools", "_operator", "_stat", "_imp", "_io",
                   "_codecs", "_collections", "_functools", "_abc", "_sre", "_thread",
                   "_warnings", "_weakref", "posix", "errno", "marshal", "_signal")


def is_runtime_file(rel: PurePath) -> bool:
    """Whether the package file at `rel` (relative to turbospark_ffi/) is
    part of the runtime an app carries."""
    top = rel.parts[0]
    return top not in TOOLING and PurePath(top).stem not in TOOLING


def stdlib_files(stdlib: Path) -> dict[str, Path]:
    """The declared modules (and the whole packages) as files of the standard
    library at `stdlib`: {module name: source file}. A declared module that
    is not there is an error: the list names what the runtime needs."""
    from .common import BundleError
    out: dict[str, Path] = {}
    for name in STDLIB_MODULES:
        parts = name.split(".")
        for cand in (stdlib.joinpath(*parts, "__init__.py"),
                     stdlib.joinpath(*parts[:-1], parts[-1] + ".py")):
            if cand.is_file():
                out[name] = cand
                break
        else:
            raise BundleError(f"the standard library at {stdlib} has no module {name}, which "
                              "the runtime imports (bundle/runtime.py, STDLIB_MODULES)")
    for pkg in WHOLE_PACKAGES:
        for src in sorted((stdlib / pkg).glob("*.py")):
            name = pkg if src.stem == "__init__" else f"{pkg}.{src.stem}"
            out[name] = src
    return out
