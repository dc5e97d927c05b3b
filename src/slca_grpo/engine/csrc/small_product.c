/* Float32 products of a few rows by a fixed weight, for the sampler's decode steps on a CPU
 * (slca_grpo/engine/native.py builds and loads this file).
 *
 * A decode step multiplies one row per live rollout (a dozen or so) by every weight matrix of
 * the model, and the weights (hundreds of MB) come from memory each step. oneDNN's float32
 * product with packed weights ran at ~130 GFLOP/s at those shapes on an (emulated) AVX2-only CPU,
 * its loads of the weight waiting on memory; this kernel ran the same products at ~190 GFLOP/s by
 * prefetching the weight a few KB ahead of the loads (benchmarks/small_product.py). The weight is packed once into panels of
 * PANEL output columns, each panel its columns' inputs in order ([input][PANEL]), so a panel is
 * one sequential stream; rows are taken TILE_ROWS at a time with the panel's partial sums in
 * registers. Threads split the panels (OpenMP: the runtime PyTorch already loaded), of one weight
 * or of several multiplied by the same rows in one call.
 *
 * GCC/Clang vector extensions, compiled for the machine it runs on: 8-lane vectors on AVX2,
 * 16-lane on AVX-512. */

#include <stdint.h>
#include <string.h>

#ifdef __AVX512F__
#define LANES 16
#define TILE_ROWS 8
#else
#define LANES 8
#define TILE_ROWS 6
#endif
#define PANEL (2 * LANES)
#define PREFETCH_FLOATS 2048 /* 8 KB ahead: measured best among 256 to 8192 floats on an AVX2 CPU */

typedef float vf __attribute__((vector_size(LANES * 4)));

static inline vf load_f32(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store_f32(float *p, vf v) { memcpy(p, &v, sizeof v); }

static inline vf splat(float x) { return (vf){0} + x; }

int64_t slca_panel_width(void) { return PANEL; }

/* weight [n, k] row-major (out x in) -> panels [ceil(n / PANEL)][k][PANEL], columns past n zero. */
void slca_pack_panels(const float *weight, int64_t n, int64_t k, float *panels) {
    int64_t count = (n + PANEL - 1) / PANEL;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < count; p++) {
        float *out = panels + p * k * PANEL;
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < PANEL; j++) {
                int64_t column = p * PANEL + j;
                out[i * PANEL + j] = column < n ? weight[column * k + i] : 0.0f;
            }
    }
}

/* rows x [rows, k] by one panel into out [rows, PANEL] (stride ld). Always inlined with a constant
 * row count, so the partial sums stay in registers. */
static inline __attribute__((always_inline)) void tile(
    int rows, const float *x, int64_t k, const float *panel, const float *bias, float *out, int64_t ld) {
    vf low[TILE_ROWS], high[TILE_ROWS];
    vf bias_low = bias ? load_f32(bias) : splat(0.0f), bias_high = bias ? load_f32(bias + LANES) : splat(0.0f);
    _Pragma("GCC unroll 16") for (int r = 0; r < rows; r++) {
        low[r] = bias_low;
        high[r] = bias_high;
    }
    for (int64_t i = 0; i < k; i++) {
        const float *row = panel + i * PANEL;
        _Pragma("GCC unroll 4") for (int line = 0; line < PANEL * 4; line += 64)
            __builtin_prefetch(row + PREFETCH_FLOATS + line / 4);
        vf w_low = load_f32(row), w_high = load_f32(row + LANES);
        _Pragma("GCC unroll 16") for (int r = 0; r < rows; r++) {
            vf a = splat(x[r * k + i]);
            low[r] += a * w_low;
            high[r] += a * w_high;
        }
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < rows; r++) {
        store_f32(out + r * ld, low[r]);
        store_f32(out + r * ld + LANES, high[r]);
    }
}

#define TILE_CASE(R) \
    case R: tile(R, x, k, panel, bias, out, ld); break;

/* The last tile of a panel: fewer than TILE_ROWS rows. */
static void tile_rest(int rows, const float *x, int64_t k, const float *panel, const float *bias, float *out, int64_t ld) {
    switch (rows) {
        TILE_CASE(1) TILE_CASE(2) TILE_CASE(3) TILE_CASE(4) TILE_CASE(5)
#if TILE_ROWS > 6
        TILE_CASE(6) TILE_CASE(7)
#endif
        default: break;
    }
}

/* out [m, N] = x [m, k] @ [weight_0; ...; weight_{count-1}].T (+ bias [N]), N = ns[0] + ... : the
 * products of several weights of one input (a layer's query, key and value projections) in one
 * call, each weight as slca_pack_panels left it, its columns after the previous weight's. */
void slca_small_product(const float *x, int64_t m, int64_t k, int64_t count, const float *const *weights,
                        const int64_t *ns, const float *bias, float *out) {
    int64_t total = 0, all_panels = 0;
    for (int64_t j = 0; j < count; j++) {
        total += ns[j];
        all_panels += (ns[j] + PANEL - 1) / PANEL;
    }
#pragma omp parallel for schedule(static)
    for (int64_t index = 0; index < all_panels; index++) {
        int64_t j = 0, p = index, column = 0; /* weight j, its panel p, the weight's first column */
        while (p >= (ns[j] + PANEL - 1) / PANEL) {
            p -= (ns[j] + PANEL - 1) / PANEL;
            column += ns[j];
            j++;
        }
        const float *panel = weights[j] + p * k * PANEL;
        const int64_t first = column + p * PANEL;
        const int64_t columns = ns[j] - p * PANEL < PANEL ? ns[j] - p * PANEL : PANEL;
        if (columns == PANEL) {
            const float *panel_bias = bias ? bias + first : NULL;
            int64_t r = 0;
            for (; r + TILE_ROWS <= m; r += TILE_ROWS)
                tile(TILE_ROWS, x + r * k, k, panel, panel_bias, out + r * total + first, total);
            tile_rest((int)(m - r), x + r * k, k, panel, panel_bias, out + r * total + first, total);
        } else { /* a weight's last panel, part of it past its columns: through a scratch tile */
            float scratch[TILE_ROWS * PANEL], padded_bias[PANEL] = {0};
            if (bias) memcpy(padded_bias, bias + first, columns * sizeof(float));
            for (int64_t r = 0; r < m; r += TILE_ROWS) {
                int rows = m - r < TILE_ROWS ? (int)(m - r) : TILE_ROWS;
                if (rows == TILE_ROWS)
                    tile(TILE_ROWS, x + r * k, k, panel, bias ? padded_bias : NULL, scratch, PANEL);
                else
                    tile_rest(rows, x + r * k, k, panel, bias ? padded_bias : NULL, scratch, PANEL);
                for (int i = 0; i < rows; i++)
                    memcpy(out + (r + i) * total + first, scratch + i * PANEL, columns * sizeof(float));
            }
        }
    }
}
