"""
XPPO's options, declared once: :class:`XPPOOptions` is a frozen dataclass whose fields are the options, each with
its type, default, documentation and check (:func:`option`). Every XPPO algorithm takes them as plain keywords or as
``options=XPPOOptions(...)``, checks them with :meth:`XPPOOptions.checked` and keeps them as ``model.options``.

This module is the table: the options, their order (each check sees the ones declared before it) and their docs. Each
check lives beside the code it protects: the losses' in :mod:`~sb3_xppo.common.loss_registry` (whose registries
also give the loss names' choices), the reward groups' in :mod:`~sb3_xppo.common.group_options`, the data-parallel
learner's in :mod:`~sb3_xppo.common.distributed.checks`, and so on. Validation, one style for all: ``check_*``
raises a ``ValueError`` naming the keyword and the allowed values (a ``TypeError`` for a switch given something
other than a bool) at construction, before any env or network is built, and returns the value in its canonical form.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import numpy as np
import torch as th

from sb3_xppo.common.adaptive_lr import check_adaptive_kl_option
from sb3_xppo.common.declarations import as_bool, check_declared, check_fast_paths, is_number, option
from sb3_xppo.common.distributed.checks import check_distributed, check_distributed_timeout
from sb3_xppo.common.group_options import (
    GROUP_GRADIENTS,
    GROUP_VALUE_WEIGHTS,
    LINEAR_GROUP_REDUCES,
    check_group_gradients,
    check_group_reduce,
    check_group_value_weights,
    check_group_weights,
    check_no_reward_groups,
    check_reward_groups,
    check_vector_reward_key,
    resolve_group_value_weights,
)
from sb3_xppo.common.loss_registry import (
    ACTOR_LOSSES,
    CLIPPING_VALUE_LOSSES,
    DUAL_CLIP_ACTOR_LOSSES,
    VALUE_LOSSES,
    ActorLossName,
    ValueLossName,
    actor_loss_docs,
    check_actor_loss,
    check_actor_loss_kwargs,
    check_delight_temp,
    check_dual_clip,
    check_log_ratio_clamp_option,
    check_min_advantage_std,
    check_value_loss,
    resolve_min_advantage_std,
    resolve_value_loss,
    value_loss_docs,
)
from sb3_xppo.common.option_docs import document_options
from sb3_xppo.common.sequences import check_sequence_batching
from sb3_xppo.common.value_norm import check_normalize_values

ADVANTAGE_NORMALIZATIONS = ("minibatch", "rollout", False)

# (names that other modules and saved code import from here)
__all__ = [
    "ACTOR_LOSSES",
    "ADVANTAGE_NORMALIZATIONS",
    "CLIPPING_VALUE_LOSSES",
    "DUAL_CLIP_ACTOR_LOSSES",
    "GROUP_GRADIENTS",
    "GROUP_VALUE_WEIGHTS",
    "LINEAR_GROUP_REDUCES",
    "VALUE_LOSSES",
    "RecurrentXPPOOptions",
    "XPPOOptions",
    "is_number",
    "resolve_group_value_weights",
    "resolve_min_advantage_std",
    "resolve_value_loss",
]


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

    actor_loss: ActorLossName = option(
        "clip",
        actor_loss_docs() + " (:mod:`~sb3_xppo.common.loss_registry`)",
        check_actor_loss,
    )

    actor_loss_kwargs: dict[str, Any] | None = option(
        None,
        "the actor loss's own keywords, each checked by its declaration (None: its defaults; the built-in losses take none)",
        check_actor_loss_kwargs,
    )

    value_loss: ValueLossName | None = option(
        None,
        "None (default, PPO's meaning: ``'sb3'`` when ``clip_range_vf`` is set, else ``'mse'``; also after "
        f"``load()`` of a PPO checkpoint), {value_loss_docs()}; ``'hl_gauss'``'s support is "
        "``policy_kwargs=dict(hl_gauss=...)``. The clipping losses need ``clip_range_vf``.",
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
