/* Faults in a distributed job: a rank that dies, one that stops joining, one that fails. Each
 * case runs this program under `mpirun -np 2` in a role (argv[1]) and checks how the job ends:
 *   kill   rank 1 kills itself (SIGKILL) between two collectives; the job must end within the
 *          bound, not hang, with the launcher naming rank 1 (Open MPI's mpirun stops the other
 *          ranks when one dies; were it not to, rank 0's collective would time out naming it).
 *   stuck  rank 1 skips a collective; rank 0's fails after its 1 s timeout with CN_ERR_BACKEND
 *          naming rank 1, every later collective fails at once (the group is broken), and the
 *          job still ends cleanly (both ranks finalize; exit 0).
 *   abort  rank 1 meets an error of its own and calls cn_dist_abort: the job ends, with the
 *          message naming rank 1, while rank 0 waits in a collective.
 * Run without arguments, it is the driver: it runs mpirun (MPIEXEC) for each role. */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <time.h>

#include "cinder/distributed.h"
#include "harness.h"

#include "cli_run.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the roles, under mpirun ----------------------------------------------------------------- */

static int role(const char *what) {
    if (cn_dist_init(CN_DIST_MPI) != CN_OK) {
        fprintf(stderr, "init: %s\n", cn_last_error());
        return 1;
    }
    int rank = cn_dist_rank();
    int64_t n = 4;
    cn_tensor *t = cn_ones(&n, 1, CN_F32, cn_cpu());
    CHECK(cn_dist_all_reduce(t, CN_DIST_SUM) == CN_OK);
    if (strcmp(what, "kill") == 0) {
        cn_dist_set_timeout(20);
        if (rank == 1) raise(SIGKILL);
        for (int k = 0; k < 1000; k++) cn_dist_all_reduce(t, CN_DIST_SUM);
        /* not reached when mpirun ends the job; if it does not, the timeout names rank 1 */
        fprintf(stderr, "rank 0: %s\n", cn_last_error());
        cn_release(t);
        return 3;
    }
    if (strcmp(what, "stuck") == 0) {
        cn_dist_set_timeout(1);
        if (rank == 0) {
            double t0 = now();
            CHECK_STATUS_FAILS(cn_dist_all_reduce(t, CN_DIST_SUM), CN_ERR_BACKEND,
                               "rank(s) 1 did not join this collective within 1 s");
            double waited = now() - t0;
            CHECK(waited >= 1 && waited < 10);
            CHECK_STATUS_FAILS(cn_dist_barrier(), CN_ERR_BACKEND, "the group is broken");
        } else {
            struct timespec ts = {2, 0};
            nanosleep(&ts, NULL); /* does not join rank 0's all_reduce */
        }
        cn_release(t);
        CHECK(cn_dist_finalize() == CN_OK);
        printf("rank %d: stuck role %s\n", rank, th_checks_failed ? "FAILED" : "passed");
        return th_checks_failed != 0;
    }
    /* abort */
    cn_dist_set_timeout(20);
    if (rank == 1) cn_dist_abort(5, "the data file of rank 1 is unreadable (a test)");
    cn_dist_all_reduce(t, CN_DIST_SUM);
    cn_release(t);
    return 3;
}

/* ---- the driver ------------------------------------------------------------------------------ */

static char self[4096];

static run_result launch(const char *what, double *seconds) {
    char cmd[10240];
    snprintf(cmd, sizeof cmd, "'%s' -np 2 --oversubscribe '%s' %s 2>&1", getenv("MPIEXEC"), self,
             what);
    double t0 = now();
    run_result r = run_shell(cmd);
    *seconds = now() - t0;
    return r;
}

static void test_killed_rank_ends_the_job_naming_it(void) {
    double s;
    run_result r = launch("kill", &s);
    printf("kill: mpirun ended after %.1f s with status %d\n", s, r.status);
    CHECK(r.status != 0);
    CHECK(s < 60);
    CHECK(r.out && strstr(r.out, "rank 1"));
    if (th_checks_failed) fprintf(stderr, "%s\n", r.out ? r.out : "");
    free(r.out);
}

static void test_stuck_rank_is_named_after_the_timeout(void) {
    double s;
    run_result r = launch("stuck", &s);
    CHECK(r.status == 0);
    CHECK(r.out && strstr(r.out, "rank 0: stuck role passed") &&
          strstr(r.out, "rank 1: stuck role passed"));
    if (th_checks_failed) fprintf(stderr, "%s\n", r.out ? r.out : "");
    free(r.out);
}

static void test_failing_rank_aborts_the_job(void) {
    double s;
    run_result r = launch("abort", &s);
    CHECK(r.status != 0);
    CHECK(s < 60);
    CHECK(r.out && strstr(r.out, "cinder: rank 1 aborts the job: the data file of rank 1"));
    if (th_checks_failed) fprintf(stderr, "%s\n", r.out ? r.out : "");
    free(r.out);
}

int main(int argc, char **argv) {
    if (argc > 1) return role(argv[1]);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || !getenv("MPIEXEC")) {
        fprintf(stderr, "cannot find this program or MPIEXEC\n");
        return 1;
    }
    self[n] = '\0';
    RUN(test_killed_rank_ends_the_job_naming_it);
    RUN(test_stuck_rank_is_named_after_the_timeout);
    RUN(test_failing_rank_aborts_the_job);
    return th_finish();
}
