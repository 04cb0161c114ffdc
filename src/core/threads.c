/* threads.c -- a minimal fork-join over index ranges (pthreads). */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

#define MAX_THREADS 256

int nvfp4_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    return (int)n;
}

typedef struct job {
    nvfp4_range_fn fn;
    void *ctx;
    int64_t begin, end;
} job;

static void *run_job(void *p)
{
    job *j = p;
    j->fn(j->ctx, j->begin, j->end);
    return NULL;
}

nvfp4_status nvfp4_parallel_for(int64_t n, int64_t grain, int nthreads, nvfp4_range_fn fn,
                                void *ctx)
{
    if (n <= 0) return NVFP4_OK;
    if (grain < 1) grain = 1;
    int64_t t = nthreads > 0 ? nthreads : nvfp4_default_threads();
    if (t > MAX_THREADS) t = MAX_THREADS;
    if (t > (n + grain - 1) / grain) t = (n + grain - 1) / grain;
    if (t <= 1) {
        fn(ctx, 0, n);
        return NVFP4_OK;
    }
    job jobs[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    nvfp4_status st = NVFP4_OK;
    for (int64_t i = 0; i < t; i++) {
        jobs[i].fn = fn;
        jobs[i].ctx = ctx;
        jobs[i].begin = n * i / t;
        jobs[i].end = n * (i + 1) / t;
    }
    /* Chunk 0 runs on the calling thread. */
    for (int64_t i = 1; i < t; i++)
        started[i] = pthread_create(&tids[i], NULL, run_job, &jobs[i]) == 0;
    run_job(&jobs[0]);
    for (int64_t i = 1; i < t; i++) {
        if (started[i])
            pthread_join(tids[i], NULL);
        else
            run_job(&jobs[i]); /* could not start: do it here, result stays complete */
    }
    return st;
}
