"""Clip-range schedules: a float, a schedule, or a decoupled ``(low, high)`` pair of those (Zhou et al. 2025)."""

from typing import Any, NamedTuple

from stable_baselines3.common.type_aliases import Schedule
from stable_baselines3.common.utils import FloatSchedule


class ClipRange(NamedTuple):
    """A decoupled clip range: the ratio is clipped to ``[1 - low, 1 + high]`` (Zhou et al. 2025)."""

    low: float
    high: float

    def __float__(self) -> float:
        # Reached when stock PPO loads an XPPO checkpoint trained with a (low, high) clip range and trains it
        raise TypeError("a (low, high) clip_range is an XPPO feature: load this checkpoint with sb3_xppo.XPPO, not PPO")


class ClipRangePair:
    """
    Schedule of a decoupled clip range: ``progress_remaining -> ClipRange(low, high)``.

    :param low: lower clip range, a float in (0, 1) or a schedule (a picklable callable of ``progress_remaining``)
    :param high: upper clip range, the same
    """

    def __init__(self, low: float | Schedule, high: float | Schedule) -> None:
        self.low = FloatSchedule(low)
        self.high = FloatSchedule(high)

    def __call__(self, progress_remaining: float) -> ClipRange:
        return ClipRange(self.low(progress_remaining), self.high(progress_remaining))

    def __repr__(self) -> str:
        return f"ClipRangePair(low={self.low}, high={self.high})"


def as_clip_schedule(clip_range: Any) -> Any:
    """
    A ``(low, high)`` pair (a list, after a checkpoint's JSON) becomes a :class:`ClipRangePair`; anything else is
    left for the parent algorithm to wrap in ``FloatSchedule``.

    :param clip_range: the ``clip_range`` keyword or attribute
    :return: the clip range to hand to the parent's ``_setup_model``
    """
    return ClipRangePair(*clip_range) if isinstance(clip_range, (tuple, list)) else clip_range


def unwrap_clip_schedule(clip_range: Any) -> Any:
    """
    The parent's ``_setup_model`` wraps every clip range in ``FloatSchedule``, which would turn a pair into a float:
    a :class:`ClipRangePair` is taken out of it again.

    :param clip_range: the clip range after the parent's ``_setup_model``
    :return: a ``FloatSchedule`` or a :class:`ClipRangePair`
    """
    if isinstance(clip_range, FloatSchedule) and isinstance(clip_range.value_schedule, ClipRangePair):
        return clip_range.value_schedule
    return clip_range


def starting_clip_ranges(clip_range: Any) -> list[float]:
    """
    :param clip_range: a float, a schedule, a ``(low, high)`` pair of those, or a schedule of pairs
    :return: the clip ranges at the start of training (``progress_remaining = 1``)
    """
    value = clip_range(1.0) if callable(clip_range) else clip_range
    values = value if isinstance(value, (tuple, list)) else [value]
    return [float(v(1.0) if callable(v) else v) for v in values]
