"""Checked by mypy in tests/test_dagger_options.py (never run): DAgger's option keywords as type checkers see them."""

from torch.distributions import Normal

from sb3_xppo.dagger_distill import DaggerCallback, DaggerDistiller, DistillOptions, kl_loss


def policy(state: object) -> Normal:
    return Normal(0.0, 1.0)


# good calls: the options as keywords or as the object, a schedule where the callback takes one, the old name
DaggerDistiller(policy, policy, loss_fn=kl_loss, entropy_weight=0.1, batch_size=8, max_dataset_size=100)
DaggerDistiller(policy, policy, options=DistillOptions(beta=0.5), buffer_size=64)
DaggerCallback(policy, weight=lambda progress: progress, rl_coef=0.0, teacher_obs_keys=["state"], trust_code=True)

# the three errors mypy reports
DaggerDistiller(policy, policy, weight=0.5)
DaggerCallback(policy, batch_size="many")
DaggerCallback(policy, not_an_option=1)
