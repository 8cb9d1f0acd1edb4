from sb3_xppo.multi_critic.buffers import MultiCriticBufferMixin, MultiCriticDictRolloutBuffer, MultiCriticRolloutBuffer
from sb3_xppo.multi_critic.policies import (
    MultiCriticCnnPolicy,
    MultiCriticMultiInputPolicy,
    MultiCriticPolicy,
    MultiCriticPolicyMixin,
    SeparateCritics,
)
from sb3_xppo.multi_critic.wrappers import GroupRewardVecEnv, RewardGroups

__all__ = [
    "GroupRewardVecEnv",
    "MultiCriticBufferMixin",
    "MultiCriticCnnPolicy",
    "MultiCriticDictRolloutBuffer",
    "MultiCriticMultiInputPolicy",
    "MultiCriticPolicy",
    "MultiCriticPolicyMixin",
    "MultiCriticRolloutBuffer",
    "RewardGroups",
    "SeparateCritics",
]
