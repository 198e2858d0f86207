"""A serving matrix: its cells are loads, each decided at the family's rates; each cell's tail
latencies are read from its own pairs and guarded at the cell's rate, so a candidate that buys
throughput at one load with a decided rise in its latency there is rejected, whatever it gains."""
from __future__ import annotations

import json

from console.core.decisions import gate
from console.core.records.receipt import Receipt
from console.core.records.rules import GateRules, LatencyGuard
from console.core.records.served import Completion, ServedCheck, ServedSide
from console.core.records.verdict import VerdictRecord
from console.reports.matrix import matrix_table

from .receipts import make_matrix_receipt

REF = [[1, 2, 3, 4]] * 8
GUARDS = (LatencyGuard("ttft_p99_ms", 0.25), LatencyGuard("itl_p99_ms", 0.25))
LOADS = {1: "concurrency=1", 4: "concurrency=4"}


def _side() -> ServedSide:
    return ServedSide(asked=4, completions=[Completion(position=16 * (i + 1), tokens=list(t), reference=list(t))
                                            for i, t in enumerate(REF)], probe_ttft_s=[1.0, 1.0, 1.0], ready_s=1.0)


def serving_matrix(ttft_rise: dict[int, float], gain: float = 0.06) -> dict:
    """A two-cell serving matrix round (concurrency 1 and 4): blocks as reps whose value is output
    throughput, each with its TTFT and ITL p99; the candidate's TTFT in a cell is main's times
    ``ttft_rise[c]`` (a little noise on both)."""
    noise = (1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001)
    main = [100.0 * x for x in noise]
    cells = {c: ([c * v for v in main], [c * v * (1 + gain) for v in reversed(main)]) for c in LOADS}
    d = make_matrix_receipt(cells, home=4, rules=GateRules(latency=GUARDS), lock={"frontier": 0.0, "anchor": 0.0})
    d["profile"]["bench"] = {"mode": "serve", "metric": "output_tok_s"}
    d["profile"]["server"] = {"concurrency": 4, "rate": 0.0, "slo": {}}
    d["profile"]["matrix"]["axes"] = ["concurrency"]
    d["profile"]["matrix"]["home"] = LOADS[4]
    for cell in d["profile"]["matrix"]["cells"]:
        c = int(cell["key"].split("=")[1])
        cell.update(key=LOADS[c], axes=[["concurrency", str(c)]], args=[] if c == 4 else [["concurrency", str(c)]])
    d["parity"]["server"] = ServedCheck(main=_side(), candidate=_side()).to_dict()
    reps = [r for r in d["reps"] if r["phase"] == "warmup" or r["phase"].startswith("cell:")]
    for r in reps:
        c = int(r["phase"].split("=")[1]) if r["phase"].startswith("cell:") else 4
        r["phase"] = f"cell:{LOADS[c]}" if r["phase"].startswith("cell:") else r["phase"]
        rise = ttft_rise.get(c, 1.0) if r["build"] == "candidate" else 1.0
        r.update(context="serve", depth=0, peak_mem_bytes=None)
        r["reported"] = {"tokens": r["tokens"], "elapsed_s": r["reported"]["elapsed_s"],
                         "p99_ttft_ms": 50.0 * c * rise * (1 + 0.01 * (r["index"] % 3)),
                         "p99_itl_ms": 20.0 * (1 + 0.01 * (r["index"] % 2))}
    d["reps"] = reps
    return d


def decide(d: dict):
    r = Receipt.from_dict(d)
    return gate.decide(r, r.rules)


def test_each_load_is_decided_with_its_own_latencies_beside_its_throughput():
    v = decide(serving_matrix({}))
    assert v.outcome == "accepted", [x.message for x in v.reasons]
    cells = {c["key"]: c for c in v.speed.matrix["cells"]}
    assert set(cells) == set(LOADS.values())
    for c, key in LOADS.items():
        cell = cells[key]
        assert cell["state"] == "accepted" and cell["gain"] > 0.05
        main_ttft, cand_ttft = cell["ttft_p99_ms"]
        assert 50.0 * c <= main_ttft <= 51.0 * c and 50.0 * c <= cand_ttft <= 51.0 * c
        assert [row["metric"] for row in cell["latency"]] == ["ttft_p99_ms", "itl_p99_ms"]
        assert all(row["status"] == "pass" and row["pairs"] == 8 for row in cell["latency"])


def test_a_decided_latency_rise_in_one_load_rejects_the_round_and_names_the_cell():
    v = decide(serving_matrix({1: 1.6}))
    assert v.outcome == "rejected" and [x.code for x in v.reasons] == ["latency-breach"]
    said = v.reasons[0].message
    assert said.startswith("cell [concurrency=1]: latency guard ttft_p99_ms: the candidate's is +6"), said
    assert v.reasons[0].figure == "latency:concurrency=1:ttft_p99_ms"
    # the cells are kept: the one that breached, and the one that did not
    states = {c["key"]: [row["status"] for row in c["latency"]] for c in v.speed.matrix["cells"]}
    assert states == {"concurrency=1": ["breach", "pass"], "concurrency=4": ["pass", "pass"]}


def test_the_cells_table_shows_each_loads_latencies_and_a_bench_matrix_does_not():
    d = serving_matrix({})
    d["verdict"] = decide(d).to_dict()
    record = VerdictRecord.from_dict(json.loads(json.dumps(d["verdict"])))
    t = matrix_table(record)
    keys = [c.key for c in t.columns]
    assert keys[0] == "concurrency" and keys[-5:] == ["ttft_p99_main", "ttft_p99_candidate", "itl_p99_main",
                                                      "itl_p99_candidate", "latency"]
    row = t.rows[0]
    assert row["concurrency"] == "1" and 50 <= row["ttft_p99_main"] <= 51
    assert row["latency"] == "ttft_p99_ms:pass itl_p99_ms:pass"
    bench = make_matrix_receipt({1024: ([100.0] * 6, [106.0] * 6), 4096: ([50.0] * 6, [53.0] * 6)})
    bench_v = VerdictRecord.from_dict(json.loads(json.dumps(decide(bench).to_dict())))
    assert "latency" not in [c.key for c in matrix_table(bench_v).columns]
    assert all("ttft_p99_ms" not in c for c in decide(bench).speed.matrix["cells"])


def test_a_grading_that_missed_any_cells_blocks_makes_the_round_infra():
    """What the gate counts is what the grading must have read: a grading that pooled only the
    single-load phase (none of the cells' blocks) leaves served tokens no one checked."""
    from console.core.records.served import ServedGrade
    d = serving_matrix({})
    for r in d["reps"]:
        r["reported"]["requests"] = [{"index": i} for i in range(8)]
    served = sum(8 for r in d["reps"] if r["build"] == "main" and r["phase"].startswith("cell:"))
    d["parity"]["server"]["graded"] = ServedGrade(margin=2.0, false_reject=0.01, counted={"main": 0, "candidate": 0},
                                                  available={"main": 0, "candidate": 0}).to_dict()
    v = decide(d)
    assert served and v.outcome == "infra" and [x.code for x in v.reasons] == ["served-tokens-ungraded"], v.reasons
    assert v.reasons[0].message.startswith("main's counted blocks served ") and "the grading read 0 of them" in \
        v.reasons[0].message
    assert f"main's counted blocks served {served} responses" in v.reasons[0].message
    # a pool that read every counted response is not this fault (whatever else its grades say)
    d["parity"]["server"]["graded"]["counted"] = {"main": served, "candidate": served}
    assert "served-tokens-ungraded" not in [x.code for x in decide(d).reasons]
