/* `cinder train` interrupted and resumed, run as a user runs it, on a small Fashion-MNIST written
 * here as IDX files (96 training and 32 test images): a run stopped by --stop-after-steps (which
 * raises SIGINT in the process, through the real handler) and resumed with the command it prints
 * ends with a --save file byte-identical to an uninterrupted run's, and prints the same epoch
 * lines (SGD with momentum and AdamW, the MLP and the CNN, stopped mid-epoch and between an
 * epoch's last step and its evaluation); a SIGINT sent from outside to a running process
 * saves a checkpoint that resumes; SIGINT and SIGTERM together exit at once and save nothing;
 * --resume refuses contradicting options, model-only files and files that are not there. The
 * oracle is the uninterrupted run's output and files. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "idx_file.h"
#include "harness.h"

static char dir[] = "/tmp/cinder_test_resume_XXXXXX";

static const char *path_in(const char *name) {
    static char paths[8][4300];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

/* n images of 28x28 pixels, pixel k of image i being (13 i + 7 k + (i % 10) k / 50) % 256 (so
 * the classes differ), and labels i % 10. */
static int write_idx(const char *name, int n, int images) {
    static uint8_t data[96 * 784];
    if (n > 96) return -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < (images ? 784 : 1); k++)
            data[i * (images ? 784 : 1) + k] =
                (uint8_t)(images ? (13 * i + 7 * k + (i % 10) * k / 50) % 256 : i % 10);
    const uint32_t dims[3] = {(uint32_t)n, 28, 28};
    return th_write_idx(path_in(name), dims, images ? 3 : 1, data);
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* The whole file, or NULL; *len its size. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2 + 1);
            if (!bigger) break;
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = n;
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

/* The epoch lines of a run's output, without their times: "epoch 2/3: train loss 1.5454, test
 * accuracy 0.9062" for each epoch, joined. */
static void epoch_lines(const char *out, char *buf, size_t size) {
    buf[0] = '\0';
    for (const char *p = out; p && (p = strstr(p, "epoch ")); p++) {
        const char *colon = strstr(p, ": train loss ");
        const char *end = strstr(p, ", epoch time");
        const char *nl = strchr(p, '\n');
        if (!colon || !end || (nl && end > nl) || colon > end) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%.*s\n", (int)(end - p), p);
    }
}

/* The metadata `key` of the safetensors file at path, as a number (-1 when absent). */
static long long metadata_number(const char *path, const char *key) {
    cn_safetensors *h = NULL;
    long long v = -1;
    if (cn_safetensors_load(path, cn_cpu(), &h) == CN_OK) {
        const char *text = cn_safetensors_metadata(h, key);
        if (text) v = strtoll(text, NULL, 10);
    }
    cn_safetensors_free(h);
    cn_clear_error();
    return v;
}

/* The command after "resume with: " in out, with "cinder" replaced by the built binary and
 * "2>&1" appended, into cmd; 0 when there is none. */
static int resume_command(const char *out, char *cmd, size_t size) {
    const char *at = out ? strstr(out, "resume with: cinder train ") : NULL;
    if (!at) return 0;
    at += strlen("resume with: cinder ");
    const char *nl = strchr(at, '\n');
    snprintf(cmd, size, "'%s' %.*s 2>&1", cli_path, (int)(nl ? nl - at : (long)strlen(at)), at);
    return 1;
}

/* ---- stopped and resumed runs end with the same bits ----------------------------------------- */

/* `args` uninterrupted, then stopped after each of stops[] steps in turn (each resumed with the
 * command the previous stop printed), then resumed to the end: the final --save files are
 * byte-identical and the epoch lines after each resume are the uninterrupted run's. */
static void stopped_and_resumed(const char *args, const int *stops, int n_stops) {
    char cmd[16384], want[4096], got[4096];
    const char *whole = path_in("whole.safetensors"), *cut = path_in("cut.safetensors");
    remove(whole);
    remove(cut);
    snprintf(cmd, sizeof cmd, "train --data '%s' %s --save '%s'", dir, args, whole);
    run_result full = run_cli(cmd, 1);
    CHECK(full.status == 0);
    epoch_lines(full.out, want, sizeof want);
    CHECK(strstr(want, "epoch 1/") != NULL);
    /* the first leg, stopped */
    snprintf(cmd, sizeof cmd, "'%s' train --data '%s' %s --save '%s' --stop-after-steps %d 2>&1",
             cli_path, dir, args, cut, stops[0]);
    run_result leg = run_shell(cmd);
    long long at = stops[0];
    for (int s = 1; s <= n_stops; s++) {
        CHECK(leg.status == 130);
        CHECK(leg.out && strstr(leg.out, "interrupted by SIGINT at epoch "));
        CHECK(metadata_number(cut, "global_step") == at);
        char resume[16384];
        int found = resume_command(leg.out, resume, sizeof resume);
        CHECK(found);
        if (!found) {
            fprintf(stderr, "output of the stopped run:\n%s\n", leg.out ? leg.out : "");
            break;
        }
        if (s < n_stops) { /* stop the resumed run once more */
            size_t len = strlen(resume) - strlen(" 2>&1");
            snprintf(resume + len, sizeof resume - len, " --stop-after-steps %d 2>&1", stops[s]);
            at += stops[s];
        }
        free(leg.out);
        leg = run_shell(resume);
        CHECK(leg.out && strstr(leg.out, "resuming from "));
        /* every epoch line printed after the resume is the uninterrupted run's */
        epoch_lines(leg.out, got, sizeof got);
        CHECK(strstr(want, got) != NULL);
    }
    CHECK(leg.status == 0);
    int same = same_file(whole, cut);
    printf("  %s, stopped %d time%s: %s\n", args, n_stops, n_stops > 1 ? "s" : "",
           same ? "the same bytes" : "DIFFERENT bytes");
    CHECK(same);
    if (!same && leg.out) fprintf(stderr, "last leg:\n%s\n", leg.out);
    free(full.out);
    free(leg.out);
}

/* 6 steps an epoch: stopped after 6 (the epoch's last step, before its evaluation), then 5 more
 * (mid-epoch), then to the end */
static void test_sgd_mlp_stopped_twice_ends_with_the_same_bits(void) {
    stopped_and_resumed("--epochs 3 --batch 16 --optimizer sgd --seed 7", (const int[]){6, 5}, 2);
}

static void test_adamw_mlp_stopped_mid_epoch_ends_with_the_same_bits(void) {
    stopped_and_resumed("--epochs 2 --batch 16 --optimizer adamw --schedule constant",
                        (const int[]){4}, 1);
}

static void test_adamw_cnn_stopped_mid_epoch_ends_with_the_same_bits(void) {
    stopped_and_resumed("--model cnn --epochs 2 --batch 16 --limit 48 --test-limit 16 "
                        "--optimizer adamw",
                        (const int[]){4}, 1);
}

/* ---- what --resume refuses ------------------------------------------------------------------- */

static void test_resume_refuses_contradictions_model_files_and_missing_files(void) {
    char cmd[9000];
    const char *state = path_in("state.safetensors"), *model = path_in("model.safetensors");
    snprintf(cmd, sizeof cmd,
             "train --data '%s' --epochs 2 --batch 32 --save '%s' "
             "--stop-after-steps 1",
             dir, state);
    run_result r = run_cli(cmd, 1);
    CHECK(r.status == 130);
    free(r.out);
    snprintf(cmd, sizeof cmd, "train --data '%s' --resume '%s' --lr 0.5", dir, state);
    r = run_cli(cmd, 1);
    CHECK(r.status == 2);
    CHECK(r.out && strstr(r.out, "the run was started with --lr 0.1, not --lr 0.5; drop --lr"));
    free(r.out);
    snprintf(cmd, sizeof cmd, "train --data '%s' --resume '%s' --model cnn", dir, state);
    r = run_cli(cmd, 1);
    CHECK(r.status == 2);
    CHECK(r.out && strstr(r.out, "--model mlp, not --model cnn"));
    free(r.out);
    /* the same value given again is fine: the run goes on to its end */
    snprintf(cmd, sizeof cmd, "train --data '%s' --resume '%s' --epochs 2 --save '%s'", dir, state,
             model);
    r = run_cli(cmd, 1);
    CHECK(r.status == 0);
    free(r.out);
    snprintf(cmd, sizeof cmd, "train --data '%s' --resume '%s'", dir, model);
    r = run_cli(cmd, 1);
    CHECK(r.status == 1);
    CHECK(r.out && strstr(r.out, "holds a model only, not a run's training state"));
    free(r.out);
    snprintf(cmd, sizeof cmd, "train --data '%s' --resume '%s'", dir, path_in("nothing"));
    r = run_cli(cmd, 1);
    CHECK(r.status == 1);
    CHECK(r.out && strstr(r.out, "cannot resume from") && strstr(r.out, "nothing"));
    free(r.out);
}

/* Without --save the checkpoint goes to cinder-interrupted.safetensors in the current directory,
 * and the message says so. */
static void test_without_save_the_checkpoint_goes_to_the_default_path(void) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' train --data . --epochs 1 --batch 32 "
             "--stop-after-steps 2 2>&1",
             dir, cli_path);
    run_result r = run_shell(cmd);
    const char *file = path_in("cinder-interrupted.safetensors");
    CHECK(r.status == 130);
    CHECK(r.out && strstr(r.out, "saved the run to cinder-interrupted.safetensors"));
    CHECK(r.out && strstr(r.out, "--resume cinder-interrupted.safetensors"));
    CHECK(metadata_number(file, "global_step") == 2);
    remove(file);
    free(r.out);
}

/* ---- signals from outside -------------------------------------------------------------------- */

typedef struct child {
    pid_t pid;
    int out; /* its stdout, a pipe */
} child;

/* Starts `cinder train <args...>` with stdout to a pipe and stderr to err_path. */
static child spawn(const char *const *args, const char *err_path) {
    child c = {-1, -1};
    int fds[2];
    if (pipe(fds) != 0) return c;
    pid_t pid = fork();
    if (pid == 0) {
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fds[1], STDOUT_FILENO);
        if (err >= 0) dup2(err, STDERR_FILENO);
        close(fds[0]);
        char *argv[32];
        int n = 0;
        argv[n++] = cli_path;
        for (; args[n - 1] && n < 31; n++)
            argv[n] = (char *)args[n - 1];
        argv[n] = NULL;
        execv(cli_path, argv);
        _exit(127);
    }
    close(fds[1]);
    c.pid = pid;
    c.out = fds[0];
    return c;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads the child's stdout until `text` appears or `seconds` pass; 1 when it appeared. */
static int wait_for_output(child *c, const char *text, double seconds) {
    static char seen[1 << 16];
    size_t len = 0;
    double deadline = now_s() + seconds;
    while (now_s() < deadline) {
        struct pollfd p = {c->out, POLLIN, 0};
        int r = poll(&p, 1, 200);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        ssize_t n = read(c->out, seen + len, sizeof seen - 1 - len);
        if (n <= 0) return 0; /* it ended */
        len += (size_t)n;
        seen[len] = '\0';
        if (strstr(seen, text)) return 1;
        if (len > sizeof seen / 2) { /* keep the tail */
            memmove(seen, seen + len - 1024, 1024);
            len = 1024;
        }
    }
    return 0;
}

/* Waits up to `seconds` for the child to end (then kills it); its wait status, or -1. */
static int wait_exit(child *c, double seconds) {
    double deadline = now_s() + seconds;
    int status = 0;
    /* keep its stdout drained so it never blocks on a full pipe */
    char sink[4096];
    fcntl(c->out, F_SETFL, O_NONBLOCK);
    while (now_s() < deadline) {
        while (read(c->out, sink, sizeof sink) > 0) {
        }
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid) {
            close(c->out);
            return status;
        }
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &status, 0);
    close(c->out);
    fprintf(stderr, "the run did not end within %.0f s; killed\n", seconds);
    return -1;
}

/* A long run (10000 epochs of 6 steps) gets SIGINT once its first epoch line is out: it exits 130
 * after saving a checkpoint that names where it stopped, and the checkpoint resumes (two more
 * steps, then stopped again, one step further on). */
static void test_sigint_from_outside_saves_a_checkpoint_that_resumes(void) {
    const char *save = path_in("outside.safetensors"), *err = path_in("outside.err");
    const char *args[] = {"train", "--data",       dir,  "--epochs", "10000", "--batch",
                          "16",    "--test-limit", "16", "--save",   save,    NULL};
    child c = spawn(args, err);
    CHECK(c.pid > 0);
    if (c.pid <= 0) return;
    int started = wait_for_output(&c, "epoch 1/10000:", 120);
    CHECK(started);
    kill(c.pid, SIGINT);
    int status = wait_exit(&c, 120);
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 130);
    char *text = slurp(err, NULL);
    CHECK(text && strstr(text, "interrupted by SIGINT at epoch "));
    CHECK(text && strstr(text, "resume with: cinder train --data"));
    free(text);
    long long step = metadata_number(save, "global_step");
    printf("  stopped at step %lld\n", step);
    CHECK(step >= 6); /* after the first epoch */
    char cmd[9000];
    snprintf(cmd, sizeof cmd,
             "train --data '%s' --test-limit 16 --save '%s' --resume '%s' "
             "--stop-after-steps 2",
             dir, save, save);
    run_result r = run_cli(cmd, 1);
    CHECK(r.status == 130);
    CHECK(r.out && strstr(r.out, "resuming from "));
    CHECK(metadata_number(save, "global_step") == step + 2);
    free(r.out);
    remove(err);
}

/* SIGINT and SIGTERM delivered together (sent while the process is stopped, so both are pending
 * when it continues): the one handled second exits at once, 128 + its number, with nothing
 * saved and no temporary file left. */
static void test_a_second_signal_exits_at_once_saving_nothing(void) {
    const char *save = path_in("twice.safetensors"), *err = path_in("twice.err");
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.tmp", save);
    remove(save);
    const char *args[] = {"train", "--data",       dir,  "--epochs", "10000", "--batch",
                          "16",    "--test-limit", "16", "--save",   save,    NULL};
    child c = spawn(args, err);
    CHECK(c.pid > 0);
    if (c.pid <= 0) return;
    CHECK(wait_for_output(&c, "epoch 1/10000:", 120));
    kill(c.pid, SIGSTOP);
    kill(c.pid, SIGINT);
    kill(c.pid, SIGTERM);
    kill(c.pid, SIGCONT);
    int status = wait_exit(&c, 120);
    int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    printf("  exit status %d\n", code);
    CHECK(code == 130 || code == 143);
    char *text = slurp(err, NULL);
    if (code != 130 && code != 143) printf("  its stderr:\n%s\n", text ? text : "(none)");
    CHECK(text && strstr(text, "interrupted again: stopping now, without saving a checkpoint"));
    CHECK(text && !strstr(text, "saved the run to"));
    free(text);
    CHECK(!exists(save));
    CHECK(!exists(tmp));
    remove(err);
}

/* A resumed run continues its --log: one start line per leg, and the step lines of both legs
 * together number every step of the run once, in order (2 epochs of 96 / 16 = 6 steps). */
static void test_a_resumed_run_continues_its_log(void) {
    char cmd[16384];
    const char *log = path_in("run.jsonl"), *cut = path_in("logged.safetensors");
    remove(log);
    remove(cut);
    snprintf(cmd, sizeof cmd,
             "'%s' train --data '%s' --epochs 2 --batch 16 --log '%s' --save '%s' "
             "--stop-after-steps 4 2>&1",
             cli_path, dir, log, cut);
    run_result leg = run_shell(cmd);
    CHECK(leg.status == 130);
    char resume[16384];
    CHECK(leg.out && resume_command(leg.out, resume, sizeof resume));
    free(leg.out);
    leg = run_shell(resume);
    CHECK(leg.status == 0);
    free(leg.out);
    size_t len = 0;
    char *text = slurp(log, &len);
    CHECK(text != NULL);
    int starts = 0, steps = 0, in_order = 1;
    for (char *line = text; text && line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (strstr(line, "\"event\":\"start\"")) starts++;
        const char *g = strstr(line, "\"global_step\":");
        if (strstr(line, "\"event\":\"step\"") && g) {
            steps++;
            in_order &= atoll(g + strlen("\"global_step\":")) == steps;
        }
        line = next;
    }
    CHECK(starts == 2);
    CHECK(steps == 12);
    CHECK(in_order);
    free(text);
}

int main(void) {
    if (!find_cli()) {
        fprintf(stderr, "the cinder program is not built next to the tests\n");
        return 1;
    }
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK(write_idx("train-images-idx3-ubyte", 96, 1) == 0);
    CHECK(write_idx("train-labels-idx1-ubyte", 96, 0) == 0);
    CHECK(write_idx("t10k-images-idx3-ubyte", 32, 1) == 0);
    CHECK(write_idx("t10k-labels-idx1-ubyte", 32, 0) == 0);
    RUN(test_sgd_mlp_stopped_twice_ends_with_the_same_bits);
    RUN(test_adamw_mlp_stopped_mid_epoch_ends_with_the_same_bits);
    RUN(test_adamw_cnn_stopped_mid_epoch_ends_with_the_same_bits);
    RUN(test_resume_refuses_contradictions_model_files_and_missing_files);
    RUN(test_without_save_the_checkpoint_goes_to_the_default_path);
    RUN(test_a_resumed_run_continues_its_log);
    RUN(test_sigint_from_outside_saves_a_checkpoint_that_resumes);
    RUN(test_a_second_signal_exits_at_once_saving_nothing);
    const char *files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte",  "t10k-labels-idx1-ubyte",
                           "whole.safetensors",       "cut.safetensors",
                           "state.safetensors",       "model.safetensors",
                           "outside.safetensors",     "twice.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        remove(path_in(files[i]));
    rmdir(dir);
    return th_finish();
}
