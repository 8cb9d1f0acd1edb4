"""XPPO: SB3's PPO with selectable actor and critic losses, multi-critic advantages and a loss hook."""

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule

from sb3_xppo.common.buffers import XPPODictRolloutBuffer, XPPORolloutBuffer
from sb3_xppo.common.options import check_xppo_options, declare_xppo_options, xppo_arguments
from sb3_xppo.common.schedules import ClipRange, ClipRangePair
from sb3_xppo.core import LossHook, XPPOCoreMixin, minibatch_ratio_statistics
from sb3_xppo.multi_critic.buffers import MultiCriticDictRolloutBuffer, MultiCriticRolloutBuffer
from sb3_xppo.xppo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

# ClipRange, ClipRangePair and LossHook stay importable here: saved models refer to sb3_xppo.xppo.xppo.ClipRangePair
__all__ = ["XPPO", "ClipRange", "ClipRangePair", "LossHook", "minibatch_ratio_statistics"]

SelfXPPO = TypeVar("SelfXPPO", bound="XPPO")


@declare_xppo_options()
class XPPO(XPPOCoreMixin, PPO):
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
    ``model.register_auxiliary_loss_hook(hook)`` adds ``hook(model, rollout_data) -> loss or None`` instead, whose
    gradient is projected off the RL loss's where they conflict (PCGrad, Yu et al. 2020), then added.

    **Non-finite data.** A rollout's rewards and observations are checked once, vectorised, before any update reads
    them (step by step, on the raw values, under a training ``VecNormalize``, whose statistics are then put back),
    and a ``ValueError`` names the env, the step and the Dict key; each ``train()`` call is undone whole when a loss
    term, the hooked loss or the gradient norm was not finite (looked for once after the epochs: no host sync per
    minibatch), or when anything raises inside it. Either way the model's parameters and optimizer state stay as
    they were before the rollout. ``model.check_finite = False`` turns both off (e.g. to spare the one copy of the
    parameters and optimizer state that ``train()`` keeps for the rollback of a very large policy).

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
        ``[1 - low, 1 + high]`` (Zhou et al. 2025). SPO uses the same values as its ``eps``; once a schedule
        reaches 0 (the end of a linear schedule) SPO's trust region is empty and its actor is not updated
        (surrogate and entropy terms dropped; the critic still learns), where the clip loss follows PPO.
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
        (:class:`XPPODictRolloutBuffer` for Dict observations), whose GAE is SB3's, vectorised (bit for bit).
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
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    xppo_buffer_classes = (XPPORolloutBuffer, XPPODictRolloutBuffer)
    multi_critic_buffer_classes = (MultiCriticRolloutBuffer, MultiCriticDictRolloutBuffer)

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
        value_loss: str | None = None,
        dual_clip: float | None = None,
        delightful: bool = False,
        delight_temp: float = 1.0,
        log_ratio_clamp: float | tuple[float, float] | None = None,
        min_advantage_std: float | None = None,
        adaptive_kl: float | dict[str, float] | None = None,
        reward_groups: int | Sequence[str] | None = None,
        group_weights: Sequence[float] | None = None,
        group_reduce: str | Callable[[th.Tensor], th.Tensor] = "mean",
        normalize_groups: bool = True,
        vector_reward_key: str = "vector_reward",
        normalize_values: bool = False,
        group_value_weights: str | Sequence[float] | None = None,
        group_gradients: str | None = None,
        fast_paths: bool = True,
        _init_setup_model: bool = True,
    ):
        # Bad hyperparameters fail here, before any environment or network is built
        options = check_xppo_options(
            clip_range=clip_range,
            clip_range_vf=clip_range_vf,
            normalize_advantage=normalize_advantage,
            **xppo_arguments(locals()),
        )

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
        self._init_xppo(options)

        if _init_setup_model:
            self._setup_model()

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
