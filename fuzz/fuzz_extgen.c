/* libFuzzer harness: cinder-extgen's declaration language (tools/cinder-extgen: lexer, parser,
 * checks, emitter). The input is a declaration file. It is parsed as the tool parses it
 * (xg_parse_text, which returns where the tool would exit on a syntax error); a declaration
 * without errors is emitted to two scratch files, as the tool writes them. The arena is freed
 * after each input, so LeakSanitizer sees anything kept outside it, and a parse that reported no
 * error must have produced a complete model (an extension name and at least one op). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "extgen.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=1"; }

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    xg_diag_quiet(1); /* a message per input on stderr would cost more than the parse */
    return 0;
}

static char header_path[256], source_path[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!header_path[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(header_path, sizeof header_path, "%s/cinder-fuzz-%ld-ext.h", dir,
                 (long)getpid());
        snprintf(source_path, sizeof source_path, "%s/cinder-fuzz-%ld-ext.c", dir,
                 (long)getpid());
    }
    /* the tool hands the parser an arena copy, NUL-terminated; so does this */
    char *text = xg_strdup((const char *)data, size);
    xg_decl decl = {.path = "fuzz.cnext", .basename = "fuzz.cnext"};
    xg_diag_init(decl.path);
    int errors = xg_parse_text(&decl, text, size);
    if (errors == 0) {
        if (!decl.ext || decl.n_ops < 1) {
            fprintf(stderr, "fuzz invariant broken: a declaration without errors has %s and %d "
                            "ops\n", decl.ext ? "a name" : "no name", decl.n_ops);
            abort();
        }
        if (xg_emit(&decl, header_path, source_path, "ext.h") != 0) {
            fprintf(stderr, "fuzz: cannot write %s or %s\n", header_path, source_path);
            abort();
        }
    }
    xg_arena_free();
    return 0;
}
