"""What ``turnlog proxy`` adds: the same client direct to the fake upstream and through the proxy.

Not a test. Run: ``PYTHONPATH=. .venv/bin/python bench/proxy_bench.py [--requests N]
[--clients C] [--turns T]``.

The upstream is ``tests/fakeapi.py`` (OpenAI Chat Completions) in its own
process, the proxy the installed console script (``turnlog proxy --port 0``)
in its own process, recording into a fresh journal, and the client (httpx,
asyncio) in this one: no two of them share a GIL. The baseline is the same client sending the
same requests straight to the upstream, in the same run, interleaved request
by request so drift on a shared machine hits both sides alike. Reported:

- 1 client: latency per request, p50 and p99, direct and proxied, and the
  difference (the proxy's added latency); the same for the time to the first
  byte of a streamed answer;
- C concurrent conversations of T turns each (every request resends the
  growing history, as agents do), each its own client with its own
  connection, as C agents each with its SDK client: requests per second
  direct and proxied, and their ratio. (One httpx client shared by all C
  conversations measured that client's pool instead: with keep-alive
  connections, as the proxy gives, it stalled at 30-60 requests per second
  against a server answering at once, while the server's CPU idled);
- the proxy process's peak RSS (``VmHWM``), and that every exchange was
  recorded (conversations and events in the journal).

Targets (issue 31): added p50 <= 1 ms and p99 <= 5 ms at 1 client; throughput
at C=50 >= 0.8 of direct; RSS <= 200 MB.

The fake upstream answers HTTP/1.0 by default: it closes each connection, so
the direct client reconnects for every request while through the proxy only
the proxy does (the client keeps its connection to the proxy), which favours
the proxy's side at 50 clients. ``--keep-alive`` makes the fake keep its
connections (HTTP/1.1, as the real APIs do): both sides then reuse theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakeapi import FakeAPI, reply  # noqa: E402

from turnlog.journal import Journal  # noqa: E402

KEY = {"authorization": "Bearer sk-bench-key-000000"}
SCRIPT = Path(sys.executable).parent / "turnlog"


def answer(body: dict) -> dict:
    """The fake's reply: depends only on the request (concurrent clients arrive in any order)."""
    return reply("openai", text=f"answer {len(body.get('messages', []))}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def start_proxy(db: Path, upstream: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([str(SCRIPT), "proxy", "--port", "0", "--db", str(db),
                             "--upstream", f"openai={upstream}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("proxy on "):
        raise SystemExit(f"the proxy did not start: {line} {proc.stderr.read()}")
    return proc, line.removeprefix("proxy on ") + "/v1"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_client(direct: str, proxied: str, n: int) -> dict[str, list[float]]:
    """Sequential requests, alternating direct and proxied; plain then streamed."""
    out: dict[str, list[float]] = {"direct": [], "proxy": [], "ttfb_direct": [],
                                   "ttfb_proxy": []}
    async with httpx.AsyncClient(headers=KEY, timeout=30) as client:
        for i in range(n):
            messages = [{"role": "user", "content": f"request {i}"}]
            for name, base in (("direct", direct), ("proxy", proxied)):
                start = time.perf_counter()
                r = await client.post(f"{base}/chat/completions",
                                      json={"model": "m", "messages": messages})
                out[name].append(time.perf_counter() - start)
                assert r.status_code == 200, r.text
            for name, base in (("ttfb_direct", direct), ("ttfb_proxy", proxied)):
                start = time.perf_counter()
                async with client.stream("POST", f"{base}/chat/completions", json={
                        "model": "m", "messages": messages, "stream": True}) as r:
                    first = True
                    async for _ in r.aiter_raw():
                        if first:
                            out[name].append(time.perf_counter() - start)
                            first = False
    return out


async def conversations(base: str, clients: int, turns: int, tag: str) -> float:
    """``clients`` concurrent conversations of ``turns`` turns; requests per second."""

    async def run(client: httpx.AsyncClient, c: int) -> None:
        messages = [{"role": "system", "content": f"agent {tag} {c}"},
                    {"role": "user", "content": f"task {c}"}]
        for t in range(turns):
            r = await client.post(f"{base}/chat/completions",
                                  json={"model": "m", "messages": messages})
            assert r.status_code == 200, r.text
            messages += [r.json()["choices"][0]["message"],
                         {"role": "user", "content": f"next {t}"}]

    agents = [httpx.AsyncClient(headers=KEY, timeout=60) for _ in range(clients)]
    try:
        start = time.perf_counter()
        await asyncio.gather(*(run(agents[c], c) for c in range(clients)))
        return clients * turns / (time.perf_counter() - start)
    finally:
        for agent in agents:
            await agent.aclose()


def serve_fake(keep_alive: bool) -> None:
    """The upstream's process: print its base URL, serve until stdin closes."""
    if keep_alive:
        import socket

        from tests import fakeapi

        setup = fakeapi._Handler.setup

        def nodelay(handler: Any) -> None:  # headers and body are two writes: no Nagle wait
            handler.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            setup(handler)

        fakeapi._Handler.protocol_version = "HTTP/1.1"
        fakeapi._Handler.setup = nodelay
    fake = FakeAPI().start()
    fake.answer_with("openai", answer)
    print(fake.base_url("openai"), flush=True)
    sys.stdin.read()
    fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--keep-alive", action="store_true",
                        help="the fake upstream keeps its connections (HTTP/1.1)")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.keep_alive)
        return
    load0 = os.getloadavg()[0]
    fake = subprocess.Popen([sys.executable, __file__, "--serve-fake",
                             *(["--keep-alive"] if args.keep_alive else [])],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    direct = fake.stdout.readline().strip()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        proc, proxied = start_proxy(db, direct)
        try:
            asyncio.run(one_client(direct, proxied, 20))  # warm up both paths
            time.sleep(1.0)  # let the recorder finish the warm-up
            cpu0 = cpu_seconds(proc.pid)
            one = asyncio.run(one_client(direct, proxied, args.requests))
            rates = {}
            for rounds in range(2):  # alternate which side goes first
                for name, base in ((("direct", direct), ("proxy", proxied)) if rounds == 0
                                   else (("proxy", proxied), ("direct", direct))):
                    rate = asyncio.run(conversations(base, args.clients, args.turns,
                                                     f"{name}{rounds}"))
                    rates.setdefault(name, []).append(rate)
            while True:  # until the recorder is idle: the CPU of every record is counted
                before = cpu_seconds(proc.pid)
                time.sleep(1.0)
                if cpu_seconds(proc.pid) - before < 0.02:
                    break
            cpu = cpu_seconds(proc.pid) - cpu0
            rss = peak_rss_mb(proc.pid)
        finally:
            proc.send_signal(2)
            proc.communicate(timeout=120)
        with Journal(db) as journal:
            streams = list(journal.streams())
        fake.communicate(timeout=30)

    ms = 1000
    print(f"1 client, {args.requests} requests each way (interleaved); the fake upstream "
          f"{'keeps its connections' if args.keep_alive else 'closes each connection'}:")
    for label, a, b in (("latency", "direct", "proxy"), ("stream TTFB", "ttfb_direct",
                                                        "ttfb_proxy")):
        d50, p50 = statistics.median(one[a]) * ms, statistics.median(one[b]) * ms
        d99, p99 = pct(one[a], 0.99) * ms, pct(one[b], 0.99) * ms
        print(f"  {label:12} p50 direct {d50:7.2f} ms  proxy {p50:7.2f} ms  added {p50 - d50:6.2f} ms"
              f"  | p99 direct {d99:7.2f} ms  proxy {p99:7.2f} ms  added {p99 - d99:6.2f} ms")
    direct_rate, proxy_rate = statistics.median(rates["direct"]), statistics.median(rates["proxy"])
    print(f"load average at the start {load0:.1f}, at the end {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} CPUs)")
    print(f"{args.clients} concurrent conversations x {args.turns} turns: direct "
          f"{direct_rate:7.1f} req/s, proxy {proxy_rate:7.1f} req/s, ratio "
          f"{proxy_rate / direct_rate:.2f} (runs: {rates})")
    proxied_requests = 2 * args.requests + 2 * args.clients * args.turns
    print(f"proxy peak RSS: {rss:.1f} MB; proxy CPU {cpu * 1000 / proxied_requests:.2f} ms per "
          f"request, forwarding and recording ({proxied_requests} requests; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    expected = 2 * args.clients + 2 * (args.requests + 20)  # a streamed request forks its plain twin
    print(f"recorded: {len(streams)} conversations ({expected} expected), "
          f"{sum(s.events for s in streams)} events")


if __name__ == "__main__":
    main()
