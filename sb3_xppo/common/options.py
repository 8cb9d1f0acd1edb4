"""
Validation of XPPO's keywords, one style for all: ``check_*`` raises a ``ValueError`` naming the keyword and the
allowed values, at construction (before any env or network is built), and returns the value in its canonical form.
"""

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sb3_xppo.functional.advantages import REDUCES

ACTOR_LOSSES = ("clip", "spo", "asymmetric_spo")
VALUE_LOSSES = ("mse", "sb3", "clipped", "improved", "hl_gauss")
#: value losses that clip, and so need clip_range_vf (hl_gauss clips in scalar space when it is given)
CLIPPING_VALUE_LOSSES = ("sb3", "clipped", "improved")
ADVANTAGE_NORMALIZATIONS = ("minibatch", "rollout", False)


def check_xppo_options(
    *,
    clip_range: Any,
    clip_range_vf: Any,
    normalize_advantage: bool | str,
    actor_loss: str,
    value_loss: str | None,
    dual_clip: float | None,
    delightful: bool,
    delight_temp: float,
    log_ratio_clamp: float | tuple[float, float] | None,
    reward_groups: int | Sequence[str] | None,
    group_weights: Sequence[float] | None,
    group_reduce: str | Callable,
    normalize_groups: bool,
    vector_reward_key: str,
    normalize_values: bool = False,
    group_value_weights: str | Sequence[float] | None = None,
) -> dict[str, Any]:
    """
    Check every keyword XPPO adds to (or reads differently from) PPO's, as :class:`~sb3_xppo.XPPO` documents them.

    :return: the attributes to set on the model, in canonical form (``normalize_advantage`` as ``'minibatch'``,
        ``'rollout'`` or False, ``log_ratio_clamp`` as a pair, ``reward_groups`` as names, weights as floats)
    """
    check_clip_range(clip_range)
    check_clip_range_vf(clip_range_vf)
    check_choice("actor_loss", actor_loss, ACTOR_LOSSES)
    check_value_loss(value_loss, clip_range_vf)
    check_dual_clip(dual_clip, actor_loss)
    if not is_number(delight_temp) or delight_temp <= 0:
        raise ValueError(f"delight_temp must be a number > 0, got {delight_temp!r}")
    names, weights = check_group_options(reward_groups, group_weights, group_reduce, vector_reward_key)
    if not isinstance(normalize_values, (bool, np.bool_)):
        raise ValueError(f"normalize_values must be True or False, got {normalize_values!r}")
    if group_value_weights is not None:
        if names is None:
            raise ValueError("group_value_weights needs reward_groups (the number of reward groups or their names)")
        scalarize = not normalize_groups and not normalize_values
        resolve_group_value_weights(group_value_weights, weights, len(names), scalarize)
        if not isinstance(group_value_weights, str):
            group_value_weights = [float(w) for w in group_value_weights]
    return dict(
        normalize_advantage=check_normalize_advantage(normalize_advantage),
        actor_loss=actor_loss,
        value_loss=value_loss,
        dual_clip=dual_clip,
        delightful=bool(delightful),
        delight_temp=delight_temp,
        log_ratio_clamp=check_log_ratio_clamp(log_ratio_clamp),
        reward_groups=names,
        group_weights=weights,
        group_reduce=group_reduce,
        normalize_groups=bool(normalize_groups),
        vector_reward_key=vector_reward_key,
        normalize_values=bool(normalize_values),
        group_value_weights=group_value_weights,
    )


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def check_choice(name: str, value: Any, choices: tuple) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def resolve_value_loss(value_loss: str | None, clip_range_vf: Any) -> str:
    """
    PPO's meaning of ``clip_range_vf`` for ``value_loss=None``: ``'sb3'`` (PPO's value clipping) when it is set,
    ``'mse'`` (no clipping) otherwise. Used at construction and after ``load()``, where a PPO checkpoint has no
    ``value_loss`` but may have a ``clip_range_vf``.

    :param value_loss: None or a name of ``VALUE_LOSSES``
    :param clip_range_vf: the value clip range (None: no clipping)
    :return: the value loss's name
    """
    if value_loss is None:
        return "mse" if clip_range_vf is None else "sb3"
    return value_loss


def check_value_loss(value_loss: str | None, clip_range_vf: Any) -> None:
    if value_loss is None:
        return
    check_choice("value_loss", value_loss, VALUE_LOSSES)
    if value_loss in CLIPPING_VALUE_LOSSES and clip_range_vf is None:
        raise ValueError(
            f"value_loss={value_loss!r} clips the value function and needs clip_range_vf (a float > 0 or a schedule)"
        )
    if value_loss == "mse" and clip_range_vf is not None:
        warnings.warn(
            "clip_range_vf is ignored by value_loss='mse'; leave value_loss=None (or pass 'sb3') for PPO's value "
            "clipping, or 'clipped' / 'improved'"
        )


def check_dual_clip(dual_clip: Any, actor_loss: str) -> None:
    if dual_clip is None:
        return
    if not is_number(dual_clip) or dual_clip <= 1:
        raise ValueError(f"dual_clip must be None or a number > 1 (Ye et al. 2020), got {dual_clip!r}")
    if actor_loss != "clip":
        # SPO's objective r A - |A| (r - 1)^2 / (2 eps) falls below c A long before r reaches c, and the bound then
        # replaces it: at r = 2, A = -1, eps = 0.2, c = 3 the loss's gradient in r is 0 instead of 1 + 1 / 0.2 = 6
        raise ValueError(
            f"dual_clip cannot be combined with actor_loss={actor_loss!r}: for negative advantages the bound c * A "
            "becomes the active term long before the ratio reaches c and removes SPO's restoring gradient. "
            "Use dual_clip with actor_loss='clip', or SPO without dual_clip"
        )


def check_normalize_advantage(normalize_advantage: bool | str) -> str | bool:
    """True means 'minibatch' (PPO's); returns 'minibatch', 'rollout' or False."""
    if isinstance(normalize_advantage, (bool, np.bool_)):
        return "minibatch" if normalize_advantage else False
    if normalize_advantage not in ADVANTAGE_NORMALIZATIONS:
        raise ValueError(
            f"normalize_advantage must be one of {ADVANTAGE_NORMALIZATIONS} (True means 'minibatch'), "
            f"got {normalize_advantage!r}"
        )
    return normalize_advantage


def check_clip_fraction(name: str, value: Any) -> None:
    if callable(value):
        return
    if not is_number(value) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number in (0, 1) or a schedule (callable of progress_remaining), got {value!r}")


def check_clip_range(clip_range: Any) -> None:
    if isinstance(clip_range, (tuple, list)):
        if len(clip_range) != 2:
            raise ValueError(
                f"clip_range must be a float in (0, 1), a schedule or a (low, high) pair of those, got {clip_range!r}"
            )
        check_clip_fraction("clip_range (low)", clip_range[0])
        check_clip_fraction("clip_range (high)", clip_range[1])
    else:
        check_clip_fraction("clip_range", clip_range)


def check_clip_range_vf(clip_range_vf: Any) -> None:
    if clip_range_vf is None or callable(clip_range_vf):
        return
    if not is_number(clip_range_vf) or clip_range_vf <= 0:
        raise ValueError(f"clip_range_vf must be None (no value clipping), a number > 0 or a schedule, got {clip_range_vf!r}")


def check_log_ratio_clamp(log_ratio_clamp: Any) -> tuple[float, float] | None:
    if log_ratio_clamp is None:
        return None
    if is_number(log_ratio_clamp) and log_ratio_clamp > 0:
        return (-float(log_ratio_clamp), float(log_ratio_clamp))
    if (
        isinstance(log_ratio_clamp, (tuple, list))
        and len(log_ratio_clamp) == 2
        and all(is_number(c) for c in log_ratio_clamp)
        and log_ratio_clamp[0] < log_ratio_clamp[1]
    ):
        return (float(log_ratio_clamp[0]), float(log_ratio_clamp[1]))
    raise ValueError(
        "log_ratio_clamp must be None, a number c > 0 (clamp to (-c, c)) or a (low, high) pair with low < high, "
        f"got {log_ratio_clamp!r}"
    )


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


#: ``group_value_weights`` by name (a list of ``G`` weights is the third form)
GROUP_VALUE_WEIGHTS = ("equal", "squared")


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
    error = (
        f"group_value_weights must be None, one of {GROUP_VALUE_WEIGHTS} or one finite weight >= 0 per reward group "
        f"({n_groups}), at least one > 0, got {spec!r}"
    )
    if spec is None:
        spec = "squared" if scalarize else "equal"
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


def parent_keywords(parent: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """
    The parent algorithm's arguments after ``policy`` and ``env``, given positionally or by keyword, all as keywords
    (so that XPPO's subclass of, e.g., ``MaskablePPO`` takes them exactly as ``MaskablePPO`` does).

    :param parent: the SB3 algorithm (e.g. ``MaskablePPO``)
    :param args: positional arguments after ``env``
    :param kwargs: keyword arguments
    :return: keyword arguments
    :raises TypeError: as the parent would, for too many positional arguments or one given twice
    """
    names = list(inspect.signature(parent.__init__).parameters)[3:]  # after self, policy, env
    if len(args) > len(names):
        raise TypeError(f"{parent.__name__} takes at most {len(names) + 2} positional arguments, got {len(args) + 2}")
    twice = [name for name in names[: len(args)] if name in kwargs]
    if twice:
        raise TypeError(f"got multiple values for argument {twice[0]!r}")
    return {**dict(zip(names, args, strict=False)), **kwargs}


def ppo_keywords(parent: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """
    The PPO keywords XPPO reads differently (``clip_range``, ``clip_range_vf``, ``normalize_advantage``), as given in
    ``kwargs`` or else the parent algorithm's defaults, for :func:`~sb3_xppo.common.options.check_xppo_options`.

    :param parent: the SB3 algorithm (e.g. ``MaskablePPO``) whose other keywords pass through ``kwargs``
    :param kwargs: the keywords given
    :return: the three keywords' values
    """
    signature = inspect.signature(parent.__init__)
    names = ("clip_range", "clip_range_vf", "normalize_advantage")
    return {name: kwargs.get(name, signature.parameters[name].default) for name in names}
