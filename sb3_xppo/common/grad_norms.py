"""
The gradient norms of an actor-critic policy's parts before clipping, and clipping them apart: does one
``max_grad_norm`` over the actor and the critics shrink the actor's steps? (With ``G`` critics the critics' share of
the joint norm grows, and ``clip_grad_norm_`` scales every gradient, the actor's included, by
``max_grad_norm / joint_norm``: measured in the README's Multi-critic section, it does.)
"""

from __future__ import annotations

import torch as th
from torch import nn

#: Parameter name prefixes of an SB3 actor-critic policy's critic (multi-critic heads included) and actor; every
#: other trainable parameter is shared (a shared features extractor)
CRITIC_PREFIXES = ("mlp_extractor.value_net.", "value_net.", "vf_features_extractor.", "lstm_critic.", "critic.")
ACTOR_PREFIXES = ("mlp_extractor.policy_net.", "action_net.", "log_std", "pi_features_extractor.", "lstm_actor.")
#: ``clip_grad_norm_``'s guard against a zero norm, to reproduce its coefficient
CLIP_EPS = 1e-6


def split_parameters(policy: nn.Module) -> dict[str, list[nn.Parameter]]:
    """
    The policy's trainable parameters by part.

    :param policy: an SB3 actor-critic policy (single or multi-critic, Mlp/Cnn/MultiInput, maskable, recurrent)
    :return: ``{"actor": [...], "critic": [...], "shared": [...]}``, the empty parts left out
    """
    # Without a shared extractor, SB3 registers the actor's as `features_extractor` (the same module as
    # `pi_features_extractor`), which named_parameters() lists under its first name
    actor_prefixes: tuple[str, ...] = ACTOR_PREFIXES
    if not getattr(policy, "share_features_extractor", True):
        actor_prefixes = (*ACTOR_PREFIXES, "features_extractor.")
    parts: dict[str, list[nn.Parameter]] = {"actor": [], "critic": [], "shared": []}
    for name, param in policy.named_parameters():
        if param.requires_grad:
            part = "critic" if name.startswith(CRITIC_PREFIXES) else "actor" if name.startswith(actor_prefixes) else "shared"
            parts[part].append(param)
    return {part: params for part, params in parts.items() if params}


def grad_norms(parts: dict[str, list[nn.Parameter]]) -> th.Tensor:
    """
    The L2 norm of each part's gradients, as they are now (call it between ``backward()`` and the clipping).

    :param parts: :func:`split_parameters`'s parts
    :return: ``(len(parts),)`` norms on the parameters' device (0 for a part without gradients), no host sync
    """
    norms = []
    for params in parts.values():
        grads = [param.grad for param in params if param.grad is not None]
        if grads:
            norms.append(th.linalg.vector_norm(th.stack(th._foreach_norm(grads))))
        else:
            norms.append(th.zeros((), device=params[0].device))
    return th.stack(norms)


def clip_grad_norm_per_part(parts: dict[str, list[nn.Parameter]], max_norm: float) -> th.Tensor:
    """
    ``clip_grad_norm_`` on each part on its own: the actor's gradient is scaled by ``max_norm / actor_norm`` (at most
    1) whatever the critics' gradients are, and each part's by its own norm.

    :param parts: :func:`split_parameters`'s parts
    :param max_norm: the largest norm each part's gradient keeps
    :return: ``(len(parts),)`` each part's norm before clipping (as :func:`grad_norms`)
    """
    return th.stack([th.nn.utils.clip_grad_norm_(params, max_norm) for params in parts.values()])


def grad_norm_log_values(
    part_names: list[str], part_norms: th.Tensor, total_norms: th.Tensor, max_grad_norm: float
) -> dict[str, float]:
    """
    What :func:`grad_norms` measured over one ``train()`` call, as ``train/...`` logger values (means over the
    minibatches): ``grad_norm_<part>`` (before clipping), ``grad_clip_coef`` (the factor one ``clip_grad_norm_`` over
    all parameters applies to every gradient, ``min(1, max_grad_norm / joint_norm)``) and
    ``grad_clip_coef_actor_alone`` (the factor the actor's gradient gets when the parts are clipped apart,
    ``min(1, max_grad_norm / actor_norm)``): the gap between the two is how much a joint clip lets the critics
    shrink the actor's steps.

    :param part_names: the parts, in the order of ``part_norms``' columns
    :param part_norms: ``(M, len(part_names))`` per minibatch
    :param total_norms: ``(M,)`` the joint norm of all the gradients, per minibatch
    :param max_grad_norm: the clipping threshold
    :return: key -> value
    """
    part_norms, total_norms = part_norms.double().cpu(), total_norms.double().cpu()
    values = {f"train/grad_norm_{name}": float(part_norms[:, i].mean()) for i, name in enumerate(part_names)}
    values["train/grad_clip_coef"] = float((max_grad_norm / (total_norms + CLIP_EPS)).clamp(max=1.0).mean())
    if "actor" in part_names:
        actor = part_norms[:, part_names.index("actor")]
        values["train/grad_clip_coef_actor_alone"] = float((max_grad_norm / (actor + CLIP_EPS)).clamp(max=1.0).mean())
    return values
