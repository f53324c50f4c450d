/* Dropout (torch.nn.Dropout): a random mask scaled by 1 / (1 - p) in training, the identity in
 * evaluation. */
#include "core/alloc.h"
#include "core/error_internal.h"
#include "nn/nn_internal.h"

typedef struct dropout_state {
    double p;
    cn_generator gen; /* the module's own stream, seeded from the constructor's generator */
} dropout_state;

static cn_tensor *dropout_forward(cn_module *m, cn_tensor *x) {
    dropout_state *s = cn_module_state(m);
    if (!cn_module_is_training(m) || s->p == 0.0) return x; /* the wrapper makes it a view */
    if (s->p == 1.0) return cn_mul_scalar(x, 0.0); /* keeps x's graph, with zero gradients */
    cn_dtype dt = cn_dtype_of(x);
    /* keep where u >= p (probability 1 - p); u is drawn on the concrete device: the mask is a
     * constant for autodiff */
    cn_tensor *u =
        cn_rand_uniform(&s->gen, cn_shape(x), cn_ndim(x), 0.0, 1.0, dt == CN_F64 ? CN_F64 : CN_F32,
                        cn_inner_device(cn_device_of(x)));
    cn_tensor *p = u ? cn_full(NULL, 0, s->p, cn_dtype_of(u), cn_device_of(u)) : NULL;
    cn_tensor *mask = cn_mul_scalar(cn_cast(cn_ge(u, p), dt), 1.0 / (1.0 - s->p));
    return cn_mul(x, mask);
}

static void free_state(void *state) { cn__free(state); }

/* A seed for the module's own stream, from the generator's state (splitmix64's finaliser over
 * both words). Streams of one seed at nearby offsets overlap, so each module gets a new seed:
 * two dropouts made from one generator draw unrelated masks. */
static uint64_t stream_seed(uint64_t seed, uint64_t offset) {
    uint64_t z = seed ^ (offset * 0x9e3779b97f4a7c15ull) ^ 0xd1b54a32d192ed03ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const cn_module_vtable dropout_vtable = {"Dropout", dropout_forward, NULL, free_state};

cn_module *cn_dropout_new(double p, cn_generator *gen) {
    const char *op = "dropout_new";
    if (!gen) {
        cn__null_arg(op, "gen");
        return NULL;
    }
    if (!(p >= 0.0 && p <= 1.0)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "p = %g; the drop probability must be in [0, 1]", p);
        return NULL;
    }
    dropout_state *s = cn__malloc(op, sizeof *s);
    if (!s) return NULL;
    s->p = p;
    s->gen = cn_generator_new(stream_seed(gen->seed, gen->offset));
    gen->offset++;
    return cn_module_new(&dropout_vtable, s);
}
