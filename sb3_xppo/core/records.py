"""What XPPO's ``train()`` records per minibatch, and the ratio statistics it logs from it."""

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch as th

from sb3_xppo.common.finite import non_finite_error
from sb3_xppo.common.minibatch_stats import minibatch_means

#: What train() checks for non-finite values after its epochs, per minibatch that took an optimizer step
CHECKED_TERMS = ("policy loss", "value loss", "entropy loss", "total loss (after the loss hooks)", "gradient norm")


class MinibatchTerms(NamedTuple):
    """What one minibatch's loss was made of (:meth:`~sb3_xppo.core.XPPOCoreMixin.minibatch_loss`)."""

    #: ``log_prob - old_log_prob`` (no graph)
    log_ratio: th.Tensor
    #: the advantages as the loss saw them (the groups' terms summed, with ``group_gradients``)
    advantages: th.Tensor
    #: which samples count (None: all)
    valid: th.Tensor | None
    #: the actor's loss
    policy_loss: th.Tensor
    #: the critics' loss
    value_loss: th.Tensor
    #: the entropy loss
    entropy_loss: th.Tensor
    #: a scalar (one critic), or ``(G,)`` the value loss of each reward group
    group_value_losses: th.Tensor
    #: whether ``min_advantage_std`` skipped the minibatch (None: off)
    skipped: th.Tensor | None
    #: with ``group_gradients='pcgrad'``: the share of the pairs of groups whose actor gradients conflicted (0-d)
    group_conflicts: th.Tensor | None


@dataclass
class TrainRecord:
    """What one ``train()`` call records per minibatch, kept on the device until its epochs are over."""

    #: epoch of each minibatch
    epochs: list[int] = field(default_factory=list)
    #: (policy, value, entropy[, value per group]) losses
    losses: list[th.Tensor] = field(default_factory=list)
    #: ``log_prob - old_log_prob``
    log_ratios: list[th.Tensor] = field(default_factory=list)
    #: the advantages as the loss saw them
    advantages: list[th.Tensor] = field(default_factory=list)
    #: which samples count (None: all; a recurrent minibatch's padding does not)
    valid: list[th.Tensor | None] = field(default_factory=list)
    #: of each minibatch that took an optimizer step (all but one stopped by ``target_kl``): the loss after the hooks
    hooked_losses: list[th.Tensor] = field(default_factory=list)
    #: and the gradient norm before clipping
    grad_norms: list[th.Tensor] = field(default_factory=list)
    #: of each minibatch where ``min_advantage_std`` is on: whether it was skipped (a bool tensor)
    skipped: list[th.Tensor] = field(default_factory=list)
    #: with ``group_gradients='pcgrad'``: the share of the pairs of groups whose actor gradients conflicted (0-d)
    group_conflicts: list[th.Tensor] = field(default_factory=list)
    #: the last minibatch's loss
    loss: th.Tensor = field(default_factory=lambda: th.zeros(()))

    def add(self, epoch: int, terms: "MinibatchTerms") -> None:
        """
        One minibatch's record, before its optimizer step.

        :param epoch: the minibatch's epoch
        :param terms: what its loss was made of
        """
        with th.no_grad():
            row = th.stack((terms.policy_loss, terms.value_loss, terms.entropy_loss))
            if terms.group_value_losses.ndim > 0:
                row = th.cat((row, terms.group_value_losses))
        self.epochs.append(epoch)
        self.losses.append(row)
        self.log_ratios.append(terms.log_ratio)
        self.advantages.append(terms.advantages)
        self.valid.append(terms.valid)
        if terms.skipped is not None:
            self.skipped.append(terms.skipped)
        if terms.group_conflicts is not None:
            self.group_conflicts.append(terms.group_conflicts)

    def non_finite_error(self) -> ValueError | None:
        """The error naming the first non-finite of the ``CHECKED_TERMS`` (one host copy for all minibatches), or None."""
        steps = len(self.grad_norms)
        if steps == 0:
            return None
        with th.no_grad():
            # policy, value and entropy losses, the hooked loss, the gradient norm: (steps, 5)
            losses = th.stack(self.losses[:steps])[:, :3]
            terms = th.cat((losses, th.stack(self.hooked_losses)[:, None], th.stack(self.grad_norms)[:, None]), dim=1)
        return non_finite_error(terms.cpu().numpy(), CHECKED_TERMS, np.array(self.epochs[:steps]))


def minibatch_ratio_statistics(
    log_ratios: list[th.Tensor],
    advantages: list[th.Tensor],
    clip_low: float,
    clip_high: float,
    dual_clip: float | None,
    log_ratio_clamp: tuple[float, float] | None = None,
    valid: list[th.Tensor | None] | None = None,
) -> dict[str, np.ndarray]:
    """
    Statistics of the probability ratio ``r = exp(log_prob - old_log_prob)``, one value per minibatch, computed
    in one pass over all minibatches of a ``train()`` call.

    :param log_ratios: each minibatch's ``log_prob - old_log_prob``
    :param advantages: each minibatch's advantages, as the loss saw them
    :param clip_low: lower clip range, the ratio is clipped below at ``1 - clip_low``
    :param clip_high: upper clip range, the ratio is clipped above at ``1 + clip_high``
    :param dual_clip: the dual clip constant, or None
    :param log_ratio_clamp: the ``(low, high)`` clamp the loss applies to the log-ratio, or None
    :param valid: each minibatch's valid samples (None: all), the only ones the statistics cover
    :return: ``(M,)`` arrays: ``approx_kl`` (``mean(r - 1 - log r)``), ``clip_fraction_low`` / ``clip_fraction_high``
        (share of ratios below / above the clip range: ``1 - r > clip_low``, ``r - 1 > clip_high``), ``clip_fraction``
        (share of either: SB3's ``mean(|r - 1| > clip_range)`` with one range), ``dual_clip_fraction`` (share
        of *all* the minibatch's samples where the dual bound ``c * A`` is the active term of the clip loss: ``A < 0``
        and ``r > c``) and ``ratio_deviation`` (``mean |r - 1|``)
    """
    with th.no_grad():
        log_ratio = th.cat(log_ratios)
        ratio = th.exp(log_ratio)
        if dual_clip is None:
            dual_clipped = th.zeros_like(ratio)
        else:
            # Ye et al. 2020: the bound c * A is active where A < 0 and r > c, r as the loss sees it (clamped)
            loss_ratio = ratio if log_ratio_clamp is None else th.exp(log_ratio.clamp(*log_ratio_clamp))
            dual_clipped = (th.cat(advantages) < 0) & (loss_ratio > dual_clip)
        # The same statistics for every actor loss (SPO and HPO do not clip, but have the same trust region), from
        # r - 1 as SB3's PPO compares it: with one range, clip_fraction is SB3's mean(|r - 1| > clip_range)
        deviation = ratio - 1
        low, high = -deviation > clip_low, deviation > clip_high
        columns = {
            "approx_kl": deviation - log_ratio,
            "clip_fraction_low": low.to(ratio.dtype),
            "clip_fraction_high": high.to(ratio.dtype),
            "clip_fraction": (low | high).to(ratio.dtype),
            "dual_clip_fraction": dual_clipped.to(ratio.dtype),
            "ratio_deviation": deviation.abs(),
        }
        table = th.stack(list(columns.values()))
    return dict(zip(columns, minibatch_means(table, [len(x) for x in log_ratios], valid), strict=True))
