/* The measuring apparatus: times the decode section and prints the single
 * BENCH_RESULT line of PROTOCOL.md. Protected in the profile: a candidate that
 * edits this file is refused, so the ruler cannot move with the engine. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <stdio.h>
#include <time.h>

static int now(double *t)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return -1;
    *t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    return 0;
}

int bench_run(int depth, int tokens, const char *context, const char *shortcut,
              bench_step_fn step, void *ctx)
{
    double t0, t1;
    if (now(&t0) != 0) return -1;
    for (int i = 0; i < tokens; i++) step(ctx, i);
    if (now(&t1) != 0 || !(t1 > t0)) return -1;
    double elapsed = t1 - t0;
    /* %.9g keeps value == tokens / elapsed_s far inside the protocol's 1 %. */
    printf("BENCH_RESULT {\"metric\": \"decode_tok_s\", \"value\": %.9g, \"tokens\": %d, "
           "\"elapsed_s\": %.9g, \"depth\": %d, \"context\": \"%s\", \"shortcut\": \"%s\"}\n",
           tokens / elapsed, tokens, elapsed, depth, context, shortcut);
    fflush(stdout);
    return 0;
}
