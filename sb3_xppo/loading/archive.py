"""
Model zips and torch files, read safely (docs/guide/security.md):

- every zip is opened by :func:`open_checked`, which checks the declared sizes (members, their total, each one's
  compression ratio) before anything is inflated;
- a model zip this user's package signed (:mod:`~sb3_xppo.loading.signing`) is handed to SB3's ``load()`` as it is;
  any other has every pickled field of its ``data`` decoded by :class:`~sb3_xppo.loading.unpickler.SafeUnpickler`
  and handed to SB3's ``load()`` as ``custom_objects`` (:func:`checked_zip`), so SB3 never unpickles a field and
  builds the model with its own code;
- a policy saved by a policy's own ``save()`` (``BaseModel.save``, a torch file) is read by torch with that
  unpickler (:func:`safe_torch_load`).
"""

from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import pickle
import types
import warnings
import zipfile
from collections.abc import Callable
from typing import Any

import torch as th
from stable_baselines3.common.save_util import json_to_data, open_path

from sb3_xppo.loading.errors import (
    PICKLE_HINT,
    ZIP_HINT,
    FileTooLargeError,
    Refusal,
    UnreadableFileError,
    UnsafeFileError,
)
from sb3_xppo.loading.legacy import InertFunction, building
from sb3_xppo.loading.signing import verified
from sb3_xppo.loading.unpickler import ALLOCATION_BUDGET, SafeUnpickler, loads_with_notes

#: The most members a zip may declare
MAX_MEMBERS = 4096
#: The most bytes its members may inflate to, together
MAX_INFLATED = 8 * 2**30
#: The most bytes a model zip's ``data`` (JSON) may inflate to
MAX_DATA = 256 * 2**20
#: The highest compression ratio of a member that inflates to more than :data:`RATIO_FLOOR` bytes (deflate reaches
#: about 1000:1 on a run of zeros; a checkpoint's members compress far less)
MAX_RATIO = 200
RATIO_FLOOR = 2**20

#: Fields that a model's setup rebuilds from plain values saved beside them (SB3's ``_setup_model``): what the file
#: holds there is never used, so a function pickled by value there does not stop training
REBUILT_BY_SETUP: dict[str, tuple[str, ...]] = {
    "lr_schedule": ("learning_rate",),
    "exploration_schedule": ("exploration_initial_eps", "exploration_final_eps", "exploration_fraction"),
}


class CheckedZip(io.BytesIO):
    """
    A model zip read into memory and checked by :func:`checked_zip`: checking it again is a no-op. ``stand_ins``: the
    inert stand-ins its fields hold (:class:`~sb3_xppo.loading.legacy.InertFunction`), for :func:`safe_load`.
    """

    def __init__(self, data: bytes = b"") -> None:
        super().__init__(data)
        self.stand_ins: list[InertFunction] = []


def _name(path: Any) -> str:
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else "the model zip"


def read_source(path: str | os.PathLike | io.BufferedIOBase, suffix: str | None = "zip") -> bytes:
    """
    :param path: a path (with or without ``suffix``, as SB3 opens it) or a file object (read whole, from its start)
    :return: the file's bytes
    """
    if isinstance(path, (str, os.PathLike)):
        file = open_path(os.fspath(path), "r", verbose=0, suffix=suffix)
        with file:
            return file.read()
    if path.seekable():
        path.seek(0)  # (SB3's zipfile reads a file object whatever its position: after save(f), f is at its end)
    return path.read()


def open_checked(data: bytes, name: str, limit: dict[str, int] | None = None) -> zipfile.ZipFile:
    """
    :param data: a zip
    :param name: the file, for errors
    :param limit: member name -> the most bytes it may inflate to (e.g. ``{"data": MAX_DATA}``)
    :return: the zip, open, its declared sizes within the limits
    :raises ValueError: for a file that is not a zip
    :raises FileTooLargeError: naming the member and its declared size, before anything is inflated
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as error:
        raise ValueError(f"Error: the file {name} wasn't a zip-file") from error
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise FileTooLargeError(f"{name} declares {len(infos)} members (at most {MAX_MEMBERS}): not a checkpoint")
    total = sum(info.file_size for info in infos)
    if total > MAX_INFLATED:
        raise FileTooLargeError(f"{name} declares {total:,} bytes inflated (at most {MAX_INFLATED:,}): not inflated")
    for info in infos:
        most = (limit or {}).get(info.filename)
        if most is not None and info.file_size > most:
            raise FileTooLargeError(
                f"{name}: member {info.filename!r} declares {info.file_size:,} bytes (at most {most:,}): not inflated"
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR and ratio > MAX_RATIO:
            raise FileTooLargeError(
                f"{name}: member {info.filename!r} declares {info.file_size:,} bytes from {info.compress_size:,} "
                f"(a ratio of {ratio:.0f}, at most {MAX_RATIO}): a zip bomb, not inflated"
            )
    return archive


def _decode_fields(
    saved: dict[str, Any], objects: dict[str, Any], where: str, for_training: bool, stand_ins: list[InertFunction]
) -> tuple[list[Refusal], list[str]]:
    """
    Decode every pickled field of ``data`` that ``objects`` (SB3's ``custom_objects``) does not give, into ``objects``.

    :param stand_ins: where to add the inert stand-ins made
    :return: the refusals, and the fields SB3 could not deserialize either (dropped, as SB3 drops them)
    """
    refusals: list[Refusal] = []
    dropped: list[str] = []
    given = set(objects)
    for key, item in saved.items():
        if key in objects or not (isinstance(item, dict) and ":serialized:" in item):
            continue
        field = f"{where}data[{key!r}]"
        try:
            value, unpickler = loads_with_notes(base64.b64decode(item[":serialized:"].encode()), field, ZIP_HINT)
        except UnsafeFileError as error:
            refusals += error.refusals
            continue
        except (RuntimeError, TypeError, AttributeError, ImportError) as error:
            warnings.warn(f"Could not deserialize object {key}. Consider using `custom_objects`.\nException: {error}")
            dropped.append(key)
            continue
        except (pickle.UnpicklingError, ValueError, EOFError, IndexError, KeyError) as error:
            raise UnreadableFileError(
                f"{field} is not a pickle the libraries write: {type(error).__name__}: {error}"
            ) from None
        notes, known = unpickler.notes, {**saved, **objects}  # (custom_objects given replace the file's values)
        plain = REBUILT_BY_SETUP.get(key, ())
        if unpickler.inert and plain and any(name in given for name in plain):
            notes = []  # (rebuilt by the setup from the values you gave: the file's is never used)
        elif unpickler.inert and plain and all(isinstance(known.get(name), (int, float)) for name in plain):
            rebuilt_from = ", ".join(f"{name}={known[name]}" for name in plain)
            names = ", ".join(stand_in.name for stand_in in unpickler.inert)
            notes = [f"{names} (a function pickled by value) not loaded: rebuilt from {rebuilt_from}, as the setup does"]
        elif unpickler.inert and for_training:
            why = "a function pickled by value, which training would call"
            refusals += [Refusal(field, stand_in.name, why) for stand_in in unpickler.inert]
            continue
        if notes:
            warnings.warn(f"{field}: {'; '.join(notes)}", stacklevel=4)
        stand_ins += unpickler.inert
        objects[key] = value
    return refusals, dropped


def checked_zip(
    path: str | pathlib.Path | io.BufferedIOBase,
    custom_objects: dict[str, Any] | None = None,
    trust_code: bool = False,
    for_training: bool = False,
) -> tuple[Any, dict[str, Any] | None]:
    """
    What to hand SB3's ``load()`` so that it runs no code from the file: the zip (in memory, its sizes checked) and
    ``custom_objects`` holding every pickled field of its ``data``, decoded safely. A field in the given
    ``custom_objects`` is never decoded (SB3's meaning). A file this user's package signed, or any file with
    ``trust_code``, is handed over as it is (SB3 unpickles it). What older stacks wrote is rebuilt
    (:mod:`~sb3_xppo.loading.legacy`), with a warning per field; a function pickled by value becomes an inert
    stand-in, refused instead ``for_training`` (except where the model's setup rebuilds the field). An allowlisted
    global the installed libraries no longer have is dropped with a warning, as SB3 does.

    :param path: the model zip (a path, with or without ``.zip``, or a file object)
    :param custom_objects: SB3's ``custom_objects``
    :param trust_code: hand the file to SB3 as it is, unchecked but for its sizes
    :param for_training: refuse a function pickled by value that training would call
    :return: ``(source, custom_objects)`` for SB3's ``load()``
    :raises UnsafeFileError: listing every field that asks for code outside the allowlist
    :raises FileTooLargeError: for declared sizes beyond the limits (:func:`open_checked`)
    """
    if custom_objects is not None and not isinstance(custom_objects, dict):
        raise ValueError("custom_objects argument must be a dict or None")
    if isinstance(path, CheckedZip):
        return path, custom_objects
    name = _name(path)
    source = CheckedZip(read_source(path))
    with open_checked(source.getvalue(), name, {"data": MAX_DATA}) as archive:
        if trust_code or verified(archive):
            return source, custom_objects
        saved = json.loads(archive.read("data").decode()) if "data" in archive.namelist() else {}
    objects = dict(custom_objects or {})
    where = f"{name}: " if isinstance(path, (str, os.PathLike)) else ""
    stand_ins: list[InertFunction] = []
    refusals, dropped = _decode_fields(saved, objects, where, for_training, stand_ins)
    if refusals:
        raise UnsafeFileError.of(refusals, ZIP_HINT)
    checked = source if not dropped else _without(source, dropped)
    checked.stand_ins = stand_ins
    return checked, objects


def safe_load(
    load: Callable[..., Any],
    path: str | pathlib.Path | io.BufferedIOBase,
    custom_objects: dict[str, Any] | None = None,
    trust_code: bool = False,
    for_training: bool = False,
    **kwargs: Any,
) -> Any:
    """
    A model loaded by an algorithm's own ``load()`` from what :func:`checked_zip` hands it: the model SB3 builds,
    with no code from the file run. An inert stand-in answers a schedule's call while the model is built
    (:func:`~sb3_xppo.loading.legacy.building`).

    :param load: the class's ``load`` (SB3's, or an algorithm's of this package)
    :param path: the model zip
    :param custom_objects: SB3's ``custom_objects``
    :param trust_code: load as SB3 does (a file this user's package signed loads so without it)
    :param for_training: refuse a function pickled by value that training would call
    :param kwargs: ``load()``'s further keywords
    :return: the model
    """
    source, objects = checked_zip(path, custom_objects, trust_code, for_training)
    with building(getattr(source, "stand_ins", [])):
        return load(source, custom_objects=objects, **kwargs)


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
    with zipfile.ZipFile(source) as archive:
        return json_to_data(archive.read("data").decode(), custom_objects=objects)


def safe_torch_load(path: str | os.PathLike | io.BufferedIOBase, map_location: Any, field: str | None = None) -> Any:
    """
    ``torch.load`` of a file a policy's ``save()`` wrote (``{"state_dict": ..., "data": ...}``), its pickle read by
    :class:`~sb3_xppo.loading.unpickler.SafeUnpickler`; the sizes checked first.

    :param path: the file (torch's zip format)
    :param map_location: torch's ``map_location``
    :param field: how to name the file in errors (default: its path)
    :return: what the file holds
    :raises UnsafeFileError: when its pickle asks for code outside the allowlist
    """
    name = field or _name(path)
    data = read_source(path, suffix=None)
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise UnreadableFileError(f"{name} is not in torch's zip format (torch >= 1.6): load it with trust_code=True")
    open_checked(data, name).close()

    class FileUnpickler(SafeUnpickler):
        def __init__(self, file: Any, **kwargs: Any) -> None:
            super().__init__(file, name, PICKLE_HINT, ALLOCATION_BUDGET + 4 * len(data), **kwargs)

    def load(file: Any, **kwargs: Any) -> Any:
        return FileUnpickler(file, **kwargs).load()

    module = types.SimpleNamespace(__name__=__name__, Unpickler=FileUnpickler, load=load)
    try:
        return th.load(io.BytesIO(data), map_location=map_location, weights_only=False, pickle_module=module)
    except UnsafeFileError:
        raise
    except (pickle.UnpicklingError, EOFError, IndexError, KeyError) as error:
        raise UnreadableFileError(f"{name} is not a file the libraries write: {type(error).__name__}: {error}") from None
