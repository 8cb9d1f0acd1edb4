"""
The regions of the vector-env page's single benchmarks: ``benchmarks/vec_env.py`` (env-only throughput),
``benchmarks/ray_vec_env.py`` (Ray) and ``benchmarks/train_cli.py`` (the whole training command).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions.results import single


def render_vec_env_throughput(page: Path) -> str:
    """Env-only steps/s of the lean env against SB3's ``make_vec_env`` and the bare floor (``vec_env.json``)."""
    data = single("vec_env.json")
    if data is None:
        return "Pending: `python benchmarks/vec_env.py --profile`."
    lines = [
        "| env | SB3's `make_vec_env` | DummyVecEnv, no render mode | lean | lean / SB3 | floor / SB3 | bit for bit |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in data["rows"]:
        rate = row["best_steps_per_s"]
        lines.append(
            f"| {row['env']} x{row['n_envs']} | {rate['sb3']:,.0f} | {rate['dummy']:,.0f} | {rate['lean']:,.0f} | "
            f"{row['ratio_best']:.2f}x | {row['floor_ratio']:.2f}x | {'yes' if row['bit_exact'] else '**no**'} |"
        )
    lines += ["", f"Best of {data['reps']} repetitions of {data['env_steps']:,} env-steps each."]
    for row in (row for row in data["rows"] if row.get("target") is not None):
        verdict = "met" if row["target_met"] else "missed"
        lines[-1] += (
            f" The target, {row['target']:g}x on {row['env']} x{row['n_envs']}, is {verdict}: {row['ratio_best']:.2f}x "
            f"(median paired {row['ratio_paired_median']:.2f}x), against a floor of {row['floor_ratio']:.2f}x."
        )
    share = data.get("profile_env_share")
    if share is not None:
        env_id = data["rows"][0]["env"]
        lines[-1] += (
            f" In the profile of a lean run of {env_id}, {share:.0%} of the time is the env's own `step` and "
            f"`reset` with all they call; the lean env's loop, the Monitor's and TimeLimit's bookkeeping and the info "
            f"copies are the other {1 - share:.0%}."
        )
    return "\n".join(lines)


def render_ray_vec_env(page: Path) -> str:
    """``learn()`` env-steps/s over the lean env, ``SubprocVecEnv`` and ``RayVecEnv``, from ray_vec_env.json."""
    results = single("ray_vec_env.json")
    if results is None:
        return "Pending: `python benchmarks/ray_vec_env.py`."
    machine, config = results["machine"], results["config"]
    loads = [machine["load_average_before"][0], machine["load_average_after"][0]]
    # a load of a core or more before the run is other jobs'; after it, it includes the run's own processes
    shared = "shared with other jobs " if loads[0] >= 1.0 else ""
    lines = [
        f"Env-steps/s of `learn()` ({config['timesteps']:,} env-steps, best of {config['reps']}; wall clock), measured on a "
        f"{machine['cpus']}-core machine {shared}(1-minute load average {loads[0]:.1f} before the run, {loads[1]:.1f} after "
        "it, its own processes included):",
        "",
        "| env | n_envs | lean | SubprocVecEnv | RayVecEnv | Ray / lean | Ray / Subproc |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    crossover: dict[str, list[int]] = {}
    for row in results["rows"]:
        rate = row["steps_per_s"]
        lines.append(
            f"| {row['env']} | {row['n_envs']} | {rate['lean']:,.0f} | {rate['subproc']:,.0f} | {rate['ray']:,.0f} | "
            f"{rate['ray'] / rate['lean']:.2f}x | {rate['ray'] / rate['subproc']:.2f}x |"
        )
        crossover.setdefault(row["env"], [])
        if rate["ray"] > rate["lean"]:
            crossover[row["env"]].append(row["n_envs"])
    lines.append("")
    for env, above in crossover.items():
        if above:
            lines.append(f"- {env}: RayVecEnv is ahead of the lean env from {min(above)} envs on (here: n_envs {above}).")
        else:
            lines.append(f"- {env}: RayVecEnv is behind the lean env at every n_envs measured.")
    return "\n".join(lines)


def render_train_cli(page: Path) -> str:
    """The whole training command against rl-zoo3's PPO (``train_cli.json``)."""
    data = single("train_cli.json")
    if data is None:
        return "Pending: `python benchmarks/train_cli.py`."
    by = {name: [run for run in data["runs"] if run["name"] == name] for name in ("PPO", "XPPO")}
    lines = [
        "| command | seconds, best (CPU) |",
        "| --- | ---: |",
        *(
            f"| `{runs[0]['command']}` | {min(r['seconds'] for r in runs):.1f} ({min(r['cpu_seconds'] for r in runs):.1f}) |"
            for runs in by.values()
        ),
        "",
        f"{data['env']}, {data['steps']:,} steps, {data['reps']} repetitions: XPPO / PPO {data['ratio_best']:.2f}x best, "
        f"{data['ratio_paired']:.2f}x median paired (CPU time {data['cpu_ratio_best']:.2f}x, "
        f"{data['cpu_ratio_paired']:.2f}x); "
        f"the final parameters {'are' if data['bit_exact'] else '**are not**'} PPO's bit for bit.",
    ]
    if data.get("target") is not None:
        lines[-1] += f" The target, {data['target']:g}x median paired, is {'met' if data['target_met'] else 'missed'}."
    return "\n".join(lines)


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "vec-env-throughput": render_vec_env_throughput,
    "ray-vec-env": render_ray_vec_env,
    "train-cli": render_train_cli,
}
