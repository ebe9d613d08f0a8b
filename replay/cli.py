"""``turnlog replay``, ``turnlog fork`` and ``turnlog diff`` (see docs/cli.md).

Registered on the ``turnlog`` group lazily by name (``engine.cli``) and through
the ``turnlog.commands`` entry point (``replay = "turnlog.replay.cli:COMMANDS"``), so
the engine never imports replay at import time.
"""

from __future__ import annotations

import click

from turnlog.engine.choices import load_tools, make_provider, open_tools
from turnlog.engine.cli._common import (
    CLIError,
    colour,
    command_hint,
    db_option,
    emit,
    fail,
    journal_for,
    json_option,
    problem,
    progress,
    translate_errors,
)

from .diff import diff as diff_conversations
from .fork import check_fork_point
from .fork import fork as fork_conversation

__all__ = ["COMMANDS", "diff", "fork", "replay"]


@click.command()
@click.argument("conversation_id", required=False)
@click.option("--all", "all_", is_flag=True,
              help="Replay every conversation and record the report (replay_reports table).")
@click.option("--provider", default=None,
              help="Re-run the recorded inputs against this provider instead (provider swap).")
@click.option("--model", default=None, help="The swap's model (default: the provider's).")
@click.option("--tools", "policy", type=click.Choice(["recorded", "live", "refuse"]),
              default="recorded", show_default=True,
              help="Swap only: serve tool results from the recording, run tools, or refuse calls.")
@click.option("--tool-set", "tool_sets", multiple=True, metavar="demo|MODULE:ATTR",
              help="The tools (repeatable): run them with --tools live; in a deterministic "
                   "replay, check validation and enablement with them.")
@click.option("--mcp", "mcp", multiple=True, metavar="'COMMAND ARGS'|URL",
              help="With --tools live: also run the tools of this MCP server (repeatable; a "
                   "command line or an http(s) URL).")
@click.option("--script", type=click.Path(dir_okay=False), default=None,
              help="Swap with --provider scripted: the script file.")
@click.option("--id", "new_id", default=None, help="Swap only: the new conversation's id.")
@db_option
@json_option
@translate_errors
def replay(conversation_id: str | None, all_: bool, provider: str | None, model: str | None,
           policy: str, tool_sets: tuple[str, ...], mcp: tuple[str, ...], script: str | None,
           new_id: str | None, db_path: str, as_json: bool) -> None:
    """Re-run a recorded conversation: deterministically (exit 1 on divergence), or
    against another provider with --provider.

    Example:

        turnlog replay c-1a2b && turnlog replay c-1a2b --provider anthropic --model claude-sonnet-4-5
    """
    if all_ == bool(conversation_id):
        raise CLIError("give a conversation ID or --all (not both)")
    if mcp and (provider is None or policy != "live"):
        raise CLIError("--mcp runs an MCP server's tools again: use it with --provider and "
                       "--tools live (a replay serves recorded MCP results without the server)")
    if provider is not None:
        if all_:
            raise CLIError("--provider replays one conversation; give its ID instead of --all")
        _swap(conversation_id, provider, model, policy, tool_sets, script, new_id, db_path,
              as_json, mcp)
        return
    if model or script or new_id or policy != "recorded":
        raise CLIError("--model, --tools, --script and --id need --provider")
    driver = _driver(tool_sets)
    if all_:
        _replay_all(db_path, as_json, driver)
        return
    from .deterministic import replay as run_replay

    with journal_for(db_path, readonly=True) as journal:
        result = run_replay(journal, conversation_id, collect=True, driver=driver)
    if as_json:
        emit(result.to_dict())
    elif result.skipped:
        click.echo(f"{conversation_id}: skipped ({result.skipped})")
    elif result.ok:
        events = "event" if result.checked == 1 else "events"
        click.echo(f"{conversation_id}: {colour('ok', 'ok')}, {result.checked} {events} replayed "
                   "identically")
    else:
        click.echo(result.divergence.render())
    if not result.ok:
        fail(1)


def _driver(tool_sets: tuple[str, ...]):
    """The loop driver, with the named tools when given (else stand-ins from the specs)."""
    if not tool_sets:
        return None
    from functools import partial

    from .driver import loop_driver

    return partial(loop_driver, registry=load_tools(tool_sets))


def _replay_all(db_path: str, as_json: bool, driver) -> None:
    from .reports import replay_all

    with journal_for(db_path) as journal:
        total = sum(1 for _ in journal.streams())
        with progress(total, label="replaying", as_json=as_json) as bar:
            report = replay_all(journal, driver=driver, on_result=lambda _r: bar.advance())
    if as_json:
        emit(report.to_dict())
    else:
        for r in report.results:
            state = ("skipped" if r.skipped else colour("ok", "ok") if r.ok
                     else colour(f"DIVERGED at seq {r.divergence.seq}", "diverged"))
            click.echo(f"{r.conversation_id}  {state}")
        click.echo(f"{len(report.results)} conversation(s), {len(report.divergences)} diverged")
    if not report.ok:
        fail(1)


def _swap(conversation_id: str, provider_name: str, model: str | None, policy: str,
          tool_sets: tuple[str, ...], script: str | None, new_id: str | None, db_path: str,
          as_json: bool, mcp: tuple[str, ...] = ()) -> None:
    import contextlib

    from .swap import swap

    if policy == "live" and not (tool_sets or mcp):
        raise CLIError("--tools live needs --tool-set demo|MODULE:ATTR or --mcp (the tools to run)")
    provider = make_provider(provider_name, model, script)
    tools = (open_tools(tool_sets, mcp, report=problem) if policy == "live"
             else contextlib.nullcontext(None))
    with tools as live, journal_for(db_path) as journal:
        result = swap(journal, conversation_id, provider, model=model, tools=policy,
                      live_tools=live, new_id=new_id)
    if as_json:
        emit(result.to_dict())
    else:
        click.echo(f"{result.conversation_id}  {result.status}  replay of {conversation_id} "
                   f"on {result.provider}/{result.model} (tools: {policy})")
        if result.error:
            click.echo(f"error: {result.error}")
        hint = command_hint("diff", conversation_id, result.conversation_id, db_path=db_path)
        click.echo(f"next: {hint}")
    if result.status != "completed":
        fail(1)


@click.command()
@click.argument("conversation_id")
@click.option("--at", "at_seq", type=int, required=True, help="The parent's seq to fork after.")
@click.option("--provider", default=None, help="Continue with this provider (default: the parent's).")
@click.option("--model", default=None, help="Continue with this model (default: the parent's).")
@click.option("--system", default=None, help="Replace the system directive.")
@click.option("--message", default=None,
              help="Continue at once: record this user message and run the loop on the fork.")
@click.option("--no-run", is_flag=True, help="With --message: record it, do not run the model.")
@click.option("--script", type=click.Path(dir_okay=False), default=None,
              help="With --message and a scripted provider: the script file.")
@click.option("--tool-set", "tool_sets", multiple=True, metavar="demo|MODULE:ATTR",
              help="With --message: the tools the run may call (repeatable; default: none).")
@click.option("--id", "new_id", default=None, help="The new conversation's id.")
@db_option
@json_option
@translate_errors
def fork(conversation_id: str, at_seq: int, provider: str | None, model: str | None,
         system: str | None, message: str | None, no_run: bool, script: str | None,
         tool_sets: tuple[str, ...], new_id: str | None, db_path: str, as_json: bool) -> None:
    """Start a new conversation sharing ID's first SEQ events (nothing is copied).

    With --message the fork continues at once: the message is recorded and
    the loop runs with the fork's provider and model (exit 1 if that run fails).

    Example:

        turnlog fork c-1a2b --at 6 --model gpt-4.1 --message "Try another way"
    """
    run = message is not None and not no_run
    with journal_for(db_path) as journal:
        if run:  # build the provider and tools first: bad usage must write nothing
            from .rebuild import rebuild

            check_fork_point(journal, conversation_id, at_seq, message=True)
            parent = rebuild(journal, conversation_id, at_seq)
            chosen = make_provider(provider or parent.provider, model or parent.model, script)
            tools = load_tools(tool_sets)
        fid = fork_conversation(journal, conversation_id, at_seq, new_id=new_id,
                                provider=provider, model=model, system=system, message=message)
        result = None
        if run:
            from turnlog.engine.loop import Loop

            from turnlog.engine.cli.run import resume_hint, run_interruptible

            loop = Loop(journal, chosen, tools)
            result = run_interruptible(journal, fid, lambda: loop.resume(fid), resume_hint(
                fid, db_path, tuple(tool_sets), script))
    out = {"conversation_id": fid, "parent": conversation_id, "fork_seq": at_seq}
    if result is not None:
        out.update(status=result.status, final_content=result.final_content, error=result.error)
    if as_json:
        emit(out)
    else:
        click.echo(f"{fid}  fork of {conversation_id} at seq {at_seq}"
                   + (f"  {result.status}: {result.final_content or result.error or ''}"
                      if result is not None else ""))
        click.echo(f"next: {command_hint('show', fid, db_path=db_path)}   "
                   f"{command_hint('diff', conversation_id, fid, db_path=db_path)}")
    if result is not None and result.status != "completed":
        fail(1)


@click.command()
@click.argument("a")
@click.argument("b")
@db_option
@json_option
@translate_errors
def diff(a: str, b: str, db_path: str, as_json: bool) -> None:
    """Compare conversations A and B turn by turn (exit 0 either way).

    Example:

        turnlog diff c-openai c-anthropic --json
    """
    with journal_for(db_path, readonly=True) as journal:
        result = diff_conversations(journal, a, b)
    if as_json:
        emit(result.to_dict())
        return
    click.echo(result.render(style=lambda text, kind: colour(text, kind, bold=True)))


COMMANDS = [diff, fork, replay]
