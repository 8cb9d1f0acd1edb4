from sb3_xppo.ppo_mask.ppo_mask import MaskableXPPO

__all__ = ["MaskableXPPO"]
