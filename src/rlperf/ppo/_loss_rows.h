/* The categorical PPO loss's rows (see _loss_cpu.c, whose math this is): shared by the loss
 * kernel and the MLP's whole update (_mlp_update_cpu.c), so both compute the loss and its head
 * gradients with the same code. Needs <math.h>, <stdint.h> (and <omp.h> under OpenMP) first.
 */
#ifndef RLPERF_LOSS_ROWS_H
#define RLPERF_LOSS_ROWS_H

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
    /* A Box action's diagonal Gaussian (gaussian != 0; the MLP update only): `logits` are the
     * means, `action_f` the sampled actions (n, actions) with row stride action_stride,
     * `logstd` (actions,) the state-independent log-std and `grad_logstd` (actions,) where its
     * gradient is written (overwritten). */
    int gaussian;
    const float *action_f, *logstd;
    float *grad_logstd;
} Loss;

#define MAX_GAUSSIAN 64 /* a Box action's dimensions */
#define LOG_SQRT_2PI 0.91893853320467274178f

/* One row's policy and value terms, given its new log-probability: the value gradient into
 * grad_value, the statistics pg, v, kl and clipped added into acc[0..3]; returns the row's
 * d loss / d log pi, pg_loss1 / n where the unclipped term is the max, else 0. */
static inline float ppo_row_terms(const Loss *s, long b, float logp, double *acc) {
    const float c = (float)s->clip_coef, inv_n = 1.0f / (float)s->n;
    const float logratio = logp - s->oldlogp[b * s->oldlogp_stride];
    const float ratio = expf(logratio);
    const float adv = s->adv[b * s->adv_stride];
    const float clipped = ratio < 1.0f - c ? 1.0f - c : (ratio > 1.0f + c ? 1.0f + c : ratio);
    const float pg1 = -adv * ratio, pg2 = -adv * clipped;
    acc[0] += pg1 > pg2 ? pg1 : pg2;

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
    acc[1] += v_max;
    acc[2] += (ratio - 1.0f) - logratio;
    acc[3] += fabsf(ratio - 1.0f) > c;
    s->grad_value[b * s->grad_value_stride] = grad_v * ((float)s->vf_coef * inv_n);
    return (pg1 < pg2 ? 0.0f : pg1) * inv_n;
}

/* Rows [b0, b1) of a Gaussian head (see Loss): their mean and value gradients, their statistics
 * into sums and their log-std gradient terms into gls (in double; the entropy bonus's -ent_coef
 * is added once, by loss_all). With z = (a - mean) exp(-logstd): log pi = sum_d(-z^2/2 -
 * logstd_d - log sqrt(2 pi)), d log pi / d mean_d = z_d exp(-logstd_d), d log pi / d logstd_d =
 * z_d^2 - 1; the entropy, sum_d(1/2 + log sqrt(2 pi) + logstd_d), is the same for every row
 * (ppo/loss.py's gaussian_ppo_loss_and_head_grads, the reference). */
static void gaussian_rows(const Loss *s, long b0, long b1, double *sums, double *gls) {
    const long A = s->actions;
    float inv_std[MAX_GAUSSIAN], z[MAX_GAUSSIAN], h = 0.0f;
    for (long a = 0; a < A; a++) {
        inv_std[a] = expf(-s->logstd[a]);
        h += 0.5f + LOG_SQRT_2PI + s->logstd[a];
        gls[a] = 0.0;
    }
    double acc[4] = {0, 0, 0, 0};
    for (long b = b0; b < b1; b++) {
        const float *mean = s->logits + b * s->logits_row;
        const float *act = s->action_f + b * s->action_stride;
        float logp = 0.0f;
        for (long a = 0; a < A; a++) {
            z[a] = (act[a] - mean[a * s->logits_col]) * inv_std[a];
            logp += (-0.5f * (z[a] * z[a]) - s->logstd[a]) - LOG_SQRT_2PI;
        }
        const float g = ppo_row_terms(s, b, logp, acc);
        float *gm = s->grad_logits + b * s->grad_row;
        for (long a = 0; a < A; a++) {
            gm[a * s->grad_col] = g * z[a] * inv_std[a];
            gls[a] += (double)(g * (z[a] * z[a] - 1.0f));
        }
    }
    sums[0] = acc[0], sums[1] = acc[1], sums[2] = (double)h * (double)(b1 - b0);
    sums[3] = acc[2], sums[4] = acc[3];
}

/* Rows [b0, b1): their gradients, and their five statistic sums into sums (in double).
 * Returns the index of the first row whose action is out of range, or -1. */
static long loss_rows(const Loss *s, long b0, long b1, double *sums) {
    const float ent_scale = (float)s->ent_coef / (float)s->n;
    double acc[4] = {0, 0, 0, 0}, sum_h = 0;
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
        const float g = ppo_row_terms(s, b, logp[act], acc);
        sum_h += h;
        float *gl = s->grad_logits + b * s->grad_row;
        for (long a = 0; a < s->actions; a++) {
            const float p = prob[a];
            gl[a * s->grad_col] = ent_scale * (p * logp[a] + p * h) - g * p + (a == act ? g : 0.0f);
        }
    }
    sums[0] = acc[0], sums[1] = acc[1], sums[2] = sum_h, sums[3] = acc[2], sums[4] = acc[3];
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
    if (s->gaussian) { /* one thread: the MLP update's minibatches are tens of rows */
        double gls[MAX_GAUSSIAN], total[5];
        (void)threads;
        gaussian_rows(s, 0, s->n, total, gls);
        for (long a = 0; a < s->actions; a++)
            s->grad_logstd[a] = (float)gls[a] - (float)s->ent_coef;
        for (int i = 0; i < 5; i++) s->stats[i] = (float)(total[i] / s->n);
        return -1;
    }
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

#endif /* RLPERF_LOSS_ROWS_H */
