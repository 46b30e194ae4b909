"""The figures the suite writes for the bandwidth check, read back as distval reads them."""

from __future__ import annotations

from distval.results.bandwidth import busbw_problem
from distval_suite.bandwidth_figures import figures


def test_a_slow_small_call_writes_a_busbw_distval_takes_as_a_measurement() -> None:
    # 8 bytes in 20 ms over 2 ranks: 4e-7 GB/s, which 6 decimals wrote as 0.0, refused as no measurement.
    (figure,) = figures("all_reduce", [8], [0.02], 2, [0.02], [5])
    assert 0 < figure["busbw_gbps"] < 1e-6
    assert busbw_problem("all_reduce", 2, figure) is None


def test_figures_from_a_milli_gbps_up_keep_six_decimals() -> None:
    (figure,) = figures("all_reduce", [4 * 2**20], [0.0123456789], 2, [0.01], [5])
    assert figure["busbw_gbps"] == round(4 * 2**20 / 0.0123456789 / 1e9, 6)
