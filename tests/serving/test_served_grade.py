"""The served tokens kept per block and read back for grading: what a block's file holds, and that
a file whose bytes are not the ones its rep sealed is not graded."""
from __future__ import annotations

from console.core.receipt import Receipt, Rep
from console.round import served_grade as sg
from console.round.plan import Item
from console.serving.client import Block, RequestRecord
from console.serving.workload import Request


def _block(tmp_path, build: str, index: int, ids: list[int]) -> Rep:
    reqs = [Request(index=0, prompt=(2, 7, 9), input_tokens=3, max_tokens=len(ids)),
            Request(index=1, prompt=(2, 8), input_tokens=2, max_tokens=len(ids))]
    recs = [RequestRecord(index=0, input_tokens=3, max_tokens=len(ids), status=200, output_tokens=len(ids),
                          token_ids=ids),
            RequestRecord(index=1, input_tokens=2, max_tokens=len(ids), status=200, error="HTTP 500")]
    item = Item(build=build, phase="timed", index=index, position=index, depth=0, tokens=0, context="serve")
    sha = sg.keep_served(tmp_path, item, 0, reqs, Block(records=recs, duration_s=1.0, started_at="", concurrency=2))
    return Rep(build=build, phase="timed", index=index, position=index, reported={"served_sha256": sha})


def test_a_blocks_answered_requests_are_read_back_with_their_prompts(tmp_path):
    r = Receipt(round_id="r", reps=[_block(tmp_path, "main", 0, [5, 6]), _block(tmp_path, "candidate", 0, [5, 4])])
    pool = sg._pool(tmp_path, r)
    assert [(q.build, q.block, q.request, q.prompt, q.served) for b in ("main", "candidate") for q in pool[b]] == [
        ("main", 0, 0, [2, 7, 9], [5, 6]), ("candidate", 0, 0, [2, 7, 9], [5, 4])]     # the failed one is not


def test_a_file_changed_after_its_block_is_not_graded(tmp_path):
    rep = _block(tmp_path, "candidate", 3, [5, 6])
    path = tmp_path / sg.SERVED_DIR / "candidate-timed-3-0.json"
    path.write_bytes(path.read_bytes().replace(b"[5,6]", b"[5,5]"))
    assert sg._pool(tmp_path, Receipt(round_id="r", reps=[rep]))["candidate"] == []
