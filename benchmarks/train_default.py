"""
The default run of docs/guide/rl_zoo.md: ``python -m sb3_xppo.train --seed 0`` (XPPO on LunarLander-v3 with the packaged
``xppo.yml`` entry, 1M steps, rl-zoo3's evaluation every 25k steps), trained in a temporary log folder; its
learning curve and evaluations are copied to ``benchmarks/results/single/train_default_<env>_seed<seed>.{png,json}``,
with the command's wall-clock seconds (start to exit, evaluations included: what a user waits for) and the machine's
cores and load, so that the install page can say how long the main job takes.

usage: python benchmarks/train_default.py [--seed 0] [--env LunarLander-v3] [extra sb3_xppo.train flags...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from harness.layout import RESULTS, SINGLE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env", default="LunarLander-v3")
    parser.add_argument("--out-dir", default=os.path.join(RESULTS, SINGLE))
    args, extra = parser.parse_known_args()

    train_args = ["--env", args.env, "--seed", str(args.seed), *extra]
    loadavg_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as log_folder:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sb3_xppo.train", *train_args, "-f", log_folder], check=True)
        seconds = time.perf_counter() - start
        run_dir = os.path.join(log_folder, "xppo", f"{args.env}_1")
        with np.load(os.path.join(run_dir, "evaluations.npz")) as evaluations:
            steps, results = evaluations["timesteps"], evaluations["results"]
        name = os.path.join(args.out_dir, f"train_default_{args.env}_seed{args.seed}")
        shutil.copyfile(os.path.join(run_dir, "learning_curve.png"), name + ".png")
    record = dict(
        command=" ".join(["python -m sb3_xppo.train", *train_args]),
        env=args.env,
        eval_episodes=int(results.shape[1]),
        seconds=seconds,
        host=dict(platform=platform.platform(), cpus=os.cpu_count(), loadavg_start=loadavg_start, loadavg_end=os.getloadavg()),
        evaluations=[
            dict(steps=int(s), mean=float(r.mean()), std=float(r.std())) for s, r in zip(steps, results, strict=True)
        ],
    )
    with open(name + ".json", "w") as f:
        json.dump(record, f, indent=1)
    print(f"wrote {name}.json, {name}.png")


if __name__ == "__main__":
    main()
