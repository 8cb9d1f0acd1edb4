"""XPPO's ``MlpPolicy``/``CnnPolicy``/``MultiInputPolicy``: SB3's actor-critic policies with XPPO's options
(:class:`~sb3_xppo.common.policies.XPPOPolicyMixin`: RPO, SimBa, the classification critic), the same networks
and numbers with the defaults."""

from sb3_xppo.common.policies import XPPOActorCriticCnnPolicy, XPPOActorCriticPolicy, XPPOMultiInputActorCriticPolicy

MlpPolicy = XPPOActorCriticPolicy
CnnPolicy = XPPOActorCriticCnnPolicy
MultiInputPolicy = XPPOMultiInputActorCriticPolicy
