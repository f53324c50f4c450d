/* All-reduce bandwidth of the distributed layer's MPI engine, as nccl-tests reports it: for f32
 * tensors of 1 KB to 64 MB, the time of cn_dist_all_reduce (sum, blocking, its agreement step
 * included), the algorithm bandwidth (bytes / time) and the bus bandwidth (algbw * 2 (p - 1) / p,
 * what each link carries in a ring), on the ranks of an MPI launch:
 *
 *     mpirun -np 2 build/bench/dist_allreduce
 *
 * The smallest size's time approximates the latency term of docs/distributed.md's model, the
 * largest size's bus bandwidth its beta. Each size runs for about 0.2 s after a warm-up. */
#include <stdio.h>
#include <time.h>

#include "cinder/distributed.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
    if (cn_dist_init(CN_DIST_MPI) != CN_OK) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    int rank = cn_dist_rank(), world = cn_dist_world_size();
    if (rank == 0)
        printf("%12s %12s %12s %12s   (%d ranks, f32 sum)\n", "bytes", "time_us", "algbw_GB/s",
               "busbw_GB/s", world);
    for (int64_t bytes = 1024; bytes <= ((int64_t)64 << 20); bytes *= 4) {
        int64_t n = bytes / 4;
        cn_tensor *t = cn_ones(&n, 1, CN_F32, cn_cpu());
        /* warm-up, which also sizes the timed loop: the same count on every rank */
        double est = now();
        for (int w = 0; w < 3; w++) cn_dist_all_reduce(t, CN_DIST_SUM);
        est = (now() - est) / 3;
        cn_dist_reduce_scalar(&est, CN_DIST_MAX);
        int iters = est > 0 ? (int)(0.2 / est) : 1000;
        iters = iters < 3 ? 3 : iters > 2000 ? 2000 : iters;
        cn_dist_barrier();
        double start = now();
        for (int i = 0; i < iters; i++) cn_dist_all_reduce(t, CN_DIST_SUM);
        double elapsed = now() - start;
        double sec = elapsed / iters, alg = (double)bytes / sec / 1e9;
        if (rank == 0)
            printf("%12lld %12.1f %12.3f %12.3f\n", (long long)bytes, sec * 1e6, alg,
                   alg * 2.0 * (world - 1) / world);
        cn_release(t);
    }
    cn_dist_finalize();
    return 0;
}
