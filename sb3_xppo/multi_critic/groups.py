"""Validation of the multi-critic options of :class:`sb3_xppo.XPPO` (reward groups, their weights and reduce)."""

from collections.abc import Callable, Sequence

import numpy as np

from sb3_xppo.functional.advantages import REDUCES


def check_group_options(
    reward_groups: int | Sequence[str] | None,
    group_weights: Sequence[float] | None,
    group_reduce: str | Callable,
    vector_reward_key: str,
) -> tuple[list[str] | None, list[float] | None]:
    """
    Check the multi-critic keywords of :class:`sb3_xppo.XPPO` at construction.

    :param reward_groups: None (one critic), the number of groups ``G >= 1``, or their names (distinct strings)
    :param group_weights: None (all groups weigh the same) or ``G`` finite weights >= 0, at least one > 0
    :param group_reduce: ``'mean'``, ``'sum'``, ``'max'``, ``'min'`` or a callable, see
        :func:`sb3_xppo.functional.combine_grouped_advantages`
    :param vector_reward_key: the info key holding each step's reward vector, a non-empty string
    :return: the group names (the indices as strings when only ``G`` is given; None without groups) and the weights
        as a list of floats (or None)
    """
    if reward_groups is None:
        if group_weights is not None:
            raise ValueError("group_weights needs reward_groups (the number of reward groups or their names)")
        return None, None
    if isinstance(reward_groups, (int, np.integer)) and not isinstance(reward_groups, bool):
        if reward_groups < 1:
            raise ValueError(f"reward_groups must be None, an int >= 1 or a list of group names, got {reward_groups!r}")
        names = [str(i) for i in range(reward_groups)]
    elif (
        isinstance(reward_groups, (list, tuple))
        and len(reward_groups) > 0
        and all(isinstance(name, str) and name for name in reward_groups)
    ):
        names = list(reward_groups)
        if len(set(names)) != len(names):
            raise ValueError(f"reward_groups names must be distinct, got {names}")
    else:
        raise ValueError(
            f"reward_groups must be None, an int >= 1 or a non-empty list of group names (strings), got {reward_groups!r}"
        )
    if not callable(group_reduce) and group_reduce not in REDUCES:
        raise ValueError(f"group_reduce must be one of {REDUCES} or a callable, got {group_reduce!r}")
    if not isinstance(vector_reward_key, str) or not vector_reward_key:
        raise ValueError(f"vector_reward_key must be a non-empty string (an info key), got {vector_reward_key!r}")
    if group_weights is None:
        return names, None
    try:
        weights = np.asarray(group_weights, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"group_weights must be {len(names)} numbers >= 0, got {group_weights!r}") from error
    if weights.shape != (len(names),):
        raise ValueError(f"group_weights must have one weight per reward group ({len(names)}), got {group_weights!r}")
    if not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"group_weights must be finite and >= 0, with at least one > 0, got {group_weights!r}")
    return names, weights.tolist()
