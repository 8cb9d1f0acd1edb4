"""
The KL-adaptive learning rate of ``adaptive_kl``: the rule of the robotics PPO stacks (rsl_rl, Rudin et al. 2022,
Learning to Walk in Minutes Using Massively Parallel Deep RL, https://arxiv.org/abs/2109.11978; skrl's
``KLAdaptiveLR``; Sample Factory's ``kl_adaptive_epoch``; sbx), applied by XPPO's ``train()`` after each epoch to
the epoch's mean approximate KL. A pure function for the rule, one for the epoch's KL, and the check of the keyword.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch as th

from sb3_xppo.common.minibatch_stats import minibatch_means
from sb3_xppo.loading.literals import python_literal

#: the rule's parameters and their defaults (rsl_rl's: ``desired_kl=0.01``, the factor 1.5, lr in [1e-5, 1e-2])
ADAPTIVE_KL_DEFAULTS: dict[str, float] = {"target": 0.01, "factor": 1.5, "lr_min": 1e-5, "lr_max": 1e-2}


def adapt_learning_rate(lr: float, kl: float, target: float, factor: float, lr_min: float, lr_max: float) -> float:
    """
    One step of the KL-adaptive rule: the learning rate divided by ``factor`` when ``kl > 2 * target``, multiplied
    by it when ``kl < target / 2``, unchanged in between (and for a NaN ``kl``), then clamped to
    ``[lr_min, lr_max]`` (rsl_rl, Rudin et al. 2022).

    :param lr: the current learning rate
    :param kl: the mean approximate KL the policy moved by
    :param target: the KL aimed at, ``d``
    :param factor: ``f > 1``
    :param lr_min: the smallest learning rate
    :param lr_max: the largest learning rate
    :return: the next learning rate
    """
    if kl > 2 * target:
        lr = lr / factor
    elif kl < target / 2:
        lr = lr * factor
    return float(min(max(lr, lr_min), lr_max))


def mean_approx_kl(log_ratios: Sequence[th.Tensor], valid: Sequence[th.Tensor | None]) -> float:
    """
    The mean over minibatches of each minibatch's approximate KL, PPO's ``mean((exp(x) - 1) - x)`` over its valid
    samples (``x = log_prob - old_log_prob``): for the epoch's minibatches, the value ``train/approx_kl`` logs for
    the last epoch. One copy to the host.

    :param log_ratios: each minibatch's ``log_prob - old_log_prob``
    :param valid: each minibatch's valid samples (None: all)
    :return: the mean approximate KL
    """
    with th.no_grad():
        log_ratio = th.cat(list(log_ratios))
        kl = (th.exp(log_ratio) - 1) - log_ratio
    return float(minibatch_means(kl[None], [len(x) for x in log_ratios], valid)[0].mean())


def starting_learning_rate(current: float | None, lr_schedule: Callable[[float], float], rule: Mapping[str, float]) -> float:
    """
    The learning rate a ``train()`` call starts from: the rule's current one, or before the first update the
    schedule's value at progress 1 (the model's ``learning_rate``); clamped to ``[lr_min, lr_max]``.

    :param current: the rule's learning rate (the model's ``adaptive_kl_lr``), None before the first update
    :param lr_schedule: the model's learning-rate schedule
    :param rule: the canonical ``adaptive_kl``
    """
    lr = float(lr_schedule(1.0)) if current is None else current
    return float(min(max(lr, rule["lr_min"]), rule["lr_max"]))


def warn_if_schedule_ignored(learning_rate: float | Callable[[float], float]) -> None:
    """
    Warn when a learning-rate schedule is not constant: with ``adaptive_kl`` it gives the starting value only.

    :param learning_rate: the model's ``learning_rate`` (a number or a schedule of the progress remaining)
    """
    if callable(learning_rate) and float(learning_rate(0.0)) != float(learning_rate(1.0)):
        warnings.warn(
            f"adaptive_kl: the learning-rate schedule gives the starting learning rate only (its value at progress 1, "
            f"{float(learning_rate(1.0)):g}); after that the KL-adaptive rule sets it",
            stacklevel=4,
        )


def check_adaptive_kl(adaptive_kl: Any) -> dict[str, float] | None:
    """
    ``adaptive_kl`` in canonical form.

    :param adaptive_kl: None or False (off), True (the defaults, :data:`ADAPTIVE_KL_DEFAULTS`), a target ``d > 0``,
        or a dict of ``target``, ``factor``, ``lr_min``, ``lr_max`` (the others at their defaults), also as the
        string of one, ``"dict(target=0.01)"`` or ``"{'target': 0.01}"`` (rl-zoo3 yml, which evaluates only its
        own keys' strings; read here as literals, never executed)
    :return: None, or a dict with the four keys, floats
    :raises ValueError: naming the keyword, for a value of another kind, an unknown key, ``target <= 0``,
        ``factor <= 1``, ``lr_max <= 0``, ``lr_min < 0`` or ``lr_min > lr_max``
    """
    given = adaptive_kl
    if isinstance(adaptive_kl, str):
        adaptive_kl = _literal(adaptive_kl)
    if adaptive_kl is None or adaptive_kl is False or (isinstance(adaptive_kl, np.bool_) and not adaptive_kl):
        return None
    if adaptive_kl is True or isinstance(adaptive_kl, np.bool_):
        return dict(ADAPTIVE_KL_DEFAULTS)
    if _is_number(adaptive_kl):
        adaptive_kl = {"target": adaptive_kl}
    if not isinstance(adaptive_kl, Mapping):
        raise ValueError(
            "adaptive_kl must be None, True, a KL target > 0 or a dict with keys among "
            f"{tuple(ADAPTIVE_KL_DEFAULTS)}, got {given!r}"
        )
    unknown = sorted(str(key) for key in set(adaptive_kl) - set(ADAPTIVE_KL_DEFAULTS))
    if unknown:
        raise ValueError(f"adaptive_kl has unknown keys {unknown}; its keys are {tuple(ADAPTIVE_KL_DEFAULTS)}, got {given!r}")
    rule = {**ADAPTIVE_KL_DEFAULTS, **adaptive_kl}
    if not all(_is_number(value) and math.isfinite(value) for value in rule.values()):
        raise ValueError(f"adaptive_kl's values must be finite numbers, got {given!r}")
    rule = {key: float(value) for key, value in rule.items()}
    if rule["target"] <= 0:
        raise ValueError(f"adaptive_kl's target must be > 0, got {given!r}")
    if rule["factor"] <= 1:
        raise ValueError(f"adaptive_kl's factor must be > 1, got {given!r}")
    if rule["lr_min"] < 0 or rule["lr_max"] <= 0 or rule["lr_min"] > rule["lr_max"]:
        raise ValueError(f"adaptive_kl needs 0 <= lr_min <= lr_max and lr_max > 0, got {given!r}")
    return rule


def _literal(text: str) -> Any:
    """A string of a literal, or of ``dict(key=literal, ...)``, read without executing it."""
    try:
        return python_literal(text, "adaptive_kl")
    except ValueError as error:
        raise ValueError(
            f"adaptive_kl given as a string must be a literal, e.g. '0.01' or 'dict(target=0.01, factor=1.5)', got {text!r}"
        ) from error


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def check_adaptive_kl_option(adaptive_kl: Any, checked: Mapping[str, Any]) -> dict[str, float] | None:
    return check_adaptive_kl(adaptive_kl)
