"""Shared helpers for replay tests: a CLI group with replay's commands, recording helpers."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner

from turnlog.engine.cli import cli as engine_cli
from turnlog.engine.model.conversation import Conversation
from turnlog.journal import Journal
from turnlog.replay.cli import COMMANDS


@click.group()
def turnlog() -> None:
    """The engine's commands plus replay's (the package is not installed in tests)."""


for _command in engine_cli.commands.values():
    turnlog.add_command(_command)
for _command in COMMANDS:
    turnlog.add_command(_command)


def invoke(*args: str, db=None):
    """Run ``turnlog ARGS`` in-process; returns click's Result."""
    argv = [*args, "--db", str(db)] if db is not None else list(args)
    return CliRunner().invoke(turnlog, argv, catch_exceptions=False)


def invoke_json(*args: str, db=None):
    result = invoke(*args, "--json", db=db)
    return result, json.loads(result.stdout) if result.stdout.strip() else None


def record(journal: Journal, events) -> str:
    """Write ``events`` (starting with conversation_started) as one conversation."""
    conv = Conversation.start(journal, events[0])
    if len(events) > 1:
        conv.append(*events[1:])
    return events[0].conversation_id
