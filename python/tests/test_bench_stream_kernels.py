"""benchmarks/micro/cuda_stream_kernels.py's reading of Nsight Compute's per-kernel summary,
on a hand-written excerpt in that format (totals worked out by hand below)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.micro import cuda_stream_kernels  # noqa: E402

EXCERPT = """\
==PROF== Profiling "row_gram_kernel" - 0 (1/3): 0%....50%....100% - 1 pass
  void rh::<unnamed>::row_gram_kernel<double, 5>(rh::RowView<T1>, const double *, double) \
(256, 1, 1)x(256, 1, 1), Device 0, CC 9.0, Invocations 4
    Section: Command line profiler metrics
    ---------------------- ----------- ------- ------- -------
    Metric Name            Metric Unit Minimum Maximum Average
    ---------------------- ----------- ------- ------- -------
    gpu__time_duration.sum          us   20.10   22.90   21.00
    ---------------------- ----------- ------- ------- -------

  void kernel<getrf_wo_pivot_params_<double, 0, 256, 1, 64, 64, 68, 8, 1, 1>>(int, int) \
(1, 1, 1)x(256, 1, 1), Device 0, CC 9.0, Invocations 2
    Section: Command line profiler metrics
    ---------------------- ----------- ------- ------- -------
    gpu__time_duration.sum     msecond    0.18    0.19    0.19
    ---------------------- ----------- ------- ------- -------

  copy_info_kernel(int, int *) (1, 1, 1)x(1, 1, 1), Device 0, CC 9.0, Invocations 3
    Section: Command line profiler metrics
    gpu__time_duration.sum     nsecond  1,700.00  1,980.00  1,800.00
"""


def test_kernel_times_reads_units_and_orders_by_total():
    rows = cuda_stream_kernels.kernel_times(EXCERPT)
    names = [row[3] for row in rows]
    # getrf: 2 x 190 us = 380; row_gram: 4 x 21 = 84; copy_info: 3 x 1.8 = 5.4.
    assert names == ["void kernel<getrf_wo_pivot_params_<double, 0, 256, 1, 64, 64, 68, 8, 1, 1>>",
                     "row_gram_kernel<double, 5>", "copy_info_kernel"]
    assert [row[1] for row in rows] == [2, 4, 3]
    assert rows[0][0] == pytest.approx(380.0)
    assert rows[1][0] == pytest.approx(84.0)
    assert rows[2][2] == pytest.approx(1.8)


def test_kernel_times_refuses_an_unknown_unit():
    text = EXCERPT.replace("msecond", "fortnight")
    with pytest.raises(ValueError, match="fortnight"):
        cuda_stream_kernels.kernel_times(text)


def test_compare_sets_two_builds_side_by_side(tmp_path, capsys):
    base = tmp_path / "base.log"
    candidate = tmp_path / "candidate.log"
    base.write_text(EXCERPT)
    # The candidate's row pass takes 10.5 us instead of 21: totals 469.4 -> 427.4 us.
    candidate.write_text(EXCERPT.replace("22.90   21.00", "22.90   10.50"))
    cuda_stream_kernels.compare(str(base), str(candidate))
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "kernel total 469.4 us -> 427.4 us (base / candidate 1.098)"


def test_compare_adds_the_entries_of_one_kernel(tmp_path, capsys):
    # The same kernel on a second grid is a second summary entry: 4 x 21 + 2 x 5 = 94 us.
    second_grid = """\
  void rh::<unnamed>::row_gram_kernel<double, 5>(rh::RowView<T1>, const double *, double) \
(8, 1, 1)x(256, 1, 1), Device 0, CC 9.0, Invocations 2
    gpu__time_duration.sum          us    4.00    6.00    5.00
"""
    log = tmp_path / "both.log"
    log.write_text(EXCERPT + second_grid)
    cuda_stream_kernels.compare(str(log), str(log))
    lines = capsys.readouterr().out.strip().splitlines()
    assert "      94.0 us (   6)       94.0 us (   6)  row_gram_kernel<double, 5>" in lines
    assert lines[-1] == "kernel total 479.4 us -> 479.4 us (base / candidate 1.000)"


@pytest.mark.parametrize("shape", ["streaming", "large-stream", "large-wide"])
def test_run_takes_standard_and_large_shapes(shape):
    parser, _ = cuda_stream_kernels.stream_case_commands("", "run")
    args = parser.parse_args(["run", shape, "float32", "l1"])
    assert (args.shape, args.dtype, args.penalty) == (shape, "float32", "l1")


def test_run_refuses_an_unknown_shape(capsys):
    parser, _ = cuda_stream_kernels.stream_case_commands("", "run")
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "large-streams", "float32", "l1"])
    assert "invalid choice: 'large-streams'" in capsys.readouterr().err
