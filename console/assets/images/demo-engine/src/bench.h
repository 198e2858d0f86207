/* The timing harness: the one place that reads the clock and prints the result. */
#ifndef DEMO_BENCH_H
#define DEMO_BENCH_H

/* Decodes the i-th timed token. */
typedef void (*bench_step_fn)(void *ctx, int i);

/* Times step(ctx, 0) .. step(ctx, tokens - 1) and prints the BENCH_RESULT line.
 * Returns 0, or -1 when the clock failed. */
int bench_run(int depth, int tokens, const char *context, const char *shortcut,
              bench_step_fn step, void *ctx);

#endif
