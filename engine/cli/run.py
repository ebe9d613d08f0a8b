"""``turnlog demo``, ``turnlog run`` and ``turnlog resume``: running conversations (CLI.md)."""

from __future__ import annotations

import importlib
import json
from datetime import UTC, datetime
from typing import Any

import click

from engine.conversation import load_state
from engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from engine.errors import ConversationNotFound
from engine.loop import Loop, new_conversation_id
from engine.providers.scripted import ScriptedProvider
from engine.result import RunResult
from engine.retry import RetryPolicy
from engine.tools import ToolRegistry

from ._common import CLIError, db_option, emit, fail, journal_for, json_option, translate_errors

__all__ = ["demo", "resume", "run"]

_PROVIDERS = ("scripted", "anthropic", "openai", "openai-responses", "gemini")


def _tools(specs: tuple[str, ...]) -> ToolRegistry:
    registry = ToolRegistry()
    for spec in specs or ("demo",):
        if spec == "demo":
            for t in demo_tools():
                registry.register(t)
            continue
        module, _, attr = spec.partition(":")
        try:
            found: Any = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise CLIError(f"--tools {spec!r}: cannot import it ({exc}); use demo or MODULE:ATTR")
        # a Tool, a ToolRegistry, a list of tools, or a plain function (wrapped as a tool)
        items = found if isinstance(found, (ToolRegistry, list, tuple)) else [found]
        for item in items:
            registry.register(item)
    return registry


def _provider(name: str, model: str | None, script: str | None) -> Any:
    if name == "scripted":
        if script is None:
            raise CLIError("--provider scripted needs --script FILE (see CLI.md for its format)")
        return ScriptedProvider(script, model=model or "scripted")
    from engine.errors import AuthenticationError
    from engine.providers import get_provider

    if script is not None:
        raise CLIError("--script only applies to --provider scripted")
    try:
        return get_provider(name, model=model)
    except AuthenticationError as exc:  # a missing key is bad usage, not a failed run
        raise CLIError(f"--provider {name}: {exc}") from None


def _report(result: RunResult, as_json: bool) -> None:
    if as_json:
        emit(result.summary())
    else:
        click.echo(f"conversation {result.conversation_id}: {result.status} after "
                   f"{result.turn_count} turn(s), {result.usage.total_tokens} tokens")
        if result.final_content:
            click.echo(result.final_content)
        for line in (result.warning, result.error):
            if line:
                click.echo(line, err=True)
    if result.status in ("failed", "halted"):
        fail(1)


def _tool_options(fn: Any) -> Any:
    fn = click.option("--script", type=click.Path(dir_okay=False),
                      help="The scripted provider's script (JSON).")(fn)
    fn = click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True,
                      help="Retry transient provider errors (429, 5xx, timeouts) up to N times, "
                           "with backoff; every attempt is journaled.")(fn)
    return click.option("--tools", "tool_specs", multiple=True, metavar="demo|MODULE:ATTR",
                        help="Tools to offer (repeatable; default demo).")(fn)


@click.command(name="run")
@click.argument("prompt")
@click.option("--provider", type=click.Choice(_PROVIDERS), default="scripted", show_default=True)
@click.option("--model", help="The model (default: the provider's).")
@_tool_options
@click.option("--max-turns", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--mode", type=click.Choice(["chat", "pipeline"]), default="chat", show_default=True)
@click.option("--system", default="", help="The per-run system directive.")
@click.option("--id", "conversation_id", help="Name a new conversation, or continue a finished chat.")
@click.option("--single-turn", is_flag=True, help="Take one model turn, then stop.")
@db_option
@json_option
@translate_errors
def run(prompt: str, provider: str, model: str | None, script: str | None,
        tool_specs: tuple[str, ...], retries: int, max_turns: int, mode: str, system: str,
        conversation_id: str | None, single_turn: bool, db_path: str, as_json: bool) -> None:
    """Run a conversation from PROMPT; exit 1 if it failed or was halted.

    Example:

        turnlog run "Weather in Paris?" --script script.json --tools demo --json
    """
    tools = _tools(tool_specs)
    chosen = _provider(provider, model, script)
    with journal_for(db_path, must_exist=False) as journal:
        loop = Loop(journal, chosen, tools, model=model, retry=RetryPolicy.retries(retries))
        if conversation_id and journal.last_seq(conversation_id):
            result = loop.send(conversation_id, prompt, single_turn=single_turn)
        else:
            result = loop.start(prompt, conversation_id=conversation_id, model=model, mode=mode,
                                max_turns=max_turns, system=system, single_turn=single_turn)
    _report(result, as_json)


@click.command()
@click.argument("conversation_id")
@click.option("--provider", type=click.Choice(_PROVIDERS), help="Default: the recorded one.")
@click.option("--model", help="Default: the recorded one.")
@_tool_options
@db_option
@json_option
@translate_errors
def resume(conversation_id: str, provider: str | None, model: str | None, script: str | None,
           tool_specs: tuple[str, ...], retries: int, db_path: str, as_json: bool) -> None:
    """Finish a conversation a crash or kill left unfinished; tools with recorded results never re-run.

    Example:

        turnlog resume c-1a2b3c --script script.json --tools demo
    """
    tools = _tools(tool_specs)
    with journal_for(db_path) as journal:
        state = load_state(journal, conversation_id)
        if state.status != "active":
            from engine.result import result_of

            result = result_of(state)
        else:
            chosen = _provider(provider or state.provider, model, script)
            result = Loop(journal, chosen, tools, model=model,
                          retry=RetryPolicy.retries(retries)).resume(conversation_id)
    _report(result, as_json)


@click.command()
@db_option
@json_option
@translate_errors
def demo(db_path: str, as_json: bool) -> None:
    """Run the offline demo: several turns, a failing tool, a prevented duplicate.

    Example:

        turnlog demo --db demo.db && turnlog show <id> --db demo.db
    """
    fixed = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    with journal_for(db_path, must_exist=False) as journal:
        loop = Loop(journal, ScriptedProvider(DEMO_SCRIPT, model="scripted-demo"), demo_tools(),
                    clock=lambda: fixed)
        cid = f"demo-{new_conversation_id()[2:]}"
        result = loop.start(DEMO_PROMPT, conversation_id=cid, model="scripted-demo")
        events = list(journal.read(cid))
    if as_json:
        emit(result.summary())
        return
    click.echo(f"turnlog demo: conversation {cid} ({len(events)} events)\n")
    for e in events:
        click.echo(_timeline_line(e.seq, e.type, json.loads(e.payload)))
    click.echo(f"\nstatus: {result.status}, {result.turn_count} turns, "
               f"{result.usage.total_tokens} tokens\n")
    db = f" --db {db_path}" if db_path != "turnlog.db" else ""
    click.echo("Next, try:")
    for cmd in (f"turnlog show {cid}{db}", f"turnlog verify{db}", f"turnlog ls{db}",
                f"turnlog export {cid} --format markdown{db}", f"turnlog replay {cid}{db}"):
        click.echo(f"  {cmd}")


def _timeline_line(seq: int, kind: str, p: dict[str, Any]) -> str:
    if kind == "conversation_started":
        what = f"{p['provider']}/{p['model']}, tools: " + ", ".join(t["name"] for t in p.get("tools", []))
    elif kind == "user_message":
        what = "user: " + " ".join(x.get("text", "") for x in p["parts"])
    elif kind == "model_requested":
        what = f"turn {p['turn']} request"
    elif kind == "model_responded":
        texts = [x["text"] for x in p["parts"] if x["type"] == "text"]
        calls = [f"{x['name']}({json.dumps(x.get('arguments', {}))})" for x in p["parts"]
                 if x["type"] == "tool_call"]
        what = f"turn {p['turn']} model: " + " ".join(texts) + (
            ("  -> " + ", ".join(calls)) if calls else "")
    elif kind == "tool_started":
        what = f"{p['name']} started"
    elif kind == "tool_completed":
        what = f"{p['name']} {'ok' if p['success'] else 'FAILED'}: {p['content'].splitlines()[-1][:90]}"
    elif kind == "tool_call_rejected":
        what = f"{p['name']} REFUSED ({p['reason']}): {p['content'][:90]}"
    elif kind == "conversation_completed":
        what = "completed"
    else:
        what = json.dumps({k: v for k, v in p.items() if k != "type"})[:100]
    return f"{seq:>4}  {kind:<22} {what}"


COMMANDS = [demo, run, resume]
