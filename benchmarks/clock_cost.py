"""What the console's clock costs.

For each sealed, console-timed round in the results directories given: the pair SD of the timed log
ratios on the console's clock (the figure the verdict decides on) against the same pairs on the
engine's own clock, and how far the two clocks are apart per run (the console's spans the first
chunk's write to the last logit's read; the engine's, its first read of ``go`` to its last write).

    .venv/bin/python benchmarks/clock_cost.py results/demo results/llama-cpp

The pairs are the ones the verdict counted (``counting.counted`` and ``counting.pairs_of``, the
gate's own functions), so the two SDs are of the same reps, side by side.

Both clocks include the lock-step itself (a decode section's one write and one read per id). What
that costs alone is measured with ``--echo``: the console's own ``runtime.handover.drive`` against
a process that answers every chunk at once, through the same FIFOs (a Python process: an upper
bound on the pipe's cost, which a C engine pays less of).

    .venv/bin/python benchmarks/clock_cost.py --echo
"""
from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.core.decisions.counting import counted, pairs_of  # noqa: E402
from console.results.store import ledger_receipts  # noqa: E402


def engine_rate(rep) -> float:
    return rep.tokens / float(rep.reported["elapsed_s"])


def describe(receipt) -> str | None:
    c = counted(receipt, receipt.rules)
    pairs = pairs_of(c)
    if len(pairs) < 2 or not all(m.console_timed and x.console_timed for m, x in pairs):
        return None
    console = [math.log(x.value / m.value) for m, x in pairs]
    engine = [math.log(engine_rate(x) / engine_rate(m)) for m, x in pairs]
    timed = [r for reps in c.valid.values() for r in reps if r.console_timed and r.reported]
    share = sorted(1 - float(r.reported["elapsed_s"]) / r.section_s for r in timed)
    gap_ms = [1e3 * (r.section_s - float(r.reported["elapsed_s"])) for r in timed]
    return (f"{receipt.round_id} {receipt.profile.name} ({receipt.runtime.kind}): {len(pairs)} pairs, pair SD "
            f"console {statistics.stdev(console):.2%} vs engine {statistics.stdev(engine):.2%}; the engine's clock "
            f"under the console's by {statistics.median(share):.2%} median, {share[-1]:.2%} at most; console - "
            f"engine {statistics.median(gap_ms):.2f} ms median per run (SD {statistics.stdev(gap_ms):.2f} ms) over "
            f"{len(timed)} counted runs")


ECHO = r"""
import os, sys
d, n, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
go = os.open(d + "/go", os.O_RDONLY); done = os.open(d + "/done", os.O_WRONLY)
buf = b""
for _ in range(n):
    while b"\n" not in buf:
        buf += os.read(go, 65536)
    _, _, buf = buf.partition(b"\n")
    os.write(done, b"0\n")
os.write(done, bytes(4 * vocab))
"""


def echo(chunks: int = 768, vocab: int = 262144, runs: int = 20) -> None:
    """The handover's own cost per chunk and for the final logits, against an engine that does nothing."""
    import subprocess
    import tempfile
    import time
    from console.runtime.handover import drive, make_fifos
    per_chunk, sections = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            make_fifos(Path(d))
            proc = subprocess.Popen([sys.executable, "-c", ECHO, d, str(chunks), str(vocab)])
            h = drive(Path(d), [[7]] * chunks, vocab, lambda: proc.poll() is not None, time.monotonic() + 60)
            proc.wait()
            if h.error:
                raise SystemExit(f"echo: {h.error}")
            sections.append(h.section_s)
            per_chunk.append(1e6 * h.section_s / chunks)
    print(f"echo: {chunks} one-id chunks and {4 * vocab / 2**20:.0f} MiB of logits per section, {runs} sections: "
          f"{statistics.median(per_chunk):.1f} us per chunk median (SD {statistics.stdev(per_chunk):.1f} us), "
          f"section {1e3 * statistics.median(sections):.1f} ms median")


def main(dirs: list[str]) -> int:
    if dirs == ["--echo"]:
        echo(chunks=1, runs=20)
        echo()
        return 0
    said = 0
    for d in dirs:
        receipts = ledger_receipts(d)
        for rid in receipts:
            receipt = receipts[rid]
            line = describe(receipt)
            if line:
                print(line)
                said += 1
    if not said:
        print("no console-timed round with two or more counted pairs in " + ", ".join(dirs), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["results/demo"]))
