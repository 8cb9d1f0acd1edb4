"""
XPPO's options, declared once: :class:`XPPOOptions` is a frozen dataclass whose fields are the options, each with
its type, default, documentation and check (:func:`option`). Every XPPO algorithm takes them as plain keywords or as
``options=XPPOOptions(...)``, checks them with :meth:`XPPOOptions.checked` and keeps them as ``model.options``.
The choices (loss names, which actor losses take a dual clip) are this module's constants, which the rl-zoo3 search
space imports.

Validation, one style for all: ``check_*`` raises a ``ValueError`` naming the keyword and the allowed values (a
``TypeError`` for ``fast_paths``, a switch given something other than a bool) at construction, before any env or
network is built, and returns the value in its canonical form.
"""

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import numpy as np
import torch as th

from sb3_xppo.common.adaptive_lr import check_adaptive_kl
from sb3_xppo.common.declarations import check_declared, option
from sb3_xppo.common.distributed import check_launched
from sb3_xppo.common.option_docs import document_options
from sb3_xppo.common.sequences import check_sequence_batching
from sb3_xppo.functional.actor_losses import check_hpo_log_ratio_clamp
from sb3_xppo.functional.advantages import REDUCES

ACTOR_LOSSES = ("clip", "spo", "asymmetric_spo", "hpo")
VALUE_LOSSES = ("mse", "sb3", "clipped", "improved", "hl_gauss")
#: value losses that clip, and so need clip_range_vf (hl_gauss clips in scalar space when it is given)
CLIPPING_VALUE_LOSSES = ("sb3", "clipped", "improved")
ADVANTAGE_NORMALIZATIONS = ("minibatch", "rollout", False)
#: ``group_value_weights`` by name (a list of ``G`` weights is the third form)
GROUP_VALUE_WEIGHTS = ("equal", "squared")
#: ``group_gradients``: how the actor's gradient of several reward groups is formed (None: from the combined advantages)
GROUP_GRADIENTS = (None, "pcgrad")
#: the actor losses that take ``dual_clip``: with SPO and HPO the bound would remove their restoring gradient
DUAL_CLIP_ACTOR_LOSSES = ("clip",)
#: the ``group_reduce`` values that are a weighted sum of the groups' advantages, which ``group_gradients`` splits
LINEAR_GROUP_REDUCES = ("mean", "sum")


def as_bool(value: Any, checked: Mapping[str, Any]) -> bool:
    """A switch read as Python truth (``delightful``, ``normalize_groups``)."""
    return bool(value)


def check_actor_loss(actor_loss: Any, checked: Mapping[str, Any]) -> str:
    return check_choice("actor_loss", actor_loss, ACTOR_LOSSES)


def check_value_loss(value_loss: Any, checked: Mapping[str, Any]) -> str:
    if value_loss is None:
        return resolve_value_loss(None, checked["clip_range_vf"])
    check_choice("value_loss", value_loss, VALUE_LOSSES)
    if value_loss in CLIPPING_VALUE_LOSSES and checked["clip_range_vf"] is None:
        raise ValueError(
            f"value_loss={value_loss!r} clips the value function and needs clip_range_vf (a float > 0 or a schedule)"
        )
    if value_loss == "mse" and checked["clip_range_vf"] is not None:
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
    actor_loss = checked["actor_loss"]
    if actor_loss not in DUAL_CLIP_ACTOR_LOSSES:
        # SPO's objective r A - |A| (r - 1)^2 / (2 eps) falls below c A long before r reaches c, and the bound then
        # replaces it: at r = 2, A = -1, eps = 0.2, c = 3 the loss's gradient in r is 0 instead of 1 + 1 / 0.2 = 6
        if actor_loss == "hpo":
            raise ValueError(
                "dual_clip cannot be combined with actor_loss='hpo': HPO has no ratio bound to add it to; its Huber "
                "loss already pulls the log-ratio back to a bounded target, with a gradient that the bound would "
                "remove. Use dual_clip with actor_loss='clip', or HPO without dual_clip"
            )
        raise ValueError(
            f"dual_clip cannot be combined with actor_loss={actor_loss!r}: for negative advantages the bound c * A "
            "becomes the active term long before the ratio reaches c and removes SPO's restoring gradient. "
            "Use dual_clip with actor_loss='clip', or SPO without dual_clip"
        )
    return dual_clip


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


def resolve_min_advantage_std(min_advantage_std: float | None, actor_loss: str) -> float | None:
    """
    The ``min_advantage_std`` an actor loss runs with: the model's, else the loss's own default (1e-6 for HPO, no
    skipping for the clip and SPO losses).

    :param min_advantage_std: the constructor's keyword
    :param actor_loss: the model's actor loss
    """
    if min_advantage_std is not None:
        return min_advantage_std
    return 1e-6 if actor_loss == "hpo" else None


def check_log_ratio_clamp_option(log_ratio_clamp: Any, checked: Mapping[str, Any]) -> tuple[float, float] | None:
    clamp = check_log_ratio_clamp(log_ratio_clamp)
    if checked["actor_loss"] == "hpo":
        # the first value of a schedule of the clip range is its largest (progress_remaining = 1)
        check_hpo_log_ratio_clamp(clamp, max(starting_clip_ranges(checked["clip_range"])))
    return clamp


def starting_clip_ranges(clip_range: Any) -> list[float]:
    """
    :param clip_range: a float, a schedule, a ``(low, high)`` pair of those, or a schedule of pairs
    :return: the clip ranges at the start of training (``progress_remaining = 1``)
    """
    value = clip_range(1.0) if callable(clip_range) else clip_range
    values = value if isinstance(value, (tuple, list)) else [value]
    return [float(v(1.0) if callable(v) else v) for v in values]


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


def check_normalize_values(normalize_values: Any, checked: Mapping[str, Any]) -> bool:
    if not isinstance(normalize_values, (bool, np.bool_)):
        raise ValueError(f"normalize_values must be True or False, got {normalize_values!r}")
    return bool(normalize_values)


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


def check_adaptive_kl_option(adaptive_kl: Any, checked: Mapping[str, Any]) -> dict[str, float] | None:
    return check_adaptive_kl(adaptive_kl)


def check_fast_paths(fast_paths: Any, checked: Mapping[str, Any]) -> bool:
    if not isinstance(fast_paths, (bool, np.bool_)):
        raise TypeError(f"fast_paths must be True or False, got {fast_paths!r}")
    return bool(fast_paths)


def check_distributed(distributed: Any, checked: Mapping[str, Any]) -> bool:
    if not isinstance(distributed, (bool, np.bool_)):
        raise TypeError(f"distributed must be True or False, got {distributed!r}")
    if distributed:
        if checked["group_gradients"] is not None:
            raise ValueError(
                "distributed=True cannot be combined with group_gradients: PCGrad's projection needs each group's "
                "gradient of the global minibatch, which the ranks' averaged gradient does not keep"
            )
        check_launched()
    return bool(distributed)


def check_distributed_timeout(distributed_timeout: Any, checked: Mapping[str, Any]) -> float:
    if not is_number(distributed_timeout) or not distributed_timeout > 0:
        raise ValueError(f"distributed_timeout must be a number of seconds > 0, got {distributed_timeout!r}")
    return float(distributed_timeout)


SelfOptions = TypeVar("SelfOptions", bound="XPPOOptions")


@dataclass(frozen=True)
class XPPOOptions:
    """
    Every option XPPO adds to its parent algorithm, in one typed, frozen object: ``model.options``.

    Give them as plain keywords, ``XPPO("MlpPolicy", env, actor_loss="spo")``, or as this object,
    ``XPPO("MlpPolicy", env, options=XPPOOptions(actor_loss="spo"))``; a plain keyword overrides the object's field.
    The algorithm checks them (:meth:`checked`) in its constructor, before any env or network is built, and again
    after ``load()``; the model reads them as ``model.options.actor_loss``. The PPO keywords XPPO reads differently
    (``clip_range``'s ``(low, high)`` pair, ``normalize_advantage``'s ``'rollout'``) stay the parent's.
    """

    actor_loss: str = option(
        "clip",
        "``'clip'`` (PPO's clipped surrogate, Schulman et al. 2017), ``'spo'`` (Simple Policy Optimization, "
        "Xie et al. 2025, https://arxiv.org/abs/2401.16025), ``'asymmetric_spo'`` (PPO's clip where the "
        "advantage is positive, SPO where it is not) or ``'hpo'`` (a Huber loss pulling the log-ratio to the "
        "target ``eps * clamp(A, -2, 2)``, weighted by ``|A|``, after Target Policy Optimization, Kaddour 2026, "
        "https://arxiv.org/abs/2604.06159; :func:`~sb3_xppo.functional.hpo_actor_loss`)",
        check_actor_loss,
    )

    value_loss: str | None = option(
        None,
        "None (default, PPO's meaning: ``'sb3'`` when ``clip_range_vf`` is set, else ``'mse'``; also after "
        "``load()`` of a PPO checkpoint), ``'mse'`` (no clipping), ``'sb3'`` (PPO's: MSE of the clipped "
        "prediction only), ``'clipped'`` (max of the clipped and unclipped MSE, Schulman et al. 2017), "
        "``'improved'`` (Lee & Chung 2024, On Analysis of Clipped Critic Loss in Proximal Policy Gradient) or "
        "``'hl_gauss'`` (a classification critic, Farebrother et al. 2024; its support is "
        "``policy_kwargs=dict(hl_gauss=...)``). The clipping losses need ``clip_range_vf``.",
        check_value_loss,
    )

    dual_clip: float | None = option(
        None,
        "None, or the dual clip constant ``c > 1``: for negative advantages the loss is bounded by ``-c * A`` "
        "however large the ratio grows (Ye et al. 2020, Mastering Complex Control in MOBA Games with Deep "
        "Reinforcement Learning). ``actor_loss='clip'`` only: with SPO the bound would become active long before "
        "the ratio reaches ``c`` and remove SPO's restoring gradient.",
        check_dual_clip,
    )

    delightful: bool = option(
        False,
        "gate each advantage by ``sigmoid(-log_prob * A / delight_temp)`` (delightful policy gradient, "
        "Osband 2026, https://arxiv.org/abs/2603.14608)",
        as_bool,
    )

    delight_temp: float = option(
        1.0,
        "temperature of the delightful gate, > 0",
        check_delight_temp,
    )

    log_ratio_clamp: float | tuple[float, float] | None = option(
        None,
        "None, or clamp ``log_prob - old_log_prob`` before ``exp`` to ``(-c, c)`` for a float ``c`` or to a "
        "``(low, high)`` pair",
        check_log_ratio_clamp_option,
    )

    min_advantage_std: float | None = option(
        None,
        "skip a minibatch whose advantages carry no signal: its actor loss is multiplied by 0 when their variance "
        "is ``<= min_advantage_std ** 2`` (DAPO's dynamic sampling, Yu et al. 2025, "
        "https://arxiv.org/abs/2503.14476). None: the actor loss's own default, 1e-6 for ``'hpo'``, no skipping "
        "for the others. Logged as ``train/skipped_minibatch_fraction`` when on",
        check_min_advantage_std,
    )

    adaptive_kl: float | dict[str, float] | None = option(
        None,
        "None (off), or the KL-adaptive learning rate (rsl_rl's rule, Rudin et al. 2022, Learning to Walk in "
        "Minutes Using Massively Parallel Deep RL, https://arxiv.org/abs/2109.11978): after each epoch the "
        "learning rate is divided by ``factor`` when the epoch's mean approximate KL is above ``2 * target``, "
        "multiplied by it when below ``target / 2``, and kept in ``[lr_min, lr_max]``. A float is the "
        "``target``; a dict gives any of ``target`` (0.01), ``factor`` (1.5), ``lr_min`` (1e-5), ``lr_max`` "
        "(1e-2), also as a string (``'dict(target=0.02)'``, rl-zoo3 yml); True: the defaults. It starts from "
        "``learning_rate`` (a schedule's value at progress 1; the schedule is not read after that), is saved "
        "with the model as ``adaptive_kl_lr`` and logged as ``train/learning_rate``. ``target_kl`` keeps its "
        "early stopping; the two combine.",
        check_adaptive_kl_option,
    )

    reward_groups: int | Sequence[str] | None = option(
        None,
        "None (one critic, the scalar reward), or the number ``G`` of reward groups or their names: one critic "
        "per group (Mysore et al. 2022, Multi-Critic Actor Learning). Each step's group rewards are read from "
        "``info[vector_reward_key]`` (a length-``G`` vector, MO-Gymnasium's convention; see "
        ":class:`~sb3_xppo.multi_critic.RewardGroups`), the policy becomes its multi-critic variant "
        "(:class:`~sb3_xppo.multi_critic.MultiCriticPolicy`; ``policy_kwargs=dict(separate_critics=True)`` gives "
        "each group its own value network) and the buffer its multi-critic one "
        "(:class:`~sb3_xppo.multi_critic.MultiCriticRolloutBuffer`, GAE per group). Logs "
        "``train/value_loss/<group>`` and ``train/explained_variance/<group>``.",
        check_reward_groups,
    )

    group_weights: Sequence[float] | None = option(
        None,
        "``G`` weights >= 0 of the groups' advantages (None: all equal)",
        check_group_weights,
    )

    group_reduce: str | Callable[[th.Tensor], th.Tensor] = option(
        "mean",
        "how the weighted group advantages are combined: ``'mean'`` (``sum_g w_g A_g / sum_g w_g``), ``'sum'``, "
        "``'max'``, ``'min'`` or a callable (see :func:`~sb3_xppo.functional.combine_grouped_advantages`)",
        check_group_reduce,
    )

    normalize_groups: bool = option(
        True,
        "z-score each group's advantages over the rollout before weighting them, so that no reward term's scale "
        "drowns the others",
        as_bool,
    )

    vector_reward_key: str = option(
        "vector_reward",
        "the info key holding each step's reward vector",
        check_vector_reward_key,
    )

    normalize_values: bool = option(
        False,
        "PopArt value normalization (van Hasselt et al. 2016; Andrychowicz et al. 2021): each critic output "
        "regresses returns normalized by running statistics (per reward group), the last layer is rescaled so "
        "that values in return units are preserved when the statistics move, and the value losses (and "
        "``clip_range_vf``) are in normalized units. The statistics are saved with the model; logged as "
        "``train/value_mean`` and ``train/value_std`` (``/<group>`` per reward group)",
        check_normalize_values,
    )

    group_value_weights: str | Sequence[float] | None = option(
        None,
        "the weight of each group's value loss in the critics' sum: ``'squared'`` (``group_weights[g] ** 2``: "
        "the critics' loss in the scalar reward's units, each critic's error counted as much as it moves "
        "``sum_g w_g V_g``), ``'equal'``, or ``G`` weights >= 0. None (default): ``'squared'`` in \"scalarize\" "
        "mode (``normalize_groups=False``) without ``normalize_values``, else ``'equal'`` "
        "(:func:`~sb3_xppo.common.options.resolve_group_value_weights`)",
        check_group_value_weights,
    )

    group_gradients: str | None = option(
        None,
        "how the actor's gradient of several reward groups is formed: None (default) from the combined advantages; "
        "``'pcgrad'``: one actor loss per group, on that group's term of the combined advantage (its "
        "normalized advantage times its weight, over the weights' sum with ``group_reduce='mean'``; the terms sum "
        "to the combined advantage), and the groups' gradients on the parameters their losses reach (the actor's, "
        "and a shared trunk's) projected off each other where they conflict, then summed (PCGrad, Yu et al. 2020, "
        "Gradient Surgery for Multi-Task Learning, arXiv:2001.06782; "
        ":func:`~sb3_xppo.functional.pcgrad_combine`). Needs ``reward_groups`` and ``group_reduce`` ``'mean'`` or "
        "``'sum'``; costs one backward pass through the actor per group; logs ``train/pcgrad_conflict_fraction``",
        check_group_gradients,
    )

    fast_paths: bool = option(
        True,
        "XPPO's fast paths (the rollout's forward passes under ``torch.inference_mode``, distributions built "
        "without argument validation where the inputs are known finite, the flat Adam step); False runs torch's "
        "and SB3's own paths everywhere. The results are the same bits either way.",
        check_fast_paths,
    )

    distributed: bool = option(
        False,
        "a data-parallel learner over ``torch.distributed``, one process per rank started by PyTorch's launcher "
        "(``python -m torch.distributed.run --nproc-per-node 2 my_script.py``; gloo on CPU, NCCL with one GPU per "
        "rank): each rank steps its own envs, seeded ``seed + rank * n_envs + i``, and every minibatch's gradients "
        "are averaged over the ranks before clipping, as in the peers' data-parallel PPO (rsl_rl, rl_games); the "
        "advantage normalization, ``target_kl``, ``adaptive_kl`` and the VecNormalize and PopArt statistics are "
        "global. ``n_envs``, ``n_steps`` and ``batch_size`` are per rank; ``num_timesteps`` counts every rank's steps "
        "(docs/guide/distributed.md). A saved model is a plain one",
        check_distributed,
    )

    distributed_timeout: float = option(
        300.0,
        "seconds a rank of a distributed run waits for the others in one collective before it stops with a "
        "``RankFailure`` naming the rank that died, hung or fell behind",
        check_distributed_timeout,
    )

    @classmethod
    def from_keywords(cls: type[SelfOptions], options: "XPPOOptions | None", keywords: dict[str, Any]) -> SelfOptions:
        """
        The options of a constructor call: ``options``' fields, overridden by the options among ``keywords``, which
        are taken out of ``keywords`` (what is left is the parent algorithm's).

        :param options: the constructor's ``options`` (None: the defaults); an object of a parent options class (an
            ``XPPOOptions`` given to ``RecurrentXPPO``) gives its fields
        :param keywords: the constructor's keywords
        :return: the options, unchecked
        :raises TypeError: for options of another algorithm (fields this class lacks)
        """
        names = cls.names()
        if options is not None and not isinstance(options, XPPOOptions):
            raise TypeError(f"options must be an XPPOOptions, got {options!r}")
        given = {} if options is None else {f.name: getattr(options, f.name) for f in fields(options)}
        foreign = [name for name in given if name not in names]
        if foreign:
            raise TypeError(f"{cls.__name__} has no option {foreign[0]!r}: {type(options).__name__} is another algorithm's")
        given.update({name: keywords.pop(name) for name in names if name in keywords})
        return cls(**given)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """:return: the options' names, in the declared order"""
        return tuple(f.name for f in fields(cls))

    def checked(self: SelfOptions, clip_range: Any = 0.2, clip_range_vf: Any = None) -> SelfOptions:
        """
        Every option checked, in the declared order (each check sees the ones before it, canonical).

        :param clip_range: the algorithm's ``clip_range`` (a float, a schedule or a pair of those)
        :param clip_range_vf: the algorithm's ``clip_range_vf``
        :return: the options in canonical form (``value_loss`` resolved, ``log_ratio_clamp`` as a pair,
            ``reward_groups`` as names, weights as floats)
        :raises ValueError: naming the option and its allowed values (``TypeError`` for ``fast_paths``)
        """
        return replace(self, **check_declared(self, {"clip_range": clip_range, "clip_range_vf": clip_range_vf}))

    @property
    def groups(self) -> list[str] | None:
        """``reward_groups`` as :meth:`checked` leaves it: the groups' names, or None (one critic)"""
        groups = self.reward_groups
        assert not isinstance(groups, (int, np.integer)), "reward_groups read before the options were checked"
        return None if groups is None else list(groups)

    @property
    def adaptive_kl_rule(self) -> dict[str, float] | None:
        """``adaptive_kl`` as :meth:`checked` leaves it: the rule's parameters, or None (off)"""
        rule = self.adaptive_kl
        assert rule is None or isinstance(rule, dict), "adaptive_kl read before the options were checked"
        return rule

    @property
    def log_ratio_bounds(self) -> tuple[float, float] | None:
        """``log_ratio_clamp`` as :meth:`checked` leaves it: ``(low, high)``, or None (no clamp)"""
        clamp = self.log_ratio_clamp
        assert clamp is None or isinstance(clamp, tuple), "log_ratio_clamp read before the options were checked"
        return clamp

    def group_value_loss_weights(self) -> list[float] | None:
        """
        The weights of the groups' value losses in the critics' sum (``group_value_weights`` resolved: None is
        ``'squared'`` in "scalarize" mode, the groups combined raw and the value losses in return units, else
        ``'equal'``; :func:`resolve_group_value_weights`).

        :return: ``G`` weights, or None for the plain sum (also without reward groups)
        """
        groups = self.groups
        if groups is None:
            return None
        scalarize = not self.normalize_groups and not self.normalize_values
        return resolve_group_value_weights(self.group_value_weights, self.group_weights, len(groups), scalarize)


def check_no_reward_groups(reward_groups: Any, checked: Mapping[str, Any]) -> None:
    if reward_groups is not None:
        raise ValueError(
            "reward_groups (multi-critic) is not available with recurrent policies yet: the LSTM policies have one "
            "value output. Use XPPO or MaskableXPPO for several critics."
        )
    return None


@dataclass(frozen=True)
class RecurrentXPPOOptions(XPPOOptions):
    """
    The options of :class:`~sb3_xppo.RecurrentXPPO` and :class:`~sb3_xppo.MaskableRecurrentXPPO`: those of
    :class:`XPPOOptions`, without reward groups. Options only these algorithms take are declared here.
    """

    reward_groups: int | Sequence[str] | None = option(
        None,
        "None only: the LSTM policies have one value output (multi-critic needs XPPO or MaskableXPPO)",
        check_no_reward_groups,
    )
    sequence_batching: bool = option(
        False,
        "``train()`` runs the LSTMs over each minibatch's sequences in whole-sequence calls, the states reset where an "
        "episode starts (:mod:`sb3_xppo.common.sequences`; sb3-contrib issue #113, PR #118): several times faster, the "
        "same computation to float tolerance but not bit for bit (the sums run in another order). False: "
        "``RecurrentPPO``'s step-by-step loop, bit for bit. The rollout is step by step either way.",
        lambda value, checked: check_sequence_batching(value),
    )


document_options(XPPOOptions)
document_options(RecurrentXPPOOptions)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def check_choice(name: str, value: Any, choices: tuple) -> Any:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


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
