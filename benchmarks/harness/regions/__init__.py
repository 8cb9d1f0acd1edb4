"""
The regions of the pages that ``benchmarks/render_docs.py`` renders, a module per producer: each module's
``REGIONS`` maps a region's name (``<!-- generated:NAME -->``) to ``render(page) -> markdown``.

- :mod:`~harness.regions.learning`: ``benchmarks/learning.py``'s campaigns;
- :mod:`~harness.regions.multi_critic`: ``benchmarks/multi_critic.py``'s campaigns;
- :mod:`~harness.regions.speed`: ``benchmarks/speed.py`` (with ``gae.py``'s and ``overhead.py``'s line);
- :mod:`~harness.regions.overhead`: ``benchmarks/overhead.py``;
- :mod:`~harness.regions.vec_env`: ``benchmarks/vec_env.py``, ``ray_vec_env.py`` and ``train_cli.py`` (and the speed targets);
- :mod:`~harness.regions.dagger`: ``benchmarks/distill.py``;
- :mod:`~harness.regions.grid_maze`: ``examples/maskable_grid_maze.py --out``, the maze of the masks' section;
- :mod:`~harness.regions.train_default`: ``benchmarks/train_default.py``;
- :mod:`~harness.regions.install`: ``benchmarks/install_size.py`` and the main job's time (``train_default.py``);
- :mod:`~harness.regions.distributed`: ``benchmarks/distributed.py``;
- :mod:`~harness.regions.resume`: ``benchmarks/resume.py``;
- :mod:`~harness.regions.safe_load`: ``benchmarks/safe_load.py``;
- :mod:`~harness.regions.spo_depth`: the SPO depth campaigns of ``benchmarks/learning.py`` (issue 56);
- :mod:`~harness.regions.spo_paper`: the SPO campaign in the paper's own setting (``benchmarks/spo_paper.yml``);
- :mod:`~harness.regions.time_to_solve`: ``benchmarks/time_to_solve.py``, the main job's time to a solved task;
- :mod:`~harness.regions.summary`: the README's first screen, the headline and the decision table, from all of them.

:mod:`~harness.regions.results` reads the result files, :mod:`~harness.regions.figures` writes numbers in words.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions import (
    dagger,
    distributed,
    grid_maze,
    install,
    learning,
    multi_critic,
    overhead,
    resume,
    safe_load,
    speed,
    spo_depth,
    spo_paper,
    summary,
    time_to_solve,
    train_default,
    vec_env,
)

#: Each region's renderer, by the region's name
RENDERERS: dict[str, Callable[[Path], str]] = {
    **summary.REGIONS,
    **learning.REGIONS,
    **speed.REGIONS,
    **overhead.REGIONS,
    **vec_env.REGIONS,
    **dagger.REGIONS,
    **grid_maze.REGIONS,
    **train_default.REGIONS,
    **install.REGIONS,
    **multi_critic.REGIONS,
    **distributed.REGIONS,
    **resume.REGIONS,
    **safe_load.REGIONS,
    **spo_depth.REGIONS,
    **spo_paper.REGIONS,
    **time_to_solve.REGIONS,
}
