/* Running the built `cinder` program from a test: it is found next to the tests folder of the
 * build tree (<build>/tests/test_x runs <build>/cinder). Include after harness.h, with
 * _POSIX_C_SOURCE 200809L defined. */
#ifndef CINDER_TESTS_CLI_RUN_H
#define CINDER_TESTS_CLI_RUN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char cli_path[4096];

/* <dir of this executable>/../cinder; non-zero when it exists and is executable */
static inline int find_cli(void) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 0;
    self[n] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(self, '/');
        if (!slash) return 0;
        *slash = '\0';
    }
    if (strlen(self) + sizeof "/cinder" > sizeof cli_path) return 0;
    strcpy(cli_path, self);
    strcat(cli_path, "/cinder");
    return access(cli_path, X_OK) == 0;
}

/* find_cli, saying on stderr where the program was looked for when it is not there: a test's
 * main returns 1 on 0 */
static inline int require_cli(void) {
    if (find_cli()) return 1;
    fprintf(stderr,
            "cannot find the cinder program at %s (expected <build>/cinder next to "
            "<build>/tests/)\n",
            cli_path);
    return 0;
}

typedef struct run_result {
    int status; /* exit status, or -1 if the program did not exit normally */
    char *out;  /* stdout (and stderr when merged); free with free() */
} run_result;

/* Runs a shell command line; its exit status and output (what the command line sends to
 * stdout: add 2>&1 to merge stderr). */
static inline run_result run_shell(const char *cmd) {
    run_result r = {-1, NULL};
    FILE *p = popen(cmd, "r");
    if (!p) return r;
    size_t cap = 4096, len = 0, got;
    r.out = malloc(cap);
    while (r.out && (got = fread(r.out + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 1024) {
            char *bigger = realloc(r.out, cap * 2);
            if (!bigger) break;
            r.out = bigger;
            cap *= 2;
        }
    }
    if (r.out) r.out[len] = '\0';
    int w = pclose(p);
    r.status = w != -1 && WIFEXITED(w) ? WEXITSTATUS(w) : -1;
    return r;
}

/* Runs `cinder <args>` through the shell; args must be shell-quoted by the caller. Unless
 * merged, stderr goes to the test's own stderr (it shows in ctest's log on failure). */
static inline run_result run_cli(const char *args, int merge_stderr) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", cli_path, args, merge_stderr ? "2>&1" : "");
    return run_shell(cmd);
}

/* The number after `key` in the text, or NAN when the key (or the text) is absent. */
static inline double number_after(const char *text, const char *key) {
    const char *at = text ? strstr(text, key) : NULL;
    return at ? strtod(at + strlen(key), NULL) : NAN;
}

/* Non-zero when the data file `path` is readable, gzip-compressed (path.gz) or not. */
static inline int data_file_present(const char *path) {
    char gz[4200];
    snprintf(gz, sizeof gz, "%s.gz", path);
    return access(gz, R_OK) == 0 || access(path, R_OK) == 0;
}

/* Non-zero, after printing ctest's skip line, when the Fashion-MNIST file `name` (say
 * "train-images-idx3-ubyte") is missing from `dir`: a test's main returns 77 then. */
static inline int fashion_mnist_missing(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (data_file_present(path)) return 0;
    printf("skipped: no Fashion-MNIST in %s (apt-get install dataset-fashion-mnist)\n", dir);
    return 1;
}

#endif
