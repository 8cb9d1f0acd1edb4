"""The package's layers (docs/guide/development.md, Layout): imports point down only, function-level ones included;
names that saved models refer to stay importable, and a checkpoint saved before the re-layout loads and trains."""

from __future__ import annotations

import ast
import pathlib
import re

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.envs import IdentityEnvBox

import sb3_xppo
from sb3_xppo import XPPO

PACKAGE = pathlib.Path(sb3_xppo.__file__).parent
DATA = pathlib.Path(__file__).parent / "data"

#: sub-package (or top-level module) -> layer; a module may import its own sub-package and lower layers only
LAYERS = {
    "functional": 0,
    "loading": 0,
    "common": 1,
    "envs": 1,
    "vec_env": 1,
    "multi_critic": 2,
    "resume": 2,
    "core": 3,
    "xppo": 4,
    "ppo_mask": 4,
    "ppo_recurrent": 4,
    "ppo_mask_recurrent": 4,
    "dagger_distill": 5,
    "zoo": 6,
    "train": 7,
    "enjoy": 7,
    "distill": 7,
    "trust": 7,
    "__init__": 8,
}


def room_of(module: str) -> str:
    """``sb3_xppo.core.algorithm`` -> ``core``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every ``sb3_xppo`` module a file imports, anywhere in it (functions included), with the line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "sb3_xppo":
                found += [(node.lineno, f"sb3_xppo.{alias.name}") for alias in node.names]
            elif node.module.startswith("sb3_xppo."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("sb3_xppo")]
    return found


def package_modules() -> list[tuple[str, pathlib.Path]]:
    return [(".".join(("sb3_xppo", *path.relative_to(PACKAGE).with_suffix("").parts)), path) for path in PACKAGE.rglob("*.py")]


def test_every_room_has_a_layer():
    assert {room_of(module) for module, _ in package_modules()} <= set(LAYERS)


@pytest.mark.parametrize("module, path", package_modules(), ids=lambda x: x if isinstance(x, str) else "")
def test_imports_point_down(module, path):
    room = room_of(module)
    wrong = []
    for line, imported in imports_of(path):
        target = room_of(imported) if imported != "sb3_xppo" else "__init__"
        if target in LAYERS and target != room and LAYERS[target] >= LAYERS[room]:
            wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {imported} ({target}, layer {LAYERS[target]})")
    assert not wrong, f"{room} (layer {LAYERS[room]}) may import only lower layers:\n" + "\n".join(wrong)


def test_layer_check_can_fail(tmp_path):
    """Negative control: a function-level import of a higher layer is found."""
    path = tmp_path / "bad.py"
    path.write_text("def f():\n    from sb3_xppo.core import XPPOCoreMixin\n")
    assert imports_of(path) == [(2, "sb3_xppo.core")]


#: the rooms that may import the rl-zoo3 integration (``sb3_xppo.zoo``, which imports rl-zoo3 and optuna): the
#: command-line entry points and the zoo package itself
ZOO_IMPORTERS = {"zoo", "train", "enjoy", "distill"}


def zoo_imports_elsewhere(modules: list[tuple[str, pathlib.Path]]) -> list[str]:
    """:return: every import of ``sb3_xppo.zoo`` (or one of its modules) by a module outside :data:`ZOO_IMPORTERS`"""
    return [
        f"{module}:{line} imports {imported}"
        for module, path in modules
        if room_of(module) not in ZOO_IMPORTERS
        for line, imported in imports_of(path)
        if room_of(imported) == "zoo"
    ]


def test_only_the_entry_points_import_the_zoo():
    assert zoo_imports_elsewhere(package_modules()) == []


def test_zoo_check_can_fail(tmp_path):
    """Negative control: a function-level import of one of the zoo's modules, outside the entry points, is found."""
    path = tmp_path / "bad.py"
    path.write_text("def f():\n    from sb3_xppo.zoo.registration import register\n")
    assert zoo_imports_elsewhere([("sb3_xppo.bad", path), ("sb3_xppo.train", path)]) == [
        "sb3_xppo.bad:2 imports sb3_xppo.zoo.registration"
    ]


#: the modules that may assign to other packages' objects: the rl-zoo3 session and DaggerCallback's steering of a
#: stock SB3 model (docs/guide/development.md, No process-wide state)
PATCHERS = {"sb3_xppo.zoo.session", "sb3_xppo.dagger_distill.patching"}


def foreign_assignments(path: pathlib.Path) -> list[str]:
    """
    Every assignment to an attribute of a module or class imported from another package (``import x``, ``from x
    import Y``, at any level of the file): ``x.name = ...``, ``Y.name += ...``, ``del Y.name``, ``setattr(Y, ...)``,
    ``delattr(Y, ...)``, with the line.
    """
    tree = ast.parse(path.read_text())
    foreign = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            foreign |= {(a.asname or a.name).split(".")[0] for a in node.names if not a.name.startswith("sb3_xppo")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and not (node.module or "").startswith("sb3_xppo"):
            foreign |= {a.asname or a.name for a in node.names}

    def root(node: ast.expr) -> str | None:
        while isinstance(node, ast.Attribute):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if node.args and root(node.args[0]) in foreign:
                found.append(f"{path.name}:{node.lineno} {node.func.id}({ast.unparse(node.args[0])}, ...)")
            continue
        for target in targets:
            if isinstance(target, ast.Attribute) and root(target) in foreign:
                found.append(f"{path.name}:{node.lineno} {ast.unparse(target)}")
    return found


@pytest.mark.parametrize("module, path", package_modules(), ids=lambda x: x if isinstance(x, str) else "")
def test_only_the_patchers_assign_to_other_packages(module, path):
    if module not in PATCHERS:
        assert foreign_assignments(path) == [], f"{module} changes other packages' objects: do it in {sorted(PATCHERS)}"


def test_patch_check_can_fail(tmp_path):
    """Negative control: each way of assigning to an imported class or module is found."""
    path = tmp_path / "bad.py"
    path.write_text(
        "import sys\nfrom rl_zoo3.exp_manager import ExperimentManager\n"
        "def f(self):\n    import rl_zoo3.utils\n    sys.argv = []\n    ExperimentManager.default_vec_env_cls = 1\n"
        "    rl_zoo3.utils.create_test_env = None\n    setattr(ExperimentManager, 'x', 1)\n    self.x = 1\n"
    )
    assert foreign_assignments(path) == [
        "bad.py:5 sys.argv",
        "bad.py:6 ExperimentManager.default_vec_env_cls",
        "bad.py:7 rl_zoo3.utils.create_test_env",
        "bad.py:8 setattr(ExperimentManager, ...)",
    ]


def test_pickled_names_keep_their_paths():
    from sb3_xppo.common.schedules import ClipRangePair
    from sb3_xppo.xppo.buffers import XPPODictRolloutBuffer, XPPORolloutBuffer, rollout_gae  # noqa: F401
    from sb3_xppo.xppo.xppo import ClipRange, LossHook  # noqa: F401
    from sb3_xppo.xppo.xppo import ClipRangePair as OldPath

    assert OldPath is ClipRangePair


def test_checkpoint_saved_before_the_relayout_loads_and_trains():
    """Saved by the first wave's XPPO (sb3_xppo.xppo.xppo.ClipRangePair, sb3_xppo.xppo.buffers.XPPORolloutBuffer)."""
    env = IdentityEnvBox(-1, 1, ep_length=10)
    model = XPPO.load(DATA / "xppo_v0_clip_pair.zip", env=env, device="cpu")
    assert (model.options.actor_loss, model.options.value_loss, model.normalize_advantage) == ("spo", "improved", "rollout")
    assert model.clip_range(1.0) == (0.3, 0.25)
    obs = np.linspace(-1, 1, 5, dtype=np.float32)[:, None]
    # the actions recorded when it was saved, to float rounding: another CPU's matmul kernels may round the last bit apart
    recorded = np.load(DATA / "xppo_v0_clip_pair_actions.npy")
    np.testing.assert_allclose(model.predict(obs, deterministic=True)[0], recorded, rtol=1e-6, atol=1e-8)
    model.learn(32)


def test_multi_critic_checkpoint_saved_before_the_relayout_loads_and_trains():
    class Groups(gym.Wrapper):
        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            info["vector_reward"] = np.array([reward, 0.5 * reward])
            return obs, reward, terminated, truncated, info

    model = XPPO.load(DATA / "xppo_v0_multi_critic.zip", env=Groups(gym.make("CartPole-v1")), device="cpu")
    assert model.options.reward_groups == ["a", "b"] and model.policy.separate_critics
    model.learn(32)
    assert "train/value_loss/b" in model.logger.name_to_value


#: the files of the rollout and train() loop and the model's setup: they call the data-parallel learner (or its
#: single-process form) the same way either way, and never ask which rank they are on
LOOP_FILES = tuple(
    f"core/{name}.py"
    for name in ("algorithm", "rollout", "setup", "model_setup", "learning", "saving", "hooks", "env_wrapping")
)
RANK_WORDS = re.compile(r"rank|world_size|_data_parallel\s+is\b|\bif\b[^\n]*_data_parallel", re.IGNORECASE)


def rank_mentions(text: str) -> list[str]:
    """The lines of a loop file that mention ranks or branch on the data-parallel learner."""
    return [line.strip() for line in text.splitlines() if RANK_WORDS.search(line)]


@pytest.mark.parametrize("name", LOOP_FILES)
def test_loop_files_never_mention_ranks(name):
    assert rank_mentions((PACKAGE / name).read_text()) == []


def test_rank_check_can_fail():
    """Negative control: the branches the loop had before the single-process learner are found."""
    before = [
        "        if self._data_parallel is not None:",
        "            step = env.num_envs * (1 if self._data_parallel is None else self._data_parallel.world_size)",
        "        if self._data_parallel is not None and self._data_parallel.rank != 0:",
        "        # every rank stops at the same minibatch",
    ]
    assert len(rank_mentions("\n".join(before))) == len(before)


#: the one module that imports torch.distributed: the process group, whose collectives everything else calls
DISTRIBUTED_IMPORTER = "sb3_xppo.common.distributed.process_group"


def torch_distributed_imports(modules: list[tuple[str, pathlib.Path]]) -> list[str]:
    """:return: every import of ``torch.distributed`` (or a module of it), anywhere in a file, outside the process group"""
    found = []
    for module, path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            hits = [name for name in names if name == "torch.distributed" or name.startswith("torch.distributed.")]
            if hits and module != DISTRIBUTED_IMPORTER:
                found.append(f"{module}:{node.lineno} imports {hits[0]}")
    return found


def test_only_the_process_group_imports_torch_distributed():
    assert torch_distributed_imports(package_modules()) == []


def test_torch_distributed_check_can_fail(tmp_path):
    """Negative control: the import resume/ranks.py had, and the other spellings, are found outside the process group."""
    path = tmp_path / "bad.py"
    lines = [
        "import torch.distributed as dist",
        "from torch import distributed",
        "def f():",
        "    from torch.distributed import barrier",
    ]
    path.write_text("\n".join(lines) + "\n")
    assert torch_distributed_imports([("sb3_xppo.resume.ranks", path), (DISTRIBUTED_IMPORTER, path)]) == [
        "sb3_xppo.resume.ranks:1 imports torch.distributed",
        "sb3_xppo.resume.ranks:2 imports torch.distributed",
        "sb3_xppo.resume.ranks:4 imports torch.distributed",
    ]
