"""What the ELF and the Mach-O sides of a bundle share: the one error a
bundle step raises, and blanking the build machine's paths in the bundled
copy of the library."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BundleError", "blank_build_paths"]


class BundleError(Exception):
    """Why a bundle could not be written: one line, for the user."""


def blank_build_paths(path: str | os.PathLike) -> list[str]:
    """Overwrite, in the library file at `path` (ELF or Mach-O, every slice of
    a universal file), each path of the build machine it stores with NULs:
    the home, standard library and extension-module directory of the Python
    it was built against (ffi_build.build_defines), each stored as one
    NUL-terminated string led by native.BUILD_PATH_TAG. The tag stays and no
    byte moves: the strings sit in read-only data that nothing points into
    but the library's own code, which reads them only outside a bundle (a
    bundled library finds its layout from its own location;
    src/tsffi_embed.c, tsffi_build_path). They name the developer's Python
    -- for pyenv or uv, a home folder -- so a bundle does not ship them.

    Returns the texts blanked, in file order ([] for a copy blanked
    before). A library without the tag was built by an older ffi_build.py,
    which stored them where they cannot be found: refused. A Mach-O file's
    signature is voided by the edit, as by every other one of the bundle's
    (sign.sh signs after the last)."""
    from .. import native
    path = Path(path)
    data = bytearray(path.read_bytes())
    tag = native.BUILD_PATH_TAG.encode()
    texts: list[str] = []
    found = 0
    at = data.find(tag)
    while at != -1:
        found += 1
        start = at + len(tag)
        end = data.find(b"\0", start)
        if end == -1:
            raise BundleError(f"{path.name}: the build path after {native.BUILD_PATH_TAG!r} at "
                              f"byte {at} has no end; the file is damaged")
        if end > start:
            texts.append(data[start:end].decode("utf-8", "replace"))
            data[start:end] = bytes(end - start)
        at = data.find(tag, end)
    if not found:
        raise BundleError(f"{path.name} does not mark the build machine's paths it stores "
                          f"(no {native.BUILD_PATH_TAG!r}): it was built by an older "
                          "ffi_build.py; rebuild it (python ffi_build.py) and bundle again")
    if texts:
        path.write_bytes(data)
    return texts
