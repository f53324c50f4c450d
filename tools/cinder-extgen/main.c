/* cinder-extgen: generates the C glue of a cinder extension from its declaration file.
 *
 *     cinder-extgen DECL --header OUT.h --source OUT.c
 *
 * Reads DECL (syntax: docs/extensions.md), checks it, and writes a header with one typed function
 * per op and a source that defines the ops and registers the user's kernels under conventional
 * names. Errors are printed as `DECL:line: error: message`; the exit status is then 1 and no file
 * is written. The CMake function cinder_add_extension (cmake/CinderExtension.cmake) runs this at
 * build time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extgen.h"

static void usage(FILE *to) {
    fprintf(to, "usage: cinder-extgen DECL --header OUT.h --source OUT.c\n"
                "Generates the typed functions and registration of a cinder extension.\n");
}

/* The whole file, NUL-terminated, from the arena; NULL when it cannot be read. */
static char *read_file(const char *path, size_t *len) {
    FILE *in = fopen(path, "rb");
    if (!in) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, in);
        if (n < cap) break;
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int bad = !buf || ferror(in);
    fclose(in);
    if (bad) {
        free(buf);
        return NULL;
    }
    char *text = xg_strdup(buf, n);
    free(buf);
    *len = n;
    return text;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int main(int argc, char **argv) {
    const char *decl_path = NULL, *header = NULL, *source = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--header") == 0 && i + 1 < argc) {
            header = argv[++i];
        } else if (strcmp(argv[i], "--source") == 0 && i + 1 < argc) {
            source = argv[++i];
        } else if (argv[i][0] != '-' && !decl_path) {
            decl_path = argv[i];
        } else {
            fprintf(stderr, "cinder-extgen: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!decl_path || !header || !source) {
        usage(stderr);
        return 2;
    }

    xg_diag_init(decl_path);
    size_t len = 0;
    char *text = read_file(decl_path, &len);
    if (!text) xg_fatal(0, "cannot read the declaration file");

    xg_decl decl = {.path = decl_path, .basename = base_name(decl_path)};
    int status = 1;
    if (xg_parse_text(&decl, text, len) == 0 &&
        xg_emit(&decl, header, source, base_name(header)) == 0)
        status = 0;
    xg_arena_free();
    return status;
}
