"""
Vector envs: :class:`LeanVecEnv`, SB3's ``DummyVecEnv`` + ``Monitor`` bit for bit and faster, and
:func:`make_vec_env`, SB3's ``make_vec_env`` with the backend chosen by name (``"lean"``, ``"dummy"``,
``"subproc"``, ``"envpool"``: :class:`EnvPoolVecEnv`, EnvPool's C++ envs behind SB3's VecEnv, ``"ray"``:
:class:`RayVecEnv`, the envs in Ray actors on the nodes of a cluster). XPPO, MaskableXPPO
and RecurrentXPPO put an env they vectorize themselves (an env id, a gymnasium env) in a :class:`LeanVecEnv`;
``python -m sb3_xppo.train`` builds its envs with it (``--vec-env lean``, the default).

Layer 1: imports nothing else of the package.
"""

from sb3_xppo.vec_env.backends import (
    BACKEND_BUILDERS,
    VEC_ENV_CLASSES,
    VEC_ENV_FACTORIES,
    BackendBuilder,
    check_backend,
    make_vec_env,
)
from sb3_xppo.vec_env.envpool import ENVPOOL_ENV_IDS, EnvPoolVecEnv
from sb3_xppo.vec_env.lean import IMMUTABLE_INFO_TYPES, PASS_THROUGH_STEPS, EnvStack, LeanVecEnv, fresh_info
from sb3_xppo.vec_env.ray_vec_env import ActorPlacement, RayEnvActorError, RayEnvTimeoutError, RayVecEnv

__all__ = [
    "BACKEND_BUILDERS",
    "ENVPOOL_ENV_IDS",
    "IMMUTABLE_INFO_TYPES",
    "PASS_THROUGH_STEPS",
    "VEC_ENV_CLASSES",
    "VEC_ENV_FACTORIES",
    "ActorPlacement",
    "BackendBuilder",
    "EnvPoolVecEnv",
    "EnvStack",
    "LeanVecEnv",
    "RayEnvActorError",
    "RayEnvTimeoutError",
    "RayVecEnv",
    "check_backend",
    "fresh_info",
    "make_vec_env",
]
