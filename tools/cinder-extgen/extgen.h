/* cinder-extgen: the declaration model, shared by the lexer, the parser and the emitter.
 *
 * A declaration file (see docs/extensions.md) becomes one xg_decl: the extension's name, its
 * composite types (structs and unions of tensors) and its ops. Everything is allocated from one
 * arena that lives until the program ends, so no part of the model is freed on its own. */
#ifndef CINDER_EXTGEN_H
#define CINDER_EXTGEN_H

#include <stddef.h>

/* ---- memory and diagnostics ---------------------------------------------------------------- */

void *xg_alloc(size_t nbytes); /* zeroed; exits on exhaustion */
char *xg_strdup(const char *s, size_t len);
void xg_arena_free(void);

/* Grows *arr (elements of elem bytes, *n used) by one zeroed element and returns it. */
void *xg_push(void *arr_ptr, int *n, size_t elem);

/* `file:line: error: message` on stderr. xg_error counts and returns; xg_fatal exits with 1
 * (inside xg_parse_text: returns from it instead). */
void xg_diag_init(const char *path);
void xg_error(int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void xg_fatal(int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3), noreturn))
#endif
    ;
int xg_error_count(void);

/* Diagnostics are counted (and formatted) but not printed while quiet is non-zero (the fuzzer,
 * fuzz/fuzz_extgen.c). */
void xg_diag_quiet(int quiet);

/* ---- tokens -------------------------------------------------------------------------------- */

typedef enum xg_tok_kind { TOK_EOF, TOK_IDENT, TOK_PUNCT } xg_tok_kind;

typedef struct xg_token {
    xg_tok_kind kind;
    const char *text; /* identifier or punctuation ("(", "->", ...); NUL-terminated */
    int line;
} xg_token;

typedef struct xg_lexer {
    const char *src;
    size_t pos, len;
    int line;
} xg_lexer;

void xg_lex_init(xg_lexer *lx, const char *src, size_t len);
xg_token xg_lex_next(xg_lexer *lx);

/* ---- the model ----------------------------------------------------------------------------- */

/* quantized: a quantized tensor input (cinder/quant.h), passed through on either route */
typedef enum xg_kind { XG_FLOAT, XG_INT, XG_BOOL, XG_QUANTIZED } xg_kind;

/* A tensor inside a composite type. */
typedef struct xg_member {
    const char *name;
    xg_kind kind;
    int optional;
    int line;
} xg_member;

typedef struct xg_variant {
    const char *name;
    int line;
    xg_member *members;
    int n_members;
} xg_variant;

typedef struct xg_type {
    const char *name;
    int line;
    int is_union;
    xg_member *members; /* structs */
    int n_members;
    xg_variant *variants; /* unions */
    int n_variants;
} xg_type;

typedef enum xg_param_what { PARAM_TENSOR, PARAM_COMPOSITE, PARAM_INT, PARAM_REAL } xg_param_what;

typedef struct xg_param {
    const char *name;
    int line;
    xg_param_what what;
    xg_kind kind;        /* PARAM_TENSOR */
    int optional;        /* PARAM_TENSOR */
    const xg_type *type; /* PARAM_COMPOSITE */
} xg_param;

typedef struct xg_output {
    const char *name;
    xg_kind kind;
    int line;
} xg_output;

enum { XG_BACKEND_CPU = 1, XG_BACKEND_CUDA = 2, XG_BACKEND_AUTODIFF = 4 };
enum { XG_FLAG_NON_DIFFERENTIABLE = 1, XG_FLAG_MEMORY_BOUND = 2, XG_FLAG_SAME_TRACKING = 4 };

typedef struct xg_op {
    const char *name;
    int line;
    xg_param *params;
    int n_params;
    xg_output *outputs;
    int n_outputs;
    unsigned backends; /* XG_BACKEND_* */
    unsigned flags;    /* XG_FLAG_* */
} xg_op;

typedef struct xg_decl {
    const char *path;     /* as given on the command line */
    const char *basename; /* for messages in the generated code */
    const char *ext;      /* the extension's name: the prefix of every generated symbol */
    xg_type *types;
    int n_types;
    xg_op *ops;
    int n_ops;
} xg_decl;

/* Parses and checks src. Syntax errors exit at once; semantic errors are all reported, after
 * which the caller must check xg_error_count(). */
void xg_parse(xg_decl *decl, const char *src, size_t len);

/* What the tool does with a declaration's text: rejects a NUL byte, then xg_parse, except that a
 * syntax error returns here instead of exiting. Returns the number of errors (0: decl is complete
 * and may be emitted). The model stays in the arena until xg_arena_free. */
int xg_parse_text(xg_decl *decl, const char *text, size_t len);

/* The number of tensor slots an op passes to the runtime (composite members flattened). */
int xg_op_tensor_count(const xg_op *op);

/* ---- emission ------------------------------------------------------------------------------ */

/* Writes the generated header and source. header_name is what the source #includes. Returns 0,
 * or -1 after printing why a file could not be written. */
int xg_emit(const xg_decl *decl, const char *header_path, const char *source_path,
            const char *header_name);

const char *xg_kind_name(xg_kind k); /* "float", "int", "bool", "quantized" */

#endif
