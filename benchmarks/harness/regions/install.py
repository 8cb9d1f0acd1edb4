"""
The regions of the install page and the README's set-up: what each extra weighs (``benchmarks/install_size.py``,
``single/install_size.json``), how long the main job takes (``benchmarks/train_default.py``,
``single/train_default_<env>_seed<k>.json``) and how long its tests take (``benchmarks/suite_time.py``,
``single/test_suite.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions.figures import budget
from harness.regions.results import single, the_campaign

#: What each extra is for, in words (its packages and sizes come from ``install_size.json``)
EXTRA_WORDS = {
    "tests": "pytest (with xdist and timeouts), MO-Gymnasium (multi-critic examples and tests), ruff, scipy (the Beta "
    "distribution's tests)",
    "extra": 'rl-zoo3 (training, evaluation, optuna search, `enjoy`), EnvPool (`make_vec_env(backend="envpool")`, '
    "with its MuJoCo assets), MuJoCo through `gymnasium[mujoco]` (the Hopper and HalfCheetah benchmarks), the PostgreSQL "
    "driver for distributed search, tensorboard, rliable, pandas, scipy and matplotlib (benchmarks and plots), moviepy "
    "with ffmpeg (videos), the ALE and OpenCV (rl-zoo3's Atari entries)",
    "ray": 'Ray, for `RayVecEnv`: the envs in Ray actors on the nodes of a cluster (`make_vec_env(backend="ray")`, '
    "`--vec-env ray`)",
    "docs": "Sphinx, the Read the Docs theme and MyST (this documentation)",
}
#: The contender of the tuned entries' campaign that is ``python -m sb3_xppo.train``'s entry (``zoo_configs/xppo.yml``)
ZOO_ENTRY = "xppo-zoo"
#: The file of the main job's timed run
MAIN_JOB = "train_default_LunarLander-v3_seed0.json"
#: The file of the README's test command's timed run
TEST_SUITE = "test_suite.json"


def megabytes(value: float) -> str:
    """A size in words: ``"1.6 GB"``, ``"250 MB"``."""
    return f"{value / 1000:.1f} GB" if value >= 1000 else f"{value:.0f} MB"


def render_install_extras(page: Path) -> str:
    """Each extra: what it is for, what it adds to the smallest install on disk, and its largest packages."""
    data = single("install_size.json")
    if data is None:
        return "Pending: `python benchmarks/install_size.py`."
    lines = [
        "| extra | what it brings | installed on top of the smallest install (largest packages) |",
        "| --- | --- | --- |",
    ]
    for extra, row in data["extras"].items():
        largest = ", ".join(f"{name} {megabytes(size)}" for name, size in list(row["packages"].items())[:4])
        lines.append(f"| `{extra}` | {EXTRA_WORDS.get(extra, '(not described yet)')} | {megabytes(row['mb'])} ({largest}) |")
    base = data["base"]
    lines += [
        "",
        f"The smallest install (`pip install -e .`) takes {megabytes(base['mb'])}, of which torch "
        f"{data['torch']['version']} {megabytes(data['torch']['mb'])} (the CPU build; the CUDA build adds NVIDIA's "
        "libraries, several GB). Extras share packages (scipy is in `tests` and `extra`), so their sizes do not add "
        "up. Measured in this repository's own environment with `python benchmarks/install_size.py`: the installed "
        "files' sizes, not the downloads.",
    ]
    return "\n".join(lines)


def render_main_job_time(page: Path) -> str:
    """How long the main job's two commands take: the training (:func:`training_time`), then the tests."""
    return f"{training_time()} {test_time()}"


def test_time() -> str:
    """The README's test command's wall-clock time, as ``benchmarks/suite_time.py`` recorded it."""
    data = single(TEST_SUITE)
    if data is None:
        return "The tests' time: pending (`python benchmarks/suite_time.py`)."
    counts = ", ".join(f"{n:,} {outcome}" for outcome, n in data["outcomes"].items())
    return (
        f"The tests, `{data['command']}`, took {data['seconds'] / 60:.0f} minutes on {data['host']['cpus']} cores "
        f"({counts}; `python benchmarks/suite_time.py`)."
    )


def training_time() -> str:
    """
    How long ``python -m sb3_xppo.train`` takes: the whole command's wall-clock time when ``train_default.py`` has
    recorded one, else the ``learn()`` time of the same entry's 1M-step runs in the tuned entries' campaign.
    """
    data = single(MAIN_JOB)
    if data is not None and "seconds" in data:
        return (
            f"It took {data['seconds'] / 60:.0f} minutes, start to exit with its {len(data['evaluations'])} evaluations, "
            f"on a {data['host']['cpus']}-core Linux machine (`python benchmarks/train_default.py`; load average "
            f"{data['host']['loadavg_start'][0]:.1f} at its start)."
        )
    if (found := the_campaign("zoo-entries")) is None or "LunarLander-v3" not in found[1]["summary"]:
        return "Its time is pending: `python benchmarks/train_default.py` records it."
    env_summary = found[1]["summary"]["LunarLander-v3"]
    row = env_summary["contenders"][ZOO_ENTRY]
    return (
        f"Expect about {row['learn_seconds'] / 60:.0f} minutes of training on one core: the entry's "
        f"{budget(env_summary['budget'])}-step `learn()` took {row['learn_seconds'] / 60:.1f} minutes on average over "
        f"the {len(row['seeds'])} runs of `{found[0]}` (one torch thread, a 2-core Linux machine), plus start-up and "
        "evaluations (5 episodes every 25k steps)."
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "install-extras": render_install_extras,
    "main-job-time": render_main_job_time,
}
