/* One-token attention of decoding rows over their prompt's shared prefix and their own tokens,
 * for the rollout sampler on a CPU (slca_grpo/rollout/native.py builds and loads this file).
 *
 * PyTorch runs this step as four batched products of a dozen rows each, with the scores, mask,
 * softmax and casts in between as separate passes; at a decode step's shapes the products run at
 * a fraction of the machine's matrix rate. Here each (prompt, key/value head) is one task: its
 * rows' query heads are scored against the prompt's keys and their own, normalised, and summed
 * over the values in one pass over the cache, skipping the prompt's left padding. Float32 only:
 * with bfloat16 keys and values, PyTorch's bfloat16 products (native on CPUs with avx512_bf16 or
 * AMX) measured faster than widening them here.
 *
 * Written with GCC/Clang vector extensions (no intrinsics) and compiled for the machine it runs
 * on, so the same source becomes AVX2 or AVX-512 code. Tasks run on OpenMP threads: the runtime
 * PyTorch already loaded (libgomp), so the two share one pool. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef float vf __attribute__((vector_size(32)));
typedef int32_t vi __attribute__((vector_size(32)));
#define LANES 8
#define MAX_DIM 256

static inline vf load_f32(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store_f32(float *p, vf v) { memcpy(p, &v, sizeof v); }

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

/* The eight lanes' sums of v[0..7], as one vector: a tree of pairwise shuffles and adds. */
static inline vf sum_eight(const vf v[8]) {
    const vi even = {0, 8, 2, 10, 4, 12, 6, 14}, odd = {1, 9, 3, 11, 5, 13, 7, 15};
    const vi low = {0, 1, 8, 9, 4, 5, 12, 13}, high = {2, 3, 10, 11, 6, 7, 14, 15};
    const vi first = {0, 1, 2, 3, 8, 9, 10, 11}, second = {4, 5, 6, 7, 12, 13, 14, 15};
    vf pairs[4], quads[2];
    for (int i = 0; i < 4; i++)
        pairs[i] = __builtin_shuffle(v[2 * i], v[2 * i + 1], even) + __builtin_shuffle(v[2 * i], v[2 * i + 1], odd);
    for (int i = 0; i < 2; i++)
        quads[i] = __builtin_shuffle(pairs[2 * i], pairs[2 * i + 1], low) +
                   __builtin_shuffle(pairs[2 * i], pairs[2 * i + 1], high);
    /* quads[0] holds v0..v3's halves, quads[1] v4..v7's: lanes 0-3 the first halves, 4-7 the second. */
    return __builtin_shuffle(quads[0], quads[1], first) + __builtin_shuffle(quads[0], quads[1], second);
}

/* The dot products of `query` with the eight keys `stride` floats apart from `keys`. */
static inline __attribute__((always_inline)) vf eight_dots(const float *restrict query, const float *restrict keys,
                                                          int64_t stride, const int dim) {
    vf acc[8];
    for (int i = 0; i < 8; i++) acc[i] = splat(0.0f);
    for (int d = 0; d < dim; d += LANES) {
        const vf q = load_f32(query + d);
        for (int i = 0; i < 8; i++) acc[i] += q * load_f32(keys + i * stride + d);
    }
    return sum_eight(acc);
}

static inline __attribute__((always_inline)) float one_dot(const float *restrict query, const float *restrict key,
                                                          const int dim) {
    vf acc = splat(0.0f);
    for (int d = 0; d < dim; d += LANES) acc += load_f32(query + d) * load_f32(key + d);
    return sum_lanes(acc);
}

/* Softmax in place over scores[0, count); where keep[i] is 0 the probability is 0. */
static void softmax(float *scores, const uint8_t *keep, int64_t count) {
    float top = -INFINITY;
    for (int64_t i = 0; i < count; i++)
        if (keep[i] && scores[i] > top) top = scores[i];
    if (top == -INFINITY) {
        memset(scores, 0, count * sizeof(float));
        return;
    }
    float total = 0.0f;
    int64_t i = 0;
    for (; i + LANES <= count; i += LANES) {
        vf e = exp_lanes(load_f32(scores + i) - splat(top));
        for (int l = 0; l < LANES; l++) e[l] = keep[i + l] ? e[l] : 0.0f;
        store_f32(scores + i, e);
        total += sum_lanes(e);
    }
    for (; i < count; i++) {
        scores[i] = keep[i] ? expf(scores[i] - top) : 0.0f;
        total += scores[i];
    }
    float inverse = 1.0f / total;
    for (i = 0; i < count; i++) scores[i] *= inverse;
}

typedef struct {
    const float *query; /* [rows, kv heads, group, dim] */
    const float *prefix_keys, *prefix_values; /* [prompts, kv heads, prefix, dim] */
    const int64_t *row_prompt; /* [rows] */
    const float *own_keys, *own_values; /* [rows, kv heads, own, dim] at the strides below */
    int64_t own_row_stride, own_head_stride, own_token_stride;
    const uint8_t *mask; /* [rows, prefix + own], 1: attend; NULL: attend to all */
    int64_t rows, kv_heads, group, dim, prefix, own;
    float scale;
    float *out; /* [rows, kv heads, group, dim] */
} Problem;

typedef struct {  /* one thread's scratch */
    float *scores;  /* [group, prefix + own] */
    uint8_t *keep;  /* [prefix + own] */
} Scratch;

/* The first prefix position any row of `prompt` attends to (its rows share the left padding). */
static int64_t prefix_start(const Problem *pr, int64_t prompt) {
    if (!pr->mask) return 0;
    int64_t start = pr->prefix;
    for (int64_t row = 0; row < pr->rows; row++) {
        if (pr->row_prompt[row] != prompt) continue;
        const uint8_t *mask = pr->mask + row * (pr->prefix + pr->own);
        int64_t j = 0;
        while (j < start && !mask[j]) j++;
        start = j < start ? j : start;
    }
    return start;
}

typedef struct {  /* a run of keys and values, `stride` floats apart */
    const float *keys, *values;
    int64_t count, stride;
} Segment;

/* The group's query heads of one row over two runs of keys (the prompt's, then the row's own):
 * scores, softmax, then the sum over values. `keep` says which keys of both the row attends to. */
static inline __attribute__((always_inline)) void attend(const Problem *pr, const float *restrict queries,
                                                         const Segment *segments, const uint8_t *restrict keep,
                                                         float *restrict scores, float *restrict out,
                                                         const int dim) {
    const int64_t count = segments[0].count + segments[1].count;
    const vf scale = splat(pr->scale);
    for (int64_t q = 0; q < pr->group; q++) {
        const float *query = queries + q * dim;
        float *weights = scores + q * count;
        int64_t j = 0;
        for (int s = 0; s < 2; s++) {
            const Segment seg = segments[s];
            int64_t i = 0;
            for (; i + 8 <= seg.count; i += 8, j += 8)
                store_f32(weights + j, eight_dots(query, seg.keys + i * seg.stride, seg.stride, dim) * scale);
            for (; i < seg.count; i++, j++) weights[j] = one_dot(query, seg.keys + i * seg.stride, dim) * pr->scale;
        }
        softmax(weights, keep, count);
        vf acc[MAX_DIM / LANES];
        for (int d = 0; d < dim / LANES; d++) acc[d] = splat(0.0f);
        j = 0;
        for (int s = 0; s < 2; s++) {
            const Segment seg = segments[s];
            for (int64_t i = 0; i < seg.count; i++, j++) {
                const vf w = splat(weights[j]);
                const float *values = seg.values + i * seg.stride;
                for (int d = 0; d < dim / LANES; d++) acc[d] += w * load_f32(values + d * LANES);
            }
        }
        for (int d = 0; d < dim / LANES; d++) store_f32(out + q * dim + d * LANES, acc[d]);
    }
}

/* All rows of one prompt for one key/value head. */
static inline __attribute__((always_inline)) void task(const Problem *pr, const Scratch *scratch, int64_t prompt,
                                                       int64_t head, const int dim) {
    const int64_t start = prefix_start(pr, prompt), width = pr->prefix + pr->own;
    const int64_t prefix_at = ((prompt * pr->kv_heads + head) * pr->prefix + start) * dim;
    Segment segments[2] = {{pr->prefix_keys + prefix_at, pr->prefix_values + prefix_at, pr->prefix - start, dim}};
    for (int64_t row = 0; row < pr->rows; row++) {
        if (pr->row_prompt[row] != prompt) continue;
        const int64_t own_at = row * pr->own_row_stride + head * pr->own_head_stride;
        segments[1] = (Segment){pr->own_keys + own_at, pr->own_values + own_at, pr->own, pr->own_token_stride};
        const int64_t count = pr->prefix - start + pr->own;
        if (pr->mask)
            memcpy(scratch->keep, pr->mask + row * width + start, count);
        else
            memset(scratch->keep, 1, count);
        const int64_t at = (row * pr->kv_heads + head) * pr->group * dim;
        attend(pr, pr->query + at, segments, scratch->keep, scratch->scores, pr->out + at, dim);
    }
}

/* One task, with SmolLM2's head width (64) as a constant the compiler unrolls. */
static void run_task(const Problem *pr, const Scratch *scratch, int64_t prompt, int64_t head) {
    if (pr->dim == 64)
        task(pr, scratch, prompt, head, 64);
    else
        task(pr, scratch, prompt, head, (int)pr->dim);
}

int slca_prefix_decode_attention(const float *query, const float *prefix_keys, const float *prefix_values,
                                 const int64_t *row_prompt, int64_t prompts, const float *own_keys,
                                 const float *own_values, int64_t own_row_stride, int64_t own_head_stride,
                                 int64_t own_token_stride, const uint8_t *mask, int64_t rows, int64_t kv_heads,
                                 int64_t group, int64_t dim, int64_t prefix, int64_t own, float scale, float *out) {
    if (dim % LANES != 0 || dim > MAX_DIM || rows < 1 || kv_heads < 1 || group < 1 || prompts < 1) return 1;
    for (int64_t row = 0; row < rows; row++)
        if (row_prompt[row] < 0 || row_prompt[row] >= prompts) return 2;
    Problem pr = {query, prefix_keys, prefix_values, row_prompt, own_keys, own_values, own_row_stride,
                  own_head_stride, own_token_stride, mask, rows, kv_heads, group, dim, prefix, own, scale, out};
    const int64_t tasks = prompts * kv_heads, width = prefix + own + 1;
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        Scratch scratch = {malloc(group * width * sizeof(float)), malloc(width)};
        const int ready = scratch.scores && scratch.keep;
        /* Every thread meets the work-sharing loop (OpenMP requires it); one without scratch
         * leaves its tasks undone and the call reports failure. */
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < tasks; t++) {
            if (!ready) {
                failed = 1;
                continue;
            }
            run_task(&pr, &scratch, t / kv_heads, t % kv_heads);
        }
        free(scratch.scores);
        free(scratch.keep);
    }
    return failed ? 3 : 0;
}
