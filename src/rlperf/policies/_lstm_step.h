/* Part of _lstm_cpu.c's one translation unit, included once after _lstm_backward.h (not a
 * standalone header): the rollout step. One step of the whole actor-critic with the input
 * projection fused into the recurrence and a categorical sample (net_act), and a whole CartPole
 * rollout of it in one call (cartpole_rollout).
 */

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

/* Rows [r0, r1) of one rollout step of the whole network: encoder (its transposed weights
 * prepared once per rollout in n->wt, then [W_ih W_hh]^T), the fused step, the heads, and for
 * one categorical action a Gumbel-max sample from the exponential draws in `noise`. */
HOT static void net_act_rows(const Net *n, const float *noise, int64_t *actions, float *logprob,
                             int r0, int r1) {
    float pad[TILE_ROWS * MAX_K];
    const Seq *s = &n->seq;
    const int hid = s->hid, n_out = n->n_out, k_act = n_out - 1;
    for (int rb = r0; rb < r1; rb += TILE_ROWS)
        encode_rows(n, (size_t)rb, r1 - rb < TILE_ROWS ? r1 - rb : TILE_ROWS, pad);
    step_rows(s, r0, r1); /* reads the encoder's output as s->x */
    small_out_rows(r1 - r0, hid, n_out, s->h_out + (size_t)r0 * hid, n->w_head, n->b_head,
                   n->out + (size_t)r0 * n_out);
    if (!noise) return;
    for (int r = r0; r < r1; r++) {
        /* log_softmax, then argmax(logp - log E), E ~ Exp(1): an exact categorical sample. */
        const float *lg = n->out + (size_t)r * n_out, *e = noise + (size_t)r * k_act;
        float mx = lg[0];
        for (int j = 1; j < k_act; j++) mx = lg[j] > mx ? lg[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < k_act; j++) sum += expf(lg[j] - mx);
        const float lse = mx + logf(sum);
        int best = 0;
        float best_key = -INFINITY;
        for (int j = 0; j < k_act; j++) {
            const float key = (lg[j] - lse) - logf(e[j]);
            if (key > best_key) best_key = key, best = j;
        }
        actions[r] = best;
        logprob[r] = lg[best] - lse;
    }
}

/* net_act(1, B, H, L, n_out, threads, *widths, obs, *enc_b, *layers, wt, bias, w_head, b_head,
 *         keep, h, c, h_out, c_out, out, noise, actions, logprob): one rollout step; wt holds
 * each encoder weight transposed, then [W_ih W_hh]^T; noise 0: no sampling. */
static PyObject *py_net_act(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Net n;
    void *p[14 + 2 * MAX_LAYERS];
    const int threads = parse_net(args, nargs, 14, 2, &n, p);
    if (threads < 0) return NULL;
    if (n.seq.t_len != 1) {
        PyErr_Format(PyExc_ValueError, "net_act is one step: T = 1, got %d", n.seq.t_len);
        return NULL;
    }
    const int L = n.n_layers;
    void **q = p;
    n.obs = *q++;
    for (int l = 0; l < L; l++) n.enc_b[l] = *q++;
    for (int l = 0; l < L; l++) n.layers[l] = *q++;
    n.wt = *q++;
    Seq *s = &n.seq;
    s->bias = *q++;
    n.w_head = *q++, n.b_head = *q++;
    s->keep = *q++, s->h0 = *q++, s->c0 = *q++, s->h_out = *q++, s->c_out = *q++;
    n.out = *q++;
    const float *noise = *q++;
    int64_t *actions = *q++;
    float *logprob = *q++;
    s->in_features = n.width[L];
    s->x = L ? n.layers[L - 1] : n.obs;
    s->w_cat_t = wt_slot(&n, L);
    Py_BEGIN_ALLOW_THREADS
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
#ifdef _OPENMP
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
#endif
        int r0, r1;
        env_share(&n, t, nt, &r0, &r1);
        if (r0 < r1) net_act_rows(&n, noise, actions, logprob, r0, r1);
    }
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* ---- The fused CartPole rollout ----------------------------------------------------------------
 *
 * Why: at 4 envs the trainer's recurrent rollout step cost ~150 us (the compiled network step
 * ~15 us of it, the rest Python, torch dispatch around the state and the numpy env). Here the
 * whole rollout is one call: per step the state saved where a BPTT segment starts, the network
 * step of net_act (the same arithmetic, so the same actions, log-probabilities, values and
 * states as the compiled step bit for bit), CartPole's step, and the episode-start flags the
 * next step resets the state by. V(final observation) of a truncated episode is the network on
 * that one row with the state after the step (not yet reset), as bootstrap_truncated computes
 * it. One thread: rows are independent, so the result is the same as net_act's on any number.
 */
typedef struct {
    Net net;       /* N rows: obs is slot t's, set each step */
    Net one;       /* one row, for V(final observation) */
    float *h, *c;  /* (N, H) the state entering the step; the kernel's own alternate buffers */
    float *h_alt, *c_alt;
    float *keep;   /* (N) */
    float *done;   /* (T + 1, N) the buffer's episode-start flags */
    float *states_h, *states_c; /* (T / horizon, N, H) the state at each segment's start */
    int horizon, hid;
} LstmRollout;

/* The encoder's input rows and the LSTM's input, for net's current obs. */
static void point_input(Net *n, const float *obs) {
    n->obs = obs;
    n->seq.x = n->n_layers ? n->layers[n->n_layers - 1] : obs;
}

static void lstm_act(void *ctx, const Rollout *r, int t) {
    LstmRollout *m = ctx;
    const int n = r->n, hid = m->hid, a = r->actions;
    const size_t row = (size_t)t * n, state_len = (size_t)n * hid;
    if (t % m->horizon == 0) {
        memcpy(m->states_h + (size_t)(t / m->horizon) * state_len, m->h, sizeof(float) * state_len);
        memcpy(m->states_c + (size_t)(t / m->horizon) * state_len, m->c, sizeof(float) * state_len);
    }
    for (int j = 0; j < n; j++) m->keep[j] = 1.0f - m->done[row + j];
    Net *net = &m->net;
    point_input(net, r->obs + row * r->obs_dim);
    net->seq.h0 = m->h, net->seq.c0 = m->c, net->seq.h_out = m->h_alt, net->seq.c_out = m->c_alt;
    net_act_rows(net, r->noise + row * a, r->act + row, r->logprobs + row, 0, n);
    for (int j = 0; j < n; j++) r->values[row + j] = net->out[(size_t)j * net->n_out + a];
    float *h = m->h, *c = m->c; /* the step's output is the next step's input */
    m->h = m->h_alt, m->c = m->c_alt, m->h_alt = h, m->c_alt = c;
}

static void lstm_stepped(void *ctx, const Rollout *r, int t) {
    LstmRollout *m = ctx;
    float *next = m->done + (size_t)(t + 1) * r->n;
    for (int j = 0; j < r->n; j++) next[j] = (float)(r->term[j] | r->trunc[j]);
}

static void lstm_final_value(void *ctx, const Rollout *r, int t, int j, float *value) {
    (void)t;
    LstmRollout *m = ctx;
    Net *one = &m->one;
    point_input(one, r->final_obs + (size_t)j * r->obs_dim);
    one->seq.h0 = m->h + (size_t)j * m->hid, one->seq.c0 = m->c + (size_t)j * m->hid;
    net_act_rows(one, NULL, NULL, NULL, 0, 1);
    *value = one->out[r->actions];
}

/* cartpole_rollout(rollout arguments (envs/_cartpole_cpu.h's parse_rollout); then net_act's
 *                  (1, N, H, L, n_out, threads, *widths, *enc_b, *layers (N, width[l + 1]), wt,
 *                  bias, w_head, b_head), with h, c (N, H), done (T + 1, N), states_h, states_c
 *                  (T / horizon, N, H) and scratch (2 N H + N + N n_out + sum(widths[1:]) + 2 H
 *                  + n_out floats) in place of its state and outputs; then horizon): a whole
 * rollout of the LSTM actor-critic on one thread; h and c hold the state after it. Raises
 * ValueError when the reset pool ran out. */
static PyObject *py_cartpole_rollout(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    const Py_ssize_t head = ROLLOUT_DIMS + ROLLOUT_PTRS;
    Rollout r;
    LstmRollout m;
    void *p[10 + 2 * MAX_LAYERS];
    if (nargs < head + 1) return PyErr_Format(PyExc_TypeError, "too few arguments");
    if (parse_rollout(args, &r) < 0) return NULL;
    const long horizon = PyLong_AsLong(args[nargs - 1]);
    if (horizon == -1 && PyErr_Occurred()) return NULL;
    memset(&m, 0, sizeof(m));
    if (parse_net(args + head, nargs - head - 1, 10, 2, &m.net, p) < 0) return NULL;
    Net *net = &m.net, *one = &m.one;
    const int L = net->n_layers, hid = net->seq.hid, n_out = net->n_out;
    if (net->seq.t_len != 1 || net->seq.batch != r.n || n_out != r.actions + 1 ||
        net->width[0] != r.obs_dim || horizon < 1 || r.t_len % horizon)
        return PyErr_Format(PyExc_ValueError,
                            "the step (T %d, batch %d, %d outputs, %d features) does not fit the "
                            "rollout (T 1, batch %d, %d outputs, %d features), or horizon %ld "
                            "does not divide its %d steps", net->seq.t_len, net->seq.batch,
                            n_out, net->width[0], r.n, r.actions + 1, r.obs_dim, horizon,
                            r.t_len);
    void **q = p;
    for (int l = 0; l < L; l++) net->enc_b[l] = *q++;
    for (int l = 0; l < L; l++) net->layers[l] = *q++;
    net->wt = *q++;
    net->seq.bias = *q++;
    net->w_head = *q++, net->b_head = *q++;
    m.h = *q++, m.c = *q++, m.done = *q++, m.states_h = *q++, m.states_c = *q++;
    float *scratch = *q++;
    *one = *net; /* the same weights; its own rows and scratch below */
    const int *width = net->width;
    const int n = r.n;
    float *const h_given = m.h, *const c_given = m.c;
    m.h_alt = scratch, scratch += (size_t)n * hid;
    m.c_alt = scratch, scratch += (size_t)n * hid;
    m.keep = scratch, scratch += n;
    net->out = scratch, scratch += (size_t)n * n_out;
    for (int l = 0; l < L; l++) one->layers[l] = scratch, scratch += width[l + 1];
    float *one_h = scratch, *one_c = scratch + hid;
    scratch += 2 * hid;
    one->out = scratch;
    static const float keep_one = 1.0f;
    for (int k = 0; k < 2; k++) {
        Net *x = k ? one : net;
        x->seq.in_features = width[L];
        x->seq.w_cat_t = wt_slot(x, L);
    }
    one->seq.batch = 1;
    net->seq.keep = m.keep;
    one->seq.keep = &keep_one, one->seq.h_out = one_h, one->seq.c_out = one_c;
    m.hid = hid, m.horizon = (int)horizon;
    const RolloutPolicy pol = {.ctx = &m, .act = lstm_act, .stepped = lstm_stepped,
                               .final_value = lstm_final_value};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cartpole_rollout(&r, &pol);
    if (m.h != h_given) { /* the last step's state is in the alternate buffers */
        memcpy(h_given, m.h, sizeof(float) * (size_t)n * hid);
        memcpy(c_given, m.c, sizeof(float) * (size_t)n * hid);
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, "cartpole_rollout: the reset pool ran out");
        return NULL;
    }
    Py_RETURN_NONE;
}
