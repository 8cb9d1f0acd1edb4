"""
``python -m sb3_xppo.trust FILE_OR_FOLDER ...`` (console script ``xppo-trust``): vouch for model zips, as
``jupyter trust`` does for notebooks (docs/guide/security.md, "The trust model"). Each zip is signed with this user's
key, so that the package's loaders load it as Stable-Baselines3 does, its code and all, from then on; a folder's
model zips are signed, its subfolders' included (an rl-zoo3 run). Only for files you made or whose maker you trust:
signing runs nothing, loading a signed file runs its code.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import zipfile
from collections.abc import Sequence

from sb3_xppo.loading.archive import open_checked, read_source
from sb3_xppo.loading.signing import key_path, sign_file


def model_zips(path: pathlib.Path) -> list[pathlib.Path]:
    """
    :param path: a model zip, or a folder
    :return: the model zips it names (a folder's, recursively: zips with SB3's ``data`` member)
    :raises ValueError: for a path that is neither
    """
    if path.is_dir():
        found = [zip_path for zip_path in sorted(path.rglob("*.zip")) if _is_model_zip(zip_path)]
        if not found:
            raise ValueError(f"{path}: no model zip in this folder")
        return found
    if path.is_file() and _is_model_zip(path):
        return [path]
    raise ValueError(f"{path}: not a model zip (a zip with Stable-Baselines3's 'data' member) nor a folder")


def _is_model_zip(path: pathlib.Path) -> bool:
    if not zipfile.is_zipfile(path):
        return False
    with open_checked(read_source(path, suffix=None), str(path)) as archive:
        return "data" in archive.namelist()


def main(argv: Sequence[str] | None = None) -> int:
    """
    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :return: exit status: 0, or 2 for a path that is not a model zip nor a folder of some (one line on stderr)
    """
    parser = argparse.ArgumentParser(
        prog="python -m sb3_xppo.trust",
        description="Sign model zips you made or trust, so that sb3-xppo loads them as Stable-Baselines3 does "
        "(their code runs). A folder: every model zip in it, recursively.",
    )
    parser.add_argument("paths", nargs="+", type=pathlib.Path, metavar="FILE_OR_FOLDER")
    args = parser.parse_args(argv)
    try:
        targets = [zip_path for path in args.paths for zip_path in model_zips(path)]
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for target in targets:
        sign_file(target)
        print(f"signed {target}")
    print(f"with the key {key_path()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
