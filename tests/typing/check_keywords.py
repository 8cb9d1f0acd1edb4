"""Checked by mypy in tests/test_signatures.py (never run): the constructors' keywords as type checkers see them."""

from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO, XPPOOptions

# good calls: PPO's keywords, positionally or by name, and the options as keywords or as the options object
XPPO("MlpPolicy", "CartPole-v1", 3e-4, 128, batch_size=64, actor_loss="spo", clip_range=0.2, normalize_values=True)
XPPO("MlpPolicy", "CartPole-v1", options=XPPOOptions(actor_loss="hpo"), reward_groups=["a", "b"], target_kl=None)
RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", sequence_batching=True, n_steps=128)
MaskableXPPO("MlpPolicy", "CartPole-v1", dual_clip=3.0, log_ratio_clamp=(-1.0, 1.0))

# the five errors mypy reports (a misspelt loss name among them)
XPPO("MlpPolicy", "CartPole-v1", not_a_keyword=3)
XPPO("MlpPolicy", "CartPole-v1", n_steps="many")
RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", actor_loss=1)
MaskableXPPO("MlpPolicy", "CartPole-v1", sequence_batching=True)
XPPO("MlpPolicy", "CartPole-v1", actor_loss="cilp")
