"""DaggerCallback: distill a teacher into the SB3 model being trained, during ``learn()``."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import RolloutBufferSamples, Schedule
from stable_baselines3.common.utils import FloatSchedule, obs_as_tensor
from stable_baselines3.common.vec_env import VecNormalize
from torch import nn
from torch.distributions import Categorical
from torch.utils.hooks import RemovableHandle

from sb3_xppo.dagger_distill.actions import action_clipper, same_action_space, tree_to_action
from sb3_xppo.dagger_distill.checkpoints import load_sb3_model
from sb3_xppo.dagger_distill.dataset import AggregatedDataset
from sb3_xppo.dagger_distill.distiller import DaggerDistiller, DistillOutput, _check_count, _check_number, _resolve_layer
from sb3_xppo.dagger_distill.masks import actions_allowed, mask_size
from sb3_xppo.dagger_distill.objectives import Objective, nll_loss
from sb3_xppo.dagger_distill.patching import StudentPatch
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter, student_optimizer
from sb3_xppo.dagger_distill.policy_input import (
    PolicyInput,
    batch_first_lstm_states,
    initial_lstm_states,
    is_maskable,
    is_recurrent,
    obs_of,
)
from sb3_xppo.dagger_distill.pytree import (
    Tree,
    batch_size_of,
    best_action,
    check_finite_states,
    rows_finite,
    sample_action,
    tree_leaves,
    tree_map,
)
from sb3_xppo.dagger_distill.teacher_obs import (
    ObsKeys,
    TeacherObs,
    frozen_vec_normalize,
    same_obs_space,
    select_obs,
    select_space,
    teacher_obs_keys,
)
from sb3_xppo.dagger_distill.wrappers import raw_obs_source


class DaggerCallback(BaseCallback):
    """
    Distill a teacher into the SB3 model being trained (the student), during ``learn()``: DAgger
    (Ross et al. 2011, https://arxiv.org/abs/1011.0686) on the states the student visits.

    Every state the student acts in joins a bounded aggregated dataset; the teacher labels it (noise-free: its
    mode/mean) and the student is fitted to those labels with ``loss_fn``, weighted by ``weight``:

    - a student with a loss hook (:class:`~sb3_xppo.XPPO`, :class:`~sb3_xppo.MaskableXPPO`,
      :class:`~sb3_xppo.RecurrentXPPO`): the distillation loss of a dataset minibatch joins each RL minibatch,
      ``rl_coef * rl_loss + weight * distill_loss``; ``rl_coef=0`` is pure DAgger;
    - any other student (PPO, A2C, TRPO, MaskablePPO, RecurrentPPO, SAC/TD3 actors): the callback takes its own
      gradient steps on the policy's (actor's) optimizer between RL updates, before each rollout and at the end of
      training, so every log-probability PPO stores is the current policy's; ``weight`` scales their learning rate
      (the exact analogue of a loss weight under Adam and RMSprop).

    **Recurrent students** (RecurrentPPO, RecurrentXPPO). With each visited state the dataset stores the actor's
    LSTM state (hidden and cell) *as the policy saw it before acting there* and the episode-start flag
    (a :class:`~sb3_xppo.dagger_distill.policy_input.PolicyInput`); the student's distribution on a stored state is one
    LSTM step from that state, so the loss trains the LSTM's input and recurrent weights through that one step
    (truncated backpropagation through time of length 1), while the stored state itself is a constant, computed by the
    weights of the rollout that visited it. A longer-horizon variant would store whole sequences (the rollout's
    ``(n_steps, n_envs)`` blocks, cut at episode starts) and replay minibatches of them through the LSTM from the state
    stored at each sequence's start, as RecurrentPPO's padded sequence minibatches do, so that gradients reach how
    earlier observations shape the memory; the dataset would then sample sequences, not states. The teacher is
    feed-forward (typically a privileged or full-state teacher); a recurrent teacher, which would need its own LSTM
    state tracked through the student's rollouts, is refused (``ValueError``).

    **Maskable students** (MaskablePPO, MaskableXPPO). Each state's action masks (those the policy acted with, as the
    action hook receives them; all allowed with ``use_masking=False``) are stored with it, and the student's
    distribution is fitted masked. A teacher's label that the state's mask forbids has probability 0 under the masked
    student (its log-probability is about -1e8), so no loss can fit it: that state is dropped from the loss, as a
    non-finite label is, and counted in ``distill/forbidden_labels`` (its share of the sampled states). With ``beta``,
    a teacher's action the mask forbids is never executed: the student's own action is taken. A maskable SB3 teacher
    reads the student's masks too (its labels are then allowed). ``kl_loss`` and ``mse_loss`` compare the student with
    the teacher's distribution restricted to the allowed actions (renormalized; MultiDiscrete and Discrete heads), on
    the states whose teacher label is allowed.

    ``beta`` executes the teacher's action instead of the student's with that probability (DAgger's mixture
    policy); the log-probabilities PPO stores are the student's own of the executed actions, so its ratios stay valid.

    **Behaviour-cloning warm-up** (``pretrain_steps=N``). At the start of the first ``learn()`` on a student, before any
    rollout, the teacher acts alone in the model's own env for ``N`` vector steps (the student's actions are not
    executed, except where the teacher's action is not finite or the student's masks forbid it); each state joins the
    dataset as a rollout's would (with a recurrent student's LSTM state, advanced by its actor without acting), and the
    student takes ``ceil(N * n_envs * n_epochs / batch_size)`` gradient steps on the dataset at its optimizer's own
    learning rate (not scaled by ``weight``), whatever its RL algorithm. The env is then reset (as ``learn()`` resets
    it) so RL starts on fresh episodes: ``_last_obs`` and the episode starts are the reset's, a recurrent student's
    LSTM state is as before. The env's ``Monitor`` sees the teacher's episodes (and must allow early resets, as
    ``make_vec_env``'s does); the model's ``num_timesteps`` and episode statistics do not count these steps.

    **How the student is steered.** From ``on_training_start`` to ``on_training_end``, by one action hook,
    ``hook(model, obs, actions, action_masks) -> actions or None`` (beta), and for loss-hook students the loss hook:

    - students of the XPPO family take both through their ``register_action_hook`` and ``register_loss_hook``: no
      attribute of the model or its policy is set, and XPPO's rollout stores the student's log-probabilities of the
      executed actions (under the same LSTM state and masks);
    - any other student is steered by a :class:`~sb3_xppo.dagger_distill.patching.StudentPatch`, which calls the same
      action hook from the policy's ``forward`` (on-policy) or the model's ``_sample_action`` (off-policy) and stores
      the log-probabilities likewise.

    **What the teacher reads.** The raw observations, never the student's normalized ones: the original observations
    when the student's env is wrapped in ``VecNormalize``, the full Dict when a
    :class:`~sb3_xppo.dagger_distill.StudentObsWrapper` hides privileged keys from the student (whose policy then
    never receives them). Of those, a teacher trained on a Dict reads its own keys (or ``teacher_obs_keys``), and
    ``teacher_vec_normalize`` normalizes them with the teacher's own statistics, frozen, as in the env it was trained
    in (an rl-zoo3 teacher trained with ``normalize: true``). A non-finite observation (student's or teacher's) is a
    ``ValueError`` naming the env, the step and the Dict key, raised before it joins the dataset.

    **Leaving the model as it was.** SB3's ``learn()`` has no hook for an exception (``_on_training_end`` is skipped).
    A stock student's patch has guards that remove it when an exception leaves ``collect_rollouts``, ``train`` or
    ``dump_logs`` (:class:`~sb3_xppo.dagger_distill.patching.StudentPatch`): the model's and policy's attributes are
    then exactly as before. An XPPO student's attributes are never changed, and its hooks are registered until the
    ``learn()`` ends: XPPO removes them when it returns or raises. The callback's next ``learn()`` removes whatever is
    left first. The
    same callback may serve several ``learn()`` calls of one model (the dataset is kept) or move to another model (it
    starts afresh); using it in a second ``learn()`` while one is running is a ``ValueError``.

    Logs ``distill/loss``, ``distill/agreement`` (share of states where the student's best action matches the
    teacher's; continuous actions within 5% of the action range), ``distill/weight``, ``distill/beta``,
    ``distill/dataset_size`` and, for a maskable student, ``distill/forbidden_labels``.

    :param teacher: an SB3 model, the path to an SB3 ``.zip``, or a callable ``obs -> Distribution`` (or pytree,
        as :class:`~sb3_xppo.dagger_distill.policy_adapter.PolicyAdapter` builds them for the student's action space)
        receiving the observation as tensors on the student's device
    :param loss_fn: :func:`~sb3_xppo.dagger_distill.nll_loss` (default), ``kl_loss``, ``mse_loss`` or your own
    :param weight: weight of the distillation loss: a float or a schedule of ``progress_remaining`` (1 -> 0),
        e.g. ``lambda p: p`` to decay to pure RL
    :param rl_coef: weight of the RL loss (loss-hook students only; 0 is pure DAgger)
    :param beta: probability of executing the teacher's action, a float in [0, 1] or a schedule
    :param buffer_size: the aggregated dataset keeps at most this many states (oldest dropped first)
    :param batch_size: distillation minibatch size (default: the model's ``batch_size``, else 64; loss-hook
        students use the RL minibatch's size)
    :param gradient_steps: distillation steps per round (default: as many minibatches as ``n_epochs`` passes over
        the states collected since the last round would take; the model's ``n_epochs``, else 10)
    :param teacher_obs_keys: keys of the (full) Dict observation the teacher reads (default: its own observation keys)
    :param teacher_vec_normalize: the teacher's observation statistics, a ``VecNormalize`` (a frozen snapshot is taken)
        or the path of its ``.pkl`` (rl-zoo3 saves it as ``<log dir>/<env id>/vecnormalize.pkl``); None: the teacher
        reads raw observations
    :param teacher_algo: algorithm of a teacher checkpoint (default: inferred)
    :param teacher_sample: label with a sample of the teacher instead of its mode/mean
    :param entropy_weight: entropy bonus of the distillation loss
    :param student_layer: representation alignment (REPA): a submodule name of the student's policy, or a module
    :param teacher_layer: the teacher's layer (a name in the teacher's policy, or a module)
    :param rep_align_weight: weight of the alignment loss
    :param rep_align_projector: None (identity), True (a linear map trained with the student) or a module
    :param gradient_surgery: loss-hook students only: the distillation loss's gradient is projected off the RL loss's
        where the two conflict, then added (PCGrad, Yu et al. 2020, Gradient Surgery for Multi-Task Learning,
        arXiv:2001.06782; :func:`~sb3_xppo.functional.pcgrad_auxiliary`), through the student's
        ``register_auxiliary_loss_hook``: the RL gradient is kept whole. A stock SB3 student is refused
        (``ValueError``): its distillation steps are taken apart from its RL updates, so no RL gradient shares them
    :param pretrain_steps: vector steps of the teacher's behaviour-cloning warm-up before RL starts (0: none)
    :param verbose: verbosity level
    """

    # Set by _init_callback, when the callback meets its model (the student)
    model: Any  # any SB3 algorithm: XPPO's loss hook and off-policy methods are looked up on it
    _student: PolicyAdapter
    _teacher: Any
    _optimizer: th.optim.Optimizer
    _uses_hook: bool  # the distillation loss joins the RL loss through register_loss_hook
    _epochs: int
    _batch_size: int

    def __init__(
        self,
        teacher: BaseAlgorithm | BasePolicy | str | os.PathLike | Any,
        loss_fn: Objective = nll_loss,
        weight: float | Schedule = 1.0,
        rl_coef: float = 1.0,
        beta: float | Schedule = 0.0,
        buffer_size: int = 50_000,
        batch_size: int | None = None,
        gradient_steps: int | None = None,
        teacher_obs_keys: ObsKeys = None,
        teacher_vec_normalize: VecNormalize | str | os.PathLike | None = None,
        teacher_algo: str | type[BaseAlgorithm] | None = None,
        teacher_sample: bool = False,
        entropy_weight: float = 0.0,
        student_layer: str | nn.Module | None = None,
        teacher_layer: str | nn.Module | None = None,
        rep_align_weight: float = 1.0,
        rep_align_projector: bool | nn.Module | None = None,
        gradient_surgery: bool = False,
        pretrain_steps: int = 0,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be a callable, e.g. nll_loss, kl_loss or mse_loss, got {loss_fn!r}")
        schedules: dict[str, Any] = dict(weight=weight, beta=beta)
        for name, schedule in schedules.items():
            if not callable(schedule):
                _check_number(name, schedule, low=0.0, high=1.0 if name == "beta" else None)
        _check_number("rl_coef", rl_coef, low=0.0)
        if not isinstance(gradient_surgery, (bool, np.bool_)):
            raise ValueError(f"gradient_surgery must be True or False, got {gradient_surgery!r}")
        _check_count("pretrain_steps", pretrain_steps, low=0)
        sizes: dict[str, Any] = dict(buffer_size=buffer_size, batch_size=batch_size, gradient_steps=gradient_steps)
        for name, size in sizes.items():
            if size is not None and (not isinstance(size, int) or size < 1):
                raise ValueError(f"{name} must be {'None or ' if name != 'buffer_size' else ''}an int >= 1, got {size!r}")

        self.teacher_policy: BasePolicy | None = None
        self.teacher_fn: Any = None
        if isinstance(teacher, (str, os.PathLike)):
            teacher = load_sb3_model(teacher, teacher_algo, device="cpu")
        if isinstance(teacher, BaseAlgorithm):
            teacher = teacher.policy
        if isinstance(teacher, BasePolicy):
            if is_recurrent(teacher):
                raise ValueError(
                    f"the teacher is recurrent ({type(teacher).__name__}): a recurrent teacher is not supported (its own "
                    "LSTM state would have to be tracked through the student's rollouts); distill from a feed-forward "
                    "teacher, e.g. one trained on the full (privileged) state"
                )
            self.teacher_policy = teacher
        elif callable(teacher):
            self.teacher_fn = teacher
        else:
            raise TypeError(
                f"teacher must be an SB3 model, a path to an SB3 .zip or a callable obs -> Distribution, got {teacher!r}"
            )
        # A wrong teacher layer name fails now; the student's is checked when the callback meets its model
        teacher_module = self.teacher_policy if self.teacher_policy is not None else self.teacher_fn
        self._teacher_layer = _resolve_layer(teacher_module, teacher_layer, "teacher")
        if (student_layer is None) != (teacher_layer is None):
            raise ValueError("representation alignment needs both student_layer and teacher_layer (or neither)")

        self.loss_fn = loss_fn
        self.weight = FloatSchedule(weight)
        self.beta = FloatSchedule(beta)
        self.rl_coef = float(rl_coef)
        self.gradient_surgery = bool(gradient_surgery)
        self.batch_size = batch_size
        self.gradient_steps = gradient_steps
        self.teacher_obs_keys = teacher_obs_keys
        self.teacher_vec_normalize = None if teacher_vec_normalize is None else frozen_vec_normalize(teacher_vec_normalize)
        self.teacher_sample = teacher_sample
        self.entropy_weight = entropy_weight
        self.student_layer = student_layer
        self.rep_align_weight = rep_align_weight
        self.rep_align_projector = rep_align_projector
        self.pretrain_steps = int(pretrain_steps)
        self._pretrained = False  # the warm-up runs once per student
        self.dataset = AggregatedDataset(buffer_size)
        self.distiller: DaggerDistiller | None = None
        self._pending = 0  # states added since the last distillation round
        self._weight_now = 0.0
        self._beta_now = 0.0
        self._projector_optimizer: th.optim.Optimizer | None = None
        # What the teacher reads: raw observations (see raw_obs_source), then its keys and statistics
        self._teacher_obs = TeacherObs()
        self._raw_obs: Callable[[], Any] | None = None
        self._raw_space: spaces.Space | None = None
        self._teacher_raw: Any = None  # the raw observations matching the model's _last_obs
        self._store_teacher_states = False
        # How the student is steered during one learn() (see the class docstring)
        self._hook_handles: list[RemovableHandle] = []  # XPPO's action hook, and the loss hook of loss-hook students
        self._patch: StudentPatch | None = None  # a stock student's
        self._running = False  # from _attach to _release
        self._learn: tuple[Any, ...] = ()  # _learn_id() of the learn() attached in
        self._in_rollout = False  # between on_rollout_start and on_rollout_end
        self._step_masks: np.ndarray | None = None  # the action masks the policy acted with at this step

    # ----------------------------------------------------------------------------------------------------------------
    # Setup: checks that fail before any step
    # ----------------------------------------------------------------------------------------------------------------

    def init_callback(self, model: BaseAlgorithm) -> None:
        # Refused before BaseCallback points the callback at the new model: the running learn() keeps it
        if self._patch is not None and self._patch.busy:
            raise ValueError(_IN_USE)
        super().init_callback(model)

    def _init_callback(self) -> None:
        model: Any = self.model
        self._release()  # whatever an interrupted learn() may have left behind (see the class docstring)
        policy = model.policy
        source = raw_obs_source(self.training_env) if self.training_env is not None else None
        self._raw_obs = None if source is None else source[0]
        raw_space = model.observation_space if source is None else source[1]
        store = source is not None or self.teacher_vec_normalize is not None
        same_env = self._raw_space == raw_space and self._store_teacher_states == store
        if self.distiller is not None and self._student.module is policy and same_env:
            return  # a further learn() call on the same model: keep the dataset, distiller and projector
        if self.distiller is not None:  # another model (or env): its states are not this student's
            self.dataset = AggregatedDataset(self.dataset.capacity)
            self._pending = 0
            self._pretrained = False
        self._raw_space = raw_space
        off_policy = isinstance(model, OffPolicyAlgorithm)
        if off_policy and not hasattr(policy, "actor"):
            raise ValueError(
                f"the student must be PPO, A2C, XPPO, TRPO, MaskablePPO, SAC or TD3; {type(model).__name__} has no actor"
            )
        if not off_policy and not hasattr(policy, "get_distribution"):
            raise ValueError(f"the student's policy {type(policy).__name__} has no action distribution (get_distribution)")
        self._uses_hook = hasattr(model, "register_loss_hook")
        if self.rl_coef != 1.0 and not self._uses_hook:
            raise ValueError(
                f"rl_coef={self.rl_coef} needs a student with a loss hook (sb3_xppo.XPPO); {type(model).__name__} "
                "trains on its own RL loss, so only rl_coef=1 applies (or distill with python -m sb3_xppo.dagger_distill)"
            )
        if self.gradient_surgery and not hasattr(model, "register_auxiliary_loss_hook"):
            raise ValueError(
                f"gradient_surgery=True needs a student of the XPPO family (sb3_xppo.XPPO, MaskableXPPO, ...), whose "
                f"train() adds the distillation loss to each RL minibatch; {type(model).__name__} takes the callback's "
                "distillation steps apart from its RL updates, so no RL gradient shares them to project off"
            )
        space = model.action_space
        if self.teacher_policy is not None:
            if not same_action_space(self.teacher_policy.action_space, space):
                raise ValueError(f"the teacher acts in {self.teacher_policy.action_space} but the student in {space}")
            keys = teacher_obs_keys(raw_space, self.teacher_policy.observation_space, self.teacher_obs_keys)
            self.teacher_policy.to(model.device)
            self.teacher_policy.set_training_mode(False)
            teacher: Any = PolicyAdapter(self.teacher_policy)
        else:
            keys = self.teacher_obs_keys
            teacher = self.teacher_fn
        teacher_space = select_space(raw_space, keys)  # a missing key fails now
        vec_normalize = self.teacher_vec_normalize
        if vec_normalize is not None and not same_obs_space(vec_normalize.observation_space, teacher_space):
            raise ValueError(
                f"teacher_vec_normalize normalizes {vec_normalize.observation_space} but the teacher reads {teacher_space}"
            )
        self._teacher_obs = TeacherObs(keys, vec_normalize)
        # The teacher's observations are stored beside the student's when they are not a part of them
        self._store_teacher_states = store
        self._student = PolicyAdapter(policy)
        self._teacher = teacher
        # A maskable student's states carry their action masks, a recurrent one's the LSTM state it saw (PolicyInput)
        self._masked = is_maskable(policy)
        self._recurrent = is_recurrent(policy)
        self._teacher_masked = self.teacher_policy is not None and is_maskable(self.teacher_policy)
        self._optimizer = student_optimizer(model)
        self._epochs = getattr(model, "n_epochs", 10)
        self._batch_size = self.batch_size or getattr(model, "batch_size", None) or 64
        atol: float | th.Tensor = 0.1
        if isinstance(space, spaces.Box):
            span = th.as_tensor(space.high - space.low, dtype=th.float32, device=model.device)
            atol = th.where(th.isfinite(span), 0.05 * span, th.full_like(span, 0.1))
        self.distiller = DaggerDistiller(
            self._student,
            self._teacher,
            loss_fn=self.loss_fn,
            teacher_sample=self.teacher_sample,
            entropy_weight=self.entropy_weight,
            student_layer=_resolve_layer(policy, self.student_layer, "student"),
            teacher_layer=self._teacher_layer,
            rep_align_weight=self.rep_align_weight,
            rep_align_projector=self.rep_align_projector,
            label_transform=action_clipper(space, model.device),
            agreement_atol=atol,
            device=model.device,
        )
        try:
            self._probe()
        except BaseException:
            self.distiller = None  # checked again at the next learn()
            raise

    def _probe(self) -> None:
        """Run the loss once on two sampled observations: a teacher that does not fit the student fails here."""
        assert self.distiller is not None
        space, device = self.model.observation_space, self.model.device
        obs = self._student_input(obs_as_tensor(_stack([space.sample(), space.sample()], space), device), initial=True)
        teacher_obs = None
        if self._store_teacher_states:
            raw_space: Any = self._raw_space
            teacher_obs = self._teacher_obs(_stack([raw_space.sample(), raw_space.sample()], raw_space), device)
        teacher_obs = self._teacher_input(obs, teacher_obs)
        with th.no_grad():
            student_out = self._student(obs)
            teacher_out = self._teacher(teacher_obs)
            try:
                tree_map(_check_heads, student_out, teacher_out)
            except ValueError as error:
                raise ValueError(
                    f"the teacher's actions do not fit the student's action space {self.model.action_space}: {error}"
                ) from None
            try:
                self.distiller.compute(obs, teacher_obs)
            except NotImplementedError as error:
                raise ValueError(
                    f"loss_fn cannot compare these teacher and student distributions ({error}); nll_loss and mse_loss "
                    "work across families, kl_loss needs the same family"
                ) from None
        projector = self.distiller.projector
        if isinstance(projector, nn.Module) and any(True for _ in projector.parameters()):
            # Its own optimizer: adding it to the student's would break loading the saved optimizer state
            lr = self._optimizer.param_groups[0]["lr"]
            self._projector_optimizer = th.optim.Adam(projector.parameters(), lr=lr)

    # ----------------------------------------------------------------------------------------------------------------
    # During learn()
    # ----------------------------------------------------------------------------------------------------------------

    def _on_training_start(self) -> None:
        self._update_schedules()
        if self.pretrain_steps > 0 and not self._pretrained:
            self._pretrain()
        self._attach()

    def _on_step(self) -> bool:
        self._check_own_learn()
        # The observation the student just acted on (SB3 updates _last_obs after the callback), checked on arrival
        masks, self._step_masks = self._step_masks, None
        self._add_state(masks)
        # The observation that just arrived, before the policy or the dataset uses it
        if self._raw_obs is not None:
            self._teacher_raw = self._raw_obs()
        self._check_arrival(self.locals.get("new_obs"))
        return True

    def _add_state(self, masks: np.ndarray | None) -> None:
        """Store the state the student is about to act in (the model's ``_last_obs``, with the raw teacher observation)."""
        cpu = th.device("cpu")
        fields = dict(states=self._student_input(obs_as_tensor(self.model._last_obs, cpu), masks))
        if self._store_teacher_states:
            raw = self._teacher_raw if self._raw_obs is not None else self.model._last_obs
            fields["teacher_states"] = self._teacher_obs(raw, cpu)
        self.dataset.add(**fields)
        self._pending += self.training_env.num_envs

    def _check_arrival(self, obs: Any) -> None:
        """A ``ValueError`` for a non-finite observation (the student's, and the raw one the teacher reads)."""

        def row(i: int) -> str:
            return f"env {i} at step {self.model.num_timesteps}"

        cpu = th.device("cpu")
        if obs is not None:
            check_finite_states(obs_as_tensor(obs, cpu), "student observation", row)
        raw = self._teacher_raw if self._raw_obs is not None else obs
        if self._store_teacher_states and raw is not None:
            teacher_obs = select_obs(obs_as_tensor(raw, cpu), self._teacher_obs.keys)
            check_finite_states(teacher_obs, "teacher observation", row)

    def _on_rollout_start(self) -> None:
        # The first observation the rollout acts on, before the policy or the dataset uses it
        if self._raw_obs is not None:
            self._teacher_raw = self._raw_obs()
        self._check_arrival(self.model._last_obs)
        self._update_schedules()
        if not self._uses_hook:
            self._distill_round()
        self._in_rollout = True

    def _on_rollout_end(self) -> None:
        self._check_own_learn()
        self._in_rollout = False

    def _on_training_end(self) -> None:
        try:
            if not self._uses_hook:
                self._distill_round()
        finally:
            self._release()

    def _check_own_learn(self) -> None:
        """A ``ValueError`` when the rollout calling the callback is not its model's (another learn() took it)."""
        if self.locals.get("self", self.model) is not self.model:
            raise ValueError(_IN_USE)

    def _update_schedules(self) -> None:
        progress = self.model._current_progress_remaining
        self._weight_now = self.weight(progress)
        self._beta_now = self.beta(progress)
        if self._weight_now < 0 or not 0 <= self._beta_now <= 1:
            raise ValueError(
                f"the weight schedule must stay >= 0 and beta in [0, 1]; got {self._weight_now}, {self._beta_now}"
            )
        self.logger.record("distill/weight", self._weight_now)
        self.logger.record("distill/beta", self._beta_now)
        self.logger.record("distill/dataset_size", len(self.dataset))

    def _distill_round(self) -> None:
        """Own gradient steps on the student's optimizer, the learning rate scaled by the weight."""
        pending, self._pending = self._pending, 0
        if pending == 0 or self._weight_now == 0 or len(self.dataset) == 0:
            return
        steps = self.gradient_steps
        if steps is None:
            steps = math.ceil(pending * self._epochs / self._batch_size)
        self._fit(steps, self._weight_now)

    def _fit(self, steps: int, lr_scale: float) -> None:
        """``steps`` gradient steps of the distillation loss on the student's optimizer, its learning rate scaled."""
        policy, optimizer = self.model.policy, self._optimizer
        lrs = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] *= lr_scale
        # PPO's and A2C's gradient clipping; TRPO stores 0 (its actor steps are not gradient steps): no clipping
        max_grad_norm = getattr(self.model, "max_grad_norm", None) or None
        policy.set_training_mode(True)
        try:
            for _ in range(steps):
                out = self._distill_loss(self._batch_size)
                if not th.isfinite(out.breakdown.loss):
                    continue  # no usable label in this minibatch
                optimizer.zero_grad()
                out.breakdown.loss.backward()
                if max_grad_norm is not None:
                    params = [p for group in optimizer.param_groups for p in group["params"]]
                    th.nn.utils.clip_grad_norm_(params, max_grad_norm)
                optimizer.step()
                self._step_projector()
        finally:
            for group, lr in zip(optimizer.param_groups, lrs, strict=True):
                group["lr"] = lr
            policy.set_training_mode(False)

    def _pretrain(self) -> None:
        """
        The behaviour-cloning warm-up (``pretrain_steps``, see the class docstring): the teacher acts in the model's env,
        every state joins the dataset, one fit, then the env is reset.
        """
        model, env = self.model, self.training_env
        recurrent_states = getattr(model, "_last_lstm_states", None)
        if self._raw_obs is not None:
            self._teacher_raw = self._raw_obs()
        self._check_arrival(model._last_obs)
        for _ in range(self.pretrain_steps):
            masks = get_action_masks(env) if self._masked and is_masking_supported(env) else None
            self._add_state(masks)
            obs = obs_as_tensor(model._last_obs, model.device)
            actions = self._pretrain_actions(obs, masks)
            if self._recurrent:  # the LSTM state the student would carry to the next observation
                starts = th.as_tensor(model._last_episode_starts, dtype=th.float32, device=model.device)
                with th.no_grad():
                    _, pi = model.policy.get_distribution(obs, model._last_lstm_states.pi, starts)
                model._last_lstm_states = RNNStates(pi, model._last_lstm_states.vf)
            new_obs, _, dones, _ = env.step(actions)
            model._last_obs, model._last_episode_starts = new_obs, dones
            if self._raw_obs is not None:
                self._teacher_raw = self._raw_obs()
            self._check_arrival(new_obs)
        # RL starts on fresh episodes, as learn() starts them
        model._last_obs = env.reset()
        model._last_episode_starts = np.ones((env.num_envs,), dtype=bool)
        if model._vec_normalize_env is not None:
            model._last_original_obs = model._vec_normalize_env.get_original_obs()
        if recurrent_states is not None:
            model._last_lstm_states = recurrent_states
        if self._raw_obs is not None:
            self._teacher_raw = self._raw_obs()
        self._pretrained = True
        states, self._pending = self._pending, 0
        steps = math.ceil(states * self._epochs / self._batch_size)
        self._fit(steps, 1.0)
        self.logger.record("distill/pretrain_states", states)
        if self.verbose >= 1:
            print(f"DaggerCallback: pretrained on {states} states of the teacher's rollout ({steps} gradient steps)")

    def _pretrain_actions(self, obs: Tree, masks: np.ndarray | None) -> np.ndarray:
        """
        The teacher's best actions (env format, Box actions clipped) for the warm-up, the student's sampled action where
        the teacher's is not finite or ``masks`` forbid it.
        """
        space = self.model.action_space
        with th.no_grad():
            actions = self._teacher_actions(obs, masks)
            usable = rows_finite(actions, actions.shape[0])
            if masks is not None:
                usable &= actions_allowed(masks, actions, space)
            if not bool(usable.all()):
                student = sample_action(self._student(self._student_input(obs, masks)))
                student = tree_to_action(student, space).to(actions.dtype).reshape(actions.shape)
                actions = th.where(usable.reshape(-1, *([1] * (actions.ndim - 1))), actions, student)
        actions_np = actions.cpu().numpy()
        if isinstance(space, spaces.Box):
            actions_np = np.clip(actions_np, space.low, space.high)
        return actions_np

    def _loss_hook(self, model: BaseAlgorithm, rollout_data: RolloutBufferSamples, loss: th.Tensor) -> th.Tensor:
        """
        XPPO's loss hook: ``rl_coef * rl_loss + weight * distill_loss`` on a minibatch of the aggregated dataset; the
        loss as it is outside the learn() it was registered in (see :meth:`_steer`).
        """
        if not self._in_learn(model):
            return loss
        # The projector's gradient of the previous minibatch is complete now (XPPO stepped its own optimizer)
        self._step_projector()
        rl_loss = loss if self.rl_coef == 1.0 else self.rl_coef * loss
        if self.gradient_surgery:
            return rl_loss  # the distillation loss comes through the auxiliary loss hook
        distill_loss = self._weighted_distill_loss(len(rollout_data.advantages))
        return rl_loss if distill_loss is None else rl_loss + distill_loss

    def _auxiliary_loss_hook(self, model: BaseAlgorithm, rollout_data: RolloutBufferSamples) -> th.Tensor | None:
        """
        ``gradient_surgery``: XPPO's auxiliary loss hook, ``weight * distill_loss``, whose gradient XPPO projects off
        the RL loss's where they conflict (after :meth:`_loss_hook` on the same minibatch); None outside its learn().
        """
        return self._weighted_distill_loss(len(rollout_data.advantages)) if self._in_learn(model) else None

    def _weighted_distill_loss(self, batch_size: int) -> th.Tensor | None:
        """``weight * distill_loss`` on a minibatch of the aggregated dataset, or None (weight 0, no usable label)."""
        if self._weight_now == 0 or len(self.dataset) == 0:
            return None
        out = self._distill_loss(batch_size)
        if not th.isfinite(out.breakdown.loss):
            return None
        return self._weight_now * out.breakdown.loss

    def _distill_loss(self, batch_size: int) -> DistillOutput:
        assert self.distiller is not None
        batch = tree_map(lambda x: x.to(self.model.device), self.dataset.sample(batch_size))
        out = self.distiller.compute(batch["states"], self._teacher_input(batch["states"], batch.get("teacher_states")))
        with th.no_grad():
            agreement = self.distiller.agreement(out.student_out, out.labels, out.valid)
        if th.isfinite(out.breakdown.loss):
            self.logger.record_mean("distill/loss", out.breakdown.loss.item())
        self.logger.record_mean("distill/agreement", agreement.item())
        if out.forbidden is not None:
            self.logger.record_mean("distill/forbidden_labels", out.forbidden.float().mean().item())
        return out

    def _step_projector(self) -> None:
        if self._projector_optimizer is not None:
            self._projector_optimizer.step()
            self._projector_optimizer.zero_grad()

    # ----------------------------------------------------------------------------------------------------------------
    # What the student and the teacher read; beta's teacher actions
    # ----------------------------------------------------------------------------------------------------------------

    def _student_input(self, obs: Tree, action_masks: Any = None, initial: bool = False) -> Tree:
        """
        The student's state as its policy reads it: the observation, or for a maskable or recurrent student a
        :class:`PolicyInput` with the action masks (all allowed when MaskablePPO collects without masks), and the
        LSTM state its policy saw before acting on ``obs`` (the model's ``_last_lstm_states``: SB3 updates them after
        the callback's ``on_step``) with the episode-start flag, or with ``initial`` the initial state (the probe).
        """
        if not (self._masked or self._recurrent):
            return obs
        n, device = batch_size_of(obs), tree_leaves(obs)[0].device
        inputs = PolicyInput(obs=obs)
        if self._masked:
            size = mask_size(self.model.action_space)
            masks = th.ones(n, size, dtype=th.bool) if action_masks is None else th.as_tensor(action_masks)
            inputs["action_masks"] = masks.reshape(n, size).bool().to(device)
        if self._recurrent:
            if initial:
                lstm_states, starts = initial_lstm_states(self.model.policy, n, device), th.ones(n)
            else:
                lstm_states = batch_first_lstm_states(self.model._last_lstm_states.pi)
                starts = th.as_tensor(self.model._last_episode_starts, dtype=th.float32)
            inputs["lstm_states"] = tuple(x.detach().to(device) for x in lstm_states)
            inputs["episode_starts"] = starts.reshape(n).to(device)
        return inputs

    def _teacher_input(self, states: Tree, teacher_states: Tree = None) -> Tree:
        """
        What the teacher reads: the stored teacher states, else its keys of the student's observations; a maskable
        SB3 teacher also reads the student's action masks (it acts as it was trained to, so its labels are allowed).
        """
        obs = teacher_states if teacher_states is not None else select_obs(obs_of(states), self._teacher_obs.keys)
        if self._teacher_masked and isinstance(states, PolicyInput) and "action_masks" in states:
            return PolicyInput(obs=obs, action_masks=states["action_masks"])
        return obs

    def _teacher_actions(self, obs: Tree, action_masks: Any = None) -> th.Tensor:
        """
        The teacher's (clipped) best action on the student's observations ``obs`` (the model's ``_last_obs``), with
        the masks of a maskable student.
        """
        assert self.distiller is not None
        teacher_obs = None
        if self._store_teacher_states:
            raw = self._teacher_raw if self._raw_obs is not None else self.model._last_obs
            teacher_obs = self._teacher_obs(raw, self.model.device)
        states = obs
        if action_masks is not None:
            n = batch_size_of(obs)
            masks = th.as_tensor(action_masks, device=self.model.device).reshape(n, -1).bool()
            states = PolicyInput(obs=obs, action_masks=masks)
        actions = best_action(self._teacher(self._teacher_input(states, teacher_obs)))
        if self.distiller.label_transform is not None:  # clipped to the Box bounds
            actions = self.distiller.label_transform(obs, actions, None, self.num_timesteps)
        return tree_to_action(actions, self.model.action_space)

    def _steer(self, model: Any, obs: Tree, actions: th.Tensor, action_masks: np.ndarray | None) -> th.Tensor | None:
        """
        The action hook (XPPO's ``register_action_hook``, or a stock student's :class:`StudentPatch`): with probability
        beta the teacher's action in place of the policy's, in the space of the policy's ``actions`` ([-1, 1] for a
        squashing policy: gSDE with ``squash_output``, SAC, TD3); a teacher's action the ``action_masks`` forbid is not
        executed. None (the policy's actions) outside this callback's rollouts; called by a model whose learn() is not
        the one the hooks were registered in (an exception left them), it removes them. It also keeps the step's
        ``action_masks``, which :meth:`_on_step` stores with the state.
        """
        if not self._in_learn(model):
            if model is self.model:
                self._release()
            return None
        self._step_masks = action_masks  # stored with the state (on_step)
        if not self._in_rollout or self._beta_now <= 0:
            return None
        take = th.rand(actions.shape[0], device=actions.device) < self._beta_now
        if not take.any():
            return None
        teacher = self._teacher_actions(obs, action_masks).to(actions.device, actions.dtype).reshape(actions.shape)
        if model.policy.squash_output:
            low = th.as_tensor(model.action_space.low, dtype=actions.dtype, device=actions.device)
            high = th.as_tensor(model.action_space.high, dtype=actions.dtype, device=actions.device)
            teacher = 2.0 * (teacher - low) / (high - low) - 1.0
        if action_masks is not None:
            take &= actions_allowed(action_masks, teacher, model.action_space)
        return th.where(take.reshape(-1, *([1] * (actions.ndim - 1))), teacher, actions)

    # ----------------------------------------------------------------------------------------------------------------
    # Steering during learn(): hooks or a StudentPatch, attached at training start and released at its end
    # ----------------------------------------------------------------------------------------------------------------

    def _attach(self) -> None:
        """Steer the student for this learn(): XPPO's hooks, else a :class:`StudentPatch` (see the class docstring)."""
        self._release()
        model = self.model
        self._running, self._learn = True, _learn_id(model)
        try:
            if self._uses_hook:
                self._hook_handles.append(model.register_loss_hook(self._loss_hook, until_learn_ends=True))
            if self.gradient_surgery:
                hook = self._auxiliary_loss_hook
                self._hook_handles.append(model.register_auxiliary_loss_hook(hook, until_learn_ends=True))
            if hasattr(model, "register_action_hook"):
                self._hook_handles.append(model.register_action_hook(self._steer, until_learn_ends=True))
            else:
                self._patch = StudentPatch(model, self, self._steer)
                self._patch.attach()
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        """Undo :meth:`_attach`: the hooks removed, the patch detached (idempotent)."""
        self._running = self._in_rollout = False
        while self._hook_handles:
            self._hook_handles.pop().remove()
        if self._patch is not None:
            self._patch.detach()

    def _in_learn(self, model: Any) -> bool:
        """Whether ``model`` runs the learn() the callback was attached in."""
        return self._running and model is self.model and _learn_id(model) == self._learn


_IN_USE = "this DaggerCallback is already in use by a learn() that is running: give each learn() its own DaggerCallback"


def _learn_id(model: BaseAlgorithm) -> tuple[Any, ...]:
    """What SB3's ``_setup_learn`` sets anew at every ``learn()`` call: tells a learn() from the next one."""
    return (model.start_time, model._total_timesteps, model._num_timesteps_at_start)


def _check_heads(student: Any, teacher: Any) -> None:
    """One head of the student against the teacher's: same shapes (and number of classes)."""
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


def _stack(samples: list[Any], space: spaces.Space) -> Any:
    """A batch of ``space.sample()`` observations, as a VecEnv returns them."""
    if isinstance(space, spaces.Dict):
        return {k: _stack([s[k] for s in samples], space.spaces[k]) for k in space.spaces}
    return np.stack([np.asarray(s) for s in samples])
