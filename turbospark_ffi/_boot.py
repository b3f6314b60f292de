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
    derived from its own path. Another copy -- one a Python host imported
    first, or the package of another copy of the library loaded into the
    same process -- may be another version, and using it silently would lie:
    ImportError, saying which of the two happened and naming both places."""
    import os
    from . import _abi
    found = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if found != os.path.realpath(parent):
        other = _abi.bound_library()
        if other is not None:
            raise ImportError(
                f"another copy of libtsffi ({other}) was loaded into this process first, and "
                f"its package ({found}) is the turbospark_ffi this process's Python imported; "
                f"this copy's own package, in {parent}, cannot be imported beside it (one "
                "Python holds one module of a name). Load one copy of the library, by one "
                "path, everywhere in the process")
        raise ImportError(f"this Python process had already imported turbospark_ffi from "
                          f"{found}, not the package beside the library in {parent}; the "
                          "library uses only its own package: import that one, or load the "
                          "library that sits in the imported package")
    _abi.bind(ffi, lib)
    return _abi
