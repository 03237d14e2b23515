/* The whole PPO update of one minibatch for the stacked actor-critic MLP of policies/mlp.py, on
 * the CPU in float32, in two calls: `gradients` (forward of actor and critic, the PPO loss and
 * its head gradients, backward, global gradient-norm clipping) and `adam` (one Adam step on the
 * flat parameter buffer). Called only from rlperf/native.py (MLPUpdateKernel), which checks
 * every tensor and binds the parameters, the optimizer state and this call's scratch once.
 *
 * Why: at 128 samples the analytic update in torch (ppo/update.py's AnalyticUpdate) issued ~40
 * ops per minibatch, each a few microseconds of dispatch around a few hundred multiply-adds, so
 * ~0.7 ms went to fixed costs around ~3.3 M multiply-adds of arithmetic (~60 us on one core).
 * Here the arithmetic is what is left: the 4 x 16 register tiles of _dense_cpu.h, the loss rows
 * of _loss_rows.h (the same code as the loss kernel, so the statistics and head gradients are
 * the loss kernel's), tanh as 2 sigmoid(2x) - 1 (as the torch analytic path, ~1e-7 absolute).
 * One thread: the phases are a few tens of microseconds each, below what a fork/join and the
 * barriers between them would save on this 2-core machine.
 *
 * Layout (row-major). Parameters, one flat buffer (policies/mlp.py's order): for each hidden
 * layer l: W_l (2, width[l], width[l+1]) then b_l (2, width[l+1]); the output layer stored
 * transposed, W_L (2, A, width[L]) then b_L (2, A). Net 0 is the actor (A logits), net 1 the
 * critic (its row 0 is the value; its other rows get a zero gradient). The gradient has the
 * same layout. Scratch: x0 (n, width[0]) the observations, contiguous; hidden and dz, for each
 * layer l and net k a (n, width[l+1]) block (layer-major, then net): tanh outputs and
 * d loss / d pre-activation; logits, grad_logits (n, A); value, grad_value (n); wt, one
 * transposed hidden weight.
 *
 * Timing: each call adds its phases' nanoseconds (CLOCK_MONOTONIC) into `times`, int64 (3, 4):
 * per phase (0 forward + loss, 1 backward + clipping, 2 Adam) the total, the calls, the
 * shortest and the longest; native.py hands them to the profiler once per update.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../_dense_cpu.h"
#include "_loss_rows.h"

#define MAX_WIDTH 1024 /* any layer's width, the observation's included */
#define MAX_LAYERS 8   /* hidden layers */

typedef struct {
    int n, n_layers, actions;
    int width[MAX_LAYERS + 1];
    long w_off[MAX_LAYERS + 1], b_off[MAX_LAYERS + 1], h_off[MAX_LAYERS]; /* in floats */
    const float *obs;
    long obs_row;
    float *param, *grad;
    float *x0, *hidden, *dz, *logits, *value, *grad_logits, *grad_value, *wt;
    float max_grad_norm;
    Loss loss; /* the minibatch's columns and coefficients; reads logits and value */
} Update;

/* Offsets of every weight and bias in the flat buffer and of every layer's scratch; returns the
 * parameter count. */
static long layout(Update *u) {
    long off = 0, h = 0;
    const int L = u->n_layers;
    for (int l = 0; l < L; l++) {
        u->w_off[l] = off;
        off += 2L * u->width[l] * u->width[l + 1];
        u->b_off[l] = off;
        off += 2L * u->width[l + 1];
        u->h_off[l] = h;
        h += 2L * u->n * u->width[l + 1];
    }
    u->w_off[L] = off;
    off += 2L * u->actions * u->width[L];
    u->b_off[L] = off;
    return off + 2L * u->actions;
}

static inline float *act_at(const Update *u, float *base, int l, int k) {
    return base + u->h_off[l] + (long)k * u->n * u->width[l + 1];
}

/* Layer l's input for net k: the observations, or layer l-1's output. */
static inline const float *input_at(const Update *u, int l, int k) {
    return l ? act_at(u, u->hidden, l - 1, k) : u->x0;
}

/* y (n, w1) = tanh(b + x (n, w0) W (w0, w1)) in 4-row tiles. */
INLINE void dense_tanh(int n, int w0, int w1, const float *x, const float *w, const float *b,
                       float *y, float *pad) {
    for (int rb = 0; rb < n; rb += TILE_ROWS) {
        const int rows = n - rb < TILE_ROWS ? n - rb : TILE_ROWS;
        for (int r = 0; r < rows; r++) memcpy(y + (long)(rb + r) * w1, b, sizeof(float) * w1);
        gemm_rows(rows, w0, w1, x + (long)rb * w0, w0, w, y + (long)rb * w1, w1, pad);
    }
    for (long e = 0; e < (long)n * w1; e++) y[e] = tanh_approx(y[e]);
}

/* c (n, m) = a (n, k) b (k, m), c overwritten, in 4-row tiles. */
INLINE void matmul_rows(int n, int k, int m, const float *a, const float *b, float *c,
                        float *pad) {
    memset(c, 0, sizeof(float) * (size_t)n * m);
    for (int rb = 0; rb < n; rb += TILE_ROWS) {
        const int rows = n - rb < TILE_ROWS ? n - rb : TILE_ROWS;
        gemm_rows(rows, k, m, a + (long)rb * k, k, b, c + (long)rb * m, m, pad);
    }
}

/* Actor and critic forward: every layer's tanh output into hidden, logits and value. */
HOT static void forward(const Update *u) {
    float pad[TILE_ROWS * MAX_WIDTH];
    const int n = u->n, L = u->n_layers, A = u->actions, w_last = u->width[L];
    for (int r = 0; r < n; r++)
        memcpy(u->x0 + (long)r * u->width[0], u->obs + r * u->obs_row,
               sizeof(float) * u->width[0]);
    for (int k = 0; k < 2; k++) {
        for (int l = 0; l < L; l++) {
            const int w0 = u->width[l], w1 = u->width[l + 1];
            dense_tanh(n, w0, w1, input_at(u, l, k), u->param + u->w_off[l] + (long)k * w0 * w1,
                       u->param + u->b_off[l] + (long)k * w1, act_at(u, u->hidden, l, k), pad);
        }
        const float *w = u->param + u->w_off[L] + (long)k * A * w_last;
        const float *b = u->param + u->b_off[L] + (long)k * A;
        if (k == 0) small_out_rows(n, w_last, A, input_at(u, L, 0), w, b, u->logits);
        else small_out_rows(n, w_last, 1, input_at(u, L, 1), w, b, u->value);
    }
}

/* Every parameter's gradient (overwritten) from grad_logits and grad_value. */
HOT static void backward(const Update *u) {
    float pad[TILE_ROWS * MAX_WIDTH];
    const int n = u->n, L = u->n_layers, A = u->actions, w_last = u->width[L];
    for (int k = 0; k < 2; k++) {
        /* The output layer: the actor's A rows, the critic's row 0 (its others stay zero). */
        const int outs = k ? 1 : A;
        const float *d_out = k ? u->grad_value : u->grad_logits; /* (n, outs) */
        float *gw = u->grad + u->w_off[L] + (long)k * A * w_last;
        float *gb = u->grad + u->b_off[L] + (long)k * A;
        weight_grad(0, outs, n, outs, w_last, d_out, input_at(u, L, k), gw, gb);
        memset(gw + (long)outs * w_last, 0, sizeof(float) * (size_t)(A - outs) * w_last);
        memset(gb + outs, 0, sizeof(float) * (size_t)(A - outs));
        if (L == 0) continue;
        /* d loss / d h of the last hidden layer, then down through every tanh. */
        matmul_rows(n, outs, w_last, d_out, u->param + u->w_off[L] + (long)k * A * w_last,
                    act_at(u, u->dz, L - 1, k), pad);
        for (int l = L - 1; l >= 0; l--) {
            const int w0 = u->width[l], w1 = u->width[l + 1];
            float *d = act_at(u, u->dz, l, k);
            const float *y = act_at(u, u->hidden, l, k);
            for (long e = 0; e < (long)n * w1; e++) d[e] *= 1.0f - y[e] * y[e];
            /* dW_l = x^T d: weight_grad's G = D^T X with the layer's input as D. */
            weight_grad(0, w0, n, w0, w1, input_at(u, l, k), d,
                        u->grad + u->w_off[l] + (long)k * w0 * w1, NULL);
            float *gbl = u->grad + u->b_off[l] + (long)k * w1;
            memset(gbl, 0, sizeof(float) * w1);
            for (int r = 0; r < n; r++) {
                const float *restrict dr = d + (long)r * w1;
                for (int j = 0; j < w1; j++) gbl[j] += dr[j];
            }
            if (l > 0) { /* d loss / d x = d W_l^T, through W_l transposed once */
                const float *w = u->param + u->w_off[l] + (long)k * w0 * w1;
                transpose(w0, w1, w, u->wt);
                matmul_rows(n, w1, w0, d, u->wt, act_at(u, u->dz, l - 1, k), pad);
            }
        }
    }
}

/* clip_grad_norm_'s arithmetic on the flat gradient (policies/base.py's clip_grad_norm):
 * g *= min(1, max_norm / (||g|| + 1e-6)), the squares summed in double. */
HOT static void clip(float *g, long count, float max_norm) {
    double sq = 0.0;
    for (long i = 0; i < count; i++) sq += (double)g[i] * g[i];
    const float coef = max_norm / ((float)sqrt(sq) + 1e-6f);
    if (coef < 1.0f)
        for (long i = 0; i < count; i++) g[i] *= coef;
}

/* torch.optim.Adam(fused=True)'s CPU arithmetic (no weight decay, no amsgrad), operation for
 * operation in float32 with the scalars prepared in double, as ATen's fused kernel does; tested
 * bit for bit against it. The first moment by lerp, one fused multiply-add. The second moment
 * v beta2 + (1 - beta2) g g, where torch's build fused the multiply-adds differently in its
 * 8-wide body, fma((1 - beta2) g, g, v beta2), and in its scalar tail (the last count % 8),
 * fma(v, beta2, (1 - beta2) g g): both are written out here. Then
 * p += (-lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps). Contraction is off in this function, so the
 * compiler fuses nothing else and the results stay torch's to the last bit. The body and the tail
 * are separate loops so the body vectorises (8 floats an instruction, as torch's own; it needs
 * setup.py's -fno-math-errno, since a sqrtf that may set errno stays scalar). */
__attribute__((optimize("fp-contract=off"))) HOT static void adam(
    long count, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
    float *step_t, double lr, double beta1, double beta2, double eps) {
    const float step = *step_t + 1.0f; /* FlatAdam's step_count += 1, a float32 tensor */
    *step_t = step;
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    const float lerp_w = (float)(1.0 - beta1), c2 = (float)(1.0 - beta2), b2 = (float)beta2;
    const float neg_step_size = (float)(-(lr / bc1)), bc2_sqrt = (float)sqrt(bc2);
    const float epsf = (float)eps;
    const long body = count - count % 8;
    for (long i = 0; i < body; i++) {
        const float gi = g[i];
        const float mi = __builtin_fmaf(lerp_w, gi - m[i], m[i]);
        const float vi = __builtin_fmaf(c2 * gi, gi, v[i] * b2);
        const float denom = sqrtf(vi) / bc2_sqrt + epsf;
        p[i] = p[i] + neg_step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
    for (long i = body; i < count; i++) {
        const float gi = g[i];
        const float mi = __builtin_fmaf(lerp_w, gi - m[i], m[i]);
        const float vi = __builtin_fmaf(v[i], b2, c2 * gi * gi);
        const float denom = sqrtf(vi) / bc2_sqrt + epsf;
        p[i] = p[i] + neg_step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

static inline int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* times[phase] = (total, calls, min, max) */
static void record(int64_t *times, int phase, int64_t ns) {
    int64_t *t = times + 4 * phase;
    if (t[1] == 0 || ns < t[2]) t[2] = ns;
    if (ns > t[3]) t[3] = ns;
    t[0] += ns;
    t[1] += 1;
}

static int as_longs(PyObject *const *args, int count, long *out) {
    for (int i = 0; i < count; i++) {
        out[i] = PyLong_AsLong(args[i]);
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

static int as_doubles(PyObject *const *args, int count, double *out) {
    for (int i = 0; i < count; i++) {
        out[i] = PyFloat_AsDouble(args[i]);
        if (out[i] == -1.0 && PyErr_Occurred()) return -1;
    }
    return 0;
}

static int as_ptrs(PyObject *const *args, int count, void **out) {
    for (int i = 0; i < count; i++) {
        out[i] = PyLong_AsVoidPtr(args[i]);
        if (out[i] == NULL && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* gradients(10 ints: n, n_layers, A, clip_vloss, strides of obs rows, action, oldlogp, adv,
 *           ret, oldv; n_layers + 1 widths; param count; 4 floats: clip_coef, ent_coef,
 *           vf_coef, max_grad_norm (<= 0: no clipping); 18 pointers: obs, action, oldlogp, adv,
 *           ret, oldv, param, grad, x0, hidden, dz, logits, value, grad_logits, grad_value, wt,
 *           stats (5,), times (3, 4)) */
#define G_INTS 10
#define G_FLOATS 4
#define G_PTRS 18
static PyObject *py_gradients(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long d[G_INTS + MAX_LAYERS + 2];
    if (nargs < G_INTS || as_longs(args, G_INTS, d) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "too few arguments");
        return NULL;
    }
    const long L = d[1];
    if (L < 0 || L > MAX_LAYERS) {
        PyErr_Format(PyExc_ValueError, "need 0..%d hidden layers, got %ld", MAX_LAYERS, L);
        return NULL;
    }
    const Py_ssize_t want = G_INTS + L + 2 + G_FLOATS + G_PTRS;
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "expected %zd arguments, got %zd", want, nargs);
        return NULL;
    }
    double f[G_FLOATS];
    void *p[G_PTRS];
    if (as_longs(args + G_INTS, (int)L + 2, d + G_INTS) < 0 ||
        as_doubles(args + G_INTS + L + 2, G_FLOATS, f) < 0 ||
        as_ptrs(args + G_INTS + L + 2 + G_FLOATS, G_PTRS, p) < 0)
        return NULL;
    Update u = {.n = (int)d[0], .n_layers = (int)L, .actions = (int)d[2], .obs_row = d[4]};
    if (d[0] < 1 || d[2] < 1 || d[2] > MAX_ACTIONS) {
        PyErr_Format(PyExc_ValueError, "need n >= 1 and 1..%d actions, got %ld and %ld",
                     MAX_ACTIONS, d[0], d[2]);
        return NULL;
    }
    for (int l = 0; l <= L; l++) {
        u.width[l] = (int)d[G_INTS + l];
        if (u.width[l] < 1 || u.width[l] > MAX_WIDTH) {
            PyErr_Format(PyExc_ValueError, "need widths of 1..%d, got %d", MAX_WIDTH, u.width[l]);
            return NULL;
        }
    }
    const long count = layout(&u);
    if (count != d[G_INTS + L + 1]) {
        PyErr_Format(PyExc_ValueError, "these widths take %ld parameters, the buffer has %ld",
                     count, d[G_INTS + L + 1]);
        return NULL;
    }
    u.obs = p[0], u.param = p[6], u.grad = p[7], u.x0 = p[8], u.hidden = p[9], u.dz = p[10];
    u.logits = p[11], u.value = p[12], u.grad_logits = p[13], u.grad_value = p[14], u.wt = p[15];
    u.max_grad_norm = (float)f[3];
    u.loss = (Loss){.n = u.n, .actions = u.actions, .logits = u.logits, .logits_row = u.actions,
                    .logits_col = 1, .value = u.value, .value_stride = 1, .action = p[1],
                    .action_stride = d[5], .oldlogp = p[2], .oldlogp_stride = d[6],
                    .adv = p[3], .adv_stride = d[7], .ret = p[4], .ret_stride = d[8],
                    .oldv = p[5], .oldv_stride = d[9], .clip_coef = f[0], .ent_coef = f[1],
                    .vf_coef = f[2], .clip_vloss = (int)d[3], .grad_logits = u.grad_logits,
                    .grad_row = u.actions, .grad_col = 1, .grad_value = u.grad_value,
                    .grad_value_stride = 1, .stats = p[16]};
    int64_t *times = p[17];
    long bad;
    Py_BEGIN_ALLOW_THREADS
    const int64_t t0 = now_ns();
    forward(&u);
    bad = loss_all(&u.loss, 1);
    const int64_t t1 = now_ns();
    if (bad < 0) {
        backward(&u);
        if (u.max_grad_norm > 0.0f) clip(u.grad, count, u.max_grad_norm);
        const int64_t t2 = now_ns();
        record(times, 0, t1 - t0);
        record(times, 1, t2 - t1);
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "action %lld of row %ld is outside 0..%d",
                     (long long)u.loss.action[bad * u.loss.action_stride], bad, u.actions - 1);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* adam(count, lr, beta1, beta2, eps, max_grad_norm (> 0: clip the gradient first, for several
 *      ranks, whose gradient is averaged between the two calls), 6 pointers: param, grad,
 *      exp_avg, exp_avg_sq, step (a float32 scalar, advanced here), times (3, 4)) */
static PyObject *py_adam(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 12) {
        PyErr_Format(PyExc_TypeError, "expected 12 arguments, got %zd", nargs);
        return NULL;
    }
    long count;
    double f[5];
    void *p[6];
    if (as_longs(args, 1, &count) < 0 || as_doubles(args + 1, 5, f) < 0 ||
        as_ptrs(args + 6, 6, p) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    const int64_t t0 = now_ns();
    if (f[4] > 0.0) clip(p[1], count, (float)f[4]);
    adam(count, p[0], p[1], p[2], p[3], p[4], f[0], f[1], f[2], f[3]);
    record(p[5], 2, now_ns() - t0);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"gradients", (PyCFunction)(void (*)(void))py_gradients, METH_FASTCALL,
     "gradients(ints..., widths..., floats..., pointers...): see _mlp_update_cpu.c"},
    {"adam", (PyCFunction)(void (*)(void))py_adam, METH_FASTCALL,
     "adam(count, lr, beta1, beta2, eps, max_grad_norm, pointers...): see _mlp_update_cpu.c"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_mlp_update_cpu",
    .m_doc = "The MLP actor-critic's whole PPO update on the CPU (see ppo/update.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__mlp_update_cpu(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_WIDTH", MAX_WIDTH) < 0 ||
        PyModule_AddIntConstant(m, "MAX_LAYERS", MAX_LAYERS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
