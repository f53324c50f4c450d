/* Reading a subcommand's options (cli.h): `--name value` or `--name=value`, numbers parsed
 * whole and range-checked, devices through cn_device_parse. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/error.h"
#include "cli/cli.h"

int cli_option(int argc, char **argv, int *i, const char *cmd, const char *name,
               const char **value) {
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
    if (cn_device_parse(text, out) != CN_OK) {
        fprintf(stderr, "cinder %s: cannot use --device %s: %s\n", cmd, text, cn_last_error());
        return -1;
    }
    return 0;
}
