"""Which engine this preview mirrors: one table, the revision of the engine's
sources each rule of this library follows (TURBOSPARK_FACTS.md, the table at
its top). The engine keeps moving and no version number it exposes tells its
revisions apart (FACTS section 14), so the preview says which one it mirrors:
`tsffi_build_info_json` reports this table, and docs/ENGINE.md lists every
rule with its source. The next time the engine moves, updating the preview
is this table, the texts in engine_texts.py, and their tests.
"""

from __future__ import annotations

__all__ = ["ENGINE", "ENGINE_VERSION", "REVISIONS", "revisions", "mirrored_revision"]

ENGINE = "turbospark-runtime"
# The published crate whose speculation policy (the original module) this
# library transcribes.
ENGINE_VERSION = "0.3.0"

# part -> the engine revision (commit, or the published version) its rule
# was read at. Order: the order the open meets them.
REVISIONS = (
    ("policy", "0.3.0"),          # crates/runtime/src/speculation_policy.rs (the seed)
    ("open", "0a45c54"),          # crates/ffi/src/{open,wire,abi}.rs: the 18 option keys
    ("manifest", "54bc43a"),      # crates/repack/src/manifest_peek.rs, model-io manifest types
    ("residentIndex", "08aaf13"),  # crates/model-io/src/resident_index.rs
    ("dtypeGates", "0a45c54"),    # crates/runtime/src/real_forward_layout.rs, read at the open's
    ("drafterBuild", "22f47a2"),  # mtp_state.rs, dflash_state.rs (DFlash2's build: dflash.rs 1498a210)
    ("blockers", "22f47a2"),      # families/qwen/{mtp_state,dflash_state}.rs
    ("turn", "0a45c54"),          # crates/ffi/src/generate/mod.rs
)


def revisions() -> dict[str, str]:
    """The table as build info reports it ("engineRevisions")."""
    return dict(REVISIONS)


def mirrored_revision() -> dict:
    """The engine this preview mirrors, as build info and tsffi_reconcile
    report it: the engine, its policy's version and the revision of each
    rule."""
    return {"engine": ENGINE, "engineVersion": ENGINE_VERSION, "engineRevisions": revisions()}
