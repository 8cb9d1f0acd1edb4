"""
The upstream suites ``tests/upstream/run.py`` runs with the package's classes in their parents' place: the source
distributions they come from (pinned to the installed versions, checked by hash), the test files that exercise
PPO, MaskablePPO and RecurrentPPO, the replacements, and the few tests left out, each with its reason.
"""

from __future__ import annotations

from typing import NamedTuple


class Suite(NamedTuple):
    """One library's own tests."""

    #: the distribution (``pip download`` name) and the version its tests are pinned to: the installed one
    distribution: str
    version: str
    #: the source distribution's SHA-256
    sha256: str
    #: the import name of the library
    module: str
    #: its test files that exercise the replaced classes
    files: tuple[str, ...]
    #: the library's names and the package's classes that take their place (``sb3_xppo.<name>``)
    replaced: dict[str, str]
    #: tests left out (node id, from the suite's root -> why): only those of the parents' own wording or internals
    deselected: dict[str, str]


SUITES: dict[str, Suite] = {
    "sb3": Suite(
        "stable-baselines3",
        "2.9.2",
        "8af267e9513343f481b3f0680b7740ad79a746873db24f18a9fb2edcbd9a2df7",
        "stable_baselines3",
        (
            "test_callbacks.py",
            "test_cnn.py",
            "test_custom_policy.py",
            "test_deterministic.py",
            "test_dict_env.py",
            "test_distributions.py",
            "test_gae.py",
            "test_identity.py",
            "test_logger.py",
            "test_predict.py",
            "test_run.py",
            "test_save_load.py",
            "test_sde.py",
            "test_spaces.py",
            "test_tensorboard.py",
            "test_train_eval_mode.py",
            "test_vec_envs.py",
            "test_vec_extract_dict_obs.py",
            "test_vec_monitor.py",
        ),
        {"PPO": "XPPO"},
        {
            "tests/test_run.py::test_ppo_warnings": "its last check matches PPO's own message, 'You are trying to run "
            "PPO on the GPU': XPPO recommends the CPU alike, naming XPPO (tests/test_xppo_sb3_behaviour.py)",
        },
    ),
    "contrib": Suite(
        "sb3-contrib",
        "2.9.2",
        "20b514afc04de447e284e9e2dec9d368cf6828ecf67f4060262aeba0818a3c3a",
        "sb3_contrib",
        (
            "test_cnn.py",
            "test_deterministic.py",
            "test_dict_env.py",
            "test_identity.py",
            "test_invalid_actions.py",
            "test_lstm.py",
            "test_run.py",
            "test_save_load.py",
            "test_train_eval_mode.py",
        ),
        {"MaskablePPO": "MaskableXPPO", "RecurrentPPO": "RecurrentXPPO"},
        {},
    ),
}
