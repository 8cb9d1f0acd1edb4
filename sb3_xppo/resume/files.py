"""
A checkpoint's file: one zip (stored, not compressed) of named members and, last, ``manifest.json`` with the SHA-256
of each. Written crash-safe: a temporary file in the same folder, fsync, an atomic rename, the folder fsynced; a
process killed at any moment leaves the folder with the previous checkpoints and at most a temporary file, which is
never read and is removed by the next write. Read whole and checked before any of it is used.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import zipfile

#: a checkpoint's file name: ``resume-<num_timesteps, 12 digits>.ckpt`` (sorted by name: sorted by progress)
PREFIX, SUFFIX = "resume-", ".ckpt"
MANIFEST = "manifest.json"


class CorruptCheckpointError(ValueError):
    """A checkpoint file that is truncated or whose contents do not match its checksums."""


def checkpoint_name(num_timesteps: int) -> str:
    """:return: the file name of the checkpoint written at ``num_timesteps``"""
    return f"{PREFIX}{num_timesteps:012d}{SUFFIX}"


def checkpoint_step(path: str | os.PathLike) -> int:
    """:return: the ``num_timesteps`` a checkpoint file was written at (the inverse of :func:`checkpoint_name`)"""
    return int(pathlib.Path(path).name.removeprefix(PREFIX).removesuffix(SUFFIX))


def checkpoints(folder: str | os.PathLike) -> list[pathlib.Path]:
    """:return: the checkpoint files of ``folder``, oldest first (temporary files left by a crash excluded)"""
    return sorted(pathlib.Path(folder).glob(f"{PREFIX}*{SUFFIX}"))


def _fsync_folder(folder: pathlib.Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_checkpoint(folder: str | os.PathLike, name: str, members: dict[str, bytes], keep: int) -> pathlib.Path:
    """
    Write a checkpoint atomically and keep the newest ``keep``.

    :param folder: the folder (made if missing)
    :param name: the file name (:func:`checkpoint_name`)
    :param members: member name -> bytes
    :param keep: how many checkpoints to keep, this one included
    :return: the checkpoint's path
    """
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(f".{PREFIX}*{SUFFIX}.tmp"):  # (a write a crash interrupted)
        stale.unlink(missing_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
        manifest = {member: hashlib.sha256(data).hexdigest() for member, data in members.items()}
        archive.writestr(MANIFEST, json.dumps({"format": 1, "sha256": manifest}))
    path, temporary = folder / name, folder / f".{name}.tmp"
    with open(temporary, "wb") as file:
        file.write(buffer.getvalue())
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    _fsync_folder(folder)
    for old in checkpoints(folder)[:-keep]:
        old.unlink(missing_ok=True)
    return path


def read_checkpoint(path: str | os.PathLike) -> dict[str, bytes]:
    """
    :param path: a checkpoint file
    :return: its members, each checked against the manifest
    :raises CorruptCheckpointError: a truncated file, a missing manifest or member, a checksum that does not match
    """
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = json.loads(archive.read(MANIFEST))["sha256"]
            members = {member: archive.read(member) for member in manifest}
            extra = set(archive.namelist()) - set(manifest) - {MANIFEST}
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, EOFError) as error:
        raise CorruptCheckpointError(f"{path} is truncated or corrupt ({type(error).__name__}: {error})") from error
    bad = [member for member, data in members.items() if hashlib.sha256(data).hexdigest() != manifest[member]]
    if bad or extra:
        raise CorruptCheckpointError(f"{path} is corrupt: the checksum of {', '.join(bad or sorted(extra))} does not match")
    return members


def read_latest(folder: str | os.PathLike) -> tuple[pathlib.Path, dict[str, bytes]]:
    """
    The newest checkpoint of ``folder`` (or the checkpoint file ``folder`` names), read and checked.

    :return: its path and members
    :raises FileNotFoundError: no checkpoint there
    :raises CorruptCheckpointError: the newest is corrupt; the message names the newest good one before it, to be
        resumed from by its path
    """
    source = pathlib.Path(folder)
    if source.is_file():
        return source, read_checkpoint(source)
    found = checkpoints(source)
    if not found:
        raise FileNotFoundError(f"no checkpoint ({PREFIX}*{SUFFIX}) in {source}")
    try:
        return found[-1], read_checkpoint(found[-1])
    except CorruptCheckpointError as error:
        for previous in reversed(found[:-1]):
            try:
                read_checkpoint(previous)
            except CorruptCheckpointError:
                continue
            raise CorruptCheckpointError(
                f"{error}. The previous good checkpoint is {previous}: resume from it by its path, e.g. "
                f"XPPO.resume({str(previous)!r}, env=...)"
            ) from None
        raise CorruptCheckpointError(f"{error}; no good checkpoint before it in {source}") from None
