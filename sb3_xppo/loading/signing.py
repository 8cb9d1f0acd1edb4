"""
Your own files, signed (docs/guide/security.md, "The trust model"): what the package saves carries an HMAC-SHA256 over
its zip's members, made with a key only this user can read (Jupyter's model for trusted notebooks). A file whose
signature verifies was written by this user's package (or signed by this user, ``python -m sb3_xppo.trust``) and
loads as Stable-Baselines3 loads it, a lambda schedule and all; any other file loads through the allowlist.

The key is ``$XDG_CONFIG_HOME/sb3-xppo/signing.key`` (``~/.config/sb3-xppo/signing.key``), made on the first save,
mode 0600; ``SB3_XPPO_SIGNING_KEY`` names another key file (one key for the machines of a cluster). The signature
is a zip member, ``sb3_xppo_signature``, that SB3's loader does not read: stock ``PPO.load`` still loads the file.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import pathlib
import secrets
import zipfile
from collections.abc import Callable
from typing import Any

from stable_baselines3.common.save_util import open_path

#: The zip member that holds the signature
SIGNATURE_MEMBER = "sb3_xppo_signature"
#: The environment variable that names the key file
KEY_VARIABLE = "SB3_XPPO_SIGNING_KEY"
_DOMAIN = b"sb3-xppo signature 1\n"


def key_path() -> pathlib.Path:
    """:return: the key file: ``$SB3_XPPO_SIGNING_KEY``, else ``sb3-xppo/signing.key`` in the user's config folder"""
    named = os.environ.get(KEY_VARIABLE)
    if named:
        return pathlib.Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return pathlib.Path(config) / "sb3-xppo" / "signing.key"


def signing_key(create: bool = False) -> bytes | None:
    """
    :param create: make the key (32 random bytes, the file mode 0600, its folder 0700) when there is none
    :return: the key, or None when there is none and ``create`` is False (no file then verifies)
    """
    path = key_path()
    if not path.is_file():
        if not create:
            return None
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # (another process made it first)
            pass
        else:
            with os.fdopen(descriptor, "w") as file:
                file.write(secrets.token_hex(32))
    return path.read_text().strip().encode()


def _digest(archive: zipfile.ZipFile, key: bytes) -> str | None:
    """:return: the HMAC of every member but the signature (None for a zip with two members of one name)"""
    infos = [info for info in archive.infolist() if info.filename != SIGNATURE_MEMBER]
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        return None
    message = hashlib.sha256(_DOMAIN)
    for info in sorted(infos, key=lambda info: info.filename):
        message.update(f"{len(info.filename)}:{info.filename}:".encode())
        message.update(hashlib.sha256(archive.read(info)).digest())
    return hmac.new(key, message.digest(), hashlib.sha256).hexdigest()


def verified(archive: zipfile.ZipFile) -> bool:
    """
    :param archive: a zip (its sizes checked already: this reads every member)
    :return: whether it carries a signature made with this user's key over exactly its members
    """
    if SIGNATURE_MEMBER not in archive.namelist() or archive.namelist().count(SIGNATURE_MEMBER) != 1:
        return False
    key = signing_key()
    if key is None:
        return False
    try:
        claimed = json.loads(archive.read(SIGNATURE_MEMBER)).get("hmac_sha256")
    except (ValueError, AttributeError):
        return False
    digest = _digest(archive, key)
    return isinstance(claimed, str) and digest is not None and hmac.compare_digest(claimed, digest)


def signed(data: bytes) -> bytes:
    """
    :param data: a zip
    :return: the same zip with this user's signature as its last member (an older signature replaced)
    """
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if SIGNATURE_MEMBER in archive.namelist():
            rewritten = io.BytesIO()
            with zipfile.ZipFile(rewritten, "w") as out:
                for info in archive.infolist():
                    if info.filename != SIGNATURE_MEMBER:
                        out.writestr(info, archive.read(info))
            data = rewritten.getvalue()
    key = signing_key(create=True)
    assert key is not None
    buffer = io.BytesIO(data)
    with zipfile.ZipFile(buffer, "a") as archive:
        digest = _digest(archive, key)
        archive.writestr(SIGNATURE_MEMBER, json.dumps({"format": 1, "hmac_sha256": digest}))
    return buffer.getvalue()


def signed_save(save: Callable[..., None], path: Any, *args: Any, **kwargs: Any) -> None:
    """
    A model's ``save(path, ...)``, signed: SB3's zip written to memory, signed, then to ``path`` as SB3 writes it
    (a path gets the ``.zip`` suffix and its folders; a file object is written to and left open).

    :param save: SB3's ``save`` of the model
    :param path: where to save it
    """
    buffer = io.BytesIO()
    save(buffer, *args, **kwargs)
    data = signed(buffer.getvalue())
    file = open_path(path, "w", verbose=0, suffix="zip")
    try:
        file.write(data)
    finally:
        if isinstance(path, (str, pathlib.Path)):
            file.close()


def sign_file(path: str | os.PathLike) -> None:
    """Sign a model zip in place (``python -m sb3_xppo.trust``): it loads as Stable-Baselines3 loads it from then on."""
    path = pathlib.Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(signed(path.read_bytes()))
    os.replace(temporary, path)
