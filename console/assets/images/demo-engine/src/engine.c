/* The demo engine's command line: `bench` and `logits` as docs/PROTOCOL.md
 * specifies. Everything but the BENCH_RESULT line goes to stderr. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "model.h"
#include "npy.h"

#define MAX_DEPTHS 64

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "engine: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(2);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: engine bench --depth D --tokens N --context seek|doc --doc PATH --handover DIR [--out DIR]\n"
            "       engine logits --doc PATH --depths D1,D2,... --rows R --out DIR\n");
    exit(2);
}

static int parse_int(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 1000000000L) die("bad %s", what);
    return (int)v;
}

/* Reads whitespace-separated decimal token ids, each in [0, VOCAB). */
static int *read_doc(const char *path, int *n_out)
{
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open document %s", path);
    int cap = 4096, n = 0;
    int *ids = malloc((size_t)cap * sizeof(int));
    char word[32];
    int c, len = 0;
    if (!ids) die("%s", "out of memory");
    do {
        c = fgetc(f);
        if (c == EOF || c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            if (len == 0) continue;
            word[len] = 0;
            len = 0;
            char *end;
            long v = strtol(word, &end, 10);
            if (*end || v < 0 || v >= VOCAB) die("token id out of range in document: %s", word);
            if (n == cap) {
                cap *= 2;
                ids = realloc(ids, (size_t)cap * sizeof(int));
                if (!ids) die("%s", "out of memory");
            }
            ids[n++] = (int)v;
        } else {
            if (len + 1 >= (int)sizeof word) die("malformed token in document %s", path);
            word[len++] = (char)c;
        }
    } while (c != EOF);
    fclose(f);
    if (n == 0) die("document %s holds no tokens", path);
    *n_out = n;
    return ids;
}

static void out_path(char *buf, size_t size, const char *dir, const char *name)
{
    if ((size_t)snprintf(buf, size, "%s/%s", dir, name) >= size) die("output path too long: %s", dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) die("cannot create output directory %s", dir);
}

/* ---- bench ------------------------------------------------------------- */

typedef struct {
    const Model *m;
    KVCache *kv;
    int depth;
    float *logits;
} BenchCtx;

/* Teacher-forced: the i-th token the console hands over, at position depth + i. */
static void bench_step(void *p, int i, int token)
{
    BenchCtx *c = p;
    decode_step(c->m, c->kv, token, c->depth + i, c->logits);
}

static int cmd_bench(int argc, char **argv)
{
    const char *doc_path = NULL, *handover = NULL, *context = NULL;
    int depth = -1, tokens = -1;
    for (int i = 0; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--depth")) depth = parse_int(argv[++i], "--depth");
        else if (!strcmp(argv[i], "--tokens")) tokens = parse_int(argv[++i], "--tokens");
        else if (!strcmp(argv[i], "--context")) context = argv[++i];
        else if (!strcmp(argv[i], "--doc")) doc_path = argv[++i];
        else if (!strcmp(argv[i], "--handover")) handover = argv[++i];
        else if (!strcmp(argv[i], "--out")) ++i;     /* accepted; the bench writes nothing there */
        else usage();
    }
    if (!doc_path || !handover || !context || depth < 0 || tokens < 1) usage();
    int seek = !strcmp(context, "seek");
    if (!seek && strcmp(context, "doc")) die("--context must be seek or doc, not %s", context);

    int ndoc;
    int *doc = read_doc(doc_path, &ndoc);
    if (!seek && depth > ndoc) die("document %s is shorter than depth", doc_path);

    Model m;
    KVCache kv;
    if (model_init(&m) != 0 || kv_init(&kv, depth + tokens) != 0) die("%s", "out of memory");
    if (seek) {
        kv_zero_fill(&kv, depth);
    } else {
        /* Untimed: the prefix runs through the same decode path it will be timed on. */
        for (int p = 0; p < depth; p++) decode_step(&m, &kv, doc[p], p, NULL);
    }
    static float logits[VOCAB];
    BenchCtx ctx = {&m, &kv, depth, logits};
    if (bench_handover(handover, depth, tokens, context, seek ? "seek" : "none", VOCAB, bench_step, &ctx,
                       logits) != 0)
        die("%s", "clock failed");
    kv_free(&kv);
    model_free(&m);
    free(doc);
    return 0;
}

/* ---- logits ------------------------------------------------------------ */

static int cmd_logits(int argc, char **argv)
{
    const char *doc_path = NULL, *out = NULL, *depths_arg = NULL;
    int rows = -1;
    for (int i = 0; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--doc")) doc_path = argv[++i];
        else if (!strcmp(argv[i], "--depths")) depths_arg = argv[++i];
        else if (!strcmp(argv[i], "--rows")) rows = parse_int(argv[++i], "--rows");
        else if (!strcmp(argv[i], "--out")) out = argv[++i];
        else usage();
    }
    if (!doc_path || !out || !depths_arg || rows < 1) usage();

    int depths[MAX_DEPTHS], nd = 0, maxd = 0;
    char buf[1024];
    if (strlen(depths_arg) >= sizeof buf) die("%s", "--depths too long");
    strcpy(buf, depths_arg);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (nd == MAX_DEPTHS) die("%s", "too many depths");
        depths[nd] = parse_int(tok, "--depths");
        if (depths[nd] < rows) die("every depth must be >= rows (%s)", depths_arg);
        if (depths[nd] > maxd) maxd = depths[nd];
        nd++;
    }
    if (nd == 0) usage();

    int ndoc;
    int *doc = read_doc(doc_path, &ndoc);
    if (maxd > ndoc) die("document %s is shorter than the deepest depth", doc_path);
    char path[4096];
    out_path(path, sizeof path, out, "logits.npy");

    /* Row r of depth d: the prediction after a prefix of d - rows + 1 + r tokens. */
    int np = nd * rows;
    int *prefix = malloc((size_t)np * sizeof(int));
    float *res = malloc((size_t)np * VOCAB * sizeof(float));
    Model m;
    if (!prefix || !res || model_init(&m) != 0) die("%s", "out of memory");
    for (int i = 0; i < nd; i++)
        for (int r = 0; r < rows; r++) prefix[i * rows + r] = depths[i] - rows + 1 + r;
    if (forward_logits(&m, doc, maxd, prefix, np, res) != 0) die("%s", "out of memory");
    long shape[3] = {nd, rows, VOCAB};
    if (npy_write_f32(path, res, 3, shape) != 0) die("cannot write %s", path);
    model_free(&m);
    free(prefix); free(res); free(doc);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) usage();
    if (!strcmp(argv[1], "bench")) return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(argv[1], "logits")) return cmd_logits(argc - 2, argv + 2);
    usage();
    return 2;
}
