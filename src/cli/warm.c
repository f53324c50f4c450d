/* The CPU GEMM's one-time start, made beside the data's loading (cli.h: cli_warm_begin).
 *
 * oneDNN generates its GEMM kernels in a process's first sgemm: 35-47 ms on the Zen 4 of
 * docs/benchmarks.md (issue 15, round 12), a tenth of the MLP's epoch. `cinder train` and `cinder
 * eval` read and decompress Fashion-MNIST on one thread first, so a second thread makes one small
 * product meanwhile, and is joined before the first step: the process ends no later, and its
 * first step does not pay for the kernels. The thread is always joined (cli_warm_end), so it never
 * outlives the command into exit, where the libraries' static state is torn down. */
#include <pthread.h>
#include <signal.h>

#include "cinder/cinder.h"
#include "cli/cli.h"

static void *warm_main(void *arg) {
    (void)arg;
    float a[64] = {0}, b[64] = {0}, c[64];
    /* an 8 x 8 x 8 product is enough for oneDNN to generate them all (measured: a later product
     * of another shape or transposition costs at most 0.3 ms more on its first call) */
    if (cn_cpu_gemm(CN_F32, 0, 0, 8, 8, 8, a, 8, b, 8, 0.0, c, 8) != CN_OK) cn_clear_error();
    return NULL;
}

void cli_warm_begin(cn_device device, cli_warm *w) {
    w->started = 0;
    if (device.backend != CN_BACKEND_CPU) return; /* the CPU's GEMM does not run */
    /* signals sent to the process stay with the command's own thread (cli_interrupt_install);
     * the faults a thread causes itself stay open, as in the CPU pool's workers */
    sigset_t async, saved;
    sigemptyset(&async);
    const int blocked[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2, SIGPIPE};
    for (size_t k = 0; k < sizeof blocked / sizeof *blocked; k++) sigaddset(&async, blocked[k]);
    pthread_sigmask(SIG_BLOCK, &async, &saved);
    w->started = pthread_create(&w->thread, NULL, warm_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

void cli_warm_end(cli_warm *w) {
    if (w->started) pthread_join(w->thread, NULL);
    w->started = 0;
}
