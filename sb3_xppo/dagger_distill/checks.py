"""
The checks of :class:`~sb3_xppo.dagger_distill.DaggerDistiller`, :class:`~sb3_xppo.dagger_distill.DaggerCallback` and
the command: each raises before anything is built, with an error that names the keyword.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecNormalize
from torch import nn
from torch.distributions import Categorical

from sb3_xppo.dagger_distill.actions import same_action_space
from sb3_xppo.dagger_distill.policy_input import is_recurrent
from sb3_xppo.dagger_distill.pytree import best_action
from sb3_xppo.dagger_distill.teacher_obs import same_obs_space


def check_count(name: str, value: Any, low: int = 1) -> None:
    """
    :param name: the keyword, for the error
    :param value: the count
    :param low: the smallest count allowed
    :raises ValueError: unless ``value`` is an int >= ``low`` (a bool is not a count)
    """
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def check_size(name: str, value: Any, optional: bool = False) -> None:
    """
    :param name: the keyword, for the error
    :param value: a size (``buffer_size``, ``batch_size``, ...)
    :param optional: None is allowed (the default is then used)
    :raises ValueError: unless ``value`` is an int >= 1 (or None with ``optional``)
    """
    if optional and value is None:
        return
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be {'None or ' if optional else ''}an int >= 1, got {value!r}")


def check_number(name: str, value: Any, low: float | None = None, high: float | None = None, open_low: bool = False) -> None:
    """
    :param name: the keyword, for the error
    :param value: the number
    :param low: the lower bound (None: none)
    :param high: the upper bound, included (None: none)
    :param open_low: exclude ``low`` itself
    :raises ValueError: unless ``value`` is a finite real number within the bounds (a bool is not a number)
    """
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (low is None or (value > low if open_low else value >= low)) and (high is None or value <= high)
    if not ok:
        bounds = f"{'(' if open_low else '['}{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
        raise ValueError(f"{name} must be a number in {bounds}, got {value!r}")


def check_switch(name: str, value: Any) -> None:
    """
    :param name: the keyword, for the error
    :param value: the switch
    :raises ValueError: unless ``value`` is True or False (numpy's included)
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def check_callable(name: str, value: Any, optional: bool = False) -> None:
    """
    :param name: the keyword, for the error
    :param value: the function
    :param optional: None is allowed
    :raises TypeError: unless ``value`` is callable (or None with ``optional``)
    """
    if optional and value is None:
        return
    if not callable(value):
        expected = "None or a callable" if optional else "a callable, e.g. nll_loss, kl_loss or mse_loss"
        raise TypeError(f"{name} must be {expected}, got {value!r}")


def check_layers(student_layer: Any, teacher_layer: Any) -> None:
    """
    :param student_layer: the student's layer of representation alignment (or None)
    :param teacher_layer: the teacher's layer (or None)
    :raises ValueError: unless both are given or neither
    """
    if (student_layer is None) != (teacher_layer is None):
        raise ValueError("representation alignment needs both student_layer and teacher_layer (or neither)")


def resolve_layer(owner: Any, layer: str | nn.Module | None, name: str) -> nn.Module | None:
    """
    A layer of representation alignment, checked now rather than at the first call.

    :param owner: the policy the layer belongs to (an ``nn.Module``, or an adapter exposing it as ``.module``)
    :param layer: the layer, a module or a submodule name of ``owner`` (or None)
    :param name: ``"student"`` or ``"teacher"``, for the error
    :return: the module (None for None)
    :raises TypeError: for a name given with an ``owner`` that is no ``nn.Module``
    :raises ValueError: for a name that is not a submodule of ``owner``
    """
    if layer is None or isinstance(layer, nn.Module):
        return layer
    if not isinstance(layer, str):
        raise TypeError(f"{name}_layer must be a submodule name or an nn.Module, got {layer!r}")
    module = getattr(owner, "module", owner)
    if not isinstance(module, nn.Module):
        raise TypeError(f"{name}_layer={layer!r} is a name, but the {name} is not an nn.Module: pass the layer module itself")
    try:
        return module.get_submodule(layer)
    except AttributeError:
        names = [n for n, _ in module.named_modules() if n]
        raise ValueError(f"{name}_layer={layer!r} is not a submodule of the {name}; its submodules are {names}") from None


def check_feed_forward_teacher(policy: Any) -> None:
    """
    :param policy: the teacher's SB3 policy
    :raises ValueError: for a recurrent teacher (its LSTM state would have to follow the student's rollouts)
    """
    if is_recurrent(policy):
        raise ValueError(
            f"the teacher is recurrent ({type(policy).__name__}): a recurrent teacher is not supported (its own "
            "LSTM state would have to be tracked through the student's rollouts); distill from a feed-forward "
            "teacher, e.g. one trained on the full (privileged) state"
        )


def check_action_spaces(teacher_space: spaces.Space, student_space: spaces.Space) -> None:
    """
    :param teacher_space: the teacher's action space
    :param student_space: the student's
    :raises ValueError: unless the two are the same space (Box bounds compared as float32)
    """
    if not same_action_space(teacher_space, student_space):
        raise ValueError(f"the teacher acts in {teacher_space} but the student in {student_space}")


def check_teacher_statistics(vec_normalize: VecNormalize | None, teacher_space: spaces.Space, name: str) -> None:
    """
    :param vec_normalize: the teacher's observation statistics (or None)
    :param teacher_space: the observation space the teacher reads
    :param name: what the statistics were given as, for the error
    :raises ValueError: unless the statistics normalize ``teacher_space``
    """
    if vec_normalize is not None and not same_obs_space(vec_normalize.observation_space, teacher_space):
        raise ValueError(f"{name} normalizes {vec_normalize.observation_space} but the teacher reads {teacher_space}")


def check_student(model: Any, rl_coef: float, gradient_surgery: bool) -> None:
    """
    :param model: the SB3 model the callback trains
    :param rl_coef: the callback's ``rl_coef``
    :param gradient_surgery: the callback's ``gradient_surgery``
    :raises ValueError: for a student whose policy has no action distribution, or that cannot take ``rl_coef != 1`` or
        ``gradient_surgery`` (a student without XPPO's loss hooks)
    """
    policy = model.policy
    off_policy = isinstance(model, OffPolicyAlgorithm)
    if off_policy and not hasattr(policy, "actor"):
        raise ValueError(
            f"the student must be PPO, A2C, XPPO, TRPO, MaskablePPO, SAC or TD3; {type(model).__name__} has no actor"
        )
    if not off_policy and not hasattr(policy, "get_distribution"):
        raise ValueError(f"the student's policy {type(policy).__name__} has no action distribution (get_distribution)")
    if rl_coef != 1.0 and not hasattr(model, "register_loss_hook"):
        raise ValueError(
            f"rl_coef={rl_coef} needs a student with a loss hook (sb3_xppo.XPPO); {type(model).__name__} "
            "trains on its own RL loss, so only rl_coef=1 applies (or distill with python -m sb3_xppo.dagger_distill)"
        )
    if gradient_surgery and not hasattr(model, "register_auxiliary_loss_hook"):
        raise ValueError(
            f"gradient_surgery=True needs a student of the XPPO family (sb3_xppo.XPPO, MaskableXPPO, ...), whose "
            f"train() adds the distillation loss to each RL minibatch; {type(model).__name__} takes the callback's "
            "distillation steps apart from its RL updates, so no RL gradient shares them to project off"
        )


def check_heads(student: Any, teacher: Any) -> None:
    """
    One head of the student's output against the teacher's (use with ``tree_map`` over both pytrees).

    :param student: a distribution (or action tensor) of the student
    :param teacher: the teacher's
    :raises ValueError: unless both have the same shapes (and number of classes)
    """
    if isinstance(student, th.Tensor) or isinstance(teacher, th.Tensor):
        s, t = best_action(student), best_action(teacher)
        if s.shape != t.shape:
            raise ValueError(f"actions of shape {tuple(t.shape)} where the student's are {tuple(s.shape)}")
        return
    if student.batch_shape != teacher.batch_shape or student.event_shape != teacher.event_shape:
        raise ValueError(
            f"a head of batch/event shape {tuple(teacher.batch_shape)}/{tuple(teacher.event_shape)} where the student's "
            f"is {tuple(student.batch_shape)}/{tuple(student.event_shape)}"
        )
    if isinstance(student, Categorical) and isinstance(teacher, Categorical) and student.logits.shape != teacher.logits.shape:
        raise ValueError(f"{teacher.logits.shape[-1]} classes where the student has {student.logits.shape[-1]}")
