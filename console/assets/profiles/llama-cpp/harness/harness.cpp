// The llama.cpp harness: the console's bench, logits and tokenize commands over
// llama.cpp's public C API (include/llama.h). It belongs to the profile, not to an
// engine tree: the console builds it in each engine's image against that engine's
// library, so every build is measured by the same code.
//
//   harness bench    --model M --doc D --depth N --tokens T --metric decode_tok_s|prefill_tok_s
//                    --fill prefill|decode --threads K --handover DIR [--repeat R] [--out DIR]
//   harness logits   --model M --doc D --depths 8,64,... --rows R --threads K --out DIR
//   harness tokenize --model M --text FILE --out DIR
//   harness generate --model M --prompts FILE --tokens N --threads K --out DIR [--stop newline]
//   harness generate --model M --doc D --at 64,128,... --tokens N --threads K --out DIR [--follow F]
//   harness grade    --model M --requests FILE --threads K --out DIR
//   (any command) --gpu-layers N: offload N layers (builds with a GPU backend)
//   (any command) --flash-attn 0|1, --batch N: kernel settings that should not change the
//                 result (the reference's kernel-to-kernel spread is measured across them);
//                 without them the engine's own defaults apply
//
// bench sets everything up untimed (the model, the context, the document's first N tokens
// through the --fill path), then takes its section through the handover of docs/PROTOCOL.md:
// it opens DIR/go (waiting for the console), then DIR/done, and reads the section's token ids
// from go, one line (a chunk) at a time; it never holds a chunk before answering the previous
// one. prefill_tok_s: one chunk of T ids per repeat, run as one batch at positions N.. (in
// batches of --batch when T is larger), its last position's logits kept; decode_tok_s: one id
// per chunk, decoded at the next position (teacher-forced). --repeat R: R x T ids in all, the
// context cut back to N after every T (inside the section, on both clocks). After every chunk
// it writes the argmax of the chunk's last position (lowest id on ties) and a newline to done;
// after the last, that position's logits, n_vocab raw float32 little-endian values. Then the
// BENCH_RESULT line with its own timing of the section (tokens = R x T), a cross-check on the
// console's clock, which decides. A chunk that is not the right count of ids in [0, n_vocab)
// exits 2; a console gone mid-section (go closed early, done unwritable) exits 3. No file is
// written: --out is accepted and unused, the console writes bench_logits.npy from what it read.
//
// generate is greedy (argmax, temperature 0): each prompt starts from an empty context and
// continues for N tokens or to an end-of-generation token (or a newline with --stop
// newline). --prompts: one prompt per line, with \n, \t and \\ escapes. --doc/--at:
// the prompt is the document's first p tokens. It writes generated.txt: per prompt, one
// line of the generated token ids, a tab, and their text with the same escapes. --follow F
// (a generated.txt of the same --at): each continuation is forced to F's tokens, and the
// line holds this engine's own argmax at each of those positions instead.
//
// grade (teacher forcing): FILE holds one served request per line, its prompt's token ids, a
// tab, and the ids a server answered. The prompt and the served tokens are decoded together; at
// each served position this engine's own argmax is written with how far the served token's logit
// is below it (nats of log-probability: 0 when the served token is the argmax). graded.txt: per
// request, one line of `best:gap` per served token, a tab, and the hex of the served ids' text
// (the bytes a server should have streamed for them). A request whose prompt is the previous
// request's reuses that prompt's cache: only its last token and the served tokens are decoded
// again (the console sends each prompt's answers side by side).
//
// Exit status: 0 success, 2 bad input (named on stderr), 3 the engine failed.
#include "llama.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(int code, const std::string & msg) {
    std::fprintf(stderr, "harness: %s\n", msg.c_str());
    std::exit(code);
}

std::map<std::string, std::string> parse_args(int argc, char ** argv) {
    std::map<std::string, std::string> a;
    for (int i = 2; i < argc; i += 2) {
        if (std::strncmp(argv[i], "--", 2) != 0 || i + 1 >= argc) die(2, std::string("bad argument ") + argv[i]);
        a[argv[i] + 2] = argv[i + 1];
    }
    return a;
}

std::string need(const std::map<std::string, std::string> & a, const char * k) {
    auto it = a.find(k);
    if (it == a.end()) die(2, std::string("missing --") + k);
    return it->second;
}

long need_int(const std::map<std::string, std::string> & a, const char * k, long lo) {
    std::string s = need(a, k);
    char * end = nullptr;
    long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end || v < lo) die(2, "--" + std::string(k) + " must be an integer >= " + std::to_string(lo));
    return v;
}

int g_gpu_layers = 0;   // --gpu-layers N (GPU builds): layers offloaded
int g_flash_attn = -1;  // --flash-attn 0|1; -1: the engine's default
int g_batch = 512;      // --batch N: logical and physical batch size

// llama.cpp replaced the flash-attention switch (bool flash_attn -> enum flash_attn_type,
// DISABLED 0 / ENABLED 1): set whichever field this engine's header declares.
template <typename P> auto set_flash_attn(P & p, int on, int) -> decltype(p.flash_attn_type, void()) {
    p.flash_attn_type = (decltype(p.flash_attn_type)) on;
}
template <typename P> auto set_flash_attn(P & p, int on, long) -> decltype(p.flash_attn, void()) {
    p.flash_attn = on != 0;
}

void quiet_log(ggml_log_level level, const char * text, void *) {
    // llama.cpp is chatty on load; keep warnings and errors only
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

struct Engine {
    llama_model * model = nullptr;
    llama_context * ctx = nullptr;
    const llama_vocab * vocab = nullptr;
    int n_vocab = 0;
    int n_batch = g_batch;
    int threads = 1;

    Engine(const std::string & path, int n_ctx, int threads_, bool with_ctx) : threads(threads_) {
        llama_log_set(quiet_log, nullptr);
        llama_backend_init();
        llama_model_params mp = llama_model_default_params();
        mp.n_gpu_layers = g_gpu_layers;
        model = llama_model_load_from_file(path.c_str(), mp);
        if (!model) die(3, "cannot load the model " + path);
        vocab = llama_model_get_vocab(model);
        n_vocab = llama_vocab_n_tokens(vocab);
        if (with_ctx) new_context(n_ctx);
    }
    // A fresh, empty context (the previous one is freed): no state carries across prompts.
    void new_context(int n_ctx) {
        if (ctx) llama_free(ctx);
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = n_ctx;
        cp.n_batch = n_batch;
        cp.n_ubatch = n_batch;
        cp.n_threads = threads;
        cp.n_threads_batch = threads;
        cp.no_perf = true;
        cp.swa_full = true;   // every position kept, so the context can be cut back (generate --at)
        if (g_flash_attn >= 0) set_flash_attn(cp, g_flash_attn, 0);
        ctx = llama_init_from_model(model, cp);
        if (!ctx) die(3, "cannot create a context of " + std::to_string(n_ctx) + " positions");
    }
    ~Engine() {
        if (ctx) llama_free(ctx);
        if (model) llama_model_free(model);
        llama_backend_free();
    }

    // Decode tokens[from, to) at their positions in chunks of n_batch; logits are kept for
    // the positions in `want` (absolute) and copied out in order of position. The token at
    // position pos is doc[pos - base] (base: the position of doc[0]).
    void run(const std::vector<llama_token> & doc, int from, int to, const std::vector<int> & want,
             std::vector<float> * out, int base = 0) {
        llama_batch batch = llama_batch_init(n_batch, 0, 1);
        size_t w = 0;
        for (int start = from; start < to; start += n_batch) {
            int n = std::min(n_batch, to - start);
            batch.n_tokens = n;
            std::vector<int> rows;
            for (int i = 0; i < n; i++) {
                int pos = start + i;
                batch.token[i] = doc[pos - base];
                batch.pos[i] = pos;
                batch.n_seq_id[i] = 1;
                batch.seq_id[i][0] = 0;
                bool keep = w < want.size() && want[w] == pos;
                batch.logits[i] = keep;
                if (keep) { rows.push_back(i); w++; }
            }
            if (llama_decode(ctx, batch) != 0) die(3, "llama_decode failed at position " + std::to_string(start));
            for (int i : rows) {
                const float * l = llama_get_logits_ith(ctx, i);
                if (!l) die(3, "no logits at batch row " + std::to_string(i));
                if (out) out->insert(out->end(), l, l + n_vocab);
            }
        }
        llama_batch_free(batch);
        if (w != want.size()) die(3, "internal: not every requested position was decoded");
    }
};

std::vector<llama_token> read_doc(const std::string & path, int n_vocab) {
    std::ifstream f(path);
    if (!f) die(2, "cannot read the document " + path);
    std::vector<llama_token> doc;
    long long v;
    while (f >> v) {
        if (v < 0 || v >= n_vocab)
            die(2, "document token " + std::to_string(v) + " at index " + std::to_string(doc.size()) +
                   " is outside the model's vocabulary of " + std::to_string(n_vocab));
        doc.push_back((llama_token) v);
    }
    if (!f.eof()) die(2, "the document " + path + " holds something other than token ids");
    return doc;
}

void write_npy(const std::string & path, const std::vector<float> & data, const std::vector<size_t> & shape) {
    std::string dims;
    for (size_t i = 0; i < shape.size(); i++) dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::ofstream f(path, std::ios::binary);
    if (!f) die(3, "cannot write " + path);
    const char magic[] = "\x93NUMPY\x01\x00";
    f.write(magic, 8);
    uint16_t hl = (uint16_t) header.size();
    f.write((const char *) &hl, 2);
    f.write(header.data(), header.size());
    f.write((const char *) data.data(), data.size() * sizeof(float));
    if (!f) die(3, "short write to " + path);
}

// ---- the handover (bench) ------------------------------------------------------------------

const size_t CHUNK_MAX = 64 << 10;      // bytes a chunk's line may take, its newline included

int open_fifo(const std::string & dir, const char * name, int flags) {
    std::string path = dir + "/" + name;
    for (;;) {
        int fd = open(path.c_str(), flags);
        if (fd >= 0) return fd;
        if (errno != EINTR) die(2, "handover: cannot open " + path + ": " + std::strerror(errno));
    }
}

void send_all(int fd, const void * data, size_t n) {
    const char * p = (const char *) data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die(3, std::string("handover: cannot write to done (") + (w < 0 ? std::strerror(errno) : "no progress") +
                           "): the console is gone");
        p += w;
        n -= (size_t) w;
    }
}

// The chunks as they arrive on go, one line each.
struct Chunks {
    int fd;
    std::string buf;

    // The next chunk's ids: exactly `count` decimal ids in [0, n_vocab), separated by single spaces.
    std::vector<llama_token> next(int chunk, size_t count, int n_vocab) {
        size_t nl;
        while ((nl = buf.find('\n')) == std::string::npos) {
            if (buf.size() >= CHUNK_MAX) die(2, "handover: chunk " + std::to_string(chunk) + " is longer than 64 KiB");
            char tmp[16384];
            ssize_t r = read(fd, tmp, sizeof tmp);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) die(3, "handover: the console closed go before chunk " + std::to_string(chunk) + " was whole");
            buf.append(tmp, (size_t) r);
        }
        std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        std::vector<llama_token> ids;
        size_t at = 0;
        for (;;) {
            size_t end = line.find(' ', at);
            std::string word = line.substr(at, end == std::string::npos ? std::string::npos : end - at);
            if (word.empty() || word.find_first_not_of("0123456789") != std::string::npos)
                die(2, "handover: chunk " + std::to_string(chunk) + " is not " + std::to_string(count) +
                       " token id(s) separated by single spaces: '" + line.substr(0, 40) + "'");
            long v = word.size() > 9 ? n_vocab : std::strtol(word.c_str(), nullptr, 10);
            if (v >= n_vocab)
                die(2, "handover: chunk " + std::to_string(chunk) + ": token id " + word + " is outside [0, " +
                       std::to_string(n_vocab) + ")");
            ids.push_back((llama_token) v);
            if (end == std::string::npos) break;
            at = end + 1;
        }
        if (ids.size() != count)
            die(2, "handover: chunk " + std::to_string(chunk) + " holds " + std::to_string(ids.size()) +
                   " token ids; this metric takes " + std::to_string(count) + " per chunk");
        return ids;
    }
};

int argmax(const std::vector<float> & row) {
    int best = 0;
    for (int v = 1; v < (int) row.size(); v++) if (row[v] > row[best]) best = v;  // ties: the lowest id
    return best;
}

int cmd_bench(const std::map<std::string, std::string> & a) {
    int depth = need_int(a, "depth", 0), tokens = need_int(a, "tokens", 1), threads = need_int(a, "threads", 1);
    int repeat = a.count("repeat") ? need_int(a, "repeat", 1) : 1;
    std::string metric = need(a, "metric"), fill = need(a, "fill"), dir = need(a, "handover");
    if (metric != "decode_tok_s" && metric != "prefill_tok_s") die(2, "--metric must be decode_tok_s or prefill_tok_s");
    if (fill != "prefill" && fill != "decode") die(2, "--fill must be prefill or decode");
    bool prefill = metric == "prefill_tok_s";
    Engine e(need(a, "model"), depth + tokens, threads, true);
    std::vector<llama_token> doc = read_doc(need(a, "doc"), e.n_vocab);
    if ((int) doc.size() < depth)
        die(2, "the document has " + std::to_string(doc.size()) + " tokens; depth " + std::to_string(depth) + " needs that many");

    // The context before the section: untimed, by the path --fill names.
    if (fill == "prefill") {
        if (depth > 0) e.run(doc, 0, depth, {}, nullptr);
    } else {
        for (int p = 0; p < depth; p++) e.run(doc, p, p + 1, {}, nullptr);
    }

    // The section: its tokens come from the console, one chunk at a time.
    std::signal(SIGPIPE, SIG_IGN);                      // a console gone fails the write: exit 3
    Chunks in{open_fifo(dir, "go", O_RDONLY), {}};      // waits for the console
    int done = open_fifo(dir, "done", O_WRONLY);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<float> last;
    int chunk = 0;
    for (int r = 0; r < repeat; r++) {
        if (r > 0 && !llama_memory_seq_rm(llama_get_memory(e.ctx), 0, depth, -1))
            die(3, "cannot cut the context back to depth " + std::to_string(depth) + " for a repeat");
        for (int p = depth; p < depth + tokens;) {
            std::vector<llama_token> ids = in.next(++chunk, prefill ? (size_t) tokens : 1, e.n_vocab);
            int n = (int) ids.size();
            last.clear();
            e.run(ids, p, p + n, {p + n - 1}, &last, p);
            std::string ack = std::to_string(argmax(last)) + "\n";
            send_all(done, ack.data(), ack.size());
            p += n;
        }
    }
    std::vector<unsigned char> raw(last.size() * 4);   // float32, little-endian
    for (size_t v = 0; v < last.size(); v++) {
        uint32_t u;
        std::memcpy(&u, &last[v], 4);
        for (int b = 0; b < 4; b++) raw[4 * v + b] = (unsigned char) (u >> (8 * b));
    }
    send_all(done, raw.data(), raw.size());
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    close(done);
    close(in.fd);
    long long total = (long long) tokens * repeat;
    std::printf("BENCH_RESULT {\"metric\": \"%s\", \"value\": %.6f, \"tokens\": %lld, \"elapsed_s\": %.6f, "
                "\"depth\": %d, \"context\": \"doc\", \"shortcut\": \"none\"}\n",
                metric.c_str(), total / elapsed, total, elapsed, depth);
    return 0;
}

std::vector<int> parse_depths(const std::string & s) {
    std::vector<int> d;
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ',')) {
        char * end = nullptr;
        long v = std::strtol(part.c_str(), &end, 10);
        if (part.empty() || *end || v < 1 || (!d.empty() && v <= d.back())) die(2, "--depths must be increasing positive integers");
        d.push_back((int) v);
    }
    if (d.empty()) die(2, "--depths is empty");
    return d;
}

int cmd_logits(const std::map<std::string, std::string> & a) {
    std::vector<int> depths = parse_depths(need(a, "depths"));
    int rows = need_int(a, "rows", 1), threads = need_int(a, "threads", 1);
    if (rows > depths.front()) die(2, "--rows must not exceed the smallest depth");
    int last = depths.back();
    Engine e(need(a, "model"), last, threads, true);
    std::vector<llama_token> doc = read_doc(need(a, "doc"), e.n_vocab);
    if ((int) doc.size() < last) die(2, "the document has " + std::to_string(doc.size()) + " tokens; depth " +
                                        std::to_string(last) + " needs that many");
    // Row r of depth d: the prediction after a prefix of d - rows + 1 + r tokens, i.e. the
    // logits at position d - rows + r. One causal pass serves every depth.
    std::vector<int> want;
    for (int d : depths)
        for (int r = 0; r < rows; r++) want.push_back(d - rows + r);
    std::vector<float> out;
    out.reserve(want.size() * (size_t) e.n_vocab);
    e.run(doc, 0, last, want, &out);
    write_npy(need(a, "out") + "/logits.npy", out, {depths.size(), (size_t) rows, (size_t) e.n_vocab});
    return 0;
}

int cmd_tokenize(const std::map<std::string, std::string> & a) {
    Engine e(need(a, "model"), 0, 1, false);
    std::ifstream f(need(a, "text"), std::ios::binary);
    if (!f) die(2, "cannot read the text " + need(a, "text"));
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<llama_token> ids(text.size() + 16);
    int n = llama_tokenize(e.vocab, text.c_str(), (int32_t) text.size(), ids.data(), (int32_t) ids.size(), true, false);
    if (n < 0) die(3, "tokenize failed");
    ids.resize(n);
    std::ofstream o(need(a, "out") + "/document.tok");
    for (size_t i = 0; i < ids.size(); i++) o << ids[i] << ((i + 1) % 16 == 0 ? '\n' : ' ');
    o << '\n';
    std::fprintf(stderr, "harness: %d tokens, vocabulary %d\n", n, e.n_vocab);
    return o ? 0 : 3;
}

std::string unescape(const std::string & s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] != '\\' || i + 1 == s.size()) { out += s[i]; continue; }
        char c = s[++i];
        out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    }
    return out;
}

std::string escape(const std::string & s) {
    std::string out;
    for (char c : s) {
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\\') out += "\\\\";
        else out += c;
    }
    return out;
}

std::string piece(const llama_vocab * vocab, llama_token t) {
    char buf[256];
    int n = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, false);
    if (n < 0) die(3, "token " + std::to_string(t) + " has no text piece of at most 256 bytes");
    return std::string(buf, n);
}

// Greedy continuation of `seq` (whose last token is decoded next, at position seq.size()-1)
// for up to `tokens` tokens; the context must hold positions [0, seq.size()-1) already.
// With `follow`, the continuation is forced to those tokens and what is written is this
// engine's own argmax at each of their positions (token-by-token agreement with them).
void greedy(Engine & e, std::vector<llama_token> seq, int tokens, bool stop_newline, std::ostream & o,
            const std::vector<llama_token> * follow = nullptr) {
    std::vector<llama_token> made;
    std::string text;
    std::vector<float> last;
    if (follow) tokens = (int) follow->size();
    for (int i = 0; i < tokens; i++) {
        int pos = (int) seq.size() - 1;
        last.clear();
        e.run(seq, pos, pos + 1, {pos}, &last);
        int best = 0;
        for (int v = 1; v < e.n_vocab; v++) if (last[v] > last[best]) best = v;  // ties: the lowest id
        if (follow) {
            made.push_back(best);
            text += piece(e.vocab, best);
            seq.push_back((*follow)[i]);
            continue;
        }
        if (llama_vocab_is_eog(e.vocab, best)) break;
        made.push_back(best);
        text += piece(e.vocab, best);
        if (stop_newline && text.find('\n') != std::string::npos) break;
        seq.push_back(best);
    }
    for (size_t i = 0; i < made.size(); i++) o << (i ? " " : "") << made[i];
    o << '\t' << escape(text) << '\n';
}

int cmd_generate(const std::map<std::string, std::string> & a) {
    int tokens = need_int(a, "tokens", 1), threads = need_int(a, "threads", 1);
    bool stop_newline = a.count("stop") && a.at("stop") == "newline";
    if (a.count("stop") && !stop_newline) die(2, "--stop must be newline");
    Engine e(need(a, "model"), 0, threads, false);
    std::ofstream o(need(a, "out") + "/generated.txt");
    if (a.count("prompts")) {
        std::ifstream f(need(a, "prompts"), std::ios::binary);
        if (!f) die(2, "cannot read the prompts " + need(a, "prompts"));
        std::string line;
        int n_prompts = 0;
        while (std::getline(f, line)) {
            n_prompts++;
            std::string text = unescape(line);
            std::vector<llama_token> ids(text.size() + 16);
            int n = llama_tokenize(e.vocab, text.c_str(), (int32_t) text.size(), ids.data(), (int32_t) ids.size(), true, false);
            if (n <= 0) die(2, "prompt " + std::to_string(n_prompts) + " does not tokenise");
            ids.resize(n);
            e.new_context(n + tokens);                  // empty: nothing carries across prompts
            if (n > 1) e.run(ids, 0, n - 1, {}, nullptr);
            greedy(e, ids, tokens, stop_newline, o);
            o.flush();
        }
        if (!n_prompts) die(2, "no prompts");
        return o ? 0 : 3;
    }
    // --doc/--at: one pass over the document to the furthest start, then each completion from
    // the last start back to the first, cutting the context back to the start each time.
    std::vector<llama_token> doc = read_doc(need(a, "doc"), e.n_vocab);
    std::vector<int> at = parse_depths(need(a, "at"));
    int furthest = at.back();
    if (furthest > (int) doc.size()) die(2, "--at " + std::to_string(furthest) + " is past the document's end");
    std::vector<std::vector<llama_token>> follow;
    if (a.count("follow")) {
        std::ifstream f(need(a, "follow"));
        if (!f) die(2, "cannot read " + need(a, "follow"));
        std::string line;
        while (std::getline(f, line)) {
            std::stringstream ids(line.substr(0, line.find('\t')));
            std::vector<llama_token> t;
            long long v;
            while (ids >> v) {
                if (v < 0 || v >= e.n_vocab) die(2, "--follow: token " + std::to_string(v) + " is outside the vocabulary");
                t.push_back((llama_token) v);
            }
            if ((int) t.size() > tokens) die(2, "--follow: a line holds more than --tokens tokens");
            follow.push_back(t);
        }
        if (follow.size() != at.size()) die(2, "--follow: expected one line per --at position");
    }
    e.new_context(furthest + tokens);
    if (furthest > 1) e.run(doc, 0, furthest - 1, {}, nullptr);
    std::vector<std::string> lines(at.size());
    for (int k = (int) at.size() - 1; k >= 0; k--) {
        int p = at[k];
        if (!llama_memory_seq_rm(llama_get_memory(e.ctx), 0, p - 1, -1))
            die(3, "the engine cannot cut its context back to position " + std::to_string(p - 1));
        std::ostringstream line;
        greedy(e, std::vector<llama_token>(doc.begin(), doc.begin() + p), tokens, stop_newline, line,
               follow.empty() ? nullptr : &follow[k]);
        lines[k] = line.str();
    }
    for (const auto & line : lines) o << line;
    return o ? 0 : 3;
}

std::vector<llama_token> read_ids(const std::string & text, int n_vocab, int line) {
    std::stringstream in(text);
    std::vector<llama_token> ids;
    long long v;
    while (in >> v) {
        if (v < 0 || v >= n_vocab) die(2, "--requests line " + std::to_string(line) + ": token " + std::to_string(v) +
                                          " is outside the vocabulary");
        ids.push_back((llama_token) v);
    }
    if (!in.eof()) die(2, "--requests line " + std::to_string(line) + " holds something other than token ids");
    return ids;
}

std::string hex_of(const std::string & bytes) {
    static const char * digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) { out += digits[c >> 4]; out += digits[c & 15]; }
    return out;
}

int cmd_grade(const std::map<std::string, std::string> & a) {
    int threads = need_int(a, "threads", 1);
    Engine e(need(a, "model"), 0, threads, false);
    std::ifstream f(need(a, "requests"));
    if (!f) die(2, "cannot read the requests " + need(a, "requests"));
    std::vector<std::pair<std::vector<llama_token>, std::vector<llama_token>>> reqs;
    size_t longest = 0;
    for (std::string line; std::getline(f, line);) {
        size_t tab = line.find('\t');
        int n = (int) reqs.size() + 1;
        if (tab == std::string::npos) die(2, "--requests line " + std::to_string(n) + " has no tab");
        auto prompt = read_ids(line.substr(0, tab), e.n_vocab, n), served = read_ids(line.substr(tab + 1), e.n_vocab, n);
        if (prompt.empty() || served.empty()) die(2, "--requests line " + std::to_string(n) + " has an empty side");
        longest = std::max(longest, prompt.size() + served.size());
        reqs.emplace_back(std::move(prompt), std::move(served));
    }
    if (reqs.empty()) die(2, "no requests");
    e.new_context((int) longest);
    std::ofstream o(need(a, "out") + "/graded.txt");
    std::vector<float> logits;
    const std::vector<llama_token> * cached = nullptr;     // the prompt whose positions the context holds
    for (const auto & [prompt, served] : reqs) {
        // the context keeps positions [0, prompt - 1) of a repeated prompt; anything else starts empty
        int from = cached && *cached == prompt ? (int) prompt.size() - 1 : 0;
        if (!llama_memory_seq_rm(llama_get_memory(e.ctx), 0, from, -1)) die(3, "the engine cannot cut its context");
        std::vector<llama_token> seq(prompt);
        seq.insert(seq.end(), served.begin(), served.end() - 1);
        std::vector<int> want;
        for (size_t i = prompt.size() - 1; i < seq.size(); i++) want.push_back((int) i);
        logits.clear();
        e.run(seq, from, (int) seq.size(), want, &logits);
        cached = &prompt;
        std::string text;
        for (size_t i = 0; i < served.size(); i++) {
            const float * row = logits.data() + i * e.n_vocab;
            int best = 0;
            for (int v = 1; v < e.n_vocab; v++) if (row[v] > row[best]) best = v;  // ties: the lowest id
            char cell[48];
            std::snprintf(cell, sizeof cell, "%s%d:%.5f", i ? " " : "", best, row[best] - row[served[i]]);
            o << cell;
            text += piece(e.vocab, served[i]);
        }
        o << '\t' << hex_of(text) << '\n';
    }
    return o ? 0 : 3;
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc < 2) die(2, "usage: harness bench|logits|tokenize|generate|grade --key value ...");
    std::string cmd = argv[1];
    auto a = parse_args(argc, argv);
    if (a.count("gpu-layers")) g_gpu_layers = need_int(a, "gpu-layers", 0);
    if (a.count("flash-attn")) g_flash_attn = need_int(a, "flash-attn", 0) ? 1 : 0;
    if (a.count("batch")) g_batch = need_int(a, "batch", 1);
    if (cmd == "bench") return cmd_bench(a);
    if (cmd == "logits") return cmd_logits(a);
    if (cmd == "tokenize") return cmd_tokenize(a);
    if (cmd == "generate") return cmd_generate(a);
    if (cmd == "grade") return cmd_grade(a);
    die(2, "unknown command " + cmd);
}
