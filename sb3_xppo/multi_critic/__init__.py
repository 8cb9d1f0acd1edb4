from sb3_xppo.multi_critic.buffers import (
    MultiCriticBufferMixin,
    MultiCriticDictRolloutBuffer,
    MultiCriticMaskableDictRolloutBuffer,
    MultiCriticMaskableRolloutBuffer,
    MultiCriticRolloutBuffer,
)
from sb3_xppo.multi_critic.policies import (
    MaskableMultiCriticCnnPolicy,
    MaskableMultiCriticMultiInputPolicy,
    MaskableMultiCriticPolicy,
    MultiCriticCnnPolicy,
    MultiCriticMultiInputPolicy,
    MultiCriticPolicy,
    MultiCriticPolicyMixin,
    SeparateCritics,
)
from sb3_xppo.multi_critic.wrappers import GroupRewards, RewardGroups

__all__ = [
    "GroupRewards",
    "MaskableMultiCriticCnnPolicy",
    "MaskableMultiCriticMultiInputPolicy",
    "MaskableMultiCriticPolicy",
    "MultiCriticBufferMixin",
    "MultiCriticCnnPolicy",
    "MultiCriticDictRolloutBuffer",
    "MultiCriticMaskableDictRolloutBuffer",
    "MultiCriticMaskableRolloutBuffer",
    "MultiCriticMultiInputPolicy",
    "MultiCriticPolicy",
    "MultiCriticPolicyMixin",
    "MultiCriticRolloutBuffer",
    "RewardGroups",
    "SeparateCritics",
]
