"""
``load()`` of every XPPO algorithm: safe by default (docs/guide/security.md). A file this user's package saved (signed)
loads as SB3 loads it; any other has its pickled fields decoded with the allowlist
(:func:`~sb3_xppo.loading.archive.safe_load`), then SB3's own ``load()`` builds the model.
"""

from __future__ import annotations

import io
import pathlib
from typing import Any

import torch as th
from stable_baselines3.common.type_aliases import GymEnv

from sb3_xppo.loading.archive import safe_load


class SafeLoadMixin:
    """``load(..., trust_code=False)``: SB3's ``load()``, without running code from the file."""

    @classmethod
    def load(
        cls,
        path: str | pathlib.Path | io.BufferedIOBase,
        env: GymEnv | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        trust_code: bool = False,
        **kwargs: Any,
    ) -> Any:
        """
        SB3's ``load()`` (its parameters, ``custom_objects`` included), safe by default (docs/guide/security.md): a
        file this user's package saved (it carries the user's signature) loads as SB3 loads it, a lambda schedule and
        all; any other file has its pickled fields read with an allowlist of what SB3, sb3-contrib, rl-zoo3 and this
        package write, so no code from it runs. What older stacks wrote is rebuilt (their schedule closures, gym
        spaces), with a warning; a function pickled by value becomes an inert stand-in, which ``learn()`` refuses;
        anything else is a :class:`~sb3_xppo.UnsafeFileError` naming every field and the global it asked for.

        :param trust_code: load as Stable-Baselines3 does, running whatever the file's pickles name: only for files
            you made or trust (``python -m sb3_xppo.trust FILE`` signs such a file once)
        :return: the model
        """
        load = super().load  # type: ignore[misc]
        return safe_load(
            load,
            path,
            custom_objects,
            trust_code,
            env=env,
            device=device,
            print_system_info=print_system_info,
            force_reset=force_reset,
            **kwargs,
        )
