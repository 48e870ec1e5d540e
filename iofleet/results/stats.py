"""Statistics over per-slot samples (numpy + scipy; docs/decisions.md "compare").

The sample is the slot (one instance or one local agent process), never a
single I/O: a slot's IOPS, throughput, latency percentile or build time is one
number. A configuration measured in several repeats is a list of groups, one
array of slot values per repeat.

- `summarize`: n slots / repeats, median, mean, CV across slots, CV of the
  repeat means, pooled within-repeat CV and a Kruskal-Wallis test across
  repeats (`repeats_p`): do the repeats disagree beyond their slots' noise?
- `compare`: side B against side A: ratio of means B / A with a 95% interval
  from a two-stage (hierarchical) bootstrap (repeats resampled, then slots
  within each drawn repeat; numpy Generator, fixed seed), a two-sided
  Mann-Whitney U test on the pooled slot values with the Hodges-Lehmann shift
  (median of all pairwise differences B - A), whether the samples are too few
  for the test to ever reach ALPHA, and how many slots would detect a 5%
  difference. Slots of one repeat share its conditions (the day, the
  neighbours, the burst bucket): when repeats differ, the test's z is deflated
  by the design effect 1 + (m - 1) x ICC (one-way ANOVA across repeats; the
  larger of the two sides), which keeps the false-positive rate near ALPHA
  (tests/unit/test_compare_stats.py measures it).
- `adjust`: Benjamini-Hochberg over every p-value shown
  (scipy.stats.false_discovery_control).
- `verdict`: a_better | b_better | no_difference | too_few_samples.

Imported lazily by `iofleet compare` and `iofleet report` only: never by the
agent (standard library only) or the Lambdas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

ALPHA = 0.05
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 4000
SEED = 12  # fixed: the same data always prints the same interval
TARGET_DIFFERENCE = 0.05  # the difference the power calculation sizes for (5%)
POWER = 0.8
MANN_WHITNEY_ARE = 3 / math.pi  # asymptotic efficiency vs the t test, normal data
POWER_METHOD = (
    "two-sample normal approximation (alpha 0.05 two-sided, power 0.8) on the pooled "
    "CV across slots, divided by the Mann-Whitney efficiency 3/pi, at least the smallest "
    "n whose exact Mann-Whitney test can reach alpha, times the repeats' design effect, "
    "rounded up once; repeats = slots / slots per repeat of the side with fewer, rounded up"
)
# The design effect is an ANOVA in doubles: a product or quotient that is a whole number
# exactly comes out a few units in the last place off (6 x 5/3 = 10.000000000000002).
# Within this relative distance of a whole number, it is that number before rounding.
WHOLE_TOLERANCE = 1e-9

Groups = Sequence[Any]
"""One sequence of slot values per repeat."""


@dataclass(frozen=True)
class Summary:
    n_slots: int
    n_repeats: int
    median: float
    mean: float
    cv: float | None  # std / mean across all slots (ddof 1); None below 2 slots
    cv_repeats: float | None  # CV of the repeat means; None below 2 repeats
    cv_within: float | None  # pooled within-repeat std / mean; None if no repeat has 2 slots
    repeats_p: float | None  # Kruskal-Wallis across repeats; None when not testable


@dataclass(frozen=True)
class Comparison:
    ratio: float | None  # mean B / mean A
    ci_low: float | None
    ci_high: float | None
    shift: float | None  # Hodges-Lehmann: median of all differences B - A, in the unit
    p_value: float | None  # Mann-Whitney U, two-sided; None when too few
    too_few: bool  # no outcome of the exact test could reach ALPHA with these n
    design_effect: float  # >= 1; how much the repeats' shared conditions shrink the sample
    slots_needed: int | None  # per side, to detect a TARGET_DIFFERENCE change
    repeats_needed: int | None  # at the sides' slots per repeat


def _arrays(groups: Groups) -> list[np.ndarray]:
    return [np.asarray(g, dtype=float) for g in groups if len(g)]


def _cv(values: np.ndarray) -> float | None:
    if values.size < 2:
        return None
    mean = float(np.mean(values))
    if mean == 0:
        return None
    return float(np.std(values, ddof=1) / abs(mean))


def repeats_test(groups: Groups) -> float | None:
    """Kruskal-Wallis p-value across repeats, or None when it cannot say anything.

    Needs at least two repeats with two or more slots each (a repeat of one slot
    has no within-repeat noise to compare the between-repeat spread with). When
    every value is identical the repeats agree: 1.0.
    """
    usable = [g for g in _arrays(groups) if g.size >= 2]
    if len(usable) < 2:
        return None
    pooled = np.concatenate(usable)
    if np.all(pooled == pooled[0]):
        return 1.0
    return float(stats.kruskal(*usable).pvalue)


def summarize(groups: Groups) -> Summary:
    with np.errstate(all="ignore"):  # overflow on absurd values gives inf, not a warning
        return _summarize(groups)


def _summarize(groups: Groups) -> Summary:
    arrays = _arrays(groups)
    if not arrays:
        raise ValueError("no values")
    pooled = np.concatenate(arrays)
    means = np.array([float(np.mean(g)) for g in arrays])
    within = [g for g in arrays if g.size >= 2]
    mean = float(np.mean(pooled))
    cv_within = None
    if within and mean != 0:
        dof = sum(g.size - 1 for g in within)
        pooled_var = sum(float(np.var(g, ddof=1)) * (g.size - 1) for g in within) / dof
        cv_within = math.sqrt(pooled_var) / abs(mean)
    return Summary(
        n_slots=int(pooled.size),
        n_repeats=len(arrays),
        median=float(np.median(pooled)),
        mean=mean,
        cv=_cv(pooled),
        cv_repeats=_cv(means) if len(arrays) >= 2 else None,
        cv_within=cv_within,
        repeats_p=repeats_test(arrays),
    )


def bootstrap_means(
    groups: Groups, rng: np.random.Generator, resamples: int = BOOTSTRAP_RESAMPLES
) -> np.ndarray:
    """`resamples` two-stage bootstrap means of the pooled slot values.

    Stage 1 draws as many repeats as there are, with replacement; stage 2 draws,
    within each drawn repeat, as many slots as it has, with replacement. With a
    single repeat this is the ordinary bootstrap over slots.
    """
    arrays = _arrays(groups)
    k = len(arrays)
    lengths = np.array([g.size for g in arrays])
    width = int(lengths.max())
    padded = np.zeros((k, width))
    for i, g in enumerate(arrays):
        padded[i, : g.size] = g
    out = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(1, k * width))
    for start in range(0, resamples, chunk):
        n = min(chunk, resamples - start)
        chosen = rng.integers(0, k, size=(n, k)) if k > 1 else np.zeros((n, 1), dtype=int)
        length = lengths[chosen]  # (n, k)
        picks = np.floor(rng.random((n, k, width)) * length[..., None]).astype(int)
        values = padded[chosen[..., None], picks]
        mask = np.arange(width)[None, None, :] < length[..., None]
        out[start : start + n] = (values * mask).sum(axis=(1, 2)) / length.sum(axis=1)
    return out


def design_effect(groups: Groups) -> float:
    """1 + (m0 - 1) x ICC for slots clustered in repeats (1.0 with one repeat).

    ICC = s_b^2 / (s_b^2 + MSW) with s_b^2 = max(0, (MSB - MSW) / m0), the
    one-way random-effects ANOVA estimator; m0 the ANOVA's effective group size.
    """
    arrays = _arrays(groups)
    k = len(arrays)
    n = sum(g.size for g in arrays)
    if k < 2 or n <= k:
        return 1.0
    grand = float(np.mean(np.concatenate(arrays)))
    ssb = sum(g.size * (float(np.mean(g)) - grand) ** 2 for g in arrays)
    ssw = sum(float(np.sum((g - np.mean(g)) ** 2)) for g in arrays)
    msb, msw = ssb / (k - 1), ssw / (n - k)
    m0 = (n - sum(g.size**2 for g in arrays) / n) / (k - 1)
    s_b = max(0.0, (msb - msw) / m0)
    if s_b == 0:
        return 1.0
    icc = s_b / (s_b + msw)
    return 1.0 + (m0 - 1) * icc


def min_attainable_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney test can give (no ties).
    Integer division, correctly rounded: C(1030, 515) is beyond a double, 2 / it is not."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def _whole(x: float) -> int | None:
    """The whole number `x` is, within WHOLE_TOLERANCE (relative); else None."""
    nearest = round(x)
    return nearest if abs(x - nearest) <= WHOLE_TOLERANCE * max(1.0, abs(x)) else None


def ceil_whole(x: float) -> int:
    """math.ceil, where `x` a hair above a whole number (float error) is that number."""
    whole = _whole(x)
    return whole if whole is not None else math.ceil(x)


def floor_whole(x: float) -> int:
    """math.floor, where `x` a hair below a whole number (float error) is that number."""
    whole = _whole(x)
    return whole if whole is not None else math.floor(x)


def hodges_lehmann(a: np.ndarray, b: np.ndarray) -> float:
    """Median of all pairwise differences b_j - a_i (the shift B - A)."""
    return float(np.median(np.subtract.outer(b, a)))


def slots_needed(cv: float | None, deff: float = 1.0) -> int | None:
    """Slots per side for a two-sided test at ALPHA to detect a TARGET_DIFFERENCE
    change of the mean with POWER, given the CV across slots and the repeats' design
    effect (POWER_METHOD): max(smallest, n_t / ARE) x deff, rounded up once."""
    if cv is None or not math.isfinite(cv):
        return None
    smallest = 2
    while min_attainable_p(smallest, smallest) > ALPHA:
        smallest += 1
    n = float(smallest)
    if cv != 0:
        z = stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER)
        n_t = 2 * (z * cv / TARGET_DIFFERENCE) ** 2
        n = max(n, n_t / MANN_WHITNEY_ARE)
    product = n * deff
    if not math.isfinite(product):
        return None
    return ceil_whole(product)


def repeats_needed(needed: int, sizes: Sequence[tuple[int, int]]) -> int:
    """Repeats for `needed` slots a side at each side's slots per repeat: (slots,
    repeats) per side; the side with fewer slots per repeat needs the most. Integers."""
    return max(-(-needed * repeats // slots) for slots, repeats in sizes)


def compare(a: Groups, b: Groups, rng: np.random.Generator | None = None) -> Comparison:
    """Side B against side A (see the module docstring)."""
    with np.errstate(all="ignore"):  # overflow on absurd values gives inf, not a warning
        return _compare(a, b, rng)


def _compare(a: Groups, b: Groups, rng: np.random.Generator | None) -> Comparison:
    rng = rng if rng is not None else np.random.default_rng(SEED)
    arrays_a, arrays_b = _arrays(a), _arrays(b)
    if not arrays_a or not arrays_b:
        raise ValueError("both sides need values")
    pooled_a, pooled_b = np.concatenate(arrays_a), np.concatenate(arrays_b)
    mean_a, mean_b = float(np.mean(pooled_a)), float(np.mean(pooled_b))
    ratio = mean_b / mean_a if mean_a != 0 else None
    ci_low = ci_high = None
    if ratio is not None:
        boot_a = bootstrap_means(arrays_a, rng)
        boot_b = bootstrap_means(arrays_b, rng)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = boot_b / boot_a
        ratios = ratios[np.isfinite(ratios)]
        if ratios.size:
            tail = (1 - CONFIDENCE) / 2 * 100
            ci_low, ci_high = (float(x) for x in np.percentile(ratios, [tail, 100 - tail]))
    # Slots of one repeat share that repeat's conditions, so they are not
    # independent draws: the rank test's z is deflated by the larger side's design
    # effect 1 + (m - 1) x ICC (ICC from a one-way ANOVA across repeats), and the
    # samples count as n / design effect for the too-few rule.
    deff = max(design_effect(arrays_a), design_effect(arrays_b))
    n_a_eff, n_b_eff = pooled_a.size / deff, pooled_b.size / deff
    too_few = min_attainable_p(floor_whole(n_a_eff), floor_whole(n_b_eff)) > ALPHA
    p_value = None
    if not too_few:
        both = np.concatenate([pooled_a, pooled_b])
        if np.all(both == both[0]):
            p_value = 1.0
        else:
            p_raw = float(
                stats.mannwhitneyu(
                    pooled_b, pooled_a, alternative="two-sided", method="asymptotic"
                ).pvalue
                if deff > 1
                else stats.mannwhitneyu(pooled_b, pooled_a, alternative="two-sided").pvalue
            )
            if deff > 1:
                z = stats.norm.isf(p_raw / 2) / math.sqrt(deff)
                p_raw = float(2 * stats.norm.sf(z))
            p_value = min(1.0, p_raw)
    cvs = [c for c in (_cv(pooled_a), _cv(pooled_b)) if c is not None]
    cv = math.sqrt(sum(c * c for c in cvs) / len(cvs)) if cvs else None
    needed = slots_needed(cv, deff)
    sizes = [(pooled_a.size, len(arrays_a)), (pooled_b.size, len(arrays_b))]
    return Comparison(
        ratio=ratio,
        ci_low=ci_low,
        ci_high=ci_high,
        shift=hodges_lehmann(pooled_a, pooled_b),
        p_value=p_value,
        too_few=too_few,
        design_effect=deff,
        slots_needed=needed,
        repeats_needed=repeats_needed(needed, sizes) if needed is not None else None,
    )


def adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values; None stays None (not a test)."""
    present = [i for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    if present:
        adjusted = stats.false_discovery_control([p_values[i] for i in present], method="bh")
        for i, q in zip(present, np.atleast_1d(adjusted), strict=True):
            out[i] = float(q)
    return out


def verdict(comp: Comparison, p_adjusted: float | None, higher_is_better: bool) -> str:
    """a_better | b_better | no_difference | too_few_samples.

    A difference needs all three to agree: the adjusted Mann-Whitney p-value
    below ALPHA, the ratio's interval excluding 1, and the Hodges-Lehmann shift
    pointing the same way (when A's mean is 0 there is no ratio: the p-value
    and the shift decide).
    """
    if comp.too_few:
        return "too_few_samples"
    if p_adjusted is None or p_adjusted >= ALPHA:
        return "no_difference"
    if comp.ratio is None:  # A's mean is 0: no ratio, the test and the shift decide
        if not comp.shift:
            return "no_difference"
        b_higher = comp.shift > 0
    elif comp.ci_low is None or comp.ci_high is None:
        return "no_difference"
    elif comp.ci_low > 1 and (comp.shift or 0) > 0:
        b_higher = True
    elif comp.ci_high < 1 and (comp.shift or 0) < 0:
        b_higher = False
    else:
        return "no_difference"
    return "b_better" if b_higher == higher_is_better else "a_better"
