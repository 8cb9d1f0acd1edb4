"""The speed benchmark's breakdown (``benchmarks/speed.py``): exclusive time per piece of ``learn()``, and the
instrument that times those pieces on a model without changing library code."""

from __future__ import annotations

import contextlib
import functools
import time
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

import torch as th
from stable_baselines3 import PPO

from sb3_xppo import XPPO
from sb3_xppo.core.fast_paths import FlatAdam

#: The pieces of the breakdown, in plot order, and their labels
CATEGORIES: dict[str, str] = {
    "env": "env step",
    "policy": "policy forward (collection)",
    "buffer_add": "buffer writes",
    "collect_other": "collection other",
    "gae": "GAE",
    "sample": "minibatch sampling",
    "forward": "minibatch forward",
    "backward": "backward",
    "zero_grad": "zero_grad",
    "optimizer": "optimizer step",
    "clip": "gradient clipping",
    "train_other": "train other",
    "learn_other": "learn other",
}
ALGOS: dict[str, type[PPO]] = {"PPO": PPO, "XPPO": XPPO}
ENV_ONLY = "env only"
#: Clocks of the breakdown (``--clock``)
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


class Profiler:
    """
    Exclusive time per named piece: a timed call nested in another is subtracted from its parent, so the pieces
    of one run add up to the time spent inside them. A call directly nested in a call of the same piece (e.g.
    XPPO's fast optimizer step falling back to torch's) adds its time but is not counted as a call again.

    :param clock: the clock, seconds (a fake one in tests)
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        # One [time of nested timed calls] cell per open timed call, and the piece it counts for
        self._stack: list[list[float]] = []
        self._names: list[str] = []

    def _enter(self, name: str) -> tuple[list[float], float]:
        cell = [0.0]
        self._stack.append(cell)
        self._names.append(name)
        return cell, self.clock()

    def _exit(self, name: str, cell: list[float], start: float) -> None:
        elapsed = self.clock() - start
        self._stack.pop()
        self._names.pop()
        self.seconds[name] += elapsed - cell[0]
        if not self._names or self._names[-1] != name:
            self.calls[name] += 1
        if self._stack:
            self._stack[-1][0] += elapsed

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """
        ``fn``, timed under ``name``.

        :param name: the piece the call's exclusive time counts for
        :param fn: the function or bound method
        """

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            cell, start = self._enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit(name, cell, start)

        return timed

    def wrap_generator(self, name: str, fn: Callable[..., Iterable[Any]]) -> Callable[..., Generator[Any, None, None]]:
        """
        A generator function whose every ``next()`` on ``fn``'s result is timed under ``name`` (the consumer's work
        between two items is not).

        :param name: the piece the item production counts for
        :param fn: a function returning an iterable (e.g. the generator function ``RolloutBuffer.get``)
        """

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Generator[Any, None, None]:
            iterator = iter(self.wrap(name, fn)(*args, **kwargs))
            while True:
                cell, start = self._enter(name)
                try:
                    item = next(iterator)
                except StopIteration:
                    return
                finally:
                    self._exit(name, cell, start)
                yield item

        return timed


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    """Set ``obj.name = value`` for the block; an instance attribute is removed again, a module's is restored."""
    had_own = name in vars(obj)
    old = vars(obj)[name] if had_own else None
    setattr(obj, name, value)
    try:
        yield
    finally:
        if had_own:
            setattr(obj, name, old)
        else:
            delattr(obj, name)


@contextlib.contextmanager
def instrument(model: PPO, profiler: Profiler) -> Iterator[None]:
    """
    Time the pieces of ``model.learn()`` (see :data:`CATEGORIES`) with ``profiler`` for the block, without
    changing library code: the model's own objects get timed instance attributes, and the optimizer class's
    ``zero_grad`` / ``step``, :class:`~sb3_xppo.core.fast_paths.FlatAdam`'s methods, ``torch.autograd.backward`` and
    ``torch.nn.utils.clip_grad_norm_`` are replaced until the block ends.

    :param model: a PPO or XPPO model, built; its env is the one ``learn()`` steps
    :param profiler: receives the timings
    """
    env, policy, buffer = model.env, model.policy, model.rollout_buffer
    assert env is not None
    targets: list[tuple[Any, str, str]] = [
        (model, "collect_rollouts", "collect_other"),
        (model, "train", "train_other"),
        (env, "step_async", "env"),
        (env, "step_wait", "env"),
        (policy, "forward", "policy"),
        (policy, "predict_values", "policy"),
        (policy, "reset_noise", "policy"),
        (policy, "evaluate_actions", "forward"),
        (buffer, "add", "buffer_add"),
        (buffer, "compute_returns_and_advantage", "gae"),
        # On the optimizer's class, not the instance: XPPO's exact fast step (FlatAdam) only takes an optimizer whose
        # step nobody wrapped; it is timed under the same names (its nested torch step, on a first step, counts once)
        (type(policy.optimizer), "zero_grad", "zero_grad"),
        (type(policy.optimizer), "step", "optimizer"),
        (FlatAdam, "zero_grad", "zero_grad"),
        (FlatAdam, "step", "optimizer"),
        (FlatAdam, "clip_grad_norm", "clip"),
        (th.autograd, "backward", "backward"),
        (th.nn.utils, "clip_grad_norm_", "clip"),
    ]
    with contextlib.ExitStack() as stack:
        for obj, name, category in targets:
            stack.enter_context(patched(obj, name, profiler.wrap(category, getattr(obj, name))))
        stack.enter_context(patched(buffer, "get", profiler.wrap_generator("sample", buffer.get)))
        yield
