"""``python -m engine.cli``: the same as the ``turnlog`` command."""

from . import main

main()
