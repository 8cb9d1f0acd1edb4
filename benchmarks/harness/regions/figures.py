"""Numbers and verdicts in words, as every region writes them: intervals, verdicts, seeds, budgets, pending notes."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.paired import MIN_PAIRS, SHORT_RUN_SECONDS, enough_pairs

#: How every ``learn()`` speed ratio is labelled, on every page (the median over the repetitions of PPO's time over
#: XPPO's in the same pair; speed.json's ``ratio_paired``)
MEDIAN_PAIRED = "median paired"


def ratio_with_spread(found: dict[str, Any] | None, seconds: float) -> str:
    """
    ``"1.27x [1.10, 1.30]"``: a paired ratio (``harness/paired.py``'s ``paired_ratio``) with its 95% interval. A page
    quotes no ratio that rests on fewer pairs than runs of its length need (``MIN_PAIRS``) or that has no interval.

    :param found: the result file's ``{"median", "interval", "pairs"}``
    :param seconds: how long one run of the ratio lasts (its runs are short or long)
    :raises ValueError: naming the missing interval or the pairs short
    """
    if not found or "interval" not in found or "pairs" not in found:
        raise ValueError(f"a quoted ratio needs its pairs and its interval in the result file, got {found!r}")
    if not enough_pairs(found, seconds):
        needed = MIN_PAIRS["short" if seconds < SHORT_RUN_SECONDS else "long"]
        raise ValueError(f"a ratio of runs of {seconds:.0f} s needs {needed} pairs, this one has {len(found['pairs'])}")
    low, high = found["interval"]
    return f"{found['median']:.2f}x [{low:.2f}, {high:.2f}]"


def interval(row: dict[str, Any], metric: str, decimals: int = 1) -> str:
    """``"iqm [low, high]"`` of a summary row's ``final`` or ``curve`` IQM; the IQM alone where one seed gives no spread."""
    low, high = row[f"{metric}_iqm_ci"]
    if len(row["seeds"]) == 1:
        return f"{row[f'{metric}_iqm']:.{decimals}f}"
    return f"{row[f'{metric}_iqm']:.{decimals}f} [{low:.{decimals}f}, {high:.{decimals}f}]"


def verdict(row: dict[str, Any], base: dict[str, Any], metric: str) -> str:
    """``"ahead"`` or ``"behind"`` when the 95% CIs of ``metric`` are apart, else ``"level"``."""
    (low, high), (base_low, base_high) = row[f"{metric}_iqm_ci"], base[f"{metric}_iqm_ci"]
    if low > base_high:
        return "ahead"
    if high < base_low:
        return "behind"
    return "level"


def steps(row: dict[str, Any], reached: bool = True) -> str:
    """Median steps to the threshold over the seeds that reached it (``"22.5k"``), and how many did."""
    median = row["median_steps_to_threshold"]
    count = f" ({row['reached']}/{len(row['seeds'])})" if reached else ""
    return (f"{median / 1000:g}k" if median is not None else "-") + count


def seeds(values: list[int]) -> str:
    """``[10, 11, ..., 19]`` as ``"10-19"`` (a run of consecutive seeds), else the list."""
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(map(str, values))


def tally(found: list[tuple[str, int, dict[str, Any], dict[str, Any]]], metric: str) -> dict[str, list[str]]:
    """The envs where the contender is ahead, level or behind PPO on ``metric``."""
    counts: dict[str, list[str]] = dict(ahead=[], level=[], behind=[])
    for env_id, _, row, base in found:
        counts[verdict(row, base, metric)].append(env_id)
    return counts


def said(counts: dict[str, list[str]], total: int, names: bool = True) -> str:
    """``"ahead on 3 of 6 (A, B, C), level on 3"``: the verdicts of :func:`tally` in words."""
    parts = []
    for word in ("ahead", "level", "behind"):
        envs = counts[word]
        if envs:
            listed = f" ({', '.join(envs)})" if names and word != "level" else ""
            parts.append(f"{word} on {len(envs)} of {total}{listed}")
    return ", ".join(parts)


def budget(value: int) -> str:
    return f"{value / 1e6:g}M" if value >= 1e6 else f"{value / 1e3:g}k"


def dash(value: float | None) -> str:
    """A step count (``"12,288"``), or ``"-"`` where none was reached."""
    return "-" if value is None else f"{value:,.0f}"


def cell(text: str) -> str:
    """Free text (a campaign's question) as one markdown table cell: its pipes escaped, so that ``|r - 1|`` stays text."""
    return text.replace("|", "\\|")


def table_with_pending(lines: list[str], pending: list[str], empty: str, lead: str = "Not finished") -> str:
    """A comparison table (``lines``, its header first) or ``empty`` when it has no row, then what is still running."""
    text = "\n".join(lines) if len(lines) > 2 else empty
    if pending:
        text += f"\n\n{lead} (the run cache keeps the runs done so far): " + "; ".join(pending) + "."
    return text


#: The words of :func:`seed_robust_verdict`: a sign that the test and every drop-one-seed subset carry, "level" (no
#: difference the test can tell), or "inconclusive" (a difference that dropping one seed takes away)
ROBUST_VERDICTS = ("ahead", "behind", "level", "inconclusive")
#: The level of :func:`seed_robust_verdict`'s rank test (two-sided)
RANK_TEST_LEVEL = 0.05


def iqm_difference(values: list[float], base: list[float], reps: int = 5000, seed: int = 0) -> tuple[float, float, float]:
    """
    ``IQM(values) - IQM(base)`` with a 95% percentile bootstrap interval (scipy's), each sample resampled on its own
    (the seeds of two contenders are independent runs). The IQM is the mean of the middle half (rliable's).

    :return: ``(difference, low, high)``
    """
    from scipy import stats

    def iqm(sample: Any, axis: int = -1) -> Any:
        return stats.trim_mean(sample, 0.25, axis=axis)

    found = stats.bootstrap(
        (np.asarray(values, dtype=float), np.asarray(base, dtype=float)),
        lambda a, b, axis: iqm(a, axis) - iqm(b, axis),
        n_resamples=reps,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    low, high = found.confidence_interval
    return float(iqm(np.asarray(values)) - iqm(np.asarray(base))), float(low), float(high)


def rank_side(values: list[float], base: list[float]) -> tuple[str, float]:
    """
    The exact two-sided Mann-Whitney U test of two contenders' per-seed values (scipy's): "ahead" or "behind" (the
    side of the larger mean rank) where ``p < RANK_TEST_LEVEL``, else "level". Exact at any number of seeds, where a
    percentile bootstrap interval of 4 or 5 seeds is too narrow to hold its level.

    :return: the side and the p-value
    """
    from scipy import stats

    found = stats.mannwhitneyu(values, base, alternative="two-sided", method="exact")
    if found.pvalue >= RANK_TEST_LEVEL:
        return "level", float(found.pvalue)
    return ("ahead" if found.statistic > len(values) * len(base) / 2 else "behind"), float(found.pvalue)


def seed_robust_verdict(values: dict[int, float], base: dict[int, float], reps: int = 5000) -> dict[str, Any]:
    """
    A contender against a baseline over seeds, said only as far as its data carries it: the exact rank test
    (:func:`rank_side`) with every seed, and again without each seed that both ran (that seed's run of both dropped).
    "ahead" / "behind" needs the test's side with every seed and without any one of them; a side with every seed that
    dropping one seed takes away is "inconclusive" (one seed carries the difference); no side is "level". The IQM
    difference and its bootstrap interval (:func:`iqm_difference`) say how large the difference is.

    :param values: the contender's per-seed values, by seed
    :param base: the baseline's, by seed
    :return: ``{"difference": [d, low, high], "p": p, "verdict": ..., "without": {seed: side}}``
    """
    side, p = rank_side(list(values.values()), list(base.values()))
    without = {}
    for seed in sorted(set(values) & set(base)):
        kept = [v for s, v in values.items() if s != seed], [v for s, v in base.items() if s != seed]
        without[seed] = rank_side(*kept)[0]
    if side != "level" and any(found != side for found in without.values()):
        side = "inconclusive"
    difference = iqm_difference(list(values.values()), list(base.values()), reps)
    return {"difference": list(difference), "p": p, "verdict": side, "without": without}
