#!/usr/bin/env bash
# Build the C library if needed, point SwiftPM at it the way a host does
# (pkg-config, from the project's own config command), and run `swift test`.
#
#   swift/run-tests.sh [swift test arguments...]
#
# Environment: SWIFT (default: `swift` on PATH), PYTHON (default: the first
# python3 on PATH). Works from a fresh clone. Exits non-zero, saying why, when
# swift is missing: a green run always means the Swift tests ran.
set -euo pipefail

SWIFT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SWIFT_DIR/.." && pwd)"
PYTHON="${PYTHON:-python3}"
SWIFT="${SWIFT:-swift}"

fail() { echo "swift/run-tests.sh: FAIL: $*" >&2; exit 1; }

if ! command -v "$SWIFT" >/dev/null 2>&1; then
    fail "'$SWIFT' not found on PATH ($PATH). The Swift tests need Swift 6 (swift build/test with" \
         "XCTest and Swift Testing); put its bin directory on PATH (e.g. /opt/swift/usr/bin) or set" \
         "SWIFT=/path/to/swift. Not skipping."
fi
command -v "$PYTHON" >/dev/null 2>&1 || fail "'$PYTHON' not found on PATH; it builds the library and writes the test installs"

# The library's file name from the package itself (one spelling per platform,
# in turbospark_ffi/native.py).
LIB="$ROOT/turbospark_ffi/$(cd "$ROOT" && "$PYTHON" -I -c \
    'import sys; sys.path.insert(0, "."); from turbospark_ffi.native import library_name; print(library_name())')" \
    || fail "cannot read the library's file name from turbospark_ffi/native.py"
HEADER_COPY="$ROOT/turbospark_ffi/include/$(cd "$ROOT" && "$PYTHON" -I -c 'import sys; sys.path.insert(0, "."); from turbospark_ffi.native import HEADER_NAME; print(HEADER_NAME)')"

# 1. The library (and the header copy beside it), built in place when missing
#    or older than its sources -- the same rule as tests/conftest.py.
needs_build=0
if [ ! -f "$LIB" ] || [ ! -f "$HEADER_COPY" ]; then
    needs_build=1
else
    # The inputs as ffi_build.py lists them (one list for every staleness check).
    inputs=$(cd "$ROOT" && "$PYTHON" ffi_build.py --inputs) || fail "ffi_build.py --inputs failed"
    while IFS= read -r src; do
        if [ "$src" -nt "$LIB" ]; then needs_build=1; fi
    done <<< "$inputs"
fi
if [ "$needs_build" = 1 ]; then
    echo "swift/run-tests.sh: building the library: (cd $ROOT && $PYTHON ffi_build.py)"
    (cd "$ROOT" && "$PYTHON" ffi_build.py) || fail "building libtsffi failed"
fi

# 2. The pkg-config file, from the config command (paths into this tree).
PC_DIR="$SWIFT_DIR/.build-pc"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
(cd "$ROOT" && "$PYTHON" -m turbospark_ffi config --pkg-config-dir "$PC_DIR" >/dev/null) \
    || fail "python3 -m turbospark_ffi config --pkg-config-dir $PC_DIR failed"
LIBDIR="$(cd "$ROOT" && "$PYTHON" -m turbospark_ffi config --libdir)"
export PKG_CONFIG_PATH="$PC_DIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if command -v pkg-config >/dev/null 2>&1; then
    pkg-config --exists tsffi || fail "pkg-config cannot read $PC_DIR/tsffi.pc"
    echo "swift/run-tests.sh: pkg-config tsffi: $(pkg-config --cflags --libs tsffi)"
fi

# 3. The shared ABI case table (tests/abi_cases.py) as JSON, which the Swift
#    tests read for the seed's texts and the cases, rather than a copy of
#    their own. Written fresh on every run: the table never goes stale.
CASES_JSON="$SWIFT_DIR/.build-cases/abi_cases.json"
(cd "$ROOT" && "$PYTHON" tests/abi_cases.py "$CASES_JSON") \
    || fail "python3 tests/abi_cases.py $CASES_JSON failed"
export TURBOSPARK_ABI_CASES="$CASES_JSON"

# 4. swift test. SwiftPM takes -I/-L/-l from the .pc but drops its
#    -Wl,-rpath ("prohibited flag"), so the rpath is given here instead; the
#    test binary then finds the library without LD_LIBRARY_PATH.
export TURBOSPARK_ROOT="$ROOT"
# A model store of the run's own (the library resolves aliases through
# $TURBOSPARK_HOME), emptied first: the alias tests write into it, and never
# into the store of whoever runs them.
export TURBOSPARK_HOME="$SWIFT_DIR/.build-store"
rm -rf "$TURBOSPARK_HOME"
mkdir -p "$TURBOSPARK_HOME"
cd "$SWIFT_DIR"
"$SWIFT" --version 2>&1 | head -n 1
exec "$SWIFT" test -Xlinker -rpath -Xlinker "$LIBDIR" "$@"
