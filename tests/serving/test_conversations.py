"""Multi-turn conversations: drawn or shaped by a trace, each turn's prompt its conversation's whole
history (earlier prompts and the ids served to them) and a new part, sent strictly in order; the
prompt cache allowed only for them; per-turn figures; the full prompts kept for grading."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from console.core.decisions.sweep import Level
from console.paths import SERVER_CHAT_PROFILE, SERVER_PROFILE
from console.profile import ProfileError, load_profile
from console.round.schedule import Item
from console.round.serving.draw import block_requests
from console.round.serving.record import keep_served, receipt_figures
from console.serving import conversations as conv
from console.serving.client import Block, RequestRecord, drive, native_cached
from console.serving.metrics import by_turn, summarize_block
from console.serving.workload import Request, WorkloadError, workload_sha256

DOC = tuple(range(1000, 1600))      # distinct ids: a slice's place in the document is known
POOL = tuple(range(5000, 5100))     # ids no slice holds, so a drawn one is seen
CHAT_PROFILE = SERVER_CHAT_PROFILE
TRACE = SERVER_PROFILE.parent / "llama-server" / "conversations.jsonl"
SERVER_TEXT = SERVER_PROFILE.read_text()
CHAT_TEXT = CHAT_PROFILE.read_text()


def _drawn(conversations=3, turns=3, prefix=20, groups=2, input=(4, 9), output=(2, 5), seed=1, bos=7):
    shapes = conv.drawn_shapes(conversations, turns, prefix, input, output, seed)
    return conv.requests_of(DOC, shapes, prefix, groups, seed, bos=bos)


# --- drawn conversations ------------------------------------------------------------------

@settings(max_examples=50, deadline=None)
@given(conversations=st.integers(1, 6), turns=st.integers(1, 5), prefix=st.integers(2, 40),
       groups=st.integers(1, 4), lo=st.integers(1, 20), width=st.integers(0, 20), seed=st.integers(0, 2**32))
def test_drawn_conversations_share_prefixes_and_count_their_whole_history(conversations, turns, prefix, groups,
                                                                          lo, width, seed):
    reqs = _drawn(conversations, turns, prefix, groups, (lo, lo + width), (1, 4), seed)
    assert [r.index for r in reqs] == list(range(conversations * turns))
    talks = conv.by_conversation(reqs)
    assert [len(t) for t in talks] == [turns] * conversations
    heads = {}
    for c, talk in enumerate(talks):
        first = talk[0]
        assert first.prompt[0] == 7 and len(first.prompt) == first.input_tokens
        heads.setdefault(c % groups, first.prompt[:prefix])
        assert first.prompt[:prefix] == heads[c % groups]      # the group's prefix, whole
        whole = first.input_tokens + first.max_tokens
        for t, r in enumerate(talk[1:], start=2):
            assert r.turn == t and r.conversation == c and lo <= len(r.prompt) <= lo + width
            assert r.input_tokens == whole + len(r.prompt)     # the history as asked, and the new part
            whole = r.input_tokens + r.max_tokens
    assert len(set(heads.values())) == min(groups, conversations)
    assert reqs == _drawn(conversations, turns, prefix, groups, (lo, lo + width), (1, 4), seed)


def test_drawn_ids_touch_only_the_new_parts_and_the_last_position_always():
    reqs = _drawn(conversations=4, turns=3, prefix=20, groups=2, input=(6, 12))
    mixed = conv.mix_drawn_turns(reqs, POOL, 3, seed=5, prefix=20)
    assert [(r.index, r.turn, len(r.prompt)) for r in mixed] == [(r.index, r.turn, len(r.prompt)) for r in reqs]
    for before, after in zip(reqs, mixed):
        keep = 20 if after.turn == 1 else 0
        assert after.prompt[:keep] == before.prompt[:keep]          # the shared prefix stays shared
        assert after.prompt[-1] in POOL
        changed = [i for i, (a, b) in enumerate(zip(before.prompt, after.prompt)) if a != b]
        assert 1 <= len(changed) <= 3 and min(changed) >= keep
    assert mixed != conv.mix_drawn_turns(reqs, POOL, 3, seed=6, prefix=20)


def test_conversations_arrive_by_poisson_and_later_turns_follow_their_answers():
    reqs = conv.conversation_arrivals(_drawn(conversations=5), rate=2.0, seed=3)
    firsts = [r.at_s for r in reqs if r.turn == 1]
    assert all(a > 0 for a in firsts) and firsts == sorted(firsts) and len(set(firsts)) == 5
    assert all(r.at_s == 0.0 for r in reqs if r.turn > 1)
    with pytest.raises(WorkloadError, match="positive number"):
        conv.conversation_arrivals(reqs, rate=0.0, seed=3)


def test_what_the_document_cannot_hold_is_refused():
    with pytest.raises(WorkloadError, match="no user part after the 30-token prefix"):
        conv.requests_of(DOC, [[conv.Shape(30, 2)]], 30, 1, 0, bos=7)
    with pytest.raises(WorkloadError, match="cannot hold 600 distinct prefixes"):
        conv.requests_of(DOC, [[conv.Shape(30, 2)]], 10, 600, 0, bos=7)
    with pytest.raises(WorkloadError, match="a user part of 700 tokens is longer than the document"):
        conv.requests_of(DOC, [[conv.Shape(30, 2), conv.Shape(700, 2)]], 10, 1, 0, bos=7)
    with pytest.raises(WorkloadError, match=r"input lengths must be 1 ≤ lo ≤ hi, got \[0, 3\]"):
        conv.drawn_shapes(2, 2, 10, (0, 3), (1, 1), 0)


def test_the_hash_pins_the_conversation_structure():
    reqs = _drawn()
    sha = workload_sha256(reqs)
    moved = [replace(r, conversation=9) if r.conversation == 0 else r for r in reqs]
    reordered = [replace(r, turn={2: 3, 3: 2}.get(r.turn, r.turn)) for r in reqs]
    later = [replace(r, at_s=0.5) if r.index == 0 else r for r in reqs]
    other_part = [replace(r, prompt=r.prompt[:-1] + (1,)) if r.index == 1 else r for r in reqs]
    assert len({sha, *map(workload_sha256, (moved, reordered, later, other_part))}) == 5


# --- a trace --------------------------------------------------------------------------------

def _trace(tmp_path: Path, *lines) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_the_shipped_trace_gives_each_turn_its_new_part():
    shapes = conv.trace_shapes(TRACE)
    rows = [json.loads(x) for x in TRACE.read_text().splitlines()]
    assert len(shapes) == 8 and all(len(s) == 3 for s in shapes)
    assert max(r["input_length"] for r in rows) <= 1000 and {r["output_length"] for r in rows} == {16}
    firsts = sorted((r for r in rows if r["turn"] == 1), key=lambda r: r["timestamp"])
    for shape, first in zip(shapes, firsts):
        turns = sorted((r for r in rows if r["chat_id"] == first["chat_id"]), key=lambda r: r["turn"])
        assert shape[0].new == turns[0]["input_length"]
        for k in (1, 2):     # each whole prompt is the last one, its answer and the new part
            assert turns[k]["input_length"] == turns[k - 1]["input_length"] + 16 + shape[k].new


def test_a_trace_without_turn_numbers_reads_turns_in_order_and_accepts_conversation_id(tmp_path):
    path = _trace(tmp_path, {"timestamp": 5, "conversation_id": "b", "input_length": 40, "output_length": 4},
                  {"timestamp": 1, "chat_id": 3, "input_length": 30, "output_length": 2, "hash_ids": [1, 2]},
                  "", {"timestamp": 9, "conversation_id": "b", "input_length": 50, "output_length": 3})
    assert conv.trace_shapes(path) == [[conv.Shape(30, 2)], [conv.Shape(40, 4), conv.Shape(6, 3)]]


GOOD = {"timestamp": 0, "chat_id": 1, "turn": 1, "input_length": 40, "output_length": 4}


@pytest.mark.parametrize("second, expected", [
    ("{oops", "line 2: invalid JSON"),
    ("[1, 2]", "line 2: expected a JSON object, got list"),
    ({**GOOD, "turn": 3, "input_length": 60}, "line 2: expected turn 2 of conversation '1'"),
    ({**GOOD, "turn": 2, "input_length": 43}, "line 2: turn 2 of conversation '1': input_length 43 must exceed "
                                             "the previous turn's input_length and output_length (40 + 4)"),
    ({**GOOD, "turn": 2, "input_length": 44}, "(0 new)"),
    ({**GOOD, "turn": 2, "input_length": 60, "timestamp": -1}, "line 2: expected timestamp a finite number"),
    ({"timestamp": 0, "chat_id": 1, "turn": 2, "output_length": 4}, "line 2: expected input_length an integer ≥ 1, "
                                                                     "got nothing"),
    ({"timestamp": 0, "chat_id": 2, "turn": 1, "input_length": 9, "output_length": 0}, "line 2: expected "
                                                                                        "output_length an integer ≥ 1"),
    ({"timestamp": 0, "turn": 2, "input_length": 60, "output_length": 4}, "line 2: expected one conversation id, "
                                                                          "chat_id or conversation_id, got neither"),
    ({**GOOD, "conversation_id": 1}, "got chat_id and conversation_id"),
    ({**GOOD, "chat_id": True}, "expected chat_id a non-empty string or an integer, got True"),
])
def test_a_bad_trace_line_is_named_with_its_file_line_and_what_was_expected(tmp_path, second, expected):
    path = _trace(tmp_path, GOOD, second)
    with pytest.raises(WorkloadError) as e:
        conv.trace_shapes(path)
    assert str(e.value).startswith(f"{path}: line ") and expected in str(e.value)


def test_a_later_turn_cannot_start_before_the_one_before_and_an_empty_trace_is_refused(tmp_path):
    path = _trace(tmp_path, {**GOOD, "timestamp": 100}, {**GOOD, "turn": 2, "timestamp": 50, "input_length": 50})
    with pytest.raises(WorkloadError, match="line 2: expected turn 2 of conversation '1' at or after its turn 1"):
        conv.trace_shapes(path)
    with pytest.raises(WorkloadError, match="line 0: expected at least one request line"):
        conv.trace_shapes(_trace(tmp_path, ""))


# --- the profile ----------------------------------------------------------------------------



def test_the_shipped_chat_profile_asks_for_the_cache_with_conversations():
    p = load_profile(CHAT_PROFILE)
    w = p.server.workload
    assert p.server.request["cache_prompt"] is True and w.kind == "conversations"
    assert (w.conversations, w.turns, w.prefix, w.groups, w.drawn) == (4, 3, 256, 2, 4)
    doc = [int(x) for x in Path(p.parity.document).read_text().split()]
    reqs = block_requests(p.server, doc, "seed", "timed", 0, Level(4), range(p.parity.vocab))
    assert len(reqs) == 12 and max(r.input_tokens for r in reqs) <= 480
    assert reqs == block_requests(p.server, doc, "seed", "timed", 0, Level(4), range(p.parity.vocab))
    assert reqs != block_requests(p.server, doc, "seed", "timed", 1, Level(4), range(p.parity.vocab))
    heads = {r.prompt[:256] for r in reqs if r.turn == 1}
    assert len(heads) == 2 and all(h[0] == doc[0] for h in heads)


def test_the_prompt_cache_is_refused_for_a_single_turn_workload_with_why(variant):
    text = SERVER_TEXT.replace("ignore_eos = true, cache_prompt = false }", "ignore_eos = true, cache_prompt = true }")
    assert text != SERVER_TEXT
    with pytest.raises(ProfileError) as e:
        load_profile(variant(text))
    assert e.value.key == "server.request"
    assert "kind = 'random'" in e.value.expected and "only for kind = 'conversations'" in e.value.expected
    # the check's own requests stay pinned whatever the workload
    chk = CHAT_TEXT.replace("check = { prompts = 8,", "check = { request = { temperature = 0, cache_prompt = true }, "
                                                      "prompts = 8,")
    assert chk != CHAT_TEXT
    with pytest.raises(ProfileError) as e:
        load_profile(variant(chk))
    assert e.value.key == "server.check.request" and "cache_prompt = false" in e.value.expected
    # a conversation workload may turn it off
    off = CHAT_TEXT.replace("cache_prompt = true }", "cache_prompt = false }")
    assert load_profile(variant(off)).server.request["cache_prompt"] is False


def test_a_trace_is_read_when_the_profile_is(variant, tmp_path):
    def chat(file: Path, prefix: int = 256) -> str:
        return CHAT_TEXT.replace('conversations = 4, turns = 3, prefix = 256',
                                 f'file = "{file}", prefix = {prefix}')
    assert load_profile(variant(chat(TRACE))).server.workload.file == str(TRACE)
    bad = _trace(tmp_path, {**GOOD, "input_length": 300}, {**GOOD, "turn": 2, "input_length": 250})
    with pytest.raises(ProfileError) as e:
        load_profile(variant(chat(bad)))
    assert e.value.key == "server.workload.file" and f"{bad}: line 2: turn 2" in e.value.expected
    with pytest.raises(ProfileError) as e:
        load_profile(variant(chat(TRACE, prefix=400)))
    assert e.value.key == "server.workload.prefix" and "conversation" in e.value.expected


def test_a_profile_with_a_trace_draws_its_shapes_from_it():
    p = load_profile(CHAT_PROFILE)
    spec = replace(p.server, workload=replace(p.server.workload, file=str(TRACE)))
    doc = [int(x) for x in Path(p.parity.document).read_text().split()]
    reqs = block_requests(spec, doc, "seed", "timed", 0, Level(4, 1.0), range(262144))
    shapes = conv.trace_shapes(TRACE)
    assert [len(r.prompt) for r in reqs if r.turn == 1] == [s[0].new for s in shapes]
    assert [r.max_tokens for r in reqs] == [16] * 24 and all(r.at_s > 0 for r in reqs if r.turn == 1)


# --- the client -----------------------------------------------------------------------------

class _Native:
    """llama-server's native /completion, streamed: each answer's ids are a function of the prompt
    (so the next turn's history is checkable), its last chunk with the counts and the cache timings
    as 0.3.16 gives them (``cached`` of the prompt as the slot's)."""

    def __init__(self, fail_at: int | None = None):
        self.lock = threading.Lock()
        self.seen: list[tuple[list[int], float, float]] = []        # prompt, start, end
        self.in_flight = self.peak = 0
        self.fail_at = fail_at

    def answer(self, prompt: list[int], n: int) -> list[int]:
        return [9000 + (sum(prompt) + i) % 500 for i in range(n)]


def _handler(state: _Native):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt, n = body["prompt"], body["max_tokens"]
            start = time.perf_counter()
            with state.lock:
                state.in_flight += 1
                state.peak = max(state.peak, state.in_flight)
                number = len(state.seen)
                state.seen.append((prompt, start, 0.0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            served = state.answer(prompt, n)[:n // 2 if number == state.fail_at else n]
            for t in served:
                time.sleep(0.003)
                self._event({"content": "x", "tokens": [t], "stop": False})
            cached = len(prompt) // 2
            with state.lock:
                state.in_flight -= 1
                state.seen[number] = (prompt, start, time.perf_counter())
            self._event({"content": "", "tokens": [], "stop": True, "stop_type": "limit",
                         "tokens_predicted": len(served), "tokens_evaluated": len(prompt),
                         "timings": {"prompt_n": len(prompt) - cached}})
            self.close_connection = True

        def _event(self, obj):
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()
    return Handler


@pytest.fixture
def native():
    def start(**kw) -> tuple[_Native, str]:
        state = _Native(**kw)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append(httpd)
        return state, f"http://127.0.0.1:{httpd.server_address[1]}"
    servers: list[ThreadingHTTPServer] = []
    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def _sent_prompts(reqs: list[Request], state: _Native) -> dict[int, list[int]]:
    """Each request's prompt as the server should have been sent it: its conversation's history
    (every earlier prompt and the answer the server gave it) and its own part."""
    out, history = {}, {}
    for r in reqs:
        prompt = history.get(r.conversation, []) + list(r.prompt)
        out[r.index] = prompt
        history[r.conversation] = prompt + state.answer(prompt, r.max_tokens)
    return out


def test_turns_go_in_order_each_with_its_whole_history_under_the_cap(native):
    state, url = native()
    reqs = _drawn(conversations=5, turns=3, input=(3, 6), output=(3, 5))
    blk = drive(url, "/completion", reqs, fields={"temperature": 0}, concurrency=2, timeout_s=10.0, ids=True)
    assert all(r.ok for r in blk.records) and [r.index for r in blk.records] == list(range(15))
    want = _sent_prompts(reqs, state)
    assert sorted(map(tuple, want.values())) == sorted(tuple(p) for p, _, _ in state.seen)
    for rec in blk.records:
        assert rec.prompt_ids == want[rec.index] and rec.input_tokens == len(want[rec.index])
        assert (rec.conversation, rec.turn) == (reqs[rec.index].conversation, reqs[rec.index].turn)
        assert rec.cached_tokens == len(rec.prompt_ids) // 2
    spans = {tuple(p): (s, e) for p, s, e in state.seen}
    for a, b in zip(reqs, reqs[1:]):
        if a.conversation == b.conversation:     # the next turn starts only once the answer has arrived
            assert spans[tuple(want[b.index])][0] >= spans[tuple(want[a.index])][1]
    assert state.peak == 2      # conversations side by side, at most the cap in flight


def test_conversations_run_side_by_side_not_one_after_another(native):
    state, url = native()
    reqs = _drawn(conversations=4, turns=2, input=(3, 3), output=(6, 6))
    drive(url, "/completion", reqs, fields={}, concurrency=4, timeout_s=10.0, ids=True)
    firsts = sorted(s for p, s, _ in state.seen if len(p) == 23)     # prefix 20 and 3 new
    assert len(firsts) == 4 and state.peak == 4 and firsts[-1] - firsts[0] < 0.015


def test_after_a_failed_turn_the_rest_of_its_conversation_is_not_sent(native):
    state, url = native(fail_at=0)
    reqs = _drawn(conversations=1, turns=3, output=(4, 4))
    blk = drive(url, "/completion", reqs, fields={}, concurrency=1, timeout_s=10.0, ids=True)
    first, *rest = blk.records
    assert first.error == "stopped early: 2 of 4 tokens" and len(state.seen) == 1
    assert [r.error for r in rest] == ["not sent: turn 1 of conversation 0 failed"] * 2
    assert all(not r.ok and r.end_s is None and r.prompt_ids == [] for r in rest)
    assert blk.duration_s == pytest.approx(first.end_s - first.sent_s)


def test_a_turn_whose_answer_carried_no_ids_cannot_be_continued():
    from console.serving.client import _broken
    rec = RequestRecord(index=0, input_tokens=4, max_tokens=2, status=200, output_tokens=2, conversation=1, turn=1)
    assert "streamed 0 token ids for 2 tokens" in _broken(rec)
    assert _broken(replace(rec, token_ids=[3, 4])) == ""


def test_arrivals_delay_a_conversations_first_turn_only(native):
    state, url = native()
    reqs = [replace(r, at_s=0.2) if r.turn == 1 else r for r in _drawn(conversations=1, turns=2, output=(2, 2))]
    blk = drive(url, "/completion", reqs, fields={}, concurrency=1, timeout_s=10.0, ids=True)
    first, second = blk.records
    assert first.sent_s >= 0.2 and first.due_s == 0.2
    assert second.due_s == pytest.approx(first.end_s) and second.sent_s >= first.end_s


@pytest.mark.parametrize("chunk, cached", [
    ({"tokens_evaluated": 100, "timings": {"prompt_n": 30}}, 70),
    ({"tokens_evaluated": 100, "timings": {"prompt_n": 30, "cache_n": 64}}, 64),      # a newer server says it
    ({"tokens_evaluated": 100, "timings": {"prompt_n": 130}}, None),
    ({"tokens_evaluated": 100}, None),
    ({"timings": {"prompt_n": 5}}, None),
    ({"tokens_evaluated": 100, "timings": "x"}, None),
])
def test_cached_tokens_are_read_from_llama_servers_last_chunk(chunk, cached):
    assert native_cached(chunk) == cached


def test_vllm_usage_gives_cached_tokens():
    from console.serving.client import _take_chunk
    rec = RequestRecord(index=0, input_tokens=10, max_tokens=1)
    _take_chunk(rec, json.dumps({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 1,
                                                          "prompt_tokens_details": {"cached_tokens": 8}}}), 0.1)
    assert rec.cached_tokens == 8 and rec.prompt_tokens == 10


# --- figures per turn, and what a block keeps -----------------------------------------------

def _turn(index, conversation, turn, ttft, cached, input_tokens=100, ok=True):
    return RequestRecord(index=index, input_tokens=input_tokens, max_tokens=2, sent_s=0.0, first_token_s=ttft,
                         token_s=[ttft, ttft + 0.01], output_tokens=2 if ok else 1, chunks=2, status=200,
                         end_s=ttft + 0.01, cached_tokens=cached, conversation=conversation, turn=turn)


def test_figures_per_turn_give_ttft_and_the_servers_cache_hits():
    recs = [_turn(0, 0, 1, 0.4, 0), _turn(1, 0, 2, 0.1, 90), _turn(2, 1, 1, 0.2, None),
            _turn(3, 1, 2, 0.3, 60, input_tokens=200), _turn(4, 1, 3, 0.9, 10, ok=False)]
    turns = by_turn(recs)
    assert [t["turn"] for t in turns] == [1, 2, 3]
    one, two, three = turns
    assert one["completed"] == 2 and one["median_ttft_ms"] == pytest.approx(300.0)
    assert (one["cached_tokens"], one["prompt_tokens"], one["cache_hit_rate"]) == (0, 100, 0.0)
    assert two["p99_ttft_ms"] == pytest.approx(298.0) and two["cached_tokens"] == 150
    assert two["cache_hit_rate"] == pytest.approx(150 / 300)
    assert three == {"turn": 3, "completed": 0, "median_ttft_ms": None, "p99_ttft_ms": None,
                     "cached_tokens": None, "prompt_tokens": None, "cache_hit_rate": None}
    fig = summarize_block(Block(recs, 1.0, "t", 2))
    assert fig["turns"] == turns
    kept = receipt_figures(fig, Block(recs, 1.0, "t", 2), "sha", 1)
    assert kept["turns"] == turns and "turns" not in summarize_block(Block([_turn(0, None, 0, 0.1, 5)], 1.0, "t", 1))
    assert all("prompt_ids" not in q for q in kept["requests"])


def test_the_kept_prompts_are_the_whole_histories_sent(native, tmp_path):
    state, url = native()
    reqs = _drawn(conversations=2, turns=3, output=(3, 3))
    blk = drive(url, "/completion", reqs, fields={}, concurrency=2, timeout_s=10.0, ids=True)
    item = Item("main", "timed", 0, 0, 0, 0, "serve", "output_tok_s")
    keep_served(tmp_path, item, 0, reqs, blk)
    rows = json.loads((tmp_path / "served" / "main-timed-0-0.json").read_text())["requests"]
    want = _sent_prompts(reqs, state)
    assert [row["prompt"] for row in rows] == [want[r.index] for r in reqs]
    assert all(len(row["prompt"]) > len(r.prompt) for row, r in zip(rows, reqs) if r.turn > 1)
    assert [row["served"] for row in rows] == [state.answer(want[r.index], 3) for r in reqs]


# --- through the round's own code: a block, and the server check ----------------------------

SSE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "sse_server.py"


def _bench(tmp_path: Path, cache: bool = True):
    import sys
    from serving.test_blocks import _bench as local_bench
    p = load_profile(CHAT_PROFILE)
    return local_bench(tmp_path, [sys.executable, str(SSE_SERVER), "--port", "{port}"], CHAT_PROFILE,
                       request={**p.server.request, "cache_prompt": cache})


def test_a_conversation_block_is_a_rep_with_figures_per_turn_and_full_prompts_kept(tmp_path):
    from console.round.serving.blocks import run_block
    from console.round.serving.servers import Servers
    b = _bench(tmp_path)
    servers = Servers(b, lambda *a: None)
    servers.draw()
    try:
        rep, _ = run_block(b, servers, Item("main", "timed", 0, 0, 0, 0, "serve", "output_tok_s"), 0, tmp_path / "out")
        reqs = servers.requests("timed", 0)
    finally:
        servers.stop_all()
    fig = rep.reported
    assert rep.status == "ok" and fig["completed"] == 12 and fig["failed"] == 0
    assert [t["turn"] for t in fig["turns"]] == [1, 2, 3] and all(t["completed"] == 4 for t in fig["turns"])
    assert all(t["cached_tokens"] is None for t in fig["turns"])      # this server does not say
    rows = json.loads((tmp_path / "served" / "main-timed-0-0.json").read_text())["requests"]
    history: dict[int, list[int]] = {}
    for r, row in zip(reqs, rows):    # the fixture serves id 1234 for every token
        assert row["prompt"] == history.get(r.conversation, []) + list(r.prompt)
        assert len(row["prompt"]) == r.input_tokens and row["served"] == [1234] * 16
        history[r.conversation] = row["prompt"] + row["served"]
    assert [q["input_tokens"] for q in fig["requests"]] == [r.input_tokens for r in reqs]


@pytest.mark.parametrize("cache", [True, False])
def test_the_cache_probe_is_skipped_and_said_only_when_the_timed_requests_ask_for_the_cache(tmp_path, cache):
    from console.core.records.served import ServedSide
    from console.round.serving.check import PROBE_SKIPPED, _answer, _said
    from console.round.serving.servers import Servers
    b = _bench(tmp_path, cache=cache)
    servers = Servers(b, lambda *a: None)
    side = ServedSide(asked=16)
    try:
        served = servers.start("main")
        side.ready_s = 0.1
        _answer(servers, served, [32, 64], [[1234] * 16] * 2, side)
    finally:
        servers.stop_all()
    assert [c.tokens for c in side.completions] == [[1234] * 16] * 2
    if cache:
        assert side.probe_skipped == PROBE_SKIPPED and side.probe_ttft_s == []
        assert "the cache probe was not run" in _said("main", side)
        assert ServedSide.from_dict(side.to_dict()) == side
    else:
        assert side.probe_skipped == "" and len(side.probe_ttft_s) == 3
        assert "probe_skipped" not in side.to_dict() and "a repeated prompt's time to first token" in _said("main", side)
