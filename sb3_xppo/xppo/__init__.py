from sb3_xppo.xppo.buffers import XPPODictRolloutBuffer, XPPORolloutBuffer
from sb3_xppo.xppo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_xppo.xppo.presets import xppo_recommended
from sb3_xppo.xppo.xppo import XPPO, ClipRangePair, LossHook

__all__ = [
    "XPPO",
    "ClipRangePair",
    "CnnPolicy",
    "LossHook",
    "MlpPolicy",
    "MultiInputPolicy",
    "XPPODictRolloutBuffer",
    "XPPORolloutBuffer",
    "xppo_recommended",
]
