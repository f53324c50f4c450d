/* cinder-extgen: the arena every part of the model comes from, and the one diagnostic path
 * (`file:line: error: message`, the format compilers use, so editors can jump to it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extgen.h"

/* ---- arena --------------------------------------------------------------------------------- */

typedef struct block {
    struct block *next;
    size_t used, size;
    max_align_t data[]; /* keeps every allocation aligned for any type */
} block;

static block *arena;

void *xg_alloc(size_t nbytes) {
    size_t need = (nbytes + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (!arena || arena->size - arena->used < need) {
        size_t size = need > 65536 ? need : 65536;
        block *b = malloc(sizeof(block) + size);
        if (!b) {
            fprintf(stderr, "cinder-extgen: out of memory\n");
            exit(1);
        }
        b->next = arena;
        b->used = 0;
        b->size = size;
        arena = b;
    }
    void *p = (char *)arena->data + arena->used;
    arena->used += need;
    memset(p, 0, need);
    return p;
}

char *xg_strdup(const char *s, size_t len) {
    char *d = xg_alloc(len + 1);
    memcpy(d, s, len);
    return d;
}

void xg_arena_free(void) {
    while (arena) {
        block *next = arena->next;
        free(arena);
        arena = next;
    }
}

/* Capacity is implicit: 4 below 4 elements, else the next power of two, so the array moves
 * exactly when n reaches 4, 8, 16, ... (the old copy stays in the arena until the end). */
void *xg_push(void *arr_ptr, int *n, size_t elem) {
    char **arr = arr_ptr;
    int used = *n;
    if (used == 0 || (used >= 4 && (used & (used - 1)) == 0)) {
        size_t cap = used == 0 ? 4 : (size_t)used * 2;
        char *grown = xg_alloc(cap * elem);
        if (used) memcpy(grown, *arr, (size_t)used * elem);
        *arr = grown;
    }
    *n = used + 1;
    return *arr + (size_t)used * elem;
}

/* ---- diagnostics --------------------------------------------------------------------------- */

static const char *diag_path = "<input>";
static int diag_errors;
static int diag_quiet;
static jmp_buf *fatal_jump; /* while xg_parse_text runs: where xg_fatal returns to */

void xg_diag_init(const char *path) { diag_path = path; }

void xg_diag_quiet(int quiet) { diag_quiet = quiet; }

static void vreport(int line, const char *fmt, va_list ap) {
    if (diag_quiet) { /* formatted all the same, so a fuzzer exercises the messages */
        char buf[1024];
        vsnprintf(buf, sizeof buf, fmt, ap);
        diag_errors++;
        return;
    }
    if (line > 0)
        fprintf(stderr, "%s:%d: error: ", diag_path, line);
    else
        fprintf(stderr, "%s: error: ", diag_path);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    diag_errors++;
}

void xg_error(int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(line, fmt, ap);
    va_end(ap);
}

void xg_fatal(int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(line, fmt, ap);
    va_end(ap);
    if (fatal_jump) longjmp(*fatal_jump, 1);
    xg_arena_free();
    exit(1);
}

int xg_error_count(void) { return diag_errors; }

int xg_parse_text(xg_decl *decl, const char *text, size_t len) {
    diag_errors = 0;
    if (memchr(text, '\0', len)) {
        xg_error(0, "the declaration file contains a NUL byte");
        return diag_errors;
    }
    jmp_buf here;
    fatal_jump = &here;
    if (setjmp(here) == 0) xg_parse(decl, text, len);
    fatal_jump = NULL;
    return diag_errors;
}

const char *xg_kind_name(xg_kind k) {
    return k == XG_FLOAT ? "float" : k == XG_INT ? "int" : k == XG_BOOL ? "bool" : "quantized";
}
