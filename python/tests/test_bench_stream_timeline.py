"""benchmarks/micro/cuda_stream_timeline.py's summary of a CUDA activity trace, on hand-written
events (busy time, idle gaps and totals worked out by hand below)."""

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.micro import cuda_stream_timeline  # noqa: E402

GEMV = ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, double>"
        "(cublasGemvParamsEx<int>)")
EVENTS = [
    {"cat": "kernel", "name": "void rh::(anonymous namespace)::a_kernel<double>(int)",
     "ts": 100.0, "dur": 10.0},
    # Overlaps a_kernel (an overlapped launch): the GPU is busy from 100 to 115.
    {"cat": "kernel", "name": "void rh::(anonymous namespace)::b_kernel(int)",
     "ts": 105.0, "dur": 10.0},
    # Inside b_kernel's time: adds nothing.
    {"cat": "kernel", "name": "void rh::(anonymous namespace)::a_kernel<double>(int)",
     "ts": 107.0, "dur": 3.0},
    # Idle 115 -> 125 after b_kernel (the work that ended last), then busy to 130.
    {"cat": "kernel", "name": GEMV, "ts": 125.0, "dur": 5.0},
    # Idle 130 -> 140, then a copy to 142.
    {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 140.0, "dur": 2.0},
    {"cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "ts": 90.0, "dur": 3.0},
    {"cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "ts": 94.0, "dur": 4.0},
    {"cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 99.0, "dur": 20.0},
    {"cat": "cpu_op", "name": "aten::zeros", "ts": 0.0, "dur": 1000.0},  # not CUDA: ignored
]
HEADER = ("per kernel (or copy): launches, total us, mean us, median us, least us; busy us it "
          "adds, total and median")


def test_summary_counts_busy_time_once_and_names_the_gaps():
    text = cuda_stream_timeline.summary(EVENTS, "case")
    lines = text.splitlines()
    assert lines[0] == "## case"
    # Span 100 -> 142 = 42 us; busy 15 + 5 + 2 = 22; idle 10 + 10 = 20.
    assert lines[1] == ("device work 5 items; first start to last end 42.0 us: busy 22.0 us, "
                        "idle 20.0 us")
    per_kernel = lines[lines.index(
        HEADER) + 1:]
    # a_kernel: 10 and 3 us, so the median is their mean and the least 3. It adds 10 us of busy
    # time (100 -> 110) and 0 (inside b_kernel), median 5. b_kernel adds only 110 -> 115: its
    # first 5 us overlap a_kernel. The added times sum to the busy time: 10 + 5 + 5 + 2 = 22.
    assert per_kernel[0].split() == ["2", "13.0", "6.50", "6.50", "3.00", "10.0", "5.00",
                                     "a_kernel<double>"]
    assert per_kernel[1].split() == ["1", "10.0", "10.00", "10.00", "10.00", "5.0", "5.00",
                                     "b_kernel"]
    assert per_kernel[2].split() == ["1", "5.0", "5.00", "5.00", "5.00", "5.0", "5.00",
                                     "internal::gemvx::kernel<int,", "double>"]
    gaps = lines[lines.index("largest idle gaps, by the work before and after: total us, count")
                 + 1:lines.index("host CUDA calls: count, total us")]
    assert [g.split(None, 2) for g in gaps] == [
        ["10.0", "1", "b_kernel -> internal::gemvx::kernel<int, double>"],
        ["10.0", "1", "internal::gemvx::kernel<int, double> -> Memcpy HtoD"],
    ]
    calls = lines[lines.index("host CUDA calls: count, total us") + 1:]
    assert [c.split() for c in calls] == [["1", "20.0", "cudaStreamSynchronize"],
                                          ["2", "7.0", "cudaLaunchKernelExC"]]


def test_summary_of_a_trace_without_device_work():
    text = cuda_stream_timeline.summary(EVENTS[5:], "host only")
    assert text == "## host only\nno device activity in the trace\n"


def test_summarize_reads_a_saved_trace(tmp_path, capsys):
    path = tmp_path / "timeline.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"title": "saved", "traceEvents": EVENTS}, f)
    cuda_stream_timeline.summarize(str(path))
    assert capsys.readouterr().out == cuda_stream_timeline.summary(EVENTS, "saved")


def test_cases_name_a_known_shape_dtype_penalty_and_transport():
    (shape, dtype, penalty, transport), (large, *_, staged) = cuda_stream_timeline.parse_cases(
        ["streaming:float64:none", "large-wide:float32:l1:host"])
    assert (shape.name, shape.features, dtype, penalty) == ("streaming", 32, "float64", "none")
    assert transport == "device"
    assert (large.name, large.features, large.batch_size, staged) == (
        "large-wide", 1024, 50_000, "host")
    for bad in ("streaming:float64", "nope:float64:none", "wide:float16:none", "wide:float64:l2",
                "wide:float64:none:device", "wide:float64:none:host:host"):
        with pytest.raises(ValueError, match=f"case '{bad}': expected SHAPE:DTYPE:PENALTY"):
            cuda_stream_timeline.parse_cases(["wide:float64:none", bad])


def _mark(ts, dur):
    return {"cat": "user_annotation", "name": "partial_fit", "ts": ts, "dur": dur}


def _call(name, ts, dur):
    return {"cat": "cuda_runtime", "name": name, "ts": ts, "dur": dur}


# Three partial_fit ranges: 0-100 with a launch, a synchronisation and a launch; 130-180 with a
# synchronisation alone; 200-220 without a CUDA call. A call outside every range is ignored.
BATCHES = [
    _mark(0.0, 100.0),
    _call("cudaLaunchKernelExC", 10.0, 5.0),
    _call("cudaStreamSynchronize", 20.0, 50.0),
    _call("cudaLaunchKernelExC", 75.0, 5.0),
    _call("cudaMemsetAsync", 110.0, 4.0),
    _mark(130.0, 50.0),
    _call("cudaStreamSynchronize", 140.0, 30.0),
    _mark(200.0, 20.0),
]


def test_host_time_per_batch_splits_each_partial_fit_range():
    rows = cuda_stream_timeline.batch_host_times(BATCHES)
    # First range: first call at 10, calls 5 + 50 + 5 of which 50 waiting, calls span 10 -> 80
    # (10 us between them), 20 us after the last; the next range starts 30 us after its end.
    assert rows[0] == {"before": 10.0, "calls": 10.0, "waiting": 50.0, "between": 10.0,
                       "after": 20.0, "next": 30.0}
    assert rows[1] == {"before": 10.0, "calls": 0.0, "waiting": 30.0, "between": 0.0,
                       "after": 10.0, "next": 20.0}
    assert rows[2] == {"before": 20.0, "calls": 0.0, "waiting": 0.0, "between": 0.0,
                       "after": 0.0}
    assert cuda_stream_timeline.batch_host_times(EVENTS) == []


def test_summary_gives_the_first_batch_and_the_median_of_the_others():
    text = cuda_stream_timeline.summary(EVENTS[:5] + BATCHES, "marked")  # EVENTS' device work
    lines = text.splitlines()
    head = lines.index("host time per partial_fit call, us: first batch | median of the other 2")
    # Medians of the second and third ranges: before (10, 20), waiting (30, 0), after (10, 0);
    # only the second has a next call (20).
    assert [line.split(None, 2) for line in lines[head + 1:]] == [
        ["10.0", "15.0", "to its first CUDA call"],
        ["10.0", "0.0", "in its CUDA calls, waits excluded"],
        ["50.0", "15.0", "waiting in synchronisations"],
        ["10.0", "0.0", "between its CUDA calls"],
        ["20.0", "5.0", "after its last CUDA call"],
        ["30.0", "20.0", "from its end to the next call"],
    ]
    # Without ranges the summary has no such section.
    assert "host time per" not in cuda_stream_timeline.summary(EVENTS, "plain")


# A candidate's run of the same case: a_kernel twice at 4 us (8 us instead of 13), b_kernel as
# before, the gemv gone, a new c_kernel; busy 100 -> 104 (a_kernel), 104 -> 114 (b_kernel)
# and 120 -> 126 (c_kernel, after 6 us idle): 20 us.
CANDIDATE = [
    {"cat": "kernel", "name": "void rh::(anonymous namespace)::a_kernel<double>(int)",
     "ts": 100.0, "dur": 4.0},
    {"cat": "kernel", "name": "void rh::(anonymous namespace)::b_kernel(int)",
     "ts": 104.0, "dur": 10.0},
    # Inside b_kernel's time: adds nothing to busy.
    {"cat": "kernel", "name": "void rh::(anonymous namespace)::a_kernel<double>(int)",
     "ts": 106.0, "dur": 4.0},
    {"cat": "kernel", "name": "void rh::c_kernel(int)", "ts": 120.0, "dur": 6.0},
]


def test_busy_time_counts_overlapping_work_once():
    work = cuda_stream_timeline.device_work(EVENTS)
    assert cuda_stream_timeline.busy_time(work) == 22.0  # as the summary's test works it out
    assert cuda_stream_timeline.busy_time(cuda_stream_timeline.device_work(CANDIDATE)) == 20.0
    assert cuda_stream_timeline.busy_time([]) == 0.0


def _record(title, events):
    return {"title": f"{title}: 5 iterations; unprofiled wall median {len(events)}.000 ms "
                     "(lowest 1.000), profiled 9.000 ms", "traceEvents": events}


def test_comparison_sets_each_kernel_of_both_runs_side_by_side():
    text = cuda_stream_timeline.comparison(_record("case", EVENTS), _record("case", CANDIDATE),
                                           "cand", top=4)
    lines = text.splitlines()
    assert lines[0].startswith("## case: 5 iterations; unprofiled wall median 9.000 ms")
    assert lines[1].startswith("   cand: case: 5 iterations; unprofiled wall median 4.000 ms")
    # Busy 22 and 20 us; the walls the titles give.
    assert lines[2] == ("GPU busy us: base 22.0, cand 20.0 (1.100x); unprofiled wall median: "
                        "base 9.000 ms, cand 4.000 ms")
    rows = [line.split() for line in lines[4:]]
    # By the larger of the two totals: a_kernel (13 / 8), b_kernel (10 / 10), c_kernel (- / 6),
    # the gemv (5 / -); the copy (2 us) is the one left over.
    assert rows[0] == ["a_kernel<double>", "2", "6.50", "13.0", "2", "4.00", "8.0", "1.625x"]
    assert rows[1] == ["b_kernel", "1", "10.00", "10.0", "1", "10.00", "10.0", "1.000x"]
    assert rows[2] == ["c_kernel", "-", "-", "-", "1", "6.00", "6.0", "-"]
    assert rows[3] == ["internal::gemvx::kernel<int,", "double>", "1", "5.00", "5.0", "-", "-",
                       "-", "-"]
    assert lines[-1] == "  1 other kernels: base 2.0 us, cand 0.0 us"


def _save(path, record):
    with gzip.open(path, "wt") as f:
        json.dump(record, f)


def test_compare_reads_the_cases_of_two_runs(tmp_path, capsys):
    base, candidate = tmp_path / "base", tmp_path / "cand"
    base.mkdir()
    candidate.mkdir()
    _save(base / "timeline-wide-float64-none.json.gz", _record("wide", EVENTS))
    _save(base / "timeline-streaming-float64-l1.json.gz", _record("streaming", EVENTS))
    _save(candidate / "timeline-wide-float64-none.json.gz", _record("wide", CANDIDATE))
    _save(candidate / "timeline-latency-float32-none.json.gz", _record("latency", CANDIDATE))
    assert cuda_stream_timeline.compare(str(base), str(candidate), "cand") == 0
    out = capsys.readouterr().out
    assert out == (
        f"## timeline-streaming-float64-l1.json.gz: no timeline of cand in {candidate}\n"
        + cuda_stream_timeline.comparison(_record("wide", EVENTS), _record("wide", CANDIDATE),
                                          "cand") + "\n"
        + f"## timeline-latency-float32-none.json.gz: no timeline of the base in {base}\n")
    # A base folder without records: named, and a failure.
    assert cuda_stream_timeline.compare(str(candidate / "none"), str(candidate), "cand") == 1
    assert capsys.readouterr().out == f"no timeline-*.json.gz in {candidate / 'none'}\n"


def test_summary_tells_launches_that_return_at_once_from_those_that_work():
    # One launch that works (50 us) among three that return at once (3, 4 and 3 us): the mean
    # (15) mixes them, the median (3.5, between the middle two) and the least (3) do not.
    events = [{"cat": "kernel", "name": "void rh::row_pass_kernel<float, 8>(int)",
               "ts": 100.0 * i, "dur": dur} for i, dur in enumerate((50.0, 3.0, 4.0, 3.0))]
    lines = cuda_stream_timeline.summary(events, "case").splitlines()
    row = lines[lines.index(
        HEADER) + 1]
    assert row.split() == ["4", "60.0", "15.00", "3.50", "3.00", "60.0", "3.50",
                           "row_pass_kernel<float,", "8>"]


def test_busy_added_gives_an_early_launchs_wait_to_the_kernel_ahead():
    # A kernel launched early waits 8 us for the one ahead, then works 2 us: it adds 2 us. A
    # launch that returns at once 1 us after the one ahead ends adds its own 1.5 us.
    work = [{"name": "a", "ts": 0.0, "dur": 10.0}, {"name": "b", "ts": 2.0, "dur": 10.0},
            {"name": "c", "ts": 13.0, "dur": 1.5}]
    assert cuda_stream_timeline.busy_added(work) == [10.0, 2.0, 1.5]
    assert cuda_stream_timeline.busy_time(work) == 13.5
