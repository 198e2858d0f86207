/* The demo model: a 4-layer decoder-only transformer with deterministic weights.
 * The full specification is in README.md ("Model"); profiles/demo/reference_model.py
 * implements the same specification independently in float64. */
#ifndef DEMO_MODEL_H
#define DEMO_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define VOCAB 2048
#define DIM 128
#define LAYERS 4
#define HEADS 4
#define HEAD_DIM (DIM / HEADS)
#define FFN 384
#define ROPE_BASE 10000.0
#define NORM_EPS 1e-5f
#define MODEL_SEED 0x5EEDDE30ull

typedef struct {
    float *wq, *wk, *wv, *wo;   /* [DIM][DIM], row = output */
    float *w1, *w3;             /* [FFN][DIM] */
    float *w2;                  /* [DIM][FFN] */
} Layer;

typedef struct {
    float *emb;                 /* [VOCAB][DIM] */
    Layer layer[LAYERS];
    float *head;                /* [VOCAB][DIM] */
    float *pool;                /* owns every tensor above */
} Model;

/* KV cache: float32, layout [layer][position][DIM] for K and for V, so one
 * position costs 2 * LAYERS * DIM * sizeof(float) = KV_BYTES_PER_POSITION. */
#define KV_BYTES_PER_POSITION (2 * LAYERS * DIM * sizeof(float))

typedef struct {
    int cap;                    /* positions allocated */
    int len;                    /* positions filled */
    float *k, *v;
} KVCache;

int model_init(Model *m);
void model_free(Model *m);

int kv_init(KVCache *kv, int cap);
void kv_zero_fill(KVCache *kv, int n);
void kv_free(KVCache *kv);

/* Decode path (bench): one token through every layer; attends over the kv->len
 * cached positions plus itself, appends its K/V, and applies RoPE at `pos`.
 * Writes the next-token logits when `logits` is not NULL. */
void decode_step(const Model *m, KVCache *kv, int token, int pos, float *logits);

/* Forward path (logits): runs tokens[0..n) layer by layer over the whole prefix
 * and writes the next-token logits after each prefix length in `prefix`
 * (each in [1, n]) to out[i * VOCAB ...]. Returns 0, or -1 when out of memory. */
int forward_logits(const Model *m, const int *tokens, int n,
                   const int *prefix, int nprefix, float *out);

#endif
