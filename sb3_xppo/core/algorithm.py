"""
The XPPO core shared by :class:`~sb3_xppo.XPPO`, :class:`~sb3_xppo.MaskableXPPO`, :class:`~sb3_xppo.RecurrentXPPO`
and :class:`~sb3_xppo.MaskableRecurrentXPPO`: :class:`XPPOCoreMixin`, whose ``train()`` is PPO's loop, read top to
bottom: per minibatch, :meth:`XPPOCoreMixin.minibatch_loss` (the losses of :mod:`sb3_xppo.functional`, picked by
:class:`~sb3_xppo.core.losses.MinibatchLosses`), the loss hooks, then one
:class:`~sb3_xppo.core.optimizer_step.OptimizerStep`. How the model is built is :mod:`sb3_xppo.core.setup`'s, the
rollout :class:`~sb3_xppo.core.rollout.XPPORolloutMixin`'s. Each algorithm overrides two small methods, how a
minibatch's actions are evaluated (:meth:`XPPOCoreMixin._evaluate_actions`) and which samples count
(:meth:`XPPOCoreMixin._valid_samples`), and names how its rollout calls the policy (``policy_calls_class``).
"""

from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.utils import explained_variance, update_learning_rate

from sb3_xppo.common.adaptive_lr import adapt_learning_rate, mean_approx_kl, starting_learning_rate
from sb3_xppo.common.finite import TrainingSnapshot
from sb3_xppo.common.grad_norms import split_parameters
from sb3_xppo.common.schedules import ClipRange
from sb3_xppo.common.value_norm import ValueNormalizer
from sb3_xppo.core.fast_paths import trusted_policy_calls
from sb3_xppo.core.loading import SafeLoadMixin
from sb3_xppo.core.losses import MinibatchLosses, reduce_value_losses, valid_mean, zscore_group_terms
from sb3_xppo.core.optimizer_step import OptimizerStep
from sb3_xppo.core.records import MinibatchTerms, TrainRecord, minibatch_ratio_statistics
from sb3_xppo.core.resuming import ResumeMixin
from sb3_xppo.core.setup import AuxiliaryLossHook, LossHook, XPPOSetupMixin

__all__ = ["AuxiliaryLossHook", "LossHook", "XPPOCoreMixin", "valid_mean"]


class XPPOCoreMixin(ResumeMixin, SafeLoadMixin, XPPOSetupMixin):  # load(): safe (loading.py); resume() (resuming.py)
    """
    XPPO's training on top of an SB3 on-policy algorithm (PPO, or sb3-contrib's MaskablePPO and RecurrentPPO): put
    it first in the bases, ``class XPPO(XPPOCoreMixin, PPO)``. The constructor and the setup are
    :class:`~sb3_xppo.core.setup.XPPOSetupMixin`'s; this class holds ``train()``.
    """

    #: log the actor's and the critics' gradient norms before clipping (``train/grad_norm_actor``, ...,
    #: :func:`~sb3_xppo.common.grad_norms.grad_norm_log_values`): None logs them for multi-critic models only
    log_grad_norms: bool | None = None
    #: clip the actor's and the critics' gradients to ``max_grad_norm`` each on its own, not by one joint norm: None
    #: does so for multi-critic models of two groups or more, whose critics' gradients would shrink the actor's steps
    #: (README, Multi-critic); one group stays plain XPPO's, bit for bit
    clip_grad_per_part: bool | None = None

    # Set by the SB3 algorithm
    policy: Any
    action_space: spaces.Space
    device: th.device
    logger: Any
    n_epochs: int
    #: (PPO's an int, sb3-contrib's an int or None: the whole rollout)
    batch_size: Any
    ent_coef: float
    lr_schedule: Callable[[float], float]
    vf_coef: float
    max_grad_norm: float
    target_kl: float | None
    verbose: int
    _n_updates: int
    _current_progress_remaining: float

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
        self._data_parallel.merge_vec_normalize(self)
        if self.normalize_advantage == "rollout":
            self._normalize_rollout_advantages()

        losses = MinibatchLosses(self.options, self.policy, clip_low, clip_high, clip_range_vf)
        record = TrainRecord()
        optimizer_step = self._optimizer_step()
        self._train_or_undo(losses, record, optimizer_step)

        ratio_stats = minibatch_ratio_statistics(
            record.log_ratios,
            record.advantages,
            clip_low,
            clip_high,
            self.options.dual_clip,
            self.options.log_ratio_bounds,
            record.valid,
        )
        self._log_train_stats(record, optimizer_step, ratio_stats, clip_range, clip_range_vf)

    def _train_or_undo(self, losses: MinibatchLosses, record: TrainRecord, optimizer_step: OptimizerStep) -> None:
        """
        The epochs, undone whole (:class:`~sb3_xppo.common.finite.TrainingSnapshot`) when anything raises or, with
        ``check_finite``, when a recorded term is not finite; with ``normalize_values`` the PopArt statistics take the
        rollout's returns first and stay put during the epochs.
        """
        snapshot = TrainingSnapshot(self, self.check_finite)  # type: ignore[arg-type]
        normalizer = self.policy.value_net if isinstance(getattr(self.policy, "value_net", None), ValueNormalizer) else None
        try:
            if self.options.normalize_values:
                # PopArt: the statistics take this rollout's returns (every process's), the head is rescaled to keep its values
                returns = th.as_tensor(self.rollout_buffer.returns, device=self.device)
                self._data_parallel.update_value_statistics(self.policy.value_net, returns)
            if normalizer is not None:
                normalizer.fix_statistics()  # they stay put during the epochs: their std computed once
            with optimizer_step:
                self._train_epochs(losses, record, optimizer_step)
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

    def _train_epochs(self, losses: MinibatchLosses, record: TrainRecord, optimizer_step: OptimizerStep) -> None:
        """
        PPO's epochs over the rollout buffer: each minibatch's loss, the loss hooks, the optimizer step.

        :param losses: this call's losses
        :param record: filled with what each minibatch gives, kept on the device (no host sync unless ``target_kl``
            is set)
        :param optimizer_step: this call's optimizer step
        """
        continue_training = True
        # train for n_epochs epochs
        for epoch in range(self.n_epochs):
            # Do a complete pass on the rollout buffer
            minibatches = self.rollout_buffer.get(self.batch_size)
            if self.normalize_advantage == "minibatch":
                # (data-parallel: the global statistics of every minibatch of the epoch, in one collective)
                minibatches = self._data_parallel.with_advantage_moments(minibatches, self._valid_samples)
            for rollout_data in minibatches:
                loss, terms = self.minibatch_loss(rollout_data, losses)
                record.add(epoch, terms)

                if self.target_kl is not None:
                    # Approximate reverse KL for early stopping, as PPO (http://joschu.net/blog/kl-approx.html)
                    log_ratio = terms.log_ratio
                    # (data-parallel: over the global minibatch, so that every process stops at the same one)
                    approx_kl_div = self._data_parallel.mean_kl((th.exp(log_ratio) - 1) - log_ratio, terms.valid)
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
            if self.options.adaptive_kl is not None:
                self._adapt_learning_rate(record, epoch)
            if not continue_training:
                break
        record.loss = loss

    def minibatch_loss(self, rollout_data: Any, losses: MinibatchLosses) -> tuple[th.Tensor, MinibatchTerms]:
        """
        One minibatch's loss, PPO's recipe: evaluate the actions, normalize the advantages, then the actor's
        surrogate, the critics' value loss and the entropy bonus, summed with PPO's coefficients.

        :param rollout_data: the minibatch (the buffer's samples)
        :param losses: this call's loss functions
        :return: the loss (before the loss hooks), and what it was made of
        """
        actions = rollout_data.actions
        if isinstance(self.action_space, spaces.Discrete):
            # Convert discrete action from float to long
            actions = rollout_data.actions.long().flatten()
        valid = self._valid_samples(rollout_data)

        # The buffer's observations were checked finite (check_finite), and so are the parameters a train() call keeps
        with trusted_policy_calls(self.policy, self.options.fast_paths and self.check_finite):
            values, log_prob, entropy = self._evaluate_actions(rollout_data, actions)
        # (batch,) or, one critic per reward group, (batch, G)
        values = values.reshape(rollout_data.returns.shape)
        # Normalize advantage (with group_gradients the groups' terms, (batch, G))
        advantages = rollout_data.advantages
        if self.normalize_advantage == "minibatch":
            advantages = self._data_parallel.minibatch_zscore(advantages, valid)

        # Actor: the surrogate of options.actor_loss, averaged over the valid samples
        policy_loss, skipped, conflicts = losses.actor(log_prob, rollout_data.old_log_prob, advantages, valid)
        # Critics: reduced over the batch, a scalar or (G,) one per reward group, then weighted and summed
        value_losses = losses.value(values, rollout_data.old_values, rollout_data.returns, valid)
        value_loss = reduce_value_losses(value_losses, losses.value_weights)
        # Entropy loss favor exploration (approximated by -log_prob when there is no analytical form)
        entropy_loss = -valid_mean(-log_prob if entropy is None else entropy, valid)

        if losses.actor_off:  # SPO / HPO with an empty trust region: only the critic learns from this rollout
            loss = self.vf_coef * value_loss
        else:
            loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss

        with th.no_grad():
            log_ratio = log_prob - rollout_data.old_log_prob
        if advantages.ndim == 2:
            advantages = advantages.sum(-1)  # (the combined advantages, for the ratio statistics)
        terms = MinibatchTerms(
            log_ratio, advantages, valid, policy_loss, value_loss, entropy_loss, value_losses, skipped, conflicts
        )
        return loss, terms

    def _normalize_rollout_advantages(self) -> None:
        """``normalize_advantage='rollout'``: once per rollout, before the epochs, so every minibatch sees the same."""
        if getattr(self.rollout_buffer, "keeps_group_terms", False):
            # group_gradients: each group's term centred, all scaled by the combined advantages' spread
            terms = th.as_tensor(self.rollout_buffer.group_terms)  # (n_steps, n_envs, G)
            normalized = zscore_group_terms(terms.reshape(-1, terms.shape[-1])).reshape(terms.shape)
            self.rollout_buffer.group_terms = normalized.numpy()
        advantages = th.as_tensor(self.rollout_buffer.advantages)
        self.rollout_buffer.advantages = self._data_parallel.rollout_zscore(advantages).numpy()

    def _auxiliary_loss(self, rollout_data: Any) -> th.Tensor | None:
        """The sum of the auxiliary loss hooks' losses on this minibatch, None when there is none."""
        losses = [loss for hook in list(self._auxiliary_loss_hooks.values()) if (loss := hook(self, rollout_data)) is not None]
        return None if not losses else losses[0] if len(losses) == 1 else th.stack(losses).sum()

    def _update_learning_rate(self, optimizers: list[th.optim.Optimizer] | th.optim.Optimizer) -> None:
        # SB3's: the schedule's value, logged; with adaptive_kl the rule's current learning rate, which train() logs
        # once the call is through
        if self.options.adaptive_kl is None:
            super()._update_learning_rate(optimizers)  # type: ignore[misc]
            return
        rule = self.options.adaptive_kl_rule
        assert rule is not None
        lr = starting_learning_rate(self.adaptive_kl_lr, self.lr_schedule, rule)
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
        rule = self.options.adaptive_kl_rule
        assert rule is not None
        first = record.epochs.index(epoch)
        # (data-parallel: averaged over the processes, so that all take the same learning rate)
        kl = self._data_parallel.average(mean_approx_kl(record.log_ratios[first:], record.valid[first:]), "the epoch's KL")
        optimizer = self.policy.optimizer
        lr = adapt_learning_rate(optimizer.param_groups[0]["lr"], kl, **rule)
        update_learning_rate(optimizer, lr)

    def _log_grad_norms(self) -> bool:
        """Whether ``train()`` logs the actor's and the critics' gradient norms (``log_grad_norms``)."""
        return self.options.reward_groups is not None if self.log_grad_norms is None else self.log_grad_norms

    def _optimizer_step(self) -> OptimizerStep:
        """
        This ``train()`` call's optimizer step: the actor's and the critics' gradients clipped apart
        (``clip_grad_per_part``) and their norms recorded (``log_grad_norms``) where those are on.
        """
        groups = self.options.groups
        per_part = groups is not None and len(groups) > 1 if self.clip_grad_per_part is None else self.clip_grad_per_part
        parts = split_parameters(self.policy) if per_part or self._log_grad_norms() else None
        average = self._data_parallel.gradient_averaging
        return OptimizerStep(
            self.policy, self.max_grad_norm, parts, bool(per_part), fast=self.options.fast_paths, average=average
        )

    def _log_train_stats(
        self,
        record: TrainRecord,
        optimizer_step: OptimizerStep,
        ratio_stats: dict[str, np.ndarray],
        clip_range: float | ClipRange,
        clip_range_vf: float | None,
    ) -> None:
        """
        Record PPO's keys and XPPO's: each the mean over the minibatches, as PPO (``approx_kl`` over the last epoch).

        :param record: this call's record
        :param optimizer_step: this call's optimizer step (its gradient norms and auxiliary conflicts)
        :param ratio_stats: per-minibatch statistics of :func:`~sb3_xppo.core.records.minibatch_ratio_statistics`
        :param clip_range: the clip range of this call
        :param clip_range_vf: the value clip range of this call
        """
        epochs = np.array(record.epochs)
        mean_losses = th.stack(record.losses).cpu().numpy().astype(np.float64).mean(axis=0)
        for name, value in zip(("policy_gradient_loss", "value_loss", "entropy_loss"), mean_losses[:3], strict=True):
            self.logger.record(f"train/{name}", value)
        for name in ("clip_fraction_low", "clip_fraction_high", "dual_clip_fraction", "ratio_deviation"):
            self.logger.record(f"train/{name}", ratio_stats[name].mean())
        self.logger.record("train/clip_fraction", ratio_stats["clip_fraction"].mean())
        self.logger.record("train/approx_kl", ratio_stats["approx_kl"][epochs == epochs[-1]].mean())
        values, returns = self.rollout_buffer.values, self.rollout_buffer.returns
        self._log_group_stats(mean_losses[3:], values, returns)
        explained_var = explained_variance(values.flatten(), returns.flatten())

        self.logger.record("train/loss", record.loss.item())
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
        if self.options.adaptive_kl is not None:
            # the call went through: the rule's learning rate is the model's, for the next call and in a save
            self.adaptive_kl_lr = float(self.policy.optimizer.param_groups[0]["lr"])
            self.logger.record("train/learning_rate", self.adaptive_kl_lr)

    def _log_group_stats(self, group_losses: np.ndarray, values: np.ndarray, returns: np.ndarray) -> None:
        """
        Per reward group, by name: the value loss, the explained variance, the advantages' spread and effective
        weight (the buffer's), and with ``normalize_values`` the PopArt statistics (also of a single critic).

        :param group_losses: ``(G,)`` the mean value loss of each group (empty for one critic)
        :param values: the buffer's values
        :param returns: the buffer's returns
        """
        groups = self.options.groups
        for i, group_loss in enumerate(group_losses):
            group = groups[i] if groups is not None else i
            self.logger.record(f"train/value_loss/{group}", group_loss)
            self.logger.record(
                f"train/explained_variance/{group}", explained_variance(values[..., i].flatten(), returns[..., i].flatten())
            )
        if groups is not None and hasattr(self.rollout_buffer, "group_log_values"):
            # Per group: the advantages' spread, the scale the combination divided them by, the effective weight
            for key, value in self.rollout_buffer.group_log_values(groups).items():
                self.logger.record(key, value)
        if self.options.normalize_values:
            means, stds = self.policy.value_net.mean.tolist(), self.policy.value_net.std.tolist()
            suffixes = [f"/{group}" for group in groups] if groups is not None else [""]
            for suffix, mean, std in zip(suffixes, means, stds, strict=True):
                self.logger.record(f"train/value_mean{suffix}", mean)
                self.logger.record(f"train/value_std{suffix}", std)
