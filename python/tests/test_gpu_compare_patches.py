"""runbooks/scripts/gpu_compare_patches.sh, run here with stand-ins for the GPU host's tools
(cmake, ctest, compute-sanitizer, nvidia-smi and python3, whose cold-stream summaries the real
interpreter makes) on PATH: the patches checked before anything is built, a copy of the checkout
per candidate with its patch applied, each tree's own libraries and package, the checks and
their verdicts, the rotating order of the cold streams and the summary against the baseline,
and the exit status of every failure. The script itself runs on a GPU host."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from tool_stand_ins import write_stand_ins

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "runbooks" / "scripts" / "gpu_compare_patches.sh"

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("patch") is None,
    reason="the script is a bash script that applies patches with patch(1)",
)

STUBS = {
    "cmake": r"""
echo "cmake $*" >> "$CALLS"
if [ "$1" = --build ]; then
  case "$2" in *"${STUB_BUILD_FAILS:-no such build}"*) echo "stand-in build error"; exit 2 ;; esac
  mkdir -p "$2/engines/cpu_c" "$2/engines/cuda"
  : > "$2/engines/cpu_c/librh_cpu.so"
  : > "$2/engines/cuda/librh_cuda.so"
fi
exit 0
""",
    "ctest": r"""
echo "ctest $* in $(pwd)" >> "$CALLS"
if [ -n "${STUB_CTEST_SKIPS:-}" ]; then
  echo "2/3 Test #2: test_cuda_numerics ...........***Skipped   0.01 sec"
fi
echo "100% tests passed, 0 tests failed out of 3"
""",
    "compute-sanitizer": r"""
echo "compute-sanitizer $* with $RH_CUDA_LIBRARY" >> "$CALLS"
case "$*" in
  *racecheck*) echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" ;;
  *) echo "========= ERROR SUMMARY: 0 errors" ;;
esac
""",
    "nvidia-smi": 'echo "Stand-in GPU, 9.0, 0.0, 1 MiB"\n',
    "python3": r"""
case "$*" in
  *"cuda_cold_streams.py --summarize"*)
    echo "summarize with $PYTHONPATH" >> "$CALLS"
    exec "$REAL_PYTHON" "$@"
    ;;
  *cuda_cold_streams.py*)
    echo "streams $2 with $RH_CUDA_LIBRARY and $PYTHONPATH" >> "$CALLS"
    echo "stream arguments $(echo "$*" | cut -d' ' -f3-)" >> "$CALLS"
    if [ -n "${STUB_STREAMS_SIGNAL:-}" ]; then
      # A host's time limit: the signal to the whole process group, this stand-in included.
      kill -s "$STUB_STREAMS_SIGNAL" 0
      sleep 30
    fi
    ms=2.0; [ "$2" = base ] || ms=1.0
    printf '{"side": "%s", "case": "wide float64 none", "ms": %s, ' "$2" "$ms"
    echo '"iters": 5, "coef0": 0.25, "state": "ab"}'
    ;;
  *"-m renewable_huber conformance"*)
    echo "conformance $* with $PYTHONPATH" >> "$CALLS"
    echo "CONFORMS: 1 passed, 0 failed, 0 skipped"
    ;;
  *"cuda_stream_timeline.py compare"*)
    echo "timeline comparison $*" >> "$CALLS"
    if [ -n "${STUB_COMPARE_FAILS:-}" ]; then echo "no timeline-*.json.gz in $3"; exit 1; fi
    for last in "$@"; do :; done
    echo "stand-in comparison of $last"
    ;;
  *cuda_stream_timeline.py*) echo "timeline $*" >> "$CALLS" ;;
  *"cluster_cholesky_phases.py stream"*)
    echo "phases $* with $RH_CUDA_LIBRARY" >> "$CALLS"
    echo "RH_CLUSTER_PHASES stand-in stamps"
    ;;
  *"cluster_cholesky_phases.py table"*) echo "phase table of $(cat "$3")" ;;
  *) echo "python3 $*" >> "$CALLS" ;;
esac
exit 0
""",
}


def readme_patch(path: Path, added: str = "A line the candidate adds.\n") -> Path:
    """A unified diff (git's a/ b/ prefixes) appending one line to the checkout's README.md."""
    before = (ROOT / "README.md").read_text().splitlines(keepends=True)
    path.write_text("".join(difflib.unified_diff(
        before, [*before, added], fromfile="a/README.md", tofile="b/README.md")))
    return path


@pytest.fixture()
def host(tmp_path):
    bin_dir = write_stand_ins(tmp_path / "bin", STUBS)
    out = tmp_path / "out"

    def run(*patches, **env):
        calls = tmp_path / "calls.txt"
        calls.write_text("")
        shutil.rmtree(out, ignore_errors=True)
        environment = {k: v for k, v in os.environ.items()
                       if not k.startswith("RH_") and k != "PYTHONPATH"}
        environment.update(
            PATH=f"{bin_dir}:{os.environ['PATH']}", CALLS=str(calls), REAL_PYTHON=sys.executable,
            OUT=str(out), COMPARE_DIR=str(tmp_path / "compare"), ROUNDS="2", JOBS="1",
        )
        environment.update(env)
        # A session of its own: a stand-in may signal its whole process group.
        done = subprocess.run(
            ["bash", str(SCRIPT), *map(str, patches)], env=environment, capture_output=True,
            text=True, timeout=120, check=False, start_new_session=True,
        )
        summary = out / "compare-summary.txt"
        return done, summary.read_text() if summary.exists() else "", calls.read_text()

    return run


def verdicts(summary: str) -> dict[tuple[str, str], str]:
    found = {}
    for line in summary.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("PASS", "FAIL"):
            assert re.search(r" \(\d+ s\)$", line), line  # every part says how long it took
            found[(fields[0], fields[1])] = fields[2]
    return found


def test_a_candidate_is_built_checked_and_timed_against_the_checkout(host, tmp_path):
    readme_before = (ROOT / "README.md").read_text()
    done, summary, calls = host(readme_patch(tmp_path / "fix-x.patch"))
    assert done.returncode == 0, done.stdout + done.stderr
    # The checkout is untouched; the candidate's copy carries the patch.
    assert (ROOT / "README.md").read_text() == readme_before
    copy = tmp_path / "compare" / "fix-x"
    assert (copy / "README.md").read_text() == readme_before + "A line the candidate adds.\n"
    assert not (copy / "build").exists() and not (copy / ".venv").exists()
    assert verdicts(summary)[("base", "build")] == "PASS"
    assert f"cmake -S {ROOT} -B {tmp_path}/compare/build-base" in calls
    assert f"cmake -S {copy} -B {tmp_path}/compare/build-fix-x" in calls
    assert verdicts(summary) == {("base", "build"): "PASS"} | {
        ("fix-x", check): "PASS"
        for check in ("build", "ctest", "conformance", "racecheck", "memcheck")}
    # The candidate's checks use its own build, library and package.
    assert f"ctest -L cuda --output-on-failure --timeout 240 in {tmp_path}/compare/build-fix-x" \
        in calls
    candidate_lib = f"{tmp_path}/compare/build-fix-x/engines/cuda/librh_cuda.so"
    assert f"--tool racecheck --error-exitcode 9 python3 {copy}/engines/cuda/tests/" \
           f"sanitizer_solve_paths.py with {candidate_lib}" in calls
    assert f"--library {candidate_lib} --capabilities conformance/capabilities/cuda.json with " \
           f"{copy}/python" in calls
    # Cold streams: base first in round 1, the candidate first in round 2, each side with its own
    # library and package; the summary pairs the rounds (2.0 ms against 1.0 ms: 2.000x).
    streams = [line for line in calls.splitlines() if line.startswith("streams ")]
    assert [line.split()[1] for line in streams] == ["base", "fix-x", "fix-x", "base"]
    base_lib = f"{tmp_path}/compare/build-base/engines/cuda/librh_cuda.so"
    assert f"streams base with {base_lib} and {ROOT}/python" in streams
    assert f"streams fix-x with {candidate_lib} and {copy}/python" in streams
    assert f"summarize with {ROOT}/python" in calls  # the harness's package, as for base
    assert ("wide float64 none: base ['2.000', '2.000'] fix-x ['1.000', '1.000']; medians "
            "2.000 -> 1.000 (2.000x), fix-x faster in 2/2 rounds; iterations, coef0 and state "
            "digest equal: True") in summary
    assert re.search(r"^cold streams: 2 rounds in \d+ s$", summary, re.MULTILINE)
    results = list((tmp_path / "out").iterdir())  # two files only: a GPU host returns few
    assert all(p.is_file() for p in results)
    assert sorted(p.name for p in results) == sorted(
        ["compare-summary.txt", next(p.name for p in results if p.name.endswith(".tar.gz"))])


def test_two_candidates_rotate_and_each_is_summarised(host, tmp_path):
    first = readme_patch(tmp_path / "one.diff")
    second = readme_patch(tmp_path / "two.patch", "Another line.\n")
    done, summary, calls = host(first, second, ROUNDS="3", CHECKS="")
    assert done.returncode == 0, done.stdout + done.stderr
    order = [line.split()[1] for line in calls.splitlines() if line.startswith("streams ")]
    assert order == ["base", "one", "two", "one", "two", "base", "two", "base", "one"]
    assert "(2.000x), one faster in 3/3 rounds" in summary
    assert "(2.000x), two faster in 3/3 rounds" in summary
    # CHECKS empty: the builds alone
    assert verdicts(summary) == {(side, "build"): "PASS" for side in ("base", "one", "two")}
    assert "compute-sanitizer" not in calls and "ctest" not in calls


def test_the_cold_streams_take_the_profile_and_settings(host, tmp_path):
    done, summary, calls = host(readme_patch(tmp_path / "c.patch"), CHECKS="", ROUNDS="1",
                                PROFILE="large", SHAPES="large-stream", PENALTIES="l1",
                                DTYPES="float32", REPETITIONS="3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "streams: shapes large-stream of the large profile, penalties l1" in summary
    arguments = [line for line in calls.splitlines() if line.startswith("stream arguments ")]
    assert arguments == ["stream arguments --profile large --repetitions 3 --penalties l1 "
                         "--dtypes float32 --shapes large-stream"] * 2
    done, _, calls = host(readme_patch(tmp_path / "c.patch"), CHECKS="", ROUNDS="1")
    assert "stream arguments --profile standard --repetitions 9 --penalties none,l1 " \
           "--dtypes float32,float64" in calls


def test_timelines_record_every_side(host, tmp_path):
    done, summary, calls = host(readme_patch(tmp_path / "c.patch"), CHECKS="",
                                TIMELINES="wide:float32:none streaming:float64:none")
    assert done.returncode == 0, done.stdout + done.stderr
    timelines = [line for line in calls.splitlines()
                 if line.startswith("timeline ") and " run " in line]
    assert len(timelines) == 2
    assert all(line.endswith("wide:float32:none streaming:float64:none") for line in timelines)
    for side in ("base", "c"):
        assert re.search(rf"^timelines of {side}: timelines-{side}.txt \(\d+ s\)$", summary,
                         re.MULTILINE)
    # The candidate's records beside the baseline's, in the summary.
    compared = [line for line in calls.splitlines() if line.startswith("timeline comparison ")]
    assert len(compared) == 1
    *_, command, base_dir, candidate_dir, label = compared[0].split()
    assert command == "compare" and label == "c"
    assert base_dir.endswith("/timelines-base") and candidate_dir.endswith("/timelines-c")
    assert "timelines, base against c (us; ratio = base / c):\nstand-in comparison of c\n" \
        in summary


def test_a_failed_timeline_comparison_is_named_and_judges_nothing(host, tmp_path):
    done, summary, _ = host(readme_patch(tmp_path / "c.patch"), CHECKS="",
                            TIMELINES="wide:float32:none", STUB_COMPARE_FAILS="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no comparison of the timelines of base and c\n" in summary


def test_phases_come_from_a_diagnostic_build_of_every_tree(host, tmp_path):
    done, summary, calls = host(readme_patch(tmp_path / "c.patch"), CHECKS="",
                                PHASES="wide:float32:none")
    assert done.returncode == 0, done.stdout + done.stderr
    copy = tmp_path / "compare" / "c"
    for side, tree in (("base", ROOT), ("c", copy)):
        build = f"{tmp_path}/compare/build-{side}-phases"
        assert (f"cmake -S {tree} -B {build} -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON "
                "-DRH_BUILD_TESTS=OFF -DRH_CUDA_CLUSTER_PHASES=ON") in calls
        # The tree's own phase script, on the diagnostic library, one stream of the case.
        assert (f"phases {tree}/benchmarks/micro/cluster_cholesky_phases.py stream wide float32 "
                f"none with {build}/engines/cuda/librh_cuda.so") in calls
        assert re.search(rf"phases of {side} \(wide:float32:none\): phases-{side}.txt \(\d+ s\)",
                         summary)
    with tarfile.open(next((tmp_path / "out").glob("*.tar.gz"))) as packed:
        table = next(m for m in packed.getmembers() if m.name.endswith("phases-c.txt"))
        text = packed.extractfile(table).read().decode()
    assert text == "phase table of RH_CLUSTER_PHASES stand-in stamps\n"


def test_a_skipped_cuda_test_fails_the_check(host, tmp_path):
    done, summary, _ = host(readme_patch(tmp_path / "c.patch"), STUB_CTEST_SKIPS="1")
    assert done.returncode == 1
    assert verdicts(summary)[("c", "ctest")] == "FAIL"
    assert "CUDA tests skipped: 1" in summary
    assert verdicts(summary)[("c", "conformance")] == "PASS"


def test_a_failed_build_stops_before_checks_and_streams(host, tmp_path):
    done, summary, calls = host(readme_patch(tmp_path / "c.patch"), STUB_BUILD_FAILS="build-c")
    assert done.returncode == 3
    assert verdicts(summary) == {("base", "build"): "PASS", ("c", "build"): "FAIL"}
    assert "exit 3" in summary
    assert "ctest" not in calls and "streams " not in calls


# With SIGINT at its default in the script (conftest.interruptible): a runner that ignores it
# would pass that on, and the script could not trap it.
@pytest.mark.usefixtures("interruptible")
@pytest.mark.parametrize("signal_name", ["TERM", "INT"])
def test_a_stopped_run_packs_what_it_gathered(host, tmp_path, signal_name):
    done, summary, calls = host(readme_patch(tmp_path / "c.patch"), CHECKS="ctest",
                                PHASES="wide:float32:none", STUB_STREAMS_SIGNAL=signal_name)
    assert done.returncode == 4, done.stdout + done.stderr
    # The checks before the cut keep their verdicts; the part cut is named; nothing later ran.
    assert verdicts(summary) == {("base", "build"): "PASS", ("c", "build"): "PASS",
                                 ("c", "ctest"): "PASS"}
    assert re.search(rf"^stopped by SIG{signal_name} after \d+ s, during: cold streams, round 1 "
                     r"of 2; nothing after it ran$", summary, re.MULTILINE)
    assert "exit 4" in summary
    assert len([line for line in calls.splitlines() if line.startswith("streams ")]) == 1
    # The phase tables come before the streams, so a cut run keeps them.
    assert re.search(r"^phases of c \(wide:float32:none\): phases-c.txt", summary, re.MULTILINE)
    assert "cold streams: " not in summary
    results = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(results) == 2 and "compare-summary.txt" in results
    with tarfile.open(next((tmp_path / "out").glob("*.tar.gz"))) as packed:
        assert any(m.name.endswith("ctest-c.log") for m in packed.getmembers())


@pytest.mark.parametrize(
    ("arguments", "env", "message"),
    [
        ([], {}, "no patch given"),
        (["missing.patch"], {}, "no patch file missing.patch"),
        (["bad.patch"], {}, "bad.patch does not apply to this checkout"),
        (["base.patch"], {}, "'base' names the checkout itself"),
        (["dup/x.patch", "x.patch"], {}, "two patches are named x"),
        (["x.patch"], {"CHECKS": "ctest lint"}, "unknown check 'lint'"),
        (["x.patch"], {"ROUNDS": "0"}, "ROUNDS must be a positive whole number"),
        (["x.patch"], {"PROFILE": "huge"}, "PROFILE must be standard or large, got 'huge'"),
        (["x.patch"], {"OUT": ""}, "OUT must name the folder"),
        (["x.patch"], {"PHASES": "wide:float16:none"}, "PHASES must be one case"),
    ],
)
def test_usage_errors_are_refused_before_anything_is_built(host, tmp_path, monkeypatch,
                                                           arguments, env, message):
    monkeypatch.chdir(tmp_path)
    readme_patch(tmp_path / "x.patch")
    readme_patch(tmp_path / "base.patch")
    (tmp_path / "dup").mkdir()
    readme_patch(tmp_path / "dup" / "x.patch")
    (tmp_path / "bad.patch").write_text(
        "--- a/README.md\n+++ b/README.md\n@@ -1,1 +1,1 @@\n-no such line\n+nor this one\n")
    done, _, calls = host(*arguments, **env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert "cmake" not in calls
