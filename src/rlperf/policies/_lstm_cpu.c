/* The LSTM recurrence on the CPU, float32: a whole (T, B) sequence forward or backward in one
 * call; the whole actor-critic around it, forward, backward and rollout step ("The whole
 * actor-critic", _lstm_net.h); and a whole rollout of it on rlperf's CartPole in one call ("The
 * fused CartPole rollout", _lstm_step.h; the loop and the env shared with the MLP's in
 * envs/_cartpole_cpu.h). One translation unit (one extension), in parts included below:
 * _lstm_net.h (the data and shared helpers), _lstm_forward.h, _lstm_backward.h and _lstm_step.h.
 * Called only from rlperf/native/, which checks every tensor (dtype,
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

/* The parts, in this order (each reads only what the ones before define): */
#include "_lstm_net.h"      /* Seq, Net, the shared helpers, argument parsing */
#include "_lstm_forward.h"  /* forward: the recurrence and the whole actor-critic */
#include "_lstm_backward.h" /* backward: their gradients, clipping included */
#include "_lstm_step.h"     /* the rollout step, and a whole CartPole rollout of it */

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
