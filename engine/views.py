"""SQL projections the engine adds to a journal (none yet; the audit views arrive here)."""

__all__ = ["EXTENSIONS"]

#: Journal schema extensions the engine registers when it opens a journal.
EXTENSIONS: tuple = ()
