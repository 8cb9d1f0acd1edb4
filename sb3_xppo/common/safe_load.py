"""
Loading files that someone else made without running their code (docs/guide/security.md).

Stable-Baselines3 stores what JSON cannot hold (spaces, schedules, the policy class, ``policy_kwargs``) in a model
zip's ``data`` entry as base64 cloudpickle under ``":serialized:"``, and ``VecNormalize`` statistics and replay
buffers as plain pickles; unpickling runs whatever callable the file names. Here every such pickle is read by
:class:`RestrictedUnpickler`, whose ``find_class`` hands out only the globals that SB3, sb3-contrib, rl-zoo3 and
this package really write (:func:`allowed_global`); anything else is refused with :class:`UnsafeFileError`, naming
the field and the global it asked for. Tensors (``*.pth``) are read by SB3 itself with ``torch.load(...,
weights_only=True)``.

A model zip is read once into memory; its pickled fields are decoded here and handed to SB3's own ``load()`` as
``custom_objects`` (:func:`checked_zip`), so SB3 never unpickles a field and the model is built by SB3's code,
exactly as before. ``trust_code=True`` skips all of it: SB3's loader as it is.
"""

from __future__ import annotations

import base64
import builtins
import functools
import importlib
import io
import json
import os
import pathlib
import pickle
import warnings
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.save_util import json_to_data, open_path
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.utils import FloatSchedule, LinearSchedule
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

#: How to go on after a refusal, appended to every :class:`UnsafeFileError`
HOW_TO_PROCEED = (
    "If you made this file or trust whoever did, load it with trust_code=True (--trust-code on the commands), which "
    "runs its code as Stable-Baselines3 does; or give the field a value of your own with custom_objects (the "
    "Python API). A schedule of your own (a lambda learning_rate or clip_range) is the common honest case: it is "
    "pickled by value, and code pickled by value cannot be told apart from any other code."
)

#: How to go on after a refusal in text that is always read as literals (YAML, ``normalize``, ``policy_kwargs``)
LITERALS_ONLY = (
    "Text values (rl-zoo3's config.yml and args.yml, normalize, policy_kwargs, --env-kwargs) are read as literals, "
    "dict(...) and torch activation or optimizer classes only, with or without trust_code: write the value so."
)

#: Libraries whose policy, buffer, features-extractor, action-noise and optimizer classes a file may name
LIBRARIES = ("stable_baselines3.", "sb3_contrib.", "sb3_xppo.")

#: Classes of the libraries a file may name besides those families: schedules, options, small value types
LIBRARY_CLASSES = frozenset(
    {
        ("stable_baselines3.common.utils", "FloatSchedule"),
        ("stable_baselines3.common.utils", "ConstantSchedule"),
        ("stable_baselines3.common.utils", "LinearSchedule"),
        ("stable_baselines3.common.type_aliases", "TrainFreq"),
        ("stable_baselines3.common.type_aliases", "TrainFrequencyUnit"),
        ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"),
        ("stable_baselines3.common.running_mean_std", "RunningMeanStd"),
        ("rl_zoo3.utils", "SimpleLinearSchedule"),
        ("sb3_xppo.common.options", "XPPOOptions"),
        ("sb3_xppo.common.options", "RecurrentXPPOOptions"),
        ("sb3_xppo.common.schedules", "ClipRange"),
        ("sb3_xppo.common.schedules", "ClipRangePair"),
        ("sb3_xppo.xppo.xppo", "ClipRangePair"),  # the path checkpoints saved before the re-layout name
    }
)

#: Plain globals: containers, numpy's array, dtype and random-state reconstructors, torch's tensor rebuilders
PLAIN_GLOBALS = frozenset(
    {
        *(("builtins", name) for name in ("set", "frozenset", "slice", "complex", "bytearray", "range", "object")),
        *(("builtins", name) for name in ("dict", "list", "tuple", "int", "float", "bool", "str", "bytes")),
        ("collections", "OrderedDict"),
        ("collections", "deque"),
        ("copyreg", "_reconstructor"),
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        *((f"numpy.{core}.multiarray", name) for core in ("core", "_core") for name in ("_reconstruct", "scalar")),
        *((f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")),
        *(("numpy.random._pickle", name) for name in ("__generator_ctor", "__bit_generator_ctor", "__randomstate_ctor")),
        ("numpy.random.bit_generator", "SeedSequence"),
        ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
        ("numpy.random._pcg64", "PCG64"),
        ("numpy.random._pcg64", "PCG64DXSM"),
        ("numpy.random._mt19937", "MT19937"),
        ("numpy.random._philox", "Philox"),
        ("numpy.random._sfc64", "SFC64"),
        ("numpy.random._generator", "Generator"),
        ("numpy.random.mtrand", "RandomState"),
        ("torch", "device"),
        ("torch", "Size"),
        ("torch._utils", "_rebuild_tensor_v2"),
        ("torch._utils", "_rebuild_parameter"),
    }
)


class UnsafeFileError(ValueError, pickle.UnpicklingError):
    """
    A file asked for code outside the allowlist (a ``ValueError`` and a ``pickle.UnpicklingError``): nothing of it
    ran. The message names the field (``data['learning_rate']``, a ``.pkl``, a ``config.yml``) and the global it
    asked for, and how to go on (:data:`HOW_TO_PROCEED`).

    :param field: where the request was found
    :param asked: the global (``module.name``) or YAML tag it asked for
    :param why: what kind of thing that is, when it helps (e.g. a function pickled by value)
    :param hint: how to go on (default: :data:`HOW_TO_PROCEED`)
    """

    def __init__(self, field: str, asked: str, why: str = "", hint: str = HOW_TO_PROCEED) -> None:
        self.field, self.asked, self.why, self.hint = field, asked, why, hint
        detail = f" ({why})" if why else ""
        super().__init__(f"{field} asks for {asked}{detail}, which is not loaded: no code from a file runs. {hint}")

    def __reduce__(self) -> tuple[Any, tuple[str, str, str, str]]:
        return type(self), (self.field, self.asked, self.why, self.hint)


def _load_storage_from_bytes(blob: bytes, field: str) -> Any:
    """torch's ``_load_from_bytes`` (a pickled tensor's storage) read with ``weights_only=True``: tensors only."""
    try:
        return th.load(io.BytesIO(blob), weights_only=True)
    except pickle.UnpicklingError as error:
        raise UnsafeFileError(
            field, "torch.storage._load_from_bytes", f"a tensor pickle that holds more than tensors: {error}"
        ) from None


#: Globals a pickle may name that are read by a safe replacement instead, given the field (torch's own
#: ``_load_from_bytes`` runs ``torch.load`` unchecked; SB3 pickles tensors so, e.g. ARS's ``weights``)
REPLACED_GLOBALS: dict[tuple[str, str], Callable[..., Any]] = {("torch.storage", "_load_from_bytes"): _load_storage_from_bytes}


def _in_family(module: str, value: Any) -> bool:
    """A class of the families a checkpoint names by reference: policies, buffers, spaces, activations, optimizers."""
    if not isinstance(value, type):
        return False
    if module.startswith(LIBRARIES):
        families = (BasePolicy, BaseBuffer, BaseFeaturesExtractor, ActionNoise, th.optim.Optimizer, th.nn.Module)
        return issubclass(value, families)
    if module.startswith("gymnasium.spaces."):
        return issubclass(value, spaces.Space)
    if module == "torch.nn.modules.activation":
        return issubclass(value, th.nn.Module)
    if module.startswith("torch.optim."):
        return issubclass(value, th.optim.Optimizer)
    if module == "numpy" or module.startswith("numpy.dtypes"):
        return issubclass(value, (np.generic, np.dtype))
    return False


def _may_import(module: str) -> bool:
    """Modules the family check may import to look a name up: the allowlisted libraries' own, nothing else."""
    families = (*LIBRARIES, "gymnasium.spaces.", "torch.optim.")
    return module.startswith(families) or module in {"torch.nn.modules.activation", "numpy", "numpy.dtypes"}


def allowed_global(module: str, name: str, field: str) -> Any:
    """
    The global a pickle (or a YAML ``!!python/name`` tag) names, if the allowlist holds it.

    :param module: its module
    :param name: its name in the module (no dotted names)
    :param field: where it was asked for, for the error
    :return: the object
    :raises UnsafeFileError: for anything outside the allowlist (nothing is imported for it)
    :raises AttributeError: for an allowlisted name the installed library does not have (SB3 then drops the field)
    """
    key = (module, name)
    if key in PLAIN_GLOBALS or key in LIBRARY_CLASSES:
        return getattr(builtins if module == "builtins" else importlib.import_module(module), name)
    if "." not in name and _may_import(module):
        value = getattr(importlib.import_module(module), name, None)
        if _in_family(module, value):
            return value
    why = "a function pickled by value, such as a lambda or a local function" if module.startswith("cloudpickle") else ""
    raise UnsafeFileError(field, f"{module}.{name}", why)


class RestrictedUnpickler(pickle.Unpickler):
    """
    ``pickle.Unpickler`` whose ``find_class`` hands out only :func:`allowed_global`'s globals.

    :param file: the pickle
    :param field: where the pickle comes from (``data['clip_range']``, a path), named in errors
    """

    def __init__(self, file: Any, field: str) -> None:
        super().__init__(file)
        self.field = field

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in REPLACED_GLOBALS:
            return functools.partial(REPLACED_GLOBALS[module, name], field=self.field)
        return allowed_global(module, name, self.field)


def restricted_loads(blob: bytes, field: str) -> Any:
    """
    :param blob: a pickle
    :param field: where it comes from, named in errors
    :return: the object
    :raises UnsafeFileError: when it asks for a global outside the allowlist
    """
    return RestrictedUnpickler(io.BytesIO(blob), field).load()


def load_pickle(path: str | os.PathLike, trust_code: bool = False) -> Any:
    """
    A pickle file (a replay buffer, ``VecNormalize`` statistics) read with the allowlist.

    :param path: the file
    :param trust_code: read it with ``pickle.load``, running whatever it names
    :return: the object
    :raises UnsafeFileError: when it asks for a global outside the allowlist
    """
    with open(path, "rb") as file:
        return pickle.load(file) if trust_code else RestrictedUnpickler(file, str(path)).load()


def load_vec_normalize(path: str | os.PathLike, venv: VecEnv | None = None, trust_code: bool = False) -> VecNormalize:
    """
    ``VecNormalize.load`` without running the file's code: the statistics ``VecNormalize.save`` (and rl-zoo3) wrote.

    :param path: the ``.pkl``
    :param venv: the env to wrap (None: statistics only, no env)
    :param trust_code: read it with ``pickle.load``
    :return: the ``VecNormalize``
    :raises UnsafeFileError: when the file asks for a global outside the allowlist
    :raises ValueError: when it holds something else than a ``VecNormalize``
    """
    loaded = load_pickle(path, trust_code)
    if not isinstance(loaded, VecNormalize):
        raise ValueError(f"{path} holds a {type(loaded).__name__}, not VecNormalize statistics")
    if venv is not None:
        loaded.set_venv(venv)
    return loaded


class CheckedZip(io.BytesIO):
    """A model zip read into memory whose pickled fields :func:`checked_zip` decoded: checking it again is a no-op."""


#: Fields that older SB3 versions pickled as functions by value, and that ``_setup_model`` rebuilds from plain
#: values saved beside them: field -> (the plain fields, how to rebuild)
REBUILT_FIELDS: dict[str, tuple[tuple[str, ...], Callable[..., Any]]] = {
    "lr_schedule": (("learning_rate",), FloatSchedule),
    "exploration_schedule": (
        ("exploration_initial_eps", "exploration_final_eps", "exploration_fraction"),
        LinearSchedule,
    ),
}


def _is_plain_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _rebuilt(key: str, saved: dict[str, Any], error: UnsafeFileError) -> Any:
    """A refused field that the model rebuilds from plain values beside it anyway (:data:`REBUILT_FIELDS`), else raise."""
    if key not in REBUILT_FIELDS or not error.asked.startswith("cloudpickle"):
        raise error
    names, rebuild = REBUILT_FIELDS[key]
    if not all(_is_plain_number(saved.get(name)) for name in names):
        raise error
    warnings.warn(
        f"data[{key!r}] is a function pickled by value (older Stable-Baselines3 versions saved it so), not loaded; it is "
        f"rebuilt from {', '.join(f'{name}={saved[name]}' for name in names)}, as the model's setup does",
        stacklevel=3,
    )
    return rebuild(*(saved[name] for name in names))


def checked_zip(
    path: str | pathlib.Path | io.BufferedIOBase, custom_objects: dict[str, Any] | None = None, trust_code: bool = False
) -> tuple[Any, dict[str, Any] | None]:
    """
    What to hand SB3's ``load()`` so that it runs no code from the file: the zip (in memory) and ``custom_objects``
    holding every pickled field of its ``data``, decoded with the allowlist. A field in the given ``custom_objects``
    is never decoded (SB3's meaning). A field that older SB3 versions pickled as a function but that the model
    rebuilds from plain values (``lr_schedule`` from ``learning_rate``, DQN's ``exploration_schedule``) is rebuilt,
    with a warning. An allowlisted global the installed libraries no longer have is dropped with a warning, as SB3
    does.

    :param path: the model zip (a path, with or without ``.zip``, or a file object)
    :param custom_objects: SB3's ``custom_objects``
    :param trust_code: hand back ``path`` and ``custom_objects`` as they are (SB3 unpickles the fields itself)
    :return: ``(source, custom_objects)`` for SB3's ``load()``
    :raises UnsafeFileError: when a field asks for a global outside the allowlist
    """
    if custom_objects is not None and not isinstance(custom_objects, dict):
        raise ValueError("custom_objects argument must be a dict or None")
    if trust_code or isinstance(path, CheckedZip):
        return path, custom_objects
    file = open_path(path, "r", verbose=0, suffix="zip")
    try:
        source = CheckedZip(file.read())
    finally:
        if isinstance(path, (str, pathlib.Path)):
            file.close()
    objects = dict(custom_objects or {})
    try:
        with zipfile.ZipFile(source) as archive:
            saved = json.loads(archive.read("data").decode()) if "data" in archive.namelist() else {}
    except zipfile.BadZipFile as error:
        raise ValueError(f"Error: the file {path} wasn't a zip-file") from error
    dropped, where = [], f"{os.fspath(path)}: " if isinstance(path, (str, pathlib.Path)) else ""
    for key, item in saved.items():
        if key in objects or not (isinstance(item, dict) and ":serialized:" in item):
            continue
        try:
            objects[key] = restricted_loads(base64.b64decode(item[":serialized:"].encode()), f"{where}data[{key!r}]")
        except UnsafeFileError as error:
            objects[key] = _rebuilt(key, {**saved, **(custom_objects or {})}, error)
        except (RuntimeError, TypeError, AttributeError, ImportError) as error:
            warnings.warn(f"Could not deserialize object {key}. Consider using `custom_objects`.\nException: {error}")
            dropped.append(key)
    source.seek(0)
    return (source if not dropped else _without(source, dropped)), objects


def _without(source: CheckedZip, keys: list[str]) -> CheckedZip:
    """The zip with the fields SB3 could not deserialize either taken out of ``data`` (SB3 skips them)."""
    out = CheckedZip()
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as rewritten:
        for info in archive.infolist():
            content = archive.read(info)
            if info.filename == "data":
                data = json.loads(content.decode())
                content = json.dumps({k: v for k, v in data.items() if k not in keys}, indent=4).encode()
            rewritten.writestr(info, content)
    out.seek(0)
    return out


def checked_data(
    path: str | pathlib.Path | io.BufferedIOBase, custom_objects: dict[str, Any] | None = None, trust_code: bool = False
) -> dict[str, Any]:
    """
    A model zip's ``data`` (its hyperparameters, spaces, policy class), read as :func:`checked_zip` reads it.

    :param path: the model zip
    :param custom_objects: SB3's ``custom_objects``
    :param trust_code: unpickle the fields as SB3 does
    :return: the data
    :raises UnsafeFileError: when a field asks for a global outside the allowlist
    """
    source, objects = checked_zip(path, custom_objects, trust_code)
    file = source if isinstance(source, io.IOBase) else open_path(source, "r", verbose=0, suffix="zip")
    try:
        with zipfile.ZipFile(file) as archive:
            return json_to_data(archive.read("data").decode(), custom_objects=objects)
    finally:
        if file is not source:
            file.close()
