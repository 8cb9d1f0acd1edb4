"""
Everything the commands change in objects the package does not own (rl-zoo3, SB3, sb3-contrib, ``sys``), in one
place: :func:`zoo_session` makes the changes and puts every one back when its block ends, also on an exception.
Besides ``sb3_xppo.dagger_distill.patching``, this is the one module that assigns to other packages' objects
(``tests/test_layout.py`` holds the package to it).

A session changes:

- rl-zoo3's tables: ``xppo``, ``xppo_mask``, ``xppo_lstm``, ``xppo_mask_lstm`` in ``ALGOS``, their optuna samplers
  and converters (:func:`sb3_xppo.zoo.registration.algorithm_tables`);
- ``sys.argv``: the command's arguments, which rl-zoo3's ``train`` and ``enjoy`` parse;
- evaluation with action masks (:mod:`sb3_xppo.zoo.evaluation`): SB3's ``evaluate_policy`` as its ``EvalCallback``
  calls it, rl-zoo3's ``create_test_env``, and ``predict`` of ``MaskablePPO`` and ``MaskableRecurrentXPPO``;
- loading (:mod:`sb3_xppo.zoo.loading`, docs/guide/security.md): ``load`` of the stock algorithms in rl-zoo3's
  table, ``VecNormalize.load``, SB3's ``load_from_pkl`` (replay buffers), rl-zoo3's ``get_saved_hyperparams`` and
  ``yaml.UnsafeLoader`` (what its ``enjoy`` and ``record_video`` read ``args.yml`` with), so that no code from the
  agent's files runs; with ``--trust-code``, instead, the package's algorithms load as SB3 does;
- resumable runs (:mod:`sb3_xppo.zoo.resuming`): rl-zoo3's ``make_vec_env`` (an ``ActionRecorder`` beneath each
  Monitor) and ``ExperimentManager``'s ``create_callbacks``, ``setup_experiment`` and ``learn``;
- when training: rl-zoo3's ``ExperimentManager.default_vec_env_cls`` and ``_preprocess_hyperparams``, wrapped once
  (the VecEnv, :mod:`sb3_xppo.zoo.vec_envs`; ``distributed=True`` with ``--distributed``; the entry's keywords checked
  before any env is built), and ``hyperparameters_optimization`` (optuna's tables created first,
  :mod:`sb3_xppo.zoo.storage`).

Not thread-safe: the changes are to modules and classes, which every thread of the process sees. Run one session at
a time, and nothing else that uses rl-zoo3 beside it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from sb3_xppo.zoo import evaluation, loading, resuming, storage, vec_envs
from sb3_xppo.zoo.registration import algorithm_tables


class Patches:
    """Changes to other packages' objects, each recorded so that :meth:`restore` undoes them, the last first."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        """``setattr(owner, name, value)``; undone by putting back what ``owner`` itself held (or nothing)."""
        had_own, saved = name in vars(owner), vars(owner).get(name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, saved) if had_own else delattr(owner, name))

    def update(self, table: MutableMapping[Any, Any], items: Mapping[Any, Any]) -> None:
        """``table.update(items)``; undone by putting back the values it replaced and removing the keys it added."""
        saved = {key: table[key] for key in items if key in table}
        added = [key for key in items if key not in table]
        table.update(items)

        def undo() -> None:
            for key in added:
                table.pop(key, None)
            table.update(saved)

        self._undo.append(undo)

    def restore(self) -> None:
        """Undo every change, the last first."""
        while self._undo:
            self._undo.pop()()


@contextlib.contextmanager
def applied(*installers: Callable[[Patches], Any]) -> Iterator[list[Any]]:
    """
    :param installers: functions that make their changes through the :class:`Patches` they are given
    :return: (yields) what each installer returned; every change is undone when the block ends
    """
    patches = Patches()
    try:
        yield [install(patches) for install in installers]
    finally:
        patches.restore()


def install_algorithms(patches: Patches) -> None:
    """The package's algorithms, optuna samplers and converters in rl-zoo3's tables, through every module binding them."""
    import rl_zoo3
    import rl_zoo3.enjoy
    import rl_zoo3.exp_manager
    import rl_zoo3.hyperparams_opt
    import rl_zoo3.train
    import rl_zoo3.utils

    with contextlib.suppress(ImportError):
        import mo_gymnasium  # noqa: F401  (registers its envs with gymnasium, as rl-zoo3's import_envs does for others)

    algorithms, samplers, converters = algorithm_tables()
    # train, exp_manager and enjoy import ALGOS (exp_manager the optuna tables too) by name: today one dict each,
    # written through every module in case one ever binds its own copy
    for module in (rl_zoo3, rl_zoo3.utils, rl_zoo3.train, rl_zoo3.exp_manager, rl_zoo3.enjoy):
        patches.update(module.ALGOS, algorithms)
    for module in (rl_zoo3.hyperparams_opt, rl_zoo3.exp_manager):
        patches.update(module.HYPERPARAMS_SAMPLER, samplers)
        patches.update(module.HYPERPARAMS_CONVERTER, converters)


def install_masked_evaluation(patches: Patches) -> None:
    """Maskable models act on their env's masks wherever rl-zoo3 evaluates or watches them (:mod:`.evaluation`)."""
    import rl_zoo3.enjoy
    import rl_zoo3.utils
    import stable_baselines3.common.callbacks as sb3_callbacks
    from sb3_contrib import MaskablePPO

    from sb3_xppo.ppo_mask_recurrent import MaskableRecurrentXPPO

    test_envs: list[Any] = []
    patches.set(sb3_callbacks, "evaluate_policy", evaluation.masked_evaluate_policy(sb3_callbacks.evaluate_policy))
    # enjoy bound create_test_env when it was imported; record_video imports it from rl_zoo3.utils when it runs
    noting = evaluation.noting_test_envs(rl_zoo3.utils.create_test_env, test_envs)
    patches.set(rl_zoo3.enjoy, "create_test_env", noting)
    patches.set(rl_zoo3.utils, "create_test_env", noting)
    for maskable in (MaskablePPO, MaskableRecurrentXPPO):
        patches.set(maskable, "predict", evaluation.predict_with_masks(maskable.predict, test_envs))


def install_safe_loading(patches: Patches, trust_code: bool, training: bool) -> None:
    """
    No code from an agent's files runs while rl-zoo3 loads it, its statistics, replay buffer and settings
    (:mod:`.loading`); with ``trust_code`` the agent's pickles load as SB3 does and its config may name any wrapper,
    but YAML is read safely all the same.

    :param training: ``train -i``: a function pickled by value in the agent is refused (it would be trained with)
    """
    import rl_zoo3.enjoy
    import rl_zoo3.utils
    import stable_baselines3.common.off_policy_algorithm as off_policy
    import yaml
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3_xppo.loading.zoo_files import ZooConfigLoader, saved_hyperparams

    for algorithm in set(rl_zoo3.utils.ALGOS.values()):
        load = loading.algorithm_load(algorithm, trust_code, for_training=training)
        if load is not None:
            patches.set(algorithm, "load", load)
    for module in (rl_zoo3.utils, rl_zoo3.enjoy):
        patches.set(module, "get_saved_hyperparams", functools.partial(saved_hyperparams, trust_code=trust_code))
    # enjoy and record_video read args.yml with yaml.load(f, Loader=yaml.UnsafeLoader): the loader they find
    patches.set(yaml, "UnsafeLoader", ZooConfigLoader)
    if trust_code:
        return
    patches.set(VecNormalize, "load", staticmethod(loading.vec_normalize_load))
    patches.set(off_policy, "load_from_pkl", loading.load_from_pkl)


def install_vec_env(
    patches: Patches, name: str | None, ray_options: dict[str, Any] | None = None, distributed: bool = False
) -> list[str]:
    """
    rl-zoo3's ``ExperimentManager`` builds its envs with the VecEnv ``name`` names, else the entry's ``vec_env`` key,
    else the lean env (:mod:`.vec_envs`); its entry's keywords are checked before any env is built
    (:func:`preprocessing`, which also makes the model a data-parallel one with ``distributed``).

    :return: the ``--vec-env`` arguments to hand rl-zoo3
    :raises ValueError: for Ray options with another ``--vec-env``
    """
    from rl_zoo3.exp_manager import ExperimentManager

    chosen = vec_envs.check_vec_env_name(name or vec_envs.DEFAULT_VEC_ENV)
    if ray_options and name is not None and name != "ray":
        raise ValueError(f"--ray-address and --ray-envs-per-actor are options of --vec-env ray, not of --vec-env {name}")
    # a class someone else set in default_vec_env_cls stays, over both (rl-zoo3 lets it win over --vec-env too)
    someone_elses = ExperimentManager.default_vec_env_cls
    if someone_elses is None and chosen not in vec_envs.ZOO_OWN:
        patches.set(ExperimentManager, "default_vec_env_cls", vec_envs.vec_env_factory(chosen, ray_options))
    patches.set(ExperimentManager, "_preprocess_hyperparams", preprocessing(name, someone_elses, ray_options, distributed))
    return ["--vec-env", chosen if chosen in vec_envs.ZOO_OWN else "dummy"]


def install_storage_tables(patches: Patches) -> None:
    """``-optimize`` creates optuna's tables in its ``--storage`` before rl-zoo3 opens its study (:mod:`.storage`)."""
    from rl_zoo3.exp_manager import ExperimentManager

    patches.set(
        ExperimentManager, "hyperparameters_optimization", storage.with_tables(ExperimentManager.hyperparameters_optimization)
    )


def preprocessing(
    name: str | None, someone_elses: Any, ray_options: dict[str, Any] | None, distributed: bool
) -> Callable[..., Any]:
    """
    rl-zoo3's ``ExperimentManager._preprocess_hyperparams`` (it takes its own keys out of an entry and offers no
    hook), wrapped once for everything a session changes there: the entry's ``vec_env`` key chooses the VecEnv
    (unless ``--vec-env`` or someone else's ``default_vec_env_cls`` did); with ``--distributed`` the model is built
    with ``distributed=True``; and what is left for the model's constructor is checked by the algorithm
    (``check_keywords``) before rl-zoo3 builds any env, as the constructor would check it.

    :param name: ``--vec-env`` or None
    :param someone_elses: the ``default_vec_env_cls`` set before the session, or None
    :param ray_options: the Ray options of ``--vec-env ray``
    :param distributed: ``--distributed``
    :return: the replacement of ``ExperimentManager._preprocess_hyperparams``
    """
    import rl_zoo3.exp_manager
    from rl_zoo3.exp_manager import ExperimentManager

    preprocess = ExperimentManager._preprocess_hyperparams

    def preprocess_and_check(manager: ExperimentManager, hyperparams: dict[str, Any]) -> Any:
        entry_choice, hyperparams = vec_envs.pop_vec_env_key(hyperparams)
        if entry_choice is not None and name is None and someone_elses is None:
            # (rl-zoo3 calls vec_env_class as make_vec_env's vec_env_cls, a factory; it annotates the class)
            manager.vec_env_class = vec_envs.vec_env_factory(entry_choice, ray_options)  # type: ignore[assignment]
        if distributed:
            hyperparams = {**hyperparams, "distributed": True}
        result = preprocess(manager, hyperparams)
        check_keywords = getattr(rl_zoo3.exp_manager.ALGOS.get(manager.algo), "check_keywords", None)
        if check_keywords is not None:  # one of the package's algorithms
            check_keywords(manager.n_envs, (), {key: value for key, value in result[0].items() if key != "policy"})
        return result

    return preprocess_and_check


def install_checkpoints(patches: Patches, plan: resuming.ResumePlan) -> None:
    """
    Resumable training runs (:mod:`.resuming`): rl-zoo3's envs built with an ``ActionRecorder`` beneath each Monitor,
    a ``ResumableCheckpoint`` first among its callbacks, and with ``--resume`` its ``setup_experiment`` continuing the
    run; its ``learn`` raises :class:`~sb3_xppo.zoo.resuming.Preempted` where a SIGTERM stopped the run.
    """
    import rl_zoo3.exp_manager
    from rl_zoo3.exp_manager import ExperimentManager

    patches.set(rl_zoo3.exp_manager, "make_vec_env", resuming.recording_make_vec_env(rl_zoo3.exp_manager.make_vec_env, plan))
    patches.set(ExperimentManager, "create_callbacks", resuming.with_checkpoint(ExperimentManager.create_callbacks, plan))
    patches.set(ExperimentManager, "setup_experiment", resuming.resuming_setup(ExperimentManager.setup_experiment, plan))
    patches.set(ExperimentManager, "learn", resuming.stopping_when_preempted(ExperimentManager.learn, plan))


def install_argv(patches: Patches, args: Sequence[str]) -> None:
    """``sys.argv``: the program's name and ``args``, as rl-zoo3's command functions parse it."""
    patches.set(sys, "argv", [sys.argv[0] if sys.argv else "sb3_xppo", *args])


@contextlib.contextmanager
def zoo_session(
    args: Sequence[str],
    training: bool = True,
    vec_env: str | None = None,
    ray_options: dict[str, Any] | None = None,
    distributed: bool = False,
    trust_code: bool = False,
    resume: resuming.ResumePlan | None = None,
) -> Iterator[None]:
    """
    While the block runs, rl-zoo3's ``train`` (``training=True``) or ``enjoy`` and ``record_video`` run on ``args``
    with the package's algorithms, masked evaluation and (training) the chosen VecEnv; everything is put back when it
    ends, also on an exception. Not thread-safe (see the module).

    :param args: the command's arguments, without the program name
    :param training: also choose the VecEnv and create optuna's tables before a search
    :param vec_env: ``--vec-env``: one of :data:`sb3_xppo.zoo.VEC_ENV_CHOICES`, or None (the entry's key, else lean)
    :param ray_options: the :class:`~sb3_xppo.vec_env.RayVecEnv` keywords of ``--vec-env ray``
    :param distributed: ``--distributed``: the model is built with ``distributed=True`` (training only)
    :param trust_code: ``--trust-code``: load agents, statistics and settings as rl-zoo3 and SB3 do, running their
        code (default: none runs, :func:`install_safe_loading`)
    :param resume: resumable checkpoints, and the run to continue (training only; None: none written)
    :raises ValueError: for Ray options with another ``--vec-env``, before anything is changed
    """
    if not training and (vec_env is not None or ray_options or distributed or resume is not None):
        raise ValueError("zoo_session: vec_env, ray_options, distributed and resume are options of training, not of enjoy")

    def session(patches: Patches) -> None:
        install_algorithms(patches)
        install_masked_evaluation(patches)
        install_safe_loading(patches, trust_code, training)
        extra = install_vec_env(patches, vec_env, ray_options, distributed) if training else []
        if training:
            install_storage_tables(patches)
        if resume is not None:
            install_checkpoints(patches, resume)
        install_argv(patches, [*args, *extra])

    with applied(session):
        yield


def zoo_help(command: Callable[[], None], *without: str) -> str:
    """
    :param command: rl-zoo3's ``train`` or ``enjoy``
    :param without: options of its to leave out (the package's own replace them, e.g. ``--vec-env``)
    :return: its ``--help`` text without its usage line, the package's algorithms among its choices, those
        options' entries left out
    """
    buffer = io.StringIO()
    install_help_argv = functools.partial(install_argv, args=["--help"])
    with applied(install_algorithms, install_help_argv), contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        command()
    text = buffer.getvalue()
    kept: list[str] = []
    skipping = False
    for line in text[text.find("\n\n") + 2 :].splitlines():  # (after its usage block)
        if line.startswith("  -"):  # (an option's entry starts here; its continuation lines are indented deeper)
            skipping = any(line.lstrip().startswith(option) for option in without)
        elif line and not line.startswith(" "):
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept).strip("\n")


def register() -> None:
    """
    Make ``xppo``, ``xppo_mask``, ``xppo_lstm`` and ``xppo_mask_lstm`` known to rl-zoo3 for the rest of the process
    (to call rl-zoo3 yourself; the commands register within their :func:`zoo_session`): the algorithms, their optuna
    samplers and converters. Idempotent. The package's environments are registered with gymnasium when it is imported;
    this imports MO-Gymnasium where it is installed, so that its environments (``mo-lunar-lander-v3``) are too.
    """
    install_algorithms(Patches())  # never restored
