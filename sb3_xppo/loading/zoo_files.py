"""
The files rl-zoo3 saves beside a trained agent (``<log dir>/<env>/config.yml``, ``args.yml``), read without running
their code: YAML with :class:`ZooConfigLoader` (PyYAML's safe loader and the few Python tags rl-zoo3 really writes),
the ``normalize`` string with :func:`~sb3_xppo.loading.literals.python_literal`, and the wrappers it names checked
by the gate (:func:`~sb3_xppo.loading.gate.check_config`). Needs PyYAML (rl-zoo3's dependency):
import this module only where rl-zoo3's files are read.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

import yaml

from sb3_xppo.loading.errors import LITERALS_ONLY, UnsafeFileError
from sb3_xppo.loading.gate import check_config, library_global
from sb3_xppo.loading.literals import python_literal

PYTHON_TAG = "tag:yaml.org,2002:python/"


class ZooConfigLoader(yaml.SafeLoader):
    """
    PyYAML's ``SafeLoader`` plus what rl-zoo3's ``yaml.dump`` writes in ``config.yml`` and ``args.yml``:
    ``!!python/object/apply:collections.OrderedDict`` (the files themselves), ``!!python/tuple``, and
    ``!!python/name:`` of a global the allowlist holds (``torch.nn.modules.activation.Tanh`` in ``policy_kwargs``).
    Any other Python tag is an :class:`~sb3_xppo.loading.errors.UnsafeFileError` naming the file and the tag.
    """

    def construct_ordered_dict(self, node: yaml.Node) -> OrderedDict:
        if isinstance(node, yaml.MappingNode):  # the long form: args, dictitems
            parts = self.construct_mapping(node, deep=True)
            ordered = OrderedDict(*parts.get("args", []))
            ordered.update(parts.get("dictitems", {}))
            return ordered
        return OrderedDict(*self.construct_sequence(node, deep=True))  # type: ignore[arg-type]

    def construct_python_tuple(self, node: yaml.Node) -> tuple:
        return tuple(self.construct_sequence(node, deep=True))  # type: ignore[arg-type]

    def construct_python_name(self, suffix: str, node: yaml.Node) -> Any:
        module, _, name = suffix.rpartition(".")
        value = library_global(module, name)
        if value is None:
            raise UnsafeFileError(str(self.name), f"!!python/name:{suffix}", "a name outside the allowlist", LITERALS_ONLY)
        return value

    def refuse(self, suffix: str, node: yaml.Node) -> Any:
        raise UnsafeFileError(str(self.name), f"!!python/{suffix}", "a Python tag that rl-zoo3 does not write", LITERALS_ONLY)


ZooConfigLoader.add_constructor(f"{PYTHON_TAG}object/apply:collections.OrderedDict", ZooConfigLoader.construct_ordered_dict)
ZooConfigLoader.add_constructor(f"{PYTHON_TAG}tuple", ZooConfigLoader.construct_python_tuple)
# the first prefix that matches wins: names before the refusal of every other Python tag
ZooConfigLoader.add_multi_constructor(f"{PYTHON_TAG}name:", ZooConfigLoader.construct_python_name)
ZooConfigLoader.add_multi_constructor(PYTHON_TAG, ZooConfigLoader.refuse)


def load_zoo_yaml(path: str | os.PathLike) -> Any:
    """
    :param path: a ``config.yml`` or ``args.yml`` that rl-zoo3 wrote
    :return: its content (``OrderedDict`` where rl-zoo3 wrote one)
    :raises UnsafeFileError: for a Python tag outside what rl-zoo3 writes, or a global outside the allowlist
    """
    with open(path) as file:
        return yaml.load(file, Loader=ZooConfigLoader)  # a SafeLoader subclass


def saved_hyperparams(
    stats_path: str, norm_reward: bool = False, test_mode: bool = False, trust_code: bool = False
) -> tuple[dict[str, Any], str | None]:
    """
    rl-zoo3's ``get_saved_hyperparams``, reading ``config.yml`` with :func:`load_zoo_yaml`, a ``normalize`` string
    as a literal (rl-zoo3 ``eval``-s it), and the wrappers and callbacks it names checked by the gate before rl-zoo3
    imports and calls them (:func:`~sb3_xppo.loading.gate.check_config`).

    :param stats_path: the run's ``<log dir>/<env>/`` folder
    :param norm_reward: reward normalization at test time (``test_mode``)
    :param test_mode: whether ``norm_reward`` replaces a ``normalize`` string's own
    :param trust_code: let the config name any wrapper or callback (the YAML is read safely all the same)
    :return: the hyperparameters (with ``normalize_kwargs`` when it normalizes) and ``stats_path`` (None when it is
        not a folder)
    :raises UnsafeFileError: for code in ``config.yml``
    """
    hyperparams: dict[str, Any] = {}
    if not os.path.isdir(stats_path):
        return hyperparams, None
    config_file = os.path.join(stats_path, "config.yml")
    if os.path.isfile(config_file):
        hyperparams = dict(load_zoo_yaml(config_file))
        check_config(hyperparams, config_file, trust_code)
        hyperparams["normalize"] = hyperparams.get("normalize", False)
    else:
        hyperparams["normalize"] = os.path.isfile(os.path.join(stats_path, "obs_rms.pkl"))
    normalize = hyperparams["normalize"]
    if normalize:
        if isinstance(normalize, str):
            normalize_kwargs = python_literal(normalize, f"{config_file}: normalize")
            if not isinstance(normalize_kwargs, dict):
                raise ValueError(f"{config_file}: normalize must be a dict, got {normalize!r}")
            if test_mode:
                normalize_kwargs["norm_reward"] = norm_reward
        elif isinstance(normalize, dict):
            normalize_kwargs = normalize
        else:
            normalize_kwargs = {"norm_obs": normalize, "norm_reward": norm_reward}
        hyperparams["normalize_kwargs"] = normalize_kwargs
    return hyperparams, stats_path
