"""The serving stage: one server per build, checked before timing, then blocks of requests as reps,
and what they served graded after them.

A block is the serving round's rep: the same requests (seeded by the block's pair, so both builds
of a pair answer identical work) driven through a build's server by the console's own load client
(``console.serving.client``), at the profile's concurrency or arrival rate. Its figures (TTFT, ITL,
TPOT, throughput; ``core.decisions.serving``) go into the rep; its scored metric is the rep's value,
so the pairs, the sequential decision, the tiers and the ledger are the speed round's own.

- ``servers``: each build's server started, frozen while the other runs, stopped; a dead one named
  with its log (``ServerDown``);
- ``draw``: the timed workload's seed, drawn when the blocks begin, and each block's requests;
- ``check``: greedy completions through each server against the reference's tokens, before timing;
- ``blocks``: one block timed through a build's server, judged like a rep;
- ``record``: what a block leaves behind: its figures in the receipt, its served tokens on disk;
- ``grade``: the served tokens of the counted blocks teacher-forced after the blocks.

The pure pieces (the client, the workloads, the block metrics) are ``console.serving``'s; this
package runs them on the round's runtime and builds.
"""
