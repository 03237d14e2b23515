/* The LSTM recurrence on the CPU, float32: a whole (T, B) sequence forward or backward in one
 * call. Called from rlperf/policies/lstm_cpu.py, which checks every tensor (dtype, device,
 * contiguity, shape) and passes raw pointers; nothing here allocates a tensor or holds the GIL
 * while it computes.
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
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* x86-64: one clone for AVX2 + FMA machines, one baseline; the loader picks at run time, so a
 * build is portable and still uses FMA where it exists. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HOT
#endif

typedef float v8f __attribute__((vector_size(32), aligned(4)));

#define TILE_ROWS 4
#define TILE_COLS 16 /* two v8f */
#define MAX_HIDDEN 1024
#define MAX_FEATURES 4096 /* step: input features */

/* exp(x) by range reduction and a degree-6 polynomial (Cephes expf's coefficients, ~1 ulp on
 * the clamped range). Plain arithmetic and bit moves, so the element loops below vectorise;
 * libm's expf would keep them scalar (~10x slower here). */
static inline float exp_approx(float x) {
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

static inline float sigmoid(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

/* tanh(x) = 2 sigmoid(2x) - 1: absolute error ~1e-7, as the MLP's fast path. */
static inline float tanh_approx(float x) { return 2.0f / (1.0f + exp_approx(-2.0f * x)) - 1.0f; }

/* C[r, :n] += sum_k A[r, k] B[k, :n] for r < rows <= 4; A has rows of lda floats (rows past
 * `rows` are read from a zero-padded copy by the caller), B (k, n) row-major.
 * A 4 x 16 register tile: per k, two loads of B, four broadcasts of A, eight FMAs. */
static inline void gemm_tile_acc(int rows, int k_len, int n, const float *a, int lda,
                                 const float *b, float *c, int ldc) {
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

/* One row of one step, forward: z (4H) holds the gate pre-activations and receives their
 * activations; c_prev is the previous cell state, scaled here by keep. `restrict` lets the
 * compiler vectorise without runtime overlap checks (the buffers never overlap). */
static inline void cell_forward(int hid, float *z, const float *restrict c_prev, float keep,
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
static inline void cell_backward(int hid, const float *restrict ai, const float *restrict af,
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

/* step(B, F, H, threads, x, keep, h, c, w_cat_t, bias, h_out, c_out) */
static PyObject *py_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long d[4];
    void *p[8];
    if (parse(args, nargs, 12, d, 4, p) < 0) return NULL;
    if (d[1] < 1 || d[1] > MAX_FEATURES) {
        PyErr_Format(PyExc_ValueError, "input features %ld outside 1..%d", d[1], MAX_FEATURES);
        return NULL;
    }
    Seq s = {.t_len = 1, .batch = (int)d[0], .in_features = (int)d[1], .hid = (int)d[2],
             .x = p[0], .keep = p[1], .h0 = p[2], .c0 = p[3], .w_cat_t = p[4], .bias = p[5],
             .h_out = p[6], .c_out = p[7]};
    Py_BEGIN_ALLOW_THREADS run_rows(step_rows, &s, (int)d[3]);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"forward", (PyCFunction)(void (*)(void))py_forward, METH_FASTCALL,
     "forward(T, B, H, threads, xproj, acts, keep, h0, c0, w_t, cs, tcs, hs, hprev): pointers"},
    {"backward", (PyCFunction)(void (*)(void))py_backward, METH_FASTCALL,
     "backward(T, B, H, threads, acts, keep, c0, w, cs, tcs, grad_hs, grad_z, dh0, dc0)"},
    {"step", (PyCFunction)(void (*)(void))py_step, METH_FASTCALL,
     "step(B, F, H, threads, x, keep, h, c, w_cat_t, bias, h_out, c_out): one rollout step"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_lstm_cpu",
    .m_doc = "The LSTM recurrence on the CPU (see lstm_cpu.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__lstm_cpu(void) { return PyModule_Create(&module); }
