"""
The losses XPPO trains with, one declaration each (docs/guide/development.md, "Adding a loss").

An :class:`ActorLoss` says what an actor loss is: its function (:class:`~sb3_xppo.functional.ActorLossFunction`), its
documentation, its own keywords with their checks and docs (given as ``actor_loss_kwargs``), whether it takes
``dual_clip``, what it does when the trust region closes (a clip range schedule at 0), its default
``min_advantage_std``, and any rule it sets on the other options. A :class:`ValueLoss` says what a value loss is: how
one ``train()`` call builds it from ``clip_range_vf`` and the policy, and whether it clips (needs ``clip_range_vf``).

Everything that depends on the loss reads the registries: the option checks (``actor_loss``, ``actor_loss_kwargs``,
``value_loss``, ``dual_clip``, ``min_advantage_std``, ``log_ratio_clamp``), the losses of a ``train()`` call
(:class:`~sb3_xppo.core.losses.MinibatchLosses`), the optuna search space and the options' documentation. A loss of
your own is one :func:`register_actor_loss` (or :func:`register_value_loss`) call with one function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import torch as th
import torch.nn.functional as F

from sb3_xppo.common.declarations import check_choice, is_number
from sb3_xppo.functional import (
    clipped_value_loss_fn,
    hpo_actor_loss,
    improved_value_clipping_fn,
    ppo_actor_loss,
    spo_actor_loss,
)
from sb3_xppo.functional.actor_losses import ActorLossFunction, check_hpo_log_ratio_clamp
from sb3_xppo.functional.masked import valid_mean

#: ``(values, old_values, returns, valid) -> loss``: a value loss of one minibatch, reduced over its (valid) samples
ValueLossFn = Callable[[th.Tensor, th.Tensor, th.Tensor, "th.Tensor | None"], th.Tensor]


@dataclass(frozen=True)
class LossKeyword:
    """A keyword of a loss's own (``actor_loss_kwargs``): its default, its documentation, and its check."""

    default: Any
    doc: str
    #: ``check(value) -> value``: raises a ``ValueError`` naming the keyword for a bad value, returns it canonical
    check: Callable[[Any], Any]


@dataclass(frozen=True)
class ActorLoss:
    """One actor loss of the registry (:data:`ACTOR_LOSS_REGISTRY`)."""

    #: its ``actor_loss`` name
    name: str
    #: the loss: the log-probs, the old log-probs, the advantages and the keywords of
    #: :class:`~sb3_xppo.functional.ActorLossFunction`, its own keywords and :attr:`bound`
    function: ActorLossFunction
    #: its documentation, reST citing the paper (the ``actor_loss`` option's docs list it)
    doc: str
    #: whether it takes ``dual_clip`` (a bound on the loss for negative advantages: only where it adds no gradient)
    dual_clip: bool = False
    #: why it does not, the refusal's reason
    no_dual_clip: str = "its declaration does not take it"
    #: when the trust region closes (a clip range schedule at or below 0): True, its actor learns nothing from that
    #: rollout (only the critic does: a loss that divides by the clip range has no region left); False, the loss takes
    #: the range as it is (PPO's clip, whose bounds then meet)
    off_when_closed: bool = True
    #: its ``min_advantage_std`` when the option is None (None: no minibatch skipped)
    min_advantage_std: float | None = None
    #: its own keywords, given as ``actor_loss_kwargs``
    keywords: Mapping[str, LossKeyword] = field(default_factory=dict)
    #: keywords it is always called with (``asymmetric_spo``: SPO's function with ``asymmetric=True``)
    bound: Mapping[str, Any] = field(default_factory=dict)
    #: a rule it sets on the other options, given them checked (``checked["log_ratio_clamp"]``, ``clip_range``);
    #: raises a ``ValueError`` naming the option
    check: Callable[[Mapping[str, Any]], None] | None = None

    def bind(self, eps_clip: Any, options: Any) -> Callable[..., Any]:
        """
        :param eps_clip: this ``train()`` call's clip range (a float or a ``(low, high)`` pair)
        :param options: the model's checked options
        :return: the loss with every keyword but the minibatch's bound: ``fn(log_prob, old_log_prob, advantages,
            ...)``
        """
        keywords: dict[str, Any] = dict(
            eps_clip=eps_clip,
            delightful=options.delightful,
            delight_temp=options.delight_temp,
            log_ratio_clamp=options.log_ratio_clamp,
        )
        if self.dual_clip:
            keywords.update(dual_clip=options.dual_clip is not None, dual_clip_threshold=options.dual_clip or 3.0)
        keywords.update(self.bound)
        keywords.update({name: keyword.default for name, keyword in self.keywords.items()})
        keywords.update(options.actor_loss_kwargs or {})
        return partial(self.function, **keywords)


@dataclass(frozen=True)
class ValueLoss:
    """One value loss of the registry (:data:`VALUE_LOSS_REGISTRY`)."""

    #: its ``value_loss`` name
    name: str
    #: ``build(clip_range_vf, policy, options) -> ValueLossFn``: the loss of one ``train()`` call
    build: Callable[[float | None, Any, Any], ValueLossFn]
    #: its documentation, reST citing the paper
    doc: str
    #: whether it clips the value function, and so needs ``clip_range_vf``
    clips: bool = False
    #: whether the optuna search space draws it (not where it needs configuring first)
    searched: bool = True
    #: whether it needs a classification critic: the policy gets a categorical value head, configured by
    #: ``policy_kwargs['hl_gauss']`` (:class:`~sb3_xppo.common.policies.XPPOPolicyMixin`)
    categorical_head: bool = False


def _check_hpo(checked: Mapping[str, Any]) -> None:
    # (the first value of a clip range schedule is its largest, at progress_remaining = 1)
    from sb3_xppo.common.schedules import starting_clip_ranges

    check_hpo_log_ratio_clamp(checked["log_ratio_clamp"], max(starting_clip_ranges(checked["clip_range"])))


# SPO's objective r A - |A| (r - 1)^2 / (2 eps) falls below c A long before r reaches c, and the bound then replaces
# it: at r = 2, A = -1, eps = 0.2, c = 3 the loss's gradient in r is 0 instead of 1 + 1 / 0.2 = 6
_SPO_NO_DUAL_CLIP = (
    "for negative advantages the bound c * A becomes the active term long before the ratio reaches c and removes SPO's "
    "restoring gradient"
)


def _register(registry: dict[str, Any], loss: Any, kind: type) -> Any:
    name = getattr(loss, "name", None)
    if not isinstance(loss, kind):
        raise TypeError(
            f"register_{kind.__name__[:-4].lower()}_loss takes a declaration, {kind.__name__}(name, ...), got {loss!r}"
        )
    if not isinstance(name, str) or not name:
        raise TypeError(f"a loss's name must be a non-empty str, got {name!r}")
    if name in registry:
        raise ValueError(f"a loss named {name!r} is registered already")
    registry[name] = loss
    return loss


#: The actor losses by name: the built-in ones (:data:`ACTOR_LOSSES`), and those :func:`register_actor_loss` adds
ACTOR_LOSS_REGISTRY: dict[str, ActorLoss] = {}


def register_actor_loss(loss: ActorLoss) -> ActorLoss:
    """
    Add an actor loss: ``actor_loss=loss.name`` then trains with it (its own keywords as ``actor_loss_kwargs``).

    :param loss: its declaration
    :return: it
    :raises ValueError: for a name the registry holds already
    :raises TypeError: for another object than a declaration
    """
    return _register(ACTOR_LOSS_REGISTRY, loss, ActorLoss)


for _loss in (
    ActorLoss(
        "clip",
        ppo_actor_loss,
        "PPO's clipped surrogate (Schulman et al. 2017)",
        dual_clip=True,
        off_when_closed=False,
    ),
    ActorLoss(
        "spo",
        spo_actor_loss,
        "Simple Policy Optimization (Xie et al. 2025, https://arxiv.org/abs/2401.16025)",
        no_dual_clip=_SPO_NO_DUAL_CLIP,
    ),
    ActorLoss(
        "asymmetric_spo",
        spo_actor_loss,
        "PPO's clip where the advantage is positive, SPO where it is not",
        bound={"asymmetric": True},
        no_dual_clip=_SPO_NO_DUAL_CLIP,
    ),
    ActorLoss(
        "hpo",
        hpo_actor_loss,
        "a Huber loss pulling the log-ratio to the target ``eps * clamp(A, -2, 2)``, weighted by ``|A|``, after Target "
        "Policy Optimization (Kaddour 2026, https://arxiv.org/abs/2604.06159; :func:`~sb3_xppo.functional.hpo_actor_loss`)",
        no_dual_clip="HPO has no ratio bound to add it to; its Huber loss already pulls the log-ratio back to a "
        "bounded target, with a gradient that the bound would remove",
        min_advantage_std=1e-6,
        check=_check_hpo,
    ),
):
    register_actor_loss(_loss)

#: The built-in actor losses' names, in the order of their declarations (the optuna search space's choices)
ACTOR_LOSSES = tuple(ACTOR_LOSS_REGISTRY)


def mse_value_loss(values: th.Tensor, old_values: th.Tensor, returns: th.Tensor, valid: th.Tensor | None) -> th.Tensor:
    """The MSE of the values, as PPO reduces it: ``F.mse_loss(returns, values)``, its built-in mean (bit for bit)."""
    if values.ndim == 1 and valid is None:
        return F.mse_loss(returns, values)
    return valid_mean(F.mse_loss(values, returns, reduction="none"), valid, dim=0)


def _mse(clip: float | None, policy: Any, options: Any) -> ValueLossFn:
    return mse_value_loss


def _sb3(clip: float | None, policy: Any, options: Any) -> ValueLossFn:
    # PPO's: the prediction is clipped around the old value and only the clipped one is regressed
    if clip is None:  # (no clip_range_vf: PPO's MSE; the options' check refuses the other clipping losses without it)
        return mse_value_loss
    return lambda values, old, returns, valid: mse_value_loss(old + th.clamp(values - old, -clip, clip), old, returns, valid)


def _clipping(function: Callable[..., th.Tensor]) -> Callable[[float | None, Any, Any], ValueLossFn]:
    def build(clip: float | None, policy: Any, options: Any) -> ValueLossFn:
        return lambda values, old, returns, valid: valid_mean(
            function(values, old, returns, clip=clip, reduction="none"), valid, dim=0
        )

    return build


def _hl_gauss(clip: float | None, policy: Any, options: Any) -> ValueLossFn:
    # Cross-entropy of the categorical critic's last forward pass (this minibatch's), clipped in scalar space
    head = policy.value_net.head if options.normalize_values else policy.value_net
    return lambda values, old, returns, valid: valid_mean(head.loss(returns, old, clip).reshape(returns.shape), valid, dim=0)


#: The value losses by name: the built-in ones (:data:`VALUE_LOSSES`), and those :func:`register_value_loss` adds
VALUE_LOSS_REGISTRY: dict[str, ValueLoss] = {}


def register_value_loss(loss: ValueLoss) -> ValueLoss:
    """
    Add a value loss: ``value_loss=loss.name`` then trains with it.

    :param loss: its declaration
    :return: it
    :raises ValueError: for a name the registry holds already
    :raises TypeError: for another object than a declaration
    """
    return _register(VALUE_LOSS_REGISTRY, loss, ValueLoss)


for _value_loss in (
    ValueLoss("mse", _mse, "no clipping"),
    ValueLoss("sb3", _sb3, "PPO's: MSE of the clipped prediction only", clips=True),
    ValueLoss(
        "clipped", _clipping(clipped_value_loss_fn), "max of the clipped and unclipped MSE, Schulman et al. 2017", clips=True
    ),
    ValueLoss(
        "improved",
        _clipping(improved_value_clipping_fn),
        "Lee & Chung 2024, On Analysis of Clipped Critic Loss in Proximal Policy Gradient",
        clips=True,
    ),
    ValueLoss(
        "hl_gauss", _hl_gauss, "a classification critic, Farebrother et al. 2024", searched=False, categorical_head=True
    ),
):
    register_value_loss(_value_loss)

#: The built-in value losses' names, in the order of their declarations
VALUE_LOSSES = tuple(VALUE_LOSS_REGISTRY)
#: The built-in value losses that clip, and so need ``clip_range_vf`` (hl_gauss clips in scalar space when it is given)
CLIPPING_VALUE_LOSSES = tuple(name for name, loss in VALUE_LOSS_REGISTRY.items() if loss.clips)
#: The built-in actor losses that take ``dual_clip``
DUAL_CLIP_ACTOR_LOSSES = tuple(name for name, loss in ACTOR_LOSS_REGISTRY.items() if loss.dual_clip)

# --- generated by python tests/test_signatures.py: the built-in losses' names, as types (from the registries above) ---
ActorLossName = Literal["clip", "spo", "asymmetric_spo", "hpo"]
ValueLossName = Literal["mse", "sb3", "clipped", "improved", "hl_gauss"]
# --- end of the generated region ---


def actor_loss(name: str) -> ActorLoss:
    """:return: the actor loss ``name`` names (:data:`ACTOR_LOSS_REGISTRY`)"""
    return ACTOR_LOSS_REGISTRY[name]


def check_actor_loss(actor_loss: Any, checked: Mapping[str, Any]) -> str:
    """:raises ValueError: for a name the registry does not hold (a loss of your own is registered before the model
    is built or loaded)"""
    if isinstance(actor_loss, str) and actor_loss not in ACTOR_LOSS_REGISTRY:
        raise ValueError(
            f"actor_loss must be one of {tuple(ACTOR_LOSS_REGISTRY)}, got {actor_loss!r} (a loss of your own: "
            "register_actor_loss before the model is built or loaded)"
        )
    return check_choice("actor_loss", actor_loss, tuple(ACTOR_LOSS_REGISTRY))


def check_actor_loss_kwargs(kwargs: Any, checked: Mapping[str, Any]) -> dict[str, Any] | None:
    """The actor loss's own keywords: known to it, each checked by its declaration."""
    if kwargs is None:
        return None
    loss = ACTOR_LOSS_REGISTRY[checked["actor_loss"]]
    if not isinstance(kwargs, Mapping) or not all(isinstance(name, str) for name in kwargs):
        raise ValueError(f"actor_loss_kwargs must be None or a dict of the actor loss's keywords, got {kwargs!r}")
    unknown = sorted(set(kwargs) - set(loss.keywords))
    if unknown:
        raise ValueError(
            f"actor_loss_kwargs: actor_loss={loss.name!r} takes no keyword {unknown[0]!r} (its keywords: "
            f"{sorted(loss.keywords) or 'none'})"
        )
    return {name: loss.keywords[name].check(value) for name, value in kwargs.items()}


def resolve_value_loss(value_loss: str | None, clip_range_vf: Any) -> str:
    """
    PPO's meaning of ``clip_range_vf`` for ``value_loss=None``: ``'sb3'`` (PPO's value clipping) when it is set,
    ``'mse'`` (no clipping) otherwise. Used at construction and after ``load()``, where a PPO checkpoint has no
    ``value_loss`` but may have a ``clip_range_vf``.

    :param value_loss: None or a name of :data:`VALUE_LOSS_REGISTRY`
    :param clip_range_vf: the value clip range (None: no clipping)
    :return: the value loss's name
    """
    if value_loss is None:
        return "mse" if clip_range_vf is None else "sb3"
    return value_loss


def check_value_loss(value_loss: Any, checked: Mapping[str, Any]) -> str:
    if value_loss is None:
        return resolve_value_loss(None, checked["clip_range_vf"])
    check_choice("value_loss", value_loss, tuple(VALUE_LOSS_REGISTRY))
    if VALUE_LOSS_REGISTRY[value_loss].clips and checked["clip_range_vf"] is None:
        raise ValueError(
            f"value_loss={value_loss!r} clips the value function and needs clip_range_vf (a float > 0 or a schedule)"
        )
    if value_loss == "mse" and checked["clip_range_vf"] is not None:
        import warnings

        warnings.warn(
            "clip_range_vf is ignored by value_loss='mse'; leave value_loss=None (or pass 'sb3') for PPO's value "
            "clipping, or 'clipped' / 'improved'"
        )
    return value_loss


def check_dual_clip(dual_clip: Any, checked: Mapping[str, Any]) -> float | None:
    if dual_clip is None:
        return None
    if not is_number(dual_clip) or dual_clip <= 1:
        raise ValueError(f"dual_clip must be None or a number > 1 (Ye et al. 2020), got {dual_clip!r}")
    loss = ACTOR_LOSS_REGISTRY[checked["actor_loss"]]
    if not loss.dual_clip:
        raise ValueError(
            f"dual_clip cannot be combined with actor_loss={loss.name!r}: {loss.no_dual_clip}. Use dual_clip with "
            f"actor_loss in {DUAL_CLIP_ACTOR_LOSSES}, or {loss.name!r} without dual_clip"
        )
    return dual_clip


def resolve_min_advantage_std(min_advantage_std: float | None, actor_loss: str) -> float | None:
    """
    The ``min_advantage_std`` an actor loss runs with: the model's, else the loss's own default (1e-6 for HPO, no
    skipping for the clip and SPO losses).

    :param min_advantage_std: the constructor's keyword
    :param actor_loss: the model's actor loss
    """
    if min_advantage_std is not None:
        return min_advantage_std
    return ACTOR_LOSS_REGISTRY[actor_loss].min_advantage_std


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


def check_log_ratio_clamp_option(log_ratio_clamp: Any, checked: Mapping[str, Any]) -> tuple[float, float] | None:
    """``log_ratio_clamp`` checked, then the actor loss's own rule on the options (HPO's on the clamp)."""
    clamp = check_log_ratio_clamp(log_ratio_clamp)
    rule = ACTOR_LOSS_REGISTRY[checked["actor_loss"]].check
    if rule is not None:
        rule({**checked, "log_ratio_clamp": clamp})
    return clamp


def check_delight_temp(delight_temp: Any, checked: Mapping[str, Any]) -> float:
    if not is_number(delight_temp) or delight_temp <= 0:
        raise ValueError(f"delight_temp must be a number > 0, got {delight_temp!r}")
    return delight_temp


def check_min_advantage_std(min_advantage_std: Any, checked: Mapping[str, Any]) -> float | None:
    if min_advantage_std is None:
        return None
    if not is_number(min_advantage_std) or not min_advantage_std >= 0:
        raise ValueError(f"min_advantage_std must be None or a number >= 0, got {min_advantage_std!r}")
    return float(min_advantage_std)


def actor_loss_docs() -> str:
    """:return: the ``actor_loss`` option's documentation, each built-in loss with its own"""
    listed = [f"``{name!r}`` ({loss.doc})" for name, loss in ACTOR_LOSS_REGISTRY.items() if name in ACTOR_LOSSES]
    return f"{', '.join(listed[:-1])} or {listed[-1]}; a loss of your own: :func:`register_actor_loss`"


def value_loss_docs() -> str:
    """:return: the ``value_loss`` option's documentation, each built-in loss with its own"""
    listed = [f"``{name!r}`` ({loss.doc})" for name, loss in VALUE_LOSS_REGISTRY.items() if name in VALUE_LOSSES]
    return ", ".join(listed)
