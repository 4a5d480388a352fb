"""The spill smoke's result check is exact at any size: no int64 sum spans more than one chunk.

With 64 GB of int64 data (8e9 values) the sum 0 + 1 + ... + n-1 is 3.2e19, above int64's 9.2e18:
one CuPy / NumPy / cuDF sum over everything wraps and the smoke said WRONG RESULT though the data
came back intact. These tests run the pure expected / got computation at such sizes.
"""

from __future__ import annotations

import pytest

from rapidship.runtime.smoke_verdict import (INT64_MAX, arange_sum, chunk_bounds, combine, exact_chunk_len,
                                             exact_partition_rows)
from rapidship.runtime.worker_probes import piece_sum

MiB = 2**20
GB = 10**9


def wrap_int64(n: int) -> int:
    return (n + 2**63) % 2**64 - 2**63


@pytest.mark.parametrize("data_bytes", [34 * GB + 4 * 10**8, 64 * GB, 1000 * GB, 2**40 * 8])
def test_array_modes_sum_exactly_where_one_int64_sum_overflows(data_bytes):
    """cpu and gpu modes: chunks of arange(total), each summed in int64, added as Python ints."""
    total = data_bytes // 8
    expected = arange_sum(0, total)
    assert expected == total * (total - 1) // 2
    assert expected > INT64_MAX and wrap_int64(expected) != expected      # what one int64 sum gave
    for chunk_bytes in (32 * MiB, 128 * MiB, 8 * 2**30):                 # cpu default, gpu default, huge
        length = exact_chunk_len(total, chunk_bytes // 8)
        bounds = chunk_bounds(total, length)
        assert bounds[0][0] == 0 and bounds[-1][1] == total
        assert all(b - a <= length for a, b in bounds)
        assert all(a2 == b1 for (_, b1), (a2, _) in zip(bounds, bounds[1:]))
        # the largest chunk sum (the last full chunk) and so every partial sum inside it fits int64
        assert max(arange_sum(a, b) for a, b in bounds[-2:]) <= INT64_MAX
        assert length * (total - 1) <= INT64_MAX
        assert combine(arange_sum(a, b) for a, b in bounds) == expected


def test_chunks_shrink_only_where_their_own_sum_could_overflow():
    assert exact_chunk_len(8 * 10**9, 16 * MiB) == 16 * MiB            # 64 GB: the 128 MiB chunks stay
    huge = 2**50                                                       # 8 PiB of values
    assert exact_chunk_len(huge, 16 * MiB) == INT64_MAX // (huge - 1) < 16 * MiB
    assert exact_chunk_len(1, 5) == 5 and exact_chunk_len(0, 5) == 5


def test_numpy_chunk_sums_at_the_top_of_a_64_gb_range_are_exact():
    """The worker side: one chunk summed by the array library, at values near 8e9."""
    np = pytest.importorskip("numpy")
    total = 64 * GB // 8
    length = 2**20
    for start in (0, total // 2, total - length):
        chunk = np.arange(start, start + length, dtype="int64")
        got = piece_sum(chunk)
        assert type(got) is int and got == arange_sum(start, start + length)
    # chunk sums as int64 scalars (what workers hand back) are converted before they are added
    sums = np.array([arange_sum(a, b) for a, b in chunk_bounds(total, exact_chunk_len(total, 16 * MiB))],
                    dtype="int64")
    assert int(sums.sum()) != arange_sum(0, total)                      # an int64 total wraps
    assert combine(sums) == arange_sum(0, total)


def test_dask_cudf_partitions_and_cudf_frames_sum_exactly():
    """cudf mode: 128 MiB partitions (two int64 columns) and cuDF's own 12 frames of 256 MiB."""
    rows = exact_partition_rows(24, 128 * MiB // 16)
    assert rows == 128 * MiB // 16                                      # the default run is unchanged
    parts = 8192                                                        # 1 TiB of partitions
    rows = exact_partition_rows(parts, 128 * MiB // 16)
    total = parts * rows
    assert arange_sum(0, total) > INT64_MAX
    assert arange_sum((parts - 1) * rows, total) <= INT64_MAX           # the largest partition sum fits
    assert combine(arange_sum(i * rows, (i + 1) * rows) for i in range(parts)) == arange_sum(0, total)
    many = 10**7
    rows = exact_partition_rows(many, 128 * MiB // 16)
    assert rows < 128 * MiB // 16 and rows * (many * rows - 1) <= INT64_MAX
    assert exact_partition_rows(12, 256 * MiB // 8) == 256 * MiB // 8


def test_a_partition_column_is_summed_by_name():
    np = pytest.importorskip("numpy")
    frame = {"a": np.arange(10, 20, dtype="int64"), "b": np.arange(10, dtype="int64") % 7}
    assert piece_sum(frame, "a") == arange_sum(10, 20)
