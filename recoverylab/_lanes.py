"""Integer fields side by side in the significand of one float64 column (a *lane*).

A column of non-negative integers whose sums never reach 2**b needs a field of b bits: several
such fields, shifted apart, fit one float64 column while their widths add up to at most 53 bits,
and any sum of that column holds the fields' sums exactly (every partial sum is an integer that
float64 holds). The bootstrap's products (:mod:`recoverylab.stats._exact_product`) and the
takeover's dense sums (:mod:`recoverylab.takeover._dense_sums`) both pack their columns so; this
module decides where each field goes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Bits of a float64 significand: a lane's fields may need at most this many bits together.
LANE_BITS = 53


def plan_lanes(widths: Sequence[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Place fields of ``widths`` bits in lanes: each field's lane, its shift, and the lanes.

    Widest fields first, each into the lane it fills best (the least free room that holds it),
    else a new lane. A width of 0 marks a field that shares with nothing (a column with negative
    values): it takes a whole lane at shift 0. Every width must be at most :data:`LANE_BITS`.
    """
    lane = np.zeros(len(widths), dtype=np.int64)
    shift = np.zeros(len(widths), dtype=np.int64)
    used: list[int] = []
    free: list[list[int]] = [[] for _ in range(LANE_BITS + 1)]  # lanes by their free bits
    for j in sorted(range(len(widths)), key=lambda j: -widths[j]):
        width = widths[j] or LANE_BITS
        room = next((r for r in range(width, LANE_BITS + 1) if free[r]), None)
        lane[j] = free[room].pop() if room is not None else len(used)
        if room is None:
            used.append(0)
        shift[j] = used[lane[j]]
        used[lane[j]] += width
        free[LANE_BITS - used[lane[j]]].append(int(lane[j]))
    return lane, shift, len(used)
