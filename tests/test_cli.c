/* The `cinder` program: explain finds entries by code, name, slug and message and prints them;
 * unknown queries exit 2; `explain --json` is a JSON array whose objects carry exactly the
 * record's fields, and decoding it gives back the catalogue's text; info names the CPU backend
 * and the version; inspect shows a checkpoint's tensors with their values; every command's --help
 * lists every option its parser accepts, the environment and an example. The binary is found next to the tests folder of the build tree:
 * <build>/tests/test_cli runs <build>/cinder. */
#define _POSIX_C_SOURCE 200809L

#include <sys/wait.h>
#include <unistd.h>

#include "cinder/catalogue.h"
#include "harness.h"
#include "cli_run.h"

/* ---- running the program -------------------------------------------------------------------- */



/* ---- a minimal JSON reader ------------------------------------------------------------------ *
 * Just enough of RFC 8259 for the export: arrays, objects, strings with every escape, and
 * white space. Anything else is an error. */

typedef struct json {
    const char *s;
    size_t i;
    int failed;
    char why[160];
} json;

static void json_fail(json *j, const char *why) {
    if (!j->failed) snprintf(j->why, sizeof j->why, "%s at offset %zu", why, j->i);
    j->failed = 1;
}

static void json_ws(json *j) {
    while (j->s[j->i] == ' ' || j->s[j->i] == '\n' || j->s[j->i] == '\r' || j->s[j->i] == '\t')
        j->i++;
}

static int json_eat(json *j, char c) {
    json_ws(j);
    if (j->s[j->i] != c) return 0;
    j->i++;
    return 1;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string, decoded to UTF-8 (malloc'd), or NULL with j failed. */
static char *json_string(json *j) {
    json_ws(j);
    if (j->s[j->i] != '"') {
        json_fail(j, "expected a string");
        return NULL;
    }
    j->i++;
    size_t start = j->i, cap = 1;
    while (j->s[start] && j->s[start] != '"') {
        cap += 4;
        start += j->s[start] == '\\' && j->s[start + 1] ? 2 : 1;
    }
    char *out = malloc(cap + 4);
    size_t n = 0;
    for (;;) {
        unsigned char c = (unsigned char)j->s[j->i];
        if (c == '\0') {
            json_fail(j, "unterminated string");
            break;
        }
        j->i++;
        if (c == '"') {
            out[n] = '\0';
            return out;
        }
        if (c < 0x20) {
            json_fail(j, "raw control character in a string");
            break;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        char e = j->s[j->i++];
        switch (e) {
        case '"':
            out[n++] = '"';
            break;
        case '\\':
            out[n++] = '\\';
            break;
        case '/':
            out[n++] = '/';
            break;
        case 'b':
            out[n++] = '\b';
            break;
        case 'f':
            out[n++] = '\f';
            break;
        case 'n':
            out[n++] = '\n';
            break;
        case 'r':
            out[n++] = '\r';
            break;
        case 't':
            out[n++] = '\t';
            break;
        case 'u': {
            unsigned v = 0;
            for (int k = 0; k < 4; k++) {
                int h = hex_value(j->s[j->i]);
                if (h < 0) {
                    json_fail(j, "bad \\u escape");
                    free(out);
                    return NULL;
                }
                v = v * 16 + (unsigned)h;
                j->i++;
            }
            if (v >= 0xd800 && v <= 0xdfff) { /* surrogates: not produced for our text */
                json_fail(j, "surrogate \\u escape");
                free(out);
                return NULL;
            }
            if (v < 0x80) {
                out[n++] = (char)v;
            } else if (v < 0x800) {
                out[n++] = (char)(0xc0 | (v >> 6));
                out[n++] = (char)(0x80 | (v & 0x3f));
            } else {
                out[n++] = (char)(0xe0 | (v >> 12));
                out[n++] = (char)(0x80 | ((v >> 6) & 0x3f));
                out[n++] = (char)(0x80 | (v & 0x3f));
            }
            break;
        }
        default:
            json_fail(j, "bad escape");
            free(out);
            return NULL;
        }
    }
    free(out);
    return NULL;
}

/* Checks that an array of strings equals the NULL-terminated list want. */
static void json_string_array(json *j, const char *const *want, const char *what) {
    if (!json_eat(j, '[')) {
        json_fail(j, "expected an array");
        return;
    }
    size_t k = 0;
    if (json_eat(j, ']')) {
        if (want[0]) json_fail(j, "empty array");
        return;
    }
    do {
        char *s = json_string(j);
        if (!s) return;
        if (!want[k] || strcmp(s, want[k]) != 0) {
            fprintf(stderr, "%s[%zu] = \"%s\" differs from the catalogue\n", what, k, s);
            th_checks_failed++;
        }
        free(s);
        if (want[k]) k++;
    } while (json_eat(j, ','));
    if (!json_eat(j, ']')) json_fail(j, "expected ] or ,");
    if (want[k]) {
        fprintf(stderr, "%s has fewer items than the catalogue\n", what);
        th_checks_failed++;
    }
}

/* One object; it must have exactly the record's fields, decoding to entry e's text. */
static void json_entry(json *j, const cn_error_entry *e) {
    const char *string_keys[] = {"slug",          "errorCode",        "messagePattern",
                                 "documentation", "triggerScenarios", "commonSituations",
                                 "exampleFix"};
    const char *string_values[] = {e->slug,          e->error_code,        e->message_pattern,
                                   e->documentation, e->trigger_scenarios, e->common_situations,
                                   e->example_fix};
    const size_t n_strings = sizeof string_keys / sizeof *string_keys;
    int seen[9] = {0};
    if (!json_eat(j, '{')) {
        json_fail(j, "expected an object");
        return;
    }
    do {
        char *key = json_string(j);
        if (!key) return;
        if (!json_eat(j, ':')) {
            json_fail(j, "expected :");
            free(key);
            return;
        }
        size_t k = 0;
        while (k < n_strings && strcmp(key, string_keys[k]) != 0)
            k++;
        if (k < n_strings) {
            char *v = json_string(j);
            if (v && strcmp(v, string_values[k]) != 0) {
                fprintf(stderr, "%s.%s = \"%s\" differs from the catalogue\n", e->name, key, v);
                th_checks_failed++;
            }
            free(v);
            seen[k]++;
        } else if (strcmp(key, "solutions") == 0) {
            json_string_array(j, e->solutions, "solutions");
            seen[7]++;
        } else if (strcmp(key, "preventionTips") == 0) {
            json_string_array(j, e->prevention_tips, "preventionTips");
            seen[8]++;
        } else {
            fprintf(stderr, "unexpected field \"%s\"\n", key);
            th_checks_failed++;
            json_fail(j, "unexpected field");
        }
        free(key);
        if (j->failed) return;
    } while (json_eat(j, ','));
    if (!json_eat(j, '}')) json_fail(j, "expected } or ,");
    for (int k = 0; k < 9; k++) {
        if (seen[k] != 1) {
            fprintf(stderr, "%s: field %d appears %d times\n", e->name, k, seen[k]);
            th_checks_failed++;
        }
    }
}

static void json_end(json *j) {
    json_ws(j);
    if (j->s[j->i] != '\0') json_fail(j, "text after the value");
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void check_entry_text(const char *out, const cn_error_entry *e) {
    CHECK(strstr(out, e->error_code) != NULL);
    CHECK(strstr(out, e->slug) != NULL);
    CHECK(strstr(out, e->message_pattern) != NULL);
    /* every line of the example fix is printed verbatim */
    const char *line = e->example_fix;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[256];
        if (len < sizeof buf) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            if (!strstr(out, buf)) {
                fprintf(stderr, "output lacks the example line \"%s\"\n", buf);
                th_checks_failed++;
            }
        }
        line += len + (end ? 1 : 0);
    }
}

static void test_explain_finds_an_entry_by_code_name_slug_and_message(void) {
    const cn_error_entry *shape = cn_error_entry_of(CN_ERR_SHAPE);
    run_result by_code = run_cli("explain 3", 0);
    CHECK(by_code.status == 0);
    if (by_code.out) check_entry_text(by_code.out, shape);
    const char *queries[] = {"explain CN_ERR_SHAPE", "explain incompatible-shapes",
                             "explain 'add: incompatible shapes: [2, 3] and [4]'",
                             "explain add: incompatible shapes: 2x3 and 4"}; /* unquoted words */
    for (size_t i = 0; i < sizeof queries / sizeof *queries; i++) {
        run_result r = run_cli(queries[i], 0);
        CHECK(r.status == 0);
        if (!r.out || !by_code.out || strcmp(r.out, by_code.out) != 0) {
            fprintf(stderr, "`cinder %s` differs from `cinder explain 3`\n", queries[i]);
            th_checks_failed++;
        }
        free(r.out);
    }
    free(by_code.out);
}

static void test_explain_prints_every_entry(void) {
    const cn_error_entry *entries;
    size_t n = cn_error_catalogue(&entries);
    for (size_t i = 0; i < n; i++) {
        char args[128];
        snprintf(args, sizeof args, "explain %s", entries[i].slug);
        run_result r = run_cli(args, 0);
        CHECK(r.status == 0);
        if (r.out) check_entry_text(r.out, &entries[i]);
        free(r.out);
    }
    run_result list = run_cli("explain --list", 0);
    CHECK(list.status == 0);
    size_t lines = 0;
    for (const char *p = list.out ? list.out : ""; *p; p++)
        lines += *p == '\n';
    CHECK(lines == n);
    for (size_t i = 0; i < n && list.out; i++)
        CHECK(strstr(list.out, entries[i].name) != NULL);
    free(list.out);
}

static void test_unknown_query_exits_2(void) {
    run_result r = run_cli("explain no-such-error", 1);
    CHECK(r.status == 2);
    CHECK(r.out && strstr(r.out, "no-such-error") && strstr(r.out, "no error matches"));
    free(r.out);
    run_result quiet = run_cli("explain no-such-error", 0);
    CHECK(quiet.status == 2);
    CHECK(quiet.out && quiet.out[0] == '\0'); /* nothing on stdout */
    free(quiet.out);
    run_result none = run_cli("explain", 0);
    CHECK(none.status == 2);
    free(none.out);
    run_result zero = run_cli("explain 0", 0);
    CHECK(zero.status == 2);
    free(zero.out);
}

static void test_explain_json_exports_every_entry_with_the_record_fields(void) {
    const cn_error_entry *entries;
    size_t n = cn_error_catalogue(&entries);
    run_result r = run_cli("explain --json", 0);
    CHECK(r.status == 0);
    if (!r.out) return;
    json j = {r.out, 0, 0, ""};
    size_t count = 0;
    if (!json_eat(&j, '[')) json_fail(&j, "expected a top-level array");
    if (!j.failed && !json_eat(&j, ']')) {
        do {
            if (count >= n) {
                json_fail(&j, "more objects than catalogue entries");
                break;
            }
            json_entry(&j, &entries[count++]);
        } while (!j.failed && json_eat(&j, ','));
        if (!j.failed && !json_eat(&j, ']')) json_fail(&j, "expected ] or ,");
    }
    json_end(&j);
    if (j.failed) {
        fprintf(stderr, "explain --json: %s\n", j.why);
        th_checks_failed++;
    }
    CHECK(count == n);
    free(r.out);

    /* one entry, as an object */
    run_result one = run_cli("explain --json CN_ERR_DEVICE_MISMATCH", 0);
    CHECK(one.status == 0);
    if (one.out) {
        json k = {one.out, 0, 0, ""};
        json_entry(&k, cn_error_entry_of(CN_ERR_DEVICE_MISMATCH));
        json_end(&k);
        if (k.failed) {
            fprintf(stderr, "explain --json CN_ERR_DEVICE_MISMATCH: %s\n", k.why);
            th_checks_failed++;
        }
    }
    free(one.out);
}

/* The reader itself: escapes decode, and malformed text is rejected. */
static void test_json_reader_rejects_malformed_text(void) {
    json ok = {"\"a\\\"b\\\\c\\n\\u0041\\u00e9\"", 0, 0, ""};
    char *s = json_string(&ok);
    CHECK(s && strcmp(s, "a\"b\\c\nA\xc3\xa9") == 0);
    free(s);
    const char *bad[] = {"\"unterminated", "\"raw\nnewline\"", "\"bad \\x escape\"", "nope"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json j = {bad[i], 0, 0, ""};
        free(json_string(&j));
        CHECK(j.failed);
    }
}

static void test_info_names_the_cpu_backend_and_version(void) {
    run_result r = run_cli("info", 0);
    CHECK(r.status == 0);
    CHECK(r.out && strstr(r.out, "cpu") != NULL);
    CHECK(r.out && strstr(r.out, cn_version()) != NULL);
    CHECK(r.out && strstr(r.out, cn_build_config()) != NULL);
    free(r.out);
}

static void test_usage_and_unknown_commands(void) {
    run_result help = run_cli("--help", 0);
    CHECK(help.status == 0);
    CHECK(help.out && strstr(help.out, "explain") && strstr(help.out, "info"));
    free(help.out);
    run_result bare = run_cli("", 1);
    CHECK(bare.status == 2);
    CHECK(bare.out && strstr(bare.out, "usage"));
    free(bare.out);
    run_result unknown = run_cli("frobnicate", 1);
    CHECK(unknown.status == 2);
    CHECK(unknown.out && strstr(unknown.out, "frobnicate"));
    free(unknown.out);
    run_result version = run_cli("--version", 0);
    CHECK(version.status == 0);
    CHECK(version.out && strstr(version.out, cn_version()));
    free(version.out);
}

/* Every command's --help: exit 0, every option (listed here by hand), the environment variables,
 * the exit statuses and an example. And the parser side: a run with an unknown argument makes
 * each parser ask cli_option / cli_flag about every name it accepts, and those refuse a name the
 * help does not list ("internal error: ... not described"), so an option added without help
 * fails here. */
static void test_every_help_lists_every_option_the_environment_and_an_example(void) {
    static const struct {
        const char *command;
        const char *options[28];
        const char *unknown_message; /* what the unknown argument gets */
    } commands[] = {
        {"train",
         {"--model", "--epochs", "--batch", "--optimizer", "--lr", "--schedule", "--device",
          "--threads", "--checkpointing", "--data", "--seed", "--save", "--plot", "--log",
          "--resume", "--stop-after-steps", "--limit", "--test-limit", "--ddp", "--block",
          "--layers", "--heads", "--embd", "--help", NULL},
         "unknown argument '--zz-no-such-option'"},
        {"generate",
         {"--load", "--prompt", "--tokens", "--temperature", "--top-k", "--top-p", "--seed",
          "--device", "--threads", "--help", NULL},
         "unknown argument '--zz-no-such-option'"},
        {"eval",
         {"--load", "--data", "--device", "--threads", "--test-limit", "--help", NULL},
         "unknown argument '--zz-no-such-option'"},
        {"quantize",
         {"--load", "--scheme", "--out", "--help", NULL},
         "unknown argument '--zz-no-such-option'"},
        {"inspect",
         {"FILE", "--name", "--help", NULL},
         "unexpected argument '--zz-no-such-option'"},
        {"explain",
         {"--json", "--list", "--help", NULL},
         "no error matches \"--zz-no-such-option\""},
        {"info", {"--json", "--help", NULL}, "unknown argument '--zz-no-such-option'"},
    };
    const char *shared[] = {"CINDER_DEVICE", "CINDER_BACKEND_PATH", "OMP_NUM_THREADS", "COLUMNS",
                            "exit status: 0", "1 the work failed", "2 the command line",
                            "\nexamples:\n"};
    for (size_t c = 0; c < sizeof commands / sizeof *commands; c++) {
        char args[128], example[64];
        snprintf(args, sizeof args, "%s --help", commands[c].command);
        run_result r = run_cli(args, 0);
        CHECK(r.status == 0 && r.out);
        if (!r.out) continue;
        for (const char *const *o = commands[c].options; *o; o++) {
            char needle[64], listed[64];
            snprintf(needle, sizeof needle, "  %s ", *o); /* as an option line starts */
            snprintf(listed, sizeof listed, "  %s, ", *o); /* "--help, -h" */
            if (!strstr(r.out, needle) && !strstr(r.out, listed)) {
                fprintf(stderr, "`cinder %s --help` lacks %s\n", commands[c].command, *o);
                th_checks_failed++;
            }
        }
        for (size_t k = 0; k < sizeof shared / sizeof *shared; k++) {
            if (!strstr(r.out, shared[k])) {
                fprintf(stderr, "`cinder %s --help` lacks \"%s\"\n", commands[c].command,
                        shared[k]);
                th_checks_failed++;
            }
        }
        snprintf(example, sizeof example, "\n  cinder %s", commands[c].command);
        const char *examples = strstr(r.out, "\nexamples:\n");
        CHECK(examples && strstr(examples, example));
        /* `cinder help <command>` and `-h` print the same */
        snprintf(args, sizeof args, "help %s", commands[c].command);
        run_result same = run_cli(args, 0);
        CHECK(same.status == 0 && same.out && strcmp(same.out, r.out) == 0);
        free(same.out);
        snprintf(args, sizeof args, "%s -h", commands[c].command);
        run_result h = run_cli(args, 0);
        CHECK(h.status == 0 && h.out && strcmp(h.out, r.out) == 0);
        free(h.out);
        free(r.out);

        snprintf(args, sizeof args, "%s --zz-no-such-option", commands[c].command);
        run_result unknown = run_cli(args, 1);
        CHECK(unknown.status == 2 && unknown.out);
        CHECK(unknown.out && strstr(unknown.out, commands[c].unknown_message));
        CHECK(unknown.out && !strstr(unknown.out, "not described"));
        if (unknown.out && !strstr(unknown.out, commands[c].unknown_message))
            fprintf(stderr, "`cinder %s`: %s\n", args, unknown.out);
        free(unknown.out);
    }
    run_result top = run_cli("--help", 0);
    CHECK(top.status == 0 && top.out);
    for (size_t c = 0; top.out && c < sizeof commands / sizeof *commands; c++) {
        char needle[32];
        snprintf(needle, sizeof needle, "\n  %s ", commands[c].command);
        CHECK(strstr(top.out, needle) != NULL);
    }
    for (size_t k = 0; top.out && k < sizeof shared / sizeof *shared; k++)
        CHECK(strstr(top.out, shared[k]) != NULL);
    free(top.out);
    run_result no_such = run_cli("help frobnicate", 1);
    CHECK(no_such.status == 2 && no_such.out && strstr(no_such.out, "'frobnicate'"));
    free(no_such.out);
}

/* inspect against text written here by hand (PyTorch's repr of the same values), not cn_format */
static void test_inspect_shows_names_shapes_and_values(void) {
    char path[] = "/tmp/cinder_inspect_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    float wv[4] = {1.5f, -2, 0.25f, 4};
    int64_t ws[2] = {2, 2}, step = 7;
    cn_tensor *t[3] = {cn_from_data(wv, ws, 2, CN_F32, cn_cpu()),
                       cn_from_data(&step, NULL, 0, CN_I64, cn_cpu()),
                       cn_arange(0, 2000, 1, CN_F64, cn_cpu())};
    const char *names[3] = {"layer.w", "step", "big"};
    CHECK(cn_safetensors_save(path, names, t, 3) == CN_OK);
    for (int i = 0; i < 3; i++) cn_release(t[i]);

    char args[256];
    snprintf(args, sizeof args, "inspect '%s'", path);
    run_result all = run_cli(args, 0);
    char want[1024];
    snprintf(want, sizeof want,
             "%s: 3 tensors\n"
             "\n"
             "layer.w: [2, 2] f32\n"
             "tensor([[ 1.5000, -2.0000],\n"
             "        [ 0.2500,  4.0000]])\n"
             "\n"
             "step: [] i64\n"
             "tensor(7)\n"
             "\n"
             "big: [2000] f64\n"
             "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
             "        1.9990e+03], dtype=f64)\n",
             path);
    CHECK(all.status == 0 && all.out && strcmp(all.out, want) == 0);
    if (all.out && strcmp(all.out, want) != 0) fprintf(stderr, "got:\n%s\nwant:\n%s\n", all.out, want);
    free(all.out);

    snprintf(args, sizeof args, "inspect '%s' --name step", path);
    run_result one = run_cli(args, 0);
    CHECK(one.status == 0 && one.out && strcmp(one.out, "step: [] i64\ntensor(7)\n") == 0);
    free(one.out);
    snprintf(args, sizeof args, "inspect '%s' --name nope", path);
    run_result unknown = run_cli(args, 1);
    CHECK(unknown.status == 1 && unknown.out && strstr(unknown.out, "nope"));
    free(unknown.out);
    run_result missing = run_cli("inspect /nonexistent/x.safetensors", 1);
    CHECK(missing.status == 1 && missing.out && strstr(missing.out, "/nonexistent/x.safetensors"));
    free(missing.out);
    run_result no_file = run_cli("inspect", 1);
    CHECK(no_file.status == 2 && no_file.out && strstr(no_file.out, "FILE is required"));
    free(no_file.out);
    unlink(path);
}

int main(void) {
    if (!require_cli()) return 1;
    RUN(test_explain_finds_an_entry_by_code_name_slug_and_message);
    RUN(test_inspect_shows_names_shapes_and_values);
    RUN(test_explain_prints_every_entry);
    RUN(test_unknown_query_exits_2);
    RUN(test_explain_json_exports_every_entry_with_the_record_fields);
    RUN(test_json_reader_rejects_malformed_text);
    RUN(test_info_names_the_cpu_backend_and_version);
    RUN(test_usage_and_unknown_commands);
    RUN(test_every_help_lists_every_option_the_environment_and_an_example);
    return th_finish();
}
