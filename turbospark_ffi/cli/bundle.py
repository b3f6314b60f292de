"""`turbospark-ffi bundle OUT_DIR`: a thin delegate to turbospark_ffi.bundle,
which holds the logic (and the words of what it wrote)."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, CliError, Formatter

__all__ = ["register", "run"]


def register(sub) -> None:
    bundle = sub.add_parser(
        "bundle", formatter_class=Formatter,
        help="write a relocatable folder: the library, the Python it needs, header, module "
             "map, pkg-config file",
        description="Write a relocatable folder holding libtsffi, its header, module "
                    "map and pkg-config file, and the Python it embeds (only what it imports), "
                    "for an application to ship. Run it with the Python the library was built "
                    "with.")
    bundle.add_argument("out_dir", metavar="OUT_DIR",
                        help="the folder to write (must not exist, or be empty)")
    bundle.add_argument("--force", action="store_true",
                        help="replace OUT_DIR if it holds an earlier bundle")
    bundle.add_argument("--no-verify", dest="verify", action="store_false",
                        help="skip re-running the import probe against the written bundle")
    bundle.add_argument("--library", metavar="PATH",
                        help="the library to bundle (default: this package's); a Mach-O one "
                             "gets the macOS layout (Contents/Frameworks, Contents/Resources)")
    bundle.add_argument("--python-home", metavar="PATH",
                        help="the Python to bundle (default: this one); for a Mach-O library, "
                             "a macOS Python's prefix or a framework's Versions/X.Y")
    bundle.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..bundle import BundleError, write_bundle
    try:
        info = write_bundle(args.out_dir, force=args.force, verify=args.verify,
                            library=args.library, python_home=args.python_home)
    except (BundleError, OSError) as exc:
        raise CliError(str(exc)) from None
    print(info.report())
    return EXIT_OK
