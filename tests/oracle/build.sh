#!/bin/sh
# Builds the two serde oracles for tests/data/typed_json_oracle.jsonl, offline,
# from Debian's packaged crate sources (apt-get install -y
# librust-serde-json-dev librust-serde-derive-dev):
#   OUT/debian   serde_json 1.0.87 + serde_derive 1.0.152 as Debian ships them
#   OUT/v151     the same sources with serde-1.0.151.patch applied: the places
#                where serde_json 1.0.151 / serde 1.0.229 (the engine's pins)
#                behave differently (floats written as zmij writes them,
#                `e+16` for ryu's `e16`; `null` and floats in invalid-type
#                messages; \u escapes judged after four bytes; a `.` after a
#                long integer; container defaults for a positional struct)
# Usage: tests/oracle/build.sh [OUT]   (default /tmp/typed-json-oracle)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-/tmp/typed-json-oracle}
REG=/usr/share/cargo/registry
for crate in serde_json-1.0.87 serde_derive-1.0.152 serde-1.0.152; do
    [ -d "$REG/$crate" ] || { echo "missing $REG/$crate: apt-get install -y librust-serde-json-dev librust-serde-derive-dev" >&2; exit 2; }
done
mkdir -p "$OUT"
for variant in debian v151; do
    work="$OUT/build-$variant"
    rm -rf "$work"
    mkdir -p "$work"
    cp -r "$HERE/Cargo.toml" "$HERE/src" "$HERE/.cargo" "$work/"
    if [ "$variant" = v151 ]; then
        mkdir -p "$work/crates"
        cp -r "$REG/serde_json-1.0.87" "$REG/serde_derive-1.0.152" "$work/crates/"
        patch -s -p0 -d "$work/crates" < "$HERE/serde-1.0.151.patch"
        cat >> "$work/Cargo.toml" <<'PATCH'

[patch.crates-io]
serde_json = { path = "crates/serde_json-1.0.87" }
serde_derive = { path = "crates/serde_derive-1.0.152" }
PATCH
    fi
    (cd "$work" && CARGO_TARGET_DIR="$work/target" timeout 600 cargo build -q --release)
    cp "$work/target/release/typed-json-oracle" "$OUT/$variant"
done
echo "$OUT/debian $OUT/v151"
