/* Part of _lstm_cpu.c's one translation unit, included once after _lstm_forward.h (not a
 * standalone header): the backward pass. The recurrence's gradients over a (T, B) sequence
 * (backward), the whole actor-critic's from the heads to every weight, gradient clipping
 * included (net_backward), and their Python calls.
 */

/* One row of one step, backward, gate blocks as separate pointers (see cell_forward). dh holds
 * the recurrent part of dL/dh_t (from step t+1) and dc dL/dc_t's carry; g* receive dL/dz_t;
 * dc leaves as the carry into step t-1. */
INLINE void cell_backward(int hid, const float *restrict ai, const float *restrict af,
                                 const float *restrict ag, const float *restrict ao,
                                 const float *restrict tc, const float *restrict grad_h,
                                 const float *restrict c_prev, float keep,
                                 const float *restrict dh, float *restrict dc,
                                 float *restrict gi, float *restrict gf, float *restrict gg,
                                 float *restrict go) {
    for (int u = 0; u < hid; u++) {
        float i = ai[u], f = af[u], g = ag[u], o = ao[u];
        float th = tc[u];
        float dhu = grad_h[u] + dh[u];
        float dcu = dc[u] + dhu * o * (1.0f - th * th);
        gi[u] = dcu * g * i * (1.0f - i);
        gf[u] = dcu * c_prev[u] * keep * f * (1.0f - f);
        gg[u] = dcu * i * (1.0f - g * g);
        go[u] = dhu * th * o * (1.0f - o);
        dc[u] = dcu * f * keep;
    }
}

/* Rows [r0, r1) through all T steps, backward. dh0/dc0 rows carry dL/dh_{t-1} (recurrent part)
 * and dL/dc_{t-1} from step t to step t-1; they start at zero (no gradient into the final
 * state) and end as the gradients of the initial state. */
HOT static void backward_rows(const Seq *s, int r0, int r1) {
    const int hid = s->hid, four = 4 * hid, b = s->batch;
    float gz_pad[TILE_ROWS * 4 * MAX_HIDDEN];
    memset(s->dh0 + (size_t)r0 * hid, 0, sizeof(float) * (size_t)(r1 - r0) * hid);
    memset(s->dc0 + (size_t)r0 * hid, 0, sizeof(float) * (size_t)(r1 - r0) * hid);
    for (int t = s->t_len - 1; t >= 0; t--) {
        for (int rb = r0; rb < r1; rb += TILE_ROWS) {
            const int rows = r1 - rb < TILE_ROWS ? r1 - rb : TILE_ROWS;
            const float *keep = s->keep + (size_t)t * b + rb;
            for (int r = 0; r < rows; r++) {
                const size_t row = (size_t)t * b + rb + r;
                const float *cp = t ? s->cs + (row - b) * hid : s->c0 + (size_t)(rb + r) * hid;
                const float *a = s->acts + row * four;
                float *gz = s->grad_z + row * four;
                cell_backward(hid, a, a + hid, a + 2 * hid, a + 3 * hid, s->tcs + row * hid,
                              s->grad_hs + row * hid, cp, keep[r], s->dh0 + (size_t)(rb + r) * hid,
                              s->dc0 + (size_t)(rb + r) * hid, gz, gz + hid, gz + 2 * hid,
                              gz + 3 * hid);
            }
            /* dL/dh_{t-1} = keep * (dz_t W_hh). A tile's rows of dz_t are contiguous; a partial
             * tile is read from a zero-padded copy. */
            const float *gz = s->grad_z + ((size_t)t * b + rb) * four;
            if (rows < TILE_ROWS) {
                memset(gz_pad, 0, sizeof(float) * TILE_ROWS * four);
                memcpy(gz_pad, gz, sizeof(float) * (size_t)rows * four);
                gz = gz_pad;
            }
            float *dh = s->dh0 + (size_t)rb * hid;
            memset(dh, 0, sizeof(float) * (size_t)rows * hid);
            gemm_tile_acc(rows, four, hid, gz, four, s->w, dh, hid);
            for (int r = 0; r < rows; r++)
                for (int u = 0; u < hid; u++) dh[r * hid + u] *= keep[r];
        }
    }
}

/* Rows [r0, r1) of every step, backward up to the weight gradients: dL/dh from the heads, the
 * recurrence, then dL/dx and each encoder layer's dz. */
HOT static void net_backward_rows(const Net *n, int r0, int r1) {
    float pad[TILE_ROWS * MAX_K];
    const Seq *s = &n->seq;
    const int b = s->batch, hid = s->hid, four = 4 * hid, L = n->n_layers, n_out = n->n_out;
    const RowTiles rt = row_tiles(s, r0, r1);
    for (int t = 0; t < rt.steps; t++)
        for (int rb = 0; rb < rt.width; rb += TILE_ROWS) {
            const int rows = rt.width - rb < TILE_ROWS ? rt.width - rb : TILE_ROWS;
            const size_t row0 = (size_t)t * b + rt.first + rb;
            float *gh = n->grad_hs + row0 * hid;
            memset(gh, 0, sizeof(float) * (size_t)rows * hid);
            gemm_rows(rows, n_out, hid, n->grad_out + row0 * n_out, n_out, n->w_head, gh, hid, pad);
        }
    backward_rows(s, r0, r1);
    if (L == 0) return; /* no encoder: nothing needs dL/dobs */
    for (int t = 0; t < rt.steps; t++)
        for (int rb = 0; rb < rt.width; rb += TILE_ROWS) {
            const int rows = rt.width - rb < TILE_ROWS ? rt.width - rb : TILE_ROWS;
            const size_t row0 = (size_t)t * b + rt.first + rb;
            /* dL/dx = dz_gates W_ih, into the last layer's dz, then back through each tanh. */
            int w = n->width[L];
            float *d = n->dz[L - 1] + row0 * w;
            memset(d, 0, sizeof(float) * (size_t)rows * w);
            gemm_rows(rows, four, w, s->grad_z + row0 * four, four, n->w_ih, d, w, pad);
            for (int l = L - 1; l >= 0; l--) {
                w = n->width[l + 1];
                d = n->dz[l] + row0 * w;
                const float *y = n->layers[l] + row0 * w;
                for (int e = 0; e < rows * w; e++) d[e] *= 1.0f - y[e] * y[e];
                if (l > 0) {
                    const int k = n->width[l];
                    float *dp = n->dz[l - 1] + row0 * k;
                    memset(dp, 0, sizeof(float) * (size_t)rows * k);
                    gemm_rows(rows, w, k, d, w, n->enc_w[l], dp, k, pad);
                }
            }
        }
}

/* This thread's share [m0, m1) of a gradient with m rows: whole tiles, split by thread. */
static void share(int m, int p, int np, int *m0, int *m1) {
    const int tiles = (m + TILE_ROWS - 1) / TILE_ROWS;
    *m0 = tiles * p / np * TILE_ROWS;
    *m1 = tiles * (p + 1) / np * TILE_ROWS;
    if (*m0 > m) *m0 = m;
    if (*m1 > m) *m1 = m;
}

/* Thread p of np's share of every weight gradient, over all N rows. */
static void net_weight_grads(const Net *n, int p, int np) {
    const Seq *s = &n->seq;
    const int rows = s->t_len * s->batch, hid = s->hid, four = 4 * hid, L = n->n_layers;
    int m0, m1;
    share(n->n_out, p, np, &m0, &m1);
    weight_grad(m0, m1, rows, n->n_out, hid, n->grad_out, s->hs, n->g_w_head, n->g_b_head);
    share(four, p, np, &m0, &m1);
    weight_grad(m0, m1, rows, four, features(n), s->grad_z, lstm_input(n), n->g_w_ih, n->g_bias);
    weight_grad(m0, m1, rows, four, hid, s->grad_z, s->hprev, n->g_w_hh, NULL);
    for (int l = 0; l < L; l++) {
        share(n->width[l + 1], p, np, &m0, &m1);
        weight_grad(m0, m1, rows, n->width[l + 1], n->width[l], n->dz[l],
                    l ? n->layers[l - 1] : n->obs, n->g_enc_w[l], n->g_enc_b[l]);
    }
}

/* The weight gradients as a list of (pointer, length), in the order net_backward's caller
 * passes them; returns how many. */
static int grad_list(const Net *n, float **ptr, size_t *len) {
    const int L = n->n_layers, hid = n->seq.hid, four = 4 * hid;
    int c = 0;
    for (int l = 0; l < L; l++)
        ptr[c] = n->g_enc_w[l], len[c++] = (size_t)n->width[l + 1] * n->width[l];
    for (int l = 0; l < L; l++) ptr[c] = n->g_enc_b[l], len[c++] = (size_t)n->width[l + 1];
    ptr[c] = n->g_w_ih, len[c++] = (size_t)four * n->width[L];
    ptr[c] = n->g_w_hh, len[c++] = (size_t)four * hid;
    ptr[c] = n->g_bias, len[c++] = (size_t)four;
    ptr[c] = n->g_w_head, len[c++] = (size_t)n->n_out * hid;
    ptr[c] = n->g_b_head, len[c++] = (size_t)n->n_out;
    return c;
}

#define CLIP_BLOCKS 64

/* Thread p of np: clip_grad_norm_'s arithmetic over all the weight gradients,
 * g *= min(1, max_norm / (||g|| + 1e-6)). The squares are summed in CLIP_BLOCKS fixed pieces of
 * the concatenated gradient (in double), whatever the thread count, and the pieces added in
 * order, so the result does not depend on the threads. `partial` is shared, CLIP_BLOCKS long. */
static void clip_grads(const Net *n, float max_norm, double *partial, int p, int np) {
    float *ptr[2 * MAX_LAYERS + 5];
    size_t len[2 * MAX_LAYERS + 5], total = 0;
    const int count = grad_list(n, ptr, len);
    for (int i = 0; i < count; i++) total += len[i];
    const size_t block = (total + CLIP_BLOCKS - 1) / CLIP_BLOCKS;
    for (int pass = 0; pass < 2; pass++) {
        float scale = 1.0f;
        if (pass == 1) {
            double sq = 0.0;
            for (int k = 0; k < CLIP_BLOCKS; k++) sq += partial[k];
            const float coef = max_norm / ((float)sqrt(sq) + 1e-6f);
            scale = coef < 1.0f ? coef : 1.0f;
        }
        for (int k = p; k < CLIP_BLOCKS; k += np) {
            /* Block k covers [k * block, (k + 1) * block) of the concatenation. */
            size_t lo = (size_t)k * block, hi = lo + block, base = 0;
            double sq = 0.0;
            for (int i = 0; i < count; base += len[i], i++) {
                if (hi <= base || lo >= base + len[i]) continue; /* no overlap with this one */
                const size_t a = lo > base ? lo - base : 0;
                const size_t e = hi - base < len[i] ? hi - base : len[i];
                float *restrict g = ptr[i];
                if (pass == 0)
                    for (size_t j = a; j < e; j++) sq += (double)g[j] * g[j];
                else
                    for (size_t j = a; j < e; j++) g[j] *= scale;
            }
            if (pass == 0) partial[k] = sq;
        }
#ifdef _OPENMP
#pragma omp barrier
#endif
    }
}

static void net_backward(const Net *n, int threads, float max_grad_norm) {
    double partial[CLIP_BLOCKS];
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
        int r0, r1;
        env_share(n, p, np, &r0, &r1);
        if (r0 < r1) net_backward_rows(n, r0, r1);
#ifdef _OPENMP
#pragma omp barrier
#endif
        net_weight_grads(n, p, np);
        if (max_grad_norm > 0.0f) {
#ifdef _OPENMP
#pragma omp barrier
#endif
            clip_grads(n, max_grad_norm, partial, p, np);
        }
    }
}

/* backward(T, B, H, threads, acts, keep, c0, w, cs, tcs, grad_hs, grad_z, dh0, dc0) */
static PyObject *py_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    long d[4];
    void *p[10];
    if (parse(args, nargs, 14, d, 4, p) < 0) return NULL;
    Seq s = {.t_len = (int)d[0], .batch = (int)d[1], .hid = (int)d[2], .acts = p[0],
             .keep = p[1], .c0 = p[2], .w = p[3], .cs = p[4], .tcs = p[5], .grad_hs = p[6],
             .grad_z = p[7], .dh0 = p[8], .dc0 = p[9]};
    Py_BEGIN_ALLOW_THREADS run_rows(backward_rows, &s, (int)d[3]);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

/* net_backward(T, B, H, L, n_out, threads, *widths, obs, *enc_w, *layers, *dz, w_ih, w_hh,
 *              w_head, acts, keep, c0, cs, tcs, hs, hprev, grad_out, grad_hs, grad_z, dh0, dc0,
 *              *g_enc_w, *g_enc_b, g_w_ih, g_w_hh, g_bias, g_w_head, g_b_head, max_grad_norm):
 * max_grad_norm > 0 clips all the gradients together to that norm */
static PyObject *py_net_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Net n;
    void *p[21 + 5 * MAX_LAYERS];
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "net_backward: expected arguments");
        return NULL;
    }
    const float max_grad_norm = (float)PyFloat_AsDouble(args[nargs - 1]);
    if (max_grad_norm == -1.0f && PyErr_Occurred()) return NULL;
    const int threads = parse_net(args, nargs - 1, 21, 5, &n, p);
    if (threads < 0) return NULL;
    const int L = n.n_layers;
    void **q = p;
    n.obs = *q++;
    for (int l = 0; l < L; l++) n.enc_w[l] = *q++;
    for (int l = 0; l < L; l++) n.layers[l] = *q++;
    for (int l = 0; l < L; l++) n.dz[l] = *q++;
    n.w_ih = *q++, n.w_hh = *q++, n.w_head = *q++;
    Seq *s = &n.seq;
    s->acts = *q++, s->keep = *q++, s->c0 = *q++, s->cs = *q++, s->tcs = *q++, s->hs = *q++;
    s->hprev = *q++;
    n.grad_out = *q++, n.grad_hs = *q++;
    s->grad_z = *q++, s->dh0 = *q++, s->dc0 = *q++;
    for (int l = 0; l < L; l++) n.g_enc_w[l] = *q++;
    for (int l = 0; l < L; l++) n.g_enc_b[l] = *q++;
    n.g_w_ih = *q++, n.g_w_hh = *q++, n.g_bias = *q++, n.g_w_head = *q++, n.g_b_head = *q++;
    s->grad_hs = n.grad_hs;
    s->w = n.w_hh;
    Py_BEGIN_ALLOW_THREADS net_backward(&n, threads, max_grad_norm);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}
