"""Attaching the package to the library that embeds it.

cffi's init code (ffi_build.INIT_CODE) imports the package from the folder
beside the library and calls `attach`; the bundle's import probe calls the
same function to measure the same start. What stays in the init code is only
what must run before the package can be imported (the exported callbacks,
the silenced streams) or when it cannot be.
"""

from __future__ import annotations

__all__ = ["attach"]


def attach(ffi, lib, parent: str):
    """Bind the ABI dispatcher to the library and return it (`_abi`), after
    checking that this package is the one in `parent`, the folder the library
    derived from its own path. Another copy -- further down sys.path, or one
    a Python host imported first -- may be another version, and using it
    silently would lie: ImportError, naming both places."""
    import os
    found = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if found != os.path.realpath(parent):
        raise ImportError(f"no turbospark_ffi package beside the library in {parent} "
                          f"(a different copy at {found} was not used)")
    from . import _abi
    _abi.bind(ffi, lib)
    return _abi
