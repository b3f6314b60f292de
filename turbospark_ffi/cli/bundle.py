"""`turbospark-ffi bundle OUT_DIR`: a thin delegate to turbospark_ffi.bundle,
which holds the logic (and the words of what it wrote)."""

from __future__ import annotations

import argparse

from .common import EXIT_OK, CliError, Formatter

__all__ = ["register", "run"]


def register(sub) -> None:
    bundle = sub.add_parser(
        "bundle", formatter_class=Formatter,
        help="write what an app ships: the library and the Python it needs (a relocatable "
             "folder on Linux, Tsffi.xcframework for macOS)",
        description="Write what an application ships: libtsffi and the Python it embeds (only "
                    "what it imports). For an ELF library, a relocatable folder with the "
                    "header, module map and pkg-config file; for a Mach-O library, "
                    "Tsffi.xcframework (a versioned framework: code in Versions/A and "
                    "Versions/A/Frameworks, Python's files in Versions/A/Resources, every "
                    "Mach-O file signed ad hoc) with sign.sh for the app's Run Script phase. "
                    "Run it with the Python the library was built with.")
    bundle.add_argument("out_dir", metavar="OUT_DIR",
                        help="the folder to write (must not exist, or be empty)")
    bundle.add_argument("--force", action="store_true",
                        help="replace OUT_DIR if it holds an earlier bundle")
    bundle.add_argument("--no-verify", dest="verify", action="store_false",
                        help="skip re-running the import probe against the written bundle")
    bundle.add_argument("--library", metavar="PATH",
                        help="the library to bundle (default: this package's); a Mach-O one "
                             "gets Tsffi.xcframework")
    bundle.add_argument("--python-home", metavar="PATH",
                        help="the Python to bundle (default: this one); for a Mach-O library, "
                             "a macOS Python's prefix or a framework's Versions/X.Y")
    bundle.add_argument("--bundle-id", metavar="ID",
                        help="macOS: the framework's CFBundleIdentifier, reverse DNS "
                             "(default: org.tsffi.Tsffi)")
    bundle.add_argument("--cffi-wheel", metavar="WHEEL", action="append", default=[],
                        help="macOS: a cffi macOS wheel whose _cffi_backend is joined with the "
                             "Python's into a universal one (cffi's wheels are thin); "
                             "repeatable")
    bundle.add_argument("--release-zip", action="store_true",
                        help="macOS: also write OUT_DIR/Tsffi.xcframework.zip (links kept) "
                             "and its SHA-256, the checksum a binaryTarget(url:checksum:) takes")
    bundle.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..bundle import BundleError, MacOptions, write_bundle
    from ..bundle.macos import DEFAULT_BUNDLE_ID
    mac = MacOptions(bundle_id=args.bundle_id or DEFAULT_BUNDLE_ID,
                     cffi_wheels=tuple(args.cffi_wheel), release_zip=args.release_zip)
    try:
        info = write_bundle(args.out_dir, force=args.force, verify=args.verify,
                            library=args.library, python_home=args.python_home, mac=mac)
    except (BundleError, OSError) as exc:
        raise CliError(str(exc)) from None
    print(info.report())
    return EXIT_OK
