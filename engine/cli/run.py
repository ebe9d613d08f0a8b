"""``turnlog demo``, ``turnlog run`` and ``turnlog resume``: running conversations (docs/cli.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import click
from click.core import ParameterSource

from turnlog.engine.audit.erasure import refuse_erased
from turnlog.engine.tools.approvals import check_approve
from turnlog.engine.choices import PROVIDERS, make_provider, open_tools
from turnlog.engine.model.conversation import load_state
from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.loop import Loop, new_conversation_id
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.loop.result import RunResult, result_of
from turnlog.engine.loop.resume import record_interruption
from turnlog.engine.loop.retry import RetryPolicy
from turnlog.journal import JournalProtocol

from ._common import (
    CLIError,
    Interrupted,
    colour,
    command_hint,
    db_option,
    emit,
    fail,
    hint,
    journal_for,
    json_option,
    problem,
    run_options,
    translate_errors,
)
from ._timeline import timeline_of

__all__ = ["RUN_OPTIONS_KEY", "UNRECORDED", "StreamPrinter", "demo", "options_of",
           "recorded_run_options", "resume", "resume_hint", "run", "run_interruptible",
           "waiting_calls"]


def resume_hint(conversation_id: str, db_path: str, tool_specs: tuple[str, ...] = (),
                script: str | None = None, mcp: tuple[str, ...] = ()) -> str:
    """The command that continues ``conversation_id`` with the same tools and script."""
    return command_hint("resume", conversation_id, *run_options(
        {"tool_specs": tool_specs, "mcp": mcp, "script": script}), db_path=db_path)


#: The key of ``conversation_started.metadata`` under which ``run`` records the options
#: that continue it (``--tools`` and ``--script``), so that ``approve`` and ``show`` print a
#: complete ``resume`` command. ``--mcp`` is left out: a server's command line or URL
#: may carry a credential, and secrets never reach the journal.
RUN_OPTIONS_KEY = "turnlog.run_options"


def recorded_run_options(tool_specs: tuple[str, ...], script: str | None) -> dict[str, Any]:
    """The ``metadata`` a new conversation of ``run`` records (see ``RUN_OPTIONS_KEY``)."""
    options: dict[str, Any] = {"tool_specs": list(tool_specs)}
    if script is not None:
        options["script"] = os.path.abspath(script)
    return {RUN_OPTIONS_KEY: options}


#: Said after a ``resume`` hint for a conversation ``run`` did not start (nothing recorded).
UNRECORDED = " (it was not started by turnlog run: add the tools and script it ran with)"


def options_of(started: Any) -> dict[str, Any] | None:
    """What a conversation's ``run`` recorded to continue it (``None``: nothing recorded):
    ``started`` is its state or its ``conversation_started`` payload."""
    metadata = started.get("metadata") if isinstance(started, Mapping) else started.metadata
    options = (metadata or {}).get(RUN_OPTIONS_KEY)
    return options if isinstance(options, dict) else None


def run_interruptible(journal: JournalProtocol, conversation_id: str, go: Any,
                      continue_with: str) -> RunResult:
    """``go()``; on Ctrl-C record the interruption and exit 130 naming how to continue."""
    try:
        return go()
    except KeyboardInterrupt:
        recorded = record_interruption(journal, conversation_id, reason="sigint",
                                       message="interrupted by Ctrl-C")
        raise Interrupted(
            f"interrupted: conversation {conversation_id} stopped before its run finished"
            + (" (recorded in the journal)" if recorded else "")
            + f".\nContinue it with:\n  {continue_with}") from None


class StreamPrinter:
    """The ``--stream`` observer: prints text deltas as they arrive (stderr under ``--json``)."""

    def __init__(self, as_json: bool) -> None:
        self.err = as_json
        self.printed = False  # text went to stdout: the report leaves the final text out
        self._open = False

    def __call__(self, event: str, payload: dict[str, Any]) -> None:
        if event == "model_delta" and payload["kind"] == "text" and payload["text"]:
            click.echo(payload["text"], nl=False, err=self.err)
            self._open = True
            self.printed = self.printed or not self.err
        elif event in ("model_responded", "failed") and self._open:
            click.echo("", err=self.err)  # end the streamed line
            self._open = False


def _loop(journal: JournalProtocol, chosen: Any, tools: Any, model: str | None, retries: int,
          printer: StreamPrinter | None, approve: tuple[str, ...] = (),
          approve_reason: str | None = None, prices: Any = None) -> Loop:
    return Loop(journal, chosen, tools, model=model, retry=RetryPolicy.retries(retries),
                stream=printer is not None, observers=[printer] if printer else (),
                approve=approve, approve_reason=approve_reason, prices=prices)


def _check_reason(approve: tuple[str, ...], approve_reason: str | None) -> None:
    if approve_reason is not None and not approve:
        raise CLIError("--approve-reason says why the --approve tools' calls wait: name those "
                       "tools with --approve TOOL")


def waiting_calls(state: Any, call_ids: Iterable[str]) -> list[str]:
    """One line per call of ``state`` that waits for a decision: its id, tool, arguments
    and why it waits (the reason recorded with its approval request)."""
    lines, pending = [], {c.id: c for c in state.pending_calls}
    for call_id in call_ids:
        call, asked = pending.get(call_id), state.approvals.get(call_id)
        what = (f" {call.name}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})"
                if call is not None else "")
        why = f": {asked.reason}" if asked is not None and asked.reason else ""
        lines.append(f"  {call_id}{what}{why}")
    return lines


def _prices(path: str | None) -> Any:
    """The prices a run records its costs at: genai-prices under the ``--prices`` file."""
    from turnlog.engine.audit.prices import Prices  # the audit package is loaded only here

    return Prices.load(path)


def _report(result: RunResult, as_json: bool, printer: StreamPrinter | None = None,
            waiting: list[str] = ()) -> None:
    if as_json:
        emit(result.summary())
    else:
        click.echo(f"conversation {result.conversation_id}: "
                   f"{colour(result.status, result.status)} after "
                   f"{result.turn_count} turn(s), {result.usage.total_tokens} tokens")
        if result.final_content and not (printer and printer.printed):
            click.echo(result.final_content)
        for line in (result.warning, result.error):
            if line:
                click.echo(line, err=True)
        if result.awaiting_approval:
            cid = result.conversation_id
            click.echo("waiting for approval:\n" + "\n".join(waiting) + "\n"
                       f"Decide with:\n  {hint('approve', cid, '--all', '--yes', '--as', 'NAME')}"
                       f"\nthen continue it with:\n  {hint('resume', cid, run=_params())}")
    if result.status in ("failed", "halted"):
        fail(1)


def _waiting(journal: JournalProtocol, result: RunResult) -> list[str]:
    if not result.awaiting_approval:
        return []
    return waiting_calls(load_state(journal, result.conversation_id), result.awaiting_approval)


def _params() -> dict[str, Any]:
    return dict(click.get_current_context().params)


def _tool_names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple:
    """``--approve a,b --approve c`` as ``("a", "b", "c")``."""
    names = tuple(n.strip() for v in value for n in v.split(",") if n.strip())
    if value and not names:
        raise click.BadParameter("name at least one tool", ctx, param)
    return names


def _tool_options(fn: Any) -> Any:
    fn = click.option("--approve-reason", metavar="TEXT",
                      help="Why the --approve tools' calls wait: recorded with each approval "
                           "request and shown to whoever decides.")(fn)
    fn = click.option("--prices", "prices_file", type=click.Path(dir_okay=False),
                      help="A price table (TOML) over genai-prices' for the cost recorded "
                           "with each model response (see turnlog prices).")(fn)
    fn = click.option("--approve", "approve", multiple=True, metavar="TOOL[,TOOL]",
                      callback=_tool_names,
                      help="Calls of these tools wait for a person's decision (turnlog "
                           "approve) before they run; recorded with a new conversation.")(fn)
    fn = click.option("--stream", is_flag=True,
                      help="Stream the model's answers, printing text as it arrives (to stderr "
                           "with --json); the journal records the same events.")(fn)
    fn = click.option("--script", type=click.Path(dir_okay=False),
                      help="The scripted provider's script (JSON; see docs/cli.md).")(fn)
    fn = click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True,
                      help="Retry transient provider errors (429, 5xx, timeouts) up to N times, "
                           "with backoff; every attempt is journaled.")(fn)
    fn = click.option("--mcp", "mcp", multiple=True, metavar="'COMMAND ARGS'|URL",
                      help="Offer the tools of an MCP server (repeatable): a command line "
                           "(stdio) or an http(s) URL (streamable HTTP); needs the mcp extra.")(fn)
    return click.option("--tools", "tool_specs", multiple=True, metavar="demo|MODULE:ATTR|none",
                        help="Tools to offer the model (repeatable; default: none).")(fn)


_NEW_ONLY = ("max_turns", "mode", "system")


def _given(name: str) -> bool:
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT)


def _check_continuable(journal: JournalProtocol, cid: str, db_path: str, tool_specs: tuple[str, ...],
                       script: str | None, options: dict[str, Any],
                       mcp: tuple[str, ...] = ()) -> None:
    """Refuse, in plain words, what adding a message to conversation ``cid`` cannot do."""
    state = load_state(journal, cid)
    recorded = {"max_turns": state.max_turns, "mode": state.mode}
    ignored = [name for name in _NEW_ONLY
               if _given(name) and (name == "system" or options[name] != recorded[name])]
    if ignored:
        flags = ", ".join("--" + n.replace("_", "-") for n in ignored)
        raise CLIError(f"{flags}: conversation {cid} exists already (mode {state.mode}, "
                       f"max turns {state.max_turns}) and these set up a new conversation; "
                       "leave them out to continue it, or choose a new --id")
    if not state.finished:
        raise CLIError(f"conversation {cid} has an unfinished run, so it cannot take a new "
                       f"message yet. Finish it first with:\n  "
                       f"{hint('resume', cid, run=_params())}")
    if state.mode != "chat":
        raise CLIError(f"conversation {cid} is a {state.mode} conversation and its run has "
                       "ended; only chat conversations take another message (start a new one)")


@click.command(name="run")
@click.argument("prompt")
@click.option("--provider", type=click.Choice(PROVIDERS), default="scripted", show_default=True,
              help="Who answers: the offline scripted provider or a live API.")
@click.option("--model", help="The model (default: the provider's).")
@_tool_options
@click.option("--max-turns", type=click.IntRange(min=1), default=8, show_default=True,
              help="Stop after this many model turns (a new conversation only).")
@click.option("--mode", type=click.Choice(["chat", "pipeline"]), default="chat", show_default=True,
              help="chat conversations take more messages later (a new conversation only).")
@click.option("--system", default="", help="The system directive (a new conversation only).")
@click.option("--id", "conversation_id",
              help="Name a new conversation, or add PROMPT to a finished chat conversation.")
@click.option("--single-turn", is_flag=True, help="Take one model turn, then stop.")
@db_option
@json_option
@translate_errors
def run(prompt: str, provider: str, model: str | None, script: str | None,
        tool_specs: tuple[str, ...], mcp: tuple[str, ...], retries: int, max_turns: int,
        mode: str, system: str, conversation_id: str | None, single_turn: bool, db_path: str,
        as_json: bool, stream: bool = False, approve: tuple[str, ...] = (),
        approve_reason: str | None = None, prices_file: str | None = None) -> None:
    """Run a conversation from PROMPT; exit 1 if it failed or was halted.

    No tools are offered unless named with --tools. Ctrl-C stops the run
    (exit 130) and prints the command that continues it.

    Example:

        turnlog run "Weather in Paris?" --script script.json --tools demo --json
    """
    _check_reason(approve, approve_reason)
    chosen = make_provider(provider, model, script)
    prices = _prices(prices_file)  # a bad price file is refused before the journal is opened
    cid = conversation_id or new_conversation_id()
    continue_with = hint("resume", cid, run=_params())
    printer = StreamPrinter(as_json) if stream else None
    with open_tools(tool_specs, mcp, report=problem) as tools:
        check_approve(approve, tools.names())  # a misspelt name: refused before a file exists
        with journal_for(db_path, must_exist=False) as journal:
            loop = _loop(journal, chosen, tools, model, retries, printer, approve,
                         approve_reason, prices)
            if conversation_id and journal.last_seq(conversation_id):
                _check_continuable(journal, cid, db_path, tool_specs, script,
                                   {"max_turns": max_turns, "mode": mode}, mcp)
                result = run_interruptible(journal, cid, lambda: loop.send(
                    cid, prompt, single_turn=single_turn), continue_with)
            else:
                result = run_interruptible(journal, cid, lambda: loop.start(
                    prompt, conversation_id=cid, model=model, mode=mode, max_turns=max_turns,
                    system=system, single_turn=single_turn,
                    metadata=recorded_run_options(tool_specs, script)), continue_with)
            waiting = _waiting(journal, result)
    _report(result, as_json, printer, waiting)


@click.command()
@click.argument("conversation_id")
@click.option("--provider", type=click.Choice(PROVIDERS), help="Default: the recorded one.")
@click.option("--model", help="Default: the recorded one.")
@_tool_options
@db_option
@json_option
@translate_errors
def resume(conversation_id: str, provider: str | None, model: str | None, script: str | None,
           tool_specs: tuple[str, ...], mcp: tuple[str, ...], retries: int, db_path: str,
           as_json: bool, stream: bool = False, approve: tuple[str, ...] = (),
           approve_reason: str | None = None, prices_file: str | None = None) -> None:
    """Finish a conversation a crash, kill or Ctrl-C left unfinished.

    Tools whose results are recorded never run again. A finished
    conversation is left as it is: its status is reported (exit 0).

    Example:

        turnlog resume c-1a2b3c --script script.json --tools demo
    """
    _check_reason(approve, approve_reason)
    prices = _prices(prices_file)  # a bad price file is refused before the journal is opened
    with open_tools(tool_specs, mcp, report=problem) as tools, journal_for(db_path) as journal:
        check_approve(approve, tools.names())
        state = load_state(journal, conversation_id)
        if state.finished:
            if as_json:
                emit(result_of(state).summary())
            else:
                click.echo(f"conversation {conversation_id} has already finished: its last run "
                           f"{colour(state.status, state.status)}; nothing to resume "
                           "(nothing was written)")
            return
        refuse_erased(journal, conversation_id, "resume")  # the model would be sent "erased"
        chosen = make_provider(provider or state.provider, model, script)
        printer = StreamPrinter(as_json) if stream else None
        loop = _loop(journal, chosen, tools, model, retries, printer, approve, approve_reason, prices)
        result = run_interruptible(journal, conversation_id, lambda: loop.resume(conversation_id),
                                   hint("resume", conversation_id, run=_params()))
        waiting = _waiting(journal, result)
    _report(result, as_json, printer, waiting)


@click.command()
@db_option
@json_option
@translate_errors
def demo(db_path: str, as_json: bool) -> None:
    """Run the offline demo: several turns, a failing tool, a prevented duplicate.

    Exit 1 if the demo's run did not complete.

    Example:

        turnlog demo --db demo.db && turnlog show <id> --db demo.db
    """
    fixed = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    cid = f"demo-{new_conversation_id()[2:]}"
    with journal_for(db_path, must_exist=False) as journal:
        loop = Loop(journal, ScriptedProvider(DEMO_SCRIPT, model="scripted-demo"), demo_tools(),
                    clock=lambda: fixed)
        result = loop.start(DEMO_PROMPT, conversation_id=cid, model="scripted-demo")
        lines = timeline_of(journal, cid)
    if as_json:
        emit(result.summary())
    else:
        click.echo(f"turnlog demo: conversation {cid}\n")
        for line in lines:
            click.echo(line)
        click.echo(f"\nstatus: {colour(result.status, result.status)}, {result.turn_count} "
                   f"turns, {result.usage.total_tokens} tokens\n")
        click.echo("Next, try:")
        for parts in (("show", cid), ("verify",), ("ls",), ("export", cid, "--format", "markdown"),
                      ("replay", cid)):
            click.echo(f"  {command_hint(*parts, db_path=db_path)}")
    if result.status != "completed":
        fail(1)


COMMANDS = [demo, run, resume]
