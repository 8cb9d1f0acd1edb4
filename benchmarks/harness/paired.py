"""
Paired ratios with their spread: every speed ratio a page quotes is the median of per-pair ratios (PPO's seconds over
XPPO's in the same repetition, or to the same goal), given with a 95% bootstrap interval of that median and the pairs
themselves, so that a reader sees how far one pair may go the other way.

- :func:`paired_ratio`: the median, its interval (scipy's percentile bootstrap), and the pairs;
  :func:`paired_times`: the same of two sides' seconds, repetition by repetition.
- :func:`pace`: "faster" / "slower" only where the interval is clear of 1, else "level".
- :data:`MIN_PAIRS`: how many pairs a quoted ratio needs (9 where a run lasts seconds).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

#: The fewest pairs a quoted ratio rests on: runs of minutes, runs of seconds (cheap to repeat, and noisier)
MIN_PAIRS = {"long": 5, "short": 9}
#: A run shorter than this many seconds is a short one (:data:`MIN_PAIRS`)
SHORT_RUN_SECONDS = 60.0


def paired_ratio(ratios: list[float], reps: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """
    :param ratios: one ratio per pair (PPO's seconds / XPPO's: above 1, XPPO is faster)
    :return: ``{"median", "interval": [low, high], "pairs": ratios}``: the median and its 95% percentile bootstrap
        interval (``[median, median]`` for a single pair)
    """
    if not ratios:
        raise ValueError("a paired ratio needs at least one pair")
    median = float(statistics.median(ratios))
    if len(ratios) == 1:
        return {"median": median, "interval": [median, median], "pairs": [float(r) for r in ratios]}
    from scipy import stats

    found = stats.bootstrap(
        (np.asarray(ratios, dtype=float),), np.median, n_resamples=reps, method="percentile", rng=np.random.default_rng(seed)
    )
    low, high = found.confidence_interval
    return {"median": median, "interval": [float(low), float(high)], "pairs": [float(r) for r in ratios]}


def paired_times(over: Sequence[float], under: Sequence[float]) -> dict[str, Any]:
    """
    :func:`paired_ratio` of ``over[i] / under[i]``: two sides' seconds in the same repetitions (PPO's over XPPO's, a
    speed ratio; a variant's over the reference's, a time ratio).
    """
    return paired_ratio([a / b for a, b in zip(over, under, strict=True)])


def pace(found: dict[str, Any]) -> str:
    """ "faster" where the interval of :func:`paired_ratio` is above 1, "slower" below, else "level"."""
    low, high = found["interval"]
    return "faster" if low > 1 else "slower" if high < 1 else "level"


def enough_pairs(found: dict[str, Any], seconds: float) -> bool:
    """Whether ``found`` has the pairs :data:`MIN_PAIRS` asks of runs that last ``seconds``."""
    return len(found["pairs"]) >= MIN_PAIRS["short" if seconds < SHORT_RUN_SECONDS else "long"]
