/* One-token attention of decoding rows over their prompt's shared prefix and their own tokens,
 * for the rollout sampler on a CPU (slca_grpo/engine/native.py builds and loads this file).
 *
 * PyTorch runs this step as four batched products of a dozen rows each, with the scores, mask,
 * softmax and casts in between as separate passes; at a decode step's shapes the products run at
 * a fraction of the machine's matrix rate. Here each (prompt, key/value head) is one task: the
 * prompt's keys are walked once, a block at a time (prefetched ahead: a layer's cache comes from
 * memory), each block scored against every query head of the prompt's rows while it is in the L1
 * cache; each row's own keys follow, then one softmax per query head, and the values are summed
 * the same way; the prompt's left padding is skipped.
 *
 * Keys and values are float32, or bfloat16 under bf16 autocast (slca_prefix_decode_attention_bf16):
 * a bfloat16 number is the top half of a float32, so the cache is read at half the bytes and
 * widened in registers by a 16-bit shift; scores, softmax and sums are float32 either way, and the
 * output is rounded to bfloat16 once at the end. The queries are rounded to bfloat16 first, as
 * PyTorch's bfloat16 products round them. Where the compiler targets AVX512_BF16 (-march=native on
 * a CPU that has it), a bfloat16 task's scores take vdpbf16ps, 16 pairs an instruction: the
 * products of two bfloat16 numbers are exact in float32 and summed in float32, so only the order
 * of the sums (and subnormals, flushed to zero) differ from the widened path.
 *
 * Written with GCC/Clang vector extensions (intrinsics only for vdpbf16ps, behind the compiler's
 * own macro) and compiled for the machine it runs on, so the same source becomes AVX2 or AVX-512
 * code; GCC and clang both build it. Tasks run on OpenMP threads: the runtime PyTorch already
 * loaded (libgomp), so the two share one pool (with clang, whose OpenMP needs a runtime of its
 * own, the loader builds without it: one thread). */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512BF16__) && defined(__AVX512VL__)
#include <immintrin.h>
#define DOT_BF16 1
#else
#define DOT_BF16 0
#endif

typedef float vf __attribute__((vector_size(32)));
typedef int32_t vi __attribute__((vector_size(32)));
typedef uint32_t vu __attribute__((vector_size(32)));
typedef uint16_t vh __attribute__((vector_size(16))); /* eight bfloat16 numbers */
#define LANES 8
#define MAX_DIM 256

static inline vf load_f32(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store_f32(float *p, vf v) { memcpy(p, &v, sizeof v); }

/* Eight bfloat16 numbers widened to float32: each one's bits are the top half of its float32. */
static inline vf load_bf16(const uint16_t *p) {
    vh h;
    memcpy(&h, p, sizeof h);
    return (vf)(__builtin_convertvector(h, vu) << 16);
}

/* Eight float32 lanes rounded to bfloat16 (to nearest, ties to even, as PyTorch rounds; a NaN
 * stays a NaN, which the rounding's carry could turn into infinity). */
static inline void store_bf16(uint16_t *p, vf v) {
    const vu bits = (vu)v, is_nan = (vu)(v != v);
    const vu rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    const vh h = __builtin_convertvector((((bits >> 16) | 0x40u) & is_nan) | (rounded & ~is_nan), vh);
    memcpy(p, &h, sizeof h);
}

/* Element `index` of an array of float32 numbers, or of bfloat16 ones where `bf16`. */
static inline const void *element(const void *base, int64_t index, const int bf16) {
    return (const char *)base + index * (bf16 ? (int64_t)sizeof(uint16_t) : (int64_t)sizeof(float));
}

/* Eight lanes from `p`: float32, or bfloat16 widened where `bf16`. */
static inline vf load_lanes(const void *p, const int bf16) { return bf16 ? load_bf16(p) : load_f32(p); }

static inline float sum_lanes(vf v) {
    float total = 0.0f;
    for (int i = 0; i < LANES; i++) total += v[i];
    return total;
}

static inline vf splat(float x) { return (vf){x, x, x, x, x, x, x, x}; }

/* where(mask, a, b) lane by lane; mask lanes are all ones or all zeros (a comparison's result). */
static inline vf choose(vi mask, vf a, vf b) { return (vf)(((vi)a & mask) | ((vi)b & ~mask)); }

/* exp(x) for x <= 0, Cephes' single-precision polynomial (~1 ulp), eight lanes at a time. Far
 * below exp's range it is 0, as the softmax needs for masked scores. */
static inline vf exp_lanes(vf x) {
    const vf low = splat(-87.3f);
    vi too_low = x < low;
    x = choose(too_low, low, x);
    vf n = x * splat(1.44269504088896341f);
    const vf magic = splat(12582912.0f); /* 1.5 * 2^23: adding it rounds to the nearest integer */
    n = (n + magic) - magic;
    vf r = x - n * splat(0.693359375f) - n * splat(-2.12194440e-4f);
    vf p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * r * r + r + splat(1.0f);
    vi exponent = (__builtin_convertvector(n, vi) + 127) << 23;
    vf result = p * (vf)exponent;
    return choose(too_low, splat(0.0f), result);
}

/* Lanes of a and b (b's numbered 8-15) picked by eight constant indices. GCC's __builtin_shuffle
 * takes them as a vector; clang has only __builtin_shufflevector, which takes them one by one. */
#if defined(__clang__)
#define SHUFFLE8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
#else
#define SHUFFLE8(a, b, i0, i1, i2, i3, i4, i5, i6, i7) __builtin_shuffle(a, b, (vi){i0, i1, i2, i3, i4, i5, i6, i7})
#endif

/* The eight lanes' sums of v[0..7], as one vector: a tree of pairwise shuffles and adds. */
static inline vf sum_eight(const vf v[8]) {
    vf pairs[4], quads[2];
    for (int i = 0; i < 4; i++)
        pairs[i] = SHUFFLE8(v[2 * i], v[2 * i + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
                   SHUFFLE8(v[2 * i], v[2 * i + 1], 1, 9, 3, 11, 5, 13, 7, 15);
    for (int i = 0; i < 2; i++)
        quads[i] = SHUFFLE8(pairs[2 * i], pairs[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
                   SHUFFLE8(pairs[2 * i], pairs[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15);
    /* quads[0] holds v0..v3's halves, quads[1] v4..v7's: lanes 0-3 the first halves, 4-7 the second. */
    return SHUFFLE8(quads[0], quads[1], 0, 1, 2, 3, 8, 9, 10, 11) + SHUFFLE8(quads[0], quads[1], 4, 5, 6, 7, 12, 13, 14, 15);
}

/* The dot products of `query` with the eight keys `stride` numbers apart from `keys`. */
static inline __attribute__((always_inline)) vf eight_dots(const float *restrict query, const void *restrict keys,
                                                          int64_t stride, const int dim, const int bf16) {
    vf acc[8];
    for (int i = 0; i < 8; i++) acc[i] = splat(0.0f);
    for (int d = 0; d < dim; d += LANES) {
        const vf q = load_f32(query + d);
        for (int i = 0; i < 8; i++) acc[i] += q * load_lanes(element(keys, i * stride + d, bf16), bf16);
    }
    return sum_eight(acc);
}

static inline __attribute__((always_inline)) float one_dot(const float *restrict query, const void *restrict key,
                                                          const int dim, const int bf16) {
    vf acc = splat(0.0f);
    for (int d = 0; d < dim; d += LANES) acc += load_f32(query + d) * load_lanes(element(key, d, bf16), bf16);
    return sum_lanes(acc);
}

#if DOT_BF16
static inline __m256bh load_pairs(const uint16_t *p) {
    __m256bh v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* eight_dots of a bfloat16 query and keys by vdpbf16ps, sixteen numbers an instruction; `dim` a
 * multiple of 16. */
static inline __attribute__((always_inline)) vf eight_dots_bf16(const uint16_t *restrict query,
                                                               const uint16_t *restrict keys, int64_t stride,
                                                               const int dim) {
    __m256 acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    for (int d = 0; d < dim; d += 16) {
        const __m256bh q = load_pairs(query + d);
        for (int i = 0; i < 8; i++) acc[i] = _mm256_dpbf16_ps(acc[i], q, load_pairs(keys + i * stride + d));
    }
    vf sums[8];
    for (int i = 0; i < 8; i++) sums[i] = (vf)acc[i];
    return sum_eight(sums);
}
#endif

/* The keep flags keep[0..7] as lane masks (all ones where kept). */
static inline vi kept_lanes(const uint8_t *keep) {
    typedef uint8_t bytes __attribute__((vector_size(LANES)));
    bytes flags;
    memcpy(&flags, keep, sizeof flags);
    return __builtin_convertvector(flags, vi) != 0;
}

/* Softmax in place over scores[0, count); where keep[i] is 0 the probability is 0. */
static void softmax(float *scores, const uint8_t *keep, int64_t count) {
    const int64_t whole = count - count % LANES;
    vf tops = splat(-INFINITY);
    for (int64_t i = 0; i < whole; i += LANES) {
        const vf s = load_f32(scores + i);
        tops = choose(kept_lanes(keep + i) & (s > tops), s, tops);
    }
    float top = -INFINITY;
    for (int l = 0; l < LANES; l++) top = tops[l] > top ? tops[l] : top;
    for (int64_t i = whole; i < count; i++)
        if (keep[i] && scores[i] > top) top = scores[i];
    if (top == -INFINITY) {
        memset(scores, 0, count * sizeof(float));
        return;
    }
    vf totals = splat(0.0f);
    for (int64_t i = 0; i < whole; i += LANES) {
        const vf e = choose(kept_lanes(keep + i), exp_lanes(load_f32(scores + i) - splat(top)), splat(0.0f));
        store_f32(scores + i, e);
        totals += e;
    }
    float total = sum_lanes(totals);
    for (int64_t i = whole; i < count; i++) {
        scores[i] = keep[i] ? expf(scores[i] - top) : 0.0f;
        total += scores[i];
    }
    const float inverse = 1.0f / total;
    for (int64_t i = 0; i < whole; i += LANES) store_f32(scores + i, load_f32(scores + i) * splat(inverse));
    for (int64_t i = whole; i < count; i++) scores[i] *= inverse;
}

typedef struct {
    int bf16; /* keys, values and out in bfloat16, else float32 */
    int query_bf16; /* the query in bfloat16, else float32 (always float32 beside float32 keys) */
    const void *query; /* [rows, kv heads, group, dim] */
    const void *prefix_keys, *prefix_values; /* [prompts, kv heads, prefix, dim] */
    const int64_t *row_prompt; /* [rows] */
    const void *own_keys, *own_values; /* [rows, kv heads, own, dim] at the strides below (in numbers) */
    int64_t own_row_stride, own_head_stride, own_token_stride;
    const uint8_t *mask; /* [rows, prefix + own], 1: attend; NULL: attend to all */
    int64_t rows, kv_heads, group, dim, prefix, own;
    float scale;
    void *out; /* [rows, kv heads, group, dim] */
} Problem;

typedef struct {  /* one thread's scratch */
    float *scores;  /* [rows of a prompt x group, prefix + own] */
    float *sums;  /* [rows of a prompt x group, dim] */
    uint8_t *keep;  /* [prefix + own], all ones: for a call without a mask */
    int64_t *rows;  /* [rows]: the rows of the task's prompt */
    uint16_t *rounded_queries;  /* [rows of a prompt x group, dim]: a bfloat16 task's queries in bfloat16 */
    float *queries;  /* [rows of a prompt x group, dim]: the same, widened */
} Scratch;

/* The first prefix position any of `rows` attends to (a prompt's rows share its left padding). */
static int64_t prefix_start(const Problem *pr, const int64_t *rows, int64_t count) {
    if (!pr->mask) return 0;
    int64_t start = pr->prefix;
    for (int64_t r = 0; r < count; r++) {
        const uint8_t *mask = pr->mask + rows[r] * (pr->prefix + pr->own);
        int64_t j = 0;
        while (j < start && !mask[j]) j++;
        start = j < start ? j : start;
    }
    return start;
}

/* scores[0, count) = (query . keys[i]) * scale for `count` keys `stride` numbers apart; a bfloat16
 * task also hands its query in bfloat16 (`rounded`), for vdpbf16ps where it is built in. */
static inline __attribute__((always_inline)) void score_keys(const float *restrict query,
                                                            const uint16_t *restrict rounded,
                                                            const void *restrict keys, int64_t count, int64_t stride,
                                                            float scale, float *restrict scores, const int dim,
                                                            const int bf16) {
    int64_t i = 0;
#if DOT_BF16
    if (bf16 && dim % 16 == 0)
        for (; i + 8 <= count; i += 8)
            store_f32(scores + i, eight_dots_bf16(rounded, (const uint16_t *)keys + i * stride, stride, dim) * splat(scale));
#else
    (void)rounded;
#endif
    for (; i + 8 <= count; i += 8)
        store_f32(scores + i, eight_dots(query, element(keys, i * stride, bf16), stride, dim, bf16) * splat(scale));
    for (; i < count; i++) scores[i] = one_dot(query, element(keys, i * stride, bf16), dim, bf16) * scale;
}

/* sums[0, dim) += sum over i of weights[i] * values[i], for `count` values `stride` numbers apart. */
static inline __attribute__((always_inline)) void add_values(const float *restrict weights, const void *restrict values,
                                                            int64_t count, int64_t stride, float *restrict sums,
                                                            const int dim, const int bf16) {
    vf acc[MAX_DIM / LANES];
    for (int d = 0; d < dim / LANES; d++) acc[d] = load_f32(sums + d * LANES);
    for (int64_t i = 0; i < count; i++) {
        const vf w = splat(weights[i]);
        for (int d = 0; d < dim / LANES; d++) acc[d] += w * load_lanes(element(values, i * stride + d * LANES, bf16), bf16);
    }
    for (int d = 0; d < dim / LANES; d++) store_f32(sums + d * LANES, acc[d]);
}

/* A query's sums into `out` (at its `index` among the queries): float32, or rounded to bfloat16. */
static inline __attribute__((always_inline)) void store_out(void *out, int64_t index, const float *sums, const int dim,
                                                           const int bf16) {
    if (bf16)
        for (int d = 0; d < dim; d += LANES) store_bf16((uint16_t *)out + index * dim + d, load_f32(sums + d));
    else
        memcpy((float *)out + index * dim, sums, dim * sizeof(float));
}

/* The place of the task's query `q` (query head q % group of its (q / group)-th row) among all
 * the queries [rows, kv heads, group]. */
static inline int64_t query_index(const Problem *pr, const Scratch *scratch, int64_t head, int64_t q) {
    return (scratch->rows[q / pr->group] * pr->kv_heads + head) * pr->group + q % pr->group;
}

/* A bfloat16 task's `count` queries: rounded to bfloat16, as PyTorch's bfloat16 products round a
 * float32 query (a bfloat16 one is copied), then widened. */
static void prepare_queries(const Problem *pr, const Scratch *scratch, int64_t head, int64_t count) {
    const int64_t dim = pr->dim;
    for (int64_t q = 0; q < count; q++) {
        const int64_t at = query_index(pr, scratch, head, q) * dim;
        uint16_t *rounded = scratch->rounded_queries + q * dim;
        if (pr->query_bf16)
            memcpy(rounded, (const uint16_t *)pr->query + at, dim * sizeof(uint16_t));
        else
            for (int64_t d = 0; d < dim; d += LANES) store_bf16(rounded + d, load_f32((const float *)pr->query + at + d));
        for (int64_t d = 0; d < dim; d += LANES) store_f32(scratch->queries + q * dim + d, load_bf16(rounded + d));
    }
}

#define BLOCK 16 /* prompt keys or values taken at a time by all of a task's queries: 4 KB at width 64 */
#ifndef AHEAD
#define AHEAD (2 * BLOCK) /* the block this many tokens ahead is fetched while one is used */
#endif

/* Ask for tokens [from, from + BLOCK) of `count` rows of `dim` numbers (they come from memory: a
 * layer's cache is several MB). */
static inline void prefetch_block(const void *rows, int64_t from, int64_t count, const int dim, const int bf16) {
    if (from >= count) return;
    const char *start = element(rows, from * dim, bf16);
    const int64_t size = bf16 ? (int64_t)sizeof(uint16_t) : (int64_t)sizeof(float);
    const int64_t bytes = (from + BLOCK <= count ? BLOCK : count - from) * dim * size;
    for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(start + at);
}

/* All rows of one prompt for one key/value head. The prompt's keys and values are shared by all
 * the rows' query heads, so they are walked once, a block at a time, each block used by every
 * query while it is in the L1 cache; each row's own keys follow per row. */
static inline __attribute__((always_inline)) void task(const Problem *pr, const Scratch *scratch, int64_t prompt,
                                                       int64_t head, const int dim, const int bf16) {
    int64_t count_rows = 0;
    for (int64_t row = 0; row < pr->rows; row++)
        if (pr->row_prompt[row] == prompt) scratch->rows[count_rows++] = row;
    if (count_rows == 0) return;
    const int64_t start = prefix_start(pr, scratch->rows, count_rows), width = pr->prefix + pr->own;
    const int64_t shared = pr->prefix - start, count = shared + pr->own, queries = count_rows * pr->group;
    const int64_t prefix_at = ((prompt * pr->kv_heads + head) * pr->prefix + start) * dim;
    const void *prefix_keys = element(pr->prefix_keys, prefix_at, bf16);
    const void *prefix_values = element(pr->prefix_values, prefix_at, bf16);
    if (bf16) prepare_queries(pr, scratch, head, queries);
    /* The float32 query q (widened in scratch for a bfloat16 task), and its bfloat16 form. */
#define QUERY(q) (bf16 ? scratch->queries + (q) * dim : (const float *)pr->query + query_index(pr, scratch, head, q) * dim)
#define ROUNDED(q) (bf16 ? scratch->rounded_queries + (q) * dim : NULL)
    for (int64_t i = 0; i < shared; i += BLOCK) {
        const int64_t n = shared - i < BLOCK ? shared - i : BLOCK;
        prefetch_block(prefix_keys, i + AHEAD, shared, dim, bf16);
        for (int64_t q = 0; q < queries; q++)
            score_keys(QUERY(q), ROUNDED(q), element(prefix_keys, i * dim, bf16), n, dim, pr->scale,
                       scratch->scores + q * count + i, dim, bf16);
    }
    for (int64_t q = 0; q < queries; q++) {
        const int64_t row = scratch->rows[q / pr->group];
        const void *own_keys = element(pr->own_keys, row * pr->own_row_stride + head * pr->own_head_stride, bf16);
        float *scores = scratch->scores + q * count;
        score_keys(QUERY(q), ROUNDED(q), own_keys, pr->own, pr->own_token_stride, pr->scale, scores + shared, dim, bf16);
        softmax(scores, pr->mask ? pr->mask + row * width + start : scratch->keep, count);
    }
    memset(scratch->sums, 0, queries * dim * sizeof(float));
    for (int64_t i = 0; i < shared; i += BLOCK) {
        const int64_t n = shared - i < BLOCK ? shared - i : BLOCK;
        prefetch_block(prefix_values, i + AHEAD, shared, dim, bf16);
        for (int64_t q = 0; q < queries; q++)
            add_values(scratch->scores + q * count + i, element(prefix_values, i * dim, bf16), n, dim,
                       scratch->sums + q * dim, dim, bf16);
    }
    for (int64_t q = 0; q < queries; q++) {
        const int64_t row = scratch->rows[q / pr->group];
        const void *own_values = element(pr->own_values, row * pr->own_row_stride + head * pr->own_head_stride, bf16);
        add_values(scratch->scores + q * count + shared, own_values, pr->own, pr->own_token_stride,
                   scratch->sums + q * dim, dim, bf16);
        store_out(pr->out, query_index(pr, scratch, head, q), scratch->sums + q * dim, dim, bf16);
    }
#undef QUERY
#undef ROUNDED
}

/* One task, each precision with SmolLM2's head width (64) as a constant the compiler unrolls. */
static void run_task(const Problem *pr, const Scratch *scratch, int64_t prompt, int64_t head) {
    if (pr->bf16 && pr->dim == 64)
        task(pr, scratch, prompt, head, 64, 1);
    else if (pr->bf16)
        task(pr, scratch, prompt, head, (int)pr->dim, 1);
    else if (pr->dim == 64)
        task(pr, scratch, prompt, head, 64, 0);
    else
        task(pr, scratch, prompt, head, (int)pr->dim, 0);
}

/* Both entry points: the problem checked, its (prompt, key/value head) tasks on OpenMP's threads. */
static int attend(const Problem *pr, int64_t prompts) {
    const int64_t rows = pr->rows, group = pr->group, dim = pr->dim, kv_heads = pr->kv_heads;
    if (dim % LANES != 0 || dim > MAX_DIM || rows < 1 || kv_heads < 1 || group < 1 || prompts < 1) return 1;
    for (int64_t row = 0; row < rows; row++)
        if (pr->row_prompt[row] < 0 || pr->row_prompt[row] >= prompts) return 2;
    const int64_t tasks = prompts * kv_heads, width = pr->prefix + pr->own + 1;
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        Scratch scratch = {malloc(rows * group * width * sizeof(float)), malloc(rows * group * dim * sizeof(float)),
                           malloc(width), malloc(rows * sizeof(int64_t)), NULL, NULL};
        if (pr->bf16) {
            scratch.rounded_queries = malloc(rows * group * dim * sizeof(uint16_t));
            scratch.queries = malloc(rows * group * dim * sizeof(float));
        }
        const int ready = scratch.scores && scratch.sums && scratch.keep && scratch.rows &&
                          (!pr->bf16 || (scratch.rounded_queries && scratch.queries));
        if (scratch.keep) memset(scratch.keep, 1, width);
        /* Every thread meets the work-sharing loop (OpenMP requires it); one without scratch
         * leaves its tasks undone and the call reports failure. */
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tasks; t++) {
            if (!ready) {
                failed = 1;
                continue;
            }
            run_task(pr, &scratch, t / kv_heads, t % kv_heads);
        }
        free(scratch.scores);
        free(scratch.sums);
        free(scratch.keep);
        free(scratch.rows);
        free(scratch.rounded_queries);
        free(scratch.queries);
    }
    return failed ? 3 : 0;
}

int slca_prefix_decode_attention(const float *query, const float *prefix_keys, const float *prefix_values,
                                 const int64_t *row_prompt, int64_t prompts, const float *own_keys,
                                 const float *own_values, int64_t own_row_stride, int64_t own_head_stride,
                                 int64_t own_token_stride, const uint8_t *mask, int64_t rows, int64_t kv_heads,
                                 int64_t group, int64_t dim, int64_t prefix, int64_t own, float scale, float *out) {
    const Problem pr = {0, 0, query, prefix_keys, prefix_values, row_prompt, own_keys, own_values, own_row_stride,
                        own_head_stride, own_token_stride, mask, rows, kv_heads, group, dim, prefix, own, scale, out};
    return attend(&pr, prompts);
}

/* The same with bfloat16 keys, values and out (each a uint16_t holding a bfloat16's bits), and the
 * query in bfloat16 (`query_bf16`) or float32. */
int slca_prefix_decode_attention_bf16(const void *query, int query_bf16, const uint16_t *prefix_keys,
                                      const uint16_t *prefix_values, const int64_t *row_prompt, int64_t prompts,
                                      const uint16_t *own_keys, const uint16_t *own_values, int64_t own_row_stride,
                                      int64_t own_head_stride, int64_t own_token_stride, const uint8_t *mask,
                                      int64_t rows, int64_t kv_heads, int64_t group, int64_t dim, int64_t prefix,
                                      int64_t own, float scale, uint16_t *out) {
    const Problem pr = {1, query_bf16 != 0, query, prefix_keys, prefix_values, row_prompt, own_keys, own_values,
                        own_row_stride, own_head_stride, own_token_stride, mask, rows, kv_heads, group, dim, prefix,
                        own, scale, out};
    return attend(&pr, prompts);
}
