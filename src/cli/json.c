/* Writing JSON values (cli.h): strings escaped as RFC 8259 asks, numbers that are always valid
 * JSON (a value that is not finite is null). */
#include <math.h>
#include <stdio.h>

#include "cli/cli.h"

void cli_json_string(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\b':
            fputs("\\b", f);
            break;
        case '\f':
            fputs("\\f", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void cli_json_number(FILE *f, double v, int digits) {
    if (!isfinite(v))
        fputs("null", f);
    else
        fprintf(f, "%.*g", digits, v == 0 ? 0.0 : v); /* no "-0" */
}
