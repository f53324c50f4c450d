/* What `cinder train` and `cinder info` write for people and for programs, run on a small data
 * set that the test writes itself (100 training and 20 test images as IDX files, --data DIR):
 *   --log FILE    JSON Lines that a strict reader accepts, one start line, a step line per step
 *                 (ceil(100 / 32) = 4 per epoch) with the cosine learning rate computed here by
 *                 hand, and epoch lines that agree with the epoch lines on stdout and with the
 *                 mean of their steps' losses; a log that cannot be written fails before training;
 *   the summary   parameter counts computed here by hand for the mlp and the cnn;
 *   --threads N   shown in the run header and the log, overriding OMP_NUM_THREADS, the same
 *                 result for 1 and 3 threads, bad counts refused;
 *   info --json   one JSON object whose fields match the text output;
 *   --plot        anything but .svg refused before training;
 *   progress      on stderr: plain lines off a terminal, and on a terminal (a pseudo-terminal 120,
 *                 60 and 30 columns wide, and 0 columns with COLUMNS=45) one line redrawn with
 *                 '\r' that never reaches the last column, ended by a newline per epoch.
 * The binary is found next to the tests folder of the build tree. */
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cli_run.h"
#include "idx_file.h"
#include "harness.h"

/* ---- a strict JSON reader (RFC 8259), values as a tree ----------------------------------------
 */

typedef enum jv_kind { JV_NULL, JV_BOOL, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT } jv_kind;

typedef struct jv {
    jv_kind kind;
    double number;
    int boolean;
    char *string;
    struct jv *items; /* array items or object values */
    char **keys;      /* object keys */
    int n;
} jv;

typedef struct jp {
    const char *s;
    size_t i;
    int failed;
    char why[128];
} jp;

static void jp_fail(jp *p, const char *why) {
    if (!p->failed) snprintf(p->why, sizeof p->why, "%s at offset %zu", why, p->i);
    p->failed = 1;
}

static void jp_ws(jp *p) {
    while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')
        p->i++;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static void jv_free(jv *v) {
    free(v->string);
    for (int k = 0; k < v->n; k++) {
        jv_free(&v->items[k]);
        if (v->keys) free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    *v = (jv){0};
}

static char *jp_string(jp *p) {
    if (p->s[p->i] != '"') {
        jp_fail(p, "expected a string");
        return NULL;
    }
    p->i++;
    size_t cap = strlen(p->s + p->i) + 1, n = 0;
    char *out = malloc(cap);
    for (;;) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (!c || c < 0x20) {
            jp_fail(p, c ? "raw control character" : "unterminated string");
            free(out);
            return NULL;
        }
        p->i++;
        if (c == '"') break;
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        char e = p->s[p->i++];
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *at = e ? strchr(from, e) : NULL;
        if (at) {
            out[n++] = to[at - from];
        } else if (e == 'u') {
            unsigned v = 0;
            for (int k = 0; k < 4; k++, p->i++) {
                char h = p->s[p->i];
                int d = is_digit(h)                          ? h - '0'
                        : (h | 32) >= 'a' && (h | 32) <= 'f' ? (h | 32) - 'a' + 10
                                                             : -1;
                if (d < 0) {
                    jp_fail(p, "bad \\u escape");
                    free(out);
                    return NULL;
                }
                v = v * 16 + (unsigned)d;
            }
            if (v >= 0x80) { /* not produced for the text here: keep it simple */
                jp_fail(p, "non-ASCII \\u escape");
                free(out);
                return NULL;
            }
            out[n++] = (char)v;
        } else {
            jp_fail(p, "bad escape");
            free(out);
            return NULL;
        }
    }
    out[n] = '\0';
    return out;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and nothing else (no nan, inf, +1, .5, 1.) */
static void jp_number(jp *p, jv *v) {
    size_t start = p->i;
    if (p->s[p->i] == '-') p->i++;
    if (p->s[p->i] == '0')
        p->i++;
    else if (is_digit(p->s[p->i]) && p->s[p->i] != '0')
        while (is_digit(p->s[p->i]))
            p->i++;
    else
        return jp_fail(p, "bad number");
    if (p->s[p->i] == '.') {
        p->i++;
        if (!is_digit(p->s[p->i])) return jp_fail(p, "bad fraction");
        while (is_digit(p->s[p->i]))
            p->i++;
    }
    if (p->s[p->i] == 'e' || p->s[p->i] == 'E') {
        p->i++;
        if (p->s[p->i] == '+' || p->s[p->i] == '-') p->i++;
        if (!is_digit(p->s[p->i])) return jp_fail(p, "bad exponent");
        while (is_digit(p->s[p->i]))
            p->i++;
    }
    v->kind = JV_NUMBER;
    v->number = strtod(p->s + start, NULL);
}

static void jp_value(jp *p, jv *v, int depth);

static void jp_container(jp *p, jv *v, int depth, int object) {
    v->kind = object ? JV_OBJECT : JV_ARRAY;
    p->i++;
    jp_ws(p);
    if (p->s[p->i] == (object ? '}' : ']')) {
        p->i++;
        return;
    }
    for (;;) {
        v->items = realloc(v->items, sizeof *v->items * (size_t)(v->n + 1));
        v->items[v->n] = (jv){0};
        if (object) {
            v->keys = realloc(v->keys, sizeof *v->keys * (size_t)(v->n + 1));
            jp_ws(p);
            v->keys[v->n] = jp_string(p);
            if (p->failed) {
                v->n++;
                return;
            }
            for (int k = 0; k < v->n; k++)
                if (strcmp(v->keys[k], v->keys[v->n]) == 0) jp_fail(p, "duplicate key");
            jp_ws(p);
            if (p->s[p->i] != ':') jp_fail(p, "expected :");
            p->i++;
        }
        jp_value(p, &v->items[v->n], depth + 1);
        v->n++;
        if (p->failed) return;
        jp_ws(p);
        char c = p->s[p->i++];
        if (c == (object ? '}' : ']')) return;
        if (c != ',') return jp_fail(p, "expected , or the end");
    }
}

static void jp_value(jp *p, jv *v, int depth) {
    jp_ws(p);
    char c = p->s[p->i];
    if (depth > 16) return jp_fail(p, "too deep");
    if (c == '{' || c == '[') return jp_container(p, v, depth, c == '{');
    if (c == '"') {
        v->kind = JV_STRING;
        v->string = jp_string(p);
        return;
    }
    const char *words[3] = {"null", "true", "false"};
    for (int k = 0; k < 3; k++) {
        if (strncmp(p->s + p->i, words[k], strlen(words[k])) == 0) {
            p->i += strlen(words[k]);
            v->kind = k ? JV_BOOL : JV_NULL;
            v->boolean = k == 1;
            return;
        }
    }
    jp_number(p, v);
}

/* The whole text as one value; 0, or -1 with why (printed). */
static int json_parse(const char *text, jv *out, const char *what) {
    jp p = {text, 0, 0, ""};
    *out = (jv){0};
    jp_value(&p, out, 0);
    jp_ws(&p);
    if (!p.failed && p.s[p.i]) jp_fail(&p, "text after the value");
    if (p.failed) {
        fprintf(stderr, "%s: not JSON: %s\n  %s\n", what, p.why, text);
        jv_free(out);
        return -1;
    }
    return 0;
}

static const jv *jv_get(const jv *o, const char *key) {
    for (int k = 0; o && o->kind == JV_OBJECT && k < o->n; k++)
        if (strcmp(o->keys[k], key) == 0) return &o->items[k];
    return NULL;
}

static double jv_num(const jv *o, const char *key) {
    const jv *v = jv_get(o, key);
    return v && v->kind == JV_NUMBER ? v->number : NAN;
}

static const char *jv_str(const jv *o, const char *key) {
    const jv *v = jv_get(o, key);
    return v && v->kind == JV_STRING ? v->string : NULL;
}

static void test_the_json_reader_is_strict(void) {
    const char *good[] = {"{\"a\":[1,-0.5,2e-3,1E+2,true,false,null,\"x\\n\\u0041\"]}", "0", "[]"};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        jv v;
        CHECK(json_parse(good[k], &v, "good") == 0);
        jv_free(&v);
    }
    const char *bad[] = {"nan", "inf", "{\"a\":nan}",       "{\"a\":1,}", "[1 2]",     "01",   "1.",
                         ".5",  "+1",  "{\"a\":1,\"a\":2}", "\"a\nb\"",   "{\"a\" 1}", "[1]x", "-"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        jv v;
        fprintf(stderr, "(a rejection is expected next)\n");
        CHECK(json_parse(bad[k], &v, "bad") != 0);
    }
}

/* ---- a small data set ------------------------------------------------------------------------ */

#define N_TRAIN 100
#define N_TEST  20
#define BATCH   32
#define STEPS   4 /* ceil(N_TRAIN / BATCH) */

static char data_dir[] = "/tmp/cinder_test_cli_output_XXXXXX";
static char path_buf[8192];

static const char *in_dir(const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", data_dir, name);
    return path_buf;
}

static int write_idx(const char *name, const uint32_t *dims, int ndim, const uint8_t *data) {
    return th_write_idx(in_dir(name), dims, ndim, data);
}

/* Image i of class i % 10: a bright band of rows 2k..2k+4 over a dim, slightly varying
 * background, so that the classes can be told apart. */
static int write_data_set(void) {
    static uint8_t images[N_TRAIN * 784], labels[N_TRAIN];
    int rc = 0;
    for (int part = 0; part < 2; part++) {
        int n = part ? N_TEST : N_TRAIN;
        for (int i = 0; i < n; i++) {
            int k = i % 10;
            labels[i] = (uint8_t)k;
            for (int p = 0; p < 784; p++) {
                int row = p / 28;
                images[i * 784 + p] =
                    (uint8_t)(row >= 2 * k && row < 2 * k + 4 ? 200 : (p * 7 + i * 13) % 40);
            }
        }
        uint32_t idims[3] = {(uint32_t)n, 28, 28}, ldims[1] = {(uint32_t)n};
        rc |= write_idx(part ? "t10k-images-idx3-ubyte" : "train-images-idx3-ubyte", idims, 3,
                        images);
        rc |= write_idx(part ? "t10k-labels-idx1-ubyte" : "train-labels-idx1-ubyte", ldims, 1,
                        labels);
    }
    return rc;
}

/* `cinder train --data DIR --test-limit... <args>`, stdout in .out, stderr in *err */
static run_result train(const char *args, char **err) {
    char cmd[16384], err_path[8192];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", data_dir);
    snprintf(cmd, sizeof cmd, "train --data '%s' --batch %d %s 2>'%s'", data_dir, BATCH, args,
             err_path);
    run_result r = run_cli(cmd, 0);
    char *e = (char *)th_read_file(err_path, NULL);
    if (err)
        *err = e;
    else {
        if (e && *e) fprintf(stderr, "%s", e);
        free(e);
    }
    return r;
}

static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- --log ----------------------------------------------------------------------------------- */

static void test_the_log_is_json_lines_that_agree_with_the_epoch_lines(void) {
    char args[9000], log_path[8192];
    snprintf(log_path, sizeof log_path, "%s/run.jsonl", data_dir);
    snprintf(args, sizeof args, "--epochs 2 --lr 0.05 --seed 7 --threads 2 --log '%s'", log_path);
    run_result r = train(args, NULL);
    CHECK(r.status == 0);
    char *text = (char *)th_read_file(log_path, NULL);
    CHECK(text != NULL);
    if (!text || !r.out) {
        free(text);
        free(r.out);
        return;
    }
    int lines = 0, steps = 0, epochs = 0, starts = 0;
    double step_loss_sum = 0, last_elapsed = 0, pi = acos(-1.0);
    const double lr0 = 0.05;
    const int total_steps = 2 * STEPS;
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        CHECK(nl != NULL); /* every line is ended */
        if (!nl) break;
        *nl = '\0';
        lines++;
        jv v;
        if (json_parse(line, &v, "log line") != 0) {
            th_checks_failed++;
            continue;
        }
        const char *event = jv_str(&v, "event");
        CHECK(event != NULL);
        if (event && strcmp(event, "start") == 0) {
            starts++;
            CHECK(lines == 1);
            CHECK(jv_num(&v, "parameters") == 235146); /* 784*256+256 + 256*128+128 + 128*10+10 */
            CHECK(jv_num(&v, "parameter_bytes") == 235146 * 4);
            CHECK(jv_num(&v, "steps_per_epoch") == STEPS);
            CHECK(jv_num(&v, "train_images") == N_TRAIN && jv_num(&v, "test_images") == N_TEST);
            CHECK(jv_num(&v, "threads") == 2 && jv_num(&v, "batch") == BATCH);
            CHECK(jv_num(&v, "epochs") == 2 && jv_num(&v, "seed") == 7 && jv_num(&v, "lr") == lr0);
            CHECK(jv_str(&v, "model") && strcmp(jv_str(&v, "model"), "mlp") == 0);
            CHECK(jv_str(&v, "optimizer") && strcmp(jv_str(&v, "optimizer"), "sgd") == 0);
        } else if (event && strcmp(event, "step") == 0) {
            int epoch = steps / STEPS + 1, step = steps % STEPS + 1;
            steps++;
            CHECK(jv_num(&v, "epoch") == epoch && jv_num(&v, "step") == step);
            CHECK(jv_num(&v, "global_step") == steps);
            /* the cosine schedule, step by step: lr0 (1 + cos(pi t / T)) / 2, t from 0 */
            double want_lr = lr0 * (1 + cos(pi * (steps - 1) / total_steps)) / 2;
            CHECK_NEAR(jv_num(&v, "lr"), want_lr, 1e-7);
            double loss = jv_num(&v, "loss");
            CHECK(loss > 0 && loss < 10);
            step_loss_sum += loss;
            CHECK(jv_num(&v, "samples_per_s") > 0);
            double elapsed = jv_num(&v, "elapsed_s");
            CHECK(elapsed >= last_elapsed);
            last_elapsed = elapsed;
        } else if (event && strcmp(event, "epoch") == 0) {
            epochs++;
            CHECK(steps == epochs * STEPS); /* after its steps */
            CHECK(jv_num(&v, "epoch") == epochs);
            double train_loss = jv_num(&v, "train_loss"), acc = jv_num(&v, "test_accuracy");
            CHECK_NEAR(train_loss, step_loss_sum / STEPS, 1e-6); /* the mean of its steps */
            step_loss_sum = 0;
            /* the same figures as the epoch line on stdout */
            char want[160], key[32];
            snprintf(key, sizeof key, "epoch %d/2: ", epochs);
            snprintf(want, sizeof want, "epoch %d/2: train loss %.4f, test accuracy %.4f", epochs,
                     train_loss, acc);
            const char *printed = strstr(r.out, key);
            CHECK(printed && strncmp(printed, want, strlen(want)) == 0);
            if (printed && strncmp(printed, want, strlen(want)) != 0)
                fprintf(stderr, "log says \"%s\", stdout \"%.60s\"\n", want, printed);
            CHECK_NEAR(jv_num(&v, "lr"),
                       lr0 * (1 + cos(pi * (epochs * STEPS - 1) / total_steps)) / 2,
                       1e-7); /* the last step's */
            CHECK(jv_num(&v, "epoch_time_s") > 0 && jv_num(&v, "elapsed_s") >= last_elapsed);
        } else {
            fprintf(stderr, "unexpected event in \"%s\"\n", line);
            th_checks_failed++;
        }
        jv_free(&v);
    }
    printf("log: %d lines, %d steps, %d epochs\n", lines, steps, epochs);
    CHECK(starts == 1 && steps == total_steps && epochs == 2 && lines == 1 + total_steps + 2);
    free(text);
    free(r.out);
    remove(log_path);
}

static void test_a_log_that_cannot_be_written_fails_before_training(void) {
    char *err = NULL;
    run_result missing = train("--epochs 1 --log /nonexistent/dir/run.jsonl", &err);
    CHECK(missing.status == 1);
    CHECK(err && strstr(err, "/nonexistent/dir/run.jsonl") && strstr(err, "choose another path"));
    CHECK(missing.out && !strstr(missing.out, "epoch 1/1")); /* no training */
    free(missing.out);
    free(err);
    /* a directory: its parent is writable, the open itself fails */
    char args[9000];
    snprintf(args, sizeof args, "--epochs 1 --log '%s'", data_dir);
    run_result dir = train(args, &err);
    CHECK(dir.status == 1);
    CHECK(err && strstr(err, "cannot write the log") && strstr(err, data_dir));
    CHECK(dir.out && !strstr(dir.out, "epoch 1/1"));
    free(dir.out);
    free(err);
}

/* ---- the model summary ----------------------------------------------------------------------- */

static void test_the_summary_counts_the_parameters(void) {
    run_result mlp = train("--epochs 1", NULL);
    CHECK(mlp.status == 0 && mlp.out);
    /* 784*256+256 = 200960, 256*128+128 = 32896, 128*10+10 = 1290 */
    CHECK(mlp.out && strstr(mlp.out, "model mlp: 3 layers\n"));
    CHECK(mlp.out && strstr(mlp.out, "0.weight [256, 784], 0.bias [256]  200960\n"));
    CHECK(mlp.out && strstr(mlp.out, "2.weight [128, 256], 2.bias [128]   32896\n"));
    CHECK(mlp.out && strstr(mlp.out, "4.weight [10, 128], 4.bias [10]      1290\n"));
    CHECK(mlp.out && strstr(mlp.out, "total: 235146 parameters, 940584 bytes"));
    if (mlp.out) printf("%s", mlp.out);
    free(mlp.out);
    /* conv 1*32*9+32 = 320, conv 32*64*9+64 = 18496, 3136*128+128 = 401536, 128*10+10 = 1290 */
    run_result cnn = train("--model cnn --epochs 1 --limit 32 --test-limit 10", NULL);
    CHECK(cnn.status == 0 && cnn.out);
    CHECK(cnn.out && strstr(cnn.out, "model cnn: 10 layers\n"));
    CHECK(cnn.out && strstr(cnn.out, "   1  ReLU       -"));
    CHECK(cnn.out && strstr(cnn.out, "3.weight [64, 32, 3, 3], 3.bias [64]   18496\n"));
    CHECK(cnn.out && strstr(cnn.out, "7.weight [128, 3136], 7.bias [128]    401536\n"));
    CHECK(cnn.out && strstr(cnn.out, "total: 421642 parameters, 1686568 bytes"));
    free(cnn.out);
}

/* ---- --threads ------------------------------------------------------------------------------- */

/* The "epoch 1/1: train loss X, test accuracy Y" part of the output, in buf. */
static void epoch_figures(const char *out, char *buf, size_t size) {
    const char *at = out ? strstr(out, "epoch 1/1: ") : NULL;
    const char *end = at ? strstr(at, ", epoch time") : NULL;
    snprintf(buf, size, "%.*s", at && end ? (int)(end - at) : 0, at ? at : "");
}

static void test_threads_are_applied_and_keep_the_result(void) {
    char one[128], three[128], log_path[8192], args[9000];
    snprintf(log_path, sizeof log_path, "%s/threads.jsonl", data_dir);
    setenv("OMP_NUM_THREADS", "2", 1); /* --threads wins over it */
    snprintf(args, sizeof args, "--epochs 1 --threads 1 --log '%s'", log_path);
    run_result r1 = train(args, NULL);
    char *log = (char *)th_read_file(log_path, NULL);
    CHECK(log && strstr(log, "\"threads\":1,"));
    free(log);
    run_result r3 = train("--epochs 1 --threads 3", NULL);
    run_result env = train("--epochs 1", NULL);
    unsetenv("OMP_NUM_THREADS");
    CHECK(r1.status == 0 && r3.status == 0 && env.status == 0);
    CHECK(r1.out && strstr(r1.out, "on cpu:0, 1 CPU thread, "));
    CHECK(r3.out && strstr(r3.out, "on cpu:0, 3 CPU threads, "));
    CHECK(env.out && strstr(env.out, "on cpu:0, 2 CPU threads, ")); /* OMP_NUM_THREADS */
    epoch_figures(r1.out, one, sizeof one);
    epoch_figures(r3.out, three, sizeof three);
    printf("1 thread:  %s\n3 threads: %s\n", one, three);
    CHECK(one[0] && strcmp(one, three) == 0);
    free(r1.out);
    free(r3.out);
    free(env.out);
    remove(log_path);

    const char *bad[] = {"--threads 0", "--threads 257", "--threads two", "--threads"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char *err = NULL;
        run_result r = train(bad[k], &err);
        CHECK(r.status == 2);
        CHECK(err && strstr(err, "--threads"));
        CHECK(r.out && r.out[0] == '\0');
        free(r.out);
        free(err);
    }
    setenv("OMP_NUM_THREADS", "3", 1);
    run_result info = run_cli("info", 0);
    unsetenv("OMP_NUM_THREADS");
    CHECK(info.status == 0 && info.out && strstr(info.out, "\ncpu threads: 3\n"));
    free(info.out);
}

/* ---- info --json ------------------------------------------------------------------------------
 */

static void test_info_json_matches_the_text(void) {
    run_result text = run_cli("info", 0), json = run_cli("info --json", 0);
    CHECK(text.status == 0 && json.status == 0);
    jv v;
    if (!text.out || !json.out || json_parse(json.out, &v, "info --json") != 0) {
        th_checks_failed++;
        free(text.out);
        free(json.out);
        return;
    }
    CHECK(count_of(json.out, "\n") == 1); /* one line */
    CHECK(jv_str(&v, "version") && strcmp(jv_str(&v, "version"), cn_version()) == 0);
    CHECK(jv_str(&v, "headers_version") &&
          strcmp(jv_str(&v, "headers_version"), CN_VERSION_STRING) == 0);
    CHECK(jv_str(&v, "build") && strcmp(jv_str(&v, "build"), cn_build_config()) == 0);
    CHECK(jv_num(&v, "cpu_threads") == number_after(text.out, "\ncpu threads: "));
    const jv *backends = jv_get(&v, "backends");
    CHECK(backends && backends->kind == JV_ARRAY && backends->n >= 2);
    for (int k = 0; backends && k < backends->n; k++) {
        const jv *b = &backends->items[k];
        const char *name = jv_str(b, "name");
        const jv *found = jv_get(b, "found"), *why = jv_get(b, "why");
        CHECK(name && found && found->kind == JV_BOOL && why);
        if (!name || !found || !why) continue;
        char line[128];
        if (found->boolean) {
            /* "  cpu      id 0   1 device " */
            snprintf(line, sizeof line, "  %-8s id %-3d %d device", name, (int)jv_num(b, "id"),
                     (int)jv_num(b, "devices"));
            CHECK(strstr(text.out, line) != NULL);
        } else {
            snprintf(line, sizeof line, "  %-8s not found\n", name);
            CHECK(strstr(text.out, line) != NULL);
            CHECK(jv_get(b, "id")->kind == JV_NULL && jv_num(b, "devices") == 0);
        }
        /* every line of why is in the text, indented */
        if (why->kind == JV_STRING) {
            char *copy = strdup(why->string);
            for (char *l = strtok(copy, "\n"); l; l = strtok(NULL, "\n")) {
                while (*l == ' ')
                    l++;
                CHECK(strstr(text.out, l) != NULL);
            }
            free(copy);
        }
    }
    const jv *cpu = backends && backends->n ? &backends->items[0] : NULL;
    CHECK(cpu && strcmp(jv_str(cpu, "name"), "cpu") == 0 && jv_num(cpu, "id") == 0 &&
          jv_num(cpu, "devices") == 1 && jv_get(cpu, "module")->kind == JV_NULL &&
          jv_get(cpu, "why")->kind == JV_NULL);
    jv_free(&v);
    free(text.out);
    free(json.out);
}

/* ---- --plot -----------------------------------------------------------------------------------
 */

static void test_plot_refuses_formats_it_cannot_write(void) {
    const char *bad[] = {"curves.png", "curves.pdf", "curves", "dir.svg/curves"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char args[256], *err = NULL;
        snprintf(args, sizeof args, "--epochs 1 --plot '%s/%s'", data_dir, bad[k]);
        run_result r = train(args, &err);
        CHECK(r.status == 2);
        CHECK(err && strstr(err, bad[k]) && strstr(err, ".svg"));
        CHECK(r.out && r.out[0] == '\0'); /* refused before anything ran */
        free(r.out);
        free(err);
    }
    char args[9000], svg[8192];
    snprintf(svg, sizeof svg, "%s/curves.SVG", data_dir);
    snprintf(args, sizeof args, "--epochs 1 --plot '%s'", svg);
    run_result ok = train(args, NULL);
    CHECK(ok.status == 0);
    char *image = (char *)th_read_file(svg, NULL);
    CHECK(image && strncmp(image, "<?xml", 5) == 0 && strstr(image, "<svg"));
    free(image);
    free(ok.out);
    remove(svg);
}

/* ---- progress ---------------------------------------------------------------------------------
 */

static void test_progress_is_plain_lines_on_stderr_off_a_terminal(void) {
    char *err = NULL;
    run_result r = train("--epochs 2", &err);
    CHECK(r.status == 0);
    CHECK(r.out && !strstr(r.out, "] batch ")); /* not on stdout */
    CHECK(r.out && count_of(r.out, "\nepoch ") == 2);
    /* 4 steps: a line at each (every tenth crossed), per epoch */
    CHECK(err && count_of(err, "epoch 1/2 [") == STEPS && count_of(err, "epoch 2/2 [") == STEPS);
    CHECK(err && strstr(err, "epoch 1/2 [ 25%] batch 1/4: loss "));
    CHECK(err && strstr(err, "epoch 2/2 [100%] batch 4/4: loss "));
    CHECK(err && !strchr(err, '\r') && !strchr(err, '\033'));
    free(r.out);
    free(err);
}

#define NO_TERMINAL (-77) /* this machine has no pseudo-terminals (no /dev/ptmx) */

/* Runs `cinder train` with stderr on a pseudo-terminal `cols` columns wide (stdout to /dev/null)
 * and COLUMNS set to `columns_env`; returns what the terminal received (malloc'd) or NULL (*status
 * NO_TERMINAL when there is no pseudo-terminal to open). */
static char *train_on_a_terminal(int cols, const char *columns_env, int *status) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0) {
        *status = NO_TERMINAL;
        return NULL;
    }
    if (grantpt(master) != 0 || unlockpt(master) != 0) return NULL;
    const char *slave_name = ptsname(master);
    int slave = slave_name ? open(slave_name, O_RDWR | O_NOCTTY) : -1;
    if (slave < 0) {
        close(master);
        return NULL;
    }
    struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)cols};
    ioctl(slave, TIOCSWINSZ, &ws);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(slave, 2);
        close(master);
        setenv("COLUMNS", columns_env, 1);
        char data_arg[4096];
        snprintf(data_arg, sizeof data_arg, "%s", data_dir);
        char *argv[] = {cli_path, "train",   "--data", data_arg,       "--epochs", "2", "--batch",
                        "4",      "--limit", "64",     "--test-limit", "10",       NULL};
        execv(cli_path, argv);
        _exit(127);
    }
    close(slave);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    for (;;) {
        ssize_t got = read(master, out + len, cap - len - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break; /* EIO once the child has exited and the terminal is closed */
        len += (size_t)got;
        if (cap - len < 1024) out = realloc(out, cap *= 2);
    }
    out[len] = '\0';
    close(master);
    int w = 0;
    waitpid(pid, &w, 0);
    *status = WIFEXITED(w) ? WEXITSTATUS(w) : -1;
    return out;
}

/* What the terminal shows: each piece between '\r' and '\n' is a redraw; "\033[K" (erase to the
 * end of the line) takes no column. */
static void check_terminal_lines(const char *out, int cols) {
    int redraws = 0, newlines = 0, widest = 0, plain = 0;
    for (const char *p = out; *p;) {
        size_t len = strcspn(p, "\r\n");
        int visible = 0;
        for (size_t k = 0; k < len; k++) {
            if (p[k] == '\033' && k + 2 < len && p[k + 1] == '[' && p[k + 2] == 'K')
                k += 2;
            else
                visible++;
        }
        if (visible > widest) widest = visible;
        if (visible > 0) redraws++;
        for (size_t k = 0; k + 8 <= len; k++)
            plain += strncmp(p + k, "] batch ", 8) == 0;
        p += len;
        if (*p == '\n') newlines++;
        if (*p) p++;
    }
    printf("%d columns: %d redraws, widest %d, %d newlines\n", cols, redraws, widest, newlines);
    CHECK(widest > 0 && widest <= cols - 1); /* never the last column: no wrap */
    CHECK(newlines == 2);                    /* one per epoch */
    CHECK(plain == 0);
    CHECK(strstr(out, "\repoch 2/2 ") != NULL); /* redrawn from the line's start */
    CHECK(redraws >= 2);
}

static void test_progress_on_a_terminal_redraws_one_line_within_its_width(void) {
    int widths[3] = {120, 60, 30};
    for (int k = 0; k < 3; k++) {
        int status = -1;
        char *out = train_on_a_terminal(widths[k], "200", &status); /* the terminal wins */
        if (status == NO_TERMINAL) {
            printf("skipped: no pseudo-terminal here (posix_openpt failed)\n");
            return;
        }
        CHECK(out != NULL && status == 0);
        if (!out) continue;
        check_terminal_lines(out, widths[k]);
        /* 16 of 16 batches at the end of each epoch */
        CHECK(strstr(out, "16/16") != NULL);
        if (widths[k] == 120) /* the whole line: a full bar at the end, samples/s */
            CHECK(strstr(out, "[========================] 16/16  loss ") &&
                  strstr(out, "samples/s"));
        if (widths[k] == 60) /* a shorter bar (samples/s only while its digits fit) */
            CHECK(strstr(out, "[====") && !strstr(out, "[========================]"));
        if (widths[k] == 30) CHECK(strstr(out, "[=") == NULL); /* no room for a bar */
        free(out);
    }
    /* a terminal that does not say its width: COLUMNS */
    int status = -1;
    char *out = train_on_a_terminal(0, "45", &status);
    CHECK(out != NULL && status == 0);
    if (out) check_terminal_lines(out, 45);
    free(out);
}

static void remove_data_set(void) {
    const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "stderr.txt"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        remove(in_dir(names[k]));
    rmdir(data_dir);
}

int main(void) {
    if (!require_cli()) return 1;
    if (!mkdtemp(data_dir) || write_data_set() != 0) {
        perror("writing the data set");
        return 1;
    }
    unsetenv("OMP_NUM_THREADS");
    unsetenv("CINDER_DEVICE");
    RUN(test_the_json_reader_is_strict);
    RUN(test_the_log_is_json_lines_that_agree_with_the_epoch_lines);
    RUN(test_a_log_that_cannot_be_written_fails_before_training);
    RUN(test_the_summary_counts_the_parameters);
    RUN(test_threads_are_applied_and_keep_the_result);
    RUN(test_info_json_matches_the_text);
    RUN(test_plot_refuses_formats_it_cannot_write);
    RUN(test_progress_is_plain_lines_on_stderr_off_a_terminal);
    RUN(test_progress_on_a_terminal_redraws_one_line_within_its_width);
    remove_data_set();
    return th_finish();
}
