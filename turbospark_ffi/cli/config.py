"""`turbospark-ffi config`: how a native host compiles and links the library."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, Formatter

__all__ = ["register", "run"]


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
                        help="write tsffi.pc into DIR and print its path")
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
        os.makedirs(args.pkg_config_dir, exist_ok=True)
        path = os.path.join(args.pkg_config_dir, f"{native.PKG_CONFIG_NAME}.pc")
        with open(path, "w") as f:
            f.write(native.pkg_config())
        parts.append(path)
    if not parts:
        print(native.pkg_config(), end="")
        return EXIT_OK
    print(" ".join(parts))
    return EXIT_OK
