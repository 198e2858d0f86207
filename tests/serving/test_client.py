"""The load client against a small real HTTP server that streams Server-Sent Events the way an
OpenAI-compatible server does (chunked HTTP/1.1, ``data:`` lines, usage, ``[DONE]``)."""
import json
import socket
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from console.serving.client import (Block, RequestRecord, ServerError, complete_tokens, drive, wait_ready)
from console.serving.workload import Request, poisson_arrivals

USAGE = {"stream_options": {"include_usage": True}}
ERROR_BODY = json.dumps({"error": {"message": "out of memory " * 40, "code": 500}}).encode()


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.in_flight = self.peak = self.gets = 0
        self.loading_for = 0            # GET /health answers 503 this many times first
        self.bodies: list[dict] = []
        self.release = threading.Event()

    @contextmanager
    def serving(self):
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            with self.lock:
                self.in_flight -= 1


def _handler(state: _State):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            with state.lock:
                state.gets += 1
                loading = state.gets <= state.loading_for
            self._json(503 if loading else 200, {"status": "loading" if loading else "ok"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.bodies.append(body)
            mode = body.get("mode", "normal")
            if self.path == "/completion":
                return self._completion(mode)
            if mode == "error500":
                return self._raw(500, ERROR_BODY)
            self._stream(body, mode)

        def _raw(self, status: int, data: bytes):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, status: int, obj):
            self._raw(status, json.dumps(obj).encode())

        def _completion(self, mode: str):
            if mode == "hang":
                state.release.wait(10)
            if mode == "badjson":
                return self._raw(200, b"{half")
            if mode == "error500":
                return self._raw(500, b"model not loaded")
            self._json(200, {"content": "abc", "tokens": [5, 6, 7]})

        def _event(self, payload):
            data = f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        def _stream(self, body: dict, mode: str):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            asked = body["max_tokens"]
            n = {"early": asked // 2, "many": asked + 2, "malformed": 1, "streamerror": 1, "hang": 1}.get(mode, asked)
            # leaves the in-flight count before [DONE]: the client frees its slot only after it
            with state.serving():
                self._event({"choices": [{"index": 0, "text": "", "finish_reason": None}]})  # role-only
                for i in range(n):
                    time.sleep(body.get("delay", 0.005))
                    last = i == n - 1
                    self._event({"choices": [{"index": 0, "text": f"t{i} ",
                                              "finish_reason": "length" if last else None}]})
                if mode == "malformed":
                    self._event("{oops")
                if mode == "streamerror":
                    self._event({"error": {"message": "kv cache full"}})
                if mode == "hang":
                    state.release.wait(10)
                if body.get("stream_options", {}).get("include_usage"):
                    read = len(body["prompt"]) - (mode == "skims")    # "skims": says it read one token less
                    self._event({"choices": [], "usage": {"prompt_tokens": read, "completion_tokens": n}})
            if mode != "nodone":
                self._event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass        # a client that timed out and hung up is expected here


@pytest.fixture
def server():
    state = _State()
    httpd = _Server(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


def _one(server, req: Request, fields: dict, timeout_s: float = 5.0) -> RequestRecord:
    block = drive(server.url, "/v1/completions", [req], fields=fields, concurrency=1, timeout_s=timeout_s)
    assert len(block.records) == 1 and block.concurrency == 1
    return block.records[0]


def _peak_overlap(records: list[RequestRecord]) -> int:
    edges = sorted([(r.sent_s, 1) for r in records] + [(r.end_s, -1) for r in records])
    peak = now = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


# --- one request -----------------------------------------------------------------------

def test_a_normal_stream_is_timed_chunk_by_chunk(server):
    rec = _one(server, Request(0, (1, 2, 3), 3, 5), {"mode": "normal", "temperature": 0, **USAGE})
    assert rec.ok and rec.error == "" and rec.status == 200
    assert (rec.output_tokens, rec.chunks, rec.finish_reason) == (5, 5, "length")
    assert rec.text == "t0 t1 t2 t3 t4 "
    assert len(rec.token_s) == 5 and rec.first_token_s == rec.token_s[0]
    assert rec.sent_s < rec.first_token_s <= rec.token_s[-1] <= rec.end_s
    assert len(rec.itl_s) == 4 and all(g > 0 for g in rec.itl_s)
    assert rec.tpot_s == pytest.approx((rec.end_s - rec.first_token_s) / 4)
    assert server.bodies == [{"mode": "normal", "temperature": 0, **USAGE, "prompt": [1, 2, 3],
                              "max_tokens": 5, "stream": True}]
    assert RequestRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_a_text_prompt_is_sent_as_text_and_chunks_count_tokens_without_usage(server):
    rec = _one(server, Request(4, "Hello", 0, 3), {"mode": "normal"})
    assert server.bodies[0]["prompt"] == "Hello"
    assert rec.ok and rec.index == 4 and (rec.output_tokens, rec.chunks) == (3, 3)


def test_a_server_that_stops_early_never_looks_fast(server):
    rec = _one(server, Request(0, (1,), 1, 6), {"mode": "early", **USAGE})
    assert not rec.ok and rec.status == 200 and rec.finish_reason == "length"
    assert (rec.output_tokens, rec.chunks) == (3, 3)
    assert rec.error == "stopped early: 3 of 6 tokens"


def test_more_tokens_than_asked_is_an_error(server):
    rec = _one(server, Request(0, (1,), 1, 4), {"mode": "many", **USAGE})
    assert rec.error == "generated 6 tokens, more than the 4 asked" and not rec.ok


def test_an_http_error_keeps_the_head_of_the_body(server):
    rec = _one(server, Request(0, (1,), 1, 4), {"mode": "error500"})
    assert rec.status == 500 and not rec.ok and rec.first_token_s is None and rec.output_tokens == 0
    assert rec.error == "HTTP 500: " + ERROR_BODY[:300].decode()


def test_a_malformed_chunk_ends_the_request(server):
    rec = _one(server, Request(0, (1,), 1, 4), {"mode": "malformed", **USAGE})
    assert rec.error == "malformed stream chunk: '{oops'"
    assert (rec.output_tokens, rec.chunks, rec.status) == (1, 1, 200) and not rec.ok


def test_an_error_object_in_the_stream_is_recorded_as_the_servers(server):
    rec = _one(server, Request(0, (1,), 1, 4), {"mode": "streamerror"})
    assert rec.error == 'server error in stream: {"message": "kv cache full"}' and rec.output_tokens == 1


def test_a_stream_without_done_is_an_error(server):
    rec = _one(server, Request(0, (1,), 1, 2), {"mode": "nodone", **USAGE})
    assert rec.error == "stream ended without [DONE]" and rec.output_tokens == 2 and not rec.ok


def test_a_server_that_never_finishes_times_out(server):
    rec = _one(server, Request(0, (1,), 1, 4), {"mode": "hang"}, timeout_s=0.3)
    assert rec.error == "timed out after 0.3 s" and not rec.ok
    assert (rec.output_tokens, rec.chunks) == (1, 1)
    assert 0.3 <= rec.e2e_s < 2.0


def test_nothing_listening_is_recorded_not_raised():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    block = drive(f"http://127.0.0.1:{port}", "/v1/completions", [Request(0, (1,), 1, 2)], fields={},
                  concurrency=1, timeout_s=2.0)
    rec = block.records[0]
    assert rec.status == 0 and rec.error.startswith("ConnectError: ") and not rec.ok


# --- a block ---------------------------------------------------------------------------

def test_a_block_never_exceeds_its_concurrency(server):
    reqs = [Request(i, (i, i + 1), 2, 6) for i in range(16)]
    block = drive(server.url, "/v1/completions", reqs, fields={"mode": "normal", "delay": 0.02, **USAGE},
                  concurrency=4, timeout_s=10.0)
    assert [r.index for r in block.records] == list(range(16)) and all(r.ok for r in block.records)
    assert server.peak == 4 and _peak_overlap(block.records) == 4
    assert block.duration_s == pytest.approx(max(r.end_s for r in block.records)
                                             - min(r.sent_s for r in block.records))
    assert Block.from_dict(json.loads(json.dumps(block.to_dict()))) == block
    assert block.started_at.endswith("Z")


def test_poisson_arrivals_wait_for_their_time_and_then_for_a_slot(server):
    reqs = poisson_arrivals([Request(i, (7,), 1, 5) for i in range(24)], rate=100.0, seed=1)
    block = drive(server.url, "/v1/completions", reqs, fields={"mode": "normal", "delay": 0.01, **USAGE},
                  concurrency=3, timeout_s=10.0)
    assert all(r.ok for r in block.records)
    assert server.peak <= 3 and _peak_overlap(block.records) <= 3
    assert all(rec.sent_s >= req.at_s for rec, req in zip(block.records, reqs))
    # arrivals ~10 ms apart and ~50 ms each: the cap is what holds some of them back
    assert server.peak == 3 and any(rec.sent_s > req.at_s + 0.02 for rec, req in zip(block.records, reqs))


def test_sparse_arrivals_are_sent_at_their_time_not_at_once(server):
    reqs = [Request(i, (7,), 1, 1, at_s=0.15 * i) for i in range(4)]
    block = drive(server.url, "/v1/completions", reqs, fields={"mode": "normal", **USAGE},
                  concurrency=8, timeout_s=5.0)
    assert all(req.at_s <= rec.sent_s < req.at_s + 0.12 for req, rec in zip(reqs, block.records))


def test_a_cap_below_one_is_refused():
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        drive("http://127.0.0.1:1", "/v1/completions", [], fields={}, concurrency=0, timeout_s=1.0)


# --- readiness and single calls --------------------------------------------------------

def test_wait_ready_polls_through_503_until_200(server):
    server.loading_for = 3
    waited = wait_ready(server.url, "/health", timeout_s=5.0, interval_s=0.02)
    assert waited is not None and 0.04 <= waited < 2.0 and server.gets == 4


def test_wait_ready_gives_up_on_timeout_or_a_dead_process(server):
    server.loading_for = 10**9
    t = time.perf_counter()
    assert wait_ready(server.url, "/health", timeout_s=0.2, interval_s=0.02) is None
    assert time.perf_counter() - t < 1.5 and server.gets > 1
    server.gets = 0
    assert wait_ready(server.url, "/health", timeout_s=5.0, alive=lambda: False) is None
    assert server.gets == 0
    calls = iter([True, True, False])
    assert wait_ready(server.url, "/health", timeout_s=5.0, alive=lambda: next(calls), interval_s=0.01) is None
    assert server.gets == 2


def test_complete_tokens_returns_the_servers_object(server):
    out = complete_tokens(server.url, "/completion", (1, 2), 3, {"return_tokens": True}, timeout_s=5.0)
    assert out == {"content": "abc", "tokens": [5, 6, 7]}
    assert server.bodies == [{"return_tokens": True, "prompt": [1, 2], "n_predict": 3, "stream": False}]


@pytest.mark.parametrize("mode, message", [
    ("error500", "/completion answered HTTP 500: model not loaded"),
    ("badjson", "/completion answered invalid JSON: '{half'"),
    ("hang", "/completion timed out after 0.3 s"),
])
def test_complete_tokens_says_what_went_wrong(server, mode, message):
    with pytest.raises(ServerError) as e:
        complete_tokens(server.url, "/completion", "hi", 2, {"mode": mode}, timeout_s=0.3)
    assert e.value.message == f"{server.url}{message}"


def test_a_server_that_says_it_read_less_of_the_prompt_fails_the_request(server):
    reqs = [Request(0, (5, 6, 7), 3, 4)]
    rec = drive(server.url, "/v1/completions", reqs, fields={"mode": "skims", **USAGE}, concurrency=1,
                timeout_s=10.0).records[0]
    assert not rec.ok and rec.error == "read 2 prompt tokens of the 3 sent" and rec.prompt_tokens == 2


def _native(rec: RequestRecord, *chunks: dict) -> RequestRecord:
    from console.serving.client import _check_count, _take_chunk
    for i, c in enumerate(chunks):
        _take_chunk(rec, json.dumps(c), 0.1 * (i + 1))
    _check_count(rec)
    return rec


def test_llama_servers_native_stream_gives_each_tokens_id_and_its_accounting():
    ok = _native(RequestRecord(index=0, input_tokens=3, max_tokens=2),
                 {"content": "a", "tokens": [11], "stop": False}, {"content": "", "tokens": [12], "stop": False},
                 {"content": "", "tokens": [], "stop": True, "tokens_predicted": 2, "tokens_evaluated": 3})
    assert not ok.error and ok.token_ids == [11, 12] and ok.chunks == 2 and ok.prompt_tokens == 3 and ok.text == "a"
    # two ids streamed, three reported: the count it is timed for is not what it sent
    lies = _native(RequestRecord(index=0, input_tokens=3, max_tokens=3),
                   {"content": "a", "tokens": [11], "stop": False}, {"content": "b", "tokens": [12], "stop": False},
                   {"content": "", "tokens": [], "stop": True, "tokens_predicted": 3, "tokens_evaluated": 3})
    assert lies.error == "streamed 2 token ids but reported 3 tokens"
    bad = _native(RequestRecord(index=0, input_tokens=3, max_tokens=1), {"content": "a", "tokens": ["x"]})
    assert bad.error.startswith("malformed stream chunk")
