"""`turbospark-ffi config`: how a native host compiles and links the library."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, CliError, Formatter

__all__ = ["register", "run", "write_pkg_config"]

PKG_CONFIG_DIR_ACCEPTS = ("accepts an existing directory, or a new one inside an existing "
                          "directory (created as mkdir creates it)")


def register(sub) -> None:
    config = sub.add_parser("config", help="how a native host compiles and links the library",
                            formatter_class=Formatter,
                            description="Print compiler and linker flags for the installed "
                                        "library; with no flag, print a pkg-config file.")
    config.add_argument("--cflags", action="store_true", help="compiler flags (-I...)")
    config.add_argument("--libs", action="store_true", help="linker flags (-L... -l... rpath)")
    config.add_argument("--includedir", action="store_true", help="the header's directory")
    config.add_argument("--libdir", action="store_true", help="the library's directory")
    config.add_argument("--samples", action="store_true",
                        help="the directory of the four sample installs shipped with the package")
    config.add_argument("--pkg-config-dir", metavar="DIR",
                        help="write tsffi.pc into DIR and print its path; DIR is an existing "
                             "directory, or a new one in an existing directory (created, as "
                             "mkdir would; missing parents are an error, never created)")
    config.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import os
    from .. import native
    parts = []
    if args.cflags:
        parts.append(native.cflags())
    if args.libs:
        parts.append(native.libs())
    if args.includedir:
        parts.append(native.include_dir())
    if args.libdir:
        parts.append(native.package_dir())
    if args.samples:
        parts.append(os.path.join(native.package_dir(), "samples"))
    if args.pkg_config_dir:
        parts.append(write_pkg_config(args.pkg_config_dir))
    if not parts:
        print(native.pkg_config(), end="")
        return EXIT_OK
    print(" ".join(parts))
    return EXIT_OK


def write_pkg_config(directory: str) -> str:
    """Write tsffi.pc into `directory` and return its path. At most the last
    component is created: a mistyped parent (/nonexistent/x/y) is an error
    naming it, never a tree of directories made silently."""
    import os
    from .. import native
    what = f"--pkg-config-dir: got {directory!r}"
    parent = os.path.dirname(os.path.abspath(directory))
    if not os.path.isdir(directory):
        if os.path.lexists(directory):
            raise CliError(f"{what}, which exists and is not a directory; {PKG_CONFIG_DIR_ACCEPTS}")
        if not os.path.isdir(parent):
            raise CliError(f"{what}, whose parent {parent} is not an existing directory (no "
                           f"directory was created); {PKG_CONFIG_DIR_ACCEPTS}")
    path = os.path.join(directory, f"{native.PKG_CONFIG_NAME}.pc")
    try:
        os.makedirs(directory, exist_ok=True)
        with open(path, "w") as f:
            f.write(native.pkg_config())
    except OSError as exc:
        raise CliError(f"{what}: cannot write {path}: {exc.strerror or exc}") from None
    return path
