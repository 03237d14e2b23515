/* rlperf's CartPole (envs/cartpole.py) stepped in C, and the fused rollout's loop around it:
 * shared by the fused rollouts of the MLP (ppo/_rollout_cpu.c) and of the LSTM
 * (policies/_lstm_cpu.c), which differ only in the policy's step (`RolloutPolicy`).
 *
 * Bit-identity. The env is bit-identical to envs/cartpole.py: float64, the same operations in
 * the same order, libm's sin/cos (numpy's float64 sin/cos are libm's on the machines tested:
 * tests/ppo/test_fused_rollout.py checks the fused trajectories against the numpy env), and
 * nothing in cartpole_step is fused into an FMA (its own fp-contract=off, whatever the
 * including file's flags: the LSTM's kernel is built with contraction on for its matmuls). The
 * reset draws are numpy's own (a pool drawn by the caller from the env's generator, taken in
 * numpy's order).
 *
 * Timing (the profiler's sections rollout/policy_forward, env_step, buffer_store,
 * truncation_bootstrap): with timing on, the loop reads CLOCK_MONOTONIC (the clock of Python's
 * perf_counter) at each phase boundary and accumulates per phase the calls, total, min and max
 * nanoseconds; rlperf.native hands them to the profiler once per rollout. Given a span log
 * (_span_log.h; while a torch.profiler trace records), each phase's start and end go into it.
 *
 * Needs <Python.h>, <math.h>, <stdint.h>, <string.h>, <time.h> and _dense_cpu.h (HOT, INLINE)
 * first.
 */
#ifndef RLPERF_CARTPOLE_CPU_H
#define RLPERF_CARTPOLE_CPU_H

#include "../_span_log.h"

/* Phases, in the order of native.ROLLOUT_PHASES. */
enum { PH_POLICY, PH_ENV, PH_STORE, PH_BOOTSTRAP, N_PHASES };

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct {
    int64_t calls, total, min, max;
} PhaseTime;

INLINE void phase_add(PhaseTime *p, int64_t ns) {
    if (p->calls == 0 || ns < p->min) p->min = ns;
    if (ns > p->max) p->max = ns;
    p->calls++;
    p->total += ns;
}

/* CartPole's constants, from envs/cartpole.py (passed in, so they are written once). */
typedef struct {
    double gravity, total_mass, half_pole_length, mass_pole, pole_mass_length, force_mag, tau;
    double theta_threshold, x_threshold;
} Physics;

/* A rollout of T steps of N CartPoles: the buffer it fills, the env it steps, what it reports. */
typedef struct {
    int t_len, n, obs_dim, actions, max_steps, obs_full, timing;
    float *obs;          /* (T + 1, N, D) the buffer's observation slots */
    const float *noise;  /* (T, N, A) Exp(1) draws of the categorical samples */
    int64_t *act;        /* (T, N) */
    float *logprobs, *values, *bootstrap; /* (T, N) */
    float *rewards, *terms, *truncs;      /* (T, N) host arrays */
    double *state;       /* (4, N) x, x_dot, theta, theta_dot */
    int64_t *ep_steps;   /* (N) */
    double *ep_returns, *ep_start_s; /* (N); start in CLOCK_MONOTONIC seconds */
    const double *pool;  /* (P) reset draws, uniform(-0.05, 0.05) in the generator's order */
    int64_t pool_len;
    /* out: finished episodes in order (step-major, then env): env, return, length, seconds */
    int64_t *fin_env, *fin_len;
    float *fin_ret;
    double *fin_secs;
    int64_t *counts;     /* out (2): pool draws used, episodes finished */
    int64_t *phase_ns;   /* out (N_PHASES, 4): calls, total, min, max */
    int64_t *spans;      /* out: each phase's start and end (_span_log.h), or NULL */
    Physics ph;
    /* scratch */
    unsigned char *term, *trunc; /* (N) */
    float *next_obs;     /* (N, D) after the step (reset rows: their new episode's) */
    float *final_obs;    /* (N, D) before the reset */
} Rollout;

/* The policy's part of a rollout step, behind the loop below. */
typedef struct {
    void *ctx;
    /* Step t: act on obs slot t, writing r->act, r->logprobs and r->values at row t. */
    void (*act)(void *ctx, const Rollout *r, int t);
    /* After step t's env step (r->term, r->trunc hold its flags); may be NULL. */
    void (*stepped)(void *ctx, const Rollout *r, int t);
    /* The value of env j's final observation r->final_obs[j] after step t, into *value. */
    void (*final_value)(void *ctx, const Rollout *r, int t, int j, float *value);
} RolloutPolicy;

INLINE void observe(const Rollout *r, int j, float *out) {
    const double *s = r->state;
    const int n = r->n;
    if (r->obs_full) {
        for (int v = 0; v < 4; v++) out[v] = (float)s[v * n + j];
    } else { /* observe=position: x and theta */
        out[0] = (float)s[j];
        out[1] = (float)s[2 * n + j];
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#define EXACT_FP __attribute__((noinline, optimize("fp-contract=off")))
#else
#define EXACT_FP __attribute__((noinline))
#endif

/* One env step of every row (envs/cartpole.py's step, same operations in the same order);
 * returns -1 when the reset pool ran out (the caller sized it for every row every step). */
EXACT_FP static int cartpole_step(Rollout *r, const int64_t *act, int64_t *pool_pos,
                                  int64_t *n_fin, double now_s) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    const Physics *p = &r->ph;
    const int n = r->n, D = r->obs_dim;
    double *x = r->state, *x_dot = x + n, *theta = x + 2 * n, *theta_dot = x + 3 * n;
    int n_done = 0;
    for (int j = 0; j < n; j++) {
        const double force = act[j] == 1 ? p->force_mag : -p->force_mag;
        const double costheta = cos(theta[j]);
        const double sintheta = sin(theta[j]);
        const double temp =
            (force + p->pole_mass_length * (theta_dot[j] * theta_dot[j]) * sintheta) /
            p->total_mass;
        const double thetaacc =
            (p->gravity * sintheta - costheta * temp) /
            (p->half_pole_length *
             (4.0 / 3.0 - p->mass_pole * (costheta * costheta) / p->total_mass));
        const double xacc = temp - p->pole_mass_length * thetaacc * costheta / p->total_mass;
        const double nx = x[j] + p->tau * x_dot[j];
        const double nx_dot = x_dot[j] + p->tau * xacc;
        const double nth = theta[j] + p->tau * theta_dot[j];
        const double nth_dot = theta_dot[j] + p->tau * thetaacc;
        x[j] = nx, x_dot[j] = nx_dot, theta[j] = nth, theta_dot[j] = nth_dot;
        r->term[j] = nx < -p->x_threshold || nx > p->x_threshold ||
                     nth < -p->theta_threshold || nth > p->theta_threshold;
        r->ep_steps[j] += 1;
        r->trunc[j] = r->ep_steps[j] >= r->max_steps;
        r->ep_returns[j] += 1.0;
        observe(r, j, r->next_obs + (size_t)j * D);
        n_done += r->term[j] | r->trunc[j];
    }
    if (n_done == 0) return 0;
    /* numpy's masked reset draws uniform(size=(4, n_done)): variable v of the k-th finished
     * row is draw v * n_done + k. */
    if (*pool_pos + 4 * (int64_t)n_done > r->pool_len) return -1;
    const double *draws = r->pool + *pool_pos;
    int k = 0;
    for (int j = 0; j < n; j++) {
        if (!(r->term[j] | r->trunc[j])) continue;
        memcpy(r->final_obs + (size_t)j * D, r->next_obs + (size_t)j * D, D * sizeof(float));
        const int64_t e = (*n_fin)++;
        r->fin_env[e] = j;
        r->fin_ret[e] = (float)r->ep_returns[j];
        r->fin_len[e] = r->ep_steps[j];
        r->fin_secs[e] = now_s - r->ep_start_s[j];
        for (int v = 0; v < 4; v++) x[v * n + j] = draws[v * n_done + k];
        r->ep_steps[j] = 0;
        r->ep_returns[j] = 0.0;
        r->ep_start_s[j] = now_s;
        observe(r, j, r->next_obs + (size_t)j * D);
        k++;
    }
    *pool_pos += 4 * (int64_t)n_done;
    return n_done;
}

/* The whole rollout: per step the policy, the env step with autoreset, the transition into the
 * buffer (observation into slot t + 1) and V(final observation) of each episode a time limit
 * ended. Returns -1 when the reset pool ran out (cannot happen with 4 T N draws). */
static int cartpole_rollout(Rollout *r, const RolloutPolicy *pol) {
    const int n = r->n, D = r->obs_dim;
    PhaseTime times[N_PHASES] = {{0}};
    int64_t pool_pos = 0, n_fin = 0;
    for (int t = 0; t < r->t_len; t++) {
        const size_t row = (size_t)t * n;
        int64_t t0 = r->timing ? now_ns() : 0;
        pol->act(pol->ctx, r, t);
        int64_t t1 = r->timing ? now_ns() : 0;
        /* The env's clock for the episodes' seconds: once per step, as the numpy env reads
         * perf_counter once per step. */
        const int64_t clock = r->timing ? t1 : now_ns();
        const int n_done = cartpole_step(r, r->act + row, &pool_pos, &n_fin, clock * 1e-9);
        if (n_done < 0) return -1;
        int64_t t2 = r->timing ? now_ns() : 0;
        int any_trunc = 0;
        for (int j = 0; j < n; j++) {
            r->rewards[row + j] = 1.0f;
            r->terms[row + j] = r->term[j];
            r->truncs[row + j] = r->trunc[j];
            any_trunc |= r->trunc[j];
        }
        memcpy(r->obs + (row + n) * D, r->next_obs, (size_t)n * D * sizeof(float));
        if (pol->stepped) pol->stepped(pol->ctx, r, t);
        int64_t t3 = r->timing ? now_ns() : 0;
        if (r->timing) {
            phase_add(&times[PH_POLICY], t1 - t0);
            phase_add(&times[PH_ENV], t2 - t1);
            phase_add(&times[PH_STORE], t3 - t2);
            span_log(r->spans, PH_POLICY, t0, t1);
            span_log(r->spans, PH_ENV, t1, t2);
            span_log(r->spans, PH_STORE, t2, t3);
        }
        if (any_trunc) { /* V(final obs) where a time limit, not the task, ended the episode */
            for (int j = 0; j < n; j++)
                if (r->trunc[j] && !r->term[j])
                    pol->final_value(pol->ctx, r, t, j, r->bootstrap + row + j);
            if (r->timing) {
                const int64_t t4 = now_ns();
                phase_add(&times[PH_BOOTSTRAP], t4 - t3);
                span_log(r->spans, PH_BOOTSTRAP, t3, t4);
            }
        }
    }
    r->counts[0] = pool_pos;
    r->counts[1] = n_fin;
    for (int p = 0; p < N_PHASES; p++) {
        r->phase_ns[4 * p] = times[p].calls;
        r->phase_ns[4 * p + 1] = times[p].total;
        r->phase_ns[4 * p + 2] = times[p].min;
        r->phase_ns[4 * p + 3] = times[p].max;
    }
    return 0;
}

/* `count` ints or pointers from Python ints into `out`: 0, or -1 with a Python error set. The
 * including kernel reads its own arguments with them too. */
static int parse_longs(PyObject *const *args, int count, long *out) {
    for (int i = 0; i < count; i++) {
        out[i] = PyLong_AsLong(args[i]);
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

static int parse_ptrs(PyObject *const *args, int count, void **out) {
    for (int i = 0; i < count; i++) {
        out[i] = PyLong_AsVoidPtr(args[i]);
        if (out[i] == NULL && PyErr_Occurred()) return -1;
    }
    return 0;
}

#define ROLLOUT_DIMS 8
#define ROLLOUT_PTRS 25
/* The rollout's arguments, as rlperf.native passes them to either kernel: 8 ints (T, N, D, A,
 * max_steps, obs_full, timing, pool_len), then 25 pointers: obs, noise, actions, logprobs,
 * values, bootstrap, rewards, terms, truncs, state, ep_steps, ep_returns, ep_start_s, pool,
 * fin_env, fin_ret, fin_len, fin_secs, counts, phase_ns, spans (a span log or 0), physics (float64 (9,): gravity,
 * total_mass, half_pole_length, mass_pole, pole_mass_length, force_mag, tau, theta_threshold,
 * x_threshold), scratch_flags ((2, N) uint8), next_obs and final_obs ((N, D) float32 scratch).
 * Returns 0, or -1 with a Python error set. */
static int parse_rollout(PyObject *const *args, Rollout *r) {
    long d[ROLLOUT_DIMS];
    void *p[ROLLOUT_PTRS];
    if (parse_longs(args, ROLLOUT_DIMS, d) < 0 ||
        parse_ptrs(args + ROLLOUT_DIMS, ROLLOUT_PTRS, p) < 0)
        return -1;
    if (d[2] != (d[5] ? 4 : 2)) {
        PyErr_Format(PyExc_ValueError, "CartPole observes %d features, the policy takes %ld",
                     d[5] ? 4 : 2, d[2]);
        return -1;
    }
    r->t_len = (int)d[0], r->n = (int)d[1], r->obs_dim = (int)d[2], r->actions = (int)d[3];
    r->max_steps = (int)d[4], r->obs_full = (int)d[5], r->timing = (int)d[6], r->pool_len = d[7];
    void **q = p;
    r->obs = *q++, r->noise = *q++, r->act = *q++, r->logprobs = *q++, r->values = *q++;
    r->bootstrap = *q++, r->rewards = *q++, r->terms = *q++, r->truncs = *q++;
    r->state = *q++, r->ep_steps = *q++, r->ep_returns = *q++, r->ep_start_s = *q++;
    r->pool = *q++, r->fin_env = *q++, r->fin_ret = *q++, r->fin_len = *q++, r->fin_secs = *q++;
    r->counts = *q++, r->phase_ns = *q++, r->spans = *q++;
    const double *c = *q++;
    r->ph = (Physics){c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]};
    r->term = *q++;
    r->trunc = r->term + r->n;
    r->next_obs = *q++, r->final_obs = *q++;
    return 0;
}

#endif /* RLPERF_CARTPOLE_CPU_H */
