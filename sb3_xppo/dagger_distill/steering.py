"""
:class:`~sb3_xppo.dagger_distill.DaggerCallback`'s steering (:class:`Steering`): during one ``learn()``, the action
hook that executes the teacher's action with probability ``beta``, and the ``train()`` loss hooks of a loss-hook student.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import RolloutBufferSamples
from torch.utils.hooks import RemovableHandle

from sb3_xppo.dagger_distill.aggregation import Aggregation
from sb3_xppo.dagger_distill.masks import actions_allowed
from sb3_xppo.dagger_distill.patching import StudentPatch
from sb3_xppo.dagger_distill.pytree import Tree, where_rows


class Steering:
    """
    Steers one student from :meth:`attach` (training start) to :meth:`release` (training end): students of the XPPO
    family through ``register_action_hook`` (and ``register_loss_hook``, ``register_auxiliary_loss_hook``), any other
    through a :class:`~sb3_xppo.dagger_distill.patching.StudentPatch` calling the same action hook.

    :param aggregation: the student's dataset and fitting (the loss hooks' distillation loss), its distiller with the
        callback's options (``rl_coef``, ``gradient_surgery``)
    """

    def __init__(self, aggregation: Aggregation) -> None:
        self.model: Any = aggregation.model
        self.aggregation = aggregation
        self.pair = aggregation.pair
        self.options = aggregation.distiller.options
        #: the distillation loss joins the RL loss through ``register_loss_hook``
        self.uses_hook = hasattr(self.model, "register_loss_hook")
        self.beta = 0.0  # the beta schedule's value
        self.in_rollout = False  # between on_rollout_start and on_rollout_end
        self._handles: list[RemovableHandle] = []
        self._patch: StudentPatch | None = None  # a stock student's
        self._running = False  # from attach to release
        self._learn: tuple[Any, ...] = ()  # learn_id() of the learn() attached in
        self._step_masks: np.ndarray | None = None  # the action masks the policy acted with at this step

    @property
    def busy(self) -> bool:
        """Whether a stock student's patched ``learn()`` is running."""
        return self._patch is not None and self._patch.busy

    def attach(self, callback: BaseCallback) -> None:
        """
        Steer the student for this ``learn()``.

        :param callback: the callback the ``learn()`` runs with (a patched ``collect_rollouts`` without it detaches)
        """
        self.release()
        model = self.model
        self._running, self._learn = True, learn_id(model)
        try:
            if self.uses_hook:
                self._handles.append(model.register_loss_hook(self.loss_hook, until_learn_ends=True))
            if self.options.gradient_surgery:
                self._handles.append(model.register_auxiliary_loss_hook(self.auxiliary_loss_hook, until_learn_ends=True))
            if hasattr(model, "register_action_hook"):
                self._handles.append(model.register_action_hook(self.steer, until_learn_ends=True))
            else:
                self._patch = StudentPatch(model, callback, self.steer)
                self._patch.attach()
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Undo :meth:`attach`: the hooks removed, the patch detached (idempotent)."""
        self._running = self.in_rollout = False
        while self._handles:
            self._handles.pop().remove()
        if self._patch is not None:
            self._patch.detach()

    def in_learn(self, model: Any) -> bool:
        """Whether ``model`` runs the ``learn()`` this steering was attached in."""
        return self._running and model is self.model and learn_id(model) == self._learn

    def take_step_masks(self) -> np.ndarray | None:
        """The action masks the policy acted with at this step (None: none), once."""
        masks, self._step_masks = self._step_masks, None
        return masks

    def steer(self, model: Any, obs: Tree, actions: th.Tensor, action_masks: np.ndarray | None) -> th.Tensor | None:
        """
        The action hook: with probability ``beta`` the teacher's action in place of the policy's, in the space of
        ``actions`` ([-1, 1] for a squashing policy: gSDE with ``squash_output``, SAC, TD3). A teacher's action that
        ``action_masks`` forbid is not executed. It keeps ``action_masks`` for :meth:`take_step_masks`.

        :return: the actions to execute, or None (the policy's): outside this steering's rollouts, and for a model
            whose ``learn()`` is not the one attached in (an exception left the hooks: they are removed)
        """
        if not self.in_learn(model):
            if model is self.model:
                self.release()
            return None
        self._step_masks = action_masks
        if not self.in_rollout or self.beta <= 0:
            return None
        take = th.rand(actions.shape[0], device=actions.device) < self.beta
        if not take.any():
            return None
        teacher = self.pair.teacher_actions(obs, action_masks).to(actions.device, actions.dtype).reshape(actions.shape)
        if model.policy.squash_output:
            low = th.as_tensor(model.action_space.low, dtype=actions.dtype, device=actions.device)
            high = th.as_tensor(model.action_space.high, dtype=actions.dtype, device=actions.device)
            teacher = 2.0 * (teacher - low) / (high - low) - 1.0
        if action_masks is not None:
            take &= actions_allowed(action_masks, teacher, model.action_space)
        return where_rows(take, teacher, actions)

    def loss_hook(self, model: BaseAlgorithm, rollout_data: RolloutBufferSamples, loss: th.Tensor) -> th.Tensor:
        """
        XPPO's loss hook: ``rl_coef * rl_loss + weight * distill_loss`` on a minibatch of the dataset; ``loss`` as it
        is outside the ``learn()`` attached in.
        """
        if not self.in_learn(model):
            return loss
        # The projector's gradient of the previous minibatch is complete now (XPPO stepped its own optimizer)
        self.aggregation.step_projector()
        rl_loss = loss if self.options.rl_coef == 1.0 else self.options.rl_coef * loss
        if self.options.gradient_surgery:
            return rl_loss  # the distillation loss comes through the auxiliary loss hook
        distill_loss = self.aggregation.weighted_loss(len(rollout_data.advantages))
        return rl_loss if distill_loss is None else rl_loss + distill_loss

    def auxiliary_loss_hook(self, model: BaseAlgorithm, rollout_data: RolloutBufferSamples) -> th.Tensor | None:
        """
        ``gradient_surgery``: XPPO's auxiliary loss hook, ``weight * distill_loss``, whose gradient XPPO projects off
        the RL loss's where they conflict (after :meth:`loss_hook` on the same minibatch); None outside its ``learn()``.
        """
        return self.aggregation.weighted_loss(len(rollout_data.advantages)) if self.in_learn(model) else None


def learn_id(model: BaseAlgorithm) -> tuple[Any, ...]:
    """What SB3's ``_setup_learn`` sets anew at every ``learn()`` call: tells a ``learn()`` from the next one."""
    return (model.start_time, model._total_timesteps, model._num_timesteps_at_start)
