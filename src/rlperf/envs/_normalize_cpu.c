/* One step of envs/normalize.py's Normalizer in one call: the discounted returns, both running
 * statistics' updates, the normalised and clipped rewards and observations.
 *
 * Why: the numpy version is ~30 array operations a step, ~25 us at one env (MuJoCo at CleanRL's
 * settings steps 1 env: a tenth of the whole step); the arithmetic is a few dozen flops.
 *
 * The same float64 operations in the same order as the numpy version (this file is built without
 * FMA contraction, setup.py's EXACT_ARGS), so the statistics and outputs are its bits: a shared
 * update sums the batch's rows in order, as numpy's reduction over axis 0 does, then takes
 * gymnasium's RunningMeanStd arithmetic; a per-env update is that arithmetic with a batch of one
 * sample. Called only from rlperf/native/, which checks every array.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_DIM 4096 /* observation features */

/* Running statistics of rows of d features: mean, var (rows, d), count (rows) */
typedef struct {
    double *mean, *var, *count;
} Stats;

/* Chan's update of row-set `s` (index 0 of a shared set) with the batch x (n, d), as numpy and
 * gymnasium compute it: batch mean and (biased) variance over the rows, then the merge. */
static void update_shared(long n, long d, const double *x, Stats s) {
    double batch_mean[MAX_DIM], batch_var[MAX_DIM];
    for (long j = 0; j < d; j++) batch_mean[j] = 0.0, batch_var[j] = 0.0;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < d; j++) batch_mean[j] += x[i * d + j];
    for (long j = 0; j < d; j++) batch_mean[j] /= (double)n;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < d; j++) {
            const double e = x[i * d + j] - batch_mean[j];
            batch_var[j] += e * e;
        }
    const double count = s.count[0], total = count + (double)n;
    for (long j = 0; j < d; j++) {
        batch_var[j] /= (double)n;
        const double delta = batch_mean[j] - s.mean[j];
        s.mean[j] = s.mean[j] + delta * (double)n / total;
        const double m2 = s.var[j] * count + batch_var[j] * (double)n;
        s.var[j] = (m2 + delta * delta * count * (double)n / total) / total;
    }
    s.count[0] = total;
}

/* Each row i its own statistics, updated with its one sample x[i]. */
static void update_per_row(long n, long d, const double *x, Stats s) {
    for (long i = 0; i < n; i++) {
        const double count = s.count[i], total = count + 1.0;
        for (long j = 0; j < d; j++) {
            const long k = i * d + j;
            const double delta = x[k] - s.mean[k];
            s.mean[k] = s.mean[k] + delta / total;
            s.var[k] = (s.var[k] * count + delta * delta * count / total) / total;
        }
        s.count[i] = total;
    }
}

static inline double clip(double v, double bound) {
    if (bound <= 0.0) return v;
    return v < -bound ? -bound : (v > bound ? bound : v);
}

/* step(n, d, per_env, training, gamma, eps, clip_obs, clip_reward,
 *      obs (n, d) f64, rewards (n) f64, terminations (n) u8, truncations (n) u8,
 *      obs_mean, obs_var, obs_count, ret_mean, ret_var, ret_count, returns (n) f64,
 *      obs_out (n, d) f32, rewards_out (n) f64)
 * A statistics pointer of 0 leaves that part out (observations or rewards not normalised). */
static PyObject *py_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 21) return PyErr_Format(PyExc_TypeError, "step takes 21 arguments");
    long i4[4];
    for (int k = 0; k < 4; k++) {
        i4[k] = PyLong_AsLong(args[k]);
        if (i4[k] == -1 && PyErr_Occurred()) return NULL;
    }
    double f4[4];
    for (int k = 0; k < 4; k++) {
        f4[k] = PyFloat_AsDouble(args[4 + k]);
        if (f4[k] == -1.0 && PyErr_Occurred()) return NULL;
    }
    void *p[13];
    for (int k = 0; k < 13; k++) {
        p[k] = PyLong_AsVoidPtr(args[8 + k]);
        if (p[k] == NULL && PyErr_Occurred()) return NULL;
    }
    const long n = i4[0], d = i4[1];
    const int per_env = (int)i4[2], training = (int)i4[3];
    if (n < 1 || d < 1 || d > MAX_DIM)
        return PyErr_Format(PyExc_ValueError, "need n >= 1 and 1..%d features", MAX_DIM);
    const double gamma = f4[0], eps = f4[1], clip_obs = f4[2], clip_reward = f4[3];
    const double *obs = p[0], *rewards = p[1];
    const uint8_t *term = p[2], *trunc = p[3];
    const Stats obs_stats = {p[4], p[5], p[6]}, ret_stats = {p[7], p[8], p[9]};
    double *returns = p[10], *rewards_out = p[12];
    float *obs_out = p[11];
    Py_BEGIN_ALLOW_THREADS
    if (ret_stats.mean != NULL) {
        for (long i = 0; i < n; i++)
            returns[i] = returns[i] * gamma * (1.0 - (double)term[i]) + rewards[i];
        if (training) {
            if (per_env) update_per_row(n, 1, returns, ret_stats);
            else update_shared(n, 1, returns, ret_stats);
        }
        for (long i = 0; i < n; i++) {
            const double var = ret_stats.var[per_env ? i : 0];
            rewards_out[i] = clip(rewards[i] / sqrt(var + eps), clip_reward);
            /* Shared: the vector wrapper restarts at either end; per env the return runs on
               (gymnasium's per-env NormalizeReward, normalize.py's docstring). */
            if (!per_env && (term[i] || trunc[i])) returns[i] = 0.0;
        }
    } else {
        memcpy(rewards_out, rewards, sizeof(double) * (size_t)n);
    }
    if (obs_stats.mean != NULL) {
        if (training) {
            if (per_env) update_per_row(n, d, obs, obs_stats);
            else update_shared(n, d, obs, obs_stats);
        }
        for (long i = 0; i < n; i++) {
            const long row = per_env ? i * d : 0;
            for (long j = 0; j < d; j++) {
                const double z = (obs[i * d + j] - obs_stats.mean[row + j]) /
                                 sqrt(obs_stats.var[row + j] + eps);
                obs_out[i * d + j] = (float)clip(z, clip_obs);
            }
        }
    } else {
        for (long k = 0; k < n * d; k++) obs_out[k] = (float)obs[k];
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"step", (PyCFunction)(void (*)(void))py_step, METH_FASTCALL,
     "step(n, d, per_env, training, gamma, eps, clip_obs, clip_reward, pointers...): one "
     "normalisation step (see _normalize_cpu.c)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_normalize_cpu",
    .m_doc = "Observation and reward normalisation, one step (called through rlperf.native).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__normalize_cpu(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_DIM", MAX_DIM) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
