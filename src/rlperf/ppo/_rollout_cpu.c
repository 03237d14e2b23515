/* The PPO rollout of the stacked MLP actor-critic (policies/mlp.py) on the CPU, float32:
 *
 *   act(...)               one step's policy: actor and critic forward, a categorical sample
 *                          (Gumbel-max on given Exp(1) draws), written straight into the
 *                          rollout buffer's slots (any env: the env is stepped by the caller);
 *   act_gaussian(...)      the same for a Box action: the Gaussian head's sample on given
 *                          N(0, 1) draws;
 *   cartpole_rollout(...)  a whole rollout of T steps with CartPole's physics (envs/cartpole.py)
 *                          in the same loop: policy, env step with autoreset, buffer writes and
 *                          the truncation bootstrap, in one call.
 *
 * Called only from rlperf/native/, which checks every tensor and array (dtype, device,
 * contiguity, shape) and passes raw pointers; nothing here allocates a tensor or holds the GIL
 * while it computes.
 *
 * Why it exists: at 4 envs a rollout step of the torch path is ~150-230 us, nearly all of it
 * Python and torch dispatch (~15 small ops and the numpy env); the arithmetic is ~35k
 * multiply-adds. Here a step is a few microseconds.
 *
 * Bit-identity. The env and the rollout's loop are envs/_cartpole_cpu.h's (shared with the
 * LSTM's fused rollout): bit-identical to envs/cartpole.py. This file is built with
 * -ffp-contract=off besides (setup.py). The policy is not bit-identical to torch's: its matmuls
 * sum in another order and tanh is 2 sigmoid(2z) - 1 with a polynomial exp (~1e-7 absolute, as
 * the torch path's own sigmoid form); log-probabilities and values agree to ~1e-6, and an
 * action differs only where two Gumbel scores tie to that precision (never in the tests'
 * trajectories).
 *
 * Layout (row-major, contiguous): MLP layer i's weight (2, in, out) and bias (2, out), index 0
 * the actor, 1 the critic; the output layer transposed, weight (2, A, last), bias (2, A): the
 * critic's value is its row 0 (mlp.py's layout, read in place from its flat parameter).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LAYERS 4  /* hidden layers */
#define MAX_WIDTH 512 /* observation features and hidden units */
#define MAX_ACTIONS 64

typedef struct {
    int n_hidden;            /* hidden layers */
    int width[MAX_LAYERS + 2]; /* obs_dim, hidden widths..., A */
    const float *w[MAX_LAYERS + 1];
    const float *b[MAX_LAYERS + 1];
} Mlp;

/* The MLP below may fuse a * b + c into one FMA (gcc: this region only; the env's physics after
 * it must not, see the file comment). Its results do not depend on a row's place in the batch:
 * every row's sums are taken in the same order. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif

/* HOT, INLINE, v8f and exp_approx/tanh_approx, shared with the other kernels; included inside
 * this region so that its helpers are compiled under the MLP's flags, as the MLP is. */
#include "../_dense_cpu.h"

#define TILE TILE_ROWS /* rows evaluated together: each weight load serves four rows */

/* y[r, :n] = tanh(b + x[r, :k] @ w) for the TILE rows of x (row stride ldx) into y (row stride
 * MAX_WIDTH); w (k, n) row-major; tanh as 2 sigmoid(2z) - 1. A 4 x 16 register tile: per k two
 * loads of w, four broadcasts of x, eight multiply-adds. */
INLINE void dense_tanh(int k, int n, const float *x, int ldx, const float *w, const float *b,
                       float *y) {
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        const v8f b0 = *(const v8f *)(b + j), b1 = *(const v8f *)(b + j + 8);
        v8f acc[TILE][2];
        for (int r = 0; r < TILE; r++) acc[r][0] = b0, acc[r][1] = b1;
        for (int i = 0; i < k; i++) {
            const v8f w0 = *(const v8f *)(w + (size_t)i * n + j);
            const v8f w1 = *(const v8f *)(w + (size_t)i * n + j + 8);
            for (int r = 0; r < TILE; r++) {
                const float xi = x[r * ldx + i];
                acc[r][0] += xi * w0;
                acc[r][1] += xi * w1;
            }
        }
        for (int r = 0; r < TILE; r++) {
            *(v8f *)(y + r * MAX_WIDTH + j) = acc[r][0];
            *(v8f *)(y + r * MAX_WIDTH + j + 8) = acc[r][1];
        }
    }
    for (; j < n; j++) {
        for (int r = 0; r < TILE; r++) {
            float acc = b[j];
            for (int i = 0; i < k; i++) acc += x[r * ldx + i] * w[(size_t)i * n + j];
            y[r * MAX_WIDTH + j] = acc;
        }
    }
    for (int r = 0; r < TILE; r++)
        for (j = 0; j < n; j++) {
            const float z = y[r * MAX_WIDTH + j];
            y[r * MAX_WIDTH + j] = tanh_approx(z);
        }
}

/* The last hidden layer of network `net` (0 actor, 1 critic) for a tile of observations x
 * (TILE rows of obs_dim) into h (two buffers of TILE x MAX_WIDTH, used alternately); returns
 * it (row stride MAX_WIDTH), or x itself without hidden layers. */
INLINE const float *hidden(const Mlp *m, int net, const float *x, float *h) {
    int ldx = m->width[0];
    for (int l = 0; l < m->n_hidden; l++) {
        const int k = m->width[l], n = m->width[l + 1];
        float *y = h + (l & 1) * TILE * MAX_WIDTH;
        dense_tanh(k, n, x, ldx, m->w[l] + (size_t)net * k * n, m->b[l] + (size_t)net * n, y);
        x = y, ldx = MAX_WIDTH;
    }
    return x;
}

INLINE float dot(int k, const float *a, const float *b) {
    float s = 0.0f;
    for (int i = 0; i < k; i++) s += a[i] * b[i];
    return s;
}

/* Output row `o` of network `net`'s output layer (transposed, (A, last)) for hidden row x. */
INLINE float head(const Mlp *m, int net, int o, const float *x) {
    const int L = m->n_hidden, last = m->width[L], A = m->width[L + 1];
    return m->b[L][net * A + o] + dot(last, x, m->w[L] + ((size_t)net * A + o) * last);
}

/* Rows [0, n) of obs (n, obs_dim) into TILE-row tiles: `tile` (TILE, obs_dim), the rows past n
 * zero (their results are computed and dropped). */
INLINE int load_tile(const float *obs, int n, int r0, int d, float *tile) {
    const int rows = n - r0 < TILE ? n - r0 : TILE;
    memcpy(tile, obs + (size_t)r0 * d, (size_t)rows * d * sizeof(float));
    memset(tile + (size_t)rows * d, 0, (size_t)(TILE - rows) * d * sizeof(float));
    return rows;
}

/* The critic's values of rows [0, n) of obs (n, obs_dim) into value[0..n). */
HOT static void values_rows(const Mlp *m, int n, const float *obs, float *value) {
    const int L = m->n_hidden, D = m->width[0], last = L ? MAX_WIDTH : D;
    float h[2 * TILE * MAX_WIDTH], tile[TILE * MAX_WIDTH];
    for (int r0 = 0; r0 < n; r0 += TILE) {
        const int rows = load_tile(obs, n, r0, D, tile);
        const float *x = hidden(m, 1, tile, h);
        for (int r = 0; r < rows; r++) value[r0 + r] = head(m, 1, 0, x + r * last);
    }
}

/* Actor and critic for rows [0, n) of obs (n, obs_dim), then per row the action
 * argmax_a(log_softmax(logits) - log(noise))_a (an exact categorical sample for noise ~
 * Exp(1), as distributions.sample), its log-probability and the value. */
HOT static void act_rows(const Mlp *m, int n, const float *obs, const float *noise,
                         int64_t *actions, float *logprob, float *value) {
    const int L = m->n_hidden, D = m->width[0], A = m->width[L + 1];
    const int last = L ? MAX_WIDTH : D;
    float h[2 * TILE * MAX_WIDTH], tile[TILE * MAX_WIDTH], logits[MAX_ACTIONS];
    for (int r0 = 0; r0 < n; r0 += TILE) {
        const int rows = load_tile(obs, n, r0, D, tile);
        const float *x = hidden(m, 0, tile, h);
        for (int r = 0; r < rows; r++) {
            float mx = -INFINITY;
            for (int a = 0; a < A; a++) {
                logits[a] = head(m, 0, a, x + r * last);
                mx = logits[a] > mx ? logits[a] : mx;
            }
            float sum = 0.0f;
            for (int a = 0; a < A; a++) sum += expf(logits[a] - mx);
            const float lse = logf(sum);
            const float *e = noise + (size_t)(r0 + r) * A;
            int best = 0;
            float best_score = -INFINITY;
            for (int a = 0; a < A; a++) {
                const float score = (logits[a] - mx - lse) - logf(e[a]);
                if (score > best_score) best_score = score, best = a; /* first of equals */
            }
            actions[r0 + r] = best;
            logprob[r0 + r] = logits[best] - mx - lse;
        }
        x = hidden(m, 1, tile, h);
        for (int r = 0; r < rows; r++) value[r0 + r] = head(m, 1, 0, x + r * last);
    }
}

/* The Gaussian head of a Box action (distributions.sample's, for a state-independent log-std):
 * actor and critic for rows [0, n) of obs, then per row and dimension d the action
 * mean_d + exp(logstd_d) noise_d for noise ~ N(0, 1), its log-probability
 * sum_d(-noise_d^2 / 2 - logstd_d - log sqrt(2 pi)) and the value. The actions are written
 * unclipped (the rollout buffer keeps the sample; the env gets it clipped to its bounds). */
HOT static void act_gaussian_rows(const Mlp *m, int n, const float *obs, const float *noise,
                                  const float *logstd, float *actions, float *logprob,
                                  float *value) {
    const int L = m->n_hidden, D = m->width[0], A = m->width[L + 1];
    const int last = L ? MAX_WIDTH : D;
    const float log_sqrt_2pi = 0.91893853320467274178f;
    float h[2 * TILE * MAX_WIDTH], tile[TILE * MAX_WIDTH], std[MAX_ACTIONS];
    for (int a = 0; a < A; a++) std[a] = expf(logstd[a]);
    for (int r0 = 0; r0 < n; r0 += TILE) {
        const int rows = load_tile(obs, n, r0, D, tile);
        const float *x = hidden(m, 0, tile, h);
        for (int r = 0; r < rows; r++) {
            const float *e = noise + (size_t)(r0 + r) * A;
            float *act = actions + (size_t)(r0 + r) * A, lp = 0.0f;
            for (int a = 0; a < A; a++) {
                act[a] = head(m, 0, a, x + r * last) + std[a] * e[a];
                lp += (-0.5f * (e[a] * e[a]) - logstd[a]) - log_sqrt_2pi;
            }
            logprob[r0 + r] = lp;
        }
        x = hidden(m, 1, tile, h);
        for (int r = 0; r < rows; r++) value[r0 + r] = head(m, 1, 0, x + r * last);
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#include "../envs/_cartpole_cpu.h"

/* The MLP's part of a fused CartPole rollout (RolloutPolicy; ctx is the Mlp). */
static void mlp_act(void *ctx, const Rollout *r, int t) {
    const size_t row = (size_t)t * r->n;
    act_rows(ctx, r->n, r->obs + row * r->obs_dim, r->noise + row * r->actions, r->act + row,
             r->logprobs + row, r->values + row);
}

static void mlp_final_value(void *ctx, const Rollout *r, int t, int j, float *value) {
    (void)t;
    values_rows(ctx, 1, r->final_obs + (size_t)j * r->obs_dim, value);
}

/* ppo/gae.py's advantages over (T, N) float32 rows in one pass, t from T-1 down to 0:
 *   not_done = 1 - (term + trunc - term trunc)
 *   next     = (t < T-1 ? values[t+1] : last_value) not_done + bootstrap
 *   delta    = rewards + gamma next - values
 *   out[t]   = delta + (gamma lambda) not_done out[t+1]     (out[T-1] = delta)
 * numpy's version pays ~2 us of dispatch per array op and step (0.25 ms of a 4 x 128
 * iteration); here each element takes the same float32 operations in the same order (this file
 * is built without FMA contraction; gamma and gamma lambda rounded to float32 as numpy rounds a
 * Python float against a float32 array), so the advantages are numpy's bit for bit. */
static void gae_advantages(long t_len, long n, const float *rewards, const float *values,
                           const float *last_value, const float *terms, const float *truncs,
                           const float *bootstrap, float gamma, float gamma_lambda, float *out) {
    for (long t = t_len - 1; t >= 0; t--) {
        const long row = t * n;
        const float *next_v = t == t_len - 1 ? last_value : values + row + n;
        for (long i = 0; i < n; i++) {
            const float tm = terms[row + i], tr = truncs[row + i];
            const float not_done = 1.0f - ((tm + tr) - tm * tr);
            const float next = next_v[i] * not_done + bootstrap[row + i];
            const float delta = (rewards[row + i] + gamma * next) - values[row + i];
            out[row + i] = t == t_len - 1 ? delta
                                          : delta + (gamma_lambda * not_done) * out[row + n + i];
        }
    }
}

/* -- Python bindings (pointers and sizes only; rlperf.native checks everything) ----------- */

/* The MLP's sizes and weights: args (L, *widths[L + 2], *w[L + 1], *b[L + 1]); returns the
 * number of arguments read, or -1. */
static Py_ssize_t parse_mlp(PyObject *const *args, Py_ssize_t nargs, Mlp *m) {
    if (nargs < 1) goto few;
    long L = PyLong_AsLong(args[0]);
    if (L == -1 && PyErr_Occurred()) return -1;
    if (L < 0 || L > MAX_LAYERS) {
        PyErr_Format(PyExc_ValueError, "hidden layers %ld outside 0..%d", L, MAX_LAYERS);
        return -1;
    }
    const Py_ssize_t used = 1 + (L + 2) + 2 * (L + 1);
    if (nargs < used) goto few;
    m->n_hidden = (int)L;
    long w[MAX_LAYERS + 2];
    if (parse_longs(args + 1, (int)L + 2, w) < 0) return -1;
    for (int i = 0; i < L + 2; i++) {
        const long limit = i == L + 1 ? MAX_ACTIONS : MAX_WIDTH;
        if (w[i] < 1 || w[i] > limit) {
            PyErr_Format(PyExc_ValueError, "MLP width %ld outside 1..%ld", w[i], limit);
            return -1;
        }
        m->width[i] = (int)w[i];
    }
    void *p[2 * (MAX_LAYERS + 1)];
    if (parse_ptrs(args + 1 + L + 2, 2 * ((int)L + 1), p) < 0) return -1;
    for (int i = 0; i <= L; i++) m->w[i] = p[i], m->b[i] = p[L + 1 + i];
    return used;
few:
    PyErr_SetString(PyExc_TypeError, "too few arguments for the MLP");
    return -1;
}

/* act(N, L, *widths, *w, *b, obs, noise, actions, logprob, value) */
static PyObject *py_act(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Mlp m;
    if (nargs < 1) return PyErr_Format(PyExc_TypeError, "act takes arguments");
    const long n = PyLong_AsLong(args[0]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    const Py_ssize_t used = parse_mlp(args + 1, nargs - 1, &m);
    if (used < 0) return NULL;
    if (nargs != 1 + used + 5)
        return PyErr_Format(PyExc_TypeError, "act: expected %zd arguments, got %zd",
                            1 + used + 5, nargs);
    void *p[5];
    if (parse_ptrs(args + 1 + used, 5, p) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS act_rows(&m, (int)n, p[0], p[1], p[2], p[3], p[4]);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* act_gaussian(N, L, *widths, *w, *b, obs, noise, logstd, actions, logprob, value) */
static PyObject *py_act_gaussian(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Mlp m;
    if (nargs < 1) return PyErr_Format(PyExc_TypeError, "act_gaussian takes arguments");
    const long n = PyLong_AsLong(args[0]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    const Py_ssize_t used = parse_mlp(args + 1, nargs - 1, &m);
    if (used < 0) return NULL;
    if (nargs != 1 + used + 6)
        return PyErr_Format(PyExc_TypeError, "act_gaussian: expected %zd arguments, got %zd",
                            1 + used + 6, nargs);
    void *p[6];
    if (parse_ptrs(args + 1 + used, 6, p) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS act_gaussian_rows(&m, (int)n, p[0], p[1], p[2], p[3], p[4], p[5]);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* cartpole_rollout(rollout arguments (envs/_cartpole_cpu.h's parse_rollout), L, *widths, *w,
 *                  *b): a whole rollout of the MLP. Returns None, or raises ValueError when
 * the reset pool ran out (cannot happen with one of 4 T N draws). */
static PyObject *py_cartpole_rollout(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Rollout r;
    Mlp m;
    const Py_ssize_t head = ROLLOUT_DIMS + ROLLOUT_PTRS;
    if (nargs < head) return PyErr_Format(PyExc_TypeError, "too few arguments");
    if (parse_rollout(args, &r) < 0) return NULL;
    const Py_ssize_t used = parse_mlp(args + head, nargs - head, &m);
    if (used < 0) return NULL;
    if (nargs != head + used)
        return PyErr_Format(PyExc_TypeError, "cartpole_rollout: expected %zd arguments, got %zd",
                            head + used, nargs);
    if (m.width[0] != r.obs_dim || m.width[m.n_hidden + 1] != r.actions)
        return PyErr_Format(PyExc_ValueError, "the MLP takes %d features and %d actions, the "
                            "rollout has %d and %d", m.width[0], m.width[m.n_hidden + 1],
                            r.obs_dim, r.actions);
    const RolloutPolicy pol = {.ctx = &m, .act = mlp_act, .final_value = mlp_final_value};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = cartpole_rollout(&r, &pol);
    Py_END_ALLOW_THREADS if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, "cartpole_rollout: the reset pool ran out");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* gae_advantages(T, N, gamma, gamma_lambda, rewards, values, last_value, terms, truncs,
 *                bootstrap, out) */
static PyObject *py_gae_advantages(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 11) return PyErr_Format(PyExc_TypeError, "gae_advantages takes 11 arguments");
    long d[2];
    void *p[7];
    if (parse_longs(args, 2, d) < 0 || parse_ptrs(args + 4, 7, p) < 0) return NULL;
    const double gamma = PyFloat_AsDouble(args[2]), gamma_lambda = PyFloat_AsDouble(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (d[0] < 1 || d[1] < 0) return PyErr_Format(PyExc_ValueError, "gae_advantages: bad shape");
    gae_advantages(d[0], d[1], p[0], p[1], p[2], p[3], p[4], p[5], (float)gamma,
                   (float)gamma_lambda, p[6]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"gae_advantages", (PyCFunction)(void (*)(void))py_gae_advantages, METH_FASTCALL,
     "gae_advantages(T, N, gamma, gamma_lambda, ...): ppo/gae.py's advantages (pointers)"},
    {"act", (PyCFunction)(void (*)(void))py_act, METH_FASTCALL,
     "act(N, L, *widths, *w, *b, obs, noise, actions, logprob, value): one step's policy"},
    {"act_gaussian", (PyCFunction)(void (*)(void))py_act_gaussian, METH_FASTCALL,
     "act_gaussian(N, L, *widths, *w, *b, obs, noise, logstd, actions, logprob, value): one "
     "step's policy for a Box action"},
    {"cartpole_rollout", (PyCFunction)(void (*)(void))py_cartpole_rollout, METH_FASTCALL,
     "cartpole_rollout(T, N, ..., L, ...): a whole CartPole rollout of the MLP (pointers)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_rollout_cpu",
    .m_doc = "The MLP's fused rollout on the CPU (called through rlperf.native).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__rollout_cpu(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_LAYERS", MAX_LAYERS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_WIDTH", MAX_WIDTH) < 0 ||
        PyModule_AddIntConstant(m, "MAX_ACTIONS", MAX_ACTIONS) < 0 ||
        PyModule_AddIntConstant(m, "N_PHASES", N_PHASES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
