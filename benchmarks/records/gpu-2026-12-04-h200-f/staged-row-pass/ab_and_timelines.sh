#!/bin/bash
# Tiles of the fused row pass staged through shared memory (staged-row-pass.patch applied to
# the tree): ../ab_and_timelines.sh with this change's cases.
# Run from the repository root: OUTDIR for the logs; OLD_SRC a copy of the parent commit's
# engines/ directory (the "old" side).
TIMELINE_CASES="streaming:float64:none reference:float64:none streaming:float32:none latency:float64:none" \
TIMELINE_LINES="^## |busy|row_gram" NUMERICS_LINES="FAIL|^PASS|CHECK failed|DIFFERENT|fused row pass" \
ROUNDS=4 COLD_SHAPES=reference,streaming,latency,wide \
  exec "$(dirname "$0")/../ab_and_timelines.sh" "$@"
