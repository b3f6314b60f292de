"""`turbospark-ffi bundle OUT_DIR`: a relocatable folder holding the C library
and everything it needs at run time, so a GUI ships it inside the application
without asking its users to install Python.

    OUT_DIR/
      include/tsffi.h
      module.modulemap                  module Tsffi (Swift/Clang)
      lib/libtsffi.so          RUNPATH $ORIGIN
      lib/libpython3.11.so.1.0          RUNPATH $ORIGIN
      lib/pkgconfig/tsffi.pc   prefix=${pcfiledir}/../..
      python/                           the embedded interpreter's home
        turbospark_bundle.txt           the marker the library looks for
        python311.zip                   only the standard library it imports
        lib/python3.11/lib-dynload/     only the extension modules it loads
        site-packages/                  _cffi_backend and this package

The library finds all of it from its own path (src/tsffi_embed.c,
tsffi_find_layout): when `<dir of the .so>/../python/turbospark_bundle.txt`
exists it starts an isolated interpreter whose home and search path lie in
the bundle and nowhere else.

Which standard-library modules go in is measured, not listed: a probe runs
this package's ABI dispatcher -- every entry point, the error paths too (a
bad JSON argument is what imports `json`) -- in a `python -I -S`
interpreter and reports `sys.modules`. The same probe then runs again with
only the written bundle on `sys.path`, and must give the same answers.

Every ELF file is copied, stripped of what is not loaded (binutils' strip)
and has its RPATH/RUNPATH rewritten in place to exactly `$ORIGIN`. The
library's copy has the build machine's paths it stores blanked (common.py),
in either layout.

Given a Mach-O library (`--library`, with `--python-home` a macOS Python),
the same command writes `Tsffi.xcframework` instead (bundle/macos.py), the
binary a Swift package's `.binaryTarget` names and Xcode embeds: a versioned
framework whose Versions/A holds the library, Versions/A/Frameworks every
other Mach-O file, Versions/A/Resources Python's files; every install name
`@rpath/...`, every Mach-O file signed ad hoc; beside it sign.sh, the app's
Run Script that re-signs it with the app's identity, and on request the
release zip and its checksum. It cannot be loaded here to check it, and
says so.

Modules: `elf` (ELF: reading, rpath rewrite, strip) and `macho` (Mach-O:
reading, install names and rpaths, via LIEF) side by side, each used by one
layout only; `codesign` (Mach-O signatures and universal files, by hand:
ad hoc signing, verifying, joining slices); `probe` (what the library
imports and answers); `write` (the command's entry, the steps both layouts
share, the Linux layout); `macos` (the macOS layout); `release` (the
release zip, the universal cffi backend); `common` (the error both raise,
and blanking the library's stored build paths, which both do).
"""

from __future__ import annotations

from .common import BundleError, blank_build_paths
from .elf import elf_dynamic, set_rpath_origin, strip_elf
from .write import MARKER, BundleInfo, MacOptions, write_bundle

__all__ = ["BundleError", "BundleInfo", "MacOptions", "write_bundle", "set_rpath_origin",
           "strip_elf",
           "elf_dynamic", "blank_build_paths", "MARKER"]
