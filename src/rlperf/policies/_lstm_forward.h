/* Part of _lstm_cpu.c's one translation unit, included once after _lstm_net.h (not a
 * standalone header): the forward pass. The recurrence over a (T, B) sequence (forward), the whole
 * actor-critic from the observations to the heads (net_forward), and their Python calls.
 */

/* One row of one step, forward: z (4H) holds the gate pre-activations and receives their
 * activations; c_prev is the previous cell state, scaled here by keep. `restrict` lets the
 * compiler vectorise without runtime overlap checks (the buffers never overlap). */
INLINE void cell_forward(int hid, float *z, const float *restrict c_prev, float keep,
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
            if (s->xproj != s->acts) /* the whole-network forward projects into acts itself */
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

/* Rows [r0, r1) of every step, forward: encoder, input projection into acts, recurrence, heads. */
HOT static void net_forward_rows(const Net *n, int r0, int r1) {
    float pad[TILE_ROWS * MAX_K];
    const Seq *s = &n->seq;
    const int b = s->batch, hid = s->hid, four = 4 * hid, f_in = features(n), L = n->n_layers;
    const RowTiles rt = row_tiles(s, r0, r1);
    for (int t = 0; t < rt.steps; t++)
        for (int rb = 0; rb < rt.width; rb += TILE_ROWS) {
            const int rows = rt.width - rb < TILE_ROWS ? rt.width - rb : TILE_ROWS;
            const size_t row0 = (size_t)t * b + rt.first + rb;
            const float *in = encode_rows(n, row0, rows, pad);
            float *z = s->acts + row0 * four;
            for (int r = 0; r < rows; r++) memcpy(z + r * four, n->bias, sizeof(float) * four);
            gemm_rows(rows, f_in, four, in, f_in, wt_slot(n, L), z, four, pad);
        }
    forward_rows(s, r0, r1);
    for (int t = 0; t < s->t_len; t++) {
        const size_t row0 = (size_t)t * b + r0;
        small_out_rows(r1 - r0, hid, n->n_out, s->hs + row0 * hid, n->w_head, n->b_head,
                       n->out + row0 * n->n_out);
    }
}

static void net_forward(const Net *n, int threads) {
    const int L = n->n_layers, hid = n->seq.hid;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
#ifdef _OPENMP
        const int p = omp_get_thread_num(), np = omp_get_num_threads();
#else
        const int p = 0, np = 1;
        (void)threads;
#endif
        /* The transposes the tiles read, one weight per thread in turn. */
        for (int l = p; l < L + 2; l += np) {
            if (l < L) transpose(n->width[l + 1], n->width[l], n->enc_w[l], wt_slot(n, l));
            else if (l == L) transpose(4 * hid, features(n), n->w_ih, wt_slot(n, L));
            else transpose(4 * hid, hid, n->w_hh, wt_slot(n, L + 1));
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
        int r0, r1;
        env_share(n, p, np, &r0, &r1);
        if (r0 < r1) net_forward_rows(n, r0, r1);
    }
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

/* net_forward(T, B, H, L, n_out, threads, *widths, obs, *enc_w, *enc_b, *layers, w_ih, w_hh,
 *             bias, w_head, b_head, wt, acts, keep, h0, c0, cs, tcs, hs, hprev, out) */
static PyObject *py_net_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Net n;
    void *p[16 + 3 * MAX_LAYERS];
    const int threads = parse_net(args, nargs, 16, 3, &n, p);
    if (threads < 0) return NULL;
    const int L = n.n_layers;
    void **q = p;
    n.obs = *q++;
    for (int l = 0; l < L; l++) n.enc_w[l] = *q++;
    for (int l = 0; l < L; l++) n.enc_b[l] = *q++;
    for (int l = 0; l < L; l++) n.layers[l] = *q++;
    n.w_ih = *q++, n.w_hh = *q++, n.bias = *q++, n.w_head = *q++, n.b_head = *q++, n.wt = *q++;
    Seq *s = &n.seq;
    s->acts = *q++, s->keep = *q++, s->h0 = *q++, s->c0 = *q++, s->cs = *q++, s->tcs = *q++;
    s->hs = *q++, s->hprev = *q++, n.out = *q++;
    s->xproj = s->acts;
    s->w_t = wt_slot(&n, L + 1);
    Py_BEGIN_ALLOW_THREADS net_forward(&n, threads);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}
