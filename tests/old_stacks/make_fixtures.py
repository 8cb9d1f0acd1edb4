"""Make checkpoint fixtures with an OLD Stable-Baselines3 / sb3-contrib / rl-zoo3 stack.

Runs unchanged under SB3 1.8 (gym 0.21), SB3 2.0 and SB3 2.3 (gymnasium); it is
started by ``tests/old_stacks/build.sh`` inside each stack's own venv:

    python make_fixtures.py --stack sb3_1.8 --out tests/data/old_stacks/sb3_1.8

It trains tiny models, saves them with the stack's own ``save``, and records the
stack's own deterministic actions on fixed observations, plus ``manifest.json``
(see ``tests/old_stacks/README.md``). It must not import anything from sb3_xppo.
"""

import argparse
import base64
import importlib.metadata
import json
import os
import pickletools
import platform
import shutil
import subprocess
import sys
import warnings
import zipfile

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np
import stable_baselines3
import torch as th

# SB3 < 2 is built on gym, SB3 >= 2 on gymnasium: take the one this stack's SB3 uses.
SB3_MAJOR = int(stable_baselines3.__version__.split(".")[0])
if SB3_MAJOR >= 2:
    import gymnasium as gym

    GYM_NAME = "gymnasium"
else:
    import gym

    GYM_NAME = "gym"

from sb3_contrib import QRDQN, TQC, MaskablePPO, RecurrentPPO  # noqa: E402
from sb3_contrib.common.envs import InvalidActionEnvDiscrete  # noqa: E402
from stable_baselines3 import A2C, DQN, PPO, SAC  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize  # noqa: E402

try:  # rl-zoo3's own schedule (its location has been rl_zoo3.utils since 1.x)
    from rl_zoo3.utils import linear_schedule
except ImportError:  # pragma: no cover - older layouts
    from rl_zoo3 import linear_schedule

th.set_num_threads(1)
warnings.filterwarnings("ignore")

N_OBS = 16


def small():
    """A fresh policy_kwargs dict (off-policy algorithms write use_sde into theirs)."""
    return dict(net_arch=[32, 32])


def dist_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions():
    return {
        "python": platform.python_version(),
        "stable_baselines3": dist_version("stable-baselines3"),
        "sb3_contrib": dist_version("sb3-contrib"),
        "rl_zoo3": dist_version("rl-zoo3"),
        "gym": dist_version("gym"),
        "gymnasium": dist_version("gymnasium"),
        "cloudpickle": dist_version("cloudpickle"),
        "numpy": dist_version("numpy"),
        "torch": dist_version("torch"),
    }


# --------------------------------------------------------------------------- pickle globals
def pickle_globals(data):
    """Sorted ``module.name`` of every GLOBAL / STACK_GLOBAL in a pickle stream."""
    names = set()
    pushed = []  # values pushed on the stack, in order (None for non-strings)
    memo = {}
    for op, arg, _pos in pickletools.genops(data):
        name = op.name
        if name == "GLOBAL":
            module, attr = arg.split(" ", 1)
            names.add(f"{module}.{attr}")
            pushed.append(None)
        elif name == "STACK_GLOBAL":
            module, attr = pushed[-2], pushed[-1]
            names.add(f"{module}.{attr}")
            pushed.append(None)
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = pushed[-1] if pushed else None
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(arg))
        elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"):
            pushed.append(arg if isinstance(arg, str) else None)
        elif op.stack_after:
            pushed.append(None)
    return sorted(names)


def zip_data_globals(zip_path):
    with zipfile.ZipFile(zip_path) as archive:
        data = json.loads(archive.read("data").decode())
    out = {}
    for key, value in sorted(data.items()):
        if isinstance(value, dict) and ":serialized:" in value:
            out[key] = pickle_globals(base64.b64decode(value[":serialized:"].encode()))
    return out


def file_globals(path):
    with open(path, "rb") as handle:
        return pickle_globals(handle.read())


# --------------------------------------------------------------------------- observations
def fixed_observations(space, seed=0):
    """16 observations sampled from ``space`` with a fixed seed, in the space's dtype.

    Box dimensions without a usable bound (infinite, or float32-max like CartPole's
    velocities, which would sample ~1e38) are drawn from a seeded standard normal.
    """
    space.seed(seed)
    obs = np.stack([np.asarray(space.sample()) for _ in range(N_OBS)])
    if isinstance(space, gym.spaces.Box):
        low = np.broadcast_to(space.low, space.shape)
        high = np.broadcast_to(space.high, space.shape)
        unbounded = ~np.isfinite(low) | ~np.isfinite(high) | (np.abs(low) > 1e3) | (np.abs(high) > 1e3)
        if unbounded.any():
            rng = np.random.default_rng(seed)
            normal = rng.standard_normal(obs.shape)
            obs = np.where(unbounded[None], normal, obs)
    return obs.astype(space.dtype)


def fixed_masks(n_actions, seed=0):
    rng = np.random.default_rng(seed)
    masks = rng.random((N_OBS, n_actions)) > 0.4
    for row in range(N_OBS):
        if not masks[row].any():
            masks[row, rng.integers(n_actions)] = True
    return masks


def policy_outputs(model, obs):
    """Float outputs behind a discrete model's actions (a finer check than argmax).

    ``("probs", p)``: action probabilities of an actor-critic policy (no masks, and for
    a recurrent policy zero LSTM states with episode starts); ``("q_values", q)``: a
    DQN's Q-values; ``("quantile_mean", q)``: a QR-DQN's quantiles averaged per action.
    None for continuous actions (the actions are floats already).
    """
    if not isinstance(model.action_space, gym.spaces.Discrete):
        return None
    policy = model.policy
    with th.no_grad():
        obs_t = policy.obs_to_tensor(obs)[0]
        if isinstance(model, QRDQN):
            return "quantile_mean", model.quantile_net(obs_t).mean(dim=1).cpu().numpy()
        if isinstance(model, DQN):
            return "q_values", model.q_net(obs_t).cpu().numpy()
        if isinstance(model, RecurrentPPO):
            shape = list(policy.lstm_hidden_state_shape)
            shape[1] = len(obs)
            zeros = th.zeros(shape)
            starts = th.ones(len(obs))
            dist, _ = policy.get_distribution(obs_t, (zeros, zeros), starts)
        else:
            dist = policy.get_distribution(obs_t)
        return "probs", dist.distribution.probs.cpu().numpy()


# --------------------------------------------------------------------------- fixtures
class Builder:
    def __init__(self, stack, out):
        self.stack = stack
        self.out = out
        self.fixtures = []
        self.skipped = []

    def path(self, name):
        return os.path.join(self.out, name)

    def save_model_fixture(self, name, algo, model, env_id, predict=None, extra=None):
        model.save(self.path(name + ".zip"))
        # Actions from the model as saved: load it back with this stack first.
        loaded = type(model).load(self.path(name + ".zip"), device="cpu")
        obs = fixed_observations(loaded.observation_space)
        actions = loaded.predict(obs, deterministic=True)[0] if predict is None else predict(loaded, obs)
        direct = model.predict(obs, deterministic=True)[0] if predict is None else predict(model, obs)
        assert np.allclose(np.asarray(direct, dtype=np.float64), np.asarray(actions, dtype=np.float64)), name
        np.save(self.path(name + "_obs.npy"), obs)
        np.save(self.path(name + "_actions.npy"), np.asarray(actions))
        outputs = policy_outputs(loaded, obs)
        entry = {
            "name": name,
            "kind": "model",
            "algo": algo,
            "path": name + ".zip",
            "env_id": env_id,
            "observations": name + "_obs.npy",
            "actions": name + "_actions.npy",
        }
        if outputs is not None:
            kind, values = outputs
            np.save(self.path(name + "_outputs.npy"), values)
            entry["outputs"] = name + "_outputs.npy"
            entry["outputs_kind"] = kind
        entry.update(extra or {})
        entry["pickled"] = zip_data_globals(self.path(name + ".zip"))
        self.fixtures.append(entry)
        print(f"[{self.stack}] {name}: actions {np.asarray(actions).ravel()[:6]}...", flush=True)

    def attempt(self, name, func):
        try:
            func()
        except Exception as exc:  # record, keep going
            import traceback

            traceback.print_exc()
            self.skipped.append({"name": name, "why": f"{type(exc).__name__}: {exc}"[:500]})
            print(f"[{self.stack}] {name}: SKIPPED ({exc})", flush=True)

    # ---- plain models
    def ppo_default(self):
        model = PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu")
        model.learn(2048)
        self.save_model_fixture("ppo_default", "ppo", model, "CartPole-v1")

    def ppo_schedules(self):
        model = PPO(
            "MlpPolicy",
            "CartPole-v1",
            learning_rate=linear_schedule(3e-4),
            clip_range=linear_schedule(0.2),
            n_steps=256,
            batch_size=64,
            n_epochs=2,
            policy_kwargs=small(),
            seed=0,
            device="cpu",
        )
        model.learn(512)
        self.save_model_fixture("ppo_schedules", "ppo", model, "CartPole-v1")

    def ppo_lambda(self):
        model = PPO(
            "MlpPolicy",
            "CartPole-v1",
            learning_rate=lambda p: 3e-4 * p,
            n_steps=256,
            batch_size=64,
            n_epochs=2,
            policy_kwargs=small(),
            seed=1,  # not 0: with seed 0 it trains to the same weights as ppo_schedules
            device="cpu",
        )
        model.learn(512)
        self.save_model_fixture("ppo_lambda", "ppo", model, "CartPole-v1")

    def a2c(self):
        model = A2C("MlpPolicy", "CartPole-v1", n_steps=8, policy_kwargs=small(), seed=0, device="cpu")
        model.learn(512)
        self.save_model_fixture("a2c", "a2c", model, "CartPole-v1")

    def dqn(self):
        model = DQN(
            "MlpPolicy",
            "CartPole-v1",
            learning_starts=100,
            buffer_size=1000,
            batch_size=32,
            train_freq=4,
            target_update_interval=100,
            policy_kwargs=small(),
            seed=0,
            device="cpu",
        )
        model.learn(500)
        self.save_model_fixture("dqn", "dqn", model, "CartPole-v1")

    def sac(self):
        model = SAC(
            "MlpPolicy",
            "Pendulum-v1",
            learning_starts=100,
            buffer_size=1000,
            batch_size=32,
            policy_kwargs=small(),
            seed=0,
            device="cpu",
        )
        model.learn(300)
        self.save_model_fixture("sac", "sac", model, "Pendulum-v1")

    def tqc(self):
        model = TQC(
            "MlpPolicy",
            "Pendulum-v1",
            learning_starts=100,
            buffer_size=1000,
            batch_size=32,
            top_quantiles_to_drop_per_net=2,
            policy_kwargs=dict(net_arch=[32, 32], n_critics=2, n_quantiles=10),
            seed=0,
            device="cpu",
        )
        model.learn(300)
        self.save_model_fixture("tqc", "tqc", model, "Pendulum-v1")

    def qrdqn(self):
        model = QRDQN(
            "MlpPolicy",
            "CartPole-v1",
            learning_starts=100,
            buffer_size=1000,
            batch_size=32,
            train_freq=4,
            target_update_interval=100,
            policy_kwargs=dict(net_arch=[32, 32], n_quantiles=10),
            seed=0,
            device="cpu",
        )
        model.learn(500)
        self.save_model_fixture("qrdqn", "qrdqn", model, "CartPole-v1")

    def recurrent_ppo(self):
        model = RecurrentPPO(
            "MlpLstmPolicy",
            "CartPole-v1",
            n_steps=64,
            batch_size=32,
            n_epochs=2,
            policy_kwargs=dict(lstm_hidden_size=16, net_arch=[16]),
            seed=0,
            device="cpu",
        )
        model.learn(256)

        def predict(m, obs):
            starts = np.ones(N_OBS, dtype=bool)
            return m.predict(obs, state=None, episode_start=starts, deterministic=True)[0]

        self.save_model_fixture(
            "recurrent_ppo",
            "ppo_lstm",
            model,
            "CartPole-v1",
            predict=predict,
            extra={"predict": "state=None, episode_start=np.ones(16, dtype=bool), deterministic=True"},
        )

    def maskable_ppo(self):
        env = InvalidActionEnvDiscrete(dim=10, n_invalid_actions=3)
        model = MaskablePPO(
            "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, policy_kwargs=small(), seed=0, device="cpu"
        )
        model.learn(256)
        masks = fixed_masks(10)
        np.save(self.path("maskable_ppo_masks.npy"), masks)

        def predict(m, obs):
            return m.predict(obs, deterministic=True, action_masks=masks)[0]

        self.save_model_fixture(
            "maskable_ppo",
            "ppo_mask",
            model,
            None,
            predict=predict,
            extra={
                "env": {
                    "entry_point": "sb3_contrib.common.envs:InvalidActionEnvDiscrete",
                    "kwargs": {"dim": 10, "n_invalid_actions": 3},
                },
                "masks": "maskable_ppo_masks.npy",
            },
        )
        masked_out = np.asarray(np.load(self.path("maskable_ppo_actions.npy")))
        assert masks[np.arange(N_OBS), masked_out].all(), "a masked-out action was chosen"

    # ---- VecNormalize
    def vecnormalize(self):
        venv = DummyVecEnv([lambda: gym.make("Pendulum-v1")])
        venv.seed(0)
        venv.action_space.seed(0)
        vec_norm = VecNormalize(venv)
        vec_norm.reset()
        for _ in range(300):
            vec_norm.step(np.array([vec_norm.action_space.sample()]))
        vec_norm.save(self.path("vecnormalize.pkl"))
        loaded = VecNormalize.load(self.path("vecnormalize.pkl"), DummyVecEnv([lambda: gym.make("Pendulum-v1")]))
        obs = fixed_observations(venv.observation_space)
        normalized = vec_norm.normalize_obs(obs)
        assert np.allclose(normalized, loaded.normalize_obs(obs))
        np.save(self.path("vecnormalize_obs.npy"), obs)
        np.save(self.path("vecnormalize_normalized.npy"), np.asarray(normalized))
        self.fixtures.append(
            {
                "name": "vecnormalize",
                "kind": "vec_normalize",
                "path": "vecnormalize.pkl",
                "env_id": "Pendulum-v1",
                "observations": "vecnormalize_obs.npy",
                "normalized": "vecnormalize_normalized.npy",
                "pickled": {"vecnormalize.pkl": file_globals(self.path("vecnormalize.pkl"))},
            }
        )
        print(f"[{self.stack}] vecnormalize: normalized {np.asarray(normalized)[0]}", flush=True)

    # ---- rl-zoo3 run folders, made by rl-zoo3's own train command
    def zoo(self, name, algo, env_id, params, n_timesteps, normalized):
        zoo_root = self.path("zoo")
        run = os.path.join(zoo_root, algo, env_id + "_1")
        if os.path.exists(run):
            shutil.rmtree(run)
        cmd = [
            sys.executable,
            "-m",
            "rl_zoo3.train",
            "--algo",
            algo,
            "--env",
            env_id,
            "-n",
            str(n_timesteps),
            "--seed",
            "0",
            "-f",
            zoo_root,
            "--eval-freq",
            "-1",
            "--num-threads",
            "1",
            "--device",
            "cpu",
            "-params",
            *params,
        ]
        print(f"[{self.stack}] {name}: {' '.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True, cwd=self.out)
        if not os.path.isdir(run):
            raise RuntimeError(f"rl-zoo3 did not write {run}: {os.listdir(os.path.join(zoo_root, algo))}")
        # Keep what rl-zoo3's enjoy needs (<env>.zip, <env>/config.yml, args.yml,
        # vecnormalize.pkl); drop monitor logs, tensorboard, evaluations, checkpoints.
        for root, dirs, files in os.walk(run, topdown=False):
            for fname in files:
                keep = fname in (env_id + ".zip", "config.yml", "args.yml", "vecnormalize.pkl")
                if not keep:
                    os.remove(os.path.join(root, fname))
            for dname in dirs:
                full = os.path.join(root, dname)
                if not os.listdir(full):
                    os.rmdir(full)
        # The trimmed folder must still be enough for rl-zoo3's own enjoy.
        enjoy = [sys.executable, "-m", "rl_zoo3.enjoy", "--algo", algo, "--env", env_id, "-f", zoo_root]
        enjoy += ["--exp-id", "1", "-n", "20", "--no-render", "--deterministic", "--num-threads", "1"]
        enjoy += ["--device", "cpu"]
        subprocess.run(enjoy, check=True, cwd=self.out, stdout=subprocess.DEVNULL)
        for _root, _dirs, files in os.walk(run):
            for fname in files:  # enjoy must not have written anything there
                assert fname in (env_id + ".zip", "config.yml", "args.yml", "vecnormalize.pkl"), fname
        rel_run = os.path.relpath(run, self.out)
        model_path = os.path.join(run, env_id + ".zip")
        algo_cls = {"ppo": PPO, "dqn": DQN}[algo]
        model = algo_cls.load(model_path, device="cpu")
        obs = fixed_observations(model.observation_space)
        entry = {
            "name": name,
            "kind": "zoo_folder",
            "algo": algo,
            "path": rel_run,
            "model": os.path.relpath(model_path, self.out),
            "env_id": env_id,
            "observations": name + "_obs.npy",
            "actions": name + "_actions.npy",
        }
        pickled = zip_data_globals(model_path)
        vecnorm_path = os.path.join(run, env_id, "vecnormalize.pkl")
        if normalized:
            if not os.path.exists(vecnorm_path):
                raise RuntimeError("rl-zoo3 wrote no vecnormalize.pkl")
            vec_norm = VecNormalize.load(vecnorm_path, DummyVecEnv([lambda: gym.make(env_id)]))
            vec_norm.training = False
            vec_norm.norm_reward = False
            model_obs = vec_norm.normalize_obs(obs)
            entry["vecnormalize"] = os.path.relpath(vecnorm_path, self.out)
            pickled["vecnormalize.pkl"] = file_globals(vecnorm_path)
        else:
            model_obs = obs
        actions = model.predict(model_obs, deterministic=True)[0]
        np.save(self.path(name + "_obs.npy"), obs)
        np.save(self.path(name + "_actions.npy"), np.asarray(actions))
        outputs = policy_outputs(model, model_obs)
        if outputs is not None:
            np.save(self.path(name + "_outputs.npy"), outputs[1])
            entry["outputs"] = name + "_outputs.npy"
            entry["outputs_kind"] = outputs[0]
        entry["pickled"] = pickled
        self.fixtures.append(entry)
        print(f"[{self.stack}] {name}: actions {np.asarray(actions).ravel()[:6]}...", flush=True)

    def zoo_ppo(self):
        self.zoo(
            "zoo_ppo",
            "ppo",
            "Pendulum-v1",
            [
                "n_envs:2",
                "n_steps:128",
                "batch_size:64",
                "n_epochs:2",
                "normalize:True",
                "learning_rate:'lin_3e-4'",
                "clip_range:'lin_0.2'",
                "policy_kwargs:dict(net_arch=[32, 32])",
            ],
            512,
            normalized=True,
        )

    def zoo_dqn(self):
        self.zoo(
            "zoo_dqn",
            "dqn",
            "CartPole-v1",
            [
                "buffer_size:1000",
                "learning_starts:100",
                "train_freq:16",
                "gradient_steps:4",
                "batch_size:32",
                "policy_kwargs:dict(net_arch=[32, 32])",
            ],
            500,
            normalized=False,
        )

    def run(self, names):
        for name in names:
            self.attempt(name, getattr(self, name))
        manifest = {
            "stack": self.stack,
            "versions": versions(),
            "fixtures": self.fixtures,
            "skipped": self.skipped,
        }
        with open(self.path("manifest.json"), "w") as handle:
            json.dump(manifest, handle, indent=1, sort_keys=False)
            handle.write("\n")


ALL = [
    "ppo_default",
    "ppo_schedules",
    "ppo_lambda",
    "a2c",
    "dqn",
    "sac",
    "tqc",
    "qrdqn",
    "recurrent_ppo",
    "maskable_ppo",
    "vecnormalize",
    "zoo_ppo",
    "zoo_dqn",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*", default=None, help="subset of fixtures (for debugging)")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    if os.path.isdir(out) and args.only is None:
        shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)
    print(f"[{args.stack}] {GYM_NAME} {gym.__version__}, SB3 {stable_baselines3.__version__}", flush=True)
    Builder(args.stack, out).run(args.only or ALL)


if __name__ == "__main__":
    main()
