"""
Value normalization with preserved outputs (PopArt: van Hasselt et al. 2016, Learning values across many orders of
magnitude, https://arxiv.org/abs/1602.07714; Hessel et al. 2019 for several tasks at once): each critic output
regresses returns normalized by running statistics, and when the statistics move, the last layer is rescaled so
that the values in return units stay exactly what they were.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch as th
from torch import nn

#: Smallest standard deviation the statistics divide by (a constant return has none)
MIN_STD = 1e-4


class ValueNormalizer(nn.Module):
    """
    Wraps a value head (``nn.Linear(latent, G)``, or the stacked per-group critics of
    :class:`~sb3_xppo.multi_critic.SeparateCritics`): the head predicts normalized values, and ``forward`` returns
    ``mean + std * head(latent)``, values in return units, so that GAE and everything else reads them as before.
    The statistics are buffers: saved and loaded with the policy's parameters, on its device.

    :param head: the value head, whose last layer gets rescaled
    :param n_outputs: its number of outputs ``G`` (one per critic)
    :param preserve_outputs: rescale the head's last layer when the statistics move (PopArt); False for a head that
        cannot be rescaled (a classification critic, whose support is fixed): its targets are normalized all the
        same, and its values in return units move with the statistics (slowly: they run over all rollouts)
    """

    # the running statistics, registered buffers (saved with the model)
    mean: th.Tensor
    var: th.Tensor
    count: th.Tensor

    def __init__(self, head: nn.Module, n_outputs: int, preserve_outputs: bool = True) -> None:
        super().__init__()
        self.head = head
        self.preserve_outputs = preserve_outputs
        self.register_buffer("mean", th.zeros(n_outputs))
        self.register_buffer("var", th.ones(n_outputs))
        self.register_buffer("count", th.zeros(()))
        # While fix_statistics() holds: (var, its version, mean, std, mean[0], std[0]), valid while var is that tensor
        # at that version and mean that tensor (views follow in-place changes of mean; std is computed from var)
        self._fixed: tuple[th.Tensor, int, th.Tensor, th.Tensor, th.Tensor, th.Tensor] | None = None

    @property
    def std(self) -> th.Tensor:
        fixed = self._fixed_statistics()
        if fixed is not None:
            return fixed[3]
        return self.var.sqrt().clamp_min(MIN_STD)

    def fix_statistics(self) -> None:
        """
        Compute ``std`` once for the calls that follow, until :meth:`release_statistics` (XPPO's ``train()``: the
        statistics move once before its epochs, its minibatches all read the same ones). The same numbers as
        computing it per call: the cache holds only while ``var`` is the same tensor at the same version and ``mean``
        the same tensor (anything that changes them, :meth:`update` included, makes the next call compute afresh).
        Not under ``torch.inference_mode`` (its tensors could not be saved for backward).
        """
        self._fixed = None
        if th.is_inference_mode_enabled():
            return
        with th.no_grad():
            std = self.var.sqrt().clamp_min(MIN_STD)
            self._fixed = (self.var, self.var._version, self.mean, std, self.mean[0], std[0])

    def release_statistics(self) -> None:
        """End :meth:`fix_statistics`: ``std`` is computed per call again."""
        self._fixed = None

    def _fixed_statistics(self) -> tuple[th.Tensor, int, th.Tensor, th.Tensor, th.Tensor, th.Tensor] | None:
        """The statistics of :meth:`fix_statistics` if they still hold, else None."""
        fixed = getattr(self, "_fixed", None)  # (a module pickled before the cache existed has none)
        if fixed is None:
            return None
        var, mean = self._buffers.get("var"), self._buffers.get("mean")
        if fixed[0] is not var or fixed[1] != var._version or fixed[2] is not mean:  # type: ignore[union-attr]
            return None
        return fixed

    def forward(self, latent_vf: th.Tensor) -> th.Tensor:
        """
        :param latent_vf: ``(batch, latent)`` critic features
        :return: ``(batch, G)`` values in return units
        """
        fixed = self._fixed_statistics()
        if fixed is not None:
            return fixed[2] + fixed[3] * self.head(latent_vf)
        return self.mean + self.std * self.head(latent_vf)

    def normalize(self, values: th.Tensor) -> th.Tensor:
        """
        :param values: ``(batch, G)`` (or ``(batch,)`` with ``G = 1``) in return units
        :return: the same in normalized units
        """
        fixed = self._fixed_statistics()
        if fixed is not None:
            mean, std = (fixed[2], fixed[3]) if values.ndim > 1 else (fixed[4], fixed[5])
        else:
            mean, std = (self.mean, self.std) if values.ndim > 1 else (self.mean[0], self.std[0])
        return (values - mean) / std

    @th.no_grad()
    def update(self, returns: th.Tensor) -> None:
        """
        Fold a rollout's returns into the running statistics (Chan et al.'s parallel mean/variance), then rescale
        the head's last layer so that :meth:`forward` gives the same values as before (PopArt's "preserving outputs").

        :param returns: ``(N, G)`` returns of the rollout
        """
        returns = returns.reshape(-1, len(self.mean)).to(self.mean)
        self.update_moments(returns.mean(dim=0), returns.var(dim=0, unbiased=False), float(len(returns)))

    @th.no_grad()
    def update_moments(self, batch_mean: th.Tensor, batch_var: th.Tensor, n: float) -> None:
        """
        :meth:`update` from the returns' moments (a data-parallel run's, over every rank: the same statistics as one
        process that saw all the returns).

        :param batch_mean: ``(G,)`` the returns' mean
        :param batch_var: ``(G,)`` their population variance
        :param n: how many returns
        """
        batch_mean, batch_var = batch_mean.to(self.mean), batch_var.to(self.mean)
        old_mean, old_std = self.mean.clone(), self.std
        total = self.count + n
        delta = batch_mean - self.mean
        self.var.copy_((self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total)
        self.mean.add_(delta * n / total)
        self.count.copy_(total)
        if not self.preserve_outputs:
            return
        # head(x) = W x + b must become (old_std * (W x + b) + old_mean - mean) / std
        weight, bias = last_layer(self.head)
        scale = old_std / self.std
        shape = (-1,) + (1,) * (weight.ndim - 1)
        weight.mul_(scale.reshape(shape))
        bias.mul_(scale.reshape((-1,) + (1,) * (bias.ndim - 1))).add_(
            ((old_mean - self.mean) / self.std).reshape((-1,) + (1,) * (bias.ndim - 1))
        )


def last_layer(head: nn.Module) -> tuple[th.Tensor, th.Tensor]:
    """
    The weight and bias of a value head's output layer, output (group) dim first.

    :param head: ``nn.Linear`` (weight ``(G, latent)``, bias ``(G,)``) or a module with stacked ``weights``/``biases``
        lists (``SeparateCritics``: last weight ``(G, d, 1)``, bias ``(G, 1, 1)``)
    :return: ``(weight, bias)`` parameters
    """
    if isinstance(head, nn.Linear):
        return head.weight, head.bias
    weights, biases = getattr(head, "weights", None), getattr(head, "biases", None)
    if weights is None or biases is None:
        raise TypeError(
            "normalize_values needs a value head that is an nn.Linear or stacks its critics' layers, "
            f"got {type(head).__name__}"
        )
    return weights[-1], biases[-1]


def check_normalize_values(normalize_values: Any, checked: Mapping[str, Any]) -> bool:
    """:return: ``normalize_values`` as a bool (PopArt on or off)
    :raises ValueError: for anything but True or False
    """
    if not isinstance(normalize_values, (bool, np.bool_)):
        raise ValueError(f"normalize_values must be True or False, got {normalize_values!r}")
    return bool(normalize_values)
