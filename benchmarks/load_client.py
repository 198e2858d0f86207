"""How much the console's load client adds to what it times: its error on TTFT and ITL, and whether
its concurrency cap holds, against a server whose every token leaves at a known time.

The server (a process of its own, a raw asyncio stream server, no framework) streams OpenAI-style
chunks: the first token after TTFT_S, then one every ITL_S, each stamped with when it was written. The client is the round's own: ``console.serving.client.drive``, the call a serving block
makes. Reported per concurrency: the client's TTFT and ITL minus the server's (ms, median and p99)
and the most requests the server saw in flight. On a 2-core node, run nothing else beside it.

Run: .venv/bin/python benchmarks/load_client.py [--tokens 32] [--requests 64] [--levels 1,4,16]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.serving import client  # noqa: E402
from console.serving.workload import Request  # noqa: E402

TTFT_S, ITL_S = 0.050, 0.010


class PacedServer:
    """Streams ``max_tokens`` chunks per request at a fixed pace, in a process of its own (so it
    never waits on the client's interpreter). Each chunk's text carries the server's own clock at
    the write (``time.perf_counter`` is the system's monotonic clock, the same in both processes);
    the first also carries when the request was read and how many were in flight then."""

    def __init__(self) -> None:
        self.in_flight = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(x for x in head.decode().split("\r\n") if x.lower().startswith("content-length"))
                     .split(":")[1])
        body = json.loads(await reader.readexactly(length))
        t0 = time.perf_counter()
        n = int(body["max_tokens"])
        self.in_flight += 1
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        for k in range(n):
            await asyncio.sleep(max(0.0, t0 + TTFT_S + k * ITL_S - time.perf_counter()))
            text = (f"{t0:.7f},{self.in_flight};" if k == 0 else "") + f"{time.perf_counter():.7f};"
            writer.write(b"data: " + json.dumps({"choices": [{"text": text, "finish_reason": None}]}).encode()
                         + b"\n\n")
            await writer.drain()
        usage = {"choices": [{"text": "", "finish_reason": "length"}], "usage": {"completion_tokens": n}}
        writer.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        await writer.drain()
        self.in_flight -= 1
        writer.close()

    def serve(self, ports: "multiprocessing.Queue") -> None:
        async def main() -> None:
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            ports.put(server.sockets[0].getsockname()[1])
            async with server:
                await server.serve_forever()
        asyncio.run(main())


def start_server() -> tuple[str, "multiprocessing.Process"]:
    ports: multiprocessing.Queue = multiprocessing.Queue()
    proc = multiprocessing.Process(target=PacedServer().serve, args=(ports,), daemon=True)
    proc.start()
    return f"http://127.0.0.1:{ports.get(timeout=10)}", proc


def level(url: str, concurrency: int, n: int, tokens: int) -> dict:
    reqs = [Request(index=i, prompt=(i,), input_tokens=1, max_tokens=tokens) for i in range(n)]
    t0 = time.perf_counter()
    blk = client.drive(url, "/v1/completions", reqs, fields={}, concurrency=concurrency, timeout_s=60)
    ttft_err, itl_err, most = [], [], 0
    for r in blk.records:
        head, *writes = r.text.rstrip(";").split(";")
        read_at, flight = head.split(",")
        sent = [float(x) for x in writes]
        most = max(most, int(flight))
        # the server's TTFT is from reading the request to its first write; the client's from its send
        ttft_err.append((r.ttft_s - (sent[0] - float(read_at))) * 1e3)
        itl_err.extend((np.asarray(r.itl_s) - np.diff(sent)) * 1e3)
    return {"concurrency": concurrency, "ok": sum(r.ok for r in blk.records), "requests": n, "most_in_flight": most,
            "seconds": time.perf_counter() - t0,
            "ttft_err_ms": np.percentile(ttft_err, [50, 99]), "itl_err_ms": np.percentile(itl_err, [50, 99])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--levels", default="1,4,16")
    a = ap.parse_args()
    url, proc = start_server()
    print(f"paced server: first token after {TTFT_S * 1e3:.0f} ms, then one every {ITL_S * 1e3:.0f} ms; "
          f"{a.requests} requests of {a.tokens} tokens per level")
    print(f"{'conc':>4} {'ok':>7} {'in flight':>9} {'TTFT err p50/p99 ms':>20} {'ITL err p50/p99 ms':>19} {'s':>6}")
    for c in (int(x) for x in a.levels.split(",")):
        r = level(url, c, a.requests, a.tokens)
        print(f"{c:>4} {r['ok']:>3}/{r['requests']:<3} {r['most_in_flight']:>9} "
              f"{r['ttft_err_ms'][0]:>9.2f}/{r['ttft_err_ms'][1]:<10.2f} {r['itl_err_ms'][0]:>8.2f}/"
              f"{r['itl_err_ms'][1]:<10.2f} {r['seconds']:>6.1f}")


if __name__ == "__main__":
    main()
