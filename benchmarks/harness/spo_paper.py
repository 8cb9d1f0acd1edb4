"""
The SPO paper in its own setting (the campaign of kind ``spo-paper``, ``benchmarks/spo_paper.yml``): its contenders by
role, and the returns the paper publishes for them, which the campaign's plot and region set beside its own.

Xie et al. 2025, "Simple Policy Optimization" (https://arxiv.org/abs/2401.16025), MuJoCo figure of the 7-layer
networks: training-episode returns over 10M steps, 5 seeds.
"""

from __future__ import annotations

#: The campaign's kind (:data:`harness.reports.KINDS`)
KIND = "spo-paper"
#: The contenders by role: PPO's clip and SPO at the paper's deep actor, and PPO's clip at the shallow 64-64 actor
CONTENDERS = {
    "clip": "xppo-paper@actor_loss='clip'",
    "spo": "xppo-paper@actor_loss='spo'",
    "shallow": "xppo-paper@actor_loss='clip'@pi_arch=[64,64]",
}
#: Where the paper reads its returns: the end of its curves
PAPER_STEPS = 10_000_000
#: The returns the paper's 7-layer curves reach at :data:`PAPER_STEPS` (PPO's clip, SPO), read off its figure by eye
#: (to about 100): the envs of its largest gaps. Its Hopper curves (about 1000 and 1500) overlap, so the campaign
#: leaves Hopper out
PAPER_RETURNS = {
    "Walker2d-v5": {"clip": 1100.0, "spo": 3100.0},
    "HalfCheetah-v5": {"clip": 2200.0, "spo": 5200.0},
    "Ant-v5": {"clip": 1000.0, "spo": 4600.0},
}


def reference() -> dict[str, dict[str, tuple[str, float]]]:
    """:data:`PAPER_RETURNS` as :func:`harness.train_episodes.plot`'s reference: per env, per contender name."""
    return {
        env_id: {CONTENDERS[role]: (f"the paper's {role} at {PAPER_STEPS / 1e6:g}M", value) for role, value in found.items()}
        for env_id, found in PAPER_RETURNS.items()
    }
