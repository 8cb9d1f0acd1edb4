"""
The reward groups' options (multi-critic: ``reward_groups`` and the options that read it, docs/guide/multi_critic.md)
checked, and how the groups' value losses are weighted (:func:`resolve_group_value_weights`). The options table
(:mod:`sb3_xppo.common.options`) calls these checks in its declared order.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sb3_xppo.functional.advantages import REDUCES

#: ``group_value_weights`` by name (a list of ``G`` weights is the third form)
GROUP_VALUE_WEIGHTS = ("equal", "squared")
#: ``group_gradients``: how the actor's gradient of several reward groups is formed (None: from the combined advantages)
GROUP_GRADIENTS = (None, "pcgrad")
#: the ``group_reduce`` values that are a weighted sum of the groups' advantages, which ``group_gradients`` splits
LINEAR_GROUP_REDUCES = ("mean", "sum")


def check_reward_groups(reward_groups: Any, checked: Mapping[str, Any]) -> list[str] | None:
    """
    :param reward_groups: None (one critic), the number of groups ``G >= 1``, or their names (distinct strings)
    :param checked: the options checked before
    :return: the group names (the indices as strings when only ``G`` is given), or None
    """
    if reward_groups is None:
        return None
    if isinstance(reward_groups, (int, np.integer)) and not isinstance(reward_groups, bool):
        if reward_groups < 1:
            raise ValueError(f"reward_groups must be None, an int >= 1 or a list of group names, got {reward_groups!r}")
        return [str(i) for i in range(reward_groups)]
    if (
        isinstance(reward_groups, (list, tuple))
        and len(reward_groups) > 0
        and all(isinstance(name, str) and name for name in reward_groups)
    ):
        names = list(reward_groups)
        if len(set(names)) != len(names):
            raise ValueError(f"reward_groups names must be distinct, got {names}")
        return names
    raise ValueError(
        f"reward_groups must be None, an int >= 1 or a non-empty list of group names (strings), got {reward_groups!r}"
    )


def check_group_weights(group_weights: Any, checked: Mapping[str, Any]) -> list[float] | None:
    """
    :param group_weights: None (all groups weigh the same) or ``G`` finite weights >= 0, at least one > 0
    :param checked: the options checked before (``reward_groups``, as names)
    :return: the weights as a list of floats, or None
    """
    names = checked["reward_groups"]
    if group_weights is None:
        return None
    if names is None:
        raise ValueError("group_weights needs reward_groups (the number of reward groups or their names)")
    try:
        weights = np.asarray(group_weights, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"group_weights must be {len(names)} numbers >= 0, got {group_weights!r}") from error
    if weights.shape != (len(names),):
        raise ValueError(f"group_weights must have one weight per reward group ({len(names)}), got {group_weights!r}")
    if not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"group_weights must be finite and >= 0, with at least one > 0, got {group_weights!r}")
    return weights.tolist()


def check_group_reduce(group_reduce: Any, checked: Mapping[str, Any]) -> str | Callable:
    # read with reward groups only: without them the value is never used
    if checked["reward_groups"] is not None and not callable(group_reduce) and group_reduce not in REDUCES:
        raise ValueError(f"group_reduce must be one of {REDUCES} or a callable, got {group_reduce!r}")
    return group_reduce


def check_vector_reward_key(vector_reward_key: Any, checked: Mapping[str, Any]) -> str:
    # read with reward groups only: without them the value is never used
    if checked["reward_groups"] is not None and (not isinstance(vector_reward_key, str) or not vector_reward_key):
        raise ValueError(f"vector_reward_key must be a non-empty string (an info key), got {vector_reward_key!r}")
    return vector_reward_key


def check_group_value_weights(group_value_weights: Any, checked: Mapping[str, Any]) -> str | list[float] | None:
    if group_value_weights is None:
        return None
    names = checked["reward_groups"]
    if names is None:
        raise ValueError("group_value_weights needs reward_groups (the number of reward groups or their names)")
    group_value_weight_values(group_value_weights, checked["group_weights"], len(names))
    return group_value_weights if isinstance(group_value_weights, str) else [float(w) for w in group_value_weights]


def check_group_gradients(group_gradients: Any, checked: Mapping[str, Any]) -> str | None:
    """
    :param group_gradients: None, or ``'pcgrad'`` (PCGrad, Yu et al. 2020, arXiv:2001.06782): one actor loss per
        reward group, whose gradients are projected off each other where they conflict before they are summed
    :param checked: the options checked before (``reward_groups``, ``group_reduce``)
    :return: the value
    """
    if group_gradients is None:
        return None
    if group_gradients not in GROUP_GRADIENTS:
        raise ValueError(f"group_gradients must be one of {GROUP_GRADIENTS}, got {group_gradients!r}")
    if checked["reward_groups"] is None:
        raise ValueError(
            "group_gradients='pcgrad' needs reward_groups (the number of reward groups or their names): it splits the "
            "actor's loss by group"
        )
    if callable(checked["group_reduce"]) or checked["group_reduce"] not in LINEAR_GROUP_REDUCES:
        raise ValueError(
            f"group_gradients='pcgrad' needs group_reduce in {LINEAR_GROUP_REDUCES}, got {checked['group_reduce']!r}: "
            "each group's actor loss takes that group's term of the combined advantage, and only a weighted sum (or "
            "mean) of the groups' advantages is a sum of such terms"
        )
    return group_gradients


def resolve_group_value_weights(
    spec: str | Sequence[float] | None, group_weights: Sequence[float] | None, n_groups: int, scalarize: bool
) -> list[float] | None:
    """
    The weights of the groups' value losses (``XPPO.group_value_weights``) in the sum the critics minimize.

    ``"squared"`` gives group ``g`` the weight ``w_g ** 2`` (``group_weights``, all 1 when None): the critics' loss in
    the scalar reward's units. In "scalarize" mode (``normalize_groups=False``) the actor's advantages come from
    ``V = sum_g w_g V_g``, whose error is ``sum_g w_g e_g``; for independent errors its expected square is
    ``sum_g w_g^2 E[e_g^2]``, so each critic's error counts as much as it moves ``V``, and a term of small weight but
    large raw scale (a fuel cost) no longer dominates the critics' loss. ``"equal"`` weighs every group 1.

    :param spec: None (the mode's default: ``"squared"`` where ``scalarize``, else ``"equal"``), ``"equal"``,
        ``"squared"``, or ``n_groups`` finite weights >= 0, at least one > 0
    :param group_weights: the model's group weights (or None)
    :param n_groups: the number of reward groups
    :param scalarize: the model's groups are combined raw (``normalize_groups=False``) and its value losses are in
        return units (``normalize_values=False``): the mode whose default is ``"squared"``
    :return: the weights, or None where they are all 1 (the plain sum)
    """
    if spec is None:
        spec = "squared" if scalarize else "equal"
    return group_value_weight_values(spec, group_weights, n_groups)


def group_value_weight_values(
    spec: str | Sequence[float], group_weights: Sequence[float] | None, n_groups: int
) -> list[float] | None:
    """
    :param spec: ``"equal"``, ``"squared"`` or ``n_groups`` finite weights >= 0, at least one > 0
    :param group_weights: the model's group weights (or None)
    :param n_groups: the number of reward groups
    :return: the weights, or None where they are all 1 (the plain sum)
    :raises ValueError: for any other ``spec``
    """
    error = (
        f"group_value_weights must be None, one of {GROUP_VALUE_WEIGHTS} or one finite weight >= 0 per reward group "
        f"({n_groups}), at least one > 0, got {spec!r}"
    )
    if isinstance(spec, str):
        if spec not in GROUP_VALUE_WEIGHTS:
            raise ValueError(error)
        if spec == "equal" or group_weights is None:
            return None
        weights = np.asarray(group_weights, dtype=np.float64) ** 2
    else:
        try:
            weights = np.asarray(spec, dtype=np.float64)
        except (TypeError, ValueError) as exception:
            raise ValueError(error) from exception
        if weights.shape != (n_groups,) or not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
            raise ValueError(error)
    return None if (weights == 1.0).all() else weights.tolist()


def check_no_reward_groups(reward_groups: Any, checked: Mapping[str, Any]) -> None:
    if reward_groups is not None:
        raise ValueError(
            "reward_groups (multi-critic) is not available with recurrent policies yet: the LSTM policies have one "
            "value output. Use XPPO or MaskableXPPO for several critics."
        )
    return None
