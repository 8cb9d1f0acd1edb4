"""Old import path of XPPO's rollout buffers, kept because saved models refer to it (``rollout_buffer_class``)."""

from sb3_xppo.common.buffers import XPPODictRolloutBuffer, XPPORolloutBuffer, XPPORolloutBufferMixin, rollout_gae

__all__ = ["XPPODictRolloutBuffer", "XPPORolloutBuffer", "XPPORolloutBufferMixin", "rollout_gae"]
