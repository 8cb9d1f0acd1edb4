"""
CI's walk of README.md's main job on a fresh machine: clone this repository into a new folder, then run the
commands of the Quickstart's main-job block as written, in order, in one bash shell, with:

- ``REPO_URL`` the checkout being tested (``git clone`` of a local path), committed state only;
- an empty pip cache of its own (``PIP_CACHE_DIR`` a new folder): every package is downloaded, as on a new machine;
  the machine's pip configuration is kept, as a user's is;
- the training cut to 50k steps (``python -m sb3_xppo.train -n 50000``): the job's path, not its hour;
- ``pytest`` left out: CI's own test step runs the suite (a second run would cost its 10 minutes again).

Prints each step's time. Exits non-zero when a command fails.

usage: python .ci/readme_walk.py [--dry-run]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The main job's training command in the README, and what the walk runs in its place
TRAIN = "python -m sb3_xppo.train"
TRAIN_CUT = f"{TRAIN} -n 50000"
FENCE = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)


def main_job_block(readme: str) -> list[str]:
    """
    The lines of the Quickstart's bash block that runs the main job, as written.

    :param readme: README.md's text
    :return: its commands, one a line (comments and blank lines dropped)
    :raises ValueError: when the Quickstart has no bash block that clones and trains
    """
    quickstart = readme.split("\n## Quickstart\n", 1)[-1].split("\n## ", 1)[0]
    for match in FENCE.finditer(quickstart):
        lines = [line.split(" #")[0].strip() for line in match[1].splitlines()]
        lines = [line for line in lines if line and not line.startswith("#")]
        if any(line.startswith("git clone") for line in lines) and TRAIN in lines:
            return lines
    raise ValueError("README.md's Quickstart has no bash block with `git clone` and `python -m sb3_xppo.train`")


def walk_commands(readme: str) -> list[str]:
    """The main job's commands as the walk runs them: the training cut to 50k steps, ``pytest`` left out."""
    return [TRAIN_CUT if line == TRAIN else line for line in main_job_block(readme) if not line.startswith("pytest")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args()
    commands = walk_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    if args.dry_run:
        print("\n".join(commands))
        return
    with tempfile.TemporaryDirectory(prefix="readme-walk-") as folder:
        env = {**os.environ, "REPO_URL": str(ROOT), "PIP_CACHE_DIR": os.path.join(folder, "pip-cache")}
        active = env.pop("VIRTUAL_ENV", None)  # a new shell: the venv the README makes, not CI's
        if active:
            paths = env.get("PATH", "").split(os.pathsep)
            env["PATH"] = os.pathsep.join(p for p in paths if Path(p) != Path(active) / "bin")
        env.pop("PYTHONPATH", None)
        state = os.path.join(folder, "cwd")  # each step starts where the last one left (``cd sb3-xppo``)
        with open(state, "w") as f:
            f.write(folder)
        for command in commands:
            print(f"$ {command}", flush=True)
            start = time.perf_counter()
            # one shell per step that re-enters the last step's folder and venv, so that each step is timed on its own
            script = (
                f'set -euo pipefail; cd "$(cat {state})"; '
                "if [ -f .venv/bin/activate ]; then . .venv/bin/activate; fi; "
                f'{command}; pwd > "{state}"'
            )
            done = subprocess.run(["bash", "-c", script], env=env, cwd=folder)
            print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)
            if done.returncode != 0:
                sys.exit(f"README walk: `{command}` failed with exit status {done.returncode}")
    print("README walk: every command of the main job ran")


if __name__ == "__main__":
    main()
