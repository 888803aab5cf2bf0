#!/usr/bin/env bash
# CPU host performance stage: native_cpu vs the NumPy reference vs the peer, one interleaved
# sweep, then the two gates and the plots, all dated under benchmarks/records/.
# Usage: cpu_benchmarks.sh PEER_PYTHON [profile=standard]
# Environment: THREADS (n_jobs of both native engines, default 1: see cpu-host.md), SAMPLES (9),
# LIFECYCLES (cold), OPERATIONS (partial_fit). Exit 0 only when both gates pass.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PEER_PYTHON="${1:?usage: cpu_benchmarks.sh PEER_PYTHON [profile]}"
PROFILE="${2:-standard}"
RECORDS="$REPO_ROOT/benchmarks/records"
STEM="$RECORDS/$DATE-cpu-$PROFILE-threads${THREADS:-1}"
cd "$REPO_ROOT"
step "sweep $PROFILE: numpy, native_cpu, peer_native_cpu -> $STEM.json"
python3 benchmarks/sweep.py --profile "$PROFILE" --engines numpy,native_cpu,peer_native_cpu \
  --peer-python "$PEER_PYTHON" --threads "${THREADS:-1}" --samples "${SAMPLES:-9}" \
  --lifecycles "${LIFECYCLES:-cold}" --operations "${OPERATIONS:-partial_fit}" \
  --out "$STEM.json"
python3 benchmarks/validate.py "$STEM.json"
status=0
for competitor in numpy peer_native_cpu; do
  step "gate native_cpu vs $competitor"
  python3 benchmarks/gate.py "$STEM.json" --baseline "$competitor" --candidate native_cpu \
    --out "$STEM-gate-native_cpu-vs-$competitor.json" || status=1
  python3 benchmarks/plot.py "$STEM-gate-native_cpu-vs-$competitor.json" \
    --out "$STEM-gate-native_cpu-vs-$competitor.png"
done
python3 benchmarks/plot.py "$STEM.json" --reference native_cpu --out "$STEM.png"
exit "$status"
