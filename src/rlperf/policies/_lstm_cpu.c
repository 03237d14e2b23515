/* The LSTM recurrence on the CPU, float32: a whole (T, B) sequence forward or backward in one
 * call; the whole actor-critic around it, forward, backward and rollout step ("The whole
 * actor-critic" below); and a whole rollout of it on rlperf's CartPole in one call ("The fused
 * CartPole rollout", the loop and the env shared with the MLP's in envs/_cartpole_cpu.h). Called only from rlperf/native/, which checks every tensor (dtype,
 * device, contiguity, shape, storage) and passes raw pointers; nothing here allocates a tensor
 * or holds the GIL while it computes. The size limits below are exported as module constants
 * (MAX_HIDDEN, MAX_FEATURES, MAX_LAYERS): rlperf.native reads them from here, so they are written
 * once.
 *
 * Why it exists: at CartPole's sizes (16 rows x 64 units per minibatch step) the torch version
 * is per-op dispatch, not arithmetic: ~12 ops a step, each a few microseconds, and with two
 * threads every small matmul also pays a fork/join. Here one call runs all T steps; rows are
 * independent through the recurrence, so two threads take half the rows each for the whole
 * sequence and meet once at the end.
 *
 * Layout (all row-major, contiguous):
 *   xproj  (T, B, 4H)  the input part of the gates, x W_ih^T + b (read only)
 *   acts   (T, B, 4H)  out: the gate activations sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
 *   keep   (T, B)      1, or 0 where the state is reset before step t
 *   h0, c0 (B, H)      state before step 0
 *   w_t    (H, 4H)     W_hh^T (forward)
 *   w      (4H, H)     W_hh (backward)
 *   cs, tcs, hs (T, B, H)  c_t, tanh(c_t), h_t
 *   hprev  (T, B, H)  out (forward): keep_t h_{t-1}, the state each step starts from, which
 *                      dW_hh = sum_t dz_t^T hprev_t needs (saves a concatenation and a product)
 *   grad_hs (T, B, H)  dL/dh_t from above; grad_z (T, B, 4H) out: dL/d(gate pre-activations)
 *   dh0, dc0 (B, H)    out: dL/dh0, dL/dc0 (also the running carries during the sweep)
 * Gate order i, f, g, o (nn.LSTM's).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../_dense_cpu.h"
#include "../envs/_cartpole_cpu.h"

#define MAX_HIDDEN 1024
#define MAX_FEATURES 4096 /* step: input features */

/* One row of one step, forward: z (4H) holds the gate pre-activations and receives their
 * activations; c_prev is the previous cell state, scaled here by keep. `restrict` lets the
 * compiler vectorise without runtime overlap checks (the buffers never overlap). */
INLINE void cell_forward(int hid, float *z, const float *restrict c_prev, float keep,
                                float *restrict c, float *restrict tc, float *restrict h) {
    /* The four gate blocks as four pointers: with one pointer and offsets of hid the compiler
     * cannot rule out overlap and falls back to scalar code. */
    float *restrict zi = z, *restrict zf = z + hid, *restrict zg = z + 2 * hid;
    float *restrict zo = z + 3 * hid;
    for (int u = 0; u < hid; u++) {
        float i = sigmoid(zi[u]), f = sigmoid(zf[u]), g = tanh_approx(zg[u]), o = sigmoid(zo[u]);
        zi[u] = i;
        zf[u] = f;
        zg[u] = g;
        zo[u] = o;
        float cn = f * (c_prev[u] * keep) + i * g;
        float th = tanh_approx(cn);
        c[u] = cn;
        tc[u] = th;
        h[u] = o * th;
    }
}

/* One row of one step, backward, gate blocks as separate pointers (see cell_forward). dh holds
 * the recurrent part of dL/dh_t (from step t+1) and dc dL/dc_t's carry; g* receive dL/dz_t;
 * dc leaves as the carry into step t-1. */
INLINE void cell_backward(int hid, const float *restrict ai, const float *restrict af,
                                 const float *restrict ag, const float *restrict ao,
                                 const float *restrict tc, const float *restrict grad_h,
                                 const float *restrict c_prev, float keep,
                                 const float *restrict dh, float *restrict dc,
                                 float *restrict gi, float *restrict gf, float *restrict gg,
                                 float *restrict go) {
    for (int u = 0; u < hid; u++) {
        float i = ai[u], f = af[u], g = ag[u], o = ao[u];
        float th = tc[u];
        float dhu = grad_h[u] + dh[u];
        float dcu = dc[u] + dhu * o * (1.0f - th * th);
        gi[u] = dcu * g * i * (1.0f - i);
        gf[u] = dcu * c_prev[u] * keep * f * (1.0f - f);
        gg[u] = dcu * i * (1.0f - g * g);
        go[u] = dhu * th * o * (1.0f - o);
        dc[u] = dcu * f * keep;
    }
}

typedef struct {
    int t_len, batch, hid;
    int in_features;              /* step: F */
    const float *x, *w_cat_t, *bias; /* step: x (B, F), [W_ih W_hh]^T (F + H, 4H), b (4H) */
    float *h_out, *c_out;         /* step: (B, H) */
    const float *xproj;
    float *acts;
    const float *keep, *h0, *c0, *w_t, *w;
    float *cs, *tcs, *hs, *hprev;
    const float *grad_hs;
    float *grad_z, *dh0, *dc0;
} Seq;

/* Rows [r0, r1) through all T steps, forward. */
HOT static void forward_rows(const Seq *s, int r0, int r1) {
    const int hid = s->hid, four = 4 * hid, b = s->batch;
    float hp[TILE_ROWS * MAX_HIDDEN];
    for (int t = 0; t < s->t_len; t++) {
        for (int rb = r0; rb < r1; rb += TILE_ROWS) {
            const int rows = r1 - rb < TILE_ROWS ? r1 - rb : TILE_ROWS;
            const float *h_prev = t ? s->hs + ((size_t)(t - 1) * b + rb) * hid : s->h0 + (size_t)rb * hid;
            const float *c_prev = t ? s->cs + ((size_t)(t - 1) * b + rb) * hid : s->c0 + (size_t)rb * hid;
            const float *keep = s->keep + (size_t)t * b + rb;
            /* The state this step starts from, reset where keep is 0; padded rows are zero. */
            memset(hp, 0, sizeof(float) * TILE_ROWS * hid);
            for (int r = 0; r < rows; r++)
                for (int u = 0; u < hid; u++) hp[r * hid + u] = h_prev[r * hid + u] * keep[r];
            memcpy(s->hprev + ((size_t)t * b + rb) * hid, hp, sizeof(float) * (size_t)rows * hid);
            float *z = s->acts + ((size_t)t * b + rb) * four;
            if (s->xproj != s->acts) /* the whole-network forward projects into acts itself */
                memcpy(z, s->xproj + ((size_t)t * b + rb) * four, sizeof(float) * (size_t)rows * four);
            gemm_tile_acc(rows, hid, four, hp, hid, s->w_t, z, four);
            for (int r = 0; r < rows; r++) {
                const size_t row = (size_t)t * b + rb + r;
                cell_forward(hid, z + r * four, c_prev + r * hid, keep[r], s->cs + row * hid,
                             s->tcs + row * hid, s->hs + row * hid);
            }
        }
    }
}

/* Rows [r0, r1) through all T steps, backward. dh0/dc0 rows carry dL/dh_{t-1} (recurrent part)
 * and dL/dc_{t-1} from step t to step t-1; they start at zero (no gradient into the final
 * state) and end as the gradients of the initial state. */
HOT static void backward_rows(const Seq *s, int r0, int r1) {
    const int hid = s->hid, four = 4 * hid, b = s->batch;
    float gz_pad[TILE_ROWS * 4 * MAX_HIDDEN];
    memset(s->dh0 + (size_t)r0 * hid, 0, sizeof(float) * (size_t)(r1 - r0) * hid);
    memset(s->dc0 + (size_t)r0 * hid, 0, sizeof(float) * (size_t)(r1 - r0) * hid);
    for (int t = s->t_len - 1; t >= 0; t--) {
        for (int rb = r0; rb < r1; rb += TILE_ROWS) {
            const int rows = r1 - rb < TILE_ROWS ? r1 - rb : TILE_ROWS;
            const float *keep = s->keep + (size_t)t * b + rb;
            for (int r = 0; r < rows; r++) {
                const size_t row = (size_t)t * b + rb + r;
                const float *cp = t ? s->cs + (row - b) * hid : s->c0 + (size_t)(rb + r) * hid;
                const float *a = s->acts + row * four;
                float *gz = s->grad_z + row * four;
                cell_backward(hid, a, a + hid, a + 2 * hid, a + 3 * hid, s->tcs + row * hid,
                              s->grad_hs + row * hid, cp, keep[r], s->dh0 + (size_t)(rb + r) * hid,
                              s->dc0 + (size_t)(rb + r) * hid, gz, gz + hid, gz + 2 * hid,
                              gz + 3 * hid);
            }
            /* dL/dh_{t-1} = keep * (dz_t W_hh). A tile's rows of dz_t are contiguous; a partial
             * tile is read from a zero-padded copy. */
            const float *gz = s->grad_z + ((size_t)t * b + rb) * four;
            if (rows < TILE_ROWS) {
                memset(gz_pad, 0, sizeof(float) * TILE_ROWS * four);
                memcpy(gz_pad, gz, sizeof(float) * (size_t)rows * four);
                gz = gz_pad;
            }
            float *dh = s->dh0 + (size_t)rb * hid;
            memset(dh, 0, sizeof(float) * (size_t)rows * hid);
            gemm_tile_acc(rows, four, hid, gz, four, s->w, dh, hid);
            for (int r = 0; r < rows; r++)
                for (int u = 0; u < hid; u++) dh[r * hid + u] *= keep[r];
        }
    }
}

/* Rows [r0, r1), one rollout step with the input projection fused in:
 * z = b + [x, keep h] [W_ih W_hh]^T, then the cell. Nothing but h_out and c_out is kept. */
HOT static void step_rows(const Seq *s, int r0, int r1) {
    const int hid = s->hid, four = 4 * hid, f_in = s->in_features, k_len = f_in + hid;
    float xh[TILE_ROWS * (MAX_FEATURES + MAX_HIDDEN)];
    float z[TILE_ROWS * 4 * MAX_HIDDEN];
    float tc[MAX_HIDDEN];
    for (int rb = r0; rb < r1; rb += TILE_ROWS) {
        const int rows = r1 - rb < TILE_ROWS ? r1 - rb : TILE_ROWS;
        memset(xh, 0, sizeof(float) * TILE_ROWS * k_len);
        for (int r = 0; r < rows; r++) {
            const float kr = s->keep[rb + r];
            const float *h = s->h0 + (size_t)(rb + r) * hid;
            memcpy(xh + r * k_len, s->x + (size_t)(rb + r) * f_in, sizeof(float) * f_in);
            for (int u = 0; u < hid; u++) xh[r * k_len + f_in + u] = h[u] * kr;
        }
        for (int r = 0; r < rows; r++) memcpy(z + r * four, s->bias, sizeof(float) * four);
        gemm_tile_acc(rows, k_len, four, xh, k_len, s->w_cat_t, z, four);
        for (int r = 0; r < rows; r++)
            cell_forward(hid, z + r * four, s->c0 + (size_t)(rb + r) * hid, s->keep[rb + r],
                         s->c_out + (size_t)(rb + r) * hid, tc, s->h_out + (size_t)(rb + r) * hid);
    }
}

typedef void (*RowsFn)(const Seq *, int, int);

/* Split the rows over `threads` OpenMP threads in blocks that are whole tiles. */
static void run_rows(RowsFn fn, const Seq *s, int threads) {
    const int b = s->batch;
    const int tiles = (b + TILE_ROWS - 1) / TILE_ROWS;
    if (threads > tiles) threads = tiles;
    if (threads <= 1) {
        fn(s, 0, b);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int p = 0; p < threads; p++) {
        int t0 = tiles * p / threads, t1 = tiles * (p + 1) / threads;
        int r0 = t0 * TILE_ROWS, r1 = t1 * TILE_ROWS < b ? t1 * TILE_ROWS : b;
        fn(s, r0, r1);
    }
#else
    fn(s, 0, b);
#endif
}

/* ---- The whole actor-critic, for the analytic PPO update --------------------------------------
 *
 * Why: with the recurrence compiled, a 512-row minibatch still spent ~1.1 ms in ~35 torch ops
 * around it (encoder, input projection, heads, their backward and the weight gradients): each
 * a fork/join of the two threads plus dispatch, and the matmuls at 84 GFLOPS on one core
 * where the register tile above reaches ~105 at these shapes. Here one call runs the forward
 * and one the backward, each thread on its own environments (the rows of every time step) from
 * the observations to the heads and back; the weight gradients, which sum over all rows, come
 * after one barrier, each thread taking half of every gradient's rows over all N rows, so no
 * sum is split between threads and the result does not depend on the thread count.
 *
 * Layout (row-major; N = T * B rows, time-major as everywhere above):
 *   obs (N, width[0]); encoder layer l: W (width[l+1], width[l]), b, output tanh(.) (N, width[l+1])
 *   the LSTM input x is the last layer's output (obs without layers), F = width[L] features;
 *   W_ih (4H, F), W_hh (4H, H), bias (4H); heads W (n_out, H), b (n_out), out (N, n_out)
 *   dz[l] (N, width[l+1]): backward out, dL/d(layer l pre-activation); grad_hs (N, H) scratch.
 */
#define MAX_LAYERS 8
#define MAX_K (4 * MAX_HIDDEN > MAX_FEATURES ? 4 * MAX_HIDDEN : MAX_FEATURES)

typedef struct {
    int n_layers, n_out;
    int width[MAX_LAYERS + 1];
    const float *obs;
    const float *enc_w[MAX_LAYERS], *enc_b[MAX_LAYERS];
    float *layers[MAX_LAYERS], *dz[MAX_LAYERS];
    const float *w_ih, *w_hh, *bias, *w_head, *b_head;
    float *wt; /* forward scratch: every weight transposed (sum of the weights' sizes) */
    float *out;
    const float *grad_out;
    float *grad_hs;
    float *g_enc_w[MAX_LAYERS], *g_enc_b[MAX_LAYERS], *g_w_ih, *g_w_hh, *g_bias, *g_w_head,
        *g_b_head;
    Seq seq; /* the recurrence's sizes and buffers; seq.xproj == seq.acts */
} Net;

static inline int features(const Net *n) { return n->width[n->n_layers]; }
static inline const float *lstm_input(const Net *n) {
    return n->n_layers ? n->layers[n->n_layers - 1] : n->obs;
}

/* Where each weight's transpose goes in n->wt: the encoder's, then W_ih^T, then W_hh^T. */
static float *wt_slot(const Net *n, int which) {
    float *p = n->wt;
    for (int l = 0; l < which && l < n->n_layers; l++) p += (size_t)n->width[l] * n->width[l + 1];
    if (which > n->n_layers) p += (size_t)features(n) * 4 * n->seq.hid;
    return p;
}

/* The encoder on `rows` <= 4 rows from row0 (of obs and of every layer's output, which it
 * writes); returns those rows of the last layer's output (of obs without layers), the LSTM's
 * input. The weights transposed are in n->wt (wt_slot). */
INLINE const float *encode_rows(const Net *n, size_t row0, int rows, float *pad) {
    const float *in = n->obs + row0 * n->width[0];
    for (int l = 0; l < n->n_layers; l++) {
        const int k = n->width[l], w = n->width[l + 1];
        float *o = n->layers[l] + row0 * w;
        for (int r = 0; r < rows; r++) memcpy(o + r * w, n->enc_b[l], sizeof(float) * w);
        gemm_rows(rows, k, w, in, k, wt_slot(n, l), o, w, pad);
        for (int e = 0; e < rows * w; e++) o[e] = tanh_approx(o[e]);
        in = o;
    }
    return in;
}

/* How the row-wise parts around the recurrence (encoder, input projection, heads' and encoder's
 * backward) walk rows [r0, r1) of every step: `steps` runs of `width` rows from row
 * t * batch + first. When [r0, r1) is the whole batch the steps' rows are contiguous
 * (time-major), so one run covers all T * B rows in full tiles: at one row a step (4 envs in 4
 * minibatches) that is T / 4 tiles instead of T one-row ones. A row's arithmetic is the same
 * whichever tile it is in (gemm_row_acc's comment; tested), so the results do not change. */
typedef struct {
    int steps, width, first;
} RowTiles;

static RowTiles row_tiles(const Seq *s, int r0, int r1) {
    if (r0 == 0 && r1 == s->batch) return (RowTiles){1, s->t_len * s->batch, 0};
    return (RowTiles){s->t_len, r1 - r0, r0};
}

/* Rows [r0, r1) of every step, forward: encoder, input projection into acts, recurrence, heads. */
HOT static void net_forward_rows(const Net *n, int r0, int r1) {
    float pad[TILE_ROWS * MAX_K];
    const Seq *s = &n->seq;
    const int b = s->batch, hid = s->hid, four = 4 * hid, f_in = features(n), L = n->n_layers;
    const RowTiles rt = row_tiles(s, r0, r1);
    for (int t = 0; t < rt.steps; t++)
        for (int rb = 0; rb < rt.width; rb += TILE_ROWS) {
            const int rows = rt.width - rb < TILE_ROWS ? rt.width - rb : TILE_ROWS;
            const size_t row0 = (size_t)t * b + rt.first + rb;
            const float *in = encode_rows(n, row0, rows, pad);
            float *z = s->acts + row0 * four;
            for (int r = 0; r < rows; r++) memcpy(z + r * four, n->bias, sizeof(float) * four);
            gemm_rows(rows, f_in, four, in, f_in, wt_slot(n, L), z, four, pad);
        }
    forward_rows(s, r0, r1);
    for (int t = 0; t < s->t_len; t++) {
        const size_t row0 = (size_t)t * b + r0;
        small_out_rows(r1 - r0, hid, n->n_out, s->hs + row0 * hid, n->w_head, n->b_head,
                       n->out + row0 * n->n_out);
    }
}

/* Rows [r0, r1) of every step, backward up to the weight gradients: dL/dh from the heads, the
 * recurrence, then dL/dx and each encoder layer's dz. */
HOT static void net_backward_rows(const Net *n, int r0, int r1) {
    float pad[TILE_ROWS * MAX_K];
    const Seq *s = &n->seq;
    const int b = s->batch, hid = s->hid, four = 4 * hid, L = n->n_layers, n_out = n->n_out;
    const RowTiles rt = row_tiles(s, r0, r1);
    for (int t = 0; t < rt.steps; t++)
        for (int rb = 0; rb < rt.width; rb += TILE_ROWS) {
            const int rows = rt.width - rb < TILE_ROWS ? rt.width - rb : TILE_ROWS;
            const size_t row0 = (size_t)t * b + rt.first + rb;
            float *gh = n->grad_hs + row0 * hid;
            memset(gh, 0, sizeof(float) * (size_t)rows * hid);
            gemm_rows(rows, n_out, hid, n->grad_out + row0 * n_out, n_out, n->w_head, gh, hid, pad);
        }
    backward_rows(s, r0, r1);
    if (L == 0) return; /* no encoder: nothing needs dL/dobs */
    for (int t = 0; t < rt.steps; t++)
        for (int rb = 0; rb < rt.width; rb += TILE_ROWS) {
            const int rows = rt.width - rb < TILE_ROWS ? rt.width - rb : TILE_ROWS;
            const size_t row0 = (size_t)t * b + rt.first + rb;
            /* dL/dx = dz_gates W_ih, into the last layer's dz, then back through each tanh. */
            int w = n->width[L];
            float *d = n->dz[L - 1] + row0 * w;
            memset(d, 0, sizeof(float) * (size_t)rows * w);
            gemm_rows(rows, four, w, s->grad_z + row0 * four, four, n->w_ih, d, w, pad);
            for (int l = L - 1; l >= 0; l--) {
                w = n->width[l + 1];
                d = n->dz[l] + row0 * w;
                const float *y = n->layers[l] + row0 * w;
                for (int e = 0; e < rows * w; e++) d[e] *= 1.0f - y[e] * y[e];
                if (l > 0) {
                    const int k = n->width[l];
                    float *dp = n->dz[l - 1] + row0 * k;
                    memset(dp, 0, sizeof(float) * (size_t)rows * k);
                    gemm_rows(rows, w, k, d, w, n->enc_w[l], dp, k, pad);
                }
            }
        }
}

/* This thread's share [m0, m1) of a gradient with m rows: whole tiles, split by thread. */
static void share(int m, int p, int np, int *m0, int *m1) {
    const int tiles = (m + TILE_ROWS - 1) / TILE_ROWS;
    *m0 = tiles * p / np * TILE_ROWS;
    *m1 = tiles * (p + 1) / np * TILE_ROWS;
    if (*m0 > m) *m0 = m;
    if (*m1 > m) *m1 = m;
}

/* Thread p of np's share of every weight gradient, over all N rows. */
static void net_weight_grads(const Net *n, int p, int np) {
    const Seq *s = &n->seq;
    const int rows = s->t_len * s->batch, hid = s->hid, four = 4 * hid, L = n->n_layers;
    int m0, m1;
    share(n->n_out, p, np, &m0, &m1);
    weight_grad(m0, m1, rows, n->n_out, hid, n->grad_out, s->hs, n->g_w_head, n->g_b_head);
    share(four, p, np, &m0, &m1);
    weight_grad(m0, m1, rows, four, features(n), s->grad_z, lstm_input(n), n->g_w_ih, n->g_bias);
    weight_grad(m0, m1, rows, four, hid, s->grad_z, s->hprev, n->g_w_hh, NULL);
    for (int l = 0; l < L; l++) {
        share(n->width[l + 1], p, np, &m0, &m1);
        weight_grad(m0, m1, rows, n->width[l + 1], n->width[l], n->dz[l],
                    l ? n->layers[l - 1] : n->obs, n->g_enc_w[l], n->g_enc_b[l]);
    }
}

/* Environments (rows of every step) [r0, r1) of thread p of np: whole tiles. */
static void env_share(const Net *n, int p, int np, int *r0, int *r1) {
    const int b = n->seq.batch, tiles = (b + TILE_ROWS - 1) / TILE_ROWS;
    *r0 = tiles * p / np * TILE_ROWS;
    *r1 = tiles * (p + 1) / np * TILE_ROWS;
    if (*r0 > b) *r0 = b;
    if (*r1 > b) *r1 = b;
}

/* Rows [r0, r1) of one rollout step of the whole network: encoder (its transposed weights
 * prepared once per rollout in n->wt, then [W_ih W_hh]^T), the fused step, the heads, and for
 * one categorical action a Gumbel-max sample from the exponential draws in `noise`. */
HOT static void net_act_rows(const Net *n, const float *noise, int64_t *actions, float *logprob,
                             int r0, int r1) {
    float pad[TILE_ROWS * MAX_K];
    const Seq *s = &n->seq;
    const int hid = s->hid, n_out = n->n_out, k_act = n_out - 1;
    for (int rb = r0; rb < r1; rb += TILE_ROWS)
        encode_rows(n, (size_t)rb, r1 - rb < TILE_ROWS ? r1 - rb : TILE_ROWS, pad);
    step_rows(s, r0, r1); /* reads the encoder's output as s->x */
    small_out_rows(r1 - r0, hid, n_out, s->h_out + (size_t)r0 * hid, n->w_head, n->b_head,
                   n->out + (size_t)r0 * n_out);
    if (!noise) return;
    for (int r = r0; r < r1; r++) {
        /* log_softmax, then argmax(logp - log E), E ~ Exp(1): an exact categorical sample. */
        const float *lg = n->out + (size_t)r * n_out, *e = noise + (size_t)r * k_act;
        float mx = lg[0];
        for (int j = 1; j < k_act; j++) mx = lg[j] > mx ? lg[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < k_act; j++) sum += expf(lg[j] - mx);
        const float lse = mx + logf(sum);
        int best = 0;
        float best_key = -INFINITY;
        for (int j = 0; j < k_act; j++) {
            const float key = (lg[j] - lse) - logf(e[j]);
            if (key > best_key) best_key = key, best = j;
        }
        actions[r] = best;
        logprob[r] = lg[best] - lse;
    }
}

static void net_forward(const Net *n, int threads) {
    const int L = n->n_layers, hid = n->seq.hid;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
#ifdef _OPENMP
        const int p = omp_get_thread_num(), np = omp_get_num_threads();
#else
        const int p = 0, np = 1;
        (void)threads;
#endif
        /* The transposes the tiles read, one weight per thread in turn. */
        for (int l = p; l < L + 2; l += np) {
            if (l < L) transpose(n->width[l + 1], n->width[l], n->enc_w[l], wt_slot(n, l));
            else if (l == L) transpose(4 * hid, features(n), n->w_ih, wt_slot(n, L));
            else transpose(4 * hid, hid, n->w_hh, wt_slot(n, L + 1));
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
        int r0, r1;
        env_share(n, p, np, &r0, &r1);
        if (r0 < r1) net_forward_rows(n, r0, r1);
    }
}

/* The weight gradients as a list of (pointer, length), in the order net_backward's caller
 * passes them; returns how many. */
static int grad_list(const Net *n, float **ptr, size_t *len) {
    const int L = n->n_layers, hid = n->seq.hid, four = 4 * hid;
    int c = 0;
    for (int l = 0; l < L; l++)
        ptr[c] = n->g_enc_w[l], len[c++] = (size_t)n->width[l + 1] * n->width[l];
    for (int l = 0; l < L; l++) ptr[c] = n->g_enc_b[l], len[c++] = (size_t)n->width[l + 1];
    ptr[c] = n->g_w_ih, len[c++] = (size_t)four * n->width[L];
    ptr[c] = n->g_w_hh, len[c++] = (size_t)four * hid;
    ptr[c] = n->g_bias, len[c++] = (size_t)four;
    ptr[c] = n->g_w_head, len[c++] = (size_t)n->n_out * hid;
    ptr[c] = n->g_b_head, len[c++] = (size_t)n->n_out;
    return c;
}

#define CLIP_BLOCKS 64

/* Thread p of np: clip_grad_norm_'s arithmetic over all the weight gradients,
 * g *= min(1, max_norm / (||g|| + 1e-6)). The squares are summed in CLIP_BLOCKS fixed pieces of
 * the concatenated gradient (in double), whatever the thread count, and the pieces added in
 * order, so the result does not depend on the threads. `partial` is shared, CLIP_BLOCKS long. */
static void clip_grads(const Net *n, float max_norm, double *partial, int p, int np) {
    float *ptr[2 * MAX_LAYERS + 5];
    size_t len[2 * MAX_LAYERS + 5], total = 0;
    const int count = grad_list(n, ptr, len);
    for (int i = 0; i < count; i++) total += len[i];
    const size_t block = (total + CLIP_BLOCKS - 1) / CLIP_BLOCKS;
    for (int pass = 0; pass < 2; pass++) {
        float scale = 1.0f;
        if (pass == 1) {
            double sq = 0.0;
            for (int k = 0; k < CLIP_BLOCKS; k++) sq += partial[k];
            const float coef = max_norm / ((float)sqrt(sq) + 1e-6f);
            scale = coef < 1.0f ? coef : 1.0f;
        }
        for (int k = p; k < CLIP_BLOCKS; k += np) {
            /* Block k covers [k * block, (k + 1) * block) of the concatenation. */
            size_t lo = (size_t)k * block, hi = lo + block, base = 0;
            double sq = 0.0;
            for (int i = 0; i < count; base += len[i], i++) {
                if (hi <= base || lo >= base + len[i]) continue; /* no overlap with this one */
                const size_t a = lo > base ? lo - base : 0;
                const size_t e = hi - base < len[i] ? hi - base : len[i];
                float *restrict g = ptr[i];
                if (pass == 0)
                    for (size_t j = a; j < e; j++) sq += (double)g[j] * g[j];
                else
                    for (size_t j = a; j < e; j++) g[j] *= scale;
            }
            if (pass == 0) partial[k] = sq;
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
    }
}

static void net_backward(const Net *n, int threads, float max_grad_norm) {
    double partial[CLIP_BLOCKS];
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
#ifdef _OPENMP
        const int p = omp_get_thread_num(), np = omp_get_num_threads();
#else
        const int p = 0, np = 1;
        (void)threads;
#endif
        int r0, r1;
        env_share(n, p, np, &r0, &r1);
        if (r0 < r1) net_backward_rows(n, r0, r1);
#ifdef _OPENMP
#pragma omp barrier
#endif
        net_weight_grads(n, p, np);
        if (max_grad_norm > 0.0f) {
#ifdef _OPENMP
#pragma omp barrier
#endif
            clip_grads(n, max_grad_norm, partial, p, np);
        }
    }
}

static int parse(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, long *dims, int ndims,
                 void **ptrs) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "expected %zd arguments, got %zd", want, nargs);
        return -1;
    }
    for (int i = 0; i < ndims; i++) {
        dims[i] = PyLong_AsLong(args[i]);
        if (dims[i] == -1 && PyErr_Occurred()) return -1;
    }
    for (Py_ssize_t i = ndims; i < want; i++) {
        ptrs[i - ndims] = PyLong_AsVoidPtr(args[i]);
        if (ptrs[i - ndims] == NULL && PyErr_Occurred()) return -1;
    }
    if (dims[2] < 1 || dims[2] > MAX_HIDDEN) {
        PyErr_Format(PyExc_ValueError, "hidden size %ld outside 1..%d", dims[2], MAX_HIDDEN);
        return -1;
    }
    return 0;
}

/* forward(T, B, H, threads, xproj, acts, keep, h0, c0, w_t, cs, tcs, hs, hprev) */
static PyObject *py_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long d[4];
    void *p[10];
    if (parse(args, nargs, 14, d, 4, p) < 0) return NULL;
    Seq s = {.t_len = (int)d[0], .batch = (int)d[1], .hid = (int)d[2], .xproj = p[0],
             .acts = p[1], .keep = p[2], .h0 = p[3], .c0 = p[4], .w_t = p[5], .cs = p[6],
             .tcs = p[7], .hs = p[8], .hprev = p[9]};
    Py_BEGIN_ALLOW_THREADS run_rows(forward_rows, &s, (int)d[3]);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* backward(T, B, H, threads, acts, keep, c0, w, cs, tcs, grad_hs, grad_z, dh0, dc0) */
static PyObject *py_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long d[4];
    void *p[10];
    if (parse(args, nargs, 14, d, 4, p) < 0) return NULL;
    Seq s = {.t_len = (int)d[0], .batch = (int)d[1], .hid = (int)d[2], .acts = p[0],
             .keep = p[1], .c0 = p[2], .w = p[3], .cs = p[4], .tcs = p[5], .grad_hs = p[6],
             .grad_z = p[7], .dh0 = p[8], .dc0 = p[9]};
    Py_BEGIN_ALLOW_THREADS run_rows(backward_rows, &s, (int)d[3]);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* The whole-network calls' arguments: T, B, H, L, n_out, threads, width[0..L], then pointers
 * (`fixed` plus `per_layer` per encoder layer). Fills the sizes of n and returns the pointers
 * in ptrs, or -1 with an exception set. */
static int parse_net(PyObject *const *args, Py_ssize_t nargs, int fixed, int per_layer, Net *n,
                     void **ptrs) {
    long d[6];
    if (nargs < 6) {
        PyErr_SetString(PyExc_TypeError, "expected T, B, H, L, n_out, threads, widths, pointers");
        return -1;
    }
    for (int i = 0; i < 6; i++) {
        d[i] = PyLong_AsLong(args[i]);
        if (d[i] == -1 && PyErr_Occurred()) return -1;
    }
    if (d[3] < 0 || d[3] > MAX_LAYERS) {
        PyErr_Format(PyExc_ValueError, "%ld encoder layers outside 0..%d", d[3], MAX_LAYERS);
        return -1;
    }
    if (d[2] < 1 || d[2] > MAX_HIDDEN) {
        PyErr_Format(PyExc_ValueError, "hidden size %ld outside 1..%d", d[2], MAX_HIDDEN);
        return -1;
    }
    const int L = (int)d[3], want = 6 + (L + 1) + fixed + per_layer * L;
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "expected %d arguments, got %zd", want, nargs);
        return -1;
    }
    memset(n, 0, sizeof(*n));
    n->seq.t_len = (int)d[0];
    n->seq.batch = (int)d[1];
    n->seq.hid = (int)d[2];
    n->n_layers = L;
    n->n_out = (int)d[4];
    for (int l = 0; l <= L; l++) {
        long w = PyLong_AsLong(args[6 + l]);
        if (w == -1 && PyErr_Occurred()) return -1;
        if (w < 1 || w > MAX_FEATURES) {
            PyErr_Format(PyExc_ValueError, "layer width %ld outside 1..%d", w, MAX_FEATURES);
            return -1;
        }
        n->width[l] = (int)w;
    }
    for (int i = 7 + L; i < want; i++) {
        ptrs[i - 7 - L] = PyLong_AsVoidPtr(args[i]);
        if (ptrs[i - 7 - L] == NULL && PyErr_Occurred()) return -1;
    }
    return (int)d[5];
}

/* net_forward(T, B, H, L, n_out, threads, *widths, obs, *enc_w, *enc_b, *layers, w_ih, w_hh,
 *             bias, w_head, b_head, wt, acts, keep, h0, c0, cs, tcs, hs, hprev, out) */
static PyObject *py_net_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Net n;
    void *p[16 + 3 * MAX_LAYERS];
    const int threads = parse_net(args, nargs, 16, 3, &n, p);
    if (threads < 0) return NULL;
    const int L = n.n_layers;
    void **q = p;
    n.obs = *q++;
    for (int l = 0; l < L; l++) n.enc_w[l] = *q++;
    for (int l = 0; l < L; l++) n.enc_b[l] = *q++;
    for (int l = 0; l < L; l++) n.layers[l] = *q++;
    n.w_ih = *q++, n.w_hh = *q++, n.bias = *q++, n.w_head = *q++, n.b_head = *q++, n.wt = *q++;
    Seq *s = &n.seq;
    s->acts = *q++, s->keep = *q++, s->h0 = *q++, s->c0 = *q++, s->cs = *q++, s->tcs = *q++;
    s->hs = *q++, s->hprev = *q++, n.out = *q++;
    s->xproj = s->acts;
    s->w_t = wt_slot(&n, L + 1);
    Py_BEGIN_ALLOW_THREADS net_forward(&n, threads);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* net_backward(T, B, H, L, n_out, threads, *widths, obs, *enc_w, *layers, *dz, w_ih, w_hh,
 *              w_head, acts, keep, c0, cs, tcs, hs, hprev, grad_out, grad_hs, grad_z, dh0, dc0,
 *              *g_enc_w, *g_enc_b, g_w_ih, g_w_hh, g_bias, g_w_head, g_b_head, max_grad_norm):
 * max_grad_norm > 0 clips all the gradients together to that norm */
static PyObject *py_net_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Net n;
    void *p[21 + 5 * MAX_LAYERS];
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "net_backward: expected arguments");
        return NULL;
    }
    const float max_grad_norm = (float)PyFloat_AsDouble(args[nargs - 1]);
    if (max_grad_norm == -1.0f && PyErr_Occurred()) return NULL;
    const int threads = parse_net(args, nargs - 1, 21, 5, &n, p);
    if (threads < 0) return NULL;
    const int L = n.n_layers;
    void **q = p;
    n.obs = *q++;
    for (int l = 0; l < L; l++) n.enc_w[l] = *q++;
    for (int l = 0; l < L; l++) n.layers[l] = *q++;
    for (int l = 0; l < L; l++) n.dz[l] = *q++;
    n.w_ih = *q++, n.w_hh = *q++, n.w_head = *q++;
    Seq *s = &n.seq;
    s->acts = *q++, s->keep = *q++, s->c0 = *q++, s->cs = *q++, s->tcs = *q++, s->hs = *q++;
    s->hprev = *q++;
    n.grad_out = *q++, n.grad_hs = *q++;
    s->grad_z = *q++, s->dh0 = *q++, s->dc0 = *q++;
    for (int l = 0; l < L; l++) n.g_enc_w[l] = *q++;
    for (int l = 0; l < L; l++) n.g_enc_b[l] = *q++;
    n.g_w_ih = *q++, n.g_w_hh = *q++, n.g_bias = *q++, n.g_w_head = *q++, n.g_b_head = *q++;
    s->grad_hs = n.grad_hs;
    s->w = n.w_hh;
    Py_BEGIN_ALLOW_THREADS net_backward(&n, threads, max_grad_norm);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* net_act(1, B, H, L, n_out, threads, *widths, obs, *enc_b, *layers, wt, bias, w_head, b_head,
 *         keep, h, c, h_out, c_out, out, noise, actions, logprob): one rollout step; wt holds
 * each encoder weight transposed, then [W_ih W_hh]^T; noise 0: no sampling. */
static PyObject *py_net_act(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Net n;
    void *p[14 + 2 * MAX_LAYERS];
    const int threads = parse_net(args, nargs, 14, 2, &n, p);
    if (threads < 0) return NULL;
    if (n.seq.t_len != 1) {
        PyErr_Format(PyExc_ValueError, "net_act is one step: T = 1, got %d", n.seq.t_len);
        return NULL;
    }
    const int L = n.n_layers;
    void **q = p;
    n.obs = *q++;
    for (int l = 0; l < L; l++) n.enc_b[l] = *q++;
    for (int l = 0; l < L; l++) n.layers[l] = *q++;
    n.wt = *q++;
    Seq *s = &n.seq;
    s->bias = *q++;
    n.w_head = *q++, n.b_head = *q++;
    s->keep = *q++, s->h0 = *q++, s->c0 = *q++, s->h_out = *q++, s->c_out = *q++;
    n.out = *q++;
    const float *noise = *q++;
    int64_t *actions = *q++;
    float *logprob = *q++;
    s->in_features = n.width[L];
    s->x = L ? n.layers[L - 1] : n.obs;
    s->w_cat_t = wt_slot(&n, L);
    Py_BEGIN_ALLOW_THREADS
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
#ifdef _OPENMP
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
#endif
        int r0, r1;
        env_share(&n, t, nt, &r0, &r1);
        if (r0 < r1) net_act_rows(&n, noise, actions, logprob, r0, r1);
    }
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* ---- The fused CartPole rollout ----------------------------------------------------------------
 *
 * Why: at 4 envs the trainer's recurrent rollout step cost ~150 us (the compiled network step
 * ~15 us of it, the rest Python, torch dispatch around the state and the numpy env). Here the
 * whole rollout is one call: per step the state saved where a BPTT segment starts, the network
 * step of net_act (the same arithmetic, so the same actions, log-probabilities, values and
 * states as the compiled step bit for bit), CartPole's step, and the episode-start flags the
 * next step resets the state by. V(final observation) of a truncated episode is the network on
 * that one row with the state after the step (not yet reset), as bootstrap_truncated computes
 * it. One thread: rows are independent, so the result is the same as net_act's on any number.
 */
typedef struct {
    Net net;       /* N rows: obs is slot t's, set each step */
    Net one;       /* one row, for V(final observation) */
    float *h, *c;  /* (N, H) the state entering the step; the kernel's own alternate buffers */
    float *h_alt, *c_alt;
    float *keep;   /* (N) */
    float *done;   /* (T + 1, N) the buffer's episode-start flags */
    float *states_h, *states_c; /* (T / horizon, N, H) the state at each segment's start */
    int horizon, hid;
} LstmRollout;

/* The encoder's input rows and the LSTM's input, for net's current obs. */
static void point_input(Net *n, const float *obs) {
    n->obs = obs;
    n->seq.x = n->n_layers ? n->layers[n->n_layers - 1] : obs;
}

static void lstm_act(void *ctx, const Rollout *r, int t) {
    LstmRollout *m = ctx;
    const int n = r->n, hid = m->hid, a = r->actions;
    const size_t row = (size_t)t * n, state_len = (size_t)n * hid;
    if (t % m->horizon == 0) {
        memcpy(m->states_h + (size_t)(t / m->horizon) * state_len, m->h, sizeof(float) * state_len);
        memcpy(m->states_c + (size_t)(t / m->horizon) * state_len, m->c, sizeof(float) * state_len);
    }
    for (int j = 0; j < n; j++) m->keep[j] = 1.0f - m->done[row + j];
    Net *net = &m->net;
    point_input(net, r->obs + row * r->obs_dim);
    net->seq.h0 = m->h, net->seq.c0 = m->c, net->seq.h_out = m->h_alt, net->seq.c_out = m->c_alt;
    net_act_rows(net, r->noise + row * a, r->act + row, r->logprobs + row, 0, n);
    for (int j = 0; j < n; j++) r->values[row + j] = net->out[(size_t)j * net->n_out + a];
    float *h = m->h, *c = m->c; /* the step's output is the next step's input */
    m->h = m->h_alt, m->c = m->c_alt, m->h_alt = h, m->c_alt = c;
}

static void lstm_stepped(void *ctx, const Rollout *r, int t) {
    LstmRollout *m = ctx;
    float *next = m->done + (size_t)(t + 1) * r->n;
    for (int j = 0; j < r->n; j++) next[j] = (float)(r->term[j] | r->trunc[j]);
}

static void lstm_final_value(void *ctx, const Rollout *r, int t, int j, float *value) {
    (void)t;
    LstmRollout *m = ctx;
    Net *one = &m->one;
    point_input(one, r->final_obs + (size_t)j * r->obs_dim);
    one->seq.h0 = m->h + (size_t)j * m->hid, one->seq.c0 = m->c + (size_t)j * m->hid;
    net_act_rows(one, NULL, NULL, NULL, 0, 1);
    *value = one->out[r->actions];
}

/* cartpole_rollout(rollout arguments (envs/_cartpole_cpu.h's parse_rollout); then net_act's
 *                  (1, N, H, L, n_out, threads, *widths, *enc_b, *layers (N, width[l + 1]), wt,
 *                  bias, w_head, b_head), with h, c (N, H), done (T + 1, N), states_h, states_c
 *                  (T / horizon, N, H) and scratch (2 N H + N + N n_out + sum(widths[1:]) + 2 H
 *                  + n_out floats) in place of its state and outputs; then horizon): a whole
 * rollout of the LSTM actor-critic on one thread; h and c hold the state after it. Raises
 * ValueError when the reset pool ran out. */
static PyObject *py_cartpole_rollout(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const Py_ssize_t head = ROLLOUT_DIMS + ROLLOUT_PTRS;
    Rollout r;
    LstmRollout m;
    void *p[10 + 2 * MAX_LAYERS];
    if (nargs < head + 1) return PyErr_Format(PyExc_TypeError, "too few arguments");
    if (parse_rollout(args, &r) < 0) return NULL;
    const long horizon = PyLong_AsLong(args[nargs - 1]);
    if (horizon == -1 && PyErr_Occurred()) return NULL;
    memset(&m, 0, sizeof(m));
    if (parse_net(args + head, nargs - head - 1, 10, 2, &m.net, p) < 0) return NULL;
    Net *net = &m.net, *one = &m.one;
    const int L = net->n_layers, hid = net->seq.hid, n_out = net->n_out;
    if (net->seq.t_len != 1 || net->seq.batch != r.n || n_out != r.actions + 1 ||
        net->width[0] != r.obs_dim || horizon < 1 || r.t_len % horizon)
        return PyErr_Format(PyExc_ValueError,
                            "the step (T %d, batch %d, %d outputs, %d features) does not fit the "
                            "rollout (T 1, batch %d, %d outputs, %d features), or horizon %ld "
                            "does not divide its %d steps", net->seq.t_len, net->seq.batch,
                            n_out, net->width[0], r.n, r.actions + 1, r.obs_dim, horizon,
                            r.t_len);
    void **q = p;
    for (int l = 0; l < L; l++) net->enc_b[l] = *q++;
    for (int l = 0; l < L; l++) net->layers[l] = *q++;
    net->wt = *q++;
    net->seq.bias = *q++;
    net->w_head = *q++, net->b_head = *q++;
    m.h = *q++, m.c = *q++, m.done = *q++, m.states_h = *q++, m.states_c = *q++;
    float *scratch = *q++;
    *one = *net; /* the same weights; its own rows and scratch below */
    const int *width = net->width;
    const int n = r.n;
    float *const h_given = m.h, *const c_given = m.c;
    m.h_alt = scratch, scratch += (size_t)n * hid;
    m.c_alt = scratch, scratch += (size_t)n * hid;
    m.keep = scratch, scratch += n;
    net->out = scratch, scratch += (size_t)n * n_out;
    for (int l = 0; l < L; l++) one->layers[l] = scratch, scratch += width[l + 1];
    float *one_h = scratch, *one_c = scratch + hid;
    scratch += 2 * hid;
    one->out = scratch;
    static const float keep_one = 1.0f;
    for (int k = 0; k < 2; k++) {
        Net *x = k ? one : net;
        x->seq.in_features = width[L];
        x->seq.w_cat_t = wt_slot(x, L);
    }
    one->seq.batch = 1;
    net->seq.keep = m.keep;
    one->seq.keep = &keep_one, one->seq.h_out = one_h, one->seq.c_out = one_c;
    m.hid = hid, m.horizon = (int)horizon;
    const RolloutPolicy pol = {.ctx = &m, .act = lstm_act, .stepped = lstm_stepped,
                               .final_value = lstm_final_value};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cartpole_rollout(&r, &pol);
    if (m.h != h_given) { /* the last step's state is in the alternate buffers */
        memcpy(h_given, m.h, sizeof(float) * (size_t)n * hid);
        memcpy(c_given, m.c, sizeof(float) * (size_t)n * hid);
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, "cartpole_rollout: the reset pool ran out");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"forward", (PyCFunction)(void (*)(void))py_forward, METH_FASTCALL,
     "forward(T, B, H, threads, xproj, acts, keep, h0, c0, w_t, cs, tcs, hs, hprev): pointers"},
    {"backward", (PyCFunction)(void (*)(void))py_backward, METH_FASTCALL,
     "backward(T, B, H, threads, acts, keep, c0, w, cs, tcs, grad_hs, grad_z, dh0, dc0)"},
    {"net_forward", (PyCFunction)(void (*)(void))py_net_forward, METH_FASTCALL,
     "net_forward(T, B, H, L, n_out, threads, *widths, *pointers): the whole actor-critic"},
    {"net_backward", (PyCFunction)(void (*)(void))py_net_backward, METH_FASTCALL,
     "net_backward(T, B, H, L, n_out, threads, *widths, *pointers): its gradients"},
    {"net_act", (PyCFunction)(void (*)(void))py_net_act, METH_FASTCALL,
     "net_act(1, B, H, L, n_out, threads, *widths, *pointers): one rollout step and its sample"},
    {"cartpole_rollout", (PyCFunction)(void (*)(void))py_cartpole_rollout, METH_FASTCALL,
     "cartpole_rollout(T, N, ..., H, L, ...): a whole CartPole rollout of the LSTM (pointers)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_lstm_cpu",
    .m_doc = "The LSTM recurrence and actor-critic on the CPU (called through rlperf.native).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__lstm_cpu(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_HIDDEN", MAX_HIDDEN) < 0 ||
        PyModule_AddIntConstant(m, "MAX_FEATURES", MAX_FEATURES) < 0 ||
        PyModule_AddIntConstant(m, "MAX_LAYERS", MAX_LAYERS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
