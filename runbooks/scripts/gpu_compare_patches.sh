#!/usr/bin/env bash
# A change to the engines judged on a GPU host in one command, before it is committed: the
# checkout is the baseline, and each PATCH (a unified diff against the checkout, `git diff`
# output) makes one candidate, a copy of the checkout with the patch applied. Every tree is
# built by its own build_engines.sh (engines and C tests, CUDA on). Each candidate then takes
# the checks an engine change needs: the CUDA ctests (a CUDA test that skips fails the
# check), the conformance kit on its librh_cuda, and compute-sanitizer racecheck and memcheck on
# one update per linear-solve path (engines/cuda/tests/sanitizer_solve_paths.py). With
# TIMELINES, each tree then records the CUDA activity of those cases
# (benchmarks/micro/cuda_stream_timeline.py): kernel times, which decide a kernel change better
# than cold-stream wall times on a shared host; the summary sets each candidate's kernels beside
# the baseline's, case by case (its `compare`).
# With PHASES, each tree is also built with its cluster Cholesky's phase stamps
# (-DRH_CUDA_CLUSTER_PHASES=ON, a diagnostic build) and one stream of that case is tabulated
# phase by phase (benchmarks/micro/cluster_cholesky_phases.py, each tree's own copy). Cold
# native_cuda streams (benchmarks/micro/cuda_cold_streams.py) run last, round by round, the
# baseline and the candidates in a rotating order, and are summarised per candidate against the
# baseline: the medians, the rounds won, and whether iterations, first coefficient and state
# digest agree (a change meant to keep the arithmetic must give the same bits).
#
#   OUT=DIR bash runbooks/scripts/gpu_compare_patches.sh PATCH [PATCH...]
#
# Settings (environment): SHAPES (shapes of PROFILE, comma-separated; default all), PROFILE
# (the cold streams' benchmark profile: standard, the default, or large), PENALTIES
# (none,l1), DTYPES (float32,float64), ROUNDS (4), REPETITIONS (9 streams a round and side),
# CHECKS (default "ctest conformance racecheck memcheck"; empty for none), TIMELINES (cases
# SHAPE:DTYPE:PENALTY, space-separated; default none), PHASES (one such case of a shape the
# cluster kernel solves, e.g. wide:float32:none; default none), COMPARE_DIR (the trees and
# every build, default /tmp/rh-compare), JOBS (build jobs, default nproc).
# A candidate is named after its patch file (`fix-x.patch` -> fix-x); the baseline is `base`.
# Everything is gathered in COMPARE_DIR/compare-DATE-HOST/ (summary.txt first) and lands in $OUT
# as two files: that folder packed into one tarball, and its summary. Timings are reported, never
# judged. A run stopped by SIGTERM, SIGINT or SIGHUP (a host's time limit: run the script under
# `timeout` with a margin for the packing) still packs what it gathered, and its summary names
# the part that was cut. Exit status: 0 every candidate built and passed its checks, 1 a check
# failed, 2 a usage error (no patch, a patch that does not apply, two patches of one name), 3 a
# build failed, 4 stopped by a signal before the end.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
usage() {
  echo "usage: OUT=DIR bash runbooks/scripts/gpu_compare_patches.sh PATCH [PATCH...]" >&2
  echo "gpu_compare_patches.sh: $*" >&2
  exit 2
}
[ -n "${OUT:-}" ] || usage "OUT must name the folder for the results"
[ $# -gt 0 ] || usage "no patch given: each PATCH is a unified diff against this checkout"
SHAPES="${SHAPES:-}"
PROFILE="${PROFILE:-standard}"
PENALTIES="${PENALTIES:-none,l1}"
DTYPES="${DTYPES:-float32,float64}"
ROUNDS="${ROUNDS:-4}"
REPETITIONS="${REPETITIONS:-9}"
CHECKS="${CHECKS-ctest conformance racecheck memcheck}"
TIMELINES="${TIMELINES:-}"
PHASES="${PHASES:-}"
COMPARE_DIR="${COMPARE_DIR:-/tmp/rh-compare}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 4)}"
for check in $CHECKS; do
  case "$check" in
    ctest | conformance | racecheck | memcheck) ;;
    *) usage "unknown check '$check' in CHECKS (ctest conformance racecheck memcheck)" ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || usage "ROUNDS must be a positive whole number, got '$ROUNDS'"
case "$PROFILE" in
  standard | large) ;;
  *) usage "PROFILE must be standard or large, got '$PROFILE'" ;;
esac
[[ "$REPETITIONS" =~ ^[1-9][0-9]*$ ]] ||
  usage "REPETITIONS must be a positive whole number, got '$REPETITIONS'"
[[ -z "$PHASES" || "$PHASES" =~ ^[a-z-]+:float(32|64):(none|l1)$ ]] ||
  usage "PHASES must be one case SHAPE:DTYPE:PENALTY (e.g. wide:float32:none), got '$PHASES'"

# Every patch is read and tried against the checkout before anything is built.
labels=()
patches=()
for patch_file in "$@"; do
  [ -f "$patch_file" ] || usage "no patch file $patch_file"
  label="$(basename "$patch_file")"
  label="${label%.patch}"
  label="${label%.diff}"
  [[ "$label" =~ ^[A-Za-z0-9._-]+$ ]] ||
    usage "patch file name $patch_file: a candidate's name takes letters, digits, '.', '_', '-'"
  [ "$label" != base ] || usage "patch file $patch_file: 'base' names the checkout itself"
  for seen in "${labels[@]}"; do
    [ "$seen" != "$label" ] || usage "two patches are named $label: rename one"
  done
  patch -p1 --dry-run --silent -d "$REPO_ROOT" <"$patch_file" >/dev/null 2>&1 ||
    usage "$patch_file does not apply to this checkout (patch -p1 --dry-run)"
  labels+=("$label")
  patches+=("$(cd "$(dirname "$patch_file")" && pwd)/$(basename "$patch_file")")
done

RESULTS="$COMPARE_DIR/compare-$DATE-$HOST_TAG"
rm -rf "$RESULTS"
mkdir -p "$RESULTS" "$OUT"
SUMMARY="$RESULTS/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
note "checkout: $REPO_ROOT ($(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo no git))"
note "gpu: $(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
note "candidates: ${labels[*]} (patches: $*)"
note "streams: shapes ${SHAPES:-all} of the $PROFILE profile, penalties $PENALTIES, dtypes $DTYPES, rounds $ROUNDS, streams a round and side $REPETITIONS"

# The trees: the checkout, and per candidate a copy of it (without builds, virtual environments,
# git data and records) with its patch applied.
declare -A tree
tree[base]="$REPO_ROOT"
for i in "${!labels[@]}"; do
  label="${labels[$i]}"
  dir="$COMPARE_DIR/$label"
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -C "$REPO_ROOT" --exclude=./build --exclude=./.venv --exclude=./.git --exclude=./.whl \
    --exclude=./dist --exclude=./benchmarks/records -cf - . | tar -C "$dir" -xf -
  patch -p1 --silent -d "$dir" <"${patches[$i]}" >"$RESULTS/patch-$label.log" 2>&1 ||
    usage "${patches[$i]} did not apply to the copy in $dir (see patch-$label.log)"
  tree[$label]="$dir"
done

declare -A cuda_lib cpu_lib build_dir
status=0
# Each part's wall time goes into the summary, so that a run can be planned within a host's
# time limit.
part="the start"
begin() {  # the part's name, as step prints it
  step "$@"
  part="$*"
  part_start=$SECONDS
}
took() { echo "($((SECONDS - part_start)) s)"; }
verdict() {  # label check PASS|FAIL detail
  note "$(printf '%-28s %-12s %-4s %s %s' "$1" "$2" "$3" "$4" "$(took)")"
  [ "$3" = PASS ] || status=1
}
finish() {  # the results folder packed into $OUT, its summary beside the tarball
  trap - TERM INT HUP  # packed once, whatever comes now
  note ""
  note "gpu_compare_patches.sh exit $status (0 all checks passed, 1 a check failed, 3 a build" \
    "failed, 4 stopped by a signal)"
  tar -C "$COMPARE_DIR" -czf "$OUT/$(basename "$RESULTS").tar.gz" "$(basename "$RESULTS")"
  cp "$SUMMARY" "$OUT/compare-summary.txt"
  exit "$status"
}
# A signal ends the run with what it has. Bash runs the handler once the command in the
# foreground returns; `timeout` signals that command's whole process group, so it returns at once.
stopped() {  # the signal's name
  note ""
  note "stopped by SIG$1 after $SECONDS s, during: $part; nothing after it ran"
  status=4
  finish
}
trap 'stopped TERM' TERM
trap 'stopped INT' INT
trap 'stopped HUP' HUP
built=1
for label in base "${labels[@]}"; do
  build="$COMPARE_DIR/build-$label"
  build_dir[$label]="$build"
  begin "build $label -> $build"
  # The tree's own build_engines.sh (its build settings), which prints the libraries' exports.
  if exports="$(BUILD_DIR="$build" JOBS="$JOBS" \
      bash "${tree[$label]}/runbooks/scripts/build_engines.sh" ON 2>"$RESULTS/build-$label.log")"
  then
    cuda_lib[$label]="$(sed -n 's/^export RH_CUDA_LIBRARY=//p' <<<"$exports")"
    cpu_lib[$label]="$(sed -n 's/^export RH_CPU_LIBRARY=//p' <<<"$exports")"
  fi
  if [ -n "${cuda_lib[$label]:-}" ]; then
    verdict "$label" build PASS "$build"
  else
    verdict "$label" build FAIL "see build-$label.log"
    tail -20 "$RESULTS/build-$label.log" >&2
    built=0
  fi
done
if [ "$built" -eq 0 ]; then
  status=3
  finish
fi

# Runs a command with the environment of one tree: its libraries and its Python package.
with_tree() {  # label command...
  local label=$1
  shift
  env RH_CUDA_LIBRARY="${cuda_lib[$label]}" RH_CPU_LIBRARY="${cpu_lib[$label]}" \
    PYTHONPATH="${tree[$label]}/python${PYTHONPATH:+:$PYTHONPATH}" "$@"
}

for label in "${labels[@]}"; do
  build="${build_dir[$label]}"
  for check in $CHECKS; do
    log="$RESULTS/$check-$label.log"
    begin "$check: $label"
    case "$check" in
      ctest)
        rc=0
        (cd "$build" && ctest -L cuda --output-on-failure --timeout 240) >"$log" 2>&1 || rc=$?
        line="$(grep -E 'tests passed|tests failed' "$log" | tail -1 || true)"
        skipped="$(grep -c 'Skipped' "$log" || true)"
        if [ "$rc" -eq 0 ] && [ "$skipped" -eq 0 ]; then
          verdict "$label" ctest PASS "$line"
        else
          verdict "$label" ctest FAIL "rc $rc: ${line:-no result} (CUDA tests skipped: $skipped)"
        fi
        ;;
      conformance)
        rc=0
        (cd "${tree[$label]}" && with_tree "$label" python3 -m renewable_huber conformance \
          --library "${cuda_lib[$label]}" --capabilities conformance/capabilities/cuda.json) \
          >"$log" 2>&1 || rc=$?
        line="$(grep -E 'CONFORMS|DOES NOT CONFORM' "$log" | tail -1 || true)"
        if [ "$rc" -eq 0 ] && [[ "$line" == CONFORMS* ]]; then
          verdict "$label" conformance PASS "$line"
        else
          verdict "$label" conformance FAIL "rc $rc: ${line:-no verdict printed}"
        fi
        ;;
      racecheck | memcheck)
        rc=0
        with_tree "$label" timeout 600 compute-sanitizer --tool "$check" --error-exitcode 9 \
          python3 "${tree[$label]}/engines/cuda/tests/sanitizer_solve_paths.py" >"$log" 2>&1 ||
          rc=$?
        line="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 || true)"
        if [ "$rc" -eq 0 ] && [ -n "$line" ]; then
          verdict "$label" "$check" PASS "$line"
        else
          verdict "$label" "$check" FAIL "rc $rc: ${line:-no summary printed}"
        fi
        ;;
    esac
  done
done

# The timelines and phase tables (short, and decided by the kernels, not the host's drift) come
# before the cold streams, so a run cut short by a time limit keeps them.
sides=(base "${labels[@]}")
if [ -n "$TIMELINES" ]; then
  for label in "${sides[@]}"; do
    begin "timelines: $label"
    # shellcheck disable=SC2086 # TIMELINES is a list of cases
    if with_tree "$label" python3 "$REPO_ROOT/benchmarks/micro/cuda_stream_timeline.py" run \
      "$RESULTS/timelines-$label" $TIMELINES >"$RESULTS/timelines-$label.txt" 2>&1; then
      note "timelines of $label: timelines-$label.txt $(took)"
    else
      note "timelines of $label failed (see timelines-$label.txt) $(took)"
    fi
  done
  for label in "${labels[@]}"; do
    note ""
    note "timelines, base against $label (us; ratio = base / $label):"
    with_tree base python3 "$REPO_ROOT/benchmarks/micro/cuda_stream_timeline.py" compare \
      "$RESULTS/timelines-base" "$RESULTS/timelines-$label" "$label" | tee -a "$SUMMARY" ||
      note "no comparison of the timelines of base and $label"
  done
fi

if [ -n "$PHASES" ]; then
  for label in "${sides[@]}"; do
    begin "cluster Cholesky phases: $label"
    build="${build_dir[$label]}-phases"
    log="$RESULTS/phases-$label.log"
    phases_tool="${tree[$label]}/benchmarks/micro/cluster_cholesky_phases.py"
    library=""
    if cmake -S "${tree[$label]}" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON \
        -DRH_BUILD_TESTS=OFF -DRH_CUDA_CLUSTER_PHASES=ON >"$log" 2>&1 &&
      cmake --build "$build" -j "$JOBS" --target rh_cuda >>"$log" 2>&1; then
      library="$(find "$build" -name librh_cuda.so -print -quit)"
    fi
    if [ -n "$library" ] &&
      with_tree "$label" env RH_CUDA_LIBRARY="$library" python3 "$phases_tool" stream \
        ${PHASES//:/ } >"$RESULTS/phases-$label.stamps" 2>>"$log" &&
      python3 "$phases_tool" table "$RESULTS/phases-$label.stamps" \
        >"$RESULTS/phases-$label.txt" 2>>"$log"; then
      note "phases of $label ($PHASES): phases-$label.txt $(took)"
    else
      note "phases of $label failed (see phases-$label.log) $(took)"
      status=1
    fi
  done
fi

# Cold streams, round by round; round k starts at side k - 1 of (base, candidates...), so each
# side runs first in some rounds and the drift of the host lands on all of them.
streams="$RESULTS/streams.jsonl"
: >"$streams"
stream_args=(--profile "$PROFILE" --repetitions "$REPETITIONS" --penalties "$PENALTIES"
  --dtypes "$DTYPES")
[ -z "$SHAPES" ] || stream_args+=(--shapes "$SHAPES")
streams_start=$SECONDS
for ((round = 0; round < ROUNDS; round++)); do
  begin "cold streams, round $((round + 1)) of $ROUNDS"
  for ((k = 0; k < ${#sides[@]}; k++)); do
    label="${sides[$(((round + k) % ${#sides[@]}))]}"
    if ! with_tree "$label" python3 "$REPO_ROOT/benchmarks/micro/cuda_cold_streams.py" "$label" \
        "${stream_args[@]}" >>"$streams" 2>>"$RESULTS/streams.log"; then
      note "cold streams of $label failed in round $((round + 1)) (see streams.log)"
      status=1
    fi
  done
done
note ""
note "cold streams: $ROUNDS rounds in $((SECONDS - streams_start)) s"
for label in "${labels[@]}"; do
  note ""
  note "cold streams, base against $label (ms per stream; ratio = base / $label):"
  with_tree base python3 "$REPO_ROOT/benchmarks/micro/cuda_cold_streams.py" --summarize \
    "$streams" --baseline base --candidate "$label" | tee -a "$SUMMARY" || status=1
done

finish
