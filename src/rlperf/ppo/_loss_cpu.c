/* The PPO loss of one categorical action and its gradient with respect to the logits and the
 * value, on the CPU in float32: one pass over the rows instead of ~30 torch ops. Called only from
 * rlperf/native.py (for ppo/loss.py's discrete_ppo_loss_and_head_grads), which checks every
 * tensor and passes pointers and strides; the torch version in loss.py is the reference it is
 * tested against. MAX_ACTIONS is exported as a module constant: native.py reads it from here.
 *
 * Per row (A actions), as the torch version (see its docstring for the derivation):
 *   logp = log_softmax(logits), p = exp(logp), H = -sum p logp
 *   ratio = exp(logp[action] - oldlogp); pg1 = -adv ratio; pg2 = -adv clip(ratio, 1 -+ c)
 *   v: diff = v - ret, clipped as in CleanRL when clip_vloss
 *   d/dlogits = (ent_coef/n) p (logp + H) - (g/n) p + (g/n) onehot(action), g = pg1 where
 *   pg1 >= pg2 else 0; d/dv = (vf_coef/n) * (diff, or the clipped diff where the clipped term
 *   is the larger and its clamp is inactive, else 0).
 * Statistics: the means of pg_max, v_max, H, (ratio - 1) - logratio, |ratio - 1| > c, summed
 * in double.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define MAX_ACTIONS 4096

typedef struct {
    long n, actions;
    const float *logits;
    long logits_row, logits_col; /* strides, in floats */
    const float *value;
    long value_stride;
    const int64_t *action;
    const float *oldlogp, *adv, *ret, *oldv;
    long action_stride, oldlogp_stride, adv_stride, ret_stride, oldv_stride;
    double clip_coef, ent_coef, vf_coef;
    int clip_vloss;
    float *grad_logits;
    long grad_row, grad_col;
    float *grad_value;
    long grad_value_stride;
    float *stats; /* (5,) */
} Loss;

/* Rows [b0, b1): their gradients, and their five statistic sums into sums (in double).
 * Returns the index of the first row whose action is out of range, or -1. */
static long loss_rows(const Loss *s, long b0, long b1, double *sums) {
    const float c = (float)s->clip_coef, inv_n = 1.0f / (float)s->n;
    const float ent_scale = (float)s->ent_coef * inv_n, vf_scale = (float)s->vf_coef * inv_n;
    double sum_pg = 0, sum_v = 0, sum_h = 0, sum_kl = 0, sum_clip = 0;
    float logp[MAX_ACTIONS], prob[MAX_ACTIONS];
    for (long b = b0; b < b1; b++) {
        const float *l = s->logits + b * s->logits_row;
        float m = l[0];
        for (long a = 1; a < s->actions; a++) {
            float v = l[a * s->logits_col];
            m = v > m ? v : m;
        }
        float z = 0.0f;
        for (long a = 0; a < s->actions; a++) z += expf(l[a * s->logits_col] - m);
        const float lse = m + logf(z);
        float h = 0.0f;
        for (long a = 0; a < s->actions; a++) {
            logp[a] = l[a * s->logits_col] - lse;
            prob[a] = expf(logp[a]);
            h -= prob[a] * logp[a];
        }
        const int64_t act = s->action[b * s->action_stride];
        if (act < 0 || act >= s->actions) return b;
        const float logratio = logp[act] - s->oldlogp[b * s->oldlogp_stride];
        const float ratio = expf(logratio);
        const float adv = s->adv[b * s->adv_stride];
        const float clipped = ratio < 1.0f - c ? 1.0f - c : (ratio > 1.0f + c ? 1.0f + c : ratio);
        const float pg1 = -adv * ratio, pg2 = -adv * clipped;
        sum_pg += pg1 > pg2 ? pg1 : pg2;

        const float v = s->value[b * s->value_stride], ret = s->ret[b * s->ret_stride];
        const float diff = v - ret, v_unclipped = diff * diff;
        float v_max = v_unclipped, grad_v = diff;
        if (s->clip_vloss) {
            const float oldv = s->oldv[b * s->oldv_stride], delta = v - oldv;
            const float delta_c = delta < -c ? -c : (delta > c ? c : delta);
            const float diff_clipped = (oldv + delta_c) - ret;
            const float v_clipped = diff_clipped * diff_clipped;
            v_max = v_unclipped > v_clipped ? v_unclipped : v_clipped;
            if (!(v_unclipped >= v_clipped)) grad_v = fabsf(delta) > c ? 0.0f : diff_clipped;
        }
        sum_v += v_max;
        sum_h += h;
        sum_kl += (ratio - 1.0f) - logratio;
        sum_clip += fabsf(ratio - 1.0f) > c;
        s->grad_value[b * s->grad_value_stride] = grad_v * vf_scale;

        const float g = (pg1 < pg2 ? 0.0f : pg1) * inv_n;
        float *gl = s->grad_logits + b * s->grad_row;
        for (long a = 0; a < s->actions; a++) {
            const float p = prob[a];
            gl[a * s->grad_col] = ent_scale * (p * logp[a] + p * h) - g * p + (a == act ? g : 0.0f);
        }
    }
    sums[0] = sum_pg, sums[1] = sum_v, sums[2] = sum_h, sums[3] = sum_kl, sums[4] = sum_clip;
    return -1;
}

/* The rows are cut into BLOCKS fixed pieces whatever the thread count, each summed on its own
 * and the pieces added in order, so the statistics do not depend on the threads. At 8192 rows
 * one thread took ~390 us here against ~280 us for the torch version on two (libm's expf and
 * logf per row), so large batches take the threads torch has. */
#define BLOCKS 64

/* Returns the index of the first row whose action is out of range, or -1. */
static long loss_all(const Loss *s, int threads) {
    double sums[BLOCKS][5];
    long bad[BLOCKS];
    const long per = (s->n + BLOCKS - 1) / BLOCKS;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#else
    (void)threads;
#endif
    for (int k = 0; k < BLOCKS; k++) {
        const long b0 = k * per < s->n ? k * per : s->n;
        const long b1 = b0 + per < s->n ? b0 + per : s->n;
        for (int i = 0; i < 5; i++) sums[k][i] = 0.0;
        bad[k] = loss_rows(s, b0, b1, sums[k]);
    }
    double total[5] = {0, 0, 0, 0, 0};
    for (int k = 0; k < BLOCKS; k++) {
        if (bad[k] >= 0) return bad[k];
        for (int i = 0; i < 5; i++) total[i] += sums[k][i];
    }
    for (int i = 0; i < 5; i++) s->stats[i] = (float)(total[i] / s->n);
    return -1;
}

/* loss(n, A, clip_vloss, 11 strides (in elements: logits row, logits col, value, action,
 *      oldlogp, adv, ret, oldv, grad row, grad col, grad value), threads, clip_coef, ent_coef,
 *      vf_coef, 10 pointers (logits, value, action, oldlogp, adv, ret, oldv, grad_logits,
 *      grad_value, stats)) */
#define N_INTS 15
#define N_COEFS 3
#define N_PTRS 10
static PyObject *py_loss(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != N_INTS + N_COEFS + N_PTRS) {
        PyErr_Format(PyExc_TypeError, "expected %d arguments, got %zd",
                     N_INTS + N_COEFS + N_PTRS, nargs);
        return NULL;
    }
    long d[N_INTS];
    double coefs[N_COEFS];
    void *p[N_PTRS];
    for (int i = 0; i < N_INTS; i++) {
        d[i] = PyLong_AsLong(args[i]);
        if (d[i] == -1 && PyErr_Occurred()) return NULL;
    }
    for (int i = 0; i < N_COEFS; i++) {
        coefs[i] = PyFloat_AsDouble(args[N_INTS + i]);
        if (coefs[i] == -1.0 && PyErr_Occurred()) return NULL;
    }
    for (int i = 0; i < N_PTRS; i++) {
        p[i] = PyLong_AsVoidPtr(args[N_INTS + N_COEFS + i]);
        if (p[i] == NULL && PyErr_Occurred()) return NULL;
    }
    if (d[0] < 1 || d[1] < 1 || d[1] > MAX_ACTIONS) {
        PyErr_Format(PyExc_ValueError, "need n >= 1 and 1..%d actions, got %ld and %ld",
                     MAX_ACTIONS, d[0], d[1]);
        return NULL;
    }
    Loss s = {.n = d[0], .actions = d[1], .clip_vloss = (int)d[2],
              .logits_row = d[3], .logits_col = d[4], .value_stride = d[5],
              .action_stride = d[6], .oldlogp_stride = d[7], .adv_stride = d[8],
              .ret_stride = d[9], .oldv_stride = d[10], .grad_row = d[11], .grad_col = d[12],
              .grad_value_stride = d[13],
              .clip_coef = coefs[0], .ent_coef = coefs[1], .vf_coef = coefs[2],
              .logits = p[0], .value = p[1], .action = p[2], .oldlogp = p[3], .adv = p[4],
              .ret = p[5], .oldv = p[6], .grad_logits = p[7], .grad_value = p[8], .stats = p[9]};
    long bad;
    Py_BEGIN_ALLOW_THREADS bad = loss_all(&s, (int)d[14]);
    Py_END_ALLOW_THREADS if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "action %lld of row %ld is outside 0..%ld",
                     (long long)s.action[bad * s.action_stride], bad, s.actions - 1);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"loss", (PyCFunction)(void (*)(void))py_loss, METH_FASTCALL,
     "loss(n, A, clip_vloss, strides..., coefs..., pointers...): see _loss_cpu.c"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_loss_cpu",
    .m_doc = "The categorical PPO loss and its head gradients on the CPU (see ppo/loss.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__loss_cpu(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_ACTIONS", MAX_ACTIONS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
