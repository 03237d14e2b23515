/* Part of _lstm_cpu.c's one translation unit, included once, first of its parts (not a
 * standalone header): the data every part works on. Seq holds a (T, B) sequence's sizes and
 * buffers for the recurrence (its layout in _lstm_cpu.c's opening comment); Net the whole
 * actor-critic around it, with the helpers the forward, backward and rollout-step parts share
 * (the encoder on a few rows, how rows are walked and split between threads) and the parsing of
 * the Python calls' arguments.
 */

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

/* Environments (rows of every step) [r0, r1) of thread p of np: whole tiles. */
static void env_share(const Net *n, int p, int np, int *r0, int *r1) {
    const int b = n->seq.batch, tiles = (b + TILE_ROWS - 1) / TILE_ROWS;
    *r0 = tiles * p / np * TILE_ROWS;
    *r1 = tiles * (p + 1) / np * TILE_ROWS;
    if (*r0 > b) *r0 = b;
    if (*r1 > b) *r1 = b;
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
