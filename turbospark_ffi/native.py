"""Where the native pieces of an installed package are, and how a C host
links them: the data behind `turbospark-ffi config` and the pkg-config file."""

from __future__ import annotations

import os
import sys

__all__ = ["LINK_NAME", "HEADER_NAME", "PKG_CONFIG_NAME", "BUILD_PATH_TAG", "package_dir",
           "include_dir", "library_name", "library_path", "cflags", "libs", "pkg_config",
           "header_constants"]

# The one source of the library's file names. The prefix of every exported
# name is the file name, as libsqlite3 goes with sqlite3_: the engine's own
# C-ABI library is libturbospark_ffi.a (docs/ENGINE.md), and an app that
# links both must be able to say -lturbospark_ffi -ltsffi in either order.
LINK_NAME = "tsffi"
HEADER_NAME = f"{LINK_NAME}.h"
PKG_CONFIG_NAME = LINK_NAME
# Leads each path of the build machine the library stores (ffi_build.py's
# TSFFI_BUILD_PATH_TAG), so that a bundle finds and blanks them in its copy
# (bundle/common.py, blank_build_paths) without knowing what they were.
BUILD_PATH_TAG = "tsffi-build-path:"


def package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def include_dir() -> str:
    return os.path.join(package_dir(), "include")


def library_name(platform: str | None = None) -> str:
    """The library's file name on `platform` (a sys.platform value; default:
    this machine's). The build asks for darwin's from Linux (ffi_build.py
    --emit-c --platform darwin)."""
    suffix = ".dylib" if (platform or sys.platform) == "darwin" else ".so"
    return f"lib{LINK_NAME}{suffix}"


def library_path() -> str:
    return os.path.join(package_dir(), library_name())


def cflags() -> str:
    return f"-I{include_dir()}"


def libs() -> str:
    # The rpath lets the host find the library where the package lives
    # without LD_LIBRARY_PATH; the library finds libpython by its own rpath.
    return f"-L{package_dir()} -l{LINK_NAME} -Wl,-rpath,{package_dir()}"


def pkg_config(prefix: str | None = None) -> str:
    """A tsffi.pc. With `prefix`, paths are relative to it (a bundle
    sets `prefix=${pcfiledir}/..`); without, they point into this package."""
    from . import __version__
    if prefix is None:
        libdir, includedir, head = package_dir(), include_dir(), ""
    else:
        head = f"prefix={prefix}\n"
        libdir, includedir = "${prefix}/lib", "${prefix}/include"
    return (f"{head}libdir={libdir}\nincludedir={includedir}\n\n"
            f"Name: {PKG_CONFIG_NAME}\n"
            "Description: the turbospark-runtime speculation policy as a C ABI\n"
            f"Version: {__version__}\n"
            "Cflags: -I${includedir}\n"
            "Libs: -L${libdir} -l" + LINK_NAME + " -Wl,-rpath,${libdir}\n")


def header_constants(text: str) -> dict[str, int]:
    """Every `#define TSFFI_NAME <integer>` of the header text (an unsigned
    suffix allowed, comments ignored): the status codes, the ABI version, the
    other numbers. The one reader of them, for the build (cffi's
    declarations), the bundle's marker and the tests."""
    import re
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(TSFFI_[A-Z0-9_]+)[ \t]+(\d+)u?[ \t]*$",
                        text, re.M)}
