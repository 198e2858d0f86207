"""The served tokens kept per block and read back for grading: what a block's file holds, which
responses of the counted blocks can be graded and why the others cannot, that a file whose bytes are
not the ones its rep sealed is not graded, and how a stream's text is matched with its ids."""
from __future__ import annotations

from console.core.records.receipt import ProfileRecord, Receipt, Rep
from console.core.records.rules import GateRules
from console.round.serving import grade as sg
from console.round.serving import record
from console.round.schedule import Item
from console.serving.client import Block, RequestRecord
from console.serving.workload import Request

VOCAB = 100


def _block(tmp_path, build: str, index: int, ids: list[int], text: str = "xy", phase: str = "timed") -> Rep:
    reqs = [Request(index=0, prompt=(2, 7, 9), input_tokens=3, max_tokens=len(ids)),
            Request(index=1, prompt=(2, 8), input_tokens=2, max_tokens=len(ids))]
    recs = [RequestRecord(index=0, input_tokens=3, max_tokens=len(ids), status=200, output_tokens=len(ids),
                          token_ids=ids, text=text),
            RequestRecord(index=1, input_tokens=2, max_tokens=len(ids), status=200, output_tokens=len(ids),
                          token_ids=[], text=text)]
    item = Item(build=build, phase=phase, index=index, position=index, depth=0, tokens=0, context="serve")
    sha = record.keep_served(tmp_path, item, 0, reqs, Block(records=recs, duration_s=1.0, started_at="", concurrency=2))
    return Rep(build=build, phase=phase, index=index, position=index, status="ok", wall_s=1.0, value=10.0,
               reported={"served_sha256": sha, "requests": [{}, {}]})


def _receipt(*reps: Rep) -> Receipt:
    return Receipt(round_id="r", reps=list(reps), profile=ProfileRecord(bench={"mode": "serve"}))


def test_every_response_of_a_counted_block_is_pooled_or_said_ungradable(tmp_path):
    r = _receipt(_block(tmp_path, "main", 0, [5, 6]), _block(tmp_path, "candidate", 0, [5, 400]))
    pool = sg._pool(tmp_path, r, GateRules(), VOCAB)
    assert pool.counted == {"main": 2, "candidate": 2}
    assert [(q.build, q.block, q.request, q.prompt, q.served) for q in pool.gradable["main"]] == [
        ("main", 0, 0, [2, 7, 9], [5, 6])]
    assert pool.gradable["candidate"] == []
    # a response without ids and one with an id outside the vocabulary count against their build, named
    assert pool.ungradable["main"] == ["timed block 0 request 1: its stream carried no token ids"]
    assert pool.ungradable["candidate"] == [
        "timed block 0 request 0: it served id 400, outside the model's vocabulary of 100",
        "timed block 0 request 1: its stream carried no token ids"]


def test_a_matrix_of_loads_pools_every_cells_blocks(tmp_path):
    from console.core.records.matrix import Cell, MatrixSpec
    cells = tuple(Cell(key=f"concurrency={c}", axes=(("concurrency", str(c)),), depth=0, tokens=0,
                       metric="output_tok_s", args=(("concurrency", str(c)),)) for c in (1, 4))
    reps = [_block(tmp_path, b, 0, [5, 6], phase=cell.phase) for cell in cells for b in ("main", "candidate")]
    r = Receipt(round_id="r", reps=reps, profile=ProfileRecord(
        bench={"mode": "serve"}, matrix=MatrixSpec(axes=("concurrency",), cells=cells, home=cells[1].key)))
    pool = sg._pool(tmp_path, r, GateRules(), VOCAB)
    assert pool.counted == {"main": 4, "candidate": 4}
    assert sorted(q.phase for q in pool.gradable["main"]) == ["cell:concurrency=1", "cell:concurrency=4"]
    assert pool.ungradable["main"] == ["block [concurrency=1] 0 request 1: its stream carried no token ids",
                                       "block [concurrency=4] 0 request 1: its stream carried no token ids"]


def test_a_sweeps_blocks_are_graded_and_a_grading_that_missed_them_is_said(tmp_path):
    """A sweep counts no pairs, but its figures and a capacity change rest on its levels' blocks:
    each one's served tokens are pooled (its warm-ups are not), and a grading that read fewer is infra."""
    from console.core.decisions.parity_grade import ungraded_blocks
    from console.core.records.receipt import ParityRecord
    from console.core.records.served import ServedCheck, ServedGrade
    reps = [_block(tmp_path, b, 0, [5, 6], phase=ph) for ph in ("sweep:r0.5", "sweep:r8", "sweep-warmup:r8")
            for b in ("main", "candidate")]
    r = _receipt(*reps)
    pool = sg._pool(tmp_path, r, GateRules(), VOCAB)
    assert pool.counted == {"main": 4, "candidate": 4}
    assert sorted(q.phase for q in pool.gradable["candidate"]) == ["sweep:r0.5", "sweep:r8"]
    graded = ServedGrade(margin=2.0, false_reject=0.01, counted={"main": 4, "candidate": 2})
    r.parity = ParityRecord(server=ServedCheck(main=None, candidate=None, graded=graded))
    assert ungraded_blocks(r, GateRules()) == ("candidate's counted blocks served 4 responses; the grading read 2 "
                                               "of them: what the others served was never checked")


def test_a_file_changed_after_its_block_is_not_graded(tmp_path):
    rep = _block(tmp_path, "candidate", 3, [5, 6])
    path = tmp_path / record.SERVED_DIR / "candidate-timed-3-0.json"
    path.write_bytes(path.read_bytes().replace(b"[5,6]", b"[5,5]"))
    pool = sg._pool(tmp_path, _receipt(rep), GateRules(), VOCAB)
    assert pool.gradable["candidate"] == [] and pool.counted["candidate"] == 2
    assert pool.ungradable["candidate"] == ["timed block 3: its served tokens were not kept"]


def test_a_stream_is_its_ids_text_up_to_one_held_back_character():
    assert sg.same_text("héllo".encode(), "héllo")
    assert sg.same_text("hé".encode() + "€".encode()[:2], "hé")      # the last character not complete yet
    assert not sg.same_text(b"hello", "help")
    assert not sg.same_text(b"hello", "")                            # whole tokens are missing, not a part
    assert not sg.same_text("hé".encode(), "hé!")                    # the stream said more than the ids
    assert not sg.same_text("h€".encode(), "h")                      # a whole character is missing


class _Harness:
    """Stands in for the grade command's container (the real one runs in the integration tests): it
    reads the request file as the harness would and answers every served id as the argmax, with the
    text 'x' per token."""

    def __init__(self):
        self.lines, self.argv, self.cpus = [], None, None

    def run(self, built, argv, *, inputs_dir, out_dir, run, **kw):
        from console.runtime.base import RunResult
        self.argv, self.cpus = argv, run.cpus
        self.lines = (inputs_dir / sg.REQUESTS_FILE).read_text().splitlines()
        out_dir.mkdir(parents=True, exist_ok=True)
        rows = []
        for line in self.lines:
            served = line.split("\t")[1].split()
            rows.append(" ".join(f"{t}:0.00000" for t in served) + "\t" + ("x" * len(served)).encode().hex())
        (out_dir / "graded.txt").write_text("\n".join(rows) + "\n")
        return RunResult(exit_code=0, wall_s=0.1, stdout=b"", stderr=b"")


def test_each_prompts_answers_go_to_the_harness_side_by_side_once_each_on_every_core(tmp_path):
    import os
    from types import SimpleNamespace
    from console.core.records.served import GradedRequest
    from console.paths import SERVER_PROFILE
    from console.profile import load_profile
    p = load_profile(SERVER_PROFILE)
    (tmp_path / "inputs").mkdir()
    rt = _Harness()
    b = SimpleNamespace(profile=p, inputs=tmp_path / "inputs", work=tmp_path, rt=rt, builds={"main": None},
                        src_dirs={"main": tmp_path}, gpus=False, models={})

    def r(build, request, prompt, served):
        return GradedRequest(build=build, phase="timed", block=0, attempt=0, request=request, served=served, best=[],
                             gap=[], prompt=prompt)
    drawn = [r("main", 0, [2, 9], [5, 6]), r("main", 1, [2, 3], [7]), r("candidate", 0, [2, 9], [5, 6]),
             r("candidate", 1, [2, 3], [8])]
    texts = {}
    assert sg._teacher_force(b, drawn, texts) == ""
    # one line per distinct (prompt, served), those of one prompt next to each other
    assert rt.lines == ["2 3\t7", "2 3\t8", "2 9\t5 6"]
    assert rt.argv[rt.argv.index("--threads") + 1] == str(os.cpu_count()) and rt.cpus == float(os.cpu_count())
    assert [(q.best, q.gap, texts[sg.key_of(q)]) for q in drawn] == [
        ([5, 6], [0.0, 0.0], b"xx"), ([7], [0.0], b"x"), ([5, 6], [0.0, 0.0], b"xx"), ([8], [0.0], b"x")]

    # a response whose ids are not the text it streamed is taken out of the grading, and counts against it
    pool = sg.Pool()
    pool.texts = {sg.key_of(q): "x" * len(q.served) for q in drawn}
    pool.texts[sg.key_of(drawn[3])] = "y"
    kept = sg._as_streamed(drawn, pool, texts)
    assert kept == drawn[:3] and pool.mismatched == {"main": 0, "candidate": 1}
    assert pool.ungradable["candidate"] == ["timed block 0 request 1: its ids are not the text it streamed "
                                            "(their text begins b'x', the stream's b'y')"]
