/* Embedding (torch.nn.Embedding): rows of a learned table picked by integer indices. */
#include "core/alloc.h"
#include "core/error_internal.h"
#include "nn/nn_internal.h"

typedef struct embedding_state {
    cn_tensor *weight; /* [num_embeddings, embedding_dim], borrowed from the module's parameters */
} embedding_state;

/* x: integer indices of any shape -> x's shape + [embedding_dim] */
static cn_tensor *embedding_forward(cn_module *m, cn_tensor *x) {
    embedding_state *s = cn_module_state(m);
    if (cn_kind_of(x) != CN_KIND_INT) {
        char buf[128];
        cn_set_error(CN_ERR_KIND, "embedding",
                     "'x' is %s; an embedding looks up integer "
                     "indices (convert with cn_cast(x, CN_I64))",
                     cn_tensor_str(x, buf, sizeof buf));
        return NULL;
    }
    int nd = cn_ndim(x);
    if (nd >= CN_MAX_DIMS) {
        cn_set_error(CN_ERR_SHAPE, "embedding",
                     "'x' has %d dims, and the output would have one "
                     "more than the %d a tensor can have",
                     nd, CN_MAX_DIMS);
        return NULL;
    }
    int64_t flat = -1, shape[CN_MAX_DIMS];
    cn_tensor *index = cn_reshape(cn_dtype_of(x) == CN_I64 ? x : cn_cast(x, CN_I64), &flat, 1);
    cn_tensor *rows = cn_index_select(s->weight, 0, index); /* [numel(x), dim] */
    for (int d = 0; d < nd; d++)
        shape[d] = cn_shape(x)[d];
    shape[nd] = cn_shape(s->weight)[1];
    return cn_reshape(rows, shape, nd + 1);
}

static void free_state(void *state) { cn__free(state); }

static const cn_module_vtable embedding_vtable = {"Embedding", embedding_forward, NULL, free_state};

cn_module *cn_embedding_new(int64_t num_embeddings, int64_t embedding_dim, cn_device device,
                            cn_dtype dtype, cn_generator *gen) {
    const char *op = "embedding_new";
    if (nn_check_positive(op, "num_embeddings", num_embeddings) != CN_OK ||
        nn_check_positive(op, "embedding_dim", embedding_dim) != CN_OK ||
        nn_check_float_dtype(op, dtype) != CN_OK)
        return NULL;
    if (!gen) {
        cn__null_arg(op, "gen");
        return NULL;
    }
    embedding_state *s = cn__calloc(op, 1, sizeof *s);
    if (!s) return NULL;
    cn_module *m = cn_module_new(&embedding_vtable, s);
    if (!m) return NULL;
    const int64_t shape[2] = {num_embeddings, embedding_dim};
    cn_tensor *w = nn_unscoped(cn_empty(shape, 2, dtype, device));
    if (w && cn_init_normal_(w, 0.0, 1.0, gen) != CN_OK) {
        cn_release(w);
        w = NULL;
    }
    if (w && device.autodiff && !cn_require_grad(w)) {
        cn_release(w);
        w = NULL;
    }
    s->weight = w;
    return nn_with_param(m, "weight", w);
}
