/* cinder-extgen: writes the generated header and source from a checked declaration.
 *
 * Header: the composite types, one typed function per op, the prototypes of what the user writes
 * (shape function, kernel per backend, backward), and enums naming each slot of the kernel's
 * in[] / out[] / ints[] / reals[]. Source: one static schema per op, <ext>_register (pthread_once),
 * and the typed functions, which flatten their arguments into schema order and call the router
 * through cn_ext_call. Both files are written to a temporary name and renamed into place, so a
 * failed run never leaves half a file for the build to pick up. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extgen.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static FILE *f; /* the file being written */

static void out(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static void out(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
}

/* s as the body of a C string literal. */
static void out_c_string(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            out("\\%c", c);
        else if (isprint(c))
            out("%c", c);
        else
            out("\\%03o", c);
    }
}

static const char *upper(const char *s) {
    char *u = xg_strdup(s, strlen(s));
    for (char *c = u; *c; c++)
        *c = (char)toupper((unsigned char)*c);
    return u;
}

static const char *kind_enum(xg_kind k) {
    return k == XG_FLOAT ? "CN_KIND_FLOAT" : k == XG_INT ? "CN_KIND_INT"
                         : k == XG_BOOL ? "CN_KIND_BOOL" : "CN_KIND_QUANTIZED";
}

static int count_params(const xg_op *op, xg_param_what what) {
    int n = 0;
    for (int i = 0; i < op->n_params; i++)
        n += op->params[i].what == what;
    return n;
}

static int type_has_tensors(const xg_type *t) {
    for (int v = 0; v < t->n_variants; v++)
        if (t->variants[v].n_members) return 1;
    return 0;
}

static void rule(const char *title) {
    int n = (int)strlen(title);
    out("\n/* ---- %s ", title);
    for (int i = n + 12; i < 100; i++)
        out("-");
    out(" */\n");
}

/* The declaration of op, as the user wrote it, for comments. */
static void out_op_signature(const xg_op *op) {
    out("%s(", op->name);
    for (int i = 0; i < op->n_params; i++) {
        const xg_param *p = &op->params[i];
        if (i) out(", ");
        if (p->what == PARAM_TENSOR)
            out("%s %s%s", xg_kind_name(p->kind), p->name, p->optional ? "?" : "");
        if (p->what == PARAM_COMPOSITE) out("%s %s", p->type->name, p->name);
        if (p->what == PARAM_INT) out("attr int %s", p->name);
        if (p->what == PARAM_REAL) out("attr real %s", p->name);
    }
    out(") -> (");
    for (int i = 0; i < op->n_outputs; i++)
        out("%s%s %s", i ? ", " : "", xg_kind_name(op->outputs[i].kind), op->outputs[i].name);
    out(")");
}

/* The typed function's declarator, `<ret><ext>_<op>(<params>)`, wrapped at 100 columns with
 * continuation lines indented by four (shared by the header and the source). */
static void out_declarator(const xg_decl *d, const xg_op *op) {
    char parts[64][300];
    int n = 0;
    for (int i = 0; i < op->n_params && n < 64; i++) {
        const xg_param *p = &op->params[i];
        if (p->what == PARAM_TENSOR) snprintf(parts[n++], 300, "cn_tensor *%s", p->name);
        if (p->what == PARAM_COMPOSITE)
            snprintf(parts[n++], 300, "%s_%s %s", d->ext, p->type->name, p->name);
        if (p->what == PARAM_INT) snprintf(parts[n++], 300, "int64_t %s", p->name);
        if (p->what == PARAM_REAL) snprintf(parts[n++], 300, "double %s", p->name);
    }
    for (int i = 0; op->n_outputs > 1 && i < op->n_outputs && n < 64; i++)
        snprintf(parts[n++], 300, "cn_tensor **out_%s", op->outputs[i].name);
    if (n == 0) snprintf(parts[n++], 300, "void");
    char head[300];
    int col = snprintf(head, sizeof head, "%s%s_%s(",
                       op->n_outputs == 1 ? "cn_tensor *" : "cn_status ", d->ext, op->name);
    out("%s", head);
    for (int i = 0; i < n; i++) {
        int len = (int)strlen(parts[i]) + (i ? 2 : 0) + (i == n - 1 ? 3 : 1);
        if (i && col + len > 100) {
            out(",\n    %s", parts[i]);
            col = 4 + (int)strlen(parts[i]);
        } else {
            out("%s%s", i ? ", " : "", parts[i]);
            col += len - (i == n - 1 ? 3 : 1);
        }
    }
    out(")");
}

static const char *const backend_names[] = {"cpu", "cuda"};

/* ---- header -------------------------------------------------------------------------------- */

static void emit_struct(const xg_decl *d, const xg_type *t) {
    out("typedef struct %s_%s {\n", d->ext, t->name);
    for (int m = 0; m < t->n_members; m++) {
        const xg_member *mb = &t->members[m];
        out("    cn_tensor *%s; /* %s%s */\n", mb->name, xg_kind_name(mb->kind),
            mb->optional ? ", optional: may be NULL" : "");
    }
    out("} %s_%s;\n", d->ext, t->name);
}

static void emit_union(const xg_decl *d, const xg_type *t) {
    const char *E = upper(d->ext), *T = upper(t->name);
    out("typedef enum %s_%s_tag {\n", d->ext, t->name);
    for (int v = 0; v < t->n_variants; v++)
        out("    %s_%s_%s = %d,\n", E, T, upper(t->variants[v].name), v);
    out("} %s_%s_tag;\n\n", d->ext, t->name);
    out("typedef struct %s_%s {\n    %s_%s_tag tag;\n", d->ext, t->name, d->ext, t->name);
    if (type_has_tensors(t)) {
        out("    union { /* the members of the variant named by tag */\n");
        for (int v = 0; v < t->n_variants; v++) {
            const xg_variant *va = &t->variants[v];
            if (!va->n_members) continue;
            out("        struct {\n");
            for (int m = 0; m < va->n_members; m++)
                out("            cn_tensor *%s; /* %s%s */\n", va->members[m].name,
                    xg_kind_name(va->members[m].kind),
                    va->members[m].optional ? ", optional: may be NULL" : "");
            out("        } %s;\n", va->name);
        }
        out("    } as;\n");
    }
    out("} %s_%s;\n", d->ext, t->name);
    /* One constructor per variant. Its parameters are the members' names; everything else in
     * it is a keyword, a generated name or cnx_ (which user names cannot start with), so no
     * member name can collide with it. The value starts zeroed, so the inactive members are
     * NULL: `T()` in C++, the universal zero initializer in C (either is the other's error). */
    for (int v = 0; v < t->n_variants; v++) {
        const xg_variant *va = &t->variants[v];
        out("\nstatic inline %s_%s %s_%s_%s(", d->ext, t->name, d->ext, t->name, va->name);
        for (int m = 0; m < va->n_members; m++)
            out("%scn_tensor *%s", m ? ", " : "", va->members[m].name);
        out("%s) {\n", va->n_members ? "" : "void");
        out("#ifdef __cplusplus\n    %s_%s cnx_value = %s_%s();\n#else\n"
            "    %s_%s cnx_value = {0};\n#endif\n",
            d->ext, t->name, d->ext, t->name, d->ext, t->name);
        out("    cnx_value.tag = %s_%s_%s;\n", E, T, upper(va->name));
        for (int m = 0; m < va->n_members; m++)
            out("    cnx_value.as.%s.%s = %s;\n", va->name, va->members[m].name,
                va->members[m].name);
        out("    return cnx_value;\n}\n");
    }
}

/* The kernel-side slot of every tensor, attribute and output, as enumerators. */
static void emit_slots(const xg_decl *d, const xg_op *op) {
    const char *P = upper(d->ext), *O = upper(op->name);
    int slot = 0, ints = 0, reals = 0;
    out("enum {\n");
    for (int i = 0; i < op->n_params; i++) {
        const xg_param *p = &op->params[i];
        const char *N = upper(p->name);
        if (p->what == PARAM_TENSOR) out("    %s_%s_IN_%s = %d,\n", P, O, N, slot++);
        if (p->what == PARAM_INT) out("    %s_%s_INT_%s = %d,\n", P, O, N, ints++);
        if (p->what == PARAM_REAL) out("    %s_%s_REAL_%s = %d,\n", P, O, N, reals++);
        if (p->what != PARAM_COMPOSITE) continue;
        const xg_type *t = p->type;
        for (int m = 0; !t->is_union && m < t->n_members; m++)
            out("    %s_%s_IN_%s_%s = %d,\n", P, O, N, upper(t->members[m].name), slot++);
        for (int v = 0; t->is_union && v < t->n_variants; v++)
            for (int m = 0; m < t->variants[v].n_members; m++)
                out("    %s_%s_IN_%s_%s_%s = %d,\n", P, O, N, upper(t->variants[v].name),
                    upper(t->variants[v].members[m].name), slot++);
    }
    out("    %s_%s_N_IN = %d,\n", P, O, slot);
    for (int i = 0; i < op->n_outputs; i++)
        out("    %s_%s_OUT_%s = %d,\n", P, O, upper(op->outputs[i].name), i);
    out("    %s_%s_N_OUT = %d\n};\n", P, O, op->n_outputs);
}

static void emit_op_header(const xg_decl *d, const xg_op *op) {
    char title[300];
    snprintf(title, sizeof title, "op %s (%s:%d)", op->name, d->basename, op->line);
    rule(title);
    out("/* ");
    out_op_signature(op);
    out("\n * backends:");
    for (int i = 0; i < 2; i++)
        if (op->backends & (1u << i)) out(" %s", backend_names[i]);
    if (op->backends & XG_BACKEND_AUTODIFF) out(" autodiff");
    out(".\n");
    if (op->n_outputs == 1)
        out(" * Returns a new reference, or NULL with the error set (error.h). */\n");
    else
        out(" * Writes a new reference to each out_ pointer (NULL on failure) and returns CN_OK or "
            "the\n * error status. */\n");
    out_declarator(d, op);
    out(";\n\n");

    out("/* Slots of the kernel's in[] / out[] / ints[] / reals[] (and of the backward's arrays):\n"
        " * composite members are flattened in declaration order; absent inputs have data NULL\n"
        " * and ndim -1 in a kernel, and are NULL in the backward. */\n");
    emit_slots(d, op);

    out("\n/* Written by you: the output geometry, one kernel per backend%s. */\n",
        op->backends & XG_BACKEND_AUTODIFF
            ? ", and the backward (each grad_in\n * entry hands cinder one reference: a tensor "
              "you made as it is, one you were given\n * cn_retain-ed; see cinder/extension.h)"
            : "");
    out("cn_status %s_%s_shape(\n    const cn_view *in, int n_in, const int64_t *ints, const "
        "double *reals, cn_view *out, int n_out);\n",
        d->ext, op->name);
    if (op->backends & XG_BACKEND_CPU)
        out("cn_status %s_%s_cpu(const cn_kernel_args *args);\n", d->ext, op->name);
    if (op->backends & XG_BACKEND_CUDA)
        out("#ifdef CINDER_HAVE_CUDA\ncn_status %s_%s_cuda(const cn_kernel_args *args);\n#endif\n",
            d->ext, op->name);
    if (op->backends & XG_BACKEND_AUTODIFF)
        out("cn_status %s_%s_backward(\n"
            "    cn_tensor *const *in, const int *needs_grad, int n_in, cn_tensor *const *out,\n"
            "    cn_tensor *const *grad_out,"
            " int n_out,\n    const int64_t *ints, const double *reals, cn_tensor **grad_in);\n",
            d->ext, op->name);
}

static void emit_header(const xg_decl *d) {
    const char *E = upper(d->ext);
    out("/* Generated by cinder-extgen from %s: do not edit (edit the declaration instead).\n",
        d->basename);
    out(" *\n * Extension '%s': one typed function per op, which routes like a built-in op (see\n"
        " * cinder/extension.h and docs/extensions.md). */\n",
        d->ext);
    out("#ifndef %s_EXTENSION_GENERATED_H\n#define %s_EXTENSION_GENERATED_H\n\n", E, E);
    out("#include <stdint.h>\n\n#include \"cinder/extension.h\"\n\n");
    out("#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
    out("/* Defines every op of the extension and registers its kernels and backwards. Idempotent\n"
        " * and thread-safe; the typed functions call it themselves. A failure is remembered and\n"
        " * reported again by every later call. */\n");
    out("cn_status %s_register(void);\n", d->ext);
    for (int i = 0; i < d->n_types; i++) {
        const xg_type *t = &d->types[i];
        char title[300];
        snprintf(title, sizeof title, "%s %s (%s:%d)", t->is_union ? "union" : "struct", t->name,
                 d->basename, t->line);
        rule(title);
        if (t->is_union)
            emit_union(d, t);
        else
            emit_struct(d, t);
    }
    for (int i = 0; i < d->n_ops; i++)
        emit_op_header(d, &d->ops[i]);
    out("\n#ifdef __cplusplus\n}\n#endif\n#endif\n");
}

/* ---- source -------------------------------------------------------------------------------- */

static void emit_schema(const xg_decl *d, const xg_op *op) {
    const char *o = op->name;
    int n_tensors = xg_op_tensor_count(op), n_groups = count_params(op, PARAM_COMPOSITE);
    int n_ints = count_params(op, PARAM_INT), n_reals = count_params(op, PARAM_REAL);
    out("\n/* ");
    out_op_signature(op);
    out(" */\n");
    if (n_tensors) {
        out("static const cn_ext_tensor_arg cnx_%s_tensors[] = {\n", o);
        int group = 0;
        for (int i = 0; i < op->n_params; i++) {
            const xg_param *p = &op->params[i];
            if (p->what == PARAM_TENSOR)
                out("    {\"%s\", %s, %d, -1, 0},\n", p->name, kind_enum(p->kind), p->optional);
            if (p->what != PARAM_COMPOSITE) continue;
            const xg_type *t = p->type;
            for (int m = 0; !t->is_union && m < t->n_members; m++)
                out("    {\"%s.%s\", %s, %d, %d, 0},\n", p->name, t->members[m].name,
                    kind_enum(t->members[m].kind), t->members[m].optional, group);
            for (int v = 0; t->is_union && v < t->n_variants; v++)
                for (int m = 0; m < t->variants[v].n_members; m++) {
                    const xg_member *mb = &t->variants[v].members[m];
                    out("    {\"%s.%s.%s\", %s, %d, %d, %d},\n", p->name, t->variants[v].name,
                        mb->name, kind_enum(mb->kind), mb->optional, group, v);
                }
            group++;
        }
        out("};\n");
    }
    if (n_groups) {
        out("static const cn_ext_group cnx_%s_groups[] = {\n", o);
        for (int i = 0; i < op->n_params; i++) {
            const xg_param *p = &op->params[i];
            if (p->what != PARAM_COMPOSITE) continue;
            if (p->type->is_union)
                out("    {\"%s\", CN_EXT_UNION, %d, cnx_%s_variants},\n", p->name,
                    p->type->n_variants, p->type->name);
            else
                out("    {\"%s\", CN_EXT_STRUCT, 0, NULL},\n", p->name);
        }
        out("};\n");
    }
    static const char *const what_names[] = {NULL, NULL, "ints", "reals"};
    for (int what = PARAM_INT; what <= PARAM_REAL; what++) {
        if (!count_params(op, (xg_param_what)what)) continue;
        out("static const char *const cnx_%s_%s[] = {", o, what_names[what]);
        int first = 1;
        for (int i = 0; i < op->n_params; i++)
            if (op->params[i].what == (xg_param_what)what) {
                out("%s\"%s\"", first ? "" : ", ", op->params[i].name);
                first = 0;
            }
        out("};\n");
    }
    out("static const char *const cnx_%s_outputs[] = {", o);
    for (int i = 0; i < op->n_outputs; i++)
        out("%s\"%s\"", i ? ", " : "", op->outputs[i].name);
    out("};\n");

    out("static const cn_ext_schema cnx_%s_schema = {\n", o);
    out("    .name = \"%s_%s\",\n", d->ext, o);
    out("    .n_tensors = %d,\n    .tensors = %s%s%s,\n", n_tensors, n_tensors ? "cnx_" : "NULL",
        n_tensors ? o : "", n_tensors ? "_tensors" : "");
    out("    .n_groups = %d,\n    .groups = %s%s%s,\n", n_groups, n_groups ? "cnx_" : "NULL",
        n_groups ? o : "", n_groups ? "_groups" : "");
    out("    .n_ints = %d,\n    .int_names = %s%s%s,\n", n_ints, n_ints ? "cnx_" : "NULL",
        n_ints ? o : "", n_ints ? "_ints" : "");
    out("    .n_reals = %d,\n    .real_names = %s%s%s,\n", n_reals, n_reals ? "cnx_" : "NULL",
        n_reals ? o : "", n_reals ? "_reals" : "");
    out("    .n_outputs = %d,\n    .output_names = cnx_%s_outputs,\n", op->n_outputs, o);
    out("    .shape = %s_%s_shape,\n", d->ext, o);
    static const char *const flag_names[] = {"CN_EXT_NON_DIFFERENTIABLE", "CN_EXT_MEMORY_BOUND",
                                             "CN_EXT_SAME_TRACKING"};
    out("    .flags = ");
    int any = 0;
    for (int i = 0; i < 3; i++)
        if (op->flags & (1u << i)) out("%s%s", any++ ? " | " : "", flag_names[i]);
    out("%s,\n};\nstatic const cn_ext_op *cnx_op_%s;\n", any ? "" : "0", o);
}

static void emit_register(const xg_decl *d) {
    rule("registration");
    out("static pthread_once_t cnx_once = PTHREAD_ONCE_INIT;\n");
    out("static cn_status cnx_status;\nstatic char cnx_message[1024];\n\n");
    out("static cn_status cnx_register_all(void) {\n    cn_status s = CN_OK;\n");
    for (int i = 0; i < d->n_ops; i++) {
        const xg_op *op = &d->ops[i];
        const char *o = op->name;
        out("    if (!(cnx_op_%s = cn_ext_define(&cnx_%s_schema)))\n", o, o);
        out("        return cn_last_status() != CN_OK ? cn_last_status() : CN_ERR_INVALID_ARG;\n");
        if (op->backends & XG_BACKEND_CPU)
            out("    s = cn_ext_register_kernel(cnx_op_%s, \"cpu\", %s_%s_cpu);\n"
                "    if (s != CN_OK) return s;\n",
                o, d->ext, o);
        if (op->backends & XG_BACKEND_CUDA)
            out("#ifdef CINDER_HAVE_CUDA\n"
                "    s = cn_ext_register_kernel(cnx_op_%s, \"cuda\", %s_%s_cuda);\n"
                "    if (s != CN_OK) return s;\n#endif\n",
                o, d->ext, o);
        if (op->backends & XG_BACKEND_AUTODIFF)
            out("    s = cn_ext_register_backward(cnx_op_%s, %s_%s_backward);\n"
                "    if (s != CN_OK) return s;\n",
                o, d->ext, o);
    }
    out("    (void)s;\n    return CN_OK;\n}\n\n");
    out("static void cnx_register_once(void) {\n    cnx_status = cnx_register_all();\n");
    out("    if (cnx_status != CN_OK) snprintf(cnx_message, sizeof cnx_message, \"%%s\", "
        "cn_last_error());\n}\n\n");
    out("cn_status %s_register(void) {\n", d->ext);
    out("    pthread_once(&cnx_once, cnx_register_once);\n");
    out("    if (cnx_status == CN_OK) return CN_OK;\n");
    out("    return cn_set_error(cnx_status, \"%s_register\",\n", d->ext);
    out("                        \"registering the ops declared in ");
    out_c_string(d->basename);
    out(" failed: %%s\", cnx_message);\n}\n");
}

/* The statements that fail the typed function with the error set by `call`. */
static void out_fail(const xg_op *op, const char *call) {
    if (op->n_outputs == 1)
        out("        %s;\n        return NULL;\n", call);
    else
        out("        return %s;\n", call);
}

static void emit_typed(const xg_decl *d, const xg_op *op) {
    const char *o = op->name;
    int n_tensors = xg_op_tensor_count(op), n_groups = count_params(op, PARAM_COMPOSITE);
    int n_ints = count_params(op, PARAM_INT), n_reals = count_params(op, PARAM_REAL);
    int single = op->n_outputs == 1;

    out("\n");
    out_declarator(d, op);
    out(" {\n");
    if (n_tensors) out("    cn_tensor *cnx_in[%d];\n", n_tensors);
    if (n_groups) out("    int cnx_tags[%d];\n", n_groups);
    for (int what = PARAM_INT; what <= PARAM_REAL; what++) {
        int n = what == PARAM_INT ? n_ints : n_reals;
        if (!n) continue;
        out("    const %s cnx_%s[%d] = {", what == PARAM_INT ? "int64_t" : "double",
            what == PARAM_INT ? "ints" : "reals", n);
        int first = 1;
        for (int i = 0; i < op->n_params; i++)
            if (op->params[i].what == (xg_param_what)what) {
                out("%s%s", first ? "" : ", ", op->params[i].name);
                first = 0;
            }
        out("};\n");
    }
    out("    cn_tensor *cnx_out[%d];\n    cn_status cnx_s;\n", op->n_outputs);
    if (single) {
        out("    if (%s_register() != CN_OK) return NULL;\n", d->ext);
    } else {
        for (int i = 0; i < op->n_outputs; i++)
            out("    if (out_%s) *out_%s = NULL;\n", op->outputs[i].name, op->outputs[i].name);
        out("    if (");
        for (int i = 0; i < op->n_outputs; i++)
            out("%s!out_%s", i ? " || " : "", op->outputs[i].name);
        out(")\n        return cn_set_error(CN_ERR_NULL_ARG, \"%s_%s\",\n", d->ext, o);
        out("                            \"pass a place for every output; one of\"\n"
            "                            \" ");
        for (int i = 0; i < op->n_outputs; i++)
            out("%sout_%s", i ? ", " : "", op->outputs[i].name);
        out(" is NULL\");\n");
        out("    if ((cnx_s = %s_register()) != CN_OK) return cnx_s;\n", d->ext);
    }

    int slot = 0, group = 0;
    for (int i = 0; i < op->n_params; i++) {
        const xg_param *p = &op->params[i];
        if (p->what == PARAM_TENSOR) out("    cnx_in[%d] = %s;\n", slot++, p->name);
        if (p->what != PARAM_COMPOSITE) continue;
        const xg_type *t = p->type;
        if (!t->is_union) {
            for (int m = 0; m < t->n_members; m++)
                out("    cnx_in[%d] = %s.%s;\n", slot++, p->name, t->members[m].name);
            out("    cnx_tags[%d] = 0;\n", group++);
            continue;
        }
        int first = slot;
        for (int v = 0; v < t->n_variants; v++)
            for (int m = 0; m < t->variants[v].n_members; m++)
                out("    cnx_in[%d] = NULL;\n", slot++);
        out("    cnx_tags[%d] = (int)%s.tag;\n", group++, p->name);
        out("    switch (%s.tag) {\n", p->name);
        int s = first;
        for (int v = 0; v < t->n_variants; v++) {
            const xg_variant *va = &t->variants[v];
            out("    case %s_%s_%s:\n", upper(d->ext), upper(t->name), upper(va->name));
            for (int m = 0; m < va->n_members; m++)
                out("        cnx_in[%d] = %s.as.%s.%s;\n", s++, p->name, va->name,
                    va->members[m].name);
            out("        break;\n");
        }
        out("    default:\n");
        char call[600];
        snprintf(call, sizeof call,
                 "cn_set_error(CN_ERR_INVALID_ARG, \"%s_%s\",\n"
                 "                     \"%s.tag = %%d names no variant of union %s (0 to %d)\",\n"
                 "                     (int)%s.tag)",
                 d->ext, o, p->name, t->name, t->n_variants - 1, p->name);
        out_fail(op, call);
        out("    }\n");
    }

    out("    cnx_s = cn_ext_call(cnx_op_%s, CN_EXT_ROUTE_AUTO,\n"
        "                        %s, %s, %s, %s, cnx_out);\n",
        o, n_tensors ? "cnx_in" : "NULL", n_groups ? "cnx_tags" : "NULL",
        n_ints ? "cnx_ints" : "NULL", n_reals ? "cnx_reals" : "NULL");
    if (single) {
        out("    return cnx_s == CN_OK ? cnx_out[0] : NULL;\n}\n");
    } else {
        for (int i = 0; i < op->n_outputs; i++)
            out("    *out_%s = cnx_out[%d];\n", op->outputs[i].name, i);
        out("    return cnx_s;\n}\n");
    }
}

static void emit_source(const xg_decl *d, const char *header_name) {
    out("/* Generated by cinder-extgen from %s: do not edit (edit the declaration instead). */\n",
        d->basename);
    out("#include \"");
    out_c_string(header_name);
    out("\"\n\n#include <pthread.h>\n#include <stdio.h>\n");
    rule("schemas");
    for (int i = 0; i < d->n_types; i++) {
        const xg_type *t = &d->types[i];
        if (!t->is_union) continue;
        out("static const char *const cnx_%s_variants[] = {", t->name);
        for (int v = 0; v < t->n_variants; v++)
            out("%s\"%s\"", v ? ", " : "", t->variants[v].name);
        out("};\n");
    }
    for (int i = 0; i < d->n_ops; i++)
        emit_schema(d, &d->ops[i]);
    emit_register(d);
    rule("typed functions");
    for (int i = 0; i < d->n_ops; i++)
        emit_typed(d, &d->ops[i]);
}

/* ---- files --------------------------------------------------------------------------------- */

static int write_file(const char *path, void (*body)(const xg_decl *, const char *),
                      const xg_decl *d, const char *arg) {
    size_t n = strlen(path);
    char *tmp = xg_alloc(n + 8);
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "cinder-extgen: cannot write %s\n", tmp);
        return -1;
    }
    body(d, arg);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    f = NULL;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "cinder-extgen: cannot write %s\n", path);
        remove(tmp);
        return -1;
    }
    return 0;
}

static void header_body(const xg_decl *d, const char *unused) {
    (void)unused;
    emit_header(d);
}

int xg_emit(const xg_decl *d, const char *header_path, const char *source_path,
            const char *header_name) {
    if (write_file(header_path, header_body, d, NULL) != 0) return -1;
    return write_file(source_path, emit_source, d, header_name);
}
