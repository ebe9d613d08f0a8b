"""Deterministic replay, forks, provider swaps and diffs over a turnlog journal.

>>> from replay import fork, rebuild, diff      # doctest: +SKIP
"""

from .diff import ConversationDiff, TurnDiff, diff
from .errors import Divergence, ForkPointError, RecordingError, ReplayError
from .fork import fork
from .rebuild import rebuild

__all__ = [
    "ConversationDiff",
    "Divergence",
    "ForkPointError",
    "RecordingError",
    "ReplayError",
    "TurnDiff",
    "diff",
    "fork",
    "rebuild",
]
