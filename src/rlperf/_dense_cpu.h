/* Dense float32 building blocks shared by the C kernels (policies/_lstm_cpu.c,
 * ppo/_mlp_update_cpu.c, ppo/_rollout_cpu.c): the target clones, the 8-wide vector type,
 * exp/sigmoid/tanh that vectorise, the 4 x 16 register-tile matmul, the weight-gradient tile and
 * a blocked transpose.
 * Everything is static (inline where it must be compiled for each clone's target), so each
 * extension that includes this file gets its own copy and nothing is exported.
 * Needs <math.h>, <stdint.h> and <string.h> included first.
 */
#ifndef RLPERF_DENSE_CPU_H
#define RLPERF_DENSE_CPU_H
/* x86-64: one clone for AVX2 + FMA machines, one baseline; the loader picks at run time, so a
 * build is portable and still uses FMA where it exists. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HOT
#endif

/* Helpers of the HOT functions: always inlined, so they are compiled for each clone's target
 * (an outlined copy would be baseline x86-64 code: no FMA, the 8-wide vectors split in two). */
#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* The register tiles are written with GCC's vector extensions (gcc and clang; not MSVC). A
 * compiler without them gets no kernel: setup.py skips the build on MSVC, this stops any other,
 * and rlperf runs the torch implementations instead (rlperf.native). */
#if !defined(__GNUC__)
#error "rlperf's C kernels need GCC vector extensions (gcc or clang)"
#endif
typedef float v8f __attribute__((vector_size(32), aligned(4)));

#define TILE_ROWS 4
#define TILE_COLS 16 /* two v8f */

/* exp(x) by range reduction and a degree-6 polynomial (Cephes expf's coefficients, ~1 ulp on
 * the clamped range). Plain arithmetic and bit moves, so the element loops below vectorise;
 * libm's expf would keep them scalar (~10x slower here). */
INLINE float exp_approx(float x) {
    /* One comparison per line: each maps onto one min/max instruction (nested ?: does not). */
    x = x < 88.0f ? x : 88.0f;
    x = x > -87.0f ? x : -87.0f;
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float n = (x * 1.44269504088896341f + magic) - magic;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits;
    memcpy(&bits, &p, 4);
    bits += (int32_t)n << 23;
    memcpy(&p, &bits, 4);
    return p;
}

INLINE float sigmoid(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

/* tanh(x) = 2 sigmoid(2x) - 1: absolute error ~1e-7, as the MLP's analytic path. */
INLINE float tanh_approx(float x) { return 2.0f / (1.0f + exp_approx(-2.0f * x)) - 1.0f; }

/* C[0, :n] += sum_k A[0, k] B[k, :n] for n a multiple of 16, one row in 1 x 64 register tiles
 * (then 1 x 16): eight independent sums per k, as many as the 4 x 16 tile below keeps, where
 * that tile given one row would spend three quarters of its multiply-adds on padding and its
 * two sums per row would wait on the FMA's latency (the LSTM's backward at one row a minibatch,
 * 4 x 128: 588 -> 390 us a minibatch). Each element's sum is the tile's, c then + a[k] b[k, j]
 * for k in order, so a row's results do not depend on the rows beside it, bit for bit (tested).
 * Other widths stay on the tile: its scalar tail compiles to other roundings than a copy here. */
INLINE void gemm_row_acc(int k_len, int n, const float *a, const float *b, float *c) {
    int j = 0;
    for (; j + 8 * 8 <= n; j += 8 * 8) {
        v8f acc[8];
        for (int q = 0; q < 8; q++) acc[q] = *(const v8f *)(c + j + 8 * q);
        for (int k = 0; k < k_len; k++) {
            const float av = a[k];
            const float *bk = b + (size_t)k * n + j;
            for (int q = 0; q < 8; q++) acc[q] += av * *(const v8f *)(bk + 8 * q);
        }
        for (int q = 0; q < 8; q++) *(v8f *)(c + j + 8 * q) = acc[q];
    }
    for (; j + 16 <= n; j += 16) {
        v8f acc0 = *(const v8f *)(c + j), acc1 = *(const v8f *)(c + j + 8);
        for (int k = 0; k < k_len; k++) {
            const float av = a[k];
            acc0 += av * *(const v8f *)(b + (size_t)k * n + j);
            acc1 += av * *(const v8f *)(b + (size_t)k * n + j + 8);
        }
        *(v8f *)(c + j) = acc0;
        *(v8f *)(c + j + 8) = acc1;
    }
}

/* C[r, :n] += sum_k A[r, k] B[k, :n] for r < rows <= 4; A has rows of lda floats (rows past
 * `rows` are read from a zero-padded copy by the caller), B (k, n) row-major.
 * A 4 x 16 register tile: per k, two loads of B, four broadcasts of A, eight FMAs. One row
 * of a width that is a multiple of 16 goes to gemm_row_acc. */
INLINE void gemm_tile_acc(int rows, int k_len, int n, const float *a, int lda,
                                 const float *b, float *c, int ldc) {
    if (rows == 1 && n % 16 == 0) {
        gemm_row_acc(k_len, n, a, b, c);
        return;
    }
    int j = 0;
    for (; j + TILE_COLS <= n; j += TILE_COLS) {
        v8f acc[TILE_ROWS][2];
        for (int r = 0; r < TILE_ROWS; r++) {
            if (r < rows) {
                acc[r][0] = *(const v8f *)(c + r * ldc + j);
                acc[r][1] = *(const v8f *)(c + r * ldc + j + 8);
            } else {
                acc[r][0] = (v8f){0};
                acc[r][1] = (v8f){0};
            }
        }
        for (int k = 0; k < k_len; k++) {
            v8f b0 = *(const v8f *)(b + (size_t)k * n + j);
            v8f b1 = *(const v8f *)(b + (size_t)k * n + j + 8);
            for (int r = 0; r < TILE_ROWS; r++) {
                float av = a[r * lda + k];
                acc[r][0] += av * b0;
                acc[r][1] += av * b1;
            }
        }
        for (int r = 0; r < rows; r++) {
            *(v8f *)(c + r * ldc + j) = acc[r][0];
            *(v8f *)(c + r * ldc + j + 8) = acc[r][1];
        }
    }
    for (; j < n; j++) { /* widths that are not a multiple of 16 */
        for (int r = 0; r < rows; r++) {
            float s = c[r * ldc + j];
            for (int k = 0; k < k_len; k++) s += a[r * lda + k] * b[(size_t)k * n + j];
            c[r * ldc + j] = s;
        }
    }
}

/* C (rows, n) += A (rows, k) B (k, n) for any rows <= 4: a partial tile reads A from a
 * zero-padded copy in `pad` (TILE_ROWS * k floats), as gemm_tile_acc needs. */
INLINE void gemm_rows(int rows, int k_len, int n, const float *a, int lda, const float *b,
                             float *c, int ldc, float *pad) {
    if (rows < TILE_ROWS) {
        memset(pad, 0, sizeof(float) * TILE_ROWS * k_len);
        for (int r = 0; r < rows; r++) memcpy(pad + r * k_len, a + r * lda, sizeof(float) * k_len);
        a = pad;
        lda = k_len;
    }
    gemm_tile_acc(rows, k_len, n, a, lda, b, c, ldc);
}

/* out (rows, n) = bias + x (rows, k) W^T for W (n, k) row-major with few rows (the heads):
 * dot products over k in 8-wide partial sums. */
INLINE void small_out_rows(int rows, int k_len, int n, const float *x, const float *w,
                                  const float *bias, float *out) {
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            const float *xr = x + (size_t)r * k_len, *wj = w + (size_t)j * k_len;
            v8f acc = {0};
            int k = 0;
            for (; k + 8 <= k_len; k += 8) acc += *(const v8f *)(xr + k) * *(const v8f *)(wj + k);
            float s = bias[j];
            for (int e = 0; e < 8; e++) s += acc[e];
            for (; k < k_len; k++) s += xr[k] * wj[k];
            out[(size_t)r * n + j] = s;
        }
}

/* Rows per pass of weight_grad: a pass's rows of X and D stay in L1 while every 4 x 16 tile
 * of G takes them in (without passes, each tile streamed all of X and D from L2: 87 -> 78 us
 * for dW_ih's half at 512 rows here). The sum over rows keeps its order. */
#define GRAD_PASS_ROWS 64

/* G[m0:m1, :k] = D[:, m0:m1]^T X and gb[m0:m1] = column sums of D (if gb): the weight and bias
 * gradients of a layer over all `n_rows` rows, D (n_rows, m) its output gradient, X (n_rows, k)
 * its input. Full 4-row tiles of G in registers over each pass of rows; the rest row by row. */
HOT __attribute__((unused)) /* (the rollout kernel includes this file and does not use it) */
static void weight_grad(int m0, int m1, int n_rows, int m, int k, const float *d, const float *x,
                        float *g, float *gb) {
    const int m_tiled = m0 + (m1 - m0) / TILE_ROWS * TILE_ROWS;
    for (int r = m0; r < m_tiled; r++) memset(g + (size_t)r * k, 0, sizeof(float) * k);
    for (int n0 = 0; n0 < n_rows; n0 += GRAD_PASS_ROWS) {
        const int n1 = n0 + GRAD_PASS_ROWS < n_rows ? n0 + GRAD_PASS_ROWS : n_rows;
        for (int r = m0; r < m_tiled; r += TILE_ROWS) {
            int j = 0;
            for (; j + TILE_COLS <= k; j += TILE_COLS) {
                v8f acc[TILE_ROWS][2];
                for (int q = 0; q < TILE_ROWS; q++) {
                    acc[q][0] = *(const v8f *)(g + (size_t)(r + q) * k + j);
                    acc[q][1] = *(const v8f *)(g + (size_t)(r + q) * k + j + 8);
                }
                for (int n = n0; n < n1; n++) {
                    const float *dn = d + (size_t)n * m + r;
                    v8f x0 = *(const v8f *)(x + (size_t)n * k + j);
                    v8f x1 = *(const v8f *)(x + (size_t)n * k + j + 8);
                    for (int q = 0; q < TILE_ROWS; q++) {
                        acc[q][0] += dn[q] * x0;
                        acc[q][1] += dn[q] * x1;
                    }
                }
                for (int q = 0; q < TILE_ROWS; q++) {
                    *(v8f *)(g + (size_t)(r + q) * k + j) = acc[q][0];
                    *(v8f *)(g + (size_t)(r + q) * k + j + 8) = acc[q][1];
                }
            }
            for (; j < k; j++)
                for (int q = 0; q < TILE_ROWS; q++) {
                    float s = g[(size_t)(r + q) * k + j];
                    for (int n = n0; n < n1; n++)
                        s += d[(size_t)n * m + r + q] * x[(size_t)n * k + j];
                    g[(size_t)(r + q) * k + j] = s;
                }
        }
    }
    int r = m_tiled;
    for (; r < m1; r++) {
        float *gr = g + (size_t)r * k;
        memset(gr, 0, sizeof(float) * k);
        for (int n = 0; n < n_rows; n++) {
            const float dv = d[(size_t)n * m + r];
            const float *restrict xn = x + (size_t)n * k;
            for (int j = 0; j < k; j++) gr[j] += dv * xn[j];
        }
    }
    if (gb) {
        memset(gb + m0, 0, sizeof(float) * (m1 - m0));
        for (int n = 0; n < n_rows; n++) {
            const float *restrict dn = d + (size_t)n * m;
            for (int q = m0; q < m1; q++) gb[q] += dn[q];
        }
    }
}

/* at (cols, rows) = a (rows, cols)^T, in 16 x 16 blocks: element by element, every write of a
 * 256 x 64 weight's transpose went to another cache line. */
__attribute__((unused)) /* (nor this) */
static void transpose(int rows, int cols, const float *a, float *at) {
    for (int i0 = 0; i0 < rows; i0 += 16)
        for (int j0 = 0; j0 < cols; j0 += 16) {
            const int i1 = i0 + 16 < rows ? i0 + 16 : rows, j1 = j0 + 16 < cols ? j0 + 16 : cols;
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++) at[(size_t)j * rows + i] = a[(size_t)i * cols + j];
        }
}

#endif /* RLPERF_DENSE_CPU_H */
