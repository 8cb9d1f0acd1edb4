"""
One rank of a campaign run on several processes (``@ranks=N``, :func:`harness.runs.run_on_ranks`):
``python -m torch.distributed.run --standalone --nproc-per-node N -m harness.ranked TASK_PICKLE OUT_JSON``. Each rank
trains its part of the task; rank 0 writes the run's record to ``OUT_JSON``.
"""

from __future__ import annotations

import json
import os
import pickle
import sys

import torch as th

from harness.runs import train_and_evaluate


def main(task_file: str, out: str) -> None:
    th.set_num_threads(1)
    with open(task_file, "rb") as f:
        task = pickle.load(f)
    record = train_and_evaluate(task)
    if int(os.environ["RANK"]) == 0:
        with open(out, "w") as f:
            json.dump(record, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
