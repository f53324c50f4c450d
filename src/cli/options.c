/* Reading a subcommand's options (cli.h): `--name value` or `--name=value`, numbers parsed
 * whole and range-checked, devices through cn_device_parse, thread counts through
 * cn_cpu_set_threads. Every option name asked about must be listed in the command's --help text
 * (main.c), so that the help cannot fall behind the parser. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/backend.h"
#include "cinder/error.h"
#include "cli/cli.h"

/* Whether `cinder <cmd> --help` lists the option `name`: the name as a whole word (not
 * followed by a letter, digit or '-', so "--test" is not found in "--test-limit"). */
static int documented(const char *cmd, const char *name) {
    const char *help = cli_command_help(cmd);
    size_t len = strlen(name);
    for (const char *p = help; p && (p = strstr(p, name)) != NULL; p += len) {
        char next = p[len];
        if (!(next == '-' || next == '_' || (next >= 'a' && next <= 'z') ||
              (next >= '0' && next <= '9')))
            return 1;
    }
    return 0;
}

/* 0, or -1 (printed) when `name` is missing from the command's help: a mistake in cinder, found
 * by the first run (a test) that reaches the option, never by a user of a tested build. */
static int check_documented(const char *cmd, const char *name) {
    if (documented(cmd, name)) return 0;
    fprintf(stderr,
            "cinder %s: internal error: the option %s is not described in `cinder %s --help`; "
            "add it to the command's options text in src/cli/main.c\n",
            cmd, name, cmd);
    return -1;
}

int cli_flag(const char *arg, const char *cmd, const char *name) {
    if (check_documented(cmd, name) != 0) return -1;
    return strcmp(arg, name) == 0;
}

int cli_option(int argc, char **argv, int *i, const char *cmd, const char *name,
               const char **value) {
    if (check_documented(cmd, name) != 0) return -1;
    const char *arg = argv[*i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0) return 0;
    if (arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    if (arg[len] != '\0') return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "cinder %s: %s needs a value (see `cinder %s --help`)\n", cmd, name, cmd);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int cli_parse_int(const char *cmd, const char *name, const char *text, int64_t min, int64_t max,
                  int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || errno || v < min || v > max) {
        fprintf(stderr, "cinder %s: %s '%s' is not a whole number from %lld to %lld\n", cmd, name,
                text, (long long)min, (long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_real(const char *cmd, const char *name, const char *text, double min, double max,
                   double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || *end || errno || !isfinite(v) || v < min || v > max) {
        fprintf(stderr, "cinder %s: %s '%s' is not a number from %g to %g\n", cmd, name, text, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_device(const char *cmd, const char *text, cn_device *out) {
    const char *from = "--device ";
    if (!text) {
        const char *env = getenv("CINDER_DEVICE");
        text = env && *env ? env : "cpu";
        from = env && *env ? "CINDER_DEVICE=" : "--device ";
    }
    if (cn_device_parse(text, out) != CN_OK) {
        fprintf(stderr, "cinder %s: cannot use %s%s: %s\n", cmd, from, text, cn_last_error());
        return -1;
    }
    return 0;
}

int cli_parse_threads(const char *cmd, const char *text) {
    int64_t n = 0;
    if (cli_parse_int(cmd, "--threads", text, 1, CN_CPU_MAX_THREADS, &n) != 0) return -1;
    if (cn_cpu_set_threads((int)n) != CN_OK) {
        fprintf(stderr, "cinder %s: cannot use --threads %s: %s\n", cmd, text, cn_last_error());
        return -1;
    }
    return 0;
}
