import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import torch as th
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, RolloutBufferSamples, Schedule
from stable_baselines3.common.utils import FloatSchedule, explained_variance
from stable_baselines3.common.vec_env import VecEnv
from torch.utils.hooks import RemovableHandle

from sb3_xppo.functional import clipped_value_loss_fn, improved_value_clipping_fn, ppo_actor_loss, spo_actor_loss
from sb3_xppo.functional.masked import masked_zscore
from sb3_xppo.multi_critic.groups import check_group_options
from sb3_xppo.multi_critic.policies import MULTI_CRITIC_POLICIES, MultiCriticPolicyMixin
from sb3_xppo.multi_critic.wrappers import GroupRewardVecEnv
from sb3_xppo.xppo.buffers import XPPODictRolloutBuffer, XPPORolloutBuffer
from sb3_xppo.xppo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

SelfXPPO = TypeVar("SelfXPPO", bound="XPPO")

#: ``hook(model, rollout_data, loss) -> loss``: called once per minibatch with the RL loss, returns the loss to optimise
LossHook = Callable[["XPPO", RolloutBufferSamples, th.Tensor], th.Tensor]

ACTOR_LOSSES = ("clip", "spo", "asymmetric_spo")
VALUE_LOSSES = ("mse", "sb3", "clipped", "improved")
ADVANTAGE_NORMALIZATIONS = ("minibatch", "rollout", False)
# Smallest clip range handed to SPO, whose penalty divides by it (a linear schedule reaches 0 and below)
MIN_CLIP_RANGE = 1e-8


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


class XPPO(PPO):
    """
    Proximal Policy Optimization with selectable actor and critic losses (XPPO), a drop-in replacement for
    :class:`stable_baselines3.PPO`. With ``actor_loss='clip'`` and ``value_loss='sb3'`` (or ``'mse'`` without
    ``clip_range_vf``) it reproduces PPO exactly; the losses come from :mod:`sb3_xppo.functional`.

    Papers:

    - PPO, clipped surrogate and clipped value loss: Schulman et al. 2017, https://arxiv.org/abs/1707.06347
    - SPO, Simple Policy Optimization: Xie et al. 2025, https://arxiv.org/abs/2401.16025
    - decoupled clip range ``(low, high)``: Zhou et al. 2025
    - dual clip: Ye et al. 2020, Mastering Complex Control in MOBA Games with Deep Reinforcement Learning
    - improved value clipping: Lee & Chung 2024, On Analysis of Clipped Critic Loss in Proximal Policy Gradient
    - delightful policy gradient: Osband 2026, https://arxiv.org/abs/2603.14608
    - GAE: Schulman et al. 2016, https://arxiv.org/abs/1506.02438
    - multi-critic advantages: Mysore et al. 2022, Multi-Critic Actor Learning; Vijayan et al. 2025

    **Loss hook.** ``handle = model.register_loss_hook(hook)`` adds ``hook(model, rollout_data, loss) -> loss``,
    called in :meth:`train` once per minibatch, after the RL loss
    (``policy_loss + ent_coef * entropy_loss + vf_coef * value_loss``) is built and before ``backward()``; it
    returns the loss to optimise (e.g. ``rl_coef * loss + w * extra_loss``). Hooks run in registration order,
    ``handle.remove()`` removes one. They are runtime state: never saved with the model, nor pickled.

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy, ...)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: The learning rate, it can be a function
        of the current progress remaining (from 1 to 0)
    :param n_steps: The number of steps to run for each environment per update
        (i.e. rollout buffer size is n_steps * n_envs where n_envs is number of environment copies running in parallel)
    :param batch_size: Minibatch size
    :param n_epochs: Number of epoch when optimizing the surrogate loss
    :param gamma: Discount factor
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param clip_range: Clipping parameter in (0, 1), a schedule (function of the current progress remaining,
        from 1 to 0), or a ``(low, high)`` pair of those for decoupled clipping: the ratio is clipped to
        ``[1 - low, 1 + high]`` (Zhou et al. 2025). SPO uses the same values as its ``eps``.
    :param clip_range_vf: Clipping parameter for the value function, it can be a function of the current
        progress remaining (from 1 to 0). Used by the clipping value losses ('sb3', 'clipped', 'improved'),
        which require it. IMPORTANT: this clipping depends on the reward scaling.
    :param normalize_advantage: ``'minibatch'`` (True): z-score each minibatch's advantages, PPO's formula
        (a minibatch of one is left as is, never NaN); ``'rollout'``: z-score the whole rollout once, before
        the epochs (``masked_zscore``); False: no normalization.
    :param ent_coef: Entropy coefficient for the loss calculation
    :param vf_coef: Value function coefficient for the loss calculation
    :param max_grad_norm: The maximum value for the gradient clipping
    :param use_sde: Whether to use generalized State Dependent Exploration (gSDE)
        instead of action noise exploration (default: False)
    :param sde_sample_freq: Sample a new noise matrix every n steps when using gSDE
        Default: -1 (only sample at the beginning of the rollout)
    :param rollout_buffer_class: Rollout buffer class to use. If ``None``, :class:`XPPORolloutBuffer`
        (:class:`XPPODictRolloutBuffer` for Dict observations), whose GAE is one ``calc_gae`` call.
    :param rollout_buffer_kwargs: Keyword arguments to pass to the rollout buffer on creation
    :param target_kl: Limit the KL divergence between updates,
        because the clipping is not enough to prevent large update
        see issue #213 (cf https://github.com/hill-a/stable-baselines/issues/213)
        By default, there is no limit on the kl div.
    :param stats_window_size: Window size for the rollout logging, specifying the number of episodes to average
        the reported success rate, mean episode length, and mean reward over
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation
    :param verbose: Verbosity level: 0 for no output, 1 for info messages (such as device or wrappers used), 2 for
        debug messages
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run.
        Setting it to auto, the code will be run on the GPU if possible.
    :param actor_loss: ``'clip'`` (PPO's clipped surrogate), ``'spo'`` (Simple Policy Optimization) or
        ``'asymmetric_spo'`` (PPO's clip where the advantage is positive, SPO where it is not)
    :param value_loss: ``'mse'`` (no clipping), ``'sb3'`` (PPO's: MSE of the clipped prediction only),
        ``'clipped'`` (max of the clipped and unclipped MSE, Schulman et al. 2017) or ``'improved'``
        (Lee & Chung 2024). The clipping losses need ``clip_range_vf``.
    :param dual_clip: None, or the dual clip constant ``c > 1``: for negative advantages the loss is bounded
        by ``-c * A`` however large the ratio grows (Ye et al. 2020)
    :param delightful: gate each advantage by ``sigmoid(-log_prob * A / delight_temp)`` (Osband 2026)
    :param delight_temp: temperature of the delightful gate, > 0
    :param log_ratio_clamp: None, or clamp ``log_prob - old_log_prob`` before ``exp`` to ``(-c, c)`` for a
        float ``c`` or to a ``(low, high)`` pair
    :param reward_groups: None (one critic, the scalar reward), or the number ``G`` of reward groups or their names:
        one critic per group (Mysore et al. 2022). Each step's group rewards are read from
        ``info[vector_reward_key]`` (a length-``G`` vector, MO-Gymnasium's convention; see
        :class:`~sb3_xppo.multi_critic.RewardGroups`), the policy becomes its multi-critic variant
        (:class:`~sb3_xppo.multi_critic.MultiCriticPolicy`; ``policy_kwargs=dict(separate_critics=True)`` gives each
        group its own value network) and the buffer :class:`~sb3_xppo.multi_critic.MultiCriticRolloutBuffer`
        (GAE per group). Logs ``train/value_loss/<group>`` and ``train/explained_variance/<group>``.
    :param group_weights: ``G`` weights >= 0 of the groups' advantages (None: all equal)
    :param group_reduce: how the weighted group advantages are combined: ``'mean'`` (``sum_g w_g A_g / sum_g w_g``),
        ``'sum'``, ``'max'``, ``'min'`` or a callable (see :func:`~sb3_xppo.functional.combine_grouped_advantages`)
    :param normalize_groups: z-score each group's advantages over the rollout before weighting them, so that no
        reward term's scale drowns the others
    :param vector_reward_key: the info key holding each step's reward vector
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float | Schedule | tuple[float | Schedule, float | Schedule] = 0.2,
        clip_range_vf: float | Schedule | None = None,
        normalize_advantage: bool | str = "minibatch",
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        target_kl: float | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        actor_loss: str = "clip",
        value_loss: str = "mse",
        dual_clip: float | None = None,
        delightful: bool = False,
        delight_temp: float = 1.0,
        log_ratio_clamp: float | tuple[float, float] | None = None,
        reward_groups: int | Sequence[str] | None = None,
        group_weights: Sequence[float] | None = None,
        group_reduce: str | Callable[[th.Tensor], th.Tensor] = "mean",
        normalize_groups: bool = True,
        vector_reward_key: str = "vector_reward",
        _init_setup_model: bool = True,
    ):
        # Bad hyperparameters fail here, before any environment or network is built
        normalize_advantage = _check_normalize_advantage(normalize_advantage)
        _check_clip_range(clip_range)
        _check_clip_range_vf(clip_range_vf)
        _check_choice("actor_loss", actor_loss, ACTOR_LOSSES)
        _check_choice("value_loss", value_loss, VALUE_LOSSES)
        if value_loss != "mse" and clip_range_vf is None:
            raise ValueError(
                f"value_loss={value_loss!r} clips the value function and needs clip_range_vf (a float > 0 or a schedule)"
            )
        if value_loss == "mse" and clip_range_vf is not None:
            warnings.warn(
                "clip_range_vf is ignored by value_loss='mse'; pass value_loss='sb3' for PPO's value clipping "
                "(or 'clipped' / 'improved')"
            )
        if dual_clip is not None and (not _is_number(dual_clip) or dual_clip <= 1):
            raise ValueError(f"dual_clip must be None or a number > 1 (Ye et al. 2020), got {dual_clip!r}")
        if not _is_number(delight_temp) or delight_temp <= 0:
            raise ValueError(f"delight_temp must be a number > 0, got {delight_temp!r}")
        log_ratio_clamp = _check_log_ratio_clamp(log_ratio_clamp)
        reward_groups, group_weights = check_group_options(reward_groups, group_weights, group_reduce, vector_reward_key)

        # PPO's batch-size asserts exist only because its normalization could give NaN; XPPO's never does
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=n_epochs,
            gamma=gamma,
            gae_lambda=gae_lambda,
            clip_range=clip_range,  # type: ignore[arg-type]
            clip_range_vf=clip_range_vf,
            normalize_advantage=False,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            target_kl=target_kl,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
        )
        self.normalize_advantage = normalize_advantage  # type: ignore[assignment]
        self.actor_loss = actor_loss
        self.value_loss = value_loss
        self.dual_clip = dual_clip
        self.delightful = delightful
        self.delight_temp = delight_temp
        self.log_ratio_clamp = log_ratio_clamp
        # Multi-critic: the group names (None: one critic), their weights and how their advantages combine
        self.reward_groups = reward_groups
        self.group_weights = group_weights
        self.group_reduce = group_reduce
        self.normalize_groups = normalize_groups
        self.vector_reward_key = vector_reward_key
        self._loss_hooks: OrderedDict[int, LossHook] = OrderedDict()

        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        if self.reward_groups is not None:
            self._setup_multi_critic()
        if self.rollout_buffer_class is None:
            self.rollout_buffer_class = (
                XPPODictRolloutBuffer if isinstance(self.observation_space, spaces.Dict) else XPPORolloutBuffer
            )
        # PPO's own _setup_model only wraps the clip schedules, which XPPO does itself (a pair is not a float)
        OnPolicyAlgorithm._setup_model(self)
        # A PPO checkpoint stores normalize_advantage as a bool; a saved pair comes back from JSON as a list
        self.normalize_advantage = _check_normalize_advantage(self.normalize_advantage)  # type: ignore[assignment]
        self.log_ratio_clamp = _check_log_ratio_clamp(self.log_ratio_clamp)
        if isinstance(self.clip_range, (tuple, list)):
            self.clip_range = ClipRangePair(*self.clip_range)
        elif not isinstance(self.clip_range, ClipRangePair):
            self.clip_range = FloatSchedule(self.clip_range)
        if self.clip_range_vf is not None:
            self.clip_range_vf = FloatSchedule(self.clip_range_vf)

    def _setup_multi_critic(self) -> None:
        """One critic per reward group: the multi-critic policy and buffer, told the number of groups."""
        # Imported here: the multi-critic buffers build on this package's (a module-level import would be circular)
        from sb3_xppo.multi_critic.buffers import MultiCriticDictRolloutBuffer, MultiCriticRolloutBuffer

        assert self.reward_groups is not None
        self.policy_class = MULTI_CRITIC_POLICIES.get(self.policy_class, self.policy_class)  # type: ignore[arg-type]
        if not issubclass(self.policy_class, MultiCriticPolicyMixin):
            raise ValueError(
                "reward_groups needs a multi-critic policy: 'MlpPolicy', 'CnnPolicy', 'MultiInputPolicy' or a subclass of "
                f"sb3_xppo.multi_critic.MultiCriticPolicyMixin, got {self.policy_class.__name__}"
            )
        self.policy_kwargs = {**self.policy_kwargs, "n_groups": len(self.reward_groups)}
        if self.rollout_buffer_class is None:
            dict_obs = isinstance(self.observation_space, spaces.Dict)
            self.rollout_buffer_class = MultiCriticDictRolloutBuffer if dict_obs else MultiCriticRolloutBuffer
        self.rollout_buffer_kwargs = {
            **self.rollout_buffer_kwargs,
            "n_groups": len(self.reward_groups),
            "group_weights": self.group_weights,
            "group_reduce": self.group_reduce,
            "normalize_groups": self.normalize_groups,
        }

    def collect_rollouts(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int
    ) -> bool:
        if self.reward_groups is not None:
            # SB3 offers no hook between env.step() and the buffer: a wrapper gives its loop each step's group rewards
            env = GroupRewardVecEnv(env, len(self.reward_groups), self.vector_reward_key, self.device)
        return super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps)

    def register_loss_hook(self, hook: LossHook) -> RemovableHandle:
        """
        Add ``hook(model, rollout_data, loss) -> loss`` to every minibatch of :meth:`train` (see the class docstring).

        :param hook: receives this model, the minibatch (``RolloutBufferSamples``) and the RL loss; returns the loss
            to optimise
        :return: a handle whose ``remove()`` removes the hook
        """
        if not callable(hook):
            raise TypeError(f"hook must be a callable (model, rollout_data, loss) -> loss, got {hook!r}")
        handle = RemovableHandle(self._loss_hooks)
        self._loss_hooks[handle.id] = hook
        return handle

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_loss_hooks"]

    def __getstate__(self) -> dict[str, Any]:
        # Loss hooks are runtime state (usually closures over a callback): never pickled
        state = self.__dict__.copy()
        state["_loss_hooks"] = OrderedDict()
        return state

    def train(self) -> None:
        """
        Update policy using the currently gathered rollout buffer: PPO's loop, with the losses of
        :mod:`sb3_xppo.functional`. Values, returns and old values may be grouped ``(batch, G)``
        (one critic per reward group): the value loss is then taken per group and summed.
        """
        # Switch to train mode (this affects batch norm / dropout)
        self.policy.set_training_mode(True)
        # Update optimizer learning rate
        self._update_learning_rate(self.policy.optimizer)
        # Compute current clip range: a float, or ClipRange(low, high)
        clip_range = self.clip_range(self._current_progress_remaining)  # type: ignore[operator]
        clip_low, clip_high = clip_range if isinstance(clip_range, tuple) else (clip_range, clip_range)
        # A linear schedule reaches 0, and below 0 when the last rollout overshoots the budget. The clip loss takes
        # it as PPO does (torch.clamp semantics), so XPPO stays PPO's bit for bit; SPO needs a positive range.
        if self.actor_loss != "clip":
            clip_low, clip_high = max(clip_low, MIN_CLIP_RANGE), max(clip_high, MIN_CLIP_RANGE)
        # Optional: clip range for the value function
        clip_range_vf = None
        if self.clip_range_vf is not None:
            clip_range_vf = self.clip_range_vf(self._current_progress_remaining)  # type: ignore[operator]

        if self.normalize_advantage == "rollout":
            # Once per rollout, before the epochs: every minibatch sees the same statistics
            self.rollout_buffer.advantages = masked_zscore(th.as_tensor(self.rollout_buffer.advantages)).numpy()

        actor_loss_fn = ppo_actor_loss if self.actor_loss == "clip" else spo_actor_loss
        actor_loss_kwargs: dict[str, Any] = dict(
            eps_clip=(clip_low, clip_high) if clip_low != clip_high else clip_low,
            delightful=self.delightful,
            delight_temp=self.delight_temp,
            dual_clip=self.dual_clip is not None,
            dual_clip_threshold=self.dual_clip if self.dual_clip is not None else 3.0,
            log_ratio_clamp=self.log_ratio_clamp,
        )
        if self.actor_loss != "clip":
            actor_loss_kwargs["asymmetric"] = self.actor_loss == "asymmetric_spo"

        # Recorded per minibatch and reduced once after the epochs, so that a minibatch needs no device-to-host copy
        # unless target_kl asks for the KL: (policy, value, entropy[, value per group]) losses, log-ratios, advantages
        epochs: list[int] = []
        loss_rows: list[th.Tensor] = []
        log_ratios: list[th.Tensor] = []
        minibatch_advantages: list[th.Tensor] = []

        continue_training = True
        # train for n_epochs epochs
        for epoch in range(self.n_epochs):
            # Do a complete pass on the rollout buffer
            for rollout_data in self.rollout_buffer.get(self.batch_size):
                actions = rollout_data.actions
                if isinstance(self.action_space, spaces.Discrete):
                    # Convert discrete action from float to long
                    actions = rollout_data.actions.long().flatten()

                values, log_prob, entropy = self.policy.evaluate_actions(rollout_data.observations, actions)
                # (batch,) or, one critic per reward group, (batch, G)
                values = values.reshape(rollout_data.returns.shape)
                advantages = rollout_data.advantages
                if self.normalize_advantage == "minibatch" and len(advantages) > 1:
                    # PPO's formula (unbiased std), kept for exact reproduction; a minibatch of one stays as is
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

                policy_loss = actor_loss_fn(log_prob, rollout_data.old_log_prob, advantages, **actor_loss_kwargs).mean()
                # Reduced over the batch: a scalar, or (G,) one per reward group
                value_losses = self._value_loss(values, rollout_data.old_values, rollout_data.returns, clip_range_vf)
                value_loss = value_losses.sum()

                # Entropy loss favor exploration (approximated by -log_prob when there is no analytical form)
                entropy_loss = -th.mean(-log_prob) if entropy is None else -th.mean(entropy)

                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss

                with th.no_grad():
                    log_ratio = log_prob - rollout_data.old_log_prob
                    loss_row = th.stack((policy_loss, value_loss, entropy_loss))
                    if value_losses.ndim > 0:
                        loss_row = th.cat((loss_row, value_losses))
                epochs.append(epoch)
                loss_rows.append(loss_row)
                log_ratios.append(log_ratio)
                minibatch_advantages.append(advantages)

                if self.target_kl is not None:
                    # Approximate reverse KL for early stopping, as PPO (http://joschu.net/blog/kl-approx.html)
                    approx_kl_div = th.mean((th.exp(log_ratio) - 1) - log_ratio).cpu().numpy()
                    if approx_kl_div > 1.5 * self.target_kl:
                        continue_training = False
                        if self.verbose >= 1:
                            print(f"Early stopping at step {epoch} due to reaching max kl: {approx_kl_div:.2f}")
                        break

                for hook in self._loss_hooks.values():
                    loss = hook(self, rollout_data, loss)

                # Optimization step
                self.policy.optimizer.zero_grad()
                loss.backward()
                # Clip grad norm
                th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()

            self._n_updates += 1
            if not continue_training:
                break

        ratio_stats = minibatch_ratio_statistics(log_ratios, minibatch_advantages, clip_low, clip_high, self.dual_clip)
        self._log_train_stats(
            np.array(epochs), th.stack(loss_rows).cpu().numpy(), ratio_stats, loss, clip_range, clip_range_vf
        )

    def _value_loss(
        self, values: th.Tensor, old_values: th.Tensor, returns: th.Tensor, clip_range_vf: float | None
    ) -> th.Tensor:
        """
        The value loss selected by ``value_loss``, averaged over the batch.

        :param values: predicted values, ``(batch,)`` or ``(batch, G)``
        :param old_values: values at collection, same shape
        :param returns: TD(lambda) targets, same shape
        :param clip_range_vf: current value clip range (None for ``'mse'`` without one)
        :return: a scalar, or ``(G,)`` for grouped values
        """
        if self.value_loss in ("mse", "sb3") or clip_range_vf is None:
            if self.value_loss == "sb3" and clip_range_vf is not None:
                # PPO's: the prediction is clipped around the old value and only the clipped one is regressed
                values = old_values + th.clamp(values - old_values, -clip_range_vf, clip_range_vf)
            if values.ndim == 1:
                # PPO's own call: mse_loss's built-in mean rounds the gradient exactly as PPO does (bit-exact)
                return F.mse_loss(returns, values)
            elementwise = clipped_value_loss_fn(values, returns=returns, clip=None, reduction="none")
        elif self.value_loss == "clipped":
            elementwise = clipped_value_loss_fn(values, old_values, returns, clip=clip_range_vf, reduction="none")
        else:
            elementwise = improved_value_clipping_fn(values, old_values, returns, clip=clip_range_vf, reduction="none")
        return elementwise.mean(dim=0)

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
        :param ratio_stats: per-minibatch statistics of :func:`minibatch_ratio_statistics`
        :param loss: the last minibatch's loss
        :param clip_range: the clip range of this call (before any floor)
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
        explained_var = explained_variance(values.flatten(), returns.flatten())

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

    def learn(
        self: SelfXPPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "XPPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfXPPO:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )


def minibatch_ratio_statistics(
    log_ratios: list[th.Tensor],
    advantages: list[th.Tensor],
    clip_low: float,
    clip_high: float,
    dual_clip: float | None,
) -> dict[str, np.ndarray]:
    """
    Statistics of the probability ratio ``r = exp(log_prob - old_log_prob)``, one value per minibatch, computed
    in one pass over all minibatches of a ``train()`` call.

    :param log_ratios: each minibatch's ``log_prob - old_log_prob``
    :param advantages: each minibatch's advantages, as the loss saw them
    :param clip_low: lower clip range, the ratio is clipped below at ``1 - clip_low``
    :param clip_high: upper clip range, the ratio is clipped above at ``1 + clip_high``
    :param dual_clip: the dual clip constant, or None
    :return: ``(M,)`` arrays: ``approx_kl`` (``mean(r - 1 - log r)``), ``clip_fraction_low`` / ``clip_fraction_high``
        (share of ratios below / above the clip range), ``clip_fraction`` (their sum), ``dual_clip_fraction`` (share
        of negative advantages whose ratio exceeds ``dual_clip``) and ``ratio_deviation`` (``mean |r - 1|``)
    """
    sizes = np.array([len(x) for x in log_ratios])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    with th.no_grad():
        log_ratio = th.cat(log_ratios)
        ratio = th.exp(log_ratio)
        # Ye et al. 2020: the bound -c * A is active where A < 0 and r > c
        dual_clipped = (th.cat(advantages) < 0) & (ratio > dual_clip) if dual_clip is not None else th.zeros_like(ratio)
        columns = {
            "approx_kl": (ratio - 1) - log_ratio,
            "clip_fraction_low": (ratio < 1 - clip_low).to(ratio.dtype),
            "clip_fraction_high": (ratio > 1 + clip_high).to(ratio.dtype),
            "dual_clip_fraction": dual_clipped.to(ratio.dtype),
            "ratio_deviation": (ratio - 1).abs(),
        }
        values = th.stack(list(columns.values())).cpu().numpy().astype(np.float64)
    stats = dict(zip(columns, np.add.reduceat(values, starts, axis=1) / sizes, strict=True))
    stats["clip_fraction"] = stats["clip_fraction_low"] + stats["clip_fraction_high"]
    return stats


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _check_normalize_advantage(normalize_advantage: bool | str) -> str | bool:
    """True means 'minibatch' (PPO's); returns 'minibatch', 'rollout' or False."""
    if isinstance(normalize_advantage, (bool, np.bool_)):
        return "minibatch" if normalize_advantage else False
    if normalize_advantage not in ADVANTAGE_NORMALIZATIONS:
        raise ValueError(
            f"normalize_advantage must be one of {ADVANTAGE_NORMALIZATIONS} (True means 'minibatch'), "
            f"got {normalize_advantage!r}"
        )
    return normalize_advantage


def _check_clip_fraction(name: str, value: Any) -> None:
    if callable(value):
        return
    if not _is_number(value) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number in (0, 1) or a schedule (callable of progress_remaining), got {value!r}")


def _check_clip_range(clip_range: Any) -> None:
    if isinstance(clip_range, (tuple, list)):
        if len(clip_range) != 2:
            raise ValueError(
                f"clip_range must be a float in (0, 1), a schedule or a (low, high) pair of those, got {clip_range!r}"
            )
        _check_clip_fraction("clip_range (low)", clip_range[0])
        _check_clip_fraction("clip_range (high)", clip_range[1])
    else:
        _check_clip_fraction("clip_range", clip_range)


def _check_clip_range_vf(clip_range_vf: Any) -> None:
    if clip_range_vf is None or callable(clip_range_vf):
        return
    if not _is_number(clip_range_vf) or clip_range_vf <= 0:
        raise ValueError(f"clip_range_vf must be None (no value clipping), a number > 0 or a schedule, got {clip_range_vf!r}")


def _check_log_ratio_clamp(log_ratio_clamp: Any) -> tuple[float, float] | None:
    if log_ratio_clamp is None:
        return None
    if _is_number(log_ratio_clamp) and log_ratio_clamp > 0:
        return (-float(log_ratio_clamp), float(log_ratio_clamp))
    if (
        isinstance(log_ratio_clamp, (tuple, list))
        and len(log_ratio_clamp) == 2
        and all(_is_number(c) for c in log_ratio_clamp)
        and log_ratio_clamp[0] < log_ratio_clamp[1]
    ):
        return (float(log_ratio_clamp[0]), float(log_ratio_clamp[1]))
    raise ValueError(
        "log_ratio_clamp must be None, a number c > 0 (clamp to (-c, c)) or a (low, high) pair with low < high, "
        f"got {log_ratio_clamp!r}"
    )
