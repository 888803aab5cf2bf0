"""The interleaved runner, sweep and A/B command lines, end to end against a stand-in
renewable_huber package written per test (the real engines are not needed to test the tools)."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import ab, record, sweep, validate  # noqa: E402
from benchmarks.engines import Engine  # noqa: E402
from benchmarks.runner import Side, _side_order  # noqa: E402

pytest.importorskip("jsonschema")

# numpy "costs" 10 ms per batch, native_cpu 30 ms: a measurably slower candidate even when a
# loaded machine oversleeps by several milliseconds.
STAND_IN = textwrap.dedent('''
    import time, types
    __version__ = "stand-in"
    COST = {"numpy": 0.010, "native_cpu": 0.030}

    class RenewableHuberRegressor:
        def __init__(self, *, backend, dtype, penalty, n_jobs=None, device="auto"):
            if backend == "native_cpu" and n_jobs is None:
                raise ValueError("the runner must pass n_jobs to native_cpu")
            self.backend = backend
            self.penalty = penalty

        def reset(self):
            self.diagnostics_ = None

        def partial_fit(self, X, y):
            if self.penalty == "l1" and self.backend == "native_cpu":
                raise RuntimeError("engine refused l1")
            time.sleep(COST[self.backend])
            self.diagnostics_ = types.SimpleNamespace(iterations=3, converged=True)
            return self

        def fit(self, X, y):
            return self.partial_fit(X, y)
''')
STAND_IN_BACKENDS = textwrap.dedent('''
    def unavailable_reason(name):
        return None if name in ("numpy", "native_cpu") else f"{name}: no GPU in this stand-in"
''')


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    package = tmp_path / "pkg" / "renewable_huber"
    (package / "backends").mkdir(parents=True)
    (package / "__init__.py").write_text(STAND_IN)
    (package / "backends" / "__init__.py").write_text(STAND_IN_BACKENDS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pkg"))
    return tmp_path


def test_order_rotates_every_round():
    sides = [Side(label=n, engine=Engine(n)) for n in ("numpy", "native_cpu", "cupy")]
    orders = [[s.label for s in _side_order(sides, r)] for r in range(4)]
    assert orders == [["numpy", "native_cpu", "cupy"], ["native_cpu", "cupy", "numpy"],
                      ["cupy", "numpy", "native_cpu"], ["numpy", "native_cpu", "cupy"]]
    assert [[s.label for s in _side_order(sides[:2], r)] for r in range(2)] == [
        ["numpy", "native_cpu"], ["native_cpu", "numpy"]]


def test_sweep_records_cases_skips_and_unavailable_engines(stand_in):
    out = stand_in / "sweep.json"
    code = sweep.main(["--profile", "smoke", "--shapes", "latency-smoke", "--dtypes", "float64",
                       "--penalties", "none,l1", "--lifecycles", "cold,steady",
                       "--operations", "fit,partial_fit", "--transports", "host,device",
                       "--engines", "numpy,native_cpu,cupy", "--samples", "2", "--threads",
                       "2", "--warmups", "0", "--min-sample-seconds", "0.005",
                       "--no-progress", "--out", str(out)])
    data = record.load(out)
    assert code == 0 and validate.problems(data) == []
    assert data["unavailable"] == [{"engine": "cupy", "label": "cupy",
                                    "reason": "cupy: no GPU in this stand-in"}]
    reasons = [s["reason"] for s in data["skipped"]]
    assert any("steady lifecycle measures partial_fit only" in r for r in reasons)
    assert any("no device transport" in r for r in reasons)
    assert any("prepare failed: RuntimeError: engine refused l1" in r for r in reasons)
    measured = {(c["engine"], c["penalty"], c["lifecycle"], c["operation"]) for c in data["cases"]}
    assert measured == {("numpy", p, lc, op) for p in ("none", "l1")
                        for lc, op in (("cold", "fit"), ("cold", "partial_fit"),
                                       ("steady", "partial_fit"))} | {
        ("native_cpu", "none", lc, op) for lc, op in (("cold", "fit"), ("cold", "partial_fit"),
                                                      ("steady", "partial_fit"))}
    stream = next(c for c in data["cases"] if c["operation"] == "partial_fit")
    assert stream["iterations"] == [3, 3] and stream["converged"] is True
    assert stream["rounds"] == [0, 1]
    # two 10 ms batches: the mean of a block is at least the sleep it timed
    assert 0.020 <= stream["median"] < 0.5
    numpy_side = next(s for s in data["sides"] if s["label"] == "numpy")
    assert numpy_side["worker"]["blas"]["pinned"] is True
    assert numpy_side["worker"]["package_version"] == "stand-in"
    assert next(s for s in data["sides"] if s["label"] == "native_cpu")["n_jobs"] == 2


def test_ab_fails_the_gate_of_a_slower_native_engine_with_reasons(stand_in):
    out = stand_in / "ab"
    code = ab.main(["--baseline-engine", "numpy", "--candidate-engine", "native_cpu",
                    "--profile", "smoke", "--shapes", "latency-smoke", "--dtypes", "float64",
                    "--penalties", "none", "--lifecycles", "cold", "--warmups", "0",
                    "--min-sample-seconds", "0.01", "--no-progress", "--out-dir", str(out)])
    assert code == 1
    for name in ("baseline.json", "candidate.json", "merged.json"):
        assert validate.problems(record.load(out / name)) == []
    result = json.loads((out / "gate.json").read_text())
    case = result["cases"][0]
    assert result["passed"] is False and case["verdict"] == "candidate slower"
    assert len(case["ratios"]) == 9
    assert 1.3 < case["median_ratio"] < 3.5
    failed = {c["name"] for c in case["checks"] if not c["passed"]}
    assert {"slowdown", "competitor_parity"} <= failed
    assert any("slower than its competitor" in r for r in result["reasons"])


def test_ab_refuses_fewer_than_nine_rounds(stand_in):
    with pytest.raises(SystemExit):
        ab.main(["--engine", "numpy", "--rounds", "5", "--out-dir", str(stand_in)])


def test_ab_warns_of_other_work_on_the_cpus_and_records_it(stand_in, monkeypatch, capsys):
    busy = {"window_s": 0.5, "busy_cpus": 3.25}
    monkeypatch.setattr(ab.fingerprint, "cpu_busy_sample", lambda: busy)
    out = stand_in / "ab"
    ab.main(["--engine", "numpy", "--profile", "smoke", "--shapes", "latency-smoke",
             "--dtypes", "float64", "--penalties", "none", "--lifecycles", "cold",
             "--warmups", "0", "--min-sample-seconds", "0.01", "--no-progress",
             "--out-dir", str(out)])
    assert ("warning: 3.25 CPUs were busy with other work before the run (over 0.5 s)"
            in capsys.readouterr().err)
    merged = record.load(out / "merged.json")
    assert merged["environment"]["cpu_busy_before_run"] == busy
    assert validate.problems(merged) == []


def test_ab_says_nothing_of_an_idle_host(stand_in, monkeypatch, capsys):
    monkeypatch.setattr(ab.fingerprint, "cpu_busy_sample",
                        lambda: {"window_s": 0.5, "busy_cpus": 0.04})
    ab.main(["--engine", "numpy", "--profile", "smoke", "--shapes", "latency-smoke",
             "--dtypes", "float64", "--penalties", "none", "--lifecycles", "cold",
             "--warmups", "0", "--min-sample-seconds", "0.01", "--no-progress",
             "--out-dir", str(stand_in / "ab")])
    assert "CPUs were busy" not in capsys.readouterr().err
