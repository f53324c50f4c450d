/* Flatten (torch.nn.Flatten): merges a run of dims into one, as a view when strides allow. */
#include "core/alloc.h"
#include "nn/nn_internal.h"

typedef struct flatten_state {
    int start_dim, end_dim; /* inclusive; negative counts from the end */
} flatten_state;

/* x: [d0, ..., d_start, ..., d_end, ...] -> [d0, ..., d_start * ... * d_end, ...] */
static cn_tensor *flatten_forward(cn_module *m, cn_tensor *x) {
    const flatten_state *s = cn_module_state(m);
    int nd = cn_ndim(x);
    int rank = nd ? nd : 1; /* a 0-d input flattens as [1], like torch.flatten */
    int start = s->start_dim < 0 ? s->start_dim + rank : s->start_dim;
    int end = s->end_dim < 0 ? s->end_dim + rank : s->end_dim;
    if (start < 0 || start >= rank || end < 0 || end >= rank || start > end) {
        char buf[128];
        cn_set_error(CN_ERR_INVALID_ARG, "flatten",
                     "start_dim = %d and end_dim = %d do not name "
                     "a run of dims of 'x' %s; give start_dim <= end_dim within its %d dims",
                     s->start_dim, s->end_dim, cn_tensor_str(x, buf, sizeof buf), rank);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    int out = 0;
    for (int d = 0; d < rank; d++) {
        int64_t size = nd ? cn_shape(x)[d] : 1;
        if (d <= start || d > end)
            shape[out++] = size;
        else
            shape[out - 1] *= size;
    }
    return cn_reshape(x, shape, out);
}

static void free_state(void *state) { cn__free(state); }

static const cn_module_vtable flatten_vtable = {"Flatten", flatten_forward, NULL, free_state};

cn_module *cn_flatten_new(int start_dim, int end_dim) {
    flatten_state *s = cn__malloc("flatten_new", sizeof *s);
    if (!s) return NULL;
    s->start_dim = start_dim;
    s->end_dim = end_dim;
    return cn_module_new(&flatten_vtable, s);
}
