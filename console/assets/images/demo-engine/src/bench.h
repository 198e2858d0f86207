/* The timing harness: the one place that reads the clock, speaks the handover
 * and prints the result. */
#ifndef DEMO_BENCH_H
#define DEMO_BENCH_H

/* Decodes `token`, the i-th token of the section, at position depth + i and
 * leaves its next-token logits in the buffer given to bench_handover. */
typedef void (*bench_step_fn)(void *ctx, int i, int token);

/* The section, handed over by the console through the FIFOs `dir`/go and
 * `dir`/done (docs/PROTOCOL.md, "The handover"); the demo's metric is
 * decode_tok_s, so every chunk is one token id. Call it once everything else
 * is set up: it opens `go` (waiting for the console), then `done`; for each of
 * the `tokens` chunks it calls step(ctx, i, id) and answers with the argmax of
 * `logits` (`vocab` floats); after the last answer it sends those logits, raw
 * float32 little-endian, and prints the BENCH_RESULT line with its own timing.
 * Returns 0, or -1 when the clock failed. A bad chunk (not one id in
 * [0, vocab)) or a handover that cannot be opened exits with status 2; a
 * console that goes away mid-section exits with status 3. */
int bench_handover(const char *dir, int depth, int tokens, const char *context, const char *shortcut,
                   int vocab, bench_step_fn step, void *ctx, const float *logits);

#endif
