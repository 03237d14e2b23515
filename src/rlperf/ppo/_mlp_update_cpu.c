/* The whole PPO update of one minibatch for the stacked actor-critic MLP of policies/mlp.py, on
 * the CPU in float32, in two calls: `gradients` (forward of actor and critic, the PPO loss and
 * its head gradients, backward, global gradient-norm clipping) and `adam` (one Adam step on the
 * flat parameter buffer); or a rollout's every epoch of minibatches in one (`epochs`: the
 * gather of each minibatch's rows and the normalization of its advantages, then the two). Called only from rlperf/native/ (MLPUpdateKernel), which checks
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
 * Timing: each call adds its phases' nanoseconds (CLOCK_MONOTONIC) into `times`, int64 (4, 4):
 * per phase (0 forward + loss, 1 backward + clipping, 2 Adam, 3 gather + normalization) the
 * total, the calls, the shortest and the longest; rlperf.native hands them to the profiler once
 * per update. Two clock reads a phase, ~50 ns each, against ~30-70 us phases at 128 rows.
 * Given a span log (`spans`, _span_log.h; while a torch.profiler trace records), each phase's
 * start and end go into it too; 0 for none.
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
#include "../_span_log.h"

#define MAX_WIDTH 1024 /* any layer's width, the observation's included */
#define MAX_LAYERS 8   /* hidden layers */

typedef struct {
    int n, n_layers, actions;
    int gaussian; /* a Box action: `actions` Gaussian means, then a log-std per dimension */
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
    /* policies/mlp.py's actor_logstd follows the output layer's bias. */
    return off + 2L * u->actions + (u->gaussian ? u->actions : 0);
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
    if (u->obs != u->x0) /* the epochs' gather writes x0 itself */
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

/* times[phase] = (total, calls, min, max); the span into `spans` if given. */
static void record(int64_t *times, int64_t *spans, int phase, int64_t start, int64_t end) {
    const int64_t ns = end - start;
    int64_t *t = times + 4 * phase;
    span_log(spans, phase, start, end);
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

/* The layout every entry point shares: `ints` ints (index `layers_at` the hidden layers' count
 * L), L + 1 widths and the parameter count, `floats` doubles, `ptrs` pointers, read into d, f
 * and p. Returns L, or -1 with a Python error set. */
static long parse_args(PyObject *const *args, Py_ssize_t nargs, int ints, int layers_at,
                       int floats, int ptrs, long *d, double *f, void **p) {
    if (nargs < ints || as_longs(args, ints, d) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "too few arguments");
        return -1;
    }
    const long L = d[layers_at];
    if (L < 0 || L > MAX_LAYERS) {
        PyErr_Format(PyExc_ValueError, "need 0..%d hidden layers, got %ld", MAX_LAYERS, L);
        return -1;
    }
    const Py_ssize_t want = ints + L + 2 + floats + ptrs;
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "expected %zd arguments, got %zd", want, nargs);
        return -1;
    }
    if (as_longs(args + ints, (int)L + 2, d + ints) < 0 ||
        as_doubles(args + ints + L + 2, floats, f) < 0 ||
        as_ptrs(args + ints + L + 2 + floats, ptrs, p) < 0)
        return -1;
    return L;
}

/* u's widths from `widths` (n_layers + 1 of them) and its layout, checked against the
 * parameter count `count` that follows them. Returns the count, or -1 with a Python error set. */
static long set_widths(Update *u, const long *widths) {
    for (int l = 0; l <= u->n_layers; l++) {
        u->width[l] = (int)widths[l];
        if (u->width[l] < 1 || u->width[l] > MAX_WIDTH) {
            PyErr_Format(PyExc_ValueError, "need widths of 1..%d, got %d", MAX_WIDTH, u->width[l]);
            return -1;
        }
    }
    const long count = layout(u), given = widths[u->n_layers + 1];
    if (count != given) {
        PyErr_Format(PyExc_ValueError, "these widths take %ld parameters, the buffer has %ld",
                     count, given);
        return -1;
    }
    return count;
}

/* u's weights and scratch from ten pointers in this order, as both entry points pass them: param,
 * grad, x0, hidden, dz, logits, value, grad_logits, grad_value, wt. */
static void bind_buffers(Update *u, void *const *q) {
    u->param = q[0], u->grad = q[1], u->x0 = q[2], u->hidden = q[3], u->dz = q[4];
    u->logits = q[5], u->value = q[6], u->grad_logits = q[7], u->grad_value = q[8], u->wt = q[9];
}

/* The loss of u's minibatch: its logits and value against five columns (action, old log-prob,
 * advantage, return, old value), each with its stride in elements (a Gaussian's actions: the
 * stride of their rows); the coefficients clip, ent, vf; the head gradients into u's buffers
 * (a Gaussian's log-std gradient into its place in u->grad), the five statistics into stats.
 * `count` is the parameter count (the log-std is its last `actions` entries). */
static Loss minibatch_loss(const Update *u, void *const *cols, const long *strides,
                           const double *coef, int clip_vloss, float *stats, long count) {
    const long logstd_at = count - u->actions;
    return (Loss){.n = u->n, .actions = u->actions, .logits = u->logits,
                  .gaussian = u->gaussian, .action_f = u->gaussian ? cols[0] : NULL,
                  .logstd = u->gaussian ? u->param + logstd_at : NULL,
                  .grad_logstd = u->gaussian ? u->grad + logstd_at : NULL,
                  .logits_row = u->actions, .logits_col = 1, .value = u->value, .value_stride = 1,
                  .action = u->gaussian ? NULL : cols[0], .action_stride = strides[0],
                  .oldlogp = cols[1], .oldlogp_stride = strides[1], .adv = cols[2], .adv_stride = strides[2],
                  .ret = cols[3], .ret_stride = strides[3], .oldv = cols[4],
                  .oldv_stride = strides[4], .clip_coef = coef[0], .ent_coef = coef[1],
                  .vf_coef = coef[2], .clip_vloss = clip_vloss, .grad_logits = u->grad_logits,
                  .grad_row = u->actions, .grad_col = 1, .grad_value = u->grad_value,
                  .grad_value_stride = 1, .stats = stats};
}

/* gradients(11 ints: n, n_layers, A, clip_vloss, strides of obs rows, action (a Gaussian's:
 *           of its rows), oldlogp, adv, ret, oldv, gaussian; n_layers + 1 widths; param count;
 *           4 floats: clip_coef, ent_coef, vf_coef, max_grad_norm (<= 0: no clipping); 19 pointers: obs, action, oldlogp, adv,
 *           ret, oldv, param, grad, x0, hidden, dz, logits, value, grad_logits, grad_value, wt,
 *           stats (5,), times (4, 4), spans (a span log or 0)) */
#define G_INTS 11
#define G_FLOATS 4
#define G_PTRS 19
static PyObject *py_gradients(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long d[G_INTS + MAX_LAYERS + 2];
    double f[G_FLOATS];
    void *p[G_PTRS];
    const long L = parse_args(args, nargs, G_INTS, 1, G_FLOATS, G_PTRS, d, f, p);
    if (L < 0) return NULL;
    Update u = {.n = (int)d[0], .n_layers = (int)L, .actions = (int)d[2], .obs_row = d[4],
                .gaussian = d[10] != 0};
    if (d[0] < 1 || d[2] < 1 || d[2] > (u.gaussian ? MAX_GAUSSIAN : MAX_ACTIONS)) {
        PyErr_Format(PyExc_ValueError, "need n >= 1 and 1..%d actions, got %ld and %ld",
                     MAX_ACTIONS, d[0], d[2]);
        return NULL;
    }
    const long count = set_widths(&u, d + G_INTS);
    if (count < 0) return NULL;
    u.obs = p[0];
    bind_buffers(&u, p + 6);
    u.max_grad_norm = (float)f[3];
    u.loss = minibatch_loss(&u, p + 1, d + 5, f, (int)d[3], p[16], count);
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
        record(times, p[18], 0, t0, t1);
        record(times, p[18], 1, t1, t2);
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
 *      exp_avg, exp_avg_sq, step (a float32 scalar, advanced here), times (4, 4), spans (a
 *      span log or 0)) */
static PyObject *py_adam(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "expected 13 arguments, got %zd", nargs);
        return NULL;
    }
    long count;
    double f[5];
    void *p[7];
    if (as_longs(args, 1, &count) < 0 || as_doubles(args + 1, 5, f) < 0 ||
        as_ptrs(args + 6, 7, p) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    const int64_t t0 = now_ns();
    if (f[4] > 0.0) clip(p[1], count, (float)f[4]);
    adam(count, p[0], p[1], p[2], p[3], p[4], f[0], f[1], f[2], f[3]);
    record(p[5], p[6], 2, t0, now_ns());
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* The rollout's columns the update reads, (rows,) each, and the observations (rows, width[0]);
 * a Gaussian's actions are act_f (rows, A) instead of act. */
typedef struct {
    const float *obs, *logp, *val, *adv, *act_f;
    const int64_t *act;
} Rollout;

/* A minibatch's columns, (b,) each (a Gaussian's actions (b, A)): where the loss reads them. */
typedef struct {
    int64_t *act;
    float *act_f, *logp, *adv, *ret, *val;
} Columns;

/* One minibatch's rows of the rollout, `idx` (b,) into it, as the packed-table sampler
 * (ppo/samplers.py) hands them to `gradients`: the observations into x0, the rest into `mb`,
 * returns = advantages + values (one float32 add, as the sampler's torch.add). */
static void gather(const Update *u, const int64_t *idx, const Rollout *src, const Columns *mb) {
    const int w0 = u->width[0];
    for (int r = 0; r < u->n; r++) {
        const int64_t i = idx[r];
        memcpy(u->x0 + (long)r * w0, src->obs + i * w0, sizeof(float) * w0);
        if (u->gaussian)
            memcpy(mb->act_f + (long)r * u->actions, src->act_f + i * u->actions,
                   sizeof(float) * u->actions);
        else
            mb->act[r] = src->act[i];
        mb->logp[r] = src->logp[i];
        mb->val[r] = src->val[i];
        mb->adv[r] = src->adv[i];
        mb->ret[r] = src->adv[i] + src->val[i];
    }
}

/* ppo/loss.py's normalize_advantages, (adv - mean) / (std + 1e-8) with the unbiased std, as torch
 * computes it on one thread: torch.std_mean is a serial Welford pass in double (ATen's WelfordOps:
 * mean += delta / n, m2 += delta (x - new mean)), the std's square root taken in double, both
 * rounded to float32; the rest is float32 arithmetic. Contraction off, so nothing is fused that
 * torch does not fuse: tested bit for bit against it. */
__attribute__((optimize("fp-contract=off"))) HOT static void normalize(int n, float *adv) {
    double mean = 0.0, m2 = 0.0;
    for (int i = 0; i < n; i++) {
        const double x = adv[i], delta = x - mean;
        mean += delta / (double)(i + 1);
        m2 += delta * (x - mean);
    }
    const float mean_f = (float)mean, denom = (float)sqrt(m2 / (double)(n - 1)) + 1e-8f;
    for (int i = 0; i < n; i++) adv[i] = (adv[i] - mean_f) / denom;
}

/* epochs(9 ints: rows, b, minibatches, epochs, n_layers, A, clip_vloss, norm_adv, gaussian
 *        (the actions are then float32 (rows, A), the minibatch's (b, A)); n_layers + 1
 *        widths; param count; 8 floats: clip_coef, ent_coef, vf_coef, max_grad_norm (<= 0: no
 *        clipping), lr, beta1, beta2, eps; 27 pointers: the rollout's obs (rows, width[0]),
 *        actions int64, logprobs, values, advantages (rows,); perms int64 (epochs, rows); the
 *        minibatch's actions int64, oldlogp, adv, ret, oldv (b,); param, grad, x0, hidden, dz,
 *        logits, value, grad_logits, grad_value, wt, exp_avg, exp_avg_sq, step; stats_sum (5,);
 *        times (4, 4); spans (a span log or 0))
 *
 * The trainer's whole update of a feed-forward rollout in one call: for each epoch, `minibatches`
 * minibatches of `b` rows in the order of that epoch's permutation (rows past them left out, as
 * the sampler), each gathered, its advantages normalized if asked, then `gradients` and
 * `adam` as the per-minibatch calls do them; each minibatch's stats added into stats_sum in
 * order. Phase 3 of `times` is the gather and the normalization (minibatch_prep). */
#define E_INTS 9
#define E_FLOATS 8
#define E_PTRS 27
static PyObject *py_epochs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long d[E_INTS + MAX_LAYERS + 2];
    double f[E_FLOATS];
    void *p[E_PTRS];
    const long L = parse_args(args, nargs, E_INTS, 4, E_FLOATS, E_PTRS, d, f, p);
    if (L < 0) return NULL;
    const long rows = d[0], b = d[1], mbs = d[2], epochs = d[3];
    const int gaussian = d[8] != 0, max_actions = gaussian ? MAX_GAUSSIAN : MAX_ACTIONS;
    if (b < 1 || mbs < 1 || epochs < 0 || b * mbs > rows || d[5] < 1 || d[5] > max_actions) {
        PyErr_Format(PyExc_ValueError,
                     "need 1 <= b, 1 <= minibatches, b x minibatches <= rows, epochs >= 0 and "
                     "1..%d actions, got b %ld, %ld minibatches, %ld rows, %ld epochs, %ld "
                     "actions", max_actions, b, mbs, rows, epochs, d[5]);
        return NULL;
    }
    Update u = {.n = (int)b, .n_layers = (int)L, .actions = (int)d[5], .gaussian = gaussian};
    const long count = set_widths(&u, d + E_INTS);
    if (count < 0) return NULL;
    const Rollout src = {.obs = p[0], .act = gaussian ? NULL : p[1],
                         .act_f = gaussian ? p[1] : NULL, .logp = p[2], .val = p[3], .adv = p[4]};
    const Columns mb = {.act = gaussian ? NULL : p[6], .act_f = gaussian ? p[6] : NULL,
                        .logp = p[7], .adv = p[8], .ret = p[9], .val = p[10]};
    const int64_t *perms = p[5];
    /* Every index is read before anything is written: a bad one leaves the model as it was. */
    for (long i = 0; i < epochs * rows; i++)
        if (perms[i] < 0 || perms[i] >= rows) {
            PyErr_Format(PyExc_ValueError, "permutation entry %ld is %lld, outside 0..%ld", i,
                         (long long)perms[i], rows - 1);
            return NULL;
        }
    for (long i = 0; i < (gaussian ? 0 : rows); i++)
        if (src.act[i] < 0 || src.act[i] >= u.actions) {
            PyErr_Format(PyExc_ValueError, "action %lld of row %ld is outside 0..%d",
                         (long long)src.act[i], i, u.actions - 1);
            return NULL;
        }
    bind_buffers(&u, p + 11);
    u.obs = u.x0, u.obs_row = u.width[0]; /* gathered there */
    u.max_grad_norm = (float)f[3];
    float stats[5];
    void *const cols[5] = {gaussian ? (void *)mb.act_f : (void *)mb.act, mb.logp, mb.adv, mb.ret,
                           mb.val};
    const long contiguous[5] = {gaussian ? u.actions : 1, 1, 1, 1, 1};
    u.loss = minibatch_loss(&u, cols, contiguous, f, (int)d[6], stats, count);
    float *stats_sum = p[24];
    int64_t *times = p[25], *spans = p[26];
    const int norm_adv = (int)d[7];
    Py_BEGIN_ALLOW_THREADS
    for (long e = 0; e < epochs; e++) {
        for (long m = 0; m < mbs; m++) {
            const int64_t t0 = now_ns();
            gather(&u, perms + e * rows + m * b, &src, &mb);
            if (norm_adv) normalize(u.n, mb.adv);
            const int64_t t1 = now_ns();
            forward(&u);
            loss_all(&u.loss, 1); /* every action was checked above */
            const int64_t t2 = now_ns();
            backward(&u);
            if (u.max_grad_norm > 0.0f) clip(u.grad, count, u.max_grad_norm);
            const int64_t t3 = now_ns();
            adam(count, u.param, u.grad, p[21], p[22], p[23], f[4], f[5], f[6], f[7]);
            for (int i = 0; i < 5; i++) stats_sum[i] += stats[i];
            const int64_t t4 = now_ns();
            record(times, spans, 3, t0, t1);
            record(times, spans, 0, t1, t2);
            record(times, spans, 1, t2, t3);
            record(times, spans, 2, t3, t4);
        }
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"gradients", (PyCFunction)(void (*)(void))py_gradients, METH_FASTCALL,
     "gradients(ints..., widths..., floats..., pointers...): see _mlp_update_cpu.c"},
    {"epochs", (PyCFunction)(void (*)(void))py_epochs, METH_FASTCALL,
     "epochs(ints..., widths..., floats..., pointers...): see _mlp_update_cpu.c"},
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
        PyModule_AddIntConstant(m, "MAX_LAYERS", MAX_LAYERS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_GAUSSIAN", MAX_GAUSSIAN) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
