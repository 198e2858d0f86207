"""The console's rules: pure functions over typed data, no I/O, no clock, no containers.

Four rooms, read in this order; a room imports only from itself and the rooms before it
(``tests/test_structure.py`` holds it to that):

- ``statistics``: numbers in, numbers out (medians and intervals, confidence sequences, change points);
- ``records``: what a round measured and what the gate decided, as typed values (receipt, verdict,
  rules, parity figures, a matrix's cells);
- ``decisions``: the gate and what it reads (parity grading, the reps that count, guards, speed,
  noise and matrix deciders, the kinds of round);
- ``provenance``: where a figure came from and what it is judged against (ledger, pins, identity,
  reruns, main's history, bisection).
"""
