"""
The data-parallel learner (``distributed=True``, docs/guide/distributed.md) with real processes: two ranks on gloo,
started as PyTorch's launcher starts them (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), each running
``tests/distributed_worker.py``.

The equivalence construction: each rank records, for every ``train()``, its buffer, its parameters before and after,
and its NumPy RNG state (which draws its minibatch permutation). One process then replays each update on the global
data: the two buffers side by side (rank 0's envs, then rank 1's: the envs one process with ``2 n_envs`` envs and the
same seed would step), each global minibatch the union of the ranks' minibatches of that index (rank 1's indices
shifted by one rank's rollout), batch size ``2 batch_size``, starting from the ranks' parameters before the first
update and carrying its own after. Each update's parameters must equal the ranks' to float tolerance.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th
from distributed_worker import KWARGS, N_ENVS, merge_batches
from stable_baselines3.common.logger import configure
from stable_baselines3.common.running_mean_std import RunningMeanStd

from sb3_xppo import XPPO, XPPOOptions
from sb3_xppo.common.distributed import RankFailure, moments_since, running_stats_vector
from sb3_xppo.vec_env import make_vec_env

WORKER = Path(__file__).with_name("distributed_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(config: dict[str, Any], tmp_path: Path, world: int = 2) -> list[subprocess.Popen]:
    """Start ``world`` ranks of the worker, as ``python -m torch.distributed.run`` would (one process each)."""
    port, ranks = free_port(), []
    for rank in range(world):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        command = [sys.executable, str(WORKER), json.dumps({**config, "out": str(tmp_path / "rank{rank}.pt")})]
        ranks.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return ranks


def finish(ranks: list[subprocess.Popen], timeout: float = 150) -> list[str]:
    """Wait for every rank; :return: each one's stderr (a failed rank fails the test with it)"""
    errors = []
    try:
        for rank in ranks:
            _, err = rank.communicate(timeout=timeout)
            errors.append(err)
    finally:
        for rank in ranks:
            rank.kill()
    for i, (rank, err) in enumerate(zip(ranks, errors)):
        assert rank.returncode == 0, f"rank {i} failed:\n{err[-3000:]}"
    return errors


def results(tmp_path: Path, world: int = 2) -> list[dict[str, Any]]:
    return [th.load(tmp_path / f"rank{rank}.pt", weights_only=False) for rank in range(world)]


def replay(records: list[list[dict[str, Any]]], kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """
    One process's updates on the ranks' global data (the module's construction).

    :return: each update's largest parameter difference from the ranks'
    """
    world, batch_size = len(records), kwargs["batch_size"]
    model = XPPO(
        "MlpPolicy", make_vec_env("CartPole-v1", world * N_ENVS, seed=0), **{**kwargs, "batch_size": world * batch_size}
    )
    model.policy.load_state_dict(records[0][0]["before"])
    model.set_logger(configure(None, [""]))
    differences = []
    for update in zip(*records):
        buffer = model.rollout_buffer
        for name in update[0]["buffer"]:
            setattr(buffer, name, np.concatenate([rank["buffer"][name] for rank in update], axis=1))
        buffer.full, buffer.generator_ready, buffer.pos = True, False, buffer.buffer_size
        per_rank = buffer.buffer_size * N_ENVS
        draws = []
        for rank in update:  # each rank's permutation of each epoch, drawn from its recorded RNG state
            np.random.set_state(rank["rng"])
            draws.append([np.random.permutation(per_rank) for _ in range(kwargs["n_epochs"])])
        epochs = iter(
            np.concatenate(
                [
                    np.concatenate([perms[epoch][start : start + batch_size] + r * per_rank for r, perms in enumerate(draws)])
                    for start in range(0, per_rank, batch_size)
                ]
            )
            for epoch in range(kwargs["n_epochs"])
        )
        with monkeypatch.context() as patch:
            patch.setattr(np.random, "permutation", lambda n, epochs=epochs: next(epochs))
            model._current_progress_remaining = update[0]["progress"]
            model.train()
        mine = model.policy.state_dict()
        differences.append(max(float((mine[k] - v).abs().max()) for k, v in update[0]["after"].items()))
    return differences


def test_two_ranks_keep_one_model_equal_to_one_process_on_the_global_data(tmp_path: Path, monkeypatch) -> None:
    finish(launch({"mode": "learn", "steps": 4 * 2 * N_ENVS * KWARGS["n_steps"]}, tmp_path))
    ranks = results(tmp_path)
    records = [rank["records"] for rank in ranks]
    assert len(records[0]) == len(records[1]) == 4
    assert ranks[0]["num_timesteps"] == ranks[1]["num_timesteps"] == 4 * 2 * N_ENVS * KWARGS["n_steps"]  # global
    for update0, update1 in zip(*records):  # the same parameters on every rank, bit for bit, after every update
        assert all(th.equal(update0["after"][k], v) for k, v in update1["after"].items())
    # target_kl stopped some update early, on both ranks at the same minibatch (else they would wait on each other)
    taken = [[update["minibatches"] for update in rank] for rank in records]
    assert taken[0] == taken[1] and min(taken[0]) < KWARGS["n_epochs"] * N_ENVS * KWARGS["n_steps"] // KWARGS["batch_size"]
    # the ranks stepped different envs (seed + rank * n_envs + i), so their data differ
    assert not np.array_equal(records[0][0]["buffer"]["observations"], records[1][0]["buffer"]["observations"])
    differences = replay(records, KWARGS, monkeypatch)
    assert max(differences) < 1e-5, differences
    # the test can fail: one rank's data alone is not the global data
    alone = replay([records[0], records[0]], KWARGS, monkeypatch)
    assert max(alone) > 1e-3


def test_vec_normalize_statistics_are_merged_every_update(tmp_path: Path) -> None:
    config = {"mode": "learn", "steps": 3 * 2 * N_ENVS * KWARGS["n_steps"], "vec_normalize": True}
    finish(launch(config, tmp_path))
    ranks = results(tmp_path)
    for name in ("obs_rms", "ret_rms"):
        (mean0, var0, count0), (mean1, var1, count1) = ranks[0][name], ranks[1][name]
        np.testing.assert_array_equal(mean0, mean1)
        np.testing.assert_array_equal(var0, var1)
        assert count0 == count1
    # every rank's steps: the reset and the three rollouts' steps of both ranks, with RunningMeanStd's 1e-4 prior
    assert ranks[0]["obs_rms"][2] == pytest.approx(2 * N_ENVS * (1 + 3 * KWARGS["n_steps"]) + 1e-4, abs=1)


def test_multi_critic_and_a_loss_hook_run_unchanged_on_ranks(tmp_path: Path) -> None:
    config = {
        "mode": "learn",
        "env": "sb3_xppo/TwoStylePendulum-v0",
        "steps": 2 * 2 * N_ENVS * KWARGS["n_steps"],
        "kwargs": {"reward_groups": ["swing", "style"], "target_kl": None, "adaptive_kl": None},
        "loss_hook": True,
    }
    finish(launch(config, tmp_path))
    ranks = results(tmp_path)
    assert ranks[0]["hooked"] == ranks[1]["hooked"] > 0
    after = [rank["records"][-1]["after"] for rank in ranks]
    assert any("value_net" in k for k in after[0])
    assert all(th.equal(after[0][k], v) for k, v in after[1].items())


def test_dagger_callback_runs_unchanged_on_ranks(tmp_path: Path) -> None:
    kwargs = {"target_kl": None, "adaptive_kl": None}
    finish(launch({"mode": "learn", "steps": 3 * 2 * N_ENVS * KWARGS["n_steps"], "dagger": True, "kwargs": kwargs}, tmp_path))
    ranks = results(tmp_path)
    after = [rank["records"][-1]["after"] for rank in ranks]
    assert all(th.equal(after[0][k], v) for k, v in after[1].items())


def test_dagger_pretraining_is_refused_on_ranks(tmp_path: Path) -> None:
    config = {"mode": "learn", "steps": 256, "dagger": True, "pretrain_steps": 16}
    ranks = launch(config, tmp_path)
    outs = [rank.communicate(timeout=120) for rank in ranks]
    for rank, (_, err) in zip(ranks, outs):
        assert rank.returncode != 0 and "ValueError: pretrain_steps with a distributed=True student" in err


@pytest.mark.parametrize("algo", ["MaskableXPPO", "RecurrentXPPO"])
def test_the_contrib_algorithms_train_on_ranks(tmp_path: Path, algo: str) -> None:
    finish(launch({"mode": "contrib", "algo": algo}, tmp_path))
    ranks = results(tmp_path)
    assert ranks[0]["num_timesteps"] == ranks[1]["num_timesteps"] == 3 * 2 * N_ENVS * 32
    assert all(th.equal(ranks[0]["after"][k], v) for k, v in ranks[1]["after"].items())


def test_merged_statistics_equal_one_process_that_took_every_batch(tmp_path: Path) -> None:
    updates, batches = 3, 5
    finish(launch({"mode": "merge_stats", "updates": updates, "batches": batches}, tmp_path))
    ranks = results(tmp_path)
    one = RunningMeanStd(shape=(3,))
    for update in range(updates):
        for rank in range(2):
            for batch in merge_batches(rank, update, batches):
                one.update(batch)
    for rank in ranks:
        np.testing.assert_allclose(rank["mean"], one.mean, rtol=1e-10)
        np.testing.assert_allclose(rank["var"], one.var, rtol=1e-9)
        assert rank["count"] == pytest.approx(one.count)


def test_moments_since_inverts_the_parallel_combination() -> None:
    """Hand-checked: 1e-4 prior (mean 0, var 1), then [1, 3]: the new data's count 2, mean 2, variance 1."""
    rms = RunningMeanStd(shape=())
    then = running_stats_vector(rms)
    rms.update(np.array([1.0, 3.0]))
    count, mean, var = moments_since(running_stats_vector(rms), then)
    assert (count, mean, var) == pytest.approx((2.0, 2.0, 1.0))


def test_ranks_that_differ_are_refused_naming_the_rank(tmp_path: Path) -> None:
    ranks = launch({"mode": "learn", "steps": 256, "rank1_kwargs": {"n_steps": 64}}, tmp_path)
    outs = [rank.communicate(timeout=120) for rank in ranks]
    for rank, (_, err) in zip(ranks, outs):
        assert rank.returncode != 0
        assert "ValueError: the ranks of a distributed run must be set up alike; rank 1 differs: n_steps: 64 on rank 1" in err


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_rank_that_dies_or_hangs_is_named_within_the_timeout(tmp_path: Path, how: str) -> None:
    timeout = 8.0
    config = {"mode": "learn", "steps": 10**8, "timeout": timeout}
    ranks = launch(config, tmp_path)
    try:
        for rank in ranks:  # both past the start
            assert rank.stdout.readline().strip() == "learning"
        time.sleep(2.0)
        ranks[1].send_signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        start = time.monotonic()
        _, err = ranks[0].communicate(timeout=timeout + 60)
        waited = time.monotonic() - start
    finally:
        for rank in ranks:
            rank.kill()
    assert ranks[0].returncode != 0
    assert "RankFailure: rank 0 of 2" in err and "rank 1 stopped answering" in err, err[-2000:]
    assert waited < timeout + 20


def test_without_a_launcher_the_error_shows_the_launch_command(monkeypatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match=r"python -m torch\.distributed\.run --nproc-per-node 2"):
        XPPO("MlpPolicy", "CartPole-v1", distributed=True)
    with pytest.raises(ValueError, match="distributed_timeout must be a number of seconds > 0"):
        XPPO("MlpPolicy", "CartPole-v1", distributed_timeout=0)
    with pytest.raises(TypeError, match="distributed must be True or False"):
        XPPOOptions(distributed="yes").checked()


def test_pcgrad_is_refused_with_distributed() -> None:
    with pytest.raises(ValueError, match="distributed=True cannot be combined with group_gradients"):
        XPPOOptions(reward_groups=2, group_gradients="pcgrad", distributed=True).checked()


def test_a_distributed_model_saves_as_a_plain_one(tmp_path: Path) -> None:
    finish(launch({"mode": "learn", "steps": 256, "save": str(tmp_path / "model{rank}.zip")}, tmp_path))
    assert not (tmp_path / "model1.zip").exists()  # only rank 0 writes
    model = XPPO.load(tmp_path / "model0.zip")  # in this plain process
    assert model.options.distributed is False
    trained = results(tmp_path)[0]["records"][-1]["after"]
    assert all(th.equal(model.policy.state_dict()[k], v) for k, v in trained.items())
    model.set_env(make_vec_env("CartPole-v1", 2, seed=0))
    model.learn(64)


def test_rank_failure_is_a_runtime_error() -> None:
    assert issubclass(RankFailure, RuntimeError)


@pytest.mark.slow
def test_the_training_command_runs_on_two_ranks(tmp_path: Path) -> None:
    """``python -m torch.distributed.run --standalone --nproc-per-node 2 -m sb3_xppo.train --distributed``."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "sb3_xppo.train"]
    args = ["--algo", "xppo", "--env", "CartPole-v1", "-n", "2048", "--seed", "1", "--eval-freq", "1024", "--distributed"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [*command, *args, "--num-threads", "1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = list((tmp_path / "logs" / "xppo").iterdir())
    assert [run.name for run in runs] == ["CartPole-v1_1"]  # rank 0's run only; rank 1's temporary folder is gone
    assert not list(tmp_path.glob("sb3_xppo_rank1_*"))
    model = XPPO.load(runs[0] / "CartPole-v1.zip")  # a plain model
    assert model.options.distributed is False and model.num_timesteps == 2048
    assert "2,048/2,048" in done.stdout + done.stderr  # the progress bar counts both ranks' steps


def test_the_training_command_refuses_distributed_search_and_no_launcher(monkeypatch) -> None:
    from sb3_xppo.train import main as train_main

    with pytest.raises(ValueError, match="-optimize searches over many"):
        train_main(["--env", "CartPole-v1", "--distributed", "-optimize"])
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match=r"python -m torch\.distributed\.run"):
        train_main(["--env", "CartPole-v1", "--distributed"])
