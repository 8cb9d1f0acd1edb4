"""
DaggerCallback: distill a teacher into the SB3 model being trained, during ``learn()``.

Three rooms serve it, one per job: the teacher resolved and bound to the student (:mod:`.teacher`), the aggregated
dataset and the fitting (:mod:`.aggregation`), and the steering during ``learn()`` (:mod:`.steering`); the checks are
:mod:`.checks`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.utils import FloatSchedule
from torch.optim import Optimizer

from sb3_xppo.dagger_distill.actions import agreement_atol
from sb3_xppo.dagger_distill.aggregation import Aggregation, pretrain
from sb3_xppo.dagger_distill.checks import check_student, resolve_layer
from sb3_xppo.dagger_distill.dataset import AggregatedDataset
from sb3_xppo.dagger_distill.distiller import DaggerDistiller
from sb3_xppo.dagger_distill.options import CALLBACK, DistillOptions, reader_signature
from sb3_xppo.dagger_distill.steering import Steering
from sb3_xppo.dagger_distill.teacher import StudentTeacher, raw_obs_of, resolve_teacher
from sb3_xppo.dagger_distill.teacher_obs import frozen_vec_normalize

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from sb3_xppo.dagger_distill.options import CallbackKeywords


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

    ``beta`` executes the teacher's action instead of the student's with that probability (DAgger's mixture
    policy); the log-probabilities PPO stores are the student's own of the executed actions, so its ratios stay valid.
    The teacher reads the raw observations (the original ones under ``VecNormalize``, the full Dict under
    :class:`~sb3_xppo.dagger_distill.StudentObsWrapper`), of those its own keys, normalized by
    ``teacher_vec_normalize``; a non-finite observation is a ``ValueError`` naming the env, the step and the key.

    The guide (docs/guide/dagger.md) holds the rest of the contract: recurrent students (one LSTM step from the stored
    state), maskable students (forbidden labels dropped and counted), the behaviour-cloning warm-up
    (``pretrain_steps``), how the student is steered (XPPO's hooks, else
    :class:`~sb3_xppo.dagger_distill.patching.StudentPatch`) and left as it was when ``learn()`` raises. The same
    callback may serve several ``learn()`` calls of one model (the dataset is kept) or move to another model (it
    starts afresh); using it in a second ``learn()`` while one is running is a ``ValueError``.

    Logs ``distill/loss``, ``distill/agreement`` (share of states where the student's best action matches the
    teacher's; continuous actions within 5% of the action range), ``distill/weight``, ``distill/beta``,
    ``distill/dataset_size`` and, for a maskable student, ``distill/forbidden_labels``.

    :param teacher: an SB3 model, the path to an SB3 ``.zip``, or a callable ``obs -> Distribution`` (or pytree,
        as :class:`~sb3_xppo.dagger_distill.policy_adapter.PolicyAdapter` builds them for the student's action space)
        receiving the observation as tensors on the student's device
    :param options: the distillation's options (:class:`~sb3_xppo.dagger_distill.DistillOptions`: ``loss_fn``,
        ``weight``, ``rl_coef``, ``beta``, ``buffer_size``, the teacher's observations and loading, ...); each may also
        be given as a plain keyword, which overrides the object's field
    :param verbose: verbosity level
    :param keywords: the options as plain keywords
    """

    model: Any  # any SB3 algorithm: XPPO's loss hook and off-policy methods are looked up on it

    def __init__(
        self,
        teacher: BaseAlgorithm | BasePolicy | str | os.PathLike | Any,
        *,
        options: DistillOptions | None = None,
        verbose: int = 0,
        **keywords: Unpack[CallbackKeywords],
    ) -> None:
        super().__init__(verbose)
        self.options = options = DistillOptions.for_reader(CALLBACK, options, keywords)
        resolved = resolve_teacher(teacher, options)
        self.teacher_policy: BasePolicy | None = resolved if isinstance(resolved, BasePolicy) else None
        self.teacher_fn: Any = None if isinstance(resolved, BasePolicy) else resolved
        # A wrong teacher layer name fails now; the student's is checked when the callback meets its model
        resolve_layer(resolved, options.teacher_layer, "teacher")
        self.weight = FloatSchedule(options.weight)
        self.beta = FloatSchedule(options.beta)
        vec_normalize = options.teacher_vec_normalize
        self.teacher_vec_normalize = None if vec_normalize is None else frozen_vec_normalize(vec_normalize, options.trust_code)
        self.dataset = AggregatedDataset(options.buffer_size or 50_000)
        self.distiller: DaggerDistiller | None = None
        # Bound when the callback meets its model (the student), kept across its learn() calls
        self._pair: StudentTeacher | None = None
        self._aggregation: Aggregation | None = None
        self._steering: Steering | None = None

    @property
    def _projector_optimizer(self) -> Optimizer | None:
        """The optimizer of a trained ``rep_align_projector`` (None: none)."""
        return None if self._aggregation is None else self._aggregation.projector_optimizer

    # ----------------------------------------------------------------------------------------------------------------
    # Setup: the student and the teacher bound, checked before any step
    # ----------------------------------------------------------------------------------------------------------------

    def init_callback(self, model: BaseAlgorithm) -> None:
        # Refused before BaseCallback points the callback at the new model: the running learn() keeps it
        if self._steering is not None and self._steering.busy:
            raise ValueError(_IN_USE)
        super().init_callback(model)

    def _init_callback(self) -> None:
        model: Any = self.model
        self._release()  # whatever an interrupted learn() may have left behind (see the class docstring)
        raw_obs = raw_obs_of(self.training_env, model)
        store = raw_obs[0] is not None or self.teacher_vec_normalize is not None
        if self._pair is not None and self._pair.serves(model, raw_obs[1], store):
            self._pair.raw_obs = raw_obs[0]
            return  # a further learn() call on the same model: keep the dataset, distiller and projector
        options = self.options
        check_student(model, options.rl_coef, options.gradient_surgery)
        if options.pretrain_steps > 0 and getattr(getattr(model, "options", None), "distributed", False):
            # the warm-up's optimizer steps are each rank's own (outside train(), whose gradients the ranks average)
            raise ValueError(
                "pretrain_steps with a distributed=True student: the behaviour-cloning warm-up would step each rank's "
                "optimizer on its own data, and the ranks' models would part. Warm the student up in one process "
                "(DaggerCallback(teacher, pretrain_steps=...) on a few steps), save it, then train it on ranks"
            )
        teacher = self.teacher_policy if self.teacher_policy is not None else self.teacher_fn
        pair = StudentTeacher(model, teacher, raw_obs, options.teacher_obs_keys, self.teacher_vec_normalize)
        distiller = DaggerDistiller(
            pair.student,
            pair.teacher,
            options=options,
            label_transform=pair.label_transform,
            agreement_atol=agreement_atol(model.action_space, model.device),
            device=model.device,
        )
        pair.probe(distiller)  # a failed probe leaves the callback bound as it was
        if self._pair is not None:  # another model (or env): its states are not this student's
            self.dataset = AggregatedDataset(self.dataset.capacity)
        self.distiller, self._pair = distiller, pair
        self._aggregation = Aggregation(pair, distiller, self.dataset)
        self._steering = Steering(self._aggregation)

    # ----------------------------------------------------------------------------------------------------------------
    # During learn()
    # ----------------------------------------------------------------------------------------------------------------

    def _on_training_start(self) -> None:
        assert self._aggregation is not None and self._steering is not None
        self._update_schedules()
        if self.options.pretrain_steps > 0 and not self._aggregation.pretrained:
            pretrain(self._aggregation, self.options.pretrain_steps, self.verbose)
        self._steering.attach(self)

    def _on_step(self) -> bool:
        assert self._pair is not None and self._aggregation is not None and self._steering is not None
        self._check_own_learn()
        # The observation the student just acted on (SB3 updates _last_obs after the callback)
        self._aggregation.add(self._steering.take_step_masks())
        # The observation that just arrived, checked before the policy or the dataset uses it
        self._pair.observe()
        self._pair.check_arrival(self.locals.get("new_obs"))
        return True

    def _on_rollout_start(self) -> None:
        assert self._pair is not None and self._aggregation is not None and self._steering is not None
        # The first observation the rollout acts on, checked before the policy or the dataset uses it
        self._pair.observe()
        self._pair.check_arrival(self.model._last_obs)
        self._update_schedules()
        if not self._steering.uses_hook:
            self._aggregation.round()
        self._steering.in_rollout = True

    def _on_rollout_end(self) -> None:
        assert self._steering is not None
        self._check_own_learn()
        self._steering.in_rollout = False

    def _on_training_end(self) -> None:
        assert self._aggregation is not None and self._steering is not None
        try:
            if not self._steering.uses_hook:
                self._aggregation.round()
        finally:
            self._release()

    # ----------------------------------------------------------------------------------------------------------------
    # Resumable checkpoints (docs/guide/resume.md): the distillation's state beside the model's
    # ----------------------------------------------------------------------------------------------------------------

    def resumable_state(self) -> dict[str, Any]:
        """
        :return: what a :class:`~sb3_xppo.ResumableCheckpoint` keeps of the distillation: the aggregated dataset, the
            states added since the last round of the callback's own steps, whether the warm-up ran, and a trained
            ``rep_align_projector`` with its optimizer (the teacher is given again, as the run gave it)
        """
        assert self._aggregation is not None
        return self._aggregation.state()

    def restore_state(self, state: dict[str, Any]) -> None:
        """Put what :meth:`resumable_state` kept back, in the resumed run's ``learn()`` (the callback bound to its model)."""
        assert self._pair is not None and self._aggregation is not None
        self._pair.observe()
        # (the storage takes the structure and types of the fields of the state the resumed run starts from)
        self._aggregation.restore(state, like=self._pair.state(None))

    def _release(self) -> None:
        """Stop steering the student: the hooks removed, the patch detached (idempotent)."""
        if self._steering is not None:
            self._steering.release()

    def _check_own_learn(self) -> None:
        """A ``ValueError`` when the rollout calling the callback is not its model's (another learn() took it)."""
        if self.locals.get("self", self.model) is not self.model:
            raise ValueError(_IN_USE)

    def _update_schedules(self) -> None:
        assert self._aggregation is not None and self._steering is not None
        progress = self.model._current_progress_remaining
        weight, beta = self.weight(progress), self.beta(progress)
        if weight < 0 or not 0 <= beta <= 1:
            raise ValueError(f"the weight schedule must stay >= 0 and beta in [0, 1]; got {weight}, {beta}")
        self._aggregation.weight, self._steering.beta = weight, beta
        self.logger.record("distill/weight", weight)
        self.logger.record("distill/beta", beta)
        self.logger.record("distill/dataset_size", len(self.dataset))


DaggerCallback.__signature__ = reader_signature(DaggerCallback.__init__, CALLBACK)  # type: ignore[attr-defined]

_IN_USE = "this DaggerCallback is already in use by a learn() that is running: give each learn() its own DaggerCallback"
