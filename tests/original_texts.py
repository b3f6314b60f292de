"""The original module's messages, transcribed once from its Rust string literals (a
trailing `\\` continues the literal and drops the next line's leading
whitespace). Copied, not imported from the package, so a test fails when the
package's text drifts from the original module's."""

DFLASH_NOTE = (
    "this install carries a DFlash2 drafter, which auto leaves OFF: measured "
    "0.90x throughput on prose against 1.33-1.47x on code and math, and "
    "+17.4% J/token, so it is opt-in. Select the dflash drafter to use it "
    "(--speculative-drafter dflash, or speculativeDrafter \"dflash\" on the "
    "C ABI)"
)
SAMPLED_REASON = (
    "sampled speculation cannot be served by the block drafter: DFlash2's "
    "selection is a greedy structured search, not a distribution, so exact "
    "rejection sampling has no q(x) to ratio against; use the mtp drafter or "
    "temperature 0"
)
REFUSAL_PREFIX = "--speculative was asked for but cannot be served: "
