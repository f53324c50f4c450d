/* cinder-extgen: the parser and the checks, in one pass over the tokens.
 *
 * Grammar (docs/extensions.md has the prose):
 *   file    := 'extension' NAME ';' item*
 *   item    := struct | union | op
 *   struct  := 'struct' NAME '{' (member ';')* '}' ';'?
 *   union   := 'union' NAME '{' (NAME ('(' member (',' member)* ')')? ';')* '}' ';'?
 *   member  := KIND NAME '?'?                     KIND := 'float' | 'int' | 'bool'
 *   op      := 'op' NAME '(' params? ')' '->' '(' outputs? ')' 'backends' '(' names ')' FLAG* ';'
 *   param   := KIND NAME '?'? | TYPE NAME | 'attr' ('int' | 'real') NAME
 *   output  := KIND NAME
 *   FLAG    := 'non_differentiable' | 'memory_bound' | 'same_tracking'
 * Syntax errors stop at once (xg_fatal). Semantic errors (unknown backend, missing outputs, a
 * malformed composite type, name clashes, ...) are reported with xg_error and parsing goes on, so
 * one run lists them all. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "extgen.h"

typedef struct parser {
    xg_lexer lx;
    xg_token tok; /* the current, not yet consumed token */
    xg_decl *decl;
} parser;

/* ---- tokens -------------------------------------------------------------------------------- */

static void advance(parser *p) { p->tok = xg_lex_next(&p->lx); }

static int is_punct(const parser *p, const char *s) {
    return p->tok.kind == TOK_PUNCT && strcmp(p->tok.text, s) == 0;
}

static int is_word(const parser *p, const char *s) {
    return p->tok.kind == TOK_IDENT && strcmp(p->tok.text, s) == 0;
}

static int accept_punct(parser *p, const char *s) {
    if (!is_punct(p, s)) return 0;
    advance(p);
    return 1;
}

static const char *describe(const xg_token *t) {
    return t->kind == TOK_EOF ? "end of file" : t->text;
}

static void expect_punct(parser *p, const char *s, const char *where) {
    if (!accept_punct(p, s))
        xg_fatal(p->tok.line, "expected '%s' %s, got '%s'", s, where, describe(&p->tok));
}

/* The current identifier, consumed. */
static const char *expect_ident(parser *p, const char *what) {
    if (p->tok.kind != TOK_IDENT)
        xg_fatal(p->tok.line, "expected %s, got '%s'", what, describe(&p->tok));
    const char *s = p->tok.text;
    advance(p);
    return s;
}

/* ---- names --------------------------------------------------------------------------------- */

/* Words that cannot name anything: C and C++ keywords (the header may be included from a .cu
 * file), and the declaration language's own words. */
static const char *const reserved[] = {"auto",
                                       "break",
                                       "case",
                                       "char",
                                       "const",
                                       "continue",
                                       "default",
                                       "do",
                                       "double",
                                       "else",
                                       "enum",
                                       "extern",
                                       "float",
                                       "for",
                                       "goto",
                                       "if",
                                       "inline",
                                       "int",
                                       "long",
                                       "register",
                                       "restrict",
                                       "return",
                                       "short",
                                       "signed",
                                       "sizeof",
                                       "static",
                                       "struct",
                                       "switch",
                                       "typedef",
                                       "union",
                                       "unsigned",
                                       "void",
                                       "volatile",
                                       "while",
                                       "bool",
                                       "true",
                                       "false",
                                       "class",
                                       "delete",
                                       "new",
                                       "namespace",
                                       "operator",
                                       "private",
                                       "protected",
                                       "public",
                                       "template",
                                       "this",
                                       "throw",
                                       "try",
                                       "catch",
                                       "typename",
                                       "using",
                                       "virtual",
                                       "friend",
                                       "mutable",
                                       "explicit",
                                       "nullptr",
                                       "export",
                                       "asm",
                                       "_Bool",
                                       "_Alignas",
                                       "_Alignof",
                                       "_Atomic",
                                       "_Generic",
                                       "_Noreturn",
                                       "_Static_assert",
                                       "_Thread_local",
                                       /* C++11 to C++20 and C23 keywords, and C++'s alternative
                                        * operator names (macros of <iso646.h> in C) */
                                       "alignas",
                                       "alignof",
                                       "and",
                                       "and_eq",
                                       "bitand",
                                       "bitor",
                                       "char8_t",
                                       "char16_t",
                                       "char32_t",
                                       "compl",
                                       "concept",
                                       "consteval",
                                       "constexpr",
                                       "constinit",
                                       "const_cast",
                                       "co_await",
                                       "co_return",
                                       "co_yield",
                                       "decltype",
                                       "dynamic_cast",
                                       "noexcept",
                                       "not",
                                       "not_eq",
                                       "or",
                                       "or_eq",
                                       "reinterpret_cast",
                                       "requires",
                                       "static_assert",
                                       "static_cast",
                                       "thread_local",
                                       "typeid",
                                       "typeof",
                                       "typeof_unqual",
                                       "wchar_t",
                                       "xor",
                                       "xor_eq",
                                       "extension",
                                       "op",
                                       "attr",
                                       "backends",
                                       "real",
                                       NULL};

/* Returns 0 after an error. */
static int check_name(int line, const char *name, const char *what) {
    for (int i = 0; reserved[i]; i++)
        if (strcmp(name, reserved[i]) == 0) {
            xg_error(line, "%s '%s' is a reserved word: choose another name", what, name);
            return 0;
        }
    if (strncmp(name, "cnx_", 4) == 0) {
        xg_error(line, "%s '%s': names starting with 'cnx_' are reserved for generated code", what,
                 name);
        return 0;
    }
    if (name[0] == '_' || strstr(name, "__")) {
        xg_error(line, "%s '%s': names starting with '_' or holding '__' are reserved for the C "
                 "and C++ implementations; choose another name", what, name);
        return 0;
    }
    return 1;
}

/* Identifiers the generated code uses, or that the headers it includes (<stdint.h>, <stdio.h>,
 * <pthread.h>) or the compiler (GNU modes) define as object-like macros: a parameter, member or
 * variant of that name would not compile, or would mean something else. */
static const char *const taken_names[] = {
    "NULL", "int64_t", "EOF", "BUFSIZ", "FILENAME_MAX", "FOPEN_MAX", "TMP_MAX", "L_tmpnam",
    "P_tmpdir", "CLOCKS_PER_SEC", "TIME_UTC", "stdin", "stdout", "stderr", "errno", "linux",
    "unix", "i386", NULL};

/* Uppercase families of those headers' macros: INT8_MAX, UINT64_C, SIZE_MAX, PTHREAD_ONCE_INIT. */
static const char *const taken_prefixes[] = {"INT", "UINT", "PTRDIFF_", "SIZE_", "SIG_",
                                             "WCHAR_", "WINT_", "PTHREAD_", "SCHED_", "CLOCK_",
                                             "CLONE_", "CPU_", "TIMER_", "SEEK_", NULL};

static int is_macro_family(const char *name) {
    for (const char *c = name; *c; c++)
        if (islower((unsigned char)*c)) return 0;
    for (int i = 0; taken_prefixes[i]; i++) {
        size_t n = strlen(taken_prefixes[i]);
        if (strncmp(name, taken_prefixes[i], n) != 0) continue;
        if (taken_prefixes[i][n - 1] == '_') return 1;
        /* INT and UINT: INT8_..., INT_FAST8_..., INTMAX_..., INTPTR_... */
        const char *rest = name + n;
        if (isdigit((unsigned char)*rest) || *rest == '_' || strncmp(rest, "MAX", 3) == 0 ||
            strncmp(rest, "PTR", 3) == 0)
            return 1;
    }
    return 0;
}

static int starts_with_nocase(const char *s, const char *prefix) {
    for (; *prefix; s++, prefix++)
        if (tolower((unsigned char)*s) != tolower((unsigned char)*prefix)) return 0;
    return 1;
}

/* Parameters, members and variants appear in the generated C as they are (as parameters and
 * member names, beside cinder's and the generated names), so on top of check_name they must not
 * be one of those names or start like them. Returns 0 after an error. */
static int check_plain_name(const parser *p, int line, const char *name, const char *what) {
    for (int i = 0; taken_names[i]; i++)
        if (strcmp(name, taken_names[i]) == 0) {
            xg_error(line, "%s '%s' is a name the generated C code uses or its headers define as "
                     "a macro: choose another name", what, name);
            return 0;
        }
    if (is_macro_family(name)) {
        xg_error(line, "%s '%s' looks like a macro of <stdint.h>, <stdio.h> or <pthread.h>, "
                 "which the generated C code includes: choose another name", what, name);
        return 0;
    }
    if (starts_with_nocase(name, "cn_")) {
        xg_error(line, "%s '%s': names starting with 'cn_' or 'CN_' are cinder's (types, "
                 "functions and constants the generated code uses): choose another name",
                 what, name);
        return 0;
    }
    const char *ext = p->decl->ext;
    size_t n = ext ? strlen(ext) : 0;
    if (n && starts_with_nocase(name, ext) && name[n] == '_') {
        xg_error(line, "%s '%s': names starting with '%s_' (in any case) are the generated "
                 "code's (its types, functions and constants): choose another name", what, name,
                 ext);
        return 0;
    }
    return 1;
}

/* Every C symbol the generated files declare, to report two things that would get the same one
 * at generation time rather than as a puzzling compiler error. */
typedef struct symbol {
    const char *name;
    const char *what;
    int line;
} symbol;

static symbol *symbols;
static int n_symbols;

static void claim(int line, const char *what, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void claim(int line, const char *what, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n_symbols; i++)
        if (strcmp(symbols[i].name, buf) == 0) {
            xg_error(line, "%s would generate the C name '%s', already generated for %s (line %d)",
                     what, buf, symbols[i].what, symbols[i].line);
            return;
        }
    symbol *s = xg_push(&symbols, &n_symbols, sizeof *s);
    s->name = xg_strdup(buf, strlen(buf));
    s->what = xg_strdup(what, strlen(what));
    s->line = line;
}

static char *upper(const char *s) {
    char *u = xg_strdup(s, strlen(s));
    for (char *c = u; *c; c++)
        *c = (char)toupper((unsigned char)*c);
    return u;
}

/* ---- composite types ----------------------------------------------------------------------- */

static int parse_kind_word(const char *w, xg_kind *k) {
    if (strcmp(w, "float") == 0)
        *k = XG_FLOAT;
    else if (strcmp(w, "int") == 0)
        *k = XG_INT;
    else if (strcmp(w, "bool") == 0)
        *k = XG_BOOL;
    else if (strcmp(w, "quantized") == 0)
        *k = XG_QUANTIZED;
    else
        return 0;
    return 1;
}

static const xg_type *find_type(const xg_decl *d, const char *name) {
    for (int i = 0; i < d->n_types; i++)
        if (strcmp(d->types[i].name, name) == 0) return &d->types[i];
    return NULL;
}

/* Skips to the `stop` punctuation (not consumed) or to '}' of a composite; EOF is fatal. */
static void recover(parser *p, const char *stop, int open_line) {
    while (!is_punct(p, stop) && !is_punct(p, "}")) {
        if (p->tok.kind == TOK_EOF) xg_fatal(open_line, "missing '}' for the '{' on this line");
        advance(p);
    }
}

/* member := KIND NAME '?'?  Returns 0 (after an error, leaving the rest for recover) when the
 * type is not a tensor kind. `owner` is "struct 'p'" or "union 'm'" for the message. */
static int parse_member(parser *p, xg_member *m, const char *owner) {
    m->line = p->tok.line;
    if (p->tok.kind != TOK_IDENT) {
        xg_error(p->tok.line, "malformed %s: expected a member, got '%s'", owner,
                 describe(&p->tok));
        return 0;
    }
    if (!parse_kind_word(p->tok.text, &m->kind)) {
        if (strcmp(p->tok.text, "attr") == 0)
            xg_error(p->tok.line,
                     "malformed %s: attributes belong to ops; a composite holds only tensors",
                     owner);
        else
            xg_error(p->tok.line,
                     "malformed %s: member type '%s' is not float, int or bool (composite types "
                     "hold tensors and do not nest)",
                     owner, p->tok.text);
        return 0;
    }
    advance(p);
    m->name = expect_ident(p, "a member name");
    if (check_name(m->line, m->name, "member")) check_plain_name(p, m->line, m->name, "member");
    m->optional = accept_punct(p, "?");
    return 1;
}

static void check_member_names(const xg_member *ms, int n, const char *owner) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (ms[i].name && ms[j].name && strcmp(ms[i].name, ms[j].name) == 0)
                xg_error(ms[i].line, "malformed %s: member '%s' is declared twice (also line %d)",
                         owner, ms[i].name, ms[j].line);
}

static xg_type *new_type(parser *p, int is_union) {
    int line = p->tok.line;
    advance(p); /* 'struct' / 'union' */
    const char *name = expect_ident(p, is_union ? "a union name" : "a struct name");
    check_name(line, name, is_union ? "union" : "struct");
    const xg_type *prev = find_type(p->decl, name);
    if (prev) xg_error(line, "type '%s' is already declared on line %d", name, prev->line);
    xg_type *t = xg_push(&p->decl->types, &p->decl->n_types, sizeof *t);
    t->name = name;
    t->line = line;
    t->is_union = is_union;
    return t;
}

static void parse_struct(parser *p) {
    xg_type *t = new_type(p, 0);
    char owner[300];
    snprintf(owner, sizeof owner, "struct '%s'", t->name);
    int open = p->tok.line;
    expect_punct(p, "{", "after the struct name");
    while (!accept_punct(p, "}")) {
        if (p->tok.kind == TOK_EOF) xg_fatal(open, "malformed %s: missing '}'", owner);
        xg_member m = {0};
        if (parse_member(p, &m, owner)) {
            *(xg_member *)xg_push(&t->members, &t->n_members, sizeof m) = m;
            if (!is_punct(p, ";"))
                xg_error(p->tok.line, "malformed %s: expected ';' after member '%s', got '%s'",
                         owner, m.name, describe(&p->tok));
        }
        recover(p, ";", open);
        accept_punct(p, ";");
    }
    accept_punct(p, ";");
    if (t->n_members == 0)
        xg_error(t->line, "malformed %s: a struct needs at least one member", owner);
    check_member_names(t->members, t->n_members, owner);
}

static void parse_union(parser *p) {
    xg_type *t = new_type(p, 1);
    char owner[300];
    snprintf(owner, sizeof owner, "union '%s'", t->name);
    int open = p->tok.line;
    expect_punct(p, "{", "after the union name");
    while (!accept_punct(p, "}")) {
        if (p->tok.kind == TOK_EOF) xg_fatal(open, "malformed %s: missing '}'", owner);
        if (p->tok.kind != TOK_IDENT) {
            xg_error(p->tok.line, "malformed %s: expected a variant name, got '%s'", owner,
                     describe(&p->tok));
            recover(p, ";", open);
            accept_punct(p, ";");
            continue;
        }
        xg_variant *v = xg_push(&t->variants, &t->n_variants, sizeof *v);
        v->line = p->tok.line;
        v->name = expect_ident(p, "a variant name");
        if (check_name(v->line, v->name, "variant"))
            check_plain_name(p, v->line, v->name, "variant");
        for (int i = 0; i < t->n_variants - 1; i++)
            if (strcmp(t->variants[i].name, v->name) == 0)
                xg_error(v->line, "malformed %s: variant '%s' is declared twice (also line %d)",
                         owner, v->name, t->variants[i].line);
        int ok = 1;
        if (accept_punct(p, "(") && !accept_punct(p, ")")) {
            for (;;) {
                xg_member m = {0};
                if (!(ok = parse_member(p, &m, owner))) break;
                *(xg_member *)xg_push(&v->members, &v->n_members, sizeof m) = m;
                if (accept_punct(p, ")")) break;
                if (!accept_punct(p, ",")) {
                    xg_error(p->tok.line,
                             "malformed %s: expected ',' or ')' in variant '%s', got '%s'", owner,
                             v->name, describe(&p->tok));
                    ok = 0;
                    break;
                }
            }
            char vowner[400];
            snprintf(vowner, sizeof vowner, "%s (variant '%s')", owner, v->name);
            check_member_names(v->members, v->n_members, vowner);
        }
        if (ok && !is_punct(p, ";") && !is_punct(p, "}"))
            xg_error(p->tok.line, "malformed %s: expected ';' after variant '%s', got '%s'", owner,
                     v->name, describe(&p->tok));
        recover(p, ";", open);
        accept_punct(p, ";");
    }
    accept_punct(p, ";");
    if (t->n_variants == 0)
        xg_error(t->line, "malformed %s: a union needs at least one variant", owner);
}

/* ---- ops ----------------------------------------------------------------------------------- */

int xg_op_tensor_count(const xg_op *op) {
    int n = 0;
    for (int i = 0; i < op->n_params; i++) {
        const xg_param *pa = &op->params[i];
        if (pa->what == PARAM_TENSOR) n++;
        if (pa->what != PARAM_COMPOSITE) continue;
        if (!pa->type->is_union) n += pa->type->n_members;
        for (int v = 0; pa->type->is_union && v < pa->type->n_variants; v++)
            n += pa->type->variants[v].n_members;
    }
    return n;
}

static void parse_param(parser *p, xg_op *op) {
    xg_param *pa = xg_push(&op->params, &op->n_params, sizeof *pa);
    pa->line = p->tok.line;
    const char *type = expect_ident(p, "a parameter type (float, int, bool, a struct or union "
                                       "name, or attr)");
    if (strcmp(type, "attr") == 0) {
        const char *at = expect_ident(p, "an attribute type (int or real)");
        if (strcmp(at, "int") == 0) {
            pa->what = PARAM_INT;
        } else if (strcmp(at, "real") == 0) {
            pa->what = PARAM_REAL;
        } else {
            xg_error(pa->line, "attribute type '%s' is not int or real", at);
            pa->what = PARAM_INT;
        }
    } else if (parse_kind_word(type, &pa->kind)) {
        pa->what = PARAM_TENSOR;
    } else {
        pa->what = PARAM_COMPOSITE;
        pa->type = find_type(p->decl, type);
        if (!pa->type) {
            xg_error(pa->line,
                     "unknown type '%s': a parameter is float, int, bool, quantized, attr int, "
                     "attr real, or a struct or union declared above the op",
                     type);
            pa->what = PARAM_TENSOR; /* keep going as if it were a float tensor */
        }
    }
    pa->name = expect_ident(p, "a parameter name");
    if (check_name(pa->line, pa->name, "parameter"))
        check_plain_name(p, pa->line, pa->name, "parameter");
    if (accept_punct(p, "?")) {
        if (pa->what == PARAM_TENSOR)
            pa->optional = 1;
        else
            xg_error(pa->line,
                     "parameter '%s' cannot be optional: only tensors take '?' (mark "
                     "the members of a struct optional instead)",
                     pa->name);
    }
}

static void parse_output(parser *p, xg_op *op) {
    xg_output *o = xg_push(&op->outputs, &op->n_outputs, sizeof *o);
    o->line = p->tok.line;
    const char *type = expect_ident(p, "an output type (float, int or bool)");
    if (!parse_kind_word(type, &o->kind))
        xg_error(o->line, "output type '%s' is not float, int or bool", type);
    else if (o->kind == XG_QUANTIZED)
        xg_error(o->line, "output type 'quantized': an op's outputs are float, int or bool (make "
                 "a quantized tensor from a float output with cn_quantize)");
    o->name = expect_ident(p, "an output name");
    check_name(o->line, o->name, "output");
}

static const char *const backend_names[] = {"cpu", "cuda", "autodiff"};

/* backends(...): returns the line of `autodiff` (0 if absent) and of the second concrete
 * backend (0 if fewer), for the checks that need them. */
static void parse_backends(parser *p, xg_op *op, int *autodiff_line, int *second_line) {
    int concrete = 0;
    expect_punct(p, "(", "after 'backends'");
    if (accept_punct(p, ")")) return;
    for (;;) {
        int line = p->tok.line;
        const char *b = expect_ident(p, "a backend name (cpu, cuda or autodiff)");
        unsigned bit = 0;
        for (int i = 0; i < 3; i++)
            if (strcmp(b, backend_names[i]) == 0) bit = 1u << i;
        if (!bit)
            xg_error(line, "unknown backend '%s' in op '%s' (known: cpu, cuda, autodiff)", b,
                     op->name);
        else if (op->backends & bit)
            xg_error(line, "backend '%s' is listed twice in op '%s'", b, op->name);
        else {
            op->backends |= bit;
            if (bit == XG_BACKEND_AUTODIFF)
                *autodiff_line = line;
            else if (++concrete == 2)
                *second_line = line;
        }
        if (accept_punct(p, ")")) return;
        expect_punct(p, ",", "between backends");
    }
}

static void parse_flags(parser *p, xg_op *op) {
    static const char *const names[] = {"non_differentiable", "memory_bound", "same_tracking"};
    /* a word that starts the next item means the ';' is missing: leave it to the caller */
    while (p->tok.kind == TOK_IDENT && !is_word(p, "op") && !is_word(p, "struct") &&
           !is_word(p, "union")) {
        unsigned bit = 0;
        for (int i = 0; i < 3; i++)
            if (strcmp(p->tok.text, names[i]) == 0) bit = 1u << i;
        if (!bit)
            xg_error(p->tok.line,
                     "unknown op flag '%s' (known: non_differentiable, memory_bound, "
                     "same_tracking)",
                     p->tok.text);
        op->flags |= bit;
        advance(p);
    }
}

/* Checks names within one op: parameters and outputs share the generated function's scope. */
static void check_op_names(const xg_op *op) {
    for (int i = 0; i < op->n_params; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(op->params[i].name, op->params[j].name) == 0)
                xg_error(op->params[i].line, "parameter '%s' of op '%s' is declared twice",
                         op->params[i].name, op->name);
    for (int i = 0; i < op->n_outputs; i++) {
        for (int j = 0; j < i; j++)
            if (strcmp(op->outputs[i].name, op->outputs[j].name) == 0)
                xg_error(op->outputs[i].line, "output '%s' of op '%s' is declared twice",
                         op->outputs[i].name, op->name);
        for (int j = 0; j < op->n_params; j++) {
            const char *pn = op->params[j].name;
            if (strcmp(op->outputs[i].name, pn) == 0 ||
                (op->n_outputs > 1 && strncmp(pn, "out_", 4) == 0 &&
                 strcmp(pn + 4, op->outputs[i].name) == 0))
                xg_error(op->outputs[i].line,
                         "output '%s' of op '%s' clashes with parameter '%s' (line %d)",
                         op->outputs[i].name, op->name, pn, op->params[j].line);
        }
    }
}

/* Whether an earlier entry of the array already has this name (a duplicate reported elsewhere,
 * whose generated names would only repeat that error). */
static int repeats_member(const xg_member *ms, int i) {
    for (int j = 0; j < i; j++)
        if (strcmp(ms[j].name, ms[i].name) == 0) return 1;
    return 0;
}

static int repeats_variant(const xg_type *t, int v) {
    for (int j = 0; j < v; j++)
        if (strcmp(t->variants[j].name, t->variants[v].name) == 0) return 1;
    return 0;
}

/* Claims the C names an op generates (see emit.c). */
static void claim_op_symbols(const xg_decl *d, const xg_op *op) {
    char what[300];
    snprintf(what, sizeof what, "op '%s'", op->name);
    const char *e = d->ext;
    claim(op->line, what, "%s_%s", e, op->name);
    claim(op->line, what, "%s_%s_shape", e, op->name);
    for (int i = 0; i < 3; i++)
        if (op->backends & (1u << i))
            claim(op->line, what, "%s_%s_%s", e, op->name, i == 2 ? "backward" : backend_names[i]);
    char *pre = upper(e), *on = upper(op->name);
    for (int i = 0; i < op->n_params; i++) {
        const xg_param *pa = &op->params[i];
        int repeated = 0;
        for (int j = 0; j < i; j++)
            repeated |= strcmp(op->params[j].name, pa->name) == 0;
        if (repeated) continue;
        char *pn = upper(pa->name);
        if (pa->what == PARAM_TENSOR) claim(pa->line, what, "%s_%s_IN_%s", pre, on, pn);
        if (pa->what == PARAM_INT) claim(pa->line, what, "%s_%s_INT_%s", pre, on, pn);
        if (pa->what == PARAM_REAL) claim(pa->line, what, "%s_%s_REAL_%s", pre, on, pn);
        if (pa->what != PARAM_COMPOSITE) continue;
        const xg_type *t = pa->type;
        for (int m = 0; !t->is_union && m < t->n_members; m++)
            if (!repeats_member(t->members, m))
                claim(pa->line, what, "%s_%s_IN_%s_%s", pre, on, pn, upper(t->members[m].name));
        for (int v = 0; t->is_union && v < t->n_variants; v++)
            for (int m = 0; m < t->variants[v].n_members && !repeats_variant(t, v); m++)
                if (!repeats_member(t->variants[v].members, m))
                    claim(pa->line, what, "%s_%s_IN_%s_%s_%s", pre, on, pn,
                          upper(t->variants[v].name), upper(t->variants[v].members[m].name));
    }
    for (int i = 0; i < op->n_outputs; i++) {
        int repeated = 0;
        for (int j = 0; j < i; j++)
            repeated |= strcmp(op->outputs[j].name, op->outputs[i].name) == 0;
        if (!repeated)
            claim(op->outputs[i].line, what, "%s_%s_OUT_%s", pre, on, upper(op->outputs[i].name));
    }
    claim(op->line, what, "%s_%s_N_IN", pre, on);
    claim(op->line, what, "%s_%s_N_OUT", pre, on);
}

static void claim_type_symbols(const xg_decl *d, const xg_type *t) {
    char what[300];
    snprintf(what, sizeof what, "%s '%s'", t->is_union ? "union" : "struct", t->name);
    claim(t->line, what, "%s_%s", d->ext, t->name);
    if (!t->is_union) return;
    claim(t->line, what, "%s_%s_tag", d->ext, t->name);
    for (int v = 0; v < t->n_variants; v++) {
        if (repeats_variant(t, v)) continue;
        claim(t->variants[v].line, what, "%s_%s_%s", d->ext, t->name, t->variants[v].name);
        claim(t->variants[v].line, what, "%s_%s_%s", upper(d->ext), upper(t->name),
              upper(t->variants[v].name));
    }
}

static void parse_op(parser *p) {
    xg_decl *d = p->decl;
    int line = p->tok.line;
    advance(p); /* 'op' */
    xg_op *op = xg_push(&d->ops, &d->n_ops, sizeof *op);
    op->line = line;
    op->name = expect_ident(p, "an op name");
    check_name(line, op->name, "op");
    for (int i = 0; i < d->n_ops - 1; i++)
        if (strcmp(d->ops[i].name, op->name) == 0)
            xg_error(line, "op '%s' is already declared on line %d", op->name, d->ops[i].line);

    expect_punct(p, "(", "after the op name");
    if (!accept_punct(p, ")")) {
        for (;;) {
            parse_param(p, op);
            if (accept_punct(p, ")")) break;
            expect_punct(p, ",", "between parameters");
        }
    }

    int outputs_line = p->tok.line;
    if (accept_punct(p, "->")) {
        outputs_line = p->tok.line;
        expect_punct(p, "(", "before the outputs (write `-> (float y)`)");
        if (!accept_punct(p, ")")) {
            for (;;) {
                parse_output(p, op);
                if (accept_punct(p, ")")) break;
                expect_punct(p, ",", "between outputs");
            }
        }
    }
    if (op->n_outputs == 0)
        xg_error(outputs_line, "op '%s' has no outputs: declare at least one, as in `-> (float y)`",
                 op->name);

    int backends_line = p->tok.line, autodiff_line = 0, second_line = 0;
    if (!is_word(p, "backends"))
        xg_fatal(p->tok.line, "expected 'backends(...)' in op '%s', got '%s'", op->name,
                 describe(&p->tok));
    advance(p);
    parse_backends(p, op, &autodiff_line, &second_line);
    parse_flags(p, op);
    expect_punct(p, ";", "at the end of the op");

    int n_tensors = xg_op_tensor_count(op);
    if (!(op->backends & (XG_BACKEND_CPU | XG_BACKEND_CUDA)) &&
        !(op->backends & XG_BACKEND_AUTODIFF))
        xg_error(backends_line, "op '%s' lists no backend: write backends(cpu) or more", op->name);
    else if (!(op->backends & (XG_BACKEND_CPU | XG_BACKEND_CUDA)))
        xg_error(backends_line,
                 "op '%s' lists only 'autodiff': add a backend that computes it (cpu or cuda)",
                 op->name);
    if (n_tensors == 0 && autodiff_line)
        xg_error(autodiff_line,
                 "op '%s' has no tensor inputs but lists 'autodiff': with nothing to track it "
                 "has no gradient to compute; remove 'autodiff' from its backends",
                 op->name);
    if (n_tensors == 0 && second_line)
        xg_error(second_line,
                 "op '%s' has no tensor inputs but lists more than one backend: the router "
                 "chooses the backend from the inputs, so such an op must list exactly one",
                 op->name);
    if ((op->flags & XG_FLAG_NON_DIFFERENTIABLE) && autodiff_line)
        xg_error(autodiff_line,
                 "op '%s' is non_differentiable but lists 'autodiff' (a backward): keep one",
                 op->name);
    check_op_names(op);
    int repeated = 0;
    for (int i = 0; i < d->n_ops - 1; i++)
        repeated |= strcmp(d->ops[i].name, op->name) == 0;
    if (!repeated) claim_op_symbols(d, op);
}

/* ---- the file ------------------------------------------------------------------------------ */

void xg_parse(xg_decl *decl, const char *src, size_t len) {
    parser p = {.decl = decl};
    symbols = NULL; /* a table of an earlier parse lived in an arena since freed */
    n_symbols = 0;
    xg_lex_init(&p.lx, src, len);
    advance(&p);
    if (!is_word(&p, "extension"))
        xg_fatal(p.tok.line, "expected `extension <name>;` first, got '%s'", describe(&p.tok));
    int line = p.tok.line;
    advance(&p);
    decl->ext = expect_ident(&p, "the extension's name");
    check_name(line, decl->ext, "extension");
    if (strcmp(decl->ext, "cn") == 0 || strcmp(decl->ext, "cnx") == 0)
        xg_error(line, "extension name '%s' is reserved (cinder's API uses cn_)", decl->ext);
    expect_punct(&p, ";", "after the extension's name");
    claim(line, "the extension", "%s_register", decl->ext);

    while (p.tok.kind != TOK_EOF) {
        if (is_word(&p, "struct") || is_word(&p, "union")) {
            int is_union = is_word(&p, "union");
            if (is_union)
                parse_union(&p);
            else
                parse_struct(&p);
            const xg_type *t = &decl->types[decl->n_types - 1];
            if (find_type(decl, t->name) == t) claim_type_symbols(decl, t); /* not a repeat */
        } else if (is_word(&p, "op")) {
            parse_op(&p);
        } else {
            xg_fatal(p.tok.line, "expected 'struct', 'union' or 'op', got '%s'", describe(&p.tok));
        }
    }
    if (decl->n_ops == 0)
        xg_error(line,
                 "extension '%s' declares no op: add one, as in `op f(float x) -> (float y) "
                 "backends(cpu);`",
                 decl->ext);
}
