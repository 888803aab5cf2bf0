#!/usr/bin/env bash
# GPU host stage 2, performance: interleaved A/B native_cuda (candidate) vs cupy (baseline) and
# vs the peer's CuPy backend (renewable-huber 0.7.1, from .whl/peer/), penalties none and l1,
# host and device transports, then the large profile. Writes records,
# gates, plots and roofline tables (benchmarks/roofline.py) into RESULTS (default $OUT/stage2, else benchmarks/records/DATE-gpu).
# Exit 0 only when every gate passed. Expects RH_CUDA_LIBRARY (stage 1 exports it) and .whl/.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$REPO_ROOT"
RESULTS="${RESULTS:-${OUT:+$OUT/stage2}}"
RESULTS="${RESULTS:-$REPO_ROOT/benchmarks/records/$DATE-gpu}"
mkdir -p "$RESULTS"
if ! python3 -c "import jsonschema" 2>/dev/null; then
  python3 -m pip install --quiet --no-index --no-deps --target /tmp/rh-site .whl/*.whl \
    || fail "jsonschema missing: run prepare_device_wheels.sh and copy .whl/ to this host"
  export PYTHONPATH="/tmp/rh-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$REPO_ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
status=0
# The device constants of the roofline tables (a few seconds; a failure here costs the tables,
# not the gates).
step "device constants for the roofline tables"
python3 benchmarks/roofline.py --measure-device "$RESULTS/device.json" \
  || echo "roofline: device constants not measured; no roofline tables" >&2
for profile in ${PROFILES:-standard large}; do
  step "A/B native_cuda vs cupy, profile $profile"
  python3 benchmarks/ab.py --baseline-engine cupy --candidate-engine native_cuda \
    --profile "$profile" --penalties none,l1 --transports host,device \
    --dtypes "${DTYPES:-float32,float64}" --lifecycles "${LIFECYCLES:-cold}" \
    --operations partial_fit --rounds "${ROUNDS:-9}" --no-progress \
    --data-dir /tmp --out-dir "$RESULTS/$profile" || status=1
  python3 benchmarks/plot.py "$RESULTS/$profile/gate.json" --out "$RESULTS/$profile/gate.png"
  if [ -f "$RESULTS/device.json" ] && [ -f "$RESULTS/$profile/merged.json" ]; then
    python3 benchmarks/roofline.py --record "$RESULTS/$profile/merged.json" \
      --device "$RESULTS/device.json" --out "$RESULTS/$profile/roofline.md" \
      --json "$RESULTS/$profile/roofline.json" || echo "roofline: no table for $profile" >&2
  fi
  # The competitor: renewable-huber 0.7.1's CuPy backend, from its wheel in .whl/peer/, in its
  # own site folder (the runner never hands our PYTHONPATH to a peer), same data and rounds.
  if compgen -G ".whl/peer/renewable_huber-0.7.1-*.whl" > /dev/null; then
    step "A/B native_cuda vs the peer's CuPy backend (renewable-huber 0.7.1), profile $profile"
    python3 -m pip install --quiet --no-index --no-deps --target /tmp/rh-peer-site \
      .whl/peer/renewable_huber-0.7.1-*.whl
    python3 benchmarks/ab.py --baseline-engine peer_cupy --candidate-engine native_cuda \
      --baseline-python python3 --baseline-pythonpath /tmp/rh-peer-site \
      --profile "$profile" --penalties none,l1 --transports host,device \
      --dtypes "${DTYPES:-float32,float64}" --lifecycles "${LIFECYCLES:-cold}" \
      --operations partial_fit --rounds "${ROUNDS:-9}" --no-progress \
      --data-dir /tmp --out-dir "$RESULTS/$profile-peer" || status=1
  else
    echo "no .whl/peer/renewable_huber-0.7.1 wheel: the peer comparison is skipped" \
      "(prepare_device_wheels.sh downloads it)" >&2
    status=1
  fi
done
# The goals against the peer (docs/benchmarks.md, "Performance goals"): reported, not gated.
step "performance goals against the peer's CuPy backend"
goal_args=("$RESULTS")
[ -f "$RESULTS/device.json" ] && goal_args+=(--device "$RESULTS/device.json")
if python3 benchmarks/goals.py "${goal_args[@]}" --json "$RESULTS/goals.json" \
    > "$RESULTS/goals.md"; then
  cat "$RESULTS/goals.md"
else
  echo "goals: no table for these runs (the message above says why)" >&2
fi
exit "$status"
