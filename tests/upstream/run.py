"""
``python tests/upstream/run.py [sb3|contrib] [-- PYTEST_ARGS]``: Stable-Baselines3's and sb3-contrib's own test
suites, with the package's classes in their parents' place (XPPO for PPO, MaskableXPPO for MaskablePPO,
RecurrentXPPO for RecurrentPPO; docs/guide/development.md, "The upstream suites"). For each suite it checks that the
installed version is the one the suite is pinned to (an upgrade fails here, not silently), downloads the source
distribution with pip (checked by its SHA-256, cached under ``build/upstream/``), takes its test files that exercise
PPO, MaskablePPO and RecurrentPPO (``suites.py``), and runs them with pytest on two workers under ``plugin.py``.
Exit status: 0 when every suite passes.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / "build" / "upstream"

sys.path.insert(0, str(HERE))
from suites import SUITES, Suite  # noqa: E402


def source(suite: Suite) -> pathlib.Path:
    """:return: the suite's source distribution, downloaded once and checked by its hash"""
    CACHE.mkdir(parents=True, exist_ok=True)
    name = f"{suite.module}-{suite.version}.tar.gz"
    path = CACHE / name
    if not path.is_file():
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(CACHE)]
        subprocess.run([*command, f"{suite.distribution}=={suite.version}"], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != suite.sha256:
        raise SystemExit(f"{path}: SHA-256 {digest}, not the pinned {suite.sha256}")
    return path


def tests_of(suite: Suite) -> pathlib.Path:
    """:return: a folder with the suite's configuration (pyproject.toml) and its selected test files, fresh"""
    folder = CACHE / f"{suite.module}-{suite.version}"
    shutil.rmtree(folder, ignore_errors=True)
    prefix = f"{suite.module}-{suite.version}/"
    wanted = {f"{prefix}pyproject.toml", *(f"{prefix}tests/{name}" for name in suite.files)}
    with tarfile.open(source(suite)) as archive:
        members = [member for member in archive.getmembers() if member.name in wanted]
        missing = wanted - {member.name for member in members}
        if missing:
            raise SystemExit(f"{suite.distribution} {suite.version} has no {sorted(missing)}")
        archive.extractall(CACHE, members=members, filter="data")
    return folder


def run(name: str, pytest_args: list[str]) -> int:
    suite = SUITES[name]
    installed = importlib.metadata.version(suite.distribution)
    if installed != suite.version:
        print(
            f"{suite.distribution} {installed} is installed; the suite is pinned to {suite.version}: update "
            "tests/upstream/suites.py (version, sha256, files, deselected) for the new release",
            file=sys.stderr,
        )
        return 1
    folder = tests_of(suite)
    key = os.environ.get("SB3_XPPO_SIGNING_KEY") or str(pathlib.Path(tempfile.mkdtemp(prefix="sb3_xppo_key_")) / "key")
    env = {
        **os.environ,
        "SB3_XPPO_UPSTREAM_SUITE": name,
        "SB3_XPPO_SIGNING_KEY": key,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "pytest", "-p", "plugin", "-p", "no:cacheprovider", "-n", "2", "tests", *pytest_args]
    print(f"--- {suite.distribution} {suite.version}: {' '.join(command[1:])}", flush=True)
    return subprocess.run(command, cwd=folder, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="*", metavar="|".join(SUITES), help="the suites to run (default: every suite)")
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, pytest_args = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    args = parser.parse_args(ours)
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites {sorted(unknown)}: choose from {list(SUITES)}")
    statuses = [run(name, pytest_args) for name in (args.suites or list(SUITES))]
    return max(statuses, default=0)


if __name__ == "__main__":
    sys.exit(main())
