/* Weights, the decode path (bench) and the forward path (logits).
 *
 * Both paths compute the same math in the same per-output summation order, so
 * the decode path's logits are bitwise equal to the forward path's: any
 * difference between the two is a bug, never rounding. */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per-tensor gains: a weight is u * gain / sqrt(fan_in), u uniform on [-1, 1). */
#define GAIN_EMB 1.0
#define GAIN_Q 2.5
#define GAIN_K 2.5
#define GAIN_V 1.7
#define GAIN_O 1.0
#define GAIN_W1 1.7
#define GAIN_W3 1.7
#define GAIN_W2 1.0
#define GAIN_HEAD 5.0

/* ---- weights ----------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The top 24 bits of each draw give an integer in [-2^23, 2^23); the product
 * with the scale is formed in double and rounded once to float, which the
 * reference reproduces exactly. */
static void fill(float *w, size_t n, double gain, double fan_in, uint64_t *state)
{
    double scale = gain / sqrt(fan_in) / 8388608.0;
    for (size_t i = 0; i < n; i++) {
        int64_t k = (int64_t)(splitmix64(state) >> 40) - (1 << 23);
        w[i] = (float)((double)k * scale);
    }
}

int model_init(Model *m)
{
    size_t per_layer = 4 * DIM * DIM + 3 * (size_t)FFN * DIM;
    size_t total = 2 * (size_t)VOCAB * DIM + LAYERS * per_layer;
    float *p = malloc(total * sizeof(float));
    if (!p) return -1;
    m->pool = p;
    uint64_t st = MODEL_SEED;
    /* The draw order is part of the model's specification. */
    m->emb = p; fill(p, (size_t)VOCAB * DIM, GAIN_EMB, 1.0, &st); p += (size_t)VOCAB * DIM;
    for (int l = 0; l < LAYERS; l++) {
        Layer *L = &m->layer[l];
        L->wq = p; fill(p, DIM * DIM, GAIN_Q, DIM, &st); p += DIM * DIM;
        L->wk = p; fill(p, DIM * DIM, GAIN_K, DIM, &st); p += DIM * DIM;
        L->wv = p; fill(p, DIM * DIM, GAIN_V, DIM, &st); p += DIM * DIM;
        L->wo = p; fill(p, DIM * DIM, GAIN_O, DIM, &st); p += DIM * DIM;
        L->w1 = p; fill(p, (size_t)FFN * DIM, GAIN_W1, DIM, &st); p += (size_t)FFN * DIM;
        L->w3 = p; fill(p, (size_t)FFN * DIM, GAIN_W3, DIM, &st); p += (size_t)FFN * DIM;
        L->w2 = p; fill(p, (size_t)DIM * FFN, GAIN_W2, FFN, &st); p += (size_t)DIM * FFN;
    }
    m->head = p; fill(p, (size_t)VOCAB * DIM, GAIN_HEAD, DIM, &st);
    return 0;
}

void model_free(Model *m)
{
    free(m->pool);
    m->pool = NULL;
}

/* ---- KV cache ---------------------------------------------------------- */

int kv_init(KVCache *kv, int cap)
{
    size_t n = (size_t)LAYERS * (size_t)cap * DIM;
    kv->cap = cap;
    kv->len = 0;
    kv->k = malloc(n * sizeof(float));
    kv->v = malloc(n * sizeof(float));
    if (!kv->k || !kv->v) {
        kv_free(kv);
        return -1;
    }
    return 0;
}

/* Called through a volatile pointer so the compiler cannot fold malloc+memset
 * into calloc, whose fresh pages stay unmapped: the zero-filled prefix must be
 * resident, as a real cache of that depth would be. */
static void *(*volatile memset_resident)(void *, int, size_t) = memset;

void kv_zero_fill(KVCache *kv, int n)
{
    for (int l = 0; l < LAYERS; l++) {
        size_t off = (size_t)l * kv->cap * DIM;
        memset_resident(kv->k + off, 0, (size_t)n * DIM * sizeof(float));
        memset_resident(kv->v + off, 0, (size_t)n * DIM * sizeof(float));
    }
    kv->len = n;
}

void kv_free(KVCache *kv)
{
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

static float *kv_row(float *base, const KVCache *kv, int layer, int pos)
{
    return base + ((size_t)layer * kv->cap + (size_t)pos) * DIM;
}

/* ---- shared building blocks -------------------------------------------- */

/* Matmul inputs are rounded to a half-precision significand (11 bits, round to
 * nearest even; float32's exponent range is kept), as engines that feed fp16
 * activations to their kernels do. This is the engine's deliberate, documented
 * departure from the float64 reference. */
static void round_fp16(float *x, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u += 0x0FFFu + ((u >> 13) & 1u);
        u &= ~0x1FFFu;
        memcpy(&x[i], &u, sizeof u);
    }
}

static void rmsnorm(float *out, const float *x)
{
    float ss = 0.0f;
    for (int i = 0; i < DIM; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / DIM + NORM_EPS);
    for (int i = 0; i < DIM; i++) out[i] = x[i] * r;
    round_fp16(out, DIM);
}

/* out[i] = sum_j w[i][j] x[j], j ascending. */
static void matvec(float *restrict out, const float *restrict w, const float *restrict x,
                   int rows, int cols)
{
    for (int i = 0; i < rows; i++) {
        const float *wi = w + (size_t)i * cols;
        float s = 0.0f;
        for (int j = 0; j < cols; j++) s += wi[j] * x[j];
        out[i] = s;
    }
}

/* Rotates pairs (2i, 2i+1) of every head by pos * base^(-2i/HEAD_DIM). */
static void rope(float *x, int pos)
{
    for (int i = 0; i < HEAD_DIM / 2; i++) {
        double theta = pow(ROPE_BASE, -2.0 * i / HEAD_DIM);
        double ang = (double)pos * theta;
        float c = (float)cos(ang), s = (float)sin(ang);
        for (int h = 0; h < HEADS; h++) {
            float *p = x + h * HEAD_DIM + 2 * i;
            float x0 = p[0], x1 = p[1];
            p[0] = x0 * c - x1 * s;
            p[1] = x0 * s + x1 * c;
        }
    }
}

/* Scores of one head's query against cached keys [0, n), then the softmax
 * numerators in place; returns their sum (j ascending). */
static float scores_softmax(float *restrict sc, const float *restrict q, const KVCache *kv,
                            int layer, int h, int n)
{
    const float scale = 1.0f / sqrtf((float)HEAD_DIM);
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        const float *kj = kv_row(kv->k, kv, layer, j) + h * HEAD_DIM;
        float s = 0.0f;
        for (int d = 0; d < HEAD_DIM; d++) s += q[d] * kj[d];
        s *= scale;
        sc[j] = s;
        if (s > mx) mx = s;
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
    }
    return sum;
}

static void ffn(float *x, float *xn, float *g, float *u, const Layer *L)
{
    float y[DIM];
    rmsnorm(xn, x);
    matvec(g, L->w1, xn, FFN, DIM);
    matvec(u, L->w3, xn, FFN, DIM);
    for (int i = 0; i < FFN; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    round_fp16(g, FFN);
    matvec(y, L->w2, g, DIM, FFN);
    for (int i = 0; i < DIM; i++) x[i] += y[i];
}

static void output_head(float *logits, const Model *m, const float *x)
{
    float xn[DIM];
    rmsnorm(xn, x);
    matvec(logits, m->head, xn, VOCAB, DIM);
}

/* ---- decode path (bench) ----------------------------------------------- */

static float *scratch_scores;   /* [cap] softmax numerators */
static int scratch_cap;

static int ensure_scratch(int n)
{
    if (n <= scratch_cap) return 0;
    float *p = realloc(scratch_scores, (size_t)n * sizeof(float));
    if (!p) return -1;
    scratch_scores = p;
    scratch_cap = n;
    return 0;
}

/* One head of attention for the token at cache slot n-1 over slots [0, n):
 * out[d] = (sum_j e_j * V[j][d]) / sum_j e_j, j ascending for every d. */
static void attend_decode(float *out, const float *q, const KVCache *kv, int layer, int h, int n)
{
    float *e = scratch_scores;
    float sum = scores_softmax(e, q, kv, layer, h, n);
    for (int d = 0; d < HEAD_DIM; d++) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++)
            acc += e[j] * kv_row(kv->v, kv, layer, j)[h * HEAD_DIM + d];
        out[d] = acc / sum;
    }
}

void decode_step(const Model *m, KVCache *kv, int token, int pos, float *logits)
{
    float x[DIM], xn[DIM], q[DIM], k[DIM], att[DIM], y[DIM], g[FFN], u[FFN];
    int slot = kv->len, n = slot + 1;
    if (ensure_scratch(n) != 0) abort();
    memcpy(x, m->emb + (size_t)token * DIM, sizeof x);
    for (int l = 0; l < LAYERS; l++) {
        const Layer *L = &m->layer[l];
        rmsnorm(xn, x);
        matvec(q, L->wq, xn, DIM, DIM);
        matvec(k, L->wk, xn, DIM, DIM);
        matvec(kv_row(kv->v, kv, l, slot), L->wv, xn, DIM, DIM);
        rope(q, pos);
        rope(k, pos);
        memcpy(kv_row(kv->k, kv, l, slot), k, sizeof k);
        for (int h = 0; h < HEADS; h++)
            attend_decode(att + h * HEAD_DIM, q + h * HEAD_DIM, kv, l, h, n);
        round_fp16(att, DIM);
        matvec(y, L->wo, att, DIM, DIM);
        for (int i = 0; i < DIM; i++) x[i] += y[i];
        ffn(x, xn, g, u, L);
    }
    kv->len = n;
    if (logits) output_head(logits, m, x);
}

/* ---- forward path (logits) --------------------------------------------- */

/* Same sum as attend_decode, accumulated j-outer: each out[d] still adds its
 * terms in j order, so the result is bitwise the same. */
static void attend_row(float *restrict out, float *restrict e, const float *restrict q,
                       const KVCache *kv, int layer, int h, int n)
{
    float acc[HEAD_DIM] = {0};
    float sum = scores_softmax(e, q, kv, layer, h, n);
    for (int j = 0; j < n; j++) {
        const float *vj = kv_row(kv->v, kv, layer, j) + h * HEAD_DIM;
        for (int d = 0; d < HEAD_DIM; d++) acc[d] += e[j] * vj[d];
    }
    for (int d = 0; d < HEAD_DIM; d++) out[d] = acc[d] / sum;
}

int forward_logits(const Model *m, const int *tokens, int n,
                   const int *prefix, int nprefix, float *out)
{
    KVCache kv;
    float *x = malloc((size_t)n * DIM * sizeof(float));
    float *q = malloc((size_t)n * DIM * sizeof(float));
    float *e = malloc((size_t)n * sizeof(float));
    if (!x || !q || !e || kv_init(&kv, n) != 0) {
        free(x); free(q); free(e);
        return -1;
    }
    float xn[DIM], att[DIM], y[DIM], g[FFN], u[FFN];
    for (int p = 0; p < n; p++) memcpy(x + (size_t)p * DIM, m->emb + (size_t)tokens[p] * DIM, DIM * sizeof(float));
    for (int l = 0; l < LAYERS; l++) {
        const Layer *L = &m->layer[l];
        /* Q, K, V for the whole prefix first, then attention row by row. */
        for (int p = 0; p < n; p++) {
            float *qp = q + (size_t)p * DIM, *kp = kv_row(kv.k, &kv, l, p);
            rmsnorm(xn, x + (size_t)p * DIM);
            matvec(qp, L->wq, xn, DIM, DIM);
            matvec(kp, L->wk, xn, DIM, DIM);
            matvec(kv_row(kv.v, &kv, l, p), L->wv, xn, DIM, DIM);
            rope(qp, p);
            rope(kp, p);
        }
        for (int p = 0; p < n; p++) {
            float *xp = x + (size_t)p * DIM;
            for (int h = 0; h < HEADS; h++)
                attend_row(att + h * HEAD_DIM, e, q + (size_t)p * DIM + h * HEAD_DIM, &kv, l, h, p + 1);
            round_fp16(att, DIM);
            matvec(y, L->wo, att, DIM, DIM);
            for (int i = 0; i < DIM; i++) xp[i] += y[i];
            ffn(xp, xn, g, u, L);
        }
    }
    for (int i = 0; i < nprefix; i++)
        output_head(out + (size_t)i * VOCAB, m, x + (size_t)(prefix[i] - 1) * DIM);
    kv_free(&kv);
    free(x); free(q); free(e);
    return 0;
}
