#!/bin/bash
# X'u in the fused row pass at every width: ../ab_and_timelines.sh with this change's cases.
# Run from the repository root: OUTDIR for the logs; OLD_SRC a copy of the parent commit's
# engines/ directory (the "old" side).
TIMELINE_CASES="reference:float64:none reference:float32:none reference:float64:l1 streaming:float64:none" \
TIMELINE_LINES="^## |busy|row_gram|gemv|splitK|dot_kernel" NUMERICS_LINES="FAIL|^PASS|CHECK failed" \
ROUNDS=6 COLD_SHAPES=reference,streaming,wide \
  exec "$(dirname "$0")/../ab_and_timelines.sh" "$@"
