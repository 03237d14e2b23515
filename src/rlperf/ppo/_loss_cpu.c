/* The PPO loss of one categorical action and its gradient with respect to the logits and the
 * value, on the CPU in float32: one pass over the rows instead of ~30 torch ops. Called only from
 * rlperf/native/ (for ppo/loss.py's discrete_ppo_loss_and_head_grads), which checks every
 * tensor and passes pointers and strides; the torch version in loss.py is the reference it is
 * tested against. MAX_ACTIONS is exported as a module constant: rlperf.native reads it from here.
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

#include "_loss_rows.h"

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
