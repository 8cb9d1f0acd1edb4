"""
Vector envs: :class:`LeanVecEnv`, SB3's ``DummyVecEnv`` + ``Monitor`` bit for bit and faster, and
:func:`make_vec_env`, SB3's ``make_vec_env`` with the backend chosen by name (``"lean"``, ``"dummy"``,
``"subproc"``). XPPO, MaskableXPPO and RecurrentXPPO put an env they vectorize themselves (an env id, a gymnasium
env) in a :class:`LeanVecEnv`; ``python -m sb3_xppo.train`` builds its envs with it (``--vec-env lean``, the default).

Layer 1: imports nothing else of the package.
"""

from sb3_xppo.vec_env.backends import (
    BACKEND_BUILDERS,
    PLANNED_BACKENDS,
    VEC_ENV_CLASSES,
    BackendBuilder,
    check_backend,
    make_vec_env,
)
from sb3_xppo.vec_env.lean import IMMUTABLE_INFO_TYPES, PASS_THROUGH_STEPS, EnvStack, LeanVecEnv, fresh_info

__all__ = [
    "BACKEND_BUILDERS",
    "IMMUTABLE_INFO_TYPES",
    "PASS_THROUGH_STEPS",
    "PLANNED_BACKENDS",
    "VEC_ENV_CLASSES",
    "BackendBuilder",
    "EnvStack",
    "LeanVecEnv",
    "check_backend",
    "fresh_info",
    "make_vec_env",
]
