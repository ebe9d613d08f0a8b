"""Deterministic replay, forks, provider swaps and diffs over a turnlog journal.

The engine never imports this package; it builds on ``engine`` and ``journal``::

    from turnlog.replay import diff, fork, rebuild, replay, replay_all, swap

- ``rebuild(journal, id, at_seq)``: state at any seq, forks included, nothing copied;
- ``fork(journal, id, at_seq, ...)``: a new conversation continuing another;
- ``replay(journal, id)`` / ``replay_all(journal)``: re-run the loop against
  the recording; a ``Divergence`` names the first differing seq;
- ``swap(journal, id, provider, ...)``: re-run the inputs against another provider;
- ``diff(journal, a, b)``: two conversations side by side, turn by turn.

Testing support for users lives in ``replay.testing``.
"""

from .deterministic import ReplayResult, replay
from .diff import ConversationDiff, TurnDiff, diff
from .errors import Divergence, ForkPointError, RecordingError, ReplayError
from .fork import fork
from .rebuild import rebuild
from .reports import ReplayReport, replay_all
from .swap import SwapResult, swap

__all__ = [
    "ConversationDiff",
    "Divergence",
    "ForkPointError",
    "RecordingError",
    "ReplayError",
    "ReplayReport",
    "ReplayResult",
    "SwapResult",
    "TurnDiff",
    "diff",
    "fork",
    "rebuild",
    "replay",
    "replay_all",
    "swap",
]
