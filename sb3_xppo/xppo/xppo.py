"""XPPO: SB3's PPO with selectable actor and critic losses, multi-critic advantages and a loss hook."""

from typing import ClassVar

from stable_baselines3 import PPO
from stable_baselines3.common.policies import BasePolicy

from sb3_xppo.common.buffers import XPPODictRolloutBuffer, XPPORolloutBuffer
from sb3_xppo.common.schedules import ClipRange, ClipRangePair
from sb3_xppo.core import LossHook, XPPOCoreMixin, minibatch_ratio_statistics
from sb3_xppo.multi_critic.buffers import MultiCriticDictRolloutBuffer, MultiCriticRolloutBuffer
from sb3_xppo.xppo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

# ClipRange, ClipRangePair and LossHook stay importable here: saved models refer to sb3_xppo.xppo.xppo.ClipRangePair
__all__ = ["XPPO", "ClipRange", "ClipRangePair", "LossHook", "minibatch_ratio_statistics"]


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
        (``batch_size=1`` is refused, as PPO does; a last minibatch of one, where ``batch_size`` does not divide the
        rollout, is left as is, never NaN); ``'rollout'``: z-score the whole rollout once, before the epochs
        (``masked_zscore``); False: no normalization.
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
    :param options: XPPO's options (:class:`~sb3_xppo.XPPOOptions`: the actor and value losses, clipping,
        multi-critic, value normalization, ...); each may also be given as a plain keyword (``actor_loss='spo'``),
        which overrides the object's field
    :param args: PPO's arguments after ``env``, positionally, as PPO takes them
    :param kwargs: PPO's keywords above, by name, and XPPO's options as plain keywords
    """

    xppo_buffer_classes = (XPPORolloutBuffer, XPPODictRolloutBuffer)
    multi_critic_buffer_classes = (MultiCriticRolloutBuffer, MultiCriticDictRolloutBuffer)

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }
