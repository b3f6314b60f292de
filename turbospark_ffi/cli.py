"""The `turbospark-ffi` command (also `python -m turbospark_ffi`)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _cmd_config(args: argparse.Namespace) -> int:
    from . import native
    parts = []
    if args.cflags:
        parts.append(native.cflags())
    if args.libs:
        parts.append(native.libs())
    if args.includedir:
        parts.append(native.include_dir())
    if args.libdir:
        parts.append(native.package_dir())
    if args.pkg_config_dir:
        import os
        os.makedirs(args.pkg_config_dir, exist_ok=True)
        path = os.path.join(args.pkg_config_dir, "turbospark_ffi.pc")
        with open(path, "w") as f:
            f.write(native.pkg_config())
        parts.append(path)
    if not parts:
        print(native.pkg_config(), end="")
        return 0
    print(" ".join(parts))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turbospark-ffi",
        description="The turbospark-runtime speculation policy: inspect installs, preview "
                    "plans, and link the C library.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    config = sub.add_parser("config", help="how a native host compiles and links the library",
                            description="Print compiler and linker flags for the installed "
                                        "library; with no flag, print a pkg-config file.")
    config.add_argument("--cflags", action="store_true", help="compiler flags (-I...)")
    config.add_argument("--libs", action="store_true", help="linker flags (-L... -l... rpath)")
    config.add_argument("--includedir", action="store_true", help="the header's directory")
    config.add_argument("--libdir", action="store_true", help="the library's directory")
    config.add_argument("--pkg-config-dir", metavar="DIR",
                        help="write turbospark_ffi.pc into DIR and print its path")
    config.set_defaults(run=_cmd_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
