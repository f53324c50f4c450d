/* The autodiff layer's graph: one node per recorded op, pointing at the nodes of its inputs.
 *
 * A tracked tensor's `autograd` field holds a reference to its node (the op that made it, or a
 * leaf). A node holds references to its inputs' nodes, never to tensors, so intermediates are
 * freed as soon as nothing saved them; it keeps concrete views (`saved`) only of the values its
 * backward formula needs. Under CN_CHECKPOINT_BALANCED, memory-bound nodes keep no values at all
 * and recompute them in backward from their inputs' nodes. */
#ifndef CINDER_AUTODIFF_INTERNAL_H
#define CINDER_AUTODIFF_INTERNAL_H

#include "cinder/autodiff.h"
#include "cinder/backend.h"
#include "cinder/extension.h" /* the public types an extension node keeps (ad_ext) */
#include "core/op_table.h"
#include "core/tensor_impl.h"

/* A node records an op of the op table (core/op_table.h) or one of these graph-only kinds. */
enum {
    AD_OP_LEAF = CN__OP_ALL,
    AD_OP_EXT,       /* an extension op (see ad_ext) */
    AD_OP_EXT_OUTPUT,/* output ints[0] of the multi-output extension node in[0] */
    AD_OP_COUNT
};

typedef struct ad_node ad_node;

/* Runs an extension op again on concrete input values, on the concrete route, writing its
 * outputs (new references): how a checkpointed extension node recomputes what it did not keep.
 * The extension layer hands it in when it records a call. */
typedef cn_status (*ad_ext_replay_fn)(const cn_ext_op *op, cn_tensor *const *in, const int *tags,
                                      const int64_t *ints, const double *reals,
                                      cn_tensor **outputs);

/* What an extension node keeps besides the common fields. The extension layer hands in all it
 * needs of the op when it records a call, so the graph reads no extension internals. */
typedef struct ad_ext {
    const cn_ext_op *op;           /* opaque: only handed back to replay */
    const cn_ext_schema *schema;   /* the op's (names for messages); lives as long as the op */
    cn_ext_backward_fn backward;   /* the user's backward */
    ad_ext_replay_fn replay;
    int n_out;
    int *tags;              /* one per composite (replay needs the union variants) */
    int64_t *ints;
    double *reals;
    cn_tensor **saved_out;  /* concrete views of the outputs, or NULL (checkpointed) */
    uint64_t *saved_version;
    cn_tensor **values;     /* recomputed outputs, during one backward */
    cn_tensor **grad_out;   /* per-output gradients, during one backward */
    int reached;            /* some output received a gradient in this backward */
} ad_ext;

typedef struct ad_input {
    ad_node *node;      /* the input's node (a reference), NULL when the input is a constant */
    cn_tensor *saved;   /* concrete view of the input's value, when the backward needs it */
    uint64_t version;   /* the input's storage version when recorded */
    cn_storage *storage;/* identifies the input's storage, for the version check (not owned) */
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
} ad_input;

/* The most ints a node keeps (conv3d's 10 and a few to spare; permute's CN_MAX_DIMS). */
#define AD_MAX_INTS 16

struct ad_node {
    _Atomic int64_t refcount; /* nodes are shared by graphs on any thread (cn__ref_drop) */
    int op;               /* a row of the op table, or AD_OP_* */
    int memory_bound;     /* recomputed instead of saved under checkpointing */
    int checkpointed;     /* recorded on a CN_CHECKPOINT_BALANCED device */
    int retain_grad;      /* the tensor's gradient goes into cn_grads */
    int consumed;         /* a backward has run through it: its saved values are gone */
    cn_grad_ready_fn grad_ready; /* leaves: called when the gradient is final (autodiff.h) */
    void *grad_ready_ctx;
    cn_device device;     /* the autodiff device the output lives on */
    cn_dtype dtype;       /* the output's */
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    cn_tensor *saved_out; /* concrete view of the output (leaf: of the leaf's value) */
    uint64_t saved_out_version;
    int64_t ints[AD_MAX_INTS];
    int n_ints;
    double reals[2];
    int n_reals;
    /* backward bookkeeping, valid during one cn_backward */
    cn_tensor *grad;      /* accumulated gradient of the output */
    cn_tensor *value;     /* recomputed output (checkpointing) */
    ad_ext *ext;          /* extension nodes only */
    uint64_t mark;        /* visited in the current ordering walk */
    int visit;            /* next input to visit in that walk */
    int n_in;
    ad_input in[];        /* n_in entries */
};

/* Records out = op(in[0..n)) when grad mode is on and some input is tracked; attaches the node to
 * out. Returns out, or NULL (out released, error set) if recording fails. */
cn_tensor *ad_record(int op, cn_tensor *out, cn_tensor *const *in, int n, const int64_t *ints,
                     int n_ints, const double *reals, int n_reals);

void ad_node_release(ad_node *n);
ad_node *ad_node_new(int op, int n_in, const cn_tensor *out);
void ad_ext_free(ad_ext *e);

/* Extension nodes (ext_node.c): recording a call, the output values, the backward step, and the
 * hand-off of a multi-output selector's gradient to its node. ad_ext_record records outputs =
 * op(in) (in: schema->n_tensors entries, NULL where absent) with the user's backward, and replay
 * for checkpointing; on failure the outputs are released and NULLed. */
cn_status ad_ext_record(const cn_ext_op *op, const cn_ext_schema *schema,
                        cn_ext_backward_fn backward, ad_ext_replay_fn replay,
                        cn_tensor *const *in, const int *tags, const int64_t *ints,
                        const double *reals, cn_tensor **outputs);
cn_tensor *ad_ext_output_value(ad_node *n, int i);
cn_status ad_ext_formula(ad_node *n, cn_tensor *g, cn_tensor **gin);
cn_status ad_ext_collect(ad_node *selector, cn_tensor *g);
void ad_ext_reset(ad_node *n);   /* drops per-backward state */
void ad_ext_consume(ad_node *n); /* drops saved outputs after a successful backward */
ad_node *ad_node_retain(ad_node *n);

/* A concrete view of t (same storage, inner device, untracked). */
cn_tensor *ad_concrete(cn_tensor *t);

/* The value of input i of n / the output of n, recomputing it under checkpointing; borrowed.
 * Checks the recorded version: CN_ERR_AUTODIFF_MODIFIED if it changed. */
cn_tensor *ad_input_value(ad_node *n, int i);
cn_tensor *ad_output_value(ad_node *n);

/* Backward formula: given the output gradient g (concrete), writes the gradient of every input
 * that has a node into gin[i] (new references; NULL for the others). */
cn_status ad_backward_formula(ad_node *n, cn_tensor *g, cn_tensor **gin);

/* Whether op has a backward formula (formulas.c; tests/test_op_table.c requires one for every
 * op the op table marks differentiable). */
int ad_has_formula(int op);

/* Re-runs n's forward op on concrete input values (for checkpointing). */
cn_tensor *ad_replay(ad_node *n, cn_tensor *const *values);

/* Whether an op is memory-bound (cheap to recompute: elementwise and views). */
int ad_op_memory_bound(int op);

/* Which values the backward formula of op needs: bit i for input i; AD_SAVE_OUT for the output
 * (the op table's saves). */
#define AD_SAVE_OUT CN__SAVE_OUT
unsigned ad_op_saves(int op);

/* A short name for messages. */
const char *ad_op_name(int op);
/* The name of the op that made n, for messages: an extension node's op name (ext_node.c), else
 * ad_op_name(n->op). */
const char *ad_node_name(const ad_node *n);

#endif
