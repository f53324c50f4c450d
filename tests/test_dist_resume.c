/* `cinder train --ddp` interrupted and resumed under `mpirun -np 2`: a 2-rank run of the MLP on
 * 256 Fashion-MNIST images (3 epochs of 4 batches of 64, 32 per rank) stopped by
 * --stop-after-steps and resumed with the command it prints ends with a --save file
 * byte-identical to the uninterrupted 2-rank run's (the oracle: with two ranks the sum of the
 * all-reduce is the same in every run, so the bits are), and prints the same epoch lines (SGD with
 * momentum and a cosine schedule, stopped between an epoch's last step and its evaluation). A
 * SIGINT sent to rank 1 alone, mid-epoch, stops both ranks before the same step, and that
 * checkpoint resumes to the same bits too. Rank 0 alone writes the checkpoint. The misuses: a
 * 2-rank checkpoint resumed in one process, and ranks that read different files under the
 * --resume name. This program runs mpirun itself (MPIEXEC). Skips (77) without Fashion-MNIST. */
#define _POSIX_C_SOURCE 200809L

#include "harness.h"

#include "cli_run.h"

#define DATA "/usr/share/datasets/fashion-mnist"
#define RUN_ARGS "train --threads 1 --epochs 3 --limit 256 --test-limit 50 --batch 64"
#define SGD      RUN_ARGS " --schedule cosine"

static char dir[64];

static const char *path_in(const char *name) {
    static char paths[8][128];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) break;
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* The line "epoch E/3: train loss ..., test accuracy ..." of out without its time, into buf. */
static int epoch_line(const char *out, int e, char *buf, size_t size) {
    char head[32];
    snprintf(head, sizeof head, "epoch %d/3: train loss", e);
    const char *p = out ? strstr(out, head) : NULL, *end = p ? strstr(p, ", epoch time") : NULL;
    if (!end) return 0;
    snprintf(buf, size, "%.*s", (int)(end - p), p);
    return 1;
}

/* mpirun -np 2 cinder <args> in dir (so that a checkpoint without --save lands there), stderr
 * merged into the output. */
static run_result ddp(const char *args) {
    char cmd[10240];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' -np 2 --oversubscribe '%s' %s --ddp 2>&1", dir,
             getenv("MPIEXEC"), cli_path, args);
    return run_shell(cmd);
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, what)); p++) n++;
    return n;
}

/* `args` uninterrupted, then stopped after `stop` steps and resumed: the same --save bits and
 * the same last epoch line. `cut` keeps the stopped run's checkpoint. */
static void stopped_and_resumed(const char *args, int stop, const char *cut) {
    char a[4096], want[256] = "", got[256] = "";
    const char *whole = path_in("whole.safetensors"), *res = path_in("resumed.safetensors");
    snprintf(a, sizeof a, "%s --save '%s'", args, whole);
    run_result full = ddp(a);
    CHECK(full.status == 0);
    CHECK(epoch_line(full.out, 3, want, sizeof want));
    snprintf(a, sizeof a, "%s --save '%s' --stop-after-steps %d", args, cut, stop);
    run_result leg = ddp(a);
    CHECK(leg.status == 130);
    char at[64];
    snprintf(at, sizeof at, "(step %d of 12); saved the run to ", stop);
    CHECK(leg.out && strstr(leg.out, at));
    CHECK(count(leg.out, "saved the run to") == 1); /* rank 0 alone writes it */
    CHECK(leg.out && strstr(leg.out, "resume with: mpirun -np 2 cinder train "));
    snprintf(a, sizeof a, "%s --resume '%s' --save '%s'", args, cut, res);
    run_result back = ddp(a);
    CHECK(back.status == 0);
    CHECK(back.out && strstr(back.out, "resuming from "));
    CHECK(epoch_line(back.out, 3, got, sizeof got) && strcmp(got, want) == 0);
    CHECK(same_file(whole, res));
    if (th_checks_failed)
        fprintf(stderr, "whole:\n%s\nstopped:\n%s\nresumed:\n%s\n", full.out ? full.out : "",
                leg.out ? leg.out : "", back.out ? back.out : "");
    remove(res);
    free(full.out);
    free(leg.out);
    free(back.out);
}

static void test_stopped_before_evaluation(void) {
    stopped_and_resumed(SGD, 4, path_in("sgd-cut.safetensors"));
}

/* SIGINT to rank 1 alone, once rank 0 has logged its first step (11 steps and 3 evaluations
 * before the end): both ranks stop before the same step (rank 0 says it was interrupted too),
 * and the checkpoint resumes to the uninterrupted bits (whole.safetensors of
 * test_stopped_before_evaluation). */
static void test_signal_to_one_rank(void) {
    char cmd[10240], a[4096];
    const char *log = path_in("run.jsonl"), *cut = path_in("signal-cut.safetensors");
    const char *res = path_in("resumed.safetensors");
    remove(log);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' -np 2 --oversubscribe sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; "
             "then (while [ \"$(cat %s 2>/dev/null | wc -l)\" -lt 2 ]; do sleep 0.02; done; "
             "kill -INT $$) & fi; exec \"$0\" \"$@\"' '%s' " SGD " --ddp --log %s --save %s 2>&1",
             dir, getenv("MPIEXEC"), log, cli_path, log, cut);
    run_result r = run_shell(cmd);
    CHECK(r.status == 130);
    CHECK(r.out && strstr(r.out, "interrupted by SIGINT at epoch "));
    CHECK(count(r.out, "saved the run to") == 1);
    snprintf(a, sizeof a, SGD " --resume '%s' --save '%s'", cut, res);
    run_result back = ddp(a);
    CHECK(back.status == 0);
    CHECK(same_file(path_in("whole.safetensors"), res));
    if (th_checks_failed)
        fprintf(stderr, "%s\n%s\n", r.out ? r.out : "", back.out ? back.out : "");
    remove(log);
    remove(res);
    free(r.out);
    free(back.out);
}

static void test_misuse(void) {
    char cmd[10240];
    /* a 2-rank checkpoint in one process */
    snprintf(cmd, sizeof cmd, "'%s' " SGD " --resume '%s' 2>&1", cli_path,
             path_in("sgd-cut.safetensors"));
    run_result r = run_shell(cmd);
    CHECK(r.status == 1);
    CHECK(r.out && strstr(r.out, "the run trained data-parallel over 2 ranks, this one has 1; "
                                 "resume it as it ran: `mpirun -np 2 cinder train --ddp ...`"));
    free(r.out);
    /* rank 1 reads another checkpoint than rank 0 (of the same settings: one process's, stopped
     * after 2 steps; the signal's may be the same bits as sgd-cut's, as it may stop at the same
     * step): both stop, saying so */
    snprintf(cmd, sizeof cmd, "'%s' " SGD " --stop-after-steps 2 --save '%s' 2>&1", cli_path,
             path_in("one-cut.safetensors"));
    r = run_shell(cmd);
    CHECK(r.status == 130);
    free(r.out);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' -np 2 --oversubscribe sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; "
             "then f=one-cut.safetensors; else f=sgd-cut.safetensors; fi; exec \"$0\" " SGD
             " --ddp --resume $f' '%s' 2>&1", dir, getenv("MPIEXEC"), cli_path);
    r = run_shell(cmd);
    CHECK(r.status != 0);
    CHECK(r.out && strstr(r.out, "the ranks read different files under that name"));
    CHECK(r.out && strstr(r.out, "aborts the job"));
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
    snprintf(dir, sizeof dir, "/tmp/cinder-dist-resume-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_stopped_before_evaluation);
    RUN(test_signal_to_one_rank);
    RUN(test_misuse);
    const char *files[] = {"whole.safetensors", "sgd-cut.safetensors", "signal-cut.safetensors",
                           "one-cut.safetensors"};
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) remove(path_in(files[k]));
    rmdir(dir);
    return th_finish();
}
