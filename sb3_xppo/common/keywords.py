"""
The parent algorithm's keywords (SB3's ``PPO``, sb3-contrib's ``MaskablePPO`` / ``RecurrentPPO``): taken as the
parent takes them (:func:`parent_keywords`), an unknown one refused (:func:`check_parent_keywords`), and their values
checked before any env or network is built (:func:`check_ppo_keywords`).

What the parent refuses stays refused, with the parent's exception type or a subclass of it (PPO asserts:
:class:`PPOSettingError` is both an ``AssertionError`` and a ``ValueError``), so that code catching the parent's error
catches XPPO's. Beyond the parent, a value that cannot mean anything is a ``ValueError`` naming the keyword and its
valid range; a legal value that is almost surely a mistake is one warning (docs/guide/differences.md, From PPO).
"""

import difflib
import inspect
import warnings
from typing import Any

import numpy as np

from sb3_xppo.common.options import ADVANTAGE_NORMALIZATIONS, XPPOOptions, is_number


class PPOSettingError(ValueError, AssertionError):
    """
    A PPO keyword's value refused at construction. A ``ValueError``, as every bad value of the package is, and an
    ``AssertionError``, which SB3's ``PPO`` raises for the same settings (``n_steps * n_envs``, ``batch_size``,
    ``clip_range_vf``): code catching the parent's error catches this one.
    """


class PPOTypeError(ValueError, TypeError):
    """
    A PPO keyword of the wrong type (``n_steps=2.5``) refused at construction: a ``ValueError``, as every bad value of
    the package is, and a ``TypeError``, which SB3's ``PPO`` raises for it when it builds its buffer.
    """


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
    names = list(inspect.signature(parent).parameters)[2:]  # after policy, env
    if len(args) > len(names):
        raise TypeError(f"{parent.__name__} takes at most {len(names) + 2} positional arguments, got {len(args) + 2}")
    twice = [name for name in names[: len(args)] if name in kwargs]
    if twice:
        raise TypeError(f"got multiple values for argument {twice[0]!r}")
    return {**dict(zip(names, args, strict=False)), **kwargs}


def check_parent_keywords(algorithm: str, parent: type, kwargs: dict[str, Any], options: type[XPPOOptions]) -> None:
    """
    :param algorithm: the XPPO class's name, for the message
    :param parent: the SB3 algorithm whose keywords ``kwargs`` must be, the options taken out
    :param kwargs: what is left of the constructor's keywords
    :param options: the algorithm's options class, for the suggestion
    :raises TypeError: for a keyword neither the parent nor the options know, before any env or network is built
    """
    known = [name for name in inspect.signature(parent).parameters if name not in ("policy", "env")]
    unknown = [name for name in kwargs if name not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], [*known, *options.names()], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"{algorithm} got an unexpected keyword argument {unknown[0]!r}{hint}")


def ppo_keywords(parent: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """
    :param parent: the SB3 algorithm (e.g. ``MaskablePPO``)
    :param kwargs: the parent's keywords as given (:func:`parent_keywords`)
    :return: every parent keyword's value: as given, else the parent's default
    """
    parameters = list(inspect.signature(parent).parameters.values())[2:]
    return {p.name: kwargs.get(p.name, p.default) for p in parameters}


def check_ppo_keywords(parent: type, ppo: dict[str, Any], n_envs: int | None) -> str | bool:
    """
    Refuse PPO keywords that the parent refuses or that cannot mean anything, and warn once for each legal value that
    is almost surely a mistake; before any env or network is built.

    :param parent: the SB3 algorithm
    :param ppo: every parent keyword's value (:func:`ppo_keywords`)
    :param n_envs: the number of envs the model will step (None when no env is given, as in ``load()``)
    :return: ``normalize_advantage`` in canonical form (``'minibatch'``, ``'rollout'`` or False)
    :raises PPOSettingError: for a setting SB3's ``PPO`` asserts against
    :raises ValueError: naming the keyword and its valid range, for the others
    """
    check_clip_range(ppo["clip_range"])
    check_clip_range_vf(ppo["clip_range_vf"])
    normalize_advantage = check_normalize_advantage(ppo["normalize_advantage"])
    _check_learning_rate(ppo["learning_rate"])
    n_steps = _check_int("n_steps", ppo["n_steps"], 1, PPOSettingError)  # PPO asserts n_steps * n_envs > 1
    if normalize_advantage and n_envs is not None and n_steps * n_envs <= 1:
        # PPO's assert: normalizing a rollout of one sample gives NaN (PPO) or 0 (XPPO): the actor learns nothing
        raise PPOSettingError(
            f"n_steps * n_envs must be greater than 1 with normalize_advantage={normalize_advantage!r}: the advantages "
            f"of a rollout of one sample normalize to nothing (n_steps={n_steps}, n_envs={n_envs}; PPO asserts the same)"
        )
    _check_batch_size(parent, ppo["batch_size"], normalize_advantage)
    _check_int("n_epochs", ppo["n_epochs"], 1)
    _check_range("gamma", ppo["gamma"], "in (0, 1]", lambda x: 0 < x <= 1)
    _check_range("gae_lambda", ppo["gae_lambda"], "in [0, 1]", lambda x: 0 <= x <= 1)
    if isinstance(ppo["ent_coef"], str) or not is_number(ppo["ent_coef"]):
        raise ValueError(f"ent_coef must be a number (negative is allowed), got {ppo['ent_coef']!r}")
    _check_range("vf_coef", ppo["vf_coef"], ">= 0", lambda x: x >= 0)
    _check_range("max_grad_norm", ppo["max_grad_norm"], ">= 0", lambda x: x >= 0)
    if ppo["target_kl"] is not None:
        _check_range("target_kl", ppo["target_kl"], ">= 0 or None (no early stopping)", lambda x: x >= 0)
    _warn_suspicious(ppo)
    return normalize_advantage


def _check_int(name: str, value: Any, low: int, error: type[ValueError] = ValueError) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise PPOTypeError(f"{name} must be an int >= {low}, got {value!r}")
    if value < low:
        raise error(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _check_range(name: str, value: Any, valid: str, inside: Any) -> None:
    if not is_number(value) or not inside(value):
        raise ValueError(f"{name} must be a number {valid}, got {value!r}")


def _check_learning_rate(learning_rate: Any) -> None:
    if callable(learning_rate):
        return
    if not is_number(learning_rate) or learning_rate < 0:
        raise ValueError(
            f"learning_rate must be a number >= 0 or a schedule (callable of progress_remaining), got {learning_rate!r}"
        )


def _check_batch_size(parent: type, batch_size: Any, normalize_advantage: str | bool) -> None:
    if batch_size is None and "None" in str(inspect.signature(parent).parameters["batch_size"].annotation):
        return  # sb3-contrib's: the whole rollout in one minibatch
    _check_int("batch_size", batch_size, 1, PPOSettingError)  # PPO asserts batch_size > 1
    if batch_size == 1 and normalize_advantage == "minibatch":
        # PPO's assert: each minibatch's advantage is normalized over one sample, so the actor would learn nothing
        raise PPOSettingError(
            "batch_size must be greater than 1 with normalize_advantage='minibatch': a minibatch of one sample has no "
            "spread to normalize by (PPO asserts the same); pass normalize_advantage='rollout' or False, or a larger "
            "batch_size"
        )


def _warn_suspicious(ppo: dict[str, Any]) -> None:
    """One warning for each legal value that stops all learning (docs/guide/differences.md, From PPO)."""
    suspicious = {
        "max_grad_norm": (ppo["max_grad_norm"] == 0, "every gradient is clipped to norm 0: the model never changes"),
        "target_kl": (ppo["target_kl"] == 0, "every update stops after its first minibatch"),
        "learning_rate": (
            not callable(ppo["learning_rate"]) and ppo["learning_rate"] == 0,
            "the optimizer takes steps of size 0: the model never changes",
        ),
    }
    for name, (on, why) in suspicious.items():
        if on:
            warnings.warn(f"{name}={ppo[name]!r}: {why}", UserWarning, stacklevel=5)  # (the constructor's caller)


def check_normalize_advantage(normalize_advantage: Any) -> str | bool:
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
        # PPO asserts clip_range_vf > 0 in _setup_model
        raise PPOSettingError(
            f"clip_range_vf must be None (no value clipping), a number > 0 or a schedule, got {clip_range_vf!r}"
        )
