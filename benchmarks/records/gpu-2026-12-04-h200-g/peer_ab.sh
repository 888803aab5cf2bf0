#!/bin/bash
# Stage 2's peer A/B for the standard profile, one transport per run (benchmarks/ab.py, as
# runbooks/scripts/gpu_stage2.sh runs it): renewable-huber 0.7.1's CuPy backend (the baseline, from
# its wheel in .whl/peer/, in its own site folder) against native_cuda (RH_CUDA_LIBRARY), penalties
# none and l1, both dtypes, cold lifecycle, nine interleaved rounds.
# Run from the repository root: OUTDIR for the records. Needs CuPy and jsonschema importable
# (the package's own directory goes in front of the caller's PYTHONPATH).
# PROFILE=large PENALTIES=none TRANSPORTS=host gives the large-profile run of this record;
# PENALTIES=l1, that of ../gpu-2026-12-04-h200-h.
OUT=${1:?usage: peer_ab.sh OUTDIR}
: "${RH_CUDA_LIBRARY:?set RH_CUDA_LIBRARY to the librh_cuda under test}"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
python3 -m pip install --quiet --no-index --no-deps --target /tmp/rh-peer-site \
  .whl/peer/renewable_huber-0.7.1-*.whl
for t in ${TRANSPORTS:-host device}; do
  python3 benchmarks/ab.py --baseline-engine peer_cupy --candidate-engine native_cuda \
    --baseline-python python3 --baseline-pythonpath /tmp/rh-peer-site \
    --profile ${PROFILE:-standard} --penalties ${PENALTIES:-none,l1} --transports $t --dtypes float32,float64 \
    --lifecycles cold --operations partial_fit --rounds 9 --no-progress --data-dir /tmp \
    --out-dir "$OUT/${PROFILE:-standard}-peer-$t" > "$OUT/ab-${PROFILE:-standard}-$t.log" 2>&1
done
