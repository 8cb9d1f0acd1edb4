"""
The model's setup (``_setup_model``) of every XPPO algorithm: its options checked after ``load()``, a data-parallel
model's process group joined, the multi-critic policy and buffer, the value head (HL-Gauss, PopArt), then the
parent's setup. The constructor is :mod:`sb3_xppo.core.setup`'s.
"""

import warnings
from typing import Any, ClassVar

from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer

from sb3_xppo.common.keywords import check_normalize_advantage
from sb3_xppo.common.loss_registry import VALUE_LOSS_REGISTRY
from sb3_xppo.common.options import XPPOOptions
from sb3_xppo.common.policies import XPPOPolicyMixin
from sb3_xppo.common.schedules import as_clip_schedule, unwrap_clip_schedule
from sb3_xppo.common.value_norm import ValueNormalizer
from sb3_xppo.core.rollout import XPPORolloutMixin
from sb3_xppo.multi_critic.policies import MULTI_CRITIC_POLICIES, MultiCriticPolicyMixin


class ModelSetupMixin(XPPORolloutMixin):
    """``_setup_model``: what an XPPO model sets up beyond its parent, and in which order."""

    #: this algorithm's XPPO rollout buffers for (Box, Dict) observations, single and multi-critic (None: the parent's)
    xppo_buffer_classes: ClassVar[tuple[type[RolloutBuffer], type[RolloutBuffer]] | None] = None
    multi_critic_buffer_classes: ClassVar[tuple[type[RolloutBuffer], type[RolloutBuffer]] | None] = None
    #: the options this algorithm takes (a subclass of :class:`~sb3_xppo.common.options.XPPOOptions` adds its own)
    options_class: ClassVar[type[XPPOOptions]] = XPPOOptions

    # Set by the SB3 algorithm
    rollout_buffer: Any
    rollout_buffer_class: type[RolloutBuffer] | None
    rollout_buffer_kwargs: dict[str, Any]
    policy_class: type
    policy_kwargs: dict[str, Any]
    observation_space: spaces.Space
    clip_range: Any
    clip_range_vf: Any
    normalize_advantage: Any
    learning_rate: Any
    # Set by the constructor
    _checked_options: XPPOOptions | None

    def _setup_model(self) -> None:
        self._setup_options()
        if self.options.distributed:
            self._data_parallel = self._data_parallel.join(self)
        if self.options.reward_groups is not None:
            self._setup_multi_critic()
        if self.rollout_buffer_class is None and self.xppo_buffer_classes is not None:
            box, dict_obs = self.xppo_buffer_classes
            self.rollout_buffer_class = dict_obs if isinstance(self.observation_space, spaces.Dict) else box
        self._setup_value_head()
        # The parent wraps the clip ranges in FloatSchedule, which would turn a (low, high) pair into a float
        self.clip_range = as_clip_schedule(self.clip_range)
        super()._setup_model()  # type: ignore[misc]
        self.clip_range = unwrap_clip_schedule(self.clip_range)
        if self.options.group_gradients is not None and not getattr(self.rollout_buffer, "keeps_group_terms", False):
            raise ValueError(
                f"group_gradients={self.options.group_gradients!r} needs a multi-critic rollout buffer that keeps each "
                "group's term of the advantages (sb3_xppo.multi_critic.MultiCriticBufferMixin, group_terms=True), got "
                f"{type(self.rollout_buffer).__name__}"
            )
        if self.options.normalize_values and isinstance(self.policy, XPPOPolicyMixin):
            # PopArt: the head predicts normalized values, the policy still returns values in return units
            self.policy.attach_value_normalizer()
        elif self.options.normalize_values and not isinstance(self.policy.value_net, ValueNormalizer):
            # a policy of the user's own: its linear head, one output per critic
            groups = self.options.groups
            n_outputs = len(groups) if groups is not None else 1
            self.policy.value_net = ValueNormalizer(self.policy.value_net, n_outputs)
        self._data_parallel.check_agreement(self)

    def _setup_options(self) -> None:
        """
        Check the options of a model set up after its constructor, e.g. by ``load()``, which sets the saved
        ``options`` unchecked, and options given as its keywords (``load(path, fast_paths=False)``) or saved by a
        model from before the options object (one attribute each) as attributes; those override the saved object's
        fields. A PPO checkpoint has none of them: the defaults, ``value_loss`` in PPO's meaning of its
        ``clip_range_vf``.
        """
        attributes = {name: vars(self).pop(name) for name in self.options_class.names() if name in vars(self)}
        # A PPO checkpoint stores normalize_advantage as a bool
        self.normalize_advantage = check_normalize_advantage(self.normalize_advantage)
        if self.options is self._checked_options and not attributes:
            return
        options = self.options_class.from_keywords(self.options, attributes)
        self.options = self._checked_options = options.checked(self.clip_range, self.clip_range_vf)

    def _setup_value_head(self) -> None:
        """
        A value loss with a categorical head (``value_loss='hl_gauss'``): the policy gets a classification critic
        (``policy_kwargs['hl_gauss']``).
        """
        wants_bins = "hl_gauss" in self.policy_kwargs
        name = self.options.value_loss
        if name is None or not VALUE_LOSS_REGISTRY[name].categorical_head:
            if wants_bins:
                raise ValueError(
                    "policy_kwargs['hl_gauss'] configures the classification critic of value_loss='hl_gauss', "
                    f"but value_loss={self.options.value_loss!r}"
                )
            return
        if not issubclass(self.policy_class, XPPOPolicyMixin):
            raise ValueError(
                "value_loss='hl_gauss' needs one of XPPO's policies (a categorical value head): 'MlpPolicy', "
                "'CnnPolicy', 'MultiInputPolicy' (LSTM: 'MlpLstmPolicy', ...) or a subclass of "
                f"sb3_xppo.common.policies.XPPOPolicyMixin, got {self.policy_class.__name__}"
            )
        bins = dict(self.policy_kwargs.get("hl_gauss") or {})
        self.policy_kwargs = {**self.policy_kwargs, "hl_gauss": bins}
        env = getattr(self, "env", None)
        vec_normalize = self.get_vec_normalize_env() if env is not None else None  # type: ignore[attr-defined]
        normalized = self.options.normalize_values or (vec_normalize is not None and vec_normalize.norm_reward)
        if not normalized and not {"v_min", "v_max"} & set(bins):
            warnings.warn(
                "value_loss='hl_gauss' without normalize_values=True or a reward-normalizing VecNormalize: the "
                "classification critic's default support [-10, 10] is then in the environment's return units, and "
                "returns beyond it are clamped; pass normalize_values=True or policy_kwargs=dict(hl_gauss=dict(v_min=..., "
                "v_max=...))",
                stacklevel=3,
            )

    def _setup_multi_critic(self) -> None:
        """One critic per reward group: the multi-critic policy and buffer, told the number of groups."""
        options = self.options
        groups = options.groups
        assert groups is not None
        self.policy_class = MULTI_CRITIC_POLICIES.get(self.policy_class, self.policy_class)
        if not issubclass(self.policy_class, MultiCriticPolicyMixin):
            raise ValueError(
                "reward_groups needs a multi-critic policy: 'MlpPolicy', 'CnnPolicy', 'MultiInputPolicy' or a subclass of "
                f"sb3_xppo.multi_critic.MultiCriticPolicyMixin, got {self.policy_class.__name__}"
            )
        self.policy_kwargs = {**self.policy_kwargs, "n_groups": len(groups)}
        if self.rollout_buffer_class is None and self.multi_critic_buffer_classes is not None:
            box, dict_obs = self.multi_critic_buffer_classes
            self.rollout_buffer_class = dict_obs if isinstance(self.observation_space, spaces.Dict) else box
        self.rollout_buffer_kwargs = {
            **self.rollout_buffer_kwargs,
            "n_groups": len(groups),
            "group_weights": options.group_weights,
            "group_reduce": options.group_reduce,
            "normalize_groups": options.normalize_groups,
        }
        # with group_gradients the minibatches' advantages are each group's term of the combined ones, (batch, G)
        self.rollout_buffer_kwargs.pop("group_terms", None)  # (a loaded model's, whose option load() may change)
        if options.group_gradients == "pcgrad":
            self.rollout_buffer_kwargs["group_terms"] = True
