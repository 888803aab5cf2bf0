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
