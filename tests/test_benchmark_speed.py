"""The speed benchmark (benchmarks/speed.py): its exclusive-time profiler, the instrument, exactness check, end to end."""

import json

import pytest
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger

import sb3_xppo.core.fast_paths as fast_paths
from sb3_xppo import XPPO
from sb3_xppo.core.fast_paths import FlatAdam


@pytest.fixture(scope="module")
def speed():
    import speed  # benchmarks/ is on pytest's pythonpath

    return speed


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_profiler_counts_exclusive_time(speed):
    clock = FakeClock()
    profiler = speed.Profiler(clock)

    def items():
        for _ in range(3):
            clock.now += 0.5  # producing an item
            yield None

    def inner() -> None:
        clock.now += 2.0

    def outer() -> str:
        clock.now += 1.0
        profiler.wrap("inner", inner)()
        for _ in profiler.wrap_generator("sample", items)():
            clock.now += 10.0  # the consumer's work belongs to outer
        clock.now += 7.0
        return "result"

    assert profiler.wrap("outer", outer)() == "result"
    assert profiler.seconds == {"inner": 2.0, "sample": 1.5, "outer": 38.0}
    assert profiler.calls["inner"] == 1 and profiler.calls["outer"] == 1
    assert sum(profiler.seconds.values()) == clock.now  # the pieces add up to the time spent inside them


def test_profiler_counts_a_nested_call_of_the_same_piece_once(speed):
    clock = FakeClock()
    profiler = speed.Profiler(clock)

    def fallback() -> None:  # e.g. XPPO's fast optimizer step handing a step to torch's
        clock.now += 1.0

    def step() -> None:
        clock.now += 2.0
        profiler.wrap("optimizer", fallback)()

    profiler.wrap("optimizer", step)()
    assert profiler.seconds["optimizer"] == 3.0 and profiler.calls["optimizer"] == 1


def test_profiler_counts_a_raising_call(speed):
    clock = FakeClock()
    profiler = speed.Profiler(clock)

    def fails() -> None:
        clock.now += 3.0
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        profiler.wrap("fails", fails)()
    assert profiler.seconds["fails"] == 3.0
    assert profiler._stack == []


def tiny(algo, env_id="CartPole-v1", **kwargs):
    env = make_vec_env(env_id, n_envs=2, seed=0)
    model = algo("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=2, policy_kwargs=dict(net_arch=[16]), seed=0,
                 device="cpu", **kwargs)  # fmt: skip
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


@pytest.mark.parametrize(
    "algo, env_id, kwargs",
    [(PPO, "CartPole-v1", {}), (XPPO, "CartPole-v1", {}), (XPPO, "Pendulum-v1", dict(use_sde=True, sde_sample_freq=4))],
)
def test_instrument_times_every_piece_and_changes_nothing(speed, monkeypatch, algo, env_id, kwargs):
    originals = (th.autograd.backward, th.nn.utils.clip_grad_norm_, th.Tensor.backward)
    plain = tiny(algo, env_id, **kwargs)
    plain.learn(128)
    model = tiny(algo, env_id, **kwargs)
    profiler = speed.Profiler()
    methods = [(cls, name, vars(cls).get(name)) for cls in (type(model.policy.optimizer), FlatAdam) for name in vars(FlatAdam)]
    flat_updates = []
    adam_update = fast_paths.adam_update
    monkeypatch.setattr(fast_paths, "adam_update", lambda *args: flat_updates.append(1) or adam_update(*args))
    with speed.instrument(model, profiler):
        model.learn(128)
    # XPPO's exact fast optimizer step is what is timed, not disabled by the instrument
    assert len(flat_updates) == (2 * 2 * 2 - 1 if algo is XPPO and fast_paths.flat_adam_is_exact(th.float32) else 0)
    # every piece was seen, and the instrument did not change what learn() computes
    assert set(speed.CATEGORIES) - set(profiler.calls) == {"learn_other"}
    assert all(profiler.seconds[k] > 0 for k in profiler.calls)
    assert profiler.calls["forward"] == profiler.calls["backward"] == profiler.calls["optimizer"] == 2 * 2 * 2
    assert profiler.calls["gae"] == 2
    for key, value in plain.policy.state_dict().items():
        assert th.equal(value, model.policy.state_dict()[key]), key
    # everything is restored: torch's functions, and no timed instance attribute is left behind
    assert (th.autograd.backward, th.nn.utils.clip_grad_norm_, th.Tensor.backward) == originals
    for obj, names in [
        (model, ("collect_rollouts", "train")),
        (model.env, ("step_async", "step_wait")),
        (model.policy, ("forward", "predict_values", "reset_noise", "evaluate_actions")),
        (model.rollout_buffer, ("add", "compute_returns_and_advantage", "get")),
        (model.policy.optimizer, ("zero_grad", "step")),
    ]:
        assert not set(names) & set(vars(obj)), obj
    assert all(vars(cls).get(name) is method for cls, name, method in methods)  # and the classes' methods


def test_params_difference(speed):
    a = {"w": th.ones(2, 2), "b": th.zeros(2)}
    assert speed.params_difference(a, {k: v.clone() for k, v in a.items()}) == (True, 0.0)
    exact, diff = speed.params_difference(a, {"w": th.ones(2, 2), "b": th.tensor([0.0, 0.25])})
    assert not exact and diff == 0.25
    assert speed.params_difference(a, {"w": th.ones(2, 2)}) == (False, float("inf"))
    assert speed.params_difference(a, {"w": th.ones(2, 3), "b": th.zeros(2)}) == (False, float("inf"))


def test_arguments_are_checked(speed, tmp_path):
    with pytest.raises(ValueError, match="--reps"):
        speed.main(["--reps", "0", "--out-dir", str(tmp_path)])
    with pytest.raises(ValueError, match="--rollouts"):
        speed.main(["--rollouts", "0", "--out-dir", str(tmp_path)])
    with pytest.raises(TypeError, match="--xppo-kwargs"):
        speed.main(["--xppo-kwargs", "[1]", "--out-dir", str(tmp_path)])


@pytest.mark.parametrize("clock, reps, xppo_kwargs", [("wall", 2, "{}"), ("cpu", 1, "{'max_grad_norm': 0.1}")])
def test_end_to_end(speed, tmp_path, capsys, clock, reps, xppo_kwargs):
    # CartPole-v1's zoo entry: 8 envs x 32 steps, 20 epochs of one minibatch; one rollout per run
    args = ["--envs", "CartPole-v1", "--rollouts", "1", "--reps", str(reps), "--clock", clock, "--name", "s"]
    speed.main([*args, "--xppo-kwargs", xppo_kwargs, "--out-dir", str(tmp_path)])
    with open(tmp_path / "s.json") as f:
        record = json.load(f)
    assert (tmp_path / "s.png").stat().st_size > 0
    assert len(record["code"]["commit"]) == 40 and record["code"]["versions"]["torch"] == th.__version__  # what was measured
    (result,) = record["results"]
    assert (
        result["env"] == "CartPole-v1"
        and result["steps_per_run"] == 256
        and result["target"] == speed.TARGETS.get("CartPole-v1")
    )
    if xppo_kwargs == "{}":
        assert result["bit_exact"] and result["max_abs_param_diff"] == 0.0  # XPPO with PPO's options is PPO
    else:  # an option that changes the result is measured as a difference
        assert not result["bit_exact"] and 0 < result["max_abs_param_diff"] < float("inf")
        assert record["xppo_kwargs"] == {"max_grad_norm": "0.1"}
    assert result["clock"] == clock and record["config"]["clock"] == clock
    assert [(r["name"], r["rep"]) for r in result["runs"]] == [
        ("PPO", 0), ("XPPO", 0), ("env only", 0), ("XPPO", 1), ("env only", 1), ("PPO", 1),
    ][: 3 * reps]  # fmt: skip
    assert all(result["speed"][n]["best"] >= result["speed"][n]["median"] > 0 for n in ("PPO", "XPPO", "env only"))
    assert result["ratio_best"] == pytest.approx(result["speed"]["XPPO"]["best"] / result["speed"]["PPO"]["best"])
    for name in ("PPO", "XPPO"):
        pieces = result["breakdown"][name]
        assert set(pieces["us_per_step"]) == set(speed.CATEGORIES)
        # the pieces add up to the instrumented run's time by the breakdown's clock
        steps_per_s = pieces["instrumented_steps_per_s" if clock == "wall" else "instrumented_cpu_steps_per_s"]
        assert sum(pieces["us_per_step"].values()) == pytest.approx(1e6 / steps_per_s)
        assert pieces["calls"]["optimizer"] == 20 and pieces["calls"]["gae"] == 1
    env_only = result["breakdown"]["env only"]["us_per_step"]
    assert env_only["env"] == pytest.approx(1e6 / result["speed"]["env only"]["best" if clock == "wall" else "cpu_best"])
    out = capsys.readouterr().out
    assert "CartPole-v1" in out and "minibatch forward" in out and "bit-exact" in out


def tiny_contrib_cases(cases):
    small = dict(n_steps=16, batch_size=32, n_epochs=2, policy_kwargs=dict(net_arch=[16]))
    lstm = dict(small, policy_kwargs=dict(net_arch=[16], lstm_hidden_size=8))
    return {
        name: (parent, ours, policy, lambda seed, make=make_env: make(seed), lstm if "Recurrent" in name else small)
        for name, (parent, ours, policy, make_env, _) in cases.items()
    }


def test_contrib_comparison(speed, tmp_path, capsys, monkeypatch):
    tiny = tiny_contrib_cases(speed.contrib_cases())
    monkeypatch.setattr(speed, "contrib_cases", lambda: tiny)
    record = speed.main(["--envs", "--contrib", "--rollouts", "1", "--reps", "2", "--out-dir", str(tmp_path), "--name", "c"])
    assert record["results"] == [] and not (tmp_path / "c.png").exists()
    names = [r["name"] for r in record["contrib"]]
    assert names == ["MaskableXPPO / MaskablePPO", "RecurrentXPPO / RecurrentPPO"]
    for r in record["contrib"]:
        # the subclasses with their parents' options reproduce them bit for bit
        assert r["bit_exact"] and r["max_abs_param_diff"] == 0.0
        assert r["steps_per_run"] == 16 * 8
        assert [run["name"] for run in r["runs"]] == ["parent", "parent", "XPPO", "XPPO"]
        assert r["ratio_best"] == pytest.approx(r["speed"]["XPPO"]["best"] / r["speed"]["parent"]["best"])
    with open(tmp_path / "c.json") as f:
        assert json.load(f)["contrib"][0]["name"] == names[0]
    assert "RecurrentXPPO / RecurrentPPO" in capsys.readouterr().out


@pytest.mark.parametrize("vec_env", ["lean", "envpool"])
def test_vec_env_rows(speed, tmp_path, vec_env):
    """``<env>@<vec env>``: XPPO (and the env-only limit) on that VecEnv, PPO on SB3's make_vec_env; lean is still PPO."""
    if vec_env == "envpool":
        pytest.importorskip("envpool")
    from sb3_xppo.vec_env import EnvPoolVecEnv, LeanVecEnv

    built = []
    real_run_learn = speed.run_learn

    def spy(name, *args, **kwargs):
        built.append((name, kwargs.get("vec_env")))
        return real_run_learn(name, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(speed, "run_learn", spy)
        row = f"CartPole-v1@{vec_env}"
        record = speed.main(["--envs", row, "--rollouts", "1", "--reps", "1", "--out-dir", str(tmp_path), "--name", "v"])
    (result,) = record["results"]
    assert result["env"] == row and result["vec_env"] == vec_env and result["target"] == speed.TARGETS.get(row)
    assert set(built) == {("PPO", speed.SB3_MAKE_VEC_ENV), ("XPPO", vec_env)}  # PPO on SB3's make_vec_env
    assert result["bit_exact"] == (vec_env == "lean")  # EnvPool's CartPole is another implementation
    env = speed.zoo_env("CartPole-v1", 0, str(tmp_path), vec_env)[1]
    assert type(env) is {"lean": LeanVecEnv, "envpool": EnvPoolVecEnv}[vec_env]
    env.close()
    # wave 4's targets (aa7bf23): XPPO on the lean env against PPO on SB3's make_vec_env
    assert speed.TARGETS == {"CartPole-v1@lean": 1.2, "LunarLander-v3@lean": 1.8, "LunarLanderContinuous-v3@lean": 1.6}
    with pytest.raises(ValueError, match="bad row 'CartPole-v1@pool'"):
        speed.main(["--envs", "CartPole-v1@pool", "--out-dir", str(tmp_path)])


def test_sequence_batching_rows(speed, tmp_path, capsys, monkeypatch):
    """``--sequences``: RecurrentXPPO(sequence_batching=True) against RecurrentPPO on a ppo_lstm.yml entry, train() timed."""
    monkeypatch.setattr(speed, "SEQUENCE_ENVS", ("CartPoleNoVel-v1",))
    argv = ["--envs", "--sequences", "--rollouts", "1", "--reps", "2", "--out-dir", str(tmp_path), "--name", "s"]
    record = speed.main(argv)
    assert record["results"] == [] and record["contrib"] == []
    (row,) = record["sequences"]
    assert row["env"] == "CartPoleNoVel-v1" and row["steps_per_run"] == 32 * 8  # the entry's n_steps and n_envs
    assert [run["name"] for run in row["runs"]] == ["RecurrentPPO"] * 2 + ["RecurrentXPPO"] * 2
    assert all(0 < run["train_seconds"] < run["seconds"] for run in row["runs"])
    assert set(row["ratio_paired"]) == {"learn", "learn_cpu", "train", "train_cpu"}
    assert {key: len(spread["pairs"]) for key, spread in row["ratio_paired_spread"].items()} == {"learn": 2, "train": 2}
    assert row["ratio_paired_spread"]["train"]["median"] == row["ratio_paired"]["train"]
    assert row["targets"] == speed.SEQUENCE_TARGETS and set(row["targets_met"]) == {"train", "learn"}
    # the same computation up to float rounding: the parameters after one update are close, not equal
    assert 0 < row["max_abs_param_diff"] < 1e-4
    with open(tmp_path / "s.json") as f:
        assert json.load(f)["sequences"][0]["env"] == "CartPoleNoVel-v1"
    assert "CartPoleNoVel-v1" in capsys.readouterr().out
