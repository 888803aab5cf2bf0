"""benchmarks/goals.py on hand-made A/B runs whose speed-ups are chosen here.

Each run pairs peer_cupy (baseline) with native_cuda (candidate) round by round, the candidate
taking exactly 1/speedup of the baseline's time in every round, so the gate's speed-up of a case
is the chosen number and every expected median below is numpy's median of the chosen numbers.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import gate, goals, record, roofline, synthetic  # noqa: E402
from benchmarks.profiles import PROFILES, shape_named  # noqa: E402

BASE = [1.00, 1.02, 0.98, 1.01, 0.99, 1.00, 1.03, 0.97, 1.00]  # seconds per round
DEVICE = {"schema": "renewable-huber-device-constants", "version": 1,
          "created": "2026-01-01T00:00:00+00:00",
          "fingerprint": {"name": "synthetic GPU", "compute_capability": "9.0",
                          "memory_bytes": 2**37, "driver_version": 13000,
                          "runtime_version": 13000},
          "model": {"bandwidth_bytes_per_s": 4e12, "gemm_float64_flops_per_s": 5e13,
                    "gemm_float32_flops_per_s": 1e14, "launch_s": 2e-6, "sync_s": 1e-5,
                    "host_to_device_bytes_per_s": 5e10}}


def keys(profile, transports=("device", "host")):
    return [(s.name, d, p, t) for s in PROFILES[profile] for d in ("float32", "float64")
            for p in ("none", "l1") for t in transports]


def write_run(folder: Path, speedups: dict, *, created="2026-01-01T00:00:00+00:00",
              gpu=None, baseline="peer_cupy", base_seconds=None, iterations=None,
              busy_cpus=None):
    """An ab.py output folder: merged.json and gate.json of the cases in `speedups`; with
    busy_cpus, the CPU sample ab.py takes before a run."""
    cases = []
    for (shape, dtype, penalty, transport), speedup in speedups.items():
        base = [b * (base_seconds or 1.0) for b in BASE]
        common = dict(shape=shape, dtype=dtype, penalty=penalty, transport=transport)
        if iterations is not None:
            common["iterations"] = iterations
        cases.append(synthetic.case(label="baseline", engine=baseline, samples=base, **common))
        cases.append(synthetic.case(label="candidate", engine="native_cuda",
                                    samples=[b / speedup for b in base], **common))
    data = synthetic.build([("baseline", baseline), ("candidate", "native_cuda")], cases)
    data["environment"]["created"] = created
    if gpu is not None:
        data["environment"]["gpu"] = {"device_count": 1, "name": gpu}
    if busy_cpus is not None:
        data["environment"]["cpu_busy_before_run"] = {"window_s": 0.5, "busy_cpus": busy_cpus}
    folder.mkdir(parents=True, exist_ok=True)
    record.write(data, folder / "merged.json")
    record.write(gate.evaluate(data, "baseline", "candidate"), folder / "gate.json")
    return folder


def judged(*folders, device=None):
    runs, ignored = goals.find_runs(list(folders))
    return goals.judge(runs, device), ignored


def goal(result, start):
    found = [g for g in result["goals"] if g["goal"].startswith(start)]
    assert len(found) == 1, [g["goal"] for g in result["goals"]]
    return found[0]


def spread(ks, low, high, seed):
    rng = np.random.default_rng(seed)
    return {k: float(v) for k, v in zip(ks, rng.uniform(low, high, len(ks)), strict=True)}


def test_standard_goals_are_the_medians_and_minima_of_the_chosen_speedups(tmp_path):
    device = spread(keys("standard", ("device",)), 10.5, 40.0, seed=1)
    host = spread(keys("standard", ("host",)), 7.5, 20.0, seed=2)
    result, _ = judged(write_run(tmp_path / "std", {**device, **host}))
    d_median = goal(result, "standard, device input: median")
    assert d_median["value"] == pytest.approx(np.median(list(device.values())), rel=1e-12)
    assert d_median["met"] == ("yes" if np.median(list(device.values())) >= 20 else "no")
    d_low = goal(result, "standard, device input: every case")
    assert d_low["value"] == pytest.approx(min(device.values()), rel=1e-12)
    assert d_low["met"] == "yes" and d_low["cases"] == 16
    h_median = goal(result, "standard, host input: median")
    assert h_median["value"] == pytest.approx(np.median(list(host.values())), rel=1e-12)
    assert goal(result, "standard, host input: every case")["met"] == "yes"
    # the large profile was not measured: its goals are incomplete, never met
    assert goal(result, "large, device input: median")["met"] == "incomplete"
    assert len(goal(result, "large, host input")["missing"]) == 8
    assert result["all_met"] is False
    with_device, _ = judged(tmp_path / "std", device=roofline.DeviceConstants.from_json(DEVICE))
    floors = goal(with_device, "large, device input: every case within")
    assert floors["met"] == "incomplete" and floors["measured"] == "no case measured"


@pytest.mark.parametrize(("lowest", "verdict"), [(7.0, "yes"), (6.99, "no")])
def test_every_case_goal_holds_at_its_target_and_fails_just_below(tmp_path, lowest, verdict):
    speedups = dict.fromkeys(keys("standard"), 30.0)
    speedups[("wide", "float32", "l1", "host")] = lowest
    result, _ = judged(write_run(tmp_path / "run", speedups))
    assert goal(result, "standard, host input: every case")["met"] == verdict


def test_a_missing_case_leaves_a_median_incomplete_but_a_low_case_is_still_a_no(tmp_path):
    speedups = dict.fromkeys(keys("standard"), 30.0)
    del speedups[("latency", "float64", "none", "device")]
    speedups[("reference", "float32", "l1", "device")] = 5.0
    result, _ = judged(write_run(tmp_path / "run", speedups))
    median = goal(result, "standard, device input: median")
    assert median["met"] == "incomplete"
    assert median["missing"] == ["latency float64 none device"]
    assert goal(result, "standard, device input: every case")["met"] == "no"
    assert goal(result, "standard, host input: every case")["met"] == "yes"


def test_a_case_measured_twice_is_taken_from_the_newer_run(tmp_path):
    old = dict.fromkeys(keys("standard"), 30.0)
    old[("reference", "float32", "l1", "host")] = 4.0
    write_run(tmp_path / "old", old, created="2026-01-01T00:00:00+00:00")
    write_run(tmp_path / "new", {("reference", "float32", "l1", "host"): 9.0},
              created="2026-01-02T00:00:00+00:00")
    result, _ = judged(tmp_path)  # a folder above both runs
    low = goal(result, "standard, host input: every case")
    assert low["met"] == "yes" and low["value"] == pytest.approx(9.0)
    by_folder = {Path(s["folder"]).name: s["cases"] for s in result["sources"]}
    assert by_folder == {"old": 31, "new": 1}


def test_the_streaming_goal_reads_native_cudas_median_in_seconds(tmp_path):
    key = ("streaming", "float64", "none", "device")
    # baseline 40 ms a stream, 20x: native_cuda 2.0 ms (the limit), then 25x: 1.6 ms
    result, _ = judged(write_run(tmp_path / "a", {key: 20.0}, base_seconds=0.04))
    stream = goal(result, "standard streaming stream")
    assert stream["value"] == pytest.approx(0.002) and stream["met"] == "yes"
    result, _ = judged(write_run(tmp_path / "b", {key: 18.0}, base_seconds=0.04))
    assert goal(result, "standard streaming stream")["met"] == "no"
    result, _ = judged(write_run(tmp_path / "c", {("streaming", "float64", "l1", "device"): 30.0}))
    assert goal(result, "standard streaming stream")["met"] == "incomplete"


def test_the_floor_goal_sets_each_large_case_against_its_ideal_floor(tmp_path):
    ks = keys("large", ("device",))
    iterations = {"large-stream": [3] * 16, "large-wide": [3] * 4}
    folder = tmp_path / "large"
    for shape in ("large-stream", "large-wide"):
        write_run(folder / shape, {k: 5.0 for k in ks if k[0] == shape}, base_seconds=0.2,
                  iterations=iterations[shape])
    device = roofline.DeviceConstants.from_json(DEVICE)
    result, _ = judged(folder, device=device)
    floors = goal(result, "large, device input: every case within")
    # by hand, large-wide float64 none: 4 batches of 50,000 x 1,024 (P = 1,025), 3 iterations
    # each: 3 reads of X and y, 3 Grams of 2 n P^2 flops, 3 launches, 1 synchronisation
    n, P = 50_000, 1_025
    per_batch = (3 * n * P * 8 / 4e12 + 3 * 2 * n * P * P / 5e13 + 3 * 2e-6 + 1e-5)
    achieved = np.median([b * 0.2 / 5.0 for b in BASE])
    assert floors["ratios"]["large-wide float64 none device"] == pytest.approx(
        achieved / (4 * per_batch), rel=1e-9)
    worst = max(floors["ratios"].values())
    assert floors["value"] == pytest.approx(worst)
    assert floors["met"] == ("yes" if worst <= 2.5 else "no")
    assert worst > 2.5  # 40 ms a large-stream stream is far above its floor: "no"
    no_device, _ = judged(folder)
    assert goal(no_device, "large, device input: every case within")["met"] == "incomplete"


def test_runs_of_two_gpu_models_are_refused(tmp_path):
    write_run(tmp_path / "a", {keys("standard")[0]: 20.0}, gpu="NVIDIA H200")
    write_run(tmp_path / "b", {keys("standard")[1]: 20.0}, gpu="NVIDIA H100 80GB HBM3")
    with pytest.raises(ValueError, match="different GPUs"):
        goals.find_runs([tmp_path])
    assert goals.main([str(tmp_path)]) == 2


def test_gates_against_other_baselines_are_ignored_and_listed(tmp_path):
    write_run(tmp_path / "cupy", dict.fromkeys(keys("standard"), 30.0), baseline="cupy")
    with pytest.raises(ValueError, match="no A/B run of native_cuda against peer_cupy"):
        goals.find_runs([tmp_path])
    write_run(tmp_path / "peer", dict.fromkeys(keys("standard"), 30.0))
    result, ignored = judged(tmp_path)
    assert len(ignored) == 1 and "native_cuda against cupy" in ignored[0]
    assert [Path(s["folder"]).name for s in result["sources"]] == ["peer"]


def test_a_gate_beside_another_runs_record_is_refused(tmp_path):
    a = write_run(tmp_path / "a", {keys("standard")[0]: 20.0})
    b = write_run(tmp_path / "b", {keys("standard")[0]: 20.0})
    (a / "merged.json").write_bytes((b / "merged.json").read_bytes())
    with pytest.raises(ValueError, match="different runs"):
        goals.find_runs([a])


def test_command_line_table_json_and_check_exit_code(tmp_path, capsys):
    folder = write_run(tmp_path / "std", dict.fromkeys(keys("standard"), 30.0),
                       base_seconds=0.001)
    out = tmp_path / "goals.json"
    assert goals.main([str(folder), "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| standard, host input: every case >= 7x | lowest 30x" in table
    data = json.loads(out.read_text())
    assert data["schema"] == "renewable-huber-goals" and data["all_met"] is False
    # the large profile is missing, so --check cannot pass
    assert goals.main([str(folder), "--check"]) == 1
    assert goals.main([str(tmp_path / "nowhere")]) == 2
    assert "neither an ab.py output folder" in capsys.readouterr().err


def test_the_transfer_goal_sets_host_inputs_extra_time_against_the_pinned_copy_floor(tmp_path):
    # native_cuda 2 ms on device input for every case, and on host input 2 ms plus `factor`
    # times the pinned-copy floor of the stream's bytes: rows x (features + 1) x itemsize at
    # the constants' 5e10 bytes/s (the whole stream crosses the link once).
    def host_factor(key):
        return 1.6 if key == ("large-wide", "float32", "l1") else 1.2

    speedups = {}
    for profile in ("standard", "large"):
        for shape in PROFILES[profile]:
            for dtype in ("float32", "float64"):
                floor = shape.rows * (shape.features + 1) * np.dtype(dtype).itemsize / 5e10
                for penalty in ("none", "l1"):
                    host_s = 0.002 + host_factor((shape.name, dtype, penalty)) * floor
                    speedups[(shape.name, dtype, penalty, "device")] = 0.1 / 0.002
                    speedups[(shape.name, dtype, penalty, "host")] = 0.1 / host_s
    device = roofline.DeviceConstants.from_json(DEVICE)
    write_run(tmp_path / "all", speedups, base_seconds=0.1)
    result, _ = judged(tmp_path / "all", device=device)
    transfer = goal(result, "host input adds at most")
    assert len(transfer["ratios"]) == 24
    for name, ratio in transfer["ratios"].items():
        expected = 1.6 if name == "large-wide float32 l1" else 1.2
        assert ratio == pytest.approx(expected, rel=1e-9), name
    assert transfer["met"] == "no" and transfer["value"] == pytest.approx(1.6)
    # every case at 1.2x: met; one device twin missing: incomplete
    fixed = dict(speedups)
    wide = shape_named("large-wide")
    fixed[("large-wide", "float32", "l1", "host")] = 0.1 / (
        0.002 + 1.2 * wide.rows * (wide.features + 1) * 4 / 5e10)
    write_run(tmp_path / "fixed", fixed, base_seconds=0.1)
    assert goal(judged(tmp_path / "fixed", device=device)[0], "host input adds")["met"] == "yes"
    del fixed[("latency", "float64", "none", "device")]
    write_run(tmp_path / "partial", fixed, base_seconds=0.1)
    partial = goal(judged(tmp_path / "partial", device=device)[0], "host input adds")
    assert partial["met"] == "incomplete" and partial["missing"] == ["latency float64 none"]


def test_host_input_cases_of_a_run_on_busy_cpus_are_left_out_and_listed(tmp_path, capsys):
    speedups = dict.fromkeys(keys("standard"), 30.0)
    write_run(tmp_path / "busy", speedups, busy_cpus=3.5)
    result, _ = judged(tmp_path / "busy")
    # device input still counts; every host-input case is missing, so the host goals wait
    assert goal(result, "standard, device input: median")["met"] == "yes"
    host = goal(result, "standard, host input: median")
    assert host["met"] == "incomplete" and len(host["missing"]) == 16
    assert len(result["busy_host_cases"]) == 16
    assert result["busy_host_cases"][0]["busy_cpus"] == 3.5
    assert goals.main([str(tmp_path / "busy")]) == 0
    out = capsys.readouterr().out
    assert "Host-input cases left out, 3.5 CPUs busy with other work before their run" in out
    assert "latency float32 l1 host" in out


def test_an_older_idle_runs_host_input_counts_where_the_newer_ran_on_busy_cpus(tmp_path):
    key = ("reference", "float32", "l1", "host")
    idle = dict.fromkeys(keys("standard"), 30.0)
    idle[key] = 8.0
    write_run(tmp_path / "idle", idle, created="2026-01-01T00:00:00+00:00", busy_cpus=0.04)
    write_run(tmp_path / "busy", {key: 2.0, ("reference", "float32", "l1", "device"): 25.0},
              created="2026-01-02T00:00:00+00:00", busy_cpus=6.0)
    result, _ = judged(tmp_path)
    low = goal(result, "standard, host input: every case")
    assert low["value"] == pytest.approx(8.0) and low["met"] == "yes"
    assert result["busy_host_cases"] == []  # the idle run measured it
    by_folder = {Path(s["folder"]).name: s["cases"] for s in result["sources"]}
    assert by_folder == {"idle": 31, "busy": 1}  # the busy run's device case is the newer


@pytest.mark.parametrize("busy_cpus", [None, 1.0])
def test_host_input_counts_without_a_sample_or_at_the_limit(tmp_path, busy_cpus):
    speedups = dict.fromkeys(keys("standard"), 30.0)
    result, _ = judged(write_run(tmp_path / "run", speedups, busy_cpus=busy_cpus))
    assert goal(result, "standard, host input: median")["met"] == "yes"
    assert result["busy_host_cases"] == []
