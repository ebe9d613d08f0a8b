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

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    ".deterministic": ("ReplayResult", "replay"),
    ".diff": ("ConversationDiff", "TurnDiff", "diff"),
    ".errors": ("Divergence", "ForkPointError", "RecordingError", "ReplayError"),
    ".fork": ("fork",),
    ".rebuild": ("rebuild",),
    ".reports": ("ReplayReport", "replay_all"),
    ".swap": ("SwapResult", "swap"),
}

#: ``turnlog.replay(journal, id)`` is ``turnlog.replay.replay(journal, id)``, as it was when
#: ``turnlog.replay`` was only the function.
__all__ = export(__name__, _EXPORTS, call="replay")
