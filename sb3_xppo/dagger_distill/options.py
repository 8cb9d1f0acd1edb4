"""
DAgger's options, declared once: :class:`DistillOptions` is a frozen dataclass whose fields are the options of
:class:`~sb3_xppo.dagger_distill.DaggerDistiller`, :class:`~sb3_xppo.dagger_distill.DaggerCallback` and
``python -m sb3_xppo.distill``, each with its type, default, documentation, check (:func:`~sb3_xppo.common.
declarations.option`, as :class:`~sb3_xppo.XPPOOptions` declares XPPO's), the classes that read it and its
command-line flag. The checks run once, when the object is made; the callback hands its object to the distiller
it builds, and the command builds one from its flags.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, NamedTuple, TypedDict

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.type_aliases import Schedule
from stable_baselines3.common.vec_env import VecNormalize
from torch import nn

from sb3_xppo.common.declarations import check_declared, option
from sb3_xppo.common.option_docs import document_options
from sb3_xppo.dagger_distill.checks import check_callable, check_count, check_layers, check_number, check_size, check_switch
from sb3_xppo.dagger_distill.objectives import Objective, cosine_alignment_loss, kl_loss, mse_loss, nll_loss
from sb3_xppo.dagger_distill.teacher_obs import ObsKeys

#: the readers of an option: the classes and the command that take it
DISTILLER = "DaggerDistiller"
CALLBACK = "DaggerCallback"
COMMAND = "python -m sb3_xppo.distill"

#: the objectives the command's ``--loss`` names
LOSSES: dict[str, Objective] = {
    "nll": nll_loss,
    "kl": kl_loss,
    "reverse_kl": functools.partial(kl_loss, reverse=True),
    "mse": mse_loss,
}


class Flag(NamedTuple):
    """An option's command-line flag (``--`` and the option's name, dashed, unless ``name`` says otherwise)."""

    #: the ``--help`` text (the default is appended)
    help: str
    #: the flag, when it is not the option's name
    name: str | None = None
    #: argparse's ``type`` (None: a switch, ``store_true``)
    type: Callable[[str], Any] | None = None
    #: what the option takes from the parsed value (None: the value itself)
    to_option: Callable[[Any], Any] | None = None
    #: the flag's default as the command line writes it (None: the option's)
    default: Any = None
    #: argparse's ``nargs``
    nargs: str | None = None
    #: the values the flag takes (None: any its ``type`` reads)
    choices: tuple[str, ...] | None = None


def readers(*names: str, flag: Flag | None = None) -> dict[str, Any]:
    """The metadata of an option read by ``names``, with its command-line flag (which needs :data:`COMMAND`)."""
    return {"readers": names, "flag": flag}


def plain(check: Callable[..., Any], name: str, **bounds: Any) -> Callable[[Any, Mapping[str, Any]], Any]:
    """
    An option's check made of one of :mod:`sb3_xppo.dagger_distill.checks`' (``check(name, value, **bounds)``).

    :return: ``check(value, checked) -> value`` (:data:`~sb3_xppo.common.declarations.OptionCheck`)
    """

    def check_value(value: Any, checked: Mapping[str, Any]) -> Any:
        check(name, value, **bounds)
        return value

    return check_value


def number_or_schedule(name: str, high: float | None = None) -> Callable[[Any, Mapping[str, Any]], float | Schedule]:
    """A number in ``[0, high]`` or a schedule of ``progress_remaining`` (checked where it is read)."""

    def check(value: Any, checked: Mapping[str, Any]) -> float | Schedule:
        if not callable(value):
            check_number(name, value, low=0.0, high=high)
        return value

    return check


def check_layer(name: str) -> Callable[[Any, Mapping[str, Any]], str | nn.Module | None]:
    def check(layer: Any, checked: Mapping[str, Any]) -> str | nn.Module | None:
        if layer is not None and not isinstance(layer, (str, nn.Module)):
            raise TypeError(f"{name} must be a submodule name or an nn.Module, got {layer!r}")
        if name == "teacher_layer":
            check_layers(checked["student_layer"], layer)
        return layer

    return check


def check_projector(projector: Any, checked: Mapping[str, Any]) -> Any:
    if not (projector is None or projector is True or callable(projector)):
        raise TypeError(f"rep_align_projector must be None, True or a module/callable, got {projector!r}")
    return projector


def check_obs_keys(keys: Any, checked: Mapping[str, Any]) -> ObsKeys:
    if keys is None or (isinstance(keys, str) and keys):
        return keys
    if isinstance(keys, (list, tuple)) and keys and all(isinstance(key, str) and key for key in keys):
        return keys
    raise ValueError(f"teacher_obs_keys must be None, a key or a non-empty list of keys (strings), got {keys!r}")


def check_vec_normalize(value: Any, checked: Mapping[str, Any]) -> VecNormalize | str | os.PathLike | None:
    if value is not None and not isinstance(value, (VecNormalize, str, os.PathLike)):
        raise TypeError(f"teacher_vec_normalize must be None, a VecNormalize or the path of its .pkl, got {value!r}")
    return value


def check_algo(algo: Any, checked: Mapping[str, Any]) -> str | type[BaseAlgorithm] | None:
    if algo is not None and not isinstance(algo, str) and not (isinstance(algo, type) and issubclass(algo, BaseAlgorithm)):
        raise TypeError(f"teacher_algo must be None, an algorithm's name ('ppo', 'sac', ...) or its class, got {algo!r}")
    return algo


def one_key_or_list(keys: list[str] | None) -> ObsKeys:
    """``--teacher-obs-keys``: one key as itself, several as a list."""
    return keys[0] if keys is not None and len(keys) == 1 else keys


@dataclass(frozen=True)
class DistillOptions:
    """
    Every option of DAgger distillation, in one typed, frozen object, checked when it is made (a ``ValueError`` or
    ``TypeError`` naming the option).

    :class:`~sb3_xppo.dagger_distill.DaggerDistiller` and :class:`~sb3_xppo.dagger_distill.DaggerCallback` take
    them as plain keywords, ``DaggerCallback(teacher, loss_fn=kl_loss)``, or as this object,
    ``DaggerCallback(teacher, options=DistillOptions(loss_fn=kl_loss))``; a plain keyword overrides the object's
    field, and a class refuses a keyword it does not read (``TypeError``). One object may serve all of them: each
    reads its own fields (below, "read by"). ``python -m sb3_xppo.distill`` builds one from its flags.
    """

    loss_fn: Objective = option(
        nll_loss,
        "objective per head, ``loss_fn(student, teacher, action) -> elementwise loss``: "
        ":func:`~sb3_xppo.dagger_distill.nll_loss` (default), :func:`~sb3_xppo.dagger_distill.kl_loss`, "
        ":func:`~sb3_xppo.dagger_distill.mse_loss` or your own",
        plain(check_callable, "loss_fn"),
        **readers(
            DISTILLER,
            CALLBACK,
            COMMAND,
            flag=Flag(
                "distillation objective",
                name="--loss",
                type=str,
                to_option=LOSSES.__getitem__,
                default="nll",
                choices=tuple(sorted(LOSSES)),
            ),
        ),
    )
    teacher_sample: bool = option(
        False,
        "label with a sample of the teacher instead of its mode/mean",
        plain(check_switch, "teacher_sample"),
        **readers(DISTILLER, CALLBACK),
    )
    entropy_weight: float = option(
        0.0,
        "weight of the student's entropy bonus (subtracted from the loss)",
        plain(check_number, "entropy_weight"),
        **readers(DISTILLER, CALLBACK),
    )
    student_layer: str | nn.Module | None = option(
        None,
        "representation alignment (REPA, Yu et al. 2024, https://arxiv.org/abs/2410.06940): the student's layer whose "
        "output is aligned, a submodule name of the student's policy (an ``nn.Module``) or the module itself",
        check_layer("student_layer"),
        **readers(DISTILLER, CALLBACK),
    )
    teacher_layer: str | nn.Module | None = option(
        None,
        "the teacher's layer it is aligned with, a name or a module (both layers or neither)",
        check_layer("teacher_layer"),
        **readers(DISTILLER, CALLBACK),
    )
    rep_align_weight: float = option(
        1.0,
        "weight of the alignment loss (>= 0)",
        plain(check_number, "rep_align_weight", low=0.0),
        **readers(DISTILLER, CALLBACK),
    )
    rep_align_projector: bool | nn.Module | Callable | None = option(
        None,
        "maps the student's features to the teacher's width: None (identity; the widths must match), True (a linear "
        "layer, created at the first call and trained with the student) or a module",
        check_projector,
        **readers(DISTILLER, CALLBACK),
    )
    rep_align_loss_fn: Callable = option(
        cosine_alignment_loss,
        "``(student_features, teacher_features) -> (b)`` loss, ``1 - cosine`` by default",
        plain(check_callable, "rep_align_loss_fn"),
        **readers(DISTILLER, CALLBACK),
    )
    beta: float | Schedule = option(
        0.0,
        "probability of executing the teacher's label instead of the student's action (DAgger's mixture policy; 0 "
        "rolls out the student alone): a number in [0, 1], or for ``DaggerCallback`` a schedule of "
        "``progress_remaining``",
        number_or_schedule("beta", high=1.0),
        **readers(DISTILLER, CALLBACK, COMMAND, flag=Flag("probability of executing the teacher's action", type=float)),
    )
    batch_size: int | None = option(
        None,
        "minibatch size of the fits (None: the student model's ``batch_size`` where it has one, else 64; a loss-hook "
        "student's distillation minibatches take the RL minibatch's size)",
        plain(check_size, "batch_size", optional=True),
        **readers(DISTILLER, CALLBACK, COMMAND, flag=Flag("minibatch size", type=int, default=64)),
    )
    buffer_size: int | None = option(
        None,
        "the aggregated dataset keeps at most this many states, the oldest dropped first (None: 100 000 for "
        "``DaggerDistiller`` and the command, 50 000 for ``DaggerCallback``); ``DaggerDistiller`` also takes it by its "
        "old name, ``max_dataset_size``",
        plain(check_size, "buffer_size", optional=True),
        **readers(DISTILLER, CALLBACK, COMMAND, flag=Flag("size of the aggregated dataset", type=int, default=100_000)),
    )
    pretrain_steps: int = option(
        0,
        "vector steps of the teacher's behaviour-cloning warm-up before DAgger or RL starts (0: none; "
        "``DaggerDistiller.pretrain(steps)`` takes them per call)",
        plain(check_count, "pretrain_steps", low=0),
        **readers(
            CALLBACK,
            COMMAND,
            flag=Flag(
                "vector steps of a behaviour-cloning warm-up before DAgger: the teacher acts, then one fit of --epochs "
                "passes (not counted in --timesteps)",
                type=int,
            ),
        ),
    )
    weight: float | Schedule = option(
        1.0,
        "weight of the distillation loss: a number >= 0 or a schedule of ``progress_remaining`` (1 -> 0), e.g. "
        "``lambda p: p`` to decay to pure RL",
        number_or_schedule("weight"),
        **readers(CALLBACK),
    )
    rl_coef: float = option(
        1.0,
        "weight of the RL loss (loss-hook students only; 0 is pure DAgger)",
        plain(check_number, "rl_coef", low=0.0),
        **readers(CALLBACK),
    )
    gradient_steps: int | None = option(
        None,
        "distillation steps per round (None: as many minibatches as ``n_epochs`` passes over the states collected "
        "since the last round would take; the model's ``n_epochs``, else 10)",
        plain(check_size, "gradient_steps", optional=True),
        **readers(CALLBACK),
    )
    gradient_surgery: bool = option(
        False,
        "loss-hook students only: the distillation loss's gradient is projected off the RL loss's where the two "
        "conflict, then added (PCGrad, Yu et al. 2020, Gradient Surgery for Multi-Task Learning, arXiv:2001.06782; "
        ":func:`~sb3_xppo.functional.pcgrad_auxiliary`), through the student's ``register_auxiliary_loss_hook``: the "
        "RL gradient is kept whole. A stock SB3 student is refused (``ValueError``): its distillation steps are taken "
        "apart from its RL updates, so no RL gradient shares them",
        plain(check_switch, "gradient_surgery"),
        **readers(CALLBACK),
    )
    teacher_obs_keys: ObsKeys = option(
        None,
        "keys of the (full) Dict observation the teacher reads (default: its own observation keys)",
        check_obs_keys,
        **readers(
            CALLBACK,
            COMMAND,
            flag=Flag("keys of a Dict observation the teacher reads", type=str, to_option=one_key_or_list, nargs="+"),
        ),
    )
    teacher_vec_normalize: VecNormalize | str | os.PathLike | None = option(
        None,
        "the teacher's observation statistics, a ``VecNormalize`` (a frozen snapshot is taken) or the path of its "
        "``.pkl`` (rl-zoo3 saves it as ``<log dir>/<env id>/vecnormalize.pkl``); None: the teacher reads raw "
        "observations",
        check_vec_normalize,
        **readers(
            CALLBACK,
            COMMAND,
            flag=Flag(
                "the teacher's VecNormalize statistics (.pkl); default: rl-zoo3's <teacher dir>/<env>/vecnormalize.pkl "
                "when its config says normalize",
                type=str,
            ),
        ),
    )
    teacher_algo: str | type[BaseAlgorithm] | None = option(
        None,
        "algorithm of a teacher checkpoint (default: inferred)",
        check_algo,
        **readers(CALLBACK, COMMAND, flag=Flag("algorithm of the teacher checkpoint (default: inferred)", type=str)),
    )
    trust_code: bool = option(
        False,
        "load a teacher checkpoint and its ``.pkl`` statistics as SB3 does, running their code (default: no code from "
        "the files runs, docs/guide/security.md)",
        plain(check_switch, "trust_code"),
        **readers(
            CALLBACK,
            COMMAND,
            flag=Flag(
                "load the checkpoints and .pkl statistics as SB3 does, running their pickled code (only for files you "
                "made or trust); by default no code from a file runs"
            ),
        ),
    )

    def __post_init__(self) -> None:
        # each check runs once, here; the canonical values replace the given ones
        for name, value in check_declared(self).items():
            object.__setattr__(self, name, value)

    @classmethod
    def read_by(cls, reader: str) -> tuple[str, ...]:
        """:return: the names of the options ``reader`` (:data:`DISTILLER`, :data:`CALLBACK`, :data:`COMMAND`) reads"""
        return tuple(f.name for f in fields(cls) if reader in f.metadata["readers"])

    @classmethod
    def for_reader(cls, reader: str, options: DistillOptions | None, keywords: Mapping[str, Any]) -> DistillOptions:
        """
        The options of a constructor call: ``options``' fields, overridden by ``keywords``.

        :param reader: the class (:data:`DISTILLER` or :data:`CALLBACK`), for the errors
        :param options: the call's ``options`` (None: the defaults)
        :param keywords: the call's option keywords
        :return: the options, checked (``options`` itself when no keyword overrides it: it was checked when made)
        :raises TypeError: for ``options`` that is no ``DistillOptions``, an unknown keyword, or an option of another
            reader
        """
        if options is not None and not isinstance(options, DistillOptions):
            raise TypeError(f"options must be a DistillOptions, got {options!r}")
        read = cls.read_by(reader)
        for name in keywords:
            if name not in read:
                owners = next((f.metadata["readers"] for f in fields(cls) if f.name == name), None)
                if owners is None:
                    raise TypeError(f"{reader}() got an unexpected keyword argument {name!r}")
                raise TypeError(f"{name} is an option of {', '.join(owners)}, not of {reader}")
        if not keywords:
            return options if options is not None else cls()
        return replace(options, **keywords) if options is not None else cls(**keywords)


document_options(DistillOptions)


def reader_signature(init: Callable[..., Any], reader: str) -> inspect.Signature:
    """
    A constructor's signature as ``help()`` and ``inspect`` show it: its own parameters, ``**keywords`` replaced by
    the options ``reader`` reads, keyword-only, with their types and defaults.

    :param init: the constructor (its options come in ``**keywords``)
    :param reader: :data:`DISTILLER` or :data:`CALLBACK`
    :return: the signature
    """
    signature = inspect.signature(init)
    own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    declared = {f.name: f for f in fields(DistillOptions)}
    options = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=declared[name].default, annotation=declared[name].type)
        for name in DistillOptions.read_by(reader)
    ]
    return signature.replace(parameters=[*own, *options])


#: the markers of the generated region (:func:`keywords_region`), which follows them at the end of this module
KEYWORDS_START = "# --- generated by python tests/test_dagger_options.py: the options as keywords, for mypy and IDEs ---"
KEYWORDS_END = "# --- end of the generated region ---"
#: the TypedDict of each class's option keywords, with the keywords it takes besides the options
KEYWORDS_CLASSES = {DISTILLER: ("DistillerKeywords", {"max_dataset_size": "int | None"}), CALLBACK: ("CallbackKeywords", {})}


def keywords_region() -> str:
    """
    The source of :class:`DistillerKeywords` and :class:`CallbackKeywords`, the types of the constructors'
    ``**keywords`` (``Unpack``): the options each class reads, as :class:`DistillOptions` declares them (those both
    read in :class:`SharedKeywords`), so that mypy refuses an unknown keyword or a wrong type and IDEs complete them.
    ``python tests/test_dagger_options.py`` rewrites it; ``tests/test_dagger_options.py`` fails when it is stale.
    """
    declared = {f.name: f.type for f in fields(DistillOptions)}
    shared = [name for name in DistillOptions.read_by(DISTILLER) if name in DistillOptions.read_by(CALLBACK)]
    blocks: list[tuple[str, str, str, list[str], dict[str, str]]] = [
        ("SharedKeywords", "TypedDict, total=False", "DaggerDistiller and DaggerCallback", shared, {})
    ]
    for reader, (name, extra) in KEYWORDS_CLASSES.items():
        own = [option for option in DistillOptions.read_by(reader) if option not in shared]
        blocks.append((name, "SharedKeywords, total=False", reader, own, extra))
    sources = []
    for name, bases, readers_, options, extra in blocks:
        lines = [f"class {name}({bases}):", f'    """Plain option keywords of {readers_}."""', ""]
        lines += [f"    {option}: {declared[option]}" for option in options] + [f"    {k}: {t}" for k, t in extra.items()]
        sources.append("\n".join(lines))
    return "\n".join([KEYWORDS_START, "\n\n\n".join(sources), "", "", KEYWORDS_END])  # spaced as ruff formats it


def rewrite_keywords_region(text: str) -> str:
    """:return: ``text`` (this module's source) with its generated region as :func:`keywords_region` makes it now"""
    start = text.rindex(KEYWORDS_START)
    end = text.index(KEYWORDS_END, start) + len(KEYWORDS_END)
    return text[:start] + keywords_region() + text[end:]


# --- generated by python tests/test_dagger_options.py: the options as keywords, for mypy and IDEs ---
class SharedKeywords(TypedDict, total=False):
    """Plain option keywords of DaggerDistiller and DaggerCallback."""

    loss_fn: Objective
    teacher_sample: bool
    entropy_weight: float
    student_layer: str | nn.Module | None
    teacher_layer: str | nn.Module | None
    rep_align_weight: float
    rep_align_projector: bool | nn.Module | Callable | None
    rep_align_loss_fn: Callable
    beta: float | Schedule
    batch_size: int | None
    buffer_size: int | None


class DistillerKeywords(SharedKeywords, total=False):
    """Plain option keywords of DaggerDistiller."""

    max_dataset_size: int | None


class CallbackKeywords(SharedKeywords, total=False):
    """Plain option keywords of DaggerCallback."""

    pretrain_steps: int
    weight: float | Schedule
    rl_coef: float
    gradient_steps: int | None
    gradient_surgery: bool
    teacher_obs_keys: ObsKeys
    teacher_vec_normalize: VecNormalize | str | os.PathLike | None
    teacher_algo: str | type[BaseAlgorithm] | None
    trust_code: bool


# --- end of the generated region ---
