/* docs/ops.md against the op table: every op of the table has its row there, and the row's
 * gradient and CPU dtype columns say what the op table and the CPU backend say. With
 * CINDER_PRINT_OPS=1 it prints the columns it expects, one line per op (to write new rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/backend.h"
#include "cinder/cinder.h"
#include "core/op_table.h"
#include "harness.h"

#ifndef DOCS_DIR
#error "DOCS_DIR is set by tests/CMakeLists.txt"
#endif

/* The dtypes the CPU backend runs op on, as "f32 f64 ...", or "-" without a kernel. */
static void cpu_dtypes(int op, char *out, size_t cap) {
    const cn__op_decl *d = cn__op_decl_of(op);
    const cn_backend *cpu = cn_backend_get(CN_BACKEND_CPU);
    uint32_t mask;
    if (op < CN_OP_COUNT && !cpu->kernels[op]) {
        snprintf(out, cap, "-");
        return;
    }
    uint32_t accepts = d->n_in != 0 ? cn__kinds_dtypes_table[d->kinds[d->value_from]]
                                    : cn__kinds_dtypes_table[CN_KINDS_ALL]; /* no quantized */
    if (op == CN_OP_RAND_UNIFORM || op == CN_OP_RAND_NORMAL) /* floats only (creation.c) */
        accepts = cn__kinds_dtypes_table[CN_KINDS_FLOAT];
    mask = op < CN_OP_COUNT && cpu->dtypes[op] ? cpu->dtypes[op] & accepts : accepts;
    out[0] = '\0';
    for (int t = 0; t < CN_DTYPE_COUNT; t++)
        if ((mask >> t) & 1u) {
            size_t len = strlen(out);
            snprintf(out + len, cap - len, "%s%s", len ? " " : "", cn_dtype_name((cn_dtype)t));
        }
}

/* The cells of the row of docs/ops.md whose first cell is `name` (backquoted), split at '|'. */
static int find_row(const char *doc, const char *name, char cells[8][160]) {
    char key[96];
    snprintf(key, sizeof key, "\n| `%s` |", name);
    const char *p = strstr(doc, key);
    if (!p) return 0;
    p += 2; /* past "\n|" */
    int n = 0;
    while (n < 8 && *p && *p != '\n') {
        size_t len = strcspn(p, "|\n");
        const char *b = p, *e = p + len;
        while (b < e && *b == ' ') b++;
        while (e > b && e[-1] == ' ') e--;
        snprintf(cells[n], 160, "%.*s", (int)(e - b), b);
        n++;
        p += len;
        if (*p == '|') p++;
    }
    return n;
}

static void test_every_op_has_a_true_row(void) {
    size_t len = 0;
    char *doc = (char *)th_read_file(DOCS_DIR "/ops.md", &len);
    CHECK(doc != NULL);
    if (!doc) return;
    int print = getenv("CINDER_PRINT_OPS") != NULL;
    for (int op = 0; op < CN__OP_ALL; op++) {
        const cn__op_decl *d = cn__op_decl_of(op);
        char dtypes[160], cells[8][160], name[96];
        cpu_dtypes(op, dtypes, sizeof dtypes);
        const char *grad = d->differentiable ? "yes" : "no";
        if (print) printf("| `%s` | | %s | %s | | |\n", d->name, dtypes, grad);
        snprintf(name, sizeof name, "`%s`", d->name);
        int n = find_row(doc, d->name, cells);
        if (n < 4) {
            fprintf(stderr, "docs/ops.md has no row for '%s'\n", d->name);
            th_checks_failed++;
            continue;
        }
        /* cells: op, call, CPU dtypes, gradient, PyTorch, burn */
        if (strcmp(cells[2], dtypes) != 0 || strcmp(cells[3], grad) != 0) {
            fprintf(stderr, "docs/ops.md row '%s': CPU dtypes '%s' gradient '%s'; the op table and "
                    "the CPU backend say '%s' and '%s'\n", d->name, cells[2], cells[3], dtypes,
                    grad);
            th_checks_failed++;
        }
    }
    free(doc);
}

int main(void) {
    RUN(test_every_op_has_a_true_row);
    return th_finish();
}
