/* The op table: one declaration per op, the single source of what an op is.
 *
 * Every layer reads its facts from here: the router (kinds, dtypes, attributes, the output dtype,
 * which backend kernel runs it), the autodiff layer (what backward saves, whether it is
 * memory-bound and so recomputed under checkpointing, whether it has a gradient), the backends
 * (names for messages) and the tests (tests/test_op_table.c walks it and requires, for every op
 * and every backend, a forward case and a gradient check).
 *
 * The ops a backend may implement are cn_op (cinder/backend.h, whose numbers are the backend
 * ABI); the ops without a kernel (views and cat) follow them here, so that the graph records every
 * op by the same number. The table is C with designated initializers: adding an op is its enum
 * entry and one row below, and tests/test_op_table.c fails until every field it needs is there. */
#ifndef CINDER_CORE_OP_TABLE_H
#define CINDER_CORE_OP_TABLE_H

#include "cinder/backend.h"

/* Ops that have no kernel: new headers over the same storage (views) or compositions (cat). */
enum {
    CN__OP_TRANSPOSE = CN_OP_COUNT, /* ints: dim0, dim1 */
    CN__OP_PERMUTE,                 /* ints: the permutation */
    CN__OP_SLICE,                   /* ints: dim, start, step (normalised) */
    CN__OP_VIEW,                    /* reshape, squeeze, unsqueeze, flatten: same element order */
    CN__OP_EXPAND,                  /* the output shape says it all */
    CN__OP_CAT,                     /* ints: dim */
    CN__OP_ALL                      /* the number of ops in the table */
};

/* Kinds an input accepts, as a mask of (1 << cn_kind). */
#define CN_KINDS_FLOAT (1u << CN_KIND_FLOAT)
#define CN_KINDS_INT (1u << CN_KIND_INT)
#define CN_KINDS_BOOL (1u << CN_KIND_BOOL)
#define CN_KINDS_NUMERIC (CN_KINDS_FLOAT | CN_KINDS_INT)
#define CN_KINDS_ALL (CN_KINDS_FLOAT | CN_KINDS_INT | CN_KINDS_BOOL)

/* What an op is, for the router's shape rules and the backends' kernel contracts. */
typedef enum cn__op_family {
    CN__FAMILY_UNARY = 1, /* one input, same shape and dtype */
    CN__FAMILY_SCALAR,    /* one input and real attributes, same shape and dtype */
    CN__FAMILY_BINARY,    /* two inputs broadcast together, their dtype */
    CN__FAMILY_COMPARE,   /* two inputs broadcast together, bool out */
    CN__FAMILY_LOGIC,     /* bool inputs broadcast together, bool out */
    CN__FAMILY_WHERE,     /* cond, a, b broadcast together, a's dtype */
    CN__FAMILY_CONVERT,   /* cast, copy */
    CN__FAMILY_CREATE,    /* fill and the random ops: no input */
    CN__FAMILY_REDUCE,    /* over one dim, kept with size 1 */
    CN__FAMILY_SOFTMAX,   /* over one dim, same shape */
    CN__FAMILY_MATMUL,
    CN__FAMILY_INDEX,     /* gather, scatter*, index_*, one_hot, masks, flips, windows, *_nd */
    CN__FAMILY_WINDOW,    /* conv2d and the pools: a cn_conv_geometry */
    CN__FAMILY_GRAD,      /* kernels only backward formulas call */
    CN__FAMILY_OPTIM,     /* in-place parameter updates */
    CN__FAMILY_VIEW,      /* no kernel: views and cat */
    CN__FAMILY_SCAN,      /* along one dim, same shape: scans and sort (some with i64 indices) */
} cn__op_family;

/* The output dtype. */
typedef enum cn__out_rule {
    CN__OUT_INPUT = 1, /* the value inputs' dtype */
    CN__OUT_BOOL,
    CN__OUT_I64,
    CN__OUT_TARGET,    /* chosen by the caller (cast, fill, the random ops) */
} cn__out_rule;

/* What a backward formula reads: input i's value, the output's value. */
#define CN__SAVE_IN(i) (1u << (i))
#define CN__SAVE_OUT (1u << 31)

typedef struct cn__op_decl {
    const char *name;       /* as users see it ("add", "softmax") */
    cn__op_family family;
    int n_in;               /* tensor inputs (the most: conv2d's bias and sgd's buffer optional) */
    unsigned char kinds[3]; /* the kinds input i accepts (CN_KINDS_*); 0 past n_in */
    int value_from;         /* inputs value_from..n_in-1 share one dtype (where's cond is not one) */
    cn__out_rule out;
    int n_ints, n_reals;    /* attributes the kernel reads (the most) */
    unsigned saves;         /* CN__SAVE_IN / CN__SAVE_OUT bits */
    unsigned char differentiable; /* the autodiff layer has a formula (tests require it) */
    unsigned char memory_bound;   /* cheap to recompute: kept nothing under checkpointing */
} cn__op_decl;

/* The table itself, indexed by op (op_table.c). Read it through cn__op_decl_of. */
extern const cn__op_decl cn__op_table[CN__OP_ALL];

/* The declaration of op (any of CN__OP_ALL), or NULL for a number outside the table. Inline: the
 * router reads it on every op. */
static inline const cn__op_decl *cn__op_decl_of(int op) {
    if (op < 0 || op >= CN__OP_ALL || !cn__op_table[op].name) return NULL;
    return &cn__op_table[op];
}

/* Whether op runs on a backend kernel (cn_op numbers; the views do not). */
static inline int cn__op_has_kernel(int op) { return op >= 0 && op < CN_OP_COUNT; }

/* The dtypes (mask of 1u << cn_dtype) that inputs of kinds `kinds` (a CN_KINDS_* mask) may
 * have; cn__kinds_dtypes_table is the same, indexed by the kinds mask (the router's hot path). */
unsigned cn__kinds_dtypes(unsigned kinds);
extern const uint32_t cn__kinds_dtypes_table[1u << CN_KIND_QUANTIZED]; /* no quantized dtype yet */

#endif
