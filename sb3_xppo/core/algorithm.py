"""
The XPPO core shared by :class:`~sb3_xppo.XPPO`, :class:`~sb3_xppo.MaskableXPPO` and :class:`~sb3_xppo.RecurrentXPPO`:
a mixin that owns ``train()`` (PPO's loop with the losses of :mod:`sb3_xppo.functional`, its optimizer step an
:class:`~sb3_xppo.core.optimizer_step.OptimizerStep`), the option setup, the loss hooks, multi-critic setup and the
checks for non-finite data; the rollout is :class:`~sb3_xppo.core.rollout.XPPORolloutMixin`'s. Each algorithm
overrides two small methods, how a minibatch's actions are evaluated (:meth:`XPPOCoreMixin._evaluate_actions`) and
which samples count (:meth:`XPPOCoreMixin._valid_samples`), and names how its rollout calls the policy
(``policy_calls_class``).
"""

import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch as th
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.type_aliases import RolloutBufferSamples
from stable_baselines3.common.utils import explained_variance, update_learning_rate
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.patch_gym import _patch_env
from torch.utils.hooks import RemovableHandle

from sb3_xppo.common.adaptive_lr import (
    adapt_learning_rate,
    check_adaptive_kl,
    mean_approx_kl,
    starting_learning_rate,
    warn_if_schedule_ignored,
)
from sb3_xppo.common.finite import TrainingSnapshot
from sb3_xppo.common.grad_norms import split_parameters
from sb3_xppo.common.options import (
    check_group_gradients,
    check_log_ratio_clamp,
    check_normalize_advantage,
    resolve_group_value_weights,
    resolve_min_advantage_std,
    resolve_value_loss,
)
from sb3_xppo.common.policies import XPPOPolicyMixin
from sb3_xppo.common.schedules import ClipRange, as_clip_schedule, unwrap_clip_schedule
from sb3_xppo.common.value_norm import ValueNormalizer
from sb3_xppo.core.fast_paths import trusted_policy_calls
from sb3_xppo.core.gradient_surgery import pcgrad_group_loss
from sb3_xppo.core.hooks import add_hook
from sb3_xppo.core.optimizer_step import OptimizerStep
from sb3_xppo.core.records import TrainRecord, minibatch_ratio_statistics
from sb3_xppo.core.rollout import XPPORolloutMixin
from sb3_xppo.functional import (
    clipped_value_loss_fn,
    hpo_actor_loss,
    improved_value_clipping_fn,
    ppo_actor_loss,
    spo_actor_loss,
)
from sb3_xppo.functional.masked import EPS, masked_moments, masked_zscore
from sb3_xppo.multi_critic.policies import MULTI_CRITIC_POLICIES, MultiCriticPolicyMixin
from sb3_xppo.vec_env import LeanVecEnv

#: ``actor_loss(log_prob, old_log_prob, advantages, valid) -> (loss, skipped)`` (see XPPOCoreMixin._actor_loss_fn)
ActorLoss = Callable[[th.Tensor, th.Tensor, th.Tensor, "th.Tensor | None"], "tuple[th.Tensor, th.Tensor | None]"]
#: ``hook(model, rollout_data, loss) -> loss``: called once per minibatch with the RL loss, returns the loss to optimise
LossHook = Callable[[Any, RolloutBufferSamples, th.Tensor], th.Tensor]
#: ``hook(model, rollout_data) -> loss or None``: an auxiliary loss whose gradient is projected off the RL loss's (PCGrad)
AuxiliaryLossHook = Callable[[Any, RolloutBufferSamples], "th.Tensor | None"]


def valid_mean(x: th.Tensor, valid: th.Tensor | None, dim: int | None = None) -> th.Tensor:
    """
    The mean over the valid samples: ``x.mean()`` (all count), else ``x[valid].mean()``, the form sb3-contrib's
    ``RecurrentPPO`` reduces its padded minibatches with (bit for bit).

    :param x: ``(batch, ...)``
    :param valid: ``(batch,)`` bool, or None
    :param dim: reduce this dim only (e.g. 0, keeping a group dim)
    :return: the mean
    """
    if valid is not None:
        x = x[valid]
    return x.mean() if dim is None else x.mean(dim=dim)


def reduce_value_losses(value_losses: th.Tensor, weights: th.Tensor | None) -> th.Tensor:
    """
    The value loss the critics minimize: a single critic's as it is, one per reward group summed, weighted by the
    groups' value-loss weights where there are any.

    :param value_losses: a scalar, or ``(G,)`` one per reward group
    :param weights: ``(G,)`` or None (the plain sum)
    :return: a scalar
    """
    if value_losses.ndim == 0:  # (no sum of a single value loss: one more node in the graph, the same numbers)
        return value_losses
    return value_losses.sum() if weights is None else (value_losses * weights).sum()


def zscore_group_terms(terms: th.Tensor, valid: th.Tensor | None = None, minibatch: bool = False) -> th.Tensor:
    """
    The groups' terms of the combined advantages normalized as the combined advantages are: each term minus its mean
    over the (valid) samples, all divided by the spread of their sum; so the normalized terms sum to the z-scored
    combined advantages (up to rounding).

    :param terms: ``(batch, G)``
    :param valid: ``(batch,)`` bool, or None (all count)
    :param minibatch: PPO's per-minibatch form, ``/ (std + 1e-8)`` with the unbiased std (left as they are where fewer
        than two samples count); else the rollout's, :func:`~sb3_xppo.functional.masked.masked_zscore`'s
        ``/ sqrt(var + eps)`` with the population variance
    :return: ``(batch, G)``
    """
    counted = terms if valid is None else terms[valid]
    if minibatch and len(counted) <= 1:
        return terms
    centred = terms - counted.mean(0)
    if minibatch:
        return centred / (counted.sum(-1).std() + 1e-8)
    _, var = masked_moments(counted.sum(-1))
    return centred * th.rsqrt(var + EPS)


class XPPOCoreMixin(XPPORolloutMixin):
    """
    XPPO's training on top of an SB3 on-policy algorithm (PPO, or sb3-contrib's MaskablePPO and RecurrentPPO): put
    it first in the bases, ``class XPPO(XPPOCoreMixin, PPO)``. The algorithm's ``__init__`` checks the options with
    :func:`sb3_xppo.common.options.check_xppo_options` before building anything, hands its parent PPO's keywords and
    then calls :meth:`_init_xppo`.
    """

    #: check rollouts and train() for non-finite values (see :class:`~sb3_xppo.XPPO`)
    check_finite: bool = True
    #: log the actor's and the critics' gradient norms before clipping (``train/grad_norm_actor``, ...,
    #: :func:`~sb3_xppo.common.grad_norms.grad_norm_log_values`): None logs them for multi-critic models only
    log_grad_norms: bool | None = None
    #: clip the actor's and the critics' gradients to ``max_grad_norm`` each on its own, not by one joint norm: None
    #: does so for multi-critic models of two groups or more, whose critics' gradients would shrink the actor's steps
    #: (README, Multi-critic); one group stays plain XPPO's, bit for bit
    clip_grad_per_part: bool | None = None
    #: multi-critic: the weight of each group's value loss in the critics' sum, the constructor's
    #: ``group_value_weights`` (:func:`~sb3_xppo.common.options.resolve_group_value_weights`; None, the mode's
    #: default, also for a model saved before the keyword existed)
    group_value_weights: str | Sequence[float] | None = None
    #: the learning rate of the KL-adaptive rule (``adaptive_kl``) that the next ``train()`` starts from, saved with
    #: the model; None before the rule's first update (the start is then ``learning_rate``'s value at progress 1)
    adaptive_kl_lr: float | None = None
    #: this algorithm's XPPO rollout buffers for (Box, Dict) observations, single and multi-critic (None: the parent's)
    xppo_buffer_classes: ClassVar[tuple[type[RolloutBuffer], type[RolloutBuffer]] | None] = None
    multi_critic_buffer_classes: ClassVar[tuple[type[RolloutBuffer], type[RolloutBuffer]] | None] = None

    # Set by the SB3 algorithm
    policy: Any
    rollout_buffer: Any
    rollout_buffer_class: type[RolloutBuffer] | None
    rollout_buffer_kwargs: dict[str, Any]
    policy_class: type
    policy_kwargs: dict[str, Any]
    observation_space: spaces.Space
    action_space: spaces.Space
    device: th.device
    logger: Any
    clip_range: Any
    clip_range_vf: Any
    normalize_advantage: Any
    n_epochs: int
    batch_size: int
    ent_coef: float
    vf_coef: float
    max_grad_norm: float
    target_kl: float | None
    verbose: int
    num_timesteps: int
    _n_updates: int
    _last_obs: Any
    _current_progress_remaining: float
    # Set by _init_xppo
    actor_loss: str
    value_loss: str | None
    dual_clip: float | None
    delightful: bool
    delight_temp: float
    log_ratio_clamp: tuple[float, float] | None
    min_advantage_std: float | None
    adaptive_kl: dict[str, float] | None
    reward_groups: list[str] | None
    group_weights: list[float] | None
    group_reduce: Any
    normalize_groups: bool
    vector_reward_key: str
    normalize_values: bool
    group_gradients: str | None
    _loss_hooks: "OrderedDict[int, LossHook]"
    _auxiliary_loss_hooks: "OrderedDict[int, AuxiliaryLossHook]"

    def __init__(self, policy: Any, env: Any, *args: Any, **kwargs: Any) -> None:
        # An env id is made without a render mode, where SB3's maybe_make_env asks for "rgb_array": the same numbers,
        # faster steps (docs/guide/vec_env.md, render modes); render() then asks for an env built with one
        if isinstance(env, str):
            if kwargs.get("verbose", 0) >= 1:
                print(f"Creating environment from the given name '{env}' (no render mode)")
            env = gym.make(env)
        super().__init__(policy, env, *args, **kwargs)

    def _init_xppo(self, options: dict[str, Any]) -> None:
        """
        Set XPPO's options, as :func:`~sb3_xppo.common.options.check_xppo_options` returned them.

        :param options: attribute name -> value
        """
        for name, value in options.items():
            setattr(self, name, value)
        self._loss_hooks = OrderedDict()
        self._auxiliary_loss_hooks = OrderedDict()
        self._action_hooks = OrderedDict()
        self._learn_hooks = []
        if self.adaptive_kl is not None:
            warn_if_schedule_ignored(self.learning_rate)  # type: ignore[attr-defined]

    def _setup_model(self) -> None:
        # load(..., group_gradients=...) sets the attribute unchecked
        checked = {"reward_groups": self.reward_groups, "group_reduce": self.group_reduce}
        self.group_gradients = check_group_gradients(self.group_gradients, checked)
        if self.reward_groups is not None:
            self._setup_multi_critic()
        if self.rollout_buffer_class is None and self.xppo_buffer_classes is not None:
            box, dict_obs = self.xppo_buffer_classes
            self.rollout_buffer_class = dict_obs if isinstance(self.observation_space, spaces.Dict) else box
        self._setup_value_head()
        # The parent wraps the clip ranges in FloatSchedule, which would turn a (low, high) pair into a float
        self.clip_range = as_clip_schedule(self.clip_range)
        super()._setup_model()  # type: ignore[misc]
        self.clip_range = unwrap_clip_schedule(self.clip_range)
        # A PPO checkpoint stores normalize_advantage as a bool; a saved pair comes back from JSON as a list
        self.normalize_advantage = check_normalize_advantage(self.normalize_advantage)
        # None is PPO's meaning, also for a PPO checkpoint (which has no value_loss): clip when clip_range_vf is set
        self.value_loss = resolve_value_loss(self.value_loss, self.clip_range_vf)
        self.log_ratio_clamp = check_log_ratio_clamp(self.log_ratio_clamp)
        # load(..., adaptive_kl=...) sets the attribute unchecked
        self.adaptive_kl = check_adaptive_kl(self.adaptive_kl)
        if self.group_gradients is not None and not getattr(self.rollout_buffer, "keeps_group_terms", False):
            raise ValueError(
                f"group_gradients={self.group_gradients!r} needs a multi-critic rollout buffer that keeps each group's "
                "term of the advantages (sb3_xppo.multi_critic.MultiCriticBufferMixin, group_terms=True), got "
                f"{type(self.rollout_buffer).__name__}"
            )
        # A checkpoint saved before value normalization existed has no such attribute
        self.normalize_values = bool(getattr(self, "normalize_values", False))
        if self.normalize_values and isinstance(self.policy, XPPOPolicyMixin):
            # PopArt: the head predicts normalized values, the policy still returns values in return units
            self.policy.attach_value_normalizer()
        elif self.normalize_values and not isinstance(self.policy.value_net, ValueNormalizer):
            # a policy of the user's own: its linear head, one output per critic
            n_outputs = len(self.reward_groups) if self.reward_groups is not None else 1
            self.policy.value_net = ValueNormalizer(self.policy.value_net, n_outputs)

    def _setup_value_head(self) -> None:
        """``value_loss='hl_gauss'``: the policy gets a classification critic (``policy_kwargs['hl_gauss']``)."""
        wants_bins = "hl_gauss" in self.policy_kwargs
        if self.value_loss != "hl_gauss":
            if wants_bins:
                raise ValueError(
                    "policy_kwargs['hl_gauss'] configures the classification critic of value_loss='hl_gauss', "
                    f"but value_loss={self.value_loss!r}"
                )
            return
        if not issubclass(self.policy_class, XPPOPolicyMixin):
            raise ValueError(
                "value_loss='hl_gauss' needs one of XPPO's policies (a categorical value head): 'MlpPolicy', "
                "'CnnPolicy', 'MultiInputPolicy' (LSTM: 'MlpLstmPolicy', ...) or a subclass of "
                f"sb3_xppo.common.policies.XPPOPolicyMixin, got {self.policy_class.__name__}"
            )
        options = dict(self.policy_kwargs.get("hl_gauss") or {})
        self.policy_kwargs = {**self.policy_kwargs, "hl_gauss": options}
        env = getattr(self, "env", None)
        vec_normalize = self.get_vec_normalize_env() if env is not None else None  # type: ignore[attr-defined]
        normalized = self.normalize_values or (vec_normalize is not None and vec_normalize.norm_reward)
        if not normalized and not {"v_min", "v_max"} & set(options):
            warnings.warn(
                "value_loss='hl_gauss' without normalize_values=True or a reward-normalizing VecNormalize: the "
                "classification critic's default support [-10, 10] is then in the environment's return units, and "
                "returns beyond it are clamped; pass normalize_values=True or policy_kwargs=dict(hl_gauss=dict(v_min=..., "
                "v_max=...))",
                stacklevel=3,
            )

    def _setup_multi_critic(self) -> None:
        """One critic per reward group: the multi-critic policy and buffer, told the number of groups."""
        assert self.reward_groups is not None
        self.policy_class = MULTI_CRITIC_POLICIES.get(self.policy_class, self.policy_class)
        if not issubclass(self.policy_class, MultiCriticPolicyMixin):
            raise ValueError(
                "reward_groups needs a multi-critic policy: 'MlpPolicy', 'CnnPolicy', 'MultiInputPolicy' or a subclass of "
                f"sb3_xppo.multi_critic.MultiCriticPolicyMixin, got {self.policy_class.__name__}"
            )
        self.policy_kwargs = {**self.policy_kwargs, "n_groups": len(self.reward_groups)}
        if self.rollout_buffer_class is None and self.multi_critic_buffer_classes is not None:
            box, dict_obs = self.multi_critic_buffer_classes
            self.rollout_buffer_class = dict_obs if isinstance(self.observation_space, spaces.Dict) else box
        self.rollout_buffer_kwargs = {
            **self.rollout_buffer_kwargs,
            "n_groups": len(self.reward_groups),
            "group_weights": self.group_weights,
            "group_reduce": self.group_reduce,
            "normalize_groups": self.normalize_groups,
        }
        # with group_gradients the minibatches' advantages are each group's term of the combined ones, (batch, G)
        self.rollout_buffer_kwargs.pop("group_terms", None)  # (a loaded model's, whose option load() may change)
        if self.group_gradients == "pcgrad":
            self.rollout_buffer_kwargs["group_terms"] = True

    def register_loss_hook(self, hook: LossHook, until_learn_ends: bool = False) -> RemovableHandle:
        """
        Add ``hook(model, rollout_data, loss) -> loss`` to every minibatch of :meth:`train`: called once per
        minibatch, after the RL loss (``policy_loss + ent_coef * entropy_loss + vf_coef * value_loss``) is built and
        before ``backward()``, it returns the loss to optimise. Hooks run in registration order; they are runtime
        state, never saved with the model nor pickled.

        :param hook: receives this model, the minibatch (the buffer's samples) and the RL loss; returns the loss
            to optimise
        :param until_learn_ends: remove the hook when the running ``learn()`` returns or raises (for a callback,
            which SB3 does not tell of an exception)
        :return: a handle whose ``remove()`` removes the hook
        """
        signature = "(model, rollout_data, loss) -> loss"
        return add_hook(self._loss_hooks, hook, signature, self._learn_hooks if until_learn_ends else None)

    def register_auxiliary_loss_hook(self, hook: AuxiliaryLossHook, until_learn_ends: bool = False) -> RemovableHandle:
        """
        Add ``hook(model, rollout_data) -> loss or None`` to every minibatch of :meth:`train`: called once per
        minibatch, after the loss hooks, it returns an auxiliary loss (or None for none this minibatch). The
        auxiliary losses are summed, and their gradient is projected off the RL loss's gradient (the loss after the
        loss hooks) where the two conflict, on the parameters the auxiliary loss reaches, then added (PCGrad, Yu et al.
        2020, Gradient Surgery for Multi-Task Learning, arXiv:2001.06782; :func:`~sb3_xppo.functional.pcgrad_auxiliary`):
        the RL gradient is kept whole. Logs ``train/pcgrad_auxiliary_conflict_fraction`` (the share of the minibatches
        where the two conflicted). Costs a second backward pass. Runtime state, as the loss hooks.

        :param hook: receives this model and the minibatch; returns the auxiliary loss (a scalar) or None
        :param until_learn_ends: remove the hook when the running ``learn()`` returns or raises
        :return: a handle whose ``remove()`` removes the hook
        """
        signature = "(model, rollout_data) -> loss or None"
        return add_hook(self._auxiliary_loss_hooks, hook, signature, self._learn_hooks if until_learn_ends else None)

    @staticmethod
    def _wrap_env(env: Any, verbose: int = 0, monitor_wrapper: bool = True) -> VecEnv:
        # SB3's BaseAlgorithm._wrap_env, but an env that it would put in a DummyVecEnv (an env id, made into an env;
        # a gymnasium env) goes in a LeanVecEnv, which returns the same numbers faster; a VecEnv is kept as it is
        if not isinstance(env, VecEnv):
            env = _patch_env(env)
            if monitor_wrapper and not is_wrapped(env, Monitor):
                if verbose >= 1:
                    print("Wrapping the env with a `Monitor` wrapper")
                env = Monitor(env)
            if verbose >= 1:
                print("Wrapping the env in a LeanVecEnv.")
            env = LeanVecEnv([lambda: env])
        return BaseAlgorithm._wrap_env(env, verbose, monitor_wrapper)

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        # The parent's learn(); the hooks registered until it ends are removed when it returns or raises
        try:
            return super().learn(*args, **kwargs)  # type: ignore[misc]
        finally:
            while self._learn_hooks:
                self._learn_hooks.pop().remove()

    def _excluded_save_params(self) -> list[str]:
        excluded = ["_loss_hooks", "_auxiliary_loss_hooks", "_action_hooks", "_learn_hooks"]
        return [*super()._excluded_save_params(), *excluded]  # type: ignore[misc]

    def __getstate__(self) -> dict[str, Any]:
        # Loss and action hooks are runtime state (usually closures over a callback): never pickled
        state = self.__dict__.copy()
        state["_loss_hooks"], state["_action_hooks"], state["_learn_hooks"] = OrderedDict(), OrderedDict(), []
        state["_auxiliary_loss_hooks"] = OrderedDict()
        return state

    # --- what each algorithm overrides -------------------------------------------------------------------------------

    def _evaluate_actions(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        """
        Values, log-probabilities and entropy of a minibatch's actions under the current policy.

        :param rollout_data: the minibatch
        :param actions: its actions (``long`` and flat for Discrete action spaces)
        :return: ``(values, log_prob, entropy)`` as the policy's ``evaluate_actions``
        """
        return self.policy.evaluate_actions(rollout_data.observations, actions)

    def _valid_samples(self, rollout_data: Any) -> th.Tensor | None:
        """
        Which of a minibatch's samples count in its means.

        :param rollout_data: the minibatch
        :return: a ``(batch,)`` bool tensor, or None when all do
        """
        return None

    # --- train() -------------------------------------------------------------------------------------------------------

    def train(self) -> None:
        """
        Update policy using the currently gathered rollout buffer: PPO's loop, with the losses of
        :mod:`sb3_xppo.functional`. Values, returns and old values may be grouped ``(batch, G)``
        (one critic per reward group): the value loss is then taken per group and summed.

        Bad values never reach the model: a non-finite loss term, hooked loss or gradient norm (looked for once,
        after the epochs, so that no minibatch waits for the device) undoes the whole call, as does any exception
        raised during it, and a ``ValueError`` names the term, the epoch and the minibatch.
        """
        # Switch to train mode (this affects batch norm / dropout)
        self.policy.set_training_mode(True)
        # Update optimizer learning rate
        self._update_learning_rate(self.policy.optimizer)  # type: ignore[attr-defined]
        # Compute current clip range: a float, or ClipRange(low, high)
        clip_range = self.clip_range(self._current_progress_remaining)
        clip_low, clip_high = clip_range if isinstance(clip_range, tuple) else (clip_range, clip_range)
        # Optional: clip range for the value function
        clip_range_vf = None
        if self.clip_range_vf is not None:
            clip_range_vf = self.clip_range_vf(self._current_progress_remaining)

        if self.normalize_advantage == "rollout":
            # Once per rollout, before the epochs: every minibatch sees the same statistics
            if getattr(self.rollout_buffer, "keeps_group_terms", False):
                # group_gradients: each group's term centred, all scaled by the combined advantages' spread
                terms = th.as_tensor(self.rollout_buffer.group_terms)  # (n_steps, n_envs, G)
                normalized = zscore_group_terms(terms.reshape(-1, terms.shape[-1])).reshape(terms.shape)
                self.rollout_buffer.group_terms = normalized.numpy()
            self.rollout_buffer.advantages = masked_zscore(th.as_tensor(self.rollout_buffer.advantages)).numpy()

        snapshot = TrainingSnapshot(self, self.check_finite)  # type: ignore[arg-type]
        record = TrainRecord()
        normalizer = self.policy.value_net if isinstance(getattr(self.policy, "value_net", None), ValueNormalizer) else None
        try:
            if self.normalize_values:
                # PopArt: the statistics take this rollout's returns, the head is rescaled to keep its values
                self.policy.value_net.update(th.as_tensor(self.rollout_buffer.returns, device=self.device))
            if normalizer is not None:
                normalizer.fix_statistics()  # they stay put during the epochs: their std computed once
            with self._optimizer_step() as optimizer_step:
                self._train_epochs(record, optimizer_step, clip_low, clip_high, clip_range_vf)
        except BaseException as exception:
            # Often a consequence: NaN parameters make the next minibatch's distribution refuse its arguments
            snapshot.restore()
            error = record.non_finite_error() if self.check_finite else None
            if error is not None:
                raise error from exception
            raise
        finally:
            if normalizer is not None:
                normalizer.release_statistics()
        error = record.non_finite_error() if self.check_finite else None
        if error is not None:
            snapshot.restore()
            raise error

        ratio_stats = minibatch_ratio_statistics(
            record.log_ratios, record.advantages, clip_low, clip_high, self.dual_clip, self.log_ratio_clamp, record.valid
        )
        self._log_train_stats(
            np.array(record.epochs), th.stack(record.losses).cpu().numpy(), ratio_stats, record.loss, clip_range, clip_range_vf
        )
        if record.skipped:
            self.logger.record("train/skipped_minibatch_fraction", th.stack(record.skipped).float().mean().item())
        if self._log_grad_norms():
            for key, value in optimizer_step.log_values(record.grad_norms).items():
                self.logger.record(key, value)
        if record.group_conflicts:
            self.logger.record("train/pcgrad_conflict_fraction", th.stack(record.group_conflicts).mean().item())
        if optimizer_step.auxiliary_conflicts:
            fraction = th.stack(optimizer_step.auxiliary_conflicts).float().mean().item()
            self.logger.record("train/pcgrad_auxiliary_conflict_fraction", fraction)
        if self.adaptive_kl is not None:
            # the call went through: the rule's learning rate is the model's, for the next call and in a save
            self.adaptive_kl_lr = float(self.policy.optimizer.param_groups[0]["lr"])
            self.logger.record("train/learning_rate", self.adaptive_kl_lr)

    def _train_epochs(
        self,
        record: TrainRecord,
        optimizer_step: OptimizerStep,
        clip_low: float,
        clip_high: float,
        clip_range_vf: float | None,
    ) -> None:
        """
        PPO's epochs over the rollout buffer, each minibatch's loss built from :mod:`sb3_xppo.functional`.

        :param record: filled with what each minibatch gives, kept on the device (no host sync unless ``target_kl``
            is set)
        :param optimizer_step: this call's optimizer step
        :param clip_low: lower clip range of this call
        :param clip_high: upper clip range of this call
        :param clip_range_vf: value clip range of this call (or None)
        """
        actor_loss_fn = self._actor_loss_fn(clip_low, clip_high)
        value_weights = self._group_value_weight_tensor()
        # group_gradients='pcgrad': the minibatches' advantages are the groups' terms (batch, G), one actor loss each
        group_params = [p for p in self.policy.parameters() if p.requires_grad] if self.group_gradients else None
        # The buffer's observations were checked finite (check_finite), and so are the parameters a train() call keeps
        trusted = self.fast_paths and self.check_finite
        continue_training = True
        # train for n_epochs epochs
        for epoch in range(self.n_epochs):
            # Do a complete pass on the rollout buffer
            for rollout_data in self.rollout_buffer.get(self.batch_size):
                actions = rollout_data.actions
                if isinstance(self.action_space, spaces.Discrete):
                    # Convert discrete action from float to long
                    actions = rollout_data.actions.long().flatten()
                valid = self._valid_samples(rollout_data)

                with trusted_policy_calls(self.policy, trusted):
                    values, log_prob, entropy = self._evaluate_actions(rollout_data, actions)
                # (batch,) or, one critic per reward group, (batch, G)
                values = values.reshape(rollout_data.returns.shape)
                advantages = self._normalized_advantages(rollout_data.advantages, valid)

                if actor_loss_fn is None:  # SPO / HPO with an empty trust region: only the critic learns from this rollout
                    policy_loss, skipped = th.zeros((), device=log_prob.device), None
                elif group_params is not None:
                    # PCGrad over the groups' actor losses: the sum's value, the combined gradient (gradient_surgery.py)
                    group_losses, group_skipped = zip(
                        *(actor_loss_fn(log_prob, rollout_data.old_log_prob, terms, valid) for terms in advantages.unbind(-1)),
                        strict=True,
                    )
                    policy_loss, conflicts = pcgrad_group_loss(group_losses, group_params)
                    record.group_conflicts.append(conflicts)
                    skipped = None if group_skipped[0] is None else th.stack(group_skipped).all()
                else:
                    policy_loss, skipped = actor_loss_fn(log_prob, rollout_data.old_log_prob, advantages, valid)
                if advantages.ndim == 2:
                    advantages = advantages.sum(-1)  # (the combined advantages, for the ratio statistics)
                # Reduced over the batch: a scalar, or (G,) one per reward group
                value_losses = self._value_loss(values, rollout_data.old_values, rollout_data.returns, clip_range_vf, valid)
                value_loss = reduce_value_losses(value_losses, value_weights)
                # Entropy loss favor exploration (approximated by -log_prob when there is no analytical form)
                entropy_loss = -valid_mean(-log_prob if entropy is None else entropy, valid)

                if actor_loss_fn is None:
                    loss = self.vf_coef * value_loss
                else:
                    loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss

                with th.no_grad():
                    log_ratio = log_prob - rollout_data.old_log_prob
                record.add(epoch, log_ratio, advantages, valid, policy_loss, value_loss, entropy_loss, value_losses, skipped)

                if self.target_kl is not None:
                    # Approximate reverse KL for early stopping, as PPO (http://joschu.net/blog/kl-approx.html)
                    approx_kl_div = valid_mean((th.exp(log_ratio) - 1) - log_ratio, valid).cpu().numpy()
                    if approx_kl_div > 1.5 * self.target_kl:
                        continue_training = False
                        if self.verbose >= 1:
                            print(f"Early stopping at step {epoch} due to reaching max kl: {approx_kl_div:.2f}")
                        break

                for hook in list(self._loss_hooks.values()):  # (a hook may remove itself)
                    loss = hook(self, rollout_data, loss)
                auxiliary = self._auxiliary_loss(rollout_data)

                # Optimization step: zero_grad, backward (an auxiliary loss's gradient projected), clip grad norm, step
                grad_norm = optimizer_step.step(loss, auxiliary)
                record.hooked_losses.append(loss.detach() if auxiliary is None else (loss + auxiliary).detach())
                record.grad_norms.append(grad_norm)

            self._n_updates += 1
            if self.adaptive_kl is not None:
                self._adapt_learning_rate(record, epoch)
            if not continue_training:
                break
        record.loss = loss

    def _auxiliary_loss(self, rollout_data: Any) -> th.Tensor | None:
        """The sum of the auxiliary loss hooks' losses on this minibatch, None when there is none."""
        losses = [loss for hook in list(self._auxiliary_loss_hooks.values()) if (loss := hook(self, rollout_data)) is not None]
        return None if not losses else losses[0] if len(losses) == 1 else th.stack(losses).sum()

    def _update_learning_rate(self, optimizers: list[th.optim.Optimizer] | th.optim.Optimizer) -> None:
        # SB3's: the schedule's value, logged; with adaptive_kl the rule's current learning rate, which train() logs
        # once the call is through
        if self.adaptive_kl is None:
            super()._update_learning_rate(optimizers)  # type: ignore[misc]
            return
        lr = starting_learning_rate(self.adaptive_kl_lr, self.lr_schedule, self.adaptive_kl)  # type: ignore[attr-defined]
        for optimizer in optimizers if isinstance(optimizers, list) else [optimizers]:
            update_learning_rate(optimizer, lr)

    def _adapt_learning_rate(self, record: TrainRecord, epoch: int) -> None:
        """
        ``adaptive_kl``: the KL-adaptive rule (:func:`~sb3_xppo.common.adaptive_lr.adapt_learning_rate`) on the mean
        approximate KL of the epoch's minibatches, which sets the optimizer's learning rate for the next epoch (one
        host sync per epoch). A call that is undone leaves ``adaptive_kl_lr`` as it was.

        :param record: this call's record, the epoch's minibatches last
        :param epoch: the epoch just done (also one that ``target_kl`` stopped)
        """
        assert self.adaptive_kl is not None
        first = record.epochs.index(epoch)
        kl = mean_approx_kl(record.log_ratios[first:], record.valid[first:])
        optimizer = self.policy.optimizer
        update_learning_rate(optimizer, adapt_learning_rate(optimizer.param_groups[0]["lr"], kl, **self.adaptive_kl))

    def _log_grad_norms(self) -> bool:
        """Whether ``train()`` logs the actor's and the critics' gradient norms (``log_grad_norms``)."""
        return self.reward_groups is not None if self.log_grad_norms is None else self.log_grad_norms

    def _optimizer_step(self) -> OptimizerStep:
        """
        This ``train()`` call's optimizer step: the actor's and the critics' gradients clipped apart
        (``clip_grad_per_part``) and their norms recorded (``log_grad_norms``) where those are on.
        """
        multi = self.reward_groups is not None
        per_part = multi and len(self.reward_groups) > 1 if self.clip_grad_per_part is None else self.clip_grad_per_part
        parts = split_parameters(self.policy) if per_part or self._log_grad_norms() else None
        return OptimizerStep(self.policy, self.max_grad_norm, parts, bool(per_part), fast=self.fast_paths)

    def _actor_loss_fn(self, clip_low: float, clip_high: float) -> ActorLoss | None:
        """
        The actor loss of this call, ``(log_prob, old_log_prob, advantages, valid) -> (loss, skipped)``: the loss
        averaged over the valid samples, and whether ``min_advantage_std`` skipped the minibatch (None when off).

        :param clip_low: lower clip range of this call
        :param clip_high: upper clip range of this call
        :return: the loss, or None when the actor is not to be updated: a linear schedule reaches 0 (and below 0 when
            the last rollout overshoots the budget); the clip loss takes it as PPO does (torch.clamp semantics), so
            XPPO stays PPO's bit for bit, but SPO's and HPO's losses divide by the range, and at <= 0 their trust
            region is empty
        """
        if self.actor_loss != "clip" and min(clip_low, clip_high) <= 0:
            return None
        kwargs: dict[str, Any] = dict(
            eps_clip=(clip_low, clip_high) if clip_low != clip_high else clip_low,
            delightful=self.delightful,
            delight_temp=self.delight_temp,
            log_ratio_clamp=self.log_ratio_clamp,
        )
        dual_clip = dict(dual_clip=self.dual_clip is not None, dual_clip_threshold=self.dual_clip or 3.0)
        if self.actor_loss == "clip":
            loss_fn = partial(ppo_actor_loss, **kwargs, **dual_clip)
        elif self.actor_loss == "hpo":
            loss_fn = partial(hpo_actor_loss, **kwargs)
        else:
            loss_fn = partial(spo_actor_loss, asymmetric=self.actor_loss == "asymmetric_spo", **kwargs, **dual_clip)
        threshold = resolve_min_advantage_std(self.min_advantage_std, self.actor_loss)
        if threshold is None:
            return lambda log_prob, old_log_prob, advantages, valid: (
                valid_mean(loss_fn(log_prob, old_log_prob, advantages, min_advantage_std=None), valid),
                None,
            )

        def skipping(
            log_prob: th.Tensor, old_log_prob: th.Tensor, advantages: th.Tensor, valid: th.Tensor | None
        ) -> tuple[th.Tensor, th.Tensor | None]:
            # DAPO's dynamic sampling: the statistics over the valid samples, the loss kept in the graph at 0
            loss, stats = loss_fn(
                log_prob, old_log_prob, advantages, mask=valid, min_advantage_std=threshold, return_stats=True
            )
            return (loss.mean() if valid is None else loss), stats.var <= threshold**2

        return skipping

    def _normalized_advantages(self, advantages: th.Tensor, valid: th.Tensor | None) -> th.Tensor:
        """
        A minibatch's advantages as the actor loss sees them: with ``normalize_advantage='minibatch'``, PPO's
        z-score (unbiased std; its statistics over the valid samples, as ``RecurrentPPO``), kept in that form for
        exact reproduction; a minibatch of one (valid) sample is left as is instead of becoming NaN.

        With ``group_gradients`` the advantages are the groups' terms ``(batch, G)``: each is centred on its own mean
        and all are divided by the combined advantages' spread (:func:`zscore_group_terms`), so that they sum to the
        z-scored combined advantages.

        :param advantages: ``(batch,)``, or ``(batch, G)`` the groups' terms
        :param valid: ``(batch,)`` bool or None
        :return: the same shape
        """
        if self.normalize_advantage != "minibatch":
            return advantages
        if advantages.ndim == 2:
            return zscore_group_terms(advantages, valid, minibatch=True)
        counted = advantages if valid is None else advantages[valid]
        if len(counted) <= 1:
            return advantages
        return (advantages - counted.mean()) / (counted.std() + 1e-8)

    def _group_value_weight_tensor(self) -> th.Tensor | None:
        """:return: the ``(G,)`` weights of the groups' value losses (``group_value_weights``), None for the plain sum"""
        if self.reward_groups is None:
            return None
        scalarize = not self.normalize_groups and not self.normalize_values
        weights = resolve_group_value_weights(self.group_value_weights, self.group_weights, len(self.reward_groups), scalarize)
        return None if weights is None else th.as_tensor(weights, dtype=th.float32, device=self.device)

    def _value_loss(
        self,
        values: th.Tensor,
        old_values: th.Tensor,
        returns: th.Tensor,
        clip_range_vf: float | None,
        valid: th.Tensor | None = None,
    ) -> th.Tensor:
        """
        The value loss selected by ``value_loss``, averaged over the (valid) samples of the batch.

        :param values: predicted values, ``(batch,)`` or ``(batch, G)``
        :param old_values: values at collection, same shape
        :param returns: TD(lambda) targets, same shape
        :param clip_range_vf: current value clip range (None for ``'mse'`` without one)
        :param valid: ``(batch,)`` bool, the samples that count (None: all)
        :return: a scalar, or ``(G,)`` for grouped values
        """
        if self.normalize_values:
            # In normalized units: commensurate across groups, and clip_range_vf means the same for every group
            values, old_values, returns = (self.policy.value_net.normalize(x) for x in (values, old_values, returns))
        if self.value_loss == "hl_gauss":
            # Cross-entropy of the categorical critic's last forward pass (this minibatch's), clipped in scalar space
            head = self.policy.value_net.head if self.normalize_values else self.policy.value_net
            elementwise = head.loss(returns, old_values, clip_range_vf).reshape(returns.shape)
        elif self.value_loss in ("mse", "sb3") or clip_range_vf is None:
            if self.value_loss == "sb3" and clip_range_vf is not None:
                # PPO's: the prediction is clipped around the old value and only the clipped one is regressed
                values = old_values + th.clamp(values - old_values, -clip_range_vf, clip_range_vf)
            if values.ndim == 1 and valid is None:
                # PPO's own call: mse_loss's built-in mean rounds the gradient exactly as PPO does (bit-exact)
                return F.mse_loss(returns, values)
            if values.shape == returns.shape:
                # clipped_value_loss_fn without a clip is this call (its argument checks cost more than the loss)
                elementwise = F.mse_loss(values, returns, reduction="none")
            else:
                elementwise = clipped_value_loss_fn(values, returns=returns, clip=None, reduction="none")
        elif self.value_loss == "clipped":
            elementwise = clipped_value_loss_fn(values, old_values, returns, clip=clip_range_vf, reduction="none")
        else:
            elementwise = improved_value_clipping_fn(values, old_values, returns, clip=clip_range_vf, reduction="none")
        return valid_mean(elementwise, valid, dim=0)

    def _log_train_stats(
        self,
        epochs: np.ndarray,
        losses: np.ndarray,
        ratio_stats: dict[str, np.ndarray],
        loss: th.Tensor,
        clip_range: float | ClipRange,
        clip_range_vf: float | None,
    ) -> None:
        """
        Record PPO's keys and XPPO's: each the mean over the minibatches, as PPO (``approx_kl`` over the last epoch).

        :param epochs: ``(M,)`` epoch of each of the ``M`` minibatches
        :param losses: ``(M, 3)`` policy, value and entropy losses, or ``(M, 3 + G)`` with the value loss of each group
        :param ratio_stats: per-minibatch statistics of :func:`~sb3_xppo.core.records.minibatch_ratio_statistics`
        :param loss: the last minibatch's loss
        :param clip_range: the clip range of this call
        :param clip_range_vf: the value clip range of this call
        """
        mean_losses = losses.astype(np.float64).mean(axis=0)
        for name, value in zip(("policy_gradient_loss", "value_loss", "entropy_loss"), mean_losses[:3], strict=True):
            self.logger.record(f"train/{name}", value)
        for name in ("clip_fraction_low", "clip_fraction_high", "dual_clip_fraction", "ratio_deviation"):
            self.logger.record(f"train/{name}", ratio_stats[name].mean())
        self.logger.record("train/clip_fraction", ratio_stats["clip_fraction"].mean())
        self.logger.record("train/approx_kl", ratio_stats["approx_kl"][epochs == epochs[-1]].mean())
        # Grouped values: one value loss and explained variance per reward group, by name (or index)
        values, returns = self.rollout_buffer.values, self.rollout_buffer.returns
        for i, group_loss in enumerate(mean_losses[3:]):
            group = self.reward_groups[i] if self.reward_groups is not None else i
            self.logger.record(f"train/value_loss/{group}", group_loss)
            self.logger.record(
                f"train/explained_variance/{group}", explained_variance(values[..., i].flatten(), returns[..., i].flatten())
            )
        if self.reward_groups is not None and hasattr(self.rollout_buffer, "group_log_values"):
            # Per group: the advantages' spread, the scale the combination divided them by, the effective weight
            for key, value in self.rollout_buffer.group_log_values(self.reward_groups).items():
                self.logger.record(key, value)
        explained_var = explained_variance(values.flatten(), returns.flatten())
        if self.normalize_values:
            means, stds = self.policy.value_net.mean.tolist(), self.policy.value_net.std.tolist()
            suffixes = [f"/{group}" for group in self.reward_groups] if self.reward_groups is not None else [""]
            for suffix, mean, std in zip(suffixes, means, stds, strict=True):
                self.logger.record(f"train/value_mean{suffix}", mean)
                self.logger.record(f"train/value_std{suffix}", std)

        self.logger.record("train/loss", loss.item())
        self.logger.record("train/explained_variance", explained_var)
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())

        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        if isinstance(clip_range, tuple):
            low, high = clip_range
            self.logger.record("train/clip_range_low", low)
            self.logger.record("train/clip_range_high", high)
            clip_range = (low + high) / 2
        self.logger.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)
