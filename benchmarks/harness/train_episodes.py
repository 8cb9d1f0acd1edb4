"""
The returns of a run's training episodes (:class:`TrainEpisodes`): the stochastic policy's episodes as the training
envs' ``Monitor`` ends them, each with the env step it ended at. The SPO paper's metric (its curves are these
returns over training), beside the deterministic evaluations every run records. A run's record keeps them per
rollout (their mean and count), so that a 5M-step run's record stays small.
"""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

#: The decimals a run's record keeps of each return (``Monitor`` keeps 6)
DECIMALS = 2


class TrainEpisodes(BaseCallback):
    """
    Each training episode's return (``info["episode"]["r"]``, the raw reward's sum: ``Monitor`` sits under
    ``VecNormalize``) and the model's ``num_timesteps`` at the step that ended it. Reads only: a run trains the same
    with it. Resumable: a run that spans sessions keeps the episodes of the earlier ones. On ranks, a rank's own envs.
    """

    def __init__(self) -> None:
        super().__init__()
        #: ``num_timesteps`` at each episode's end, in the order they ended
        self.steps: list[int] = []
        #: their returns
        self.returns: list[float] = []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.steps.append(int(self.num_timesteps))
                self.returns.append(float(info["episode"]["r"]))
        return True

    def resumable_state(self) -> dict[str, Any]:
        return {"steps": self.steps, "returns": self.returns}

    def restore_state(self, state: dict[str, Any]) -> None:
        self.steps, self.returns = [int(s) for s in state["steps"]], [float(r) for r in state["returns"]]

    def record(self, rollout: int) -> dict[str, list[Any]]:
        """
        :param rollout: the env steps of one rollout (``n_steps * n_envs``)
        :return: per rollout in which training episodes ended: ``steps``, the env step at its end; ``returns``, the
            mean return of those episodes (to :data:`DECIMALS`); ``episodes``, how many
        """
        buckets: dict[int, list[float]] = {}
        for step, episode_return in zip(self.steps, self.returns, strict=True):
            buckets.setdefault(-(-step // rollout) * rollout, []).append(episode_return)
        return {
            "steps": list(buckets),
            "returns": [round(sum(returns) / len(returns), DECIMALS) for returns in buckets.values()],
            "episodes": [len(returns) for returns in buckets.values()],
        }
