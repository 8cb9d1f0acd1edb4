from sb3_xppo.ppo_recurrent.ppo_recurrent import RecurrentXPPO

__all__ = ["RecurrentXPPO"]
