from sb3_xppo.ppo_mask_recurrent.evaluation import evaluate_policy
from sb3_xppo.ppo_mask_recurrent.ppo_mask_recurrent import MaskableRecurrentXPPO

__all__ = ["MaskableRecurrentXPPO", "evaluate_policy"]
