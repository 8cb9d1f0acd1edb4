"""
``load()`` of every XPPO algorithm: safe by default (docs/guide/security.md). The file's pickled fields are decoded
with the allowlist (:func:`~sb3_xppo.common.safe_load.checked_zip`), then SB3's own ``load()`` builds the model.
"""

from __future__ import annotations

import io
import pathlib
from typing import Any

import torch as th
from stable_baselines3.common.type_aliases import GymEnv

from sb3_xppo.common.safe_load import checked_zip


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
        SB3's ``load()`` (its parameters, ``custom_objects`` included), safe by default: the pickled fields of the
        file are read with an allowlist of what SB3, sb3-contrib, rl-zoo3 and this package write, so no code from the
        file runs; anything else is a :class:`~sb3_xppo.UnsafeFileError` naming the field and the global it asked
        for. ``lr_schedule`` pickled as a function by an older SB3 is rebuilt from ``learning_rate``, with a warning.

        :param trust_code: load as Stable-Baselines3 does, running whatever the file's pickles name (a schedule of
            your own, e.g. a lambda ``learning_rate``): only for files you made or trust
        :return: the model
        """
        source, objects = checked_zip(path, custom_objects, trust_code)
        return super().load(  # type: ignore[misc]
            source,
            env=env,
            device=device,
            custom_objects=objects,
            print_system_info=print_system_info,
            force_reset=force_reset,
            **kwargs,
        )
