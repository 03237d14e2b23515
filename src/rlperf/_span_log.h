/* A kernel's span log: each timed phase's start and end, for the torch.profiler trace.
 *
 * The kernels time their phases themselves (CLOCK_MONOTONIC, the clock of Python's
 * perf_counter) and hand the profiler per-phase totals once per call. While a torch.profiler
 * window records (`rlperf profile --torch-profiler`), the caller also passes a log, and every
 * phase's (phase, start ns, end ns) goes into it; profiling/torch_trace.py writes them into
 * the exported trace as ranges with the sections' names. Without a log (NULL) nothing is
 * written: one branch per phase.
 *
 * Layout, int64: [0] spans logged (counted past the capacity, so the caller sees a shortfall),
 * [1] capacity, then `capacity` triples (phase, start, end). Called only from rlperf/native
 * (SpanLog), which sizes it. Needs <stdint.h> first.
 */
#ifndef RLPERF_SPAN_LOG_H
#define RLPERF_SPAN_LOG_H

static inline void span_log(int64_t *log, int64_t phase, int64_t start, int64_t end) {
    if (log == NULL) return;
    const int64_t k = log[0]++;
    if (k < log[1]) {
        int64_t *s = log + 2 + 3 * k;
        s[0] = phase, s[1] = start, s[2] = end;
    }
}

#endif /* RLPERF_SPAN_LOG_H */
