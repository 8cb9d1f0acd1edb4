"""
A checkpoint's file: one zip (stored, not compressed) of named members and, last, ``manifest.json`` with the SHA-256
of each. Written crash-safe: a temporary file in the same folder (named by the writing process), fsync, an atomic
rename, the folder fsynced; a process killed at any moment leaves the folder with the previous checkpoints and at most
a temporary file, which is never read and is removed by the next write; a write that fails (a full disk) leaves the
previous checkpoints and no temporary file. One process writes a folder at a time (:class:`FolderLock`). Read whole
and checked before any of it is used.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import pathlib
import warnings
import zipfile
from typing import ClassVar

#: a checkpoint's file name: ``resume-<num_timesteps, 12 digits>.ckpt`` (sorted by name: sorted by progress)
PREFIX, SUFFIX = "resume-", ".ckpt"
MANIFEST = "manifest.json"


class CorruptCheckpointError(ValueError):
    """A checkpoint file that is truncated or whose contents do not match its checksums."""


class FolderInUseError(RuntimeError):
    """Another process is writing checkpoints in the folder (two runs resumed from one folder would overwrite each
    other's checkpoints)."""


#: the lock file of a checkpoint folder
LOCK = ".lock"


class FolderLock:
    """
    The one writer of a checkpoint folder: an exclusive ``flock`` on its :data:`LOCK` file, held from
    :meth:`acquire` to :meth:`release` (the operating system releases it when the process dies). Within one process
    the lock passes on: a ``learn()`` that raised leaves its callback's lock held, and the next writer of the folder in
    the process takes it over.

    :param folder: the checkpoint folder (made if missing)
    """

    #: the locks this process holds: folder -> the lock file's descriptor
    _held: ClassVar[dict[pathlib.Path, int]] = {}

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = pathlib.Path(folder)
        self._descriptor: int | None = None

    def acquire(self) -> None:
        """:raises FolderInUseError: another process holds it, named by its process id"""
        if self._descriptor is not None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        key = self.folder.resolve()
        if key in FolderLock._held:
            self._descriptor = FolderLock._held[key]
            return
        descriptor = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 32).decode(errors="replace").strip() or "unknown"
            os.close(descriptor)
            raise FolderInUseError(
                f"{self.folder} is being written by another process (pid {holder}): one run writes a checkpoint folder "
                "at a time; wait for it to end, or resume from a copy of the folder"
            ) from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, str(os.getpid()).encode())
        self._descriptor = FolderLock._held[key] = descriptor

    def release(self) -> None:
        if self._descriptor is not None and FolderLock._held.get(self.folder.resolve()) == self._descriptor:
            del FolderLock._held[self.folder.resolve()]
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)
            os.close(self._descriptor)
        self._descriptor = None


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
    for stale in folder.glob(f".{PREFIX}*{SUFFIX}*.tmp"):  # (a write a crash interrupted)
        stale.unlink(missing_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
        manifest = {member: hashlib.sha256(data).hexdigest() for member, data in members.items()}
        archive.writestr(MANIFEST, json.dumps({"format": 1, "sha256": manifest}))
    path, temporary = folder / name, folder / f".{name}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as file:
            file.write(buffer.getvalue())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)  # (a full disk: the previous checkpoints stay, no half file)
        raise
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
    The newest checkpoint of ``folder`` that verifies (or the checkpoint file ``folder`` names), read and checked. A
    newer one that does not verify (truncated, corrupt) is skipped with a warning that names it and says why.

    :return: its path and members
    :raises FileNotFoundError: no checkpoint there
    :raises CorruptCheckpointError: the file named, or every checkpoint of the folder, does not verify (each named)
    """
    source = pathlib.Path(folder)
    if source.is_file():
        return source, read_checkpoint(source)
    found = checkpoints(source)
    if not found:
        raise FileNotFoundError(f"no checkpoint ({PREFIX}*{SUFFIX}) in {source}")
    skipped: list[str] = []
    for path in reversed(found):
        try:
            members = read_checkpoint(path)
        except CorruptCheckpointError as error:
            skipped.append(str(error))
            continue
        if skipped:
            warnings.warn(
                f"skipped {len(skipped)} newer checkpoint(s) that do not verify: {'; '.join(skipped)}; going on from {path}",
                stacklevel=2,
            )
        return path, members
    raise CorruptCheckpointError(f"no checkpoint of {source} verifies: {'; '.join(skipped)}")
