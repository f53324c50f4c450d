/* `cinder train --ddp` under `mpirun -np 2`: one epoch of the MLP on 1024 Fashion-MNIST images
 * with batches of 128 split 64 + 64 over two ranks saves the same parameters as one process
 * training on the batches of 128 (to 2e-5 of max(1, |w|): the f32 rounding of averaging two
 * half-batch means instead of one mean), prints the same loss (averaged over the ranks), and only
 * rank 0 prints the epoch line and writes --save; the test accuracy the ranks print (each
 * evaluating half the test set) is the one `cinder eval` computes from the saved parameters
 * alone. The misuse: a batch that the ranks cannot share (--ddp with --resume:
 * test_dist_resume.c). This program is not an MPI program itself: it runs mpirun, found in
 * MPIEXEC (CMake's MPIEXEC_EXECUTABLE). Skips (77) without the Fashion-MNIST files. */
#define _POSIX_C_SOURCE 200809L

#include <time.h>

#include "harness.h"

#include "cli_run.h"

#define DATA "/usr/share/datasets/fashion-mnist"
#define RUN_ARGS \
    "train --threads 1 --epochs 1 --limit 1024 --test-limit 200 --batch 128 --schedule constant"

static char dir[64];

static void compare_saved(const char *one, const char *two) {
    cn_safetensors *a = NULL, *b = NULL;
    CHECK(cn_safetensors_load(one, cn_cpu(), &a) == CN_OK);
    CHECK(cn_safetensors_load(two, cn_cpu(), &b) == CN_OK);
    if (!a || !b) return;
    CHECK(cn_safetensors_count(a) == cn_safetensors_count(b) && cn_safetensors_count(a) > 0);
    double worst = 0;
    for (int i = 0; i < cn_safetensors_count(a); i++) {
        const char *name = cn_safetensors_name(a, i);
        cn_tensor *ta = cn_safetensors_get(a, name), *tb = cn_safetensors_get(b, name);
        CHECK(ta && tb && cn_numel(ta) == cn_numel(tb));
        if (!ta || !tb || cn_numel(ta) != cn_numel(tb)) {
            cn_release(ta);
            cn_release(tb);
            continue;
        }
        int64_t n = cn_numel(ta);
        double *va = malloc(sizeof *va * (size_t)n), *vb = malloc(sizeof *vb * (size_t)n);
        CHECK(th_read(ta, va) == n && th_read(tb, vb) == n);
        for (int64_t k = 0; k < n; k++) {
            double d = fabs(va[k] - vb[k]) / (fabs(va[k]) > 1 ? fabs(va[k]) : 1);
            if (d > worst) worst = d;
        }
        free(va);
        free(vb);
        cn_release(ta);
        cn_release(tb);
    }
    printf("largest difference between the one-process and the 2-rank parameters: %.3g\n", worst);
    CHECK(worst <= 2e-5);
    cn_safetensors_free(a);
    cn_safetensors_free(b);
}

static const char *epoch_line(const char *out) {
    return out ? strstr(out, "epoch 1/1: train loss") : NULL;
}

static void test_ddp_run_matches_one_process(void) {
    char cmd[10240], one[128], two[128];
    snprintf(one, sizeof one, "%s/one.safetensors", dir);
    snprintf(two, sizeof two, "%s/two.safetensors", dir);
    snprintf(cmd, sizeof cmd, "'%s' " RUN_ARGS " --save '%s' 2>/dev/null", cli_path, one);
    run_result r1 = run_shell(cmd);
    CHECK(r1.status == 0);
    snprintf(cmd, sizeof cmd, "'%s' -np 2 --oversubscribe '%s' " RUN_ARGS " --ddp --save '%s' "
             "2>/dev/null", getenv("MPIEXEC"), cli_path, two);
    run_result r2 = run_shell(cmd);
    CHECK(r2.status == 0);
    if (r2.status != 0) fprintf(stderr, "%s\n", r2.out ? r2.out : "");
    CHECK(r2.out &&
          strstr(r2.out, "data-parallel over 2 ranks (64 images of each batch per rank)"));
    /* rank 0 alone prints; the loss it prints is the mean over the ranks, the whole batch's */
    const char *l1 = epoch_line(r1.out), *l2 = epoch_line(r2.out);
    CHECK(l1 && l2 && !strstr(l2 + 1, "epoch 1/1: train loss"));
    CHECK(l1 && l2 && strncmp(l1, l2, strlen("epoch 1/1: train loss 1.234")) == 0);
    if (r1.status == 0 && r2.status == 0) compare_saved(one, two);
    /* the accuracy the 2 ranks printed (each evaluated half the test set, the counts summed) is
     * the one `cinder eval` computes alone on the whole set from the parameters they saved */
    snprintf(cmd, sizeof cmd, "'%s' eval --threads 1 --test-limit 200 --load '%s' 2>/dev/null",
             cli_path, two);
    run_result e = run_shell(cmd);
    const char *acc = e.out ? strstr(e.out, "test accuracy ") : NULL;
    CHECK(e.status == 0 && acc && l2);
    if (acc && l2) {
        char want[32];
        snprintf(want, sizeof want, "%.20s", acc); /* "test accuracy 0.6450" */
        CHECK(strstr(l2, want) != NULL);
    }
    free(e.out);
    remove(one);
    remove(two);
    free(r1.out);
    free(r2.out);
}

/* CINDER_TRAIN_PROFILE=1: each rank prints where its steps' time went (step_profile.h), with the
 * count of the gradient reductions that backward started itself: for the MLP, both of its buckets
 * (the output layers' gradients, then the first weight's alone) start inside backward; one process
 * prints the same line without the reductions; without the variable nothing is printed. */
static void test_ddp_profile(void) {
    char cmd[10240];
    snprintf(cmd, sizeof cmd, "CINDER_TRAIN_PROFILE=1 '%s' -np 2 --oversubscribe '%s' " RUN_ARGS
             " --ddp 2>&1 >/dev/null", getenv("MPIEXEC"), cli_path);
    run_result r = run_shell(cmd);
    CHECK(r.status == 0);
    for (int rank = 0; rank < 2; rank++) {
        char want[64];
        snprintf(want, sizeof want, "profile rank %d epoch 1: 8 steps, wall ", rank);
        const char *line = r.out ? strstr(r.out, want) : NULL;
        CHECK(line != NULL);
        const char *end = line ? strchr(line, '\n') : NULL;
        const char *started = line ? strstr(line, "reductions started in backward 2.00 of 2.00 a "
                                            "step") : NULL;
        CHECK(started && end && started < end);
        double fw = 0, bw = 0;
        const char *f = line ? strstr(line, " forward ") : NULL;
        const char *b = line ? strstr(line, " backward ") : NULL;
        CHECK(f && sscanf(f, " forward %lf", &fw) == 1 && fw > 0);
        CHECK(b && sscanf(b, " backward %lf", &bw) == 1 && bw > 0);
    }
    if (th_checks_failed) fprintf(stderr, "%s\n", r.out ? r.out : "");
    free(r.out);
    snprintf(cmd, sizeof cmd, "CINDER_TRAIN_PROFILE=1 '%s' " RUN_ARGS " 2>&1 >/dev/null", cli_path);
    r = run_shell(cmd);
    CHECK(r.status == 0 && r.out && strstr(r.out, "profile rank 0 epoch 1: 8 steps, wall "));
    CHECK(r.out && !strstr(r.out, "reductions started"));
    free(r.out);
    snprintf(cmd, sizeof cmd, "'%s' " RUN_ARGS " 2>&1", cli_path);
    r = run_shell(cmd);
    CHECK(r.status == 0 && r.out && !strstr(r.out, "profile rank"));
    free(r.out);
}

static void test_ddp_misuse(void) {
    char cmd[10240];
    snprintf(cmd, sizeof cmd, "'%s' -np 2 --oversubscribe '%s' " RUN_ARGS " --batch 127 --ddp 2>&1",
             getenv("MPIEXEC"), cli_path);
    run_result r = run_shell(cmd);
    CHECK(r.status != 0);
    CHECK(r.out && strstr(r.out, "--batch 127 is not a multiple of the 2 ranks"));
    free(r.out);
}

/* A rank that fails (here: rank 1 cannot read its data) stops the whole job, naming itself,
 * while rank 0 waits for it in cn_ddp_new, instead of leaving rank 0 waiting until the timeout. */
static void test_failing_rank_stops_the_job(void) {
    char cmd[10240];
    snprintf(cmd, sizeof cmd,
             "'%s' -np 2 --oversubscribe sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then "
             "d=/nonexistent; else d=" DATA "; fi; exec \"$0\" " RUN_ARGS " --ddp --data $d' "
             "'%s' 2>&1", getenv("MPIEXEC"), cli_path);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_result r = run_shell(cmd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK(r.status != 0);
    CHECK(s < 60);
    CHECK(r.out && strstr(r.out, "cannot load Fashion-MNIST"));
    CHECK(r.out && strstr(r.out, "cinder: rank 1 aborts the job"));
    if (th_checks_failed) fprintf(stderr, "%s\n", r.out ? r.out : "");
    free(r.out);
}

int main(void) {
    if (!find_cli() || !getenv("MPIEXEC")) {
        fprintf(stderr, "the cinder program or MPIEXEC is missing\n");
        return 1;
    }
    if (access(DATA "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("skipped: no Fashion-MNIST in " DATA " (apt-get install dataset-fashion-mnist)\n");
        return 77;
    }
    snprintf(dir, sizeof dir, "/tmp/cinder-dist-cli-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_ddp_run_matches_one_process);
    RUN(test_ddp_profile);
    RUN(test_ddp_misuse);
    RUN(test_failing_rank_stops_the_job);
    rmdir(dir);
    return th_finish();
}
