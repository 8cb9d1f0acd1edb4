"""
How long the README's test command takes: ``pytest -n 2`` run as written, from the repository's root, with its
wall-clock seconds, its outcome counts and the machine's cores and load written to
``benchmarks/results/single/test_suite.json``, so that the README states the time beside the command.

usage: python benchmarks/suite_time.py [extra pytest arguments...]
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time

from harness.layout import ROOT, single_file
from harness.provenance import code_record

#: The README's test command
COMMAND = ["pytest", "-n", "2"]
#: pytest's last line: ``= 1 failed, 2 passed, 3 skipped in 600.00s (0:10:00) =``
OUTCOME = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)")


def outcome_counts(summary: str) -> dict[str, int]:
    """The counts of pytest's summary line, by outcome (``"error"`` for ``errors``)."""
    return {word.rstrip("s") if word.startswith("error") else word: int(n) for n, word in OUTCOME.findall(summary)}


def main() -> None:
    command = [*COMMAND, *sys.argv[1:]]
    loadavg_start = os.getloadavg()
    start = time.perf_counter()
    finished = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = finished.stdout.strip().splitlines()
    summary = lines[-1] if lines else ""
    print("\n".join(lines[-30:]))
    record = dict(
        command=" ".join(command),
        code=code_record(),
        seconds=seconds,
        returncode=finished.returncode,
        outcomes=outcome_counts(summary),
        host=dict(platform=platform.platform(), cpus=os.cpu_count(), loadavg_start=loadavg_start, loadavg_end=os.getloadavg()),
    )
    out = single_file("test_suite.json")
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(f"{' '.join(command)}: {seconds / 60:.1f} min, {record['outcomes']}; wrote {out}")
    sys.exit(finished.returncode)


if __name__ == "__main__":
    main()
