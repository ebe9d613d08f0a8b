"""``turnlog proxy``: a recording gateway for the model APIs (see docs/cli.md).

Point any agent's SDK at the proxy and each of its exchanges with the model
is recorded as the loop's own events, threaded into conversations (forks
where a history departs). The proxy lives above the engine, beside the
viewer: like it, it needs the ``view`` extra's ASGI stack (Starlette,
uvicorn), and it reuses ``replay.fork``; the engine never imports it.

- ``wires``: the four wires' paths, request readers and error shapes;
- ``threads``: which recorded conversation a request extends;
- ``recorder``: the writer thread that turns exchanges into events;
- ``sse``: the incremental server-sent-events reader;
- ``upstream``: the client (aiohttp's) that forwards to the model APIs;
- ``app``: the Starlette app (``create_app``); ``cli``: the command.

Only ``app`` imports Starlette; ``upstream`` is its client of the model APIs (aiohttp).
"""

from .recorder import Exchange, Recorder
from .threads import Match, ThreadIndex
from .wires import WIRES, Wire, parse_request

__all__ = ["WIRES", "Exchange", "Match", "Recorder", "ThreadIndex", "Wire", "parse_request"]
