"""
The contenders of a learning campaign, by name (``benchmarks/learning.py``'s docstring lists the names and sets):
an algorithm and the keywords it adds to the zoo's PPO entry.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field, replace
from typing import Any

from harness.zoo import SPO_PAPER_CONFIG
from sb3_xppo import xppo_recommended
from sb3_xppo.zoo import CONFIG_PATH, VEC_ENV_CHOICES

ACTORS = ("clip", "spo", "asymmetric_spo")
VALUES = ("mse", "sb3", "clipped", "improved")
GRID_VALUES = ("mse", "clipped", "improved")
NORMS = {"mb": "minibatch", "rollout": "rollout", "none": False}
# overrides of these keys go into the zoo's yml entry before rl-zoo3 reads it: they shape the envs, not the model
ZOO_ENV_KEYS = ("normalize", "n_envs", "frame_stack", "env_wrapper", "vec_env_wrapper", "env_kwargs")
#: :func:`sb3_xppo.xppo_recommended`'s options over the zoo's PPO entry
RECOMMENDED = "xppo-recommended"
#: XPPO with the SPO paper's setup (``benchmarks/spo_paper.yml``) instead of the zoo's PPO entry
PAPER = "xppo-paper"
#: the single options of the improvements screen (issue 15), each over the zoo's PPO entry
IMPROVEMENTS = (
    "xppo@rpo_alpha=0.5",
    "xppo@normalize_values=True",
    "xppo@value_loss='hl_gauss'@normalize_values=True",
    "xppo@simba='critic'",
)
# overrides of these are XPPO's policy options: they go into the entry's policy_kwargs, the zoo's kept
POLICY_OPTIONS = ("rpo_alpha", "simba", "simba_activation", "hl_gauss", "action_dist")
# a string override of these ('lin_3e-4') is an rl-zoo3 schedule: it goes into the entry too, for rl-zoo3 to build
SCHEDULE_KEYS = ("learning_rate", "clip_range", "clip_range_vf")
#: the override naming the training VecEnv (``@vec_env='envpool'``), one of ``sb3_xppo.zoo.VEC_ENV_CHOICES``; like
#: every override, part of the cache key only when given
VEC_ENV_OVERRIDE = "vec_env"
#: the override that trains on that many ranks (``@ranks=2``, ``distributed=True``), each with the zoo entry's
#: ``n_envs`` and ``batch_size`` divided by it: the global rollout and minibatch the entry's (docs/guide/distributed.md)
RANKS_OVERRIDE = "ranks"
#: the override that gives the actor and the critic that many hidden layers of the zoo entry's width (``@depth=7``,
#: the depth of the spo_depth campaign: Hopper's entry then has 7 layers of 256 units a side); the entry's other policy
#: keywords kept
DEPTH_OVERRIDE = "depth"
#: the override that gives the actor these hidden layers (``@pi_arch=[64,64]``: ``net_arch``'s ``pi``), the critic's
#: and the entry's other policy keywords kept: the SPO paper's shallow actor on its entry (``xppo-paper``)
PI_ARCH_OVERRIDE = "pi_arch"


@dataclass(frozen=True)
class Contender:
    """A named algorithm and the keywords it adds to the zoo's PPO hyperparameters."""

    name: str
    algo: str  # "ppo", "xppo", "recurrentppo" or "xppo_lstm"
    kwargs: dict[str, Any] = field(default_factory=dict)
    config: str | None = None  # the yml the hyperparameters come from: None for rl-zoo3's ppo.yml


def parse_contender(name: str) -> Contender:
    """
    ``ppo``, ``xppo`` or ``xppo-<actor>-<value>-<norm>[+toggle...]`` (see the module docstring), each optionally
    followed by hyperparameter overrides ``@<keyword>=<value>`` (e.g. ``xppo-spo-mse-mb@n_steps=256@n_epochs=10``).

    :param name: the contender's name
    :return: the contender
    """
    base_name, *overrides = name.split("@")
    contender = _parse_base(base_name)
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key.isidentifier() or key in ("n_timesteps", "env"):
            raise ValueError(
                f"bad override {override!r} in {name!r}: expected @<keyword>=<python literal>, a keyword of the "
                f"algorithm or one of the zoo entry's env keys {ZOO_ENV_KEYS} (n_timesteps is the budget's)"
            )
        try:
            contender.kwargs[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError) as error:
            raise ValueError(f"bad override {override!r} in {name!r}: {value!r} is not a python literal") from error
        if key == RANKS_OVERRIDE and (not isinstance(contender.kwargs[key], int) or contender.kwargs[key] < 1):
            raise ValueError(f"bad override {override!r} in {name!r}: {key} is a number of processes >= 1")
        if key == DEPTH_OVERRIDE and (not isinstance(contender.kwargs[key], int) or contender.kwargs[key] < 1):
            raise ValueError(f"bad override {override!r} in {name!r}: {key} is a number of hidden layers >= 1")
        if key == PI_ARCH_OVERRIDE and not _is_layers(contender.kwargs[key]):
            raise ValueError(f"bad override {override!r} in {name!r}: {key} is a list of layer widths >= 1")
        if key == VEC_ENV_OVERRIDE and contender.kwargs[key] not in VEC_ENV_CHOICES:
            raise ValueError(f"bad override {override!r} in {name!r}: {key} is one of {VEC_ENV_CHOICES}")
        if key in SCHEDULE_KEYS and isinstance(contender.kwargs[key], str) and not _is_zoo_schedule(contender.kwargs[key]):
            raise ValueError(f"bad override {override!r} in {name!r}: a string {key} is an rl-zoo3 schedule, 'lin_<number>'")
    return replace(contender, name=name)


def deepened(net_arch: list[int] | dict[str, list[int]] | None, depth: int) -> dict[str, list[int]]:
    """
    ``net_arch`` (a zoo entry's, SB3's meaning; None: SB3's default MLP, 64 units a layer) with ``depth`` hidden
    layers of its width for the actor (``pi``) and the critic (``vf``).

    :param net_arch: the entry's ``net_arch``
    :param depth: the number of hidden layers
    :return: ``dict(pi=[width] * depth, vf=[width] * depth)``
    """
    arch = dict(pi=[64, 64], vf=[64, 64]) if net_arch is None else net_arch
    parts = dict(arch) if isinstance(arch, dict) else dict(pi=list(arch), vf=list(arch))
    if set(parts) != {"pi", "vf"} or any(len(set(layers)) != 1 for layers in parts.values()):
        raise ValueError(f"@{DEPTH_OVERRIDE} needs a net_arch of one width for pi and one for vf, got {net_arch!r}")
    return {side: [layers[0]] * depth for side, layers in parts.items()}


def with_actor(net_arch: list[int] | dict[str, list[int]] | None, pi: list[int]) -> dict[str, list[int]]:
    """
    ``net_arch`` (a zoo entry's, SB3's meaning; None: SB3's default MLP) with ``pi`` as the actor's hidden layers.

    :param net_arch: the entry's ``net_arch``
    :param pi: the actor's layer widths
    :return: ``dict(pi=pi, vf=<the entry's critic>)``
    """
    arch = dict(pi=[64, 64], vf=[64, 64]) if net_arch is None else net_arch
    parts = dict(arch) if isinstance(arch, dict) else dict(pi=list(arch), vf=list(arch))
    return {**parts, "pi": list(pi)}


def _is_layers(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(w, int) and w >= 1 for w in value)


def _is_zoo_schedule(value: str) -> bool:
    kind, _, initial = value.partition("_")
    try:
        return kind == "lin" and float(initial) > 0
    except ValueError:
        return False


def _parse_base(name: str) -> Contender:
    if name in ("ppo", "xppo", "recurrentppo"):
        return Contender(name, name)
    if name == "xppo-lstm":
        return Contender(name, "xppo_lstm")
    if name == "xppo-zoo":
        return Contender(name, "xppo", config=str(CONFIG_PATH))
    if name == PAPER:
        return Contender(name, "xppo", config=SPO_PAPER_CONFIG)
    if name == RECOMMENDED:
        return Contender(name, "xppo")  # its options depend on the env: for_env() adds them
    base, *toggles = name.split("+")
    parts = base.split("-")
    if len(parts) != 4 or parts[0] != "xppo" or parts[1] not in ACTORS or parts[2] not in VALUES or parts[3] not in NORMS:
        raise ValueError(
            f"unknown contender {name!r}: expected 'ppo', 'xppo', 'recurrentppo', 'xppo-lstm', 'xppo-zoo', "
            f"'{PAPER}', '{RECOMMENDED}' or "
            "'xppo-<actor>-<value>-<norm>[+toggle...]' with actor in "
            f"{ACTORS}, value in {VALUES}, norm in {tuple(NORMS)}"
        )
    kwargs: dict[str, Any] = dict(actor_loss=parts[1], value_loss=parts[2], normalize_advantage=NORMS[parts[3]])
    for toggle in toggles:
        if toggle.startswith("dual"):
            kwargs["dual_clip"] = float(toggle[4:])
        elif toggle.startswith("delight"):
            kwargs["delightful"] = True
            if toggle[7:]:
                kwargs["delight_temp"] = float(toggle[7:])
        elif toggle.startswith("lrc"):
            kwargs["log_ratio_clamp"] = float(toggle[3:])
        elif toggle.startswith("cr") and ":" in toggle:
            low, high = toggle[2:].split(":")
            kwargs["clip_range"] = (float(low), float(high))
        else:
            raise ValueError(
                f"unknown toggle {toggle!r} in {name!r}: expected dual<c>, delight[<temp>], lrc<c> or cr<low>:<high>"
            )
    return Contender(name, "xppo", kwargs)


def for_env(contender: Contender, env_id: str) -> Contender:
    """
    The contender as it runs on ``env_id``: ``xppo-recommended`` gets :func:`sb3_xppo.xppo_recommended`'s options for
    the env (policy options, had it any, as overrides, which go into the entry's ``policy_kwargs``), under its own
    ``@`` overrides. They are part of its kwargs, hence of the cache key: a changed preset finds the runs of what it
    now is (:func:`load_cached`), or runs it.

    :param contender: a parsed contender
    :param env_id: the env it runs on
    :return: the contender, with the preset's options where it has one
    """
    if contender.name.split("@")[0] != RECOMMENDED:
        return contender
    return replace(contender, kwargs={**_recommended_options(env_id), **contender.kwargs})


@functools.cache
def _recommended_options(env_id: str) -> dict[str, Any]:
    """xppo_recommended's options for ``env_id``, flat (an env made once per id, for its action space)."""
    options = xppo_recommended(env_id)
    policy_options = options.pop("policy_kwargs", {})
    return {**options, **policy_options}


def expand_contenders(spec: str) -> list[Contender]:
    """
    Turn ``--contenders`` (a comma list of set names and contender names) into contenders, without duplicates.

    :param spec: e.g. ``"grid"``, ``"defaults,xppo-spo-mse-mb+dual3"``, ``"toggles:xppo-spo-improved-mb"``
    :return: the contenders, in order
    """
    names: list[str] = []
    # commas inside an override's brackets (@normalize={'norm_obs':False,'norm_reward':True}) do not split
    for item in (s.strip() for s in re.split(r",(?![^{}\[\]()]*[}\])])", spec) if s.strip()):
        if item == "defaults":
            names += ["ppo", "xppo"]
        elif item in ("grid", "grid-rollout", "grid-none"):
            norm = {"grid": "mb", "grid-rollout": "rollout", "grid-none": "none"}[item]
            names += ["ppo"] + [
                f"xppo-{a}-{v}-{norm}"
                for a in ACTORS
                for v in GRID_VALUES
                # clip + mse + minibatch normalization is PPO itself (same parameters after learn(), docs/guide/xppo.md)
                if (a, v, norm) != ("clip", "mse", "mb")
            ]
        elif item == "improvements":
            names += ["ppo", *IMPROVEMENTS]
        elif item == "recommended":
            names += ["ppo", RECOMMENDED]
        elif item.startswith("toggles:"):
            base = item.split(":", 1)[1]
            names += [base, f"{base}+dual3", f"{base}+delight", f"{base}+dual3+delight"]
        else:
            names.append(item)
    return [parse_contender(n) for n in dict.fromkeys(names)]
