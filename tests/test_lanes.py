"""Fields in float64 lanes (recoverylab._lanes): disjoint, within 53 bits, alone when asked."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from recoverylab._lanes import LANE_BITS, plan_lanes


@given(st.lists(st.integers(0, LANE_BITS), max_size=40))
def test_fields_are_disjoint_and_fit_their_lanes(widths: list[int]) -> None:
    lane, shift, n_lanes = plan_lanes(widths)
    assert len(lane) == len(widths)
    taken: dict[int, list[tuple[int, int]]] = {}
    for j, width in enumerate(widths):
        bits = width or LANE_BITS
        assert 0 <= lane[j] < n_lanes
        assert shift[j] + bits <= LANE_BITS
        taken.setdefault(int(lane[j]), []).append((int(shift[j]), bits))
        if width == 0:
            assert shift[j] == 0
    for fields in taken.values():
        fields.sort()
        assert all(a + b <= c for (a, b), (c, _) in itertools.pairwise(fields))
    assert n_lanes == len(taken)  # no empty lane


def test_narrow_fields_share_a_lane_and_a_zero_width_does_not() -> None:
    lane, shift, n_lanes = plan_lanes([17, 17, 17, 0])
    assert n_lanes == 2
    assert len({int(lane[j]) for j in range(3)}) == 1
    assert sorted(int(s) for s in shift[:3]) == [0, 17, 34]
    assert lane[3] != lane[0]
