"""
:class:`~sb3_xppo.dagger_distill.DaggerCallback`'s teacher, resolved (:func:`resolve_teacher`) and bound to the student
it serves (:class:`StudentTeacher`): what each policy reads, the teacher's actions, and a probe that a teacher that does
not fit the student fails before any step.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_xppo.dagger_distill.actions import action_clipper, tree_to_action
from sb3_xppo.dagger_distill.checkpoints import load_sb3_model
from sb3_xppo.dagger_distill.checks import (
    check_action_spaces,
    check_feed_forward_teacher,
    check_heads,
    check_teacher_statistics,
)
from sb3_xppo.dagger_distill.distiller import DaggerDistiller
from sb3_xppo.dagger_distill.masks import mask_size
from sb3_xppo.dagger_distill.options import DistillOptions
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter
from sb3_xppo.dagger_distill.policy_input import (
    PolicyInput,
    batch_first_lstm_states,
    initial_lstm_states,
    is_maskable,
    is_recurrent,
    obs_of,
)
from sb3_xppo.dagger_distill.pytree import Tree, batch_size_of, best_action, check_finite_states, tree_leaves, tree_map
from sb3_xppo.dagger_distill.teacher_obs import ObsKeys, TeacherObs, select_obs, select_space, teacher_obs_keys
from sb3_xppo.dagger_distill.wrappers import raw_obs_source


def resolve_teacher(teacher: Any, options: DistillOptions) -> BasePolicy | Callable[..., Any]:
    """
    :param teacher: an SB3 model, its policy, the path to an SB3 ``.zip``, or a callable ``obs -> Distribution``
    :param options: the callback's options (a checkpoint's ``teacher_algo`` and ``trust_code``)
    :return: the teacher's SB3 policy (loaded on the CPU), or the callable
    :raises ValueError: for a recurrent teacher
    :raises TypeError: for anything else
    """
    if isinstance(teacher, (str, os.PathLike)):
        teacher = load_sb3_model(teacher, options.teacher_algo, device="cpu", trust_code=options.trust_code)
    if isinstance(teacher, BaseAlgorithm):
        teacher = teacher.policy
    if isinstance(teacher, BasePolicy):
        check_feed_forward_teacher(teacher)
        return teacher
    if not callable(teacher):
        raise TypeError(
            f"teacher must be an SB3 model, a path to an SB3 .zip or a callable obs -> Distribution, got {teacher!r}"
        )
    return teacher


def raw_obs_of(env: VecEnv | None, model: BaseAlgorithm) -> tuple[Callable[[], Any] | None, spaces.Space]:
    """
    :param env: the student's env (None: the model has none yet)
    :param model: the student
    :return: ``(get, space)``: ``get()`` gives the raw observations the teacher reads when they are not the student's
        (None when they are, see :func:`~sb3_xppo.dagger_distill.wrappers.raw_obs_source`), in ``space``
    """
    source = raw_obs_source(env) if env is not None else None
    return (None, model.observation_space) if source is None else source


class StudentTeacher:
    """
    A student model and the teacher bound to it: the two callables the distiller fits, what each reads, and the raw
    observations that match the model's ``_last_obs``.

    The teacher reads raw observations (the full Dict of a :class:`~sb3_xppo.dagger_distill.StudentObsWrapper`, the
    original ones under ``VecNormalize``), of which its keys, normalized by its own statistics. They are stored beside
    the student's states (``teacher_states``) when they are not a part of them.

    :param model: the student
    :param teacher: the teacher's SB3 policy or callable (see :func:`resolve_teacher`)
    :param raw_obs: ``(get, space)`` of :func:`raw_obs_of`
    :param keys: ``teacher_obs_keys`` (default: an SB3 teacher's own observation keys)
    :param vec_normalize: the teacher's frozen statistics (or None)
    """

    def __init__(
        self,
        model: Any,
        teacher: BasePolicy | Callable[..., Any],
        raw_obs: tuple[Callable[[], Any] | None, spaces.Space],
        keys: ObsKeys = None,
        vec_normalize: VecNormalize | None = None,
    ) -> None:
        self.model = model
        self.raw_obs, self.raw_space = raw_obs
        self.teacher: Any = teacher
        self.teacher_masked = False
        if isinstance(teacher, BasePolicy):
            check_action_spaces(teacher.action_space, model.action_space)
            keys = teacher_obs_keys(self.raw_space, teacher.observation_space, keys)
            teacher.to(model.device)
            teacher.set_training_mode(False)
            self.teacher = PolicyAdapter(teacher)
            self.teacher_masked = is_maskable(teacher)
        # A missing key fails now
        check_teacher_statistics(vec_normalize, select_space(self.raw_space, keys), "teacher_vec_normalize")
        self.teacher_obs = TeacherObs(keys, vec_normalize)
        self.store_teacher_states = self.raw_obs is not None or vec_normalize is not None
        self.student = PolicyAdapter(model.policy)
        # A maskable student's states carry their action masks, a recurrent one's the LSTM state it saw (PolicyInput)
        self.masked = is_maskable(model.policy)
        self.recurrent = is_recurrent(model.policy)
        self.label_transform = action_clipper(model.action_space, model.device)
        self.last_raw: Any = None  # the raw observations matching the model's _last_obs

    def serves(self, model: Any, raw_space: spaces.Space, store_teacher_states: bool) -> bool:
        """Whether this binding serves ``model`` in an env of the same raw observations."""
        same_env = self.raw_space == raw_space and self.store_teacher_states == store_teacher_states
        return self.student.module is model.policy and same_env

    def observe(self) -> None:
        """Read the raw observations of the env's latest step or reset (call it whenever ``_last_obs`` changes)."""
        if self.raw_obs is not None:
            self.last_raw = self.raw_obs()

    def raw(self) -> Any:
        """The raw observations matching the model's ``_last_obs``."""
        return self.last_raw if self.raw_obs is not None else self.model._last_obs

    def check_arrival(self, obs: Any) -> None:
        """
        :param obs: the student's observations that just arrived (None: none to check)
        :raises ValueError: for a non-finite observation (the student's, or the raw one the teacher reads)
        """

        def row(i: int) -> str:
            return f"env {i} at step {self.model.num_timesteps}"

        cpu = th.device("cpu")
        if obs is not None:
            check_finite_states(obs_as_tensor(obs, cpu), "student observation", row)
        raw = self.last_raw if self.raw_obs is not None else obs
        if self.store_teacher_states and raw is not None:
            check_finite_states(select_obs(obs_as_tensor(raw, cpu), self.teacher_obs.keys), "teacher observation", row)

    def state(self, masks: np.ndarray | None) -> dict[str, Tree]:
        """
        :param masks: the action masks the student acted with (None: all allowed)
        :return: the dataset's fields for the state at the model's ``_last_obs`` (on the CPU)
        """
        cpu = th.device("cpu")
        fields = dict(states=self.student_input(obs_as_tensor(self.model._last_obs, cpu), masks))
        if self.store_teacher_states:
            fields["teacher_states"] = self.teacher_obs(self.raw(), cpu)
        return fields

    def student_input(self, obs: Tree, action_masks: Any = None, initial: bool = False) -> Tree:
        """
        :param obs: the student's observations (tensors)
        :param action_masks: a maskable student's masks (None: all allowed, as MaskablePPO collects without masks)
        :param initial: a recurrent student reads its initial LSTM state (the probe), not the model's
        :return: the state as the student's policy reads it: ``obs``, or for a maskable or recurrent student a
            :class:`PolicyInput` with the masks, and the LSTM state its policy saw before acting on ``obs`` (the model's
            ``_last_lstm_states``: SB3 updates them after the callback's ``on_step``) with the episode-start flag
        """
        if not (self.masked or self.recurrent):
            return obs
        model = self.model
        n, device = batch_size_of(obs), tree_leaves(obs)[0].device
        inputs = PolicyInput(obs=obs)
        if self.masked:
            size = mask_size(model.action_space)
            masks = th.ones(n, size, dtype=th.bool) if action_masks is None else th.as_tensor(action_masks)
            inputs["action_masks"] = masks.reshape(n, size).bool().to(device)
        if self.recurrent:
            if initial:
                lstm_states, starts = initial_lstm_states(model.policy, n, device), th.ones(n)
            else:
                lstm_states = batch_first_lstm_states(model._last_lstm_states.pi)
                starts = th.as_tensor(model._last_episode_starts, dtype=th.float32)
            inputs["lstm_states"] = tuple(x.detach().to(device) for x in lstm_states)
            inputs["episode_starts"] = starts.reshape(n).to(device)
        return inputs

    def teacher_input(self, states: Tree, teacher_states: Tree = None) -> Tree:
        """
        :param states: the student's states
        :param teacher_states: the stored teacher states (None: the teacher reads its keys of ``states``)
        :return: what the teacher reads; a maskable SB3 teacher also reads the student's masks (so its labels are allowed)
        """
        obs = teacher_states if teacher_states is not None else select_obs(obs_of(states), self.teacher_obs.keys)
        if self.teacher_masked and isinstance(states, PolicyInput) and "action_masks" in states:
            return PolicyInput(obs=obs, action_masks=states["action_masks"])
        return obs

    def teacher_actions(self, obs: Tree, action_masks: Any = None) -> th.Tensor:
        """
        :param obs: the student's observations, the model's ``_last_obs`` as tensors on its device
        :param action_masks: a maskable student's masks (or None)
        :return: the teacher's best actions (a Box's clipped to its bounds), as the env takes them
        """
        device = self.model.device
        teacher_obs = self.teacher_obs(self.raw(), device) if self.store_teacher_states else None
        states = obs
        if action_masks is not None:
            masks = th.as_tensor(action_masks, device=device).reshape(batch_size_of(obs), -1).bool()
            states = PolicyInput(obs=obs, action_masks=masks)
        actions = best_action(self.teacher(self.teacher_input(states, teacher_obs)))
        if self.label_transform is not None:
            actions = self.label_transform(obs, actions, None, self.model.num_timesteps)
        return tree_to_action(actions, self.model.action_space)

    def probe(self, distiller: DaggerDistiller) -> None:
        """
        Run the loss once on two sampled observations.

        :param distiller: the distiller of this student and teacher
        :raises ValueError: for a teacher whose actions do not fit the student's, or a ``loss_fn`` that cannot compare them
        """
        space, device = self.model.observation_space, self.model.device
        obs = self.student_input(obs_as_tensor(_samples(space, 2), device), initial=True)
        teacher_obs = self.teacher_obs(_samples(self.raw_space, 2), device) if self.store_teacher_states else None
        teacher_obs = self.teacher_input(obs, teacher_obs)
        with th.no_grad():
            try:
                tree_map(check_heads, self.student(obs), self.teacher(teacher_obs))
            except ValueError as error:
                raise ValueError(
                    f"the teacher's actions do not fit the student's action space {self.model.action_space}: {error}"
                ) from None
            try:
                distiller.compute(obs, teacher_obs)
            except NotImplementedError as error:
                raise ValueError(
                    f"loss_fn cannot compare these teacher and student distributions ({error}); nll_loss and mse_loss "
                    "work across families, kl_loss needs the same family"
                ) from None


def _samples(space: spaces.Space, n: int) -> Any:
    """A batch of ``n`` samples of ``space``, as a VecEnv returns observations."""
    return _stack([space.sample() for _ in range(n)], space)


def _stack(samples: list[Any], space: spaces.Space) -> Any:
    if isinstance(space, spaces.Dict):
        return {k: _stack([s[k] for s in samples], space.spaces[k]) for k in space.spaces}
    return np.stack([np.asarray(s) for s in samples])
