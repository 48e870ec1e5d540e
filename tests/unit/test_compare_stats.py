"""iofleet.results.stats against known answers: scipy's own results on fixed data,
planted differences, null simulations, too-few-samples cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sp

from iofleet.results import stats

A = [101.0, 97.5, 99.0, 103.2, 100.4, 98.8]
B = [108.1, 111.0, 105.9, 109.4, 112.3, 107.0]


def test_p_value_is_scipys_mann_whitney_on_the_slot_values() -> None:
    comp = stats.compare([A], [B])
    assert comp.p_value == pytest.approx(sp.mannwhitneyu(B, A, alternative="two-sided").pvalue)
    assert comp.design_effect == 1.0


def test_hodges_lehmann_is_the_median_of_all_pairwise_differences() -> None:
    # given a = 1..4 and b = 3, 5, 6, 8: the 16 differences b - a sorted
    diffs = sorted(b - a for a in (1, 2, 3, 4) for b in (3, 5, 6, 8))
    assert stats.hodges_lehmann(np.array([1, 2, 3, 4.0]), np.array([3, 5, 6, 8.0])) == (
        (diffs[7] + diffs[8]) / 2
    )
    assert stats.compare([[1, 2, 3, 4]], [[3, 5, 6, 8]]).shift == 3.0  # diffs[7], diffs[8] = 3


def test_benjamini_hochberg_matches_the_textbook_values() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4/rank 0.02, 0.02, 0.04, 0.04 (monotone)
    assert stats.adjust([0.01, 0.04, None, 0.03, 0.005]) == pytest.approx(
        [0.02, 0.04, None, 0.04, 0.02]
    )
    assert stats.adjust([None]) == [None]


def test_repeats_test_is_scipys_kruskal_wallis() -> None:
    groups = [[1.0, 2.0, 3.0], [2.5, 3.5, 4.5], [9.0, 8.0, 7.5]]
    assert stats.repeats_test(groups) == pytest.approx(sp.kruskal(*groups).pvalue)
    assert stats.repeats_test([[1.0], [5.0]]) is None  # one slot per repeat: no within noise
    assert stats.repeats_test([[2.0, 2.0], [2.0, 2.0]]) == 1.0


def test_summary_cvs_on_fixed_data() -> None:
    s = stats.summarize([[10.0, 12.0], [20.0, 22.0]])
    assert (s.n_slots, s.n_repeats, s.median, s.mean) == (4, 2, 16.0, 16.0)
    assert s.cv == pytest.approx(np.std([10, 12, 20, 22], ddof=1) / 16)
    assert s.cv_repeats == pytest.approx(np.std([11, 21], ddof=1) / 16)
    assert s.cv_within == pytest.approx(math.sqrt(2.0) / 16)  # both repeats: var 2


def test_one_repeat_bootstrap_interval_agrees_with_scipy_bootstrap() -> None:
    rng = np.random.default_rng(3)
    values = rng.lognormal(4.6, 0.2, 12)
    ours = stats.bootstrap_means([values], np.random.default_rng(1), resamples=20000)
    low, high = np.percentile(ours, [2.5, 97.5])
    ref = sp.bootstrap(
        (values,), np.mean, method="percentile", n_resamples=20000, random_state=1
    ).confidence_interval
    assert low == pytest.approx(ref.low, rel=0.01)
    assert high == pytest.approx(ref.high, rel=0.01)


def test_two_stage_bootstrap_carries_the_spread_between_repeats() -> None:
    # repeats far apart, slots within a repeat tight: resampling repeats must widen the interval
    groups = [[100.0, 100.2, 99.8, 100.1], [110.0, 110.2, 109.8, 110.1], [90.0, 90.1, 89.9, 90.2]]
    flat = stats.bootstrap_means([sum(groups, [])], np.random.default_rng(0))
    nested = stats.bootstrap_means(groups, np.random.default_rng(0))
    assert np.std(nested) > 1.5 * np.std(flat)
    assert stats.design_effect(groups) > 3


def test_output_is_reproducible() -> None:
    assert stats.compare([A], [B]) == stats.compare([A], [B])


def test_planted_higher_iops_in_b_is_b_better() -> None:
    rng = np.random.default_rng(7)
    a = [rng.normal(1000, 50, 8) for _ in range(2)]
    b = [rng.normal(1200, 60, 8) for _ in range(2)]
    comp = stats.compare(a, b)
    assert comp.ci_low is not None and comp.ci_low > 1.1
    assert stats.verdict(comp, comp.p_value, higher_is_better=True) == "b_better"
    # the same numbers as latency: higher is worse, so A is better
    assert stats.verdict(comp, comp.p_value, higher_is_better=False) == "a_better"


def test_planted_lower_latency_in_b_is_b_better() -> None:
    rng = np.random.default_rng(8)
    a = [rng.normal(500e3, 20e3, 10)]
    b = [rng.normal(450e3, 20e3, 10)]
    comp = stats.compare(a, b)
    assert comp.ci_high is not None and comp.ci_high < 1
    assert comp.shift is not None and comp.shift < 0
    assert stats.verdict(comp, comp.p_value, higher_is_better=False) == "b_better"


def _null_false_positives(repeats: int, slots: int, between_sd: float, sims: int = 200) -> int:
    rng = np.random.default_rng(2026 + repeats * 10 + slots)
    hits = 0
    for i in range(sims):

        def side() -> list[np.ndarray]:
            return [rng.normal(100 + rng.normal(0, between_sd), 5, slots) for _ in range(repeats)]

        comp = stats.compare(side(), side(), np.random.default_rng(i))
        hits += stats.verdict(comp, comp.p_value, True) in ("a_better", "b_better")
    return hits


# 99.9% upper bound of Binomial(200, 0.05): the count a 5% test exceeds 1 time in 1000
BOUND = int(sp.binom.ppf(0.999, 200, 0.05))


@pytest.mark.parametrize(
    ("repeats", "slots", "between_sd"),
    [
        (1, 8, 0.0),  # one run per side, fleet of 8
        (3, 4, 0.0),  # three repeats, no repeat effect
        (3, 4, 5.0),  # repeat effect as large as the slot noise
        (5, 4, 5.0),
    ],
)
def test_no_difference_gives_false_positives_at_the_stated_rate(
    repeats: int, slots: int, between_sd: float
) -> None:
    assert _null_false_positives(repeats, slots, between_sd) <= BOUND


@pytest.mark.parametrize(("n_a", "n_b"), [(1, 1), (2, 2), (3, 3), (1, 20), (3, 4)])
def test_too_few_slots_for_the_test_to_reach_alpha(n_a: int, n_b: int) -> None:
    comp = stats.compare([[100.0 + i for i in range(n_a)]], [[200.0 + i for i in range(n_b)]])
    assert comp.too_few and comp.p_value is None
    assert stats.verdict(comp, None, True) == "too_few_samples"


def test_four_slots_a_side_can_show_a_difference() -> None:
    assert stats.min_attainable_p(4, 4) < stats.ALPHA < stats.min_attainable_p(3, 4)
    comp = stats.compare([[100.0, 101, 102, 103]], [[200.0, 201, 202, 203]])
    assert not comp.too_few
    assert stats.verdict(comp, comp.p_value, True) == "b_better"


def test_strong_repeat_effect_shrinks_the_sample_to_too_few() -> None:
    # two repeats a side, slots identical within a repeat: effectively 2 vs 2 samples
    a = [[100.0, 100.0, 100.1, 100.0], [120.0, 120.1, 120.0, 120.0]]
    b = [[130.0, 130.1, 130.0, 130.0], [150.0, 150.0, 150.1, 150.0]]
    comp = stats.compare(a, b)
    assert comp.design_effect > 3
    assert stats.verdict(comp, comp.p_value, True) == "too_few_samples"


def test_slots_needed_from_the_cv() -> None:
    # 2 (z_0.975 + z_0.8)^2 (0.10 / 0.05)^2 = 62.8, / (3/pi) = 65.8 -> 66
    assert stats.slots_needed(0.10) == 66
    assert stats.slots_needed(0.0) == 4  # the smallest n an exact test can use
    assert stats.slots_needed(None) is None
    comp = stats.compare([[100.0, 110.0]], [[105.0, 95.0]])
    assert comp.slots_needed is not None and comp.repeats_needed == math.ceil(comp.slots_needed / 2)


def test_slots_needed_rounds_up_once_after_the_design_effect() -> None:
    # given a design effect of 5/3 (6 slots in repeats of 1 and 5) and a CV whose
    # n_t / (3/pi) is 5.06: 5.06 x 5/3 = 8.43 slots a side, so 9. Rounding up first
    # (6 x 5/3) gave 10, and the float 1.666666666666667 x 6 = 10.000000000000002 gave 11
    comp = stats.compare([[99.0], [100.0] * 5], [[100.0, 103.9, 96.1]])
    assert comp.design_effect == pytest.approx(5 / 3)
    assert comp.slots_needed == 9
    # a product that is a whole number exactly is that number: 2.7 x 90 = 243
    assert stats.slots_needed(0.0, 2.7 * 90 / 4) == 243 and 4 * (2.7 * 90 / 4) > 243
    assert stats.ceil_whole(10.000000000000002) == 10 and stats.ceil_whole(10.01) == 11
    assert stats.floor_whole(3.9999999999999982) == 4 and stats.floor_whole(3.99) == 3


def test_repeats_needed_is_whole_and_enough_for_each_side() -> None:
    # 65 slots at 13 slots per 3 repeats: 65 x 3 / 13 = 15 repeats exactly (the float
    # 65 / (13 / 3) is 15.000000000000002, which gave 16)
    def side(s: float) -> list[list[float]]:
        return [
            [100 - s, 100 + s, 100 - s, 100 + s],
            [100 - s, 100 + s, 100 + s, 100 - s],
            [100 - s, 100 + s, 100, 100 - s, 100 + s],
        ]

    a = side(9.87)
    comp = stats.compare(a, [[v * 1.01 for v in g] for g in a])
    assert (comp.slots_needed, comp.repeats_needed) == (65, 15)
    # a fleet of 1 against a fleet of 2: the side with 1 slot a repeat needs 10 repeats
    # for 10 slots, not the 5 the other side's 2 slots a repeat would give
    assert stats.repeats_needed(10, [(3, 3), (6, 3)]) == 10


def test_too_few_counts_a_whole_effective_size_as_whole() -> None:
    # design effect 2 exactly (2.000000000000001 in doubles): 8 slots a side count as
    # 4 and 4, whose exact test can reach 0.05 (2 / C(8, 4) = 0.029); 8 / deff was
    # 3.9999999999999982, rounded down to 3, and the row was called too few
    comp = stats.compare(
        [[8.0, 10.0, 7.0], [8.0, 1.0, 7.0, 7.0, 3.0, 6.0]], [[20.0 + i for i in range(8)]]
    )
    assert comp.design_effect == pytest.approx(2.0)
    assert not comp.too_few and comp.p_value is not None


def test_large_samples_are_compared_without_overflow() -> None:
    # C(1030, 515) is beyond a double: 2.0 / it raised OverflowError
    rng = np.random.default_rng(0)
    comp = stats.compare([list(100 + rng.normal(0, 5, 515))], [list(101 + rng.normal(0, 5, 515))])
    assert not comp.too_few and comp.p_value is not None and comp.p_value < 0.05
    assert 0 < stats.min_attainable_p(515, 515) < 1e-300


def test_a_side_of_zeros_has_no_ratio_but_the_test_still_decides() -> None:
    comp = stats.compare([[0.0] * 6], [[1.0, 1.1, 0.9, 1.0, 1.2, 0.95]])
    assert comp.ratio is None and comp.ci_low is None
    assert stats.verdict(comp, comp.p_value, higher_is_better=True) == "b_better"
    same = stats.compare([[0.0] * 6], [[0.0] * 6])
    assert stats.verdict(same, same.p_value, higher_is_better=True) == "no_difference"
