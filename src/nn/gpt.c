/* GPT: karpathy/nanoGPT's model.py (dropout 0) as a tree of modules whose parameter names are
 * the keys of its state_dict. The tree:
 *
 *   GPT
 *   └─ transformer                      (a ModuleDict: names only, no forward of its own)
 *      ├─ wte   Embedding [vocab, C]    (also lm_head's weight: tied, listed once)
 *      ├─ wpe   Embedding [block_size, C]
 *      ├─ h     ModuleList of Blocks "0", "1", ...
 *      │        ├─ ln_1  LayerNorm     ├─ attn  CausalSelfAttention (c_attn, c_proj)
 *      │        ├─ ln_2  LayerNorm     └─ mlp   MLP (c_fc, c_proj)
 *      └─ ln_f  LayerNorm
 *
 * lm_head is no module here: its weight is wte's, and a Linear without a bias over it is one
 * cn_linear call in GPT's forward. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "nn/nn_internal.h"

#define LN_EPS    1e-5
#define INIT_STD  0.02
#define MLP_WIDTH 4

static void free_state(void *state) { cn__free(state); }

/* ---- containers without a forward ------------------------------------------------------------ */

/* transformer and h only name their children (torch.nn.ModuleDict / ModuleList); GPT's forward
 * calls the children itself. */
static cn_tensor *container_forward(cn_module *m, cn_tensor *x) {
    (void)x;
    cn_set_error(CN_ERR_INVALID_ARG, "gpt",
                 "a %s of a GPT has no forward of its own; call "
                 "cn_module_forward on the GPT, or on one of the %s's children",
                 cn_module_kind(m), cn_module_kind(m));
    return NULL;
}

static const cn_module_vtable module_dict_vtable = {"ModuleDict", container_forward, NULL, NULL};
static const cn_module_vtable module_list_vtable = {"ModuleList", container_forward, NULL, NULL};

/* ---- LayerNorm with an optional bias --------------------------------------------------------- */

/* nanoGPT's LayerNorm(ndim, bias): a weight, and a bias only when bias is True. With a bias it is
 * torch.nn.LayerNorm (cn_layernorm_new); without, a LayerNorm without affine scaled by "weight". */
typedef struct scaled_norm_state {
    cn_module *norm;   /* LayerNorm without affine, owned */
    cn_tensor *weight; /* [C], borrowed from the module's parameters */
} scaled_norm_state;

static void scaled_norm_free(void *state) {
    scaled_norm_state *s = state;
    cn_module_free(s->norm);
    cn__free(s);
}

/* x: [..., C] -> [..., C] */
static cn_tensor *scaled_norm_forward(cn_module *m, cn_tensor *x) {
    scaled_norm_state *s = cn_module_state(m);
    return cn_mul(cn_module_forward(s->norm, x), s->weight);
}

static const cn_module_vtable scaled_norm_vtable = {"LayerNorm", scaled_norm_forward, NULL,
                                                    scaled_norm_free};

static cn_module *layer_norm_new(int64_t c, int bias, cn_device device, cn_dtype dtype) {
    if (bias) return cn_layernorm_new(&c, 1, LN_EPS, 1, device, dtype);
    scaled_norm_state *s = cn__calloc("gpt_new", 1, sizeof *s);
    if (!s) return NULL;
    cn_module *m = cn_module_new(&scaled_norm_vtable, s);
    if (!m) return NULL;
    if (!(s->norm = cn_layernorm_new(&c, 1, LN_EPS, 0, device, dtype))) {
        cn_module_free(m);
        return NULL;
    }
    s->weight = nn_full_param(&c, 1, 1.0, 1, device, dtype);
    return nn_with_param(m, "weight", s->weight);
}

/* ---- Linear and Embedding with nanoGPT's init ------------------------------------------------ */

/* A Linear whose weight is drawn from N(0, std) and whose bias is 0. The Linear's own uniform
 * draws come from a scratch generator and are overwritten, so *gen advances by the normal draw
 * alone. */
static cn_module *normal_linear(int64_t in, int64_t out, int bias, double std, cn_device device,
                                cn_dtype dtype, cn_generator *gen) {
    cn_generator scratch = cn_generator_new(0);
    cn_module *m = cn_linear_new(in, out, bias, device, dtype, &scratch);
    if (!m) return NULL;
    if (cn_init_normal_(cn_module_find(m, "weight"), 0.0, std, gen) != CN_OK ||
        (bias && cn_init_constant_(cn_module_find(m, "bias"), 0.0) != CN_OK)) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

static cn_module *normal_embedding(int64_t n, int64_t c, cn_device device, cn_dtype dtype,
                                   cn_generator *gen) {
    cn_generator scratch = cn_generator_new(0);
    cn_module *m = cn_embedding_new(n, c, device, dtype, &scratch);
    if (m && cn_init_normal_(cn_module_find(m, "weight"), 0.0, INIT_STD, gen) != CN_OK) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

/* Adds the children names[i] = kids[i] (i < n) to m in order; frees m and every kid not yet
 * added on the first failure, or when m or a kid is NULL (a constructor's error stays). */
static cn_module *with_children(cn_module *m, const char *const *names, cn_module *const *kids,
                                int n) {
    for (int i = 0; i < n; i++)
        if (!kids[i]) {
            cn_module_free(m);
            m = NULL;
        }
    for (int i = 0; i < n; i++) {
        if (!m) {
            cn_module_free(kids[i]);
            continue;
        }
        if (cn_module_add_child(m, names[i], kids[i]) != CN_OK) { /* which freed kids[i] */
            cn_module_free(m);
            m = NULL;
        }
    }
    return m;
}

/* ---- attention and MLP ----------------------------------------------------------------------- */

typedef struct attention_state {
    int64_t n_head, n_embd;
} attention_state;

/* x: [B, T, C] -> the heads' outputs merged, [B, T, C]: the attention before c_proj */
static cn_tensor *attention_heads(cn_module *m, cn_tensor *x) {
    const attention_state *s = cn_module_state(m);
    if (cn_ndim(x) != 3 || cn_shape(x)[2] != s->n_embd) {
        char buf[128];
        cn_set_error(CN_ERR_SHAPE, "gpt", "the CausalSelfAttention takes x [B, T, %lld], not %s",
                     (long long)s->n_embd, cn_tensor_str(x, buf, sizeof buf));
        return NULL;
    }
    const int64_t b = cn_shape(x)[0], t = cn_shape(x)[1], c = s->n_embd, nh = s->n_head;
    /* c_attn's q, k and v as three products with the thirds of its weight and bias (views): the
     * same values as one product split in three, but the backward then adds three [B, T, C]
     * input gradients instead of three zero-filled [B, T, 3C] ones, one per slice of the split */
    cn_module *c_attn = cn_module_child(m, 0);
    cn_tensor *w = cn_module_find(c_attn, "weight"), *bias = cn_module_find(c_attn, "bias");
    cn_clear_error(); /* without bias, "bias" is not found: that is no error */
    /* each [B, T, C] -> [B, T, nh, hs] -> [B, nh, T, hs] (views) */
    const int64_t heads[4] = {b, t, nh, c / nh}, merged[3] = {b, t, c};
    cn_tensor *qkvh[3];
    for (int i = 0; i < 3; i++) {
        cn_tensor *wi = cn_slice(w, 0, i * c, (i + 1) * c, 1);
        cn_tensor *bi = bias ? cn_slice(bias, 0, i * c, (i + 1) * c, 1) : NULL;
        if (!wi || (bias && !bi)) return NULL;
        qkvh[i] = cn_transpose(cn_reshape(cn_linear(x, wi, bi), heads, 4), 1, 2);
    }
    cn_tensor *y = cn_scaled_dot_product_attention(qkvh[0], qkvh[1], qkvh[2], NULL, 1, 0.0);
    return cn_reshape(cn_transpose(y, 1, 2), merged, 3); /* [B, T, nh, hs] -> [B, T, C], a copy */
}

/* x: [B, T, C] -> [B, T, C] */
static cn_tensor *attention_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *y = attention_heads(m, x);
    return y ? cn_module_forward(cn_module_child(m, 1), y) : NULL; /* c_proj */
}

static const cn_module_vtable attention_vtable = {"CausalSelfAttention", attention_forward, NULL,
                                                  free_state};

/* x: [B, T, C] -> c_proj(gelu(c_fc(x))): [B, T, C]. gelu(c_fc(x)) is one op on c_fc's weight
 * and bias (cn_linear_gelu: gelu applied to each block of rows while in cache, and its
 * derivative kept for the backward instead of recomputed), the same values as the two. */
static cn_tensor *mlp_hidden(cn_module *m, cn_tensor *x) {
    cn_module *c_fc = cn_module_child(m, 0);
    cn_tensor *w = cn_module_find(c_fc, "weight"), *bias = cn_module_find(c_fc, "bias");
    cn_clear_error(); /* without bias, "bias" is not found: that is no error */
    return w ? cn_linear_gelu(x, w, bias, CN_GELU_ERF) : NULL; /* [B, T, 4C] */
}

static cn_tensor *mlp_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *h = mlp_hidden(m, x);
    return h ? cn_module_forward(cn_module_child(m, 1), h) : NULL;
}

static const cn_module_vtable mlp_vtable = {"MLP", mlp_forward, NULL, NULL};

/* r + c_proj(y), c_proj a Linear: one cn_linear_add on its weight and bias (the bias and r
 * added to each block of rows while in cache), the values of cn_add(r, c_proj(y)). */
static cn_tensor *proj_add(cn_module *c_proj, cn_tensor *y, cn_tensor *r) {
    if (!y) return NULL;
    cn_tensor *w = cn_module_find(c_proj, "weight"), *bias = cn_module_find(c_proj, "bias");
    cn_clear_error(); /* without bias, "bias" is not found: that is no error */
    return w ? cn_linear_add(y, w, bias, r) : NULL;
}

/* children: ln_1, attn, ln_2, mlp. x: [B, T, C] -> [B, T, C]: x + attn(ln_1(x)), then the
 * same + mlp(ln_2(...)), each residual added by the c_proj that ends the branch */
static cn_tensor *block_forward(cn_module *m, cn_tensor *x) {
    cn_module *attn = cn_module_child(m, 1), *mlp = cn_module_child(m, 3);
    cn_tensor *h = cn_module_forward(cn_module_child(m, 0), x);
    x = proj_add(cn_module_child(attn, 1), h ? attention_heads(attn, h) : NULL, x);
    h = x ? cn_module_forward(cn_module_child(m, 2), x) : NULL;
    return proj_add(cn_module_child(mlp, 1), h ? mlp_hidden(mlp, h) : NULL, x);
}

static const cn_module_vtable block_vtable = {"Block", block_forward, NULL, NULL};

static cn_module *block_new(const cn_gpt_config *cfg, cn_device device, cn_dtype dtype,
                            cn_generator *gen) {
    const int64_t c = cfg->n_embd;
    const int bias = cfg->bias != 0;
    const double proj_std = INIT_STD / sqrt(2.0 * (double)cfg->n_layer);
    /* one statement each: the draws from gen must come in this order */
    cn_module *kids[4];
    kids[0] = layer_norm_new(c, bias, device, dtype);
    attention_state *as = cn__calloc("gpt_new", 1, sizeof *as);
    cn_module *attn = as ? cn_module_new(&attention_vtable, as) : NULL;
    if (attn) {
        as->n_head = cfg->n_head;
        as->n_embd = c;
        cn_module *lin[2];
        lin[0] = normal_linear(c, 3 * c, bias, INIT_STD, device, dtype, gen);
        lin[1] = normal_linear(c, c, bias, proj_std, device, dtype, gen);
        attn = with_children(attn, (const char *const[]){"c_attn", "c_proj"}, lin, 2);
    }
    kids[1] = attn;
    kids[2] = layer_norm_new(c, bias, device, dtype);
    cn_module *mlp = kids[0] && kids[1] && kids[2] ? cn_module_new(&mlp_vtable, NULL) : NULL;
    if (mlp) {
        cn_module *lin[2];
        lin[0] = normal_linear(c, MLP_WIDTH * c, bias, INIT_STD, device, dtype, gen);
        lin[1] = normal_linear(MLP_WIDTH * c, c, bias, proj_std, device, dtype, gen);
        mlp = with_children(mlp, (const char *const[]){"c_fc", "c_proj"}, lin, 2);
    }
    kids[3] = mlp;
    cn_module *m = cn_module_new(&block_vtable, NULL);
    return with_children(m, (const char *const[]){"ln_1", "attn", "ln_2", "mlp"}, kids, 4);
}

/* ---- GPT ------------------------------------------------------------------------------------- */

typedef struct gpt_state {
    cn_gpt_config cfg;
    cn_module *wte, *wpe, *h, *ln_f; /* borrowed: children of transformer */
    cn_tensor *wte_weight;           /* borrowed: wte's "weight", also lm_head's */
} gpt_state;

static cn_status check_tokens(const gpt_state *s, cn_tensor *idx) {
    char buf[128];
    if (cn_kind_of(idx) != CN_KIND_INT)
        return cn_set_error(CN_ERR_KIND, "gpt",
                            "'idx' is %s; a GPT takes integer token ids "
                            "[B, T] (convert with cn_cast(idx, CN_I64))",
                            cn_tensor_str(idx, buf, sizeof buf));
    if (cn_ndim(idx) != 2 || cn_shape(idx)[1] < 1)
        return cn_set_error(CN_ERR_SHAPE, "gpt",
                            "'idx' is %s; a GPT takes token ids [B, T] with "
                            "T >= 1 (one sequence: reshape it to [1, T])",
                            cn_tensor_str(idx, buf, sizeof buf));
    if (cn_shape(idx)[1] > s->cfg.block_size)
        return cn_set_error(CN_ERR_SHAPE, "gpt",
                            "'idx' is %s: T = %lld tokens, more than the "
                            "block_size %lld the GPT was made with; crop the context to its last "
                            "%lld tokens",
                            cn_tensor_str(idx, buf, sizeof buf), (long long)cn_shape(idx)[1],
                            (long long)s->cfg.block_size, (long long)s->cfg.block_size);
    return CN_OK;
}

/* idx: [B, T] -> logits [B, T, vocab] */
static cn_tensor *gpt_forward(cn_module *m, cn_tensor *idx) {
    const gpt_state *s = cn_module_state(m);
    if (check_tokens(s, idx) != CN_OK) return NULL;
    const int64_t t = cn_shape(idx)[1];
    cn_tensor *pos = cn_arange(0, (double)t, 1, CN_I64, cn_device_of(idx)); /* [T] */
    cn_tensor *tok = cn_module_forward(s->wte, idx);                        /* [B, T, C] */
    if (!tok && cn_last_status() == CN_ERR_INDEX) { /* say which model and what to do */
        cn_set_error(CN_ERR_INDEX, "gpt",
                     "a token id in 'idx' lies outside [0, %lld), the "
                     "vocabulary the GPT was made with (%s); encode the text with the model's "
                     "own vocabulary",
                     (long long)s->cfg.vocab_size, cn_last_error());
        return NULL;
    }
    cn_tensor *x = cn_add(tok, cn_module_forward(s->wpe, pos)); /* + [T, C] */
    for (int i = 0; i < cn_module_child_count(s->h) && x; i++)
        x = cn_module_forward(cn_module_child(s->h, i), x);
    return cn_linear(cn_module_forward(s->ln_f, x), s->wte_weight, NULL);
}

static const cn_module_vtable gpt_vtable = {"GPT", gpt_forward, NULL, free_state};

static cn_status check_config(const char *op, const cn_gpt_config *cfg) {
    const int64_t sizes[5] = {cfg->vocab_size, cfg->block_size, cfg->n_layer, cfg->n_head,
                              cfg->n_embd};
    const char *names[5] = {"cfg->vocab_size", "cfg->block_size", "cfg->n_layer", "cfg->n_head",
                            "cfg->n_embd"};
    for (int i = 0; i < 5; i++)
        if (nn_check_positive(op, names[i], sizes[i]) != CN_OK) return cn_last_status();
    if (cfg->n_embd % cfg->n_head != 0)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "n_embd = %lld is not a multiple of n_head = "
                            "%lld; each head takes n_embd / n_head channels: choose sizes that "
                            "divide",
                            (long long)cfg->n_embd, (long long)cfg->n_head);
    /* the largest parameters: [vocab, C], [block, C], [4C, C]; and the whole count, 12 C^2 a
     * block, so that counting them cannot overflow either */
    int64_t wide = 0, mlp = 0, p = 0, per_block = 0, blocks = 0;
    if (__builtin_mul_overflow(cfg->n_embd, (int64_t)MLP_WIDTH, &wide) ||
        __builtin_mul_overflow(wide, cfg->n_embd, &mlp) ||
        __builtin_mul_overflow(mlp, (int64_t)3, &per_block) ||
        __builtin_mul_overflow(per_block, cfg->n_layer, &blocks) ||
        __builtin_mul_overflow(cfg->vocab_size, cfg->n_embd, &p) ||
        __builtin_mul_overflow(cfg->block_size, cfg->n_embd, &p))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "the sizes (vocab_size %lld, block_size %lld, "
                            "n_layer %lld, n_embd %lld) give parameters past int64 elements; "
                            "choose smaller ones",
                            (long long)cfg->vocab_size, (long long)cfg->block_size,
                            (long long)cfg->n_layer, (long long)cfg->n_embd);
    return CN_OK;
}

cn_module *cn_gpt_new(const cn_gpt_config *cfg, cn_device device, cn_dtype dtype,
                      cn_generator *gen) {
    const char *op = "gpt_new";
    if (!cfg || !gen) {
        cn__null_arg(op, !cfg ? "cfg" : "gen");
        return NULL;
    }
    if (check_config(op, cfg) != CN_OK || nn_check_float_dtype(op, dtype) != CN_OK) return NULL;
    gpt_state *s = cn__calloc(op, 1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    s->cfg.bias = cfg->bias != 0;
    cn_module *m = cn_module_new(&gpt_vtable, s);
    if (!m) return NULL;
    /* in the order of nanoGPT's modules: wte, wpe, the blocks, ln_f */
    cn_module *kids[4];
    kids[0] = normal_embedding(cfg->vocab_size, cfg->n_embd, device, dtype, gen);
    kids[1] = normal_embedding(cfg->block_size, cfg->n_embd, device, dtype, gen);
    cn_module *h = cn_module_new(&module_list_vtable, NULL);
    for (int64_t i = 0; i < cfg->n_layer && h; i++) {
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        cn_module *block = block_new(cfg, device, dtype, gen);
        if (!block || cn_module_add_child(h, name, block) != CN_OK) {
            cn_module_free(h);
            h = NULL;
        }
    }
    kids[2] = h;
    kids[3] = layer_norm_new(cfg->n_embd, cfg->bias, device, dtype);
    cn_module *transformer = cn_module_new(&module_dict_vtable, NULL);
    transformer =
        with_children(transformer, (const char *const[]){"wte", "wpe", "h", "ln_f"}, kids, 4);
    if (!transformer) {
        cn_module_free(m);
        return NULL;
    }
    s->wte = kids[0];
    s->wpe = kids[1];
    s->h = kids[2];
    s->ln_f = kids[3];
    s->wte_weight = cn_module_find(kids[0], "weight");
    if (cn_module_add_child(m, "transformer", transformer) != CN_OK) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

static gpt_state *gpt_of(const char *op, const cn_module *m) {
    if (!m) {
        cn__null_arg(op, "gpt");
        return NULL;
    }
    if (m->vt != &gpt_vtable) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "'gpt' is a %s; give a module that cn_gpt_new made",
                     cn_module_kind(m));
        return NULL;
    }
    return m->state;
}

cn_status cn_gpt_config_of(const cn_module *gpt, cn_gpt_config *cfg) {
    const char *op = "gpt_config_of";
    if (!cfg) return cn__null_arg(op, "cfg"), cn_last_status();
    const gpt_state *s = gpt_of(op, gpt);
    if (!s) return cn_last_status();
    *cfg = s->cfg;
    return CN_OK;
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

#define TIED_KEY "transformer.wte.weight"
#define HEAD_KEY "lm_head.weight"

static int has_key(const cn_safetensors *h, const char *name) {
    for (int i = 0; i < cn_safetensors_count(h); i++)
        if (strcmp(cn_safetensors_name(h, i), name) == 0) return 1;
    return 0;
}

/* The tensor `key` of h checked against parameter p; NULL with the error set otherwise. */
static cn_tensor *matching(const char *op, const cn_safetensors *h, const char *key, cn_tensor *p) {
    cn_tensor *t = cn_safetensors_get(h, key);
    if (!t) {
        if (cn_last_status() == CN_ERR_INVALID_ARG)
            cn_set_error(CN_ERR_INVALID_ARG, op,
                         "the checkpoint has no tensor '%s', a parameter "
                         "of the GPT%s; it holds another model, or a GPT of other sizes",
                         key,
                         strcmp(key, TIED_KEY) == 0 ? " (nor its tied twin '" HEAD_KEY "')" : "");
        return NULL;
    }
    char a[128], b[128];
    int same = cn_ndim(t) == cn_ndim(p);
    for (int d = 0; same && d < cn_ndim(t); d++)
        same = cn_shape(t)[d] == cn_shape(p)[d];
    if (!same || cn_dtype_of(t) != cn_dtype_of(p)) {
        cn_set_error(!same ? CN_ERR_SHAPE : CN_ERR_DTYPE, op,
                     "the checkpoint's '%s' is %s, but "
                     "the GPT's parameter is %s; make the GPT with the configuration and dtype "
                     "the checkpoint was written with",
                     key, cn_tensor_str(t, a, sizeof a), cn_tensor_str(p, b, sizeof b));
        cn_release(t);
        return NULL;
    }
    return t;
}

/* CN_OK when a and b (same shape and dtype) hold the same bytes; CN_ERR_INVALID_ARG otherwise. */
static cn_status check_same_values(const char *op, cn_tensor *a, cn_tensor *b) {
    size_t bytes = (size_t)cn_numel(a) * cn_dtype_size(cn_dtype_of(a));
    unsigned char *x = cn__malloc(op, bytes ? bytes : 1), *y = cn__malloc(op, bytes ? bytes : 1);
    cn_status st = x && y ? CN_OK : CN_ERR_OUT_OF_MEMORY;
    if (st == CN_OK) st = cn_read(a, x, bytes);
    if (st == CN_OK) st = cn_read(b, y, bytes);
    if (st == CN_OK && memcmp(x, y, bytes) != 0)
        st = cn_set_error(CN_ERR_INVALID_ARG, op,
                          "the checkpoint holds both '" TIED_KEY "' and '" HEAD_KEY
                          "' with different values, but the GPT ties them (one matrix); "
                          "it was written by an untied model, which this GPT cannot load");
    cn__free(x);
    cn__free(y);
    return st;
}

cn_status cn_gpt_load(cn_module *gpt, const cn_safetensors *h) {
    const char *op = "gpt_load";
    if (!h) return cn__null_arg(op, "h"), cn_last_status();
    if (!gpt_of(op, gpt)) return cn_last_status();
    int n = 0;
    const cn_param *params = cn_module_params(gpt, &n);
    if (!params) return cn_last_status();
    cn_status st = cn_scope_begin();
    if (st != CN_OK) return st;
    cn_tensor **values = cn__calloc(op, (size_t)(n ? n : 1), sizeof *values);
    if (!values) st = cn_last_status();
    for (int i = 0; i < n && st == CN_OK; i++) {
        int tied = strcmp(params[i].name, TIED_KEY) == 0;
        int from_head = tied && !has_key(h, TIED_KEY) && has_key(h, HEAD_KEY);
        const char *key = from_head ? HEAD_KEY : params[i].name;
        if (!(values[i] = matching(op, h, key, params[i].tensor))) st = cn_last_status();
        if (st == CN_OK && tied && !from_head && has_key(h, HEAD_KEY)) {
            cn_tensor *twin = matching(op, h, HEAD_KEY, params[i].tensor);
            st = twin ? check_same_values(op, values[i], twin) : cn_last_status();
        }
    }
    cn_no_grad_begin();
    for (int i = 0; i < n && st == CN_OK; i++) /* shapes and dtypes match: nothing can fail */
        st = cn_copy_(params[i].tensor, values[i]);
    cn_no_grad_end();
    cn__free(values);
    cn_scope_end();
    return st;
}

/* ---- optimizer ------------------------------------------------------------------------------- */

cn_optimizer *cn_gpt_adamw_new(cn_module *gpt, double lr, double beta1, double beta2, double eps,
                               double weight_decay) {
    const char *op = "gpt_adamw_new";
    if (!gpt_of(op, gpt)) return NULL;
    int n = 0;
    const cn_param *params = cn_module_params(gpt, &n);
    if (!params) return NULL;
    cn_param *sorted = cn__malloc(op, sizeof *sorted * (size_t)(n ? n : 1));
    if (!sorted) return NULL;
    int k = 0;
    for (int i = 0; i < n; i++) /* decay: matrices (Linear and Embedding weights) */
        if (cn_ndim(params[i].tensor) >= 2) sorted[k++] = params[i];
    int n_decay = k;
    for (int i = 0; i < n; i++) /* no decay: biases and LayerNorm weights */
        if (cn_ndim(params[i].tensor) < 2) sorted[k++] = params[i];
    const cn_param_group groups[2] = {{sorted, n_decay, CN_GROUP_DEFAULT, weight_decay},
                                      {sorted + n_decay, n - n_decay, CN_GROUP_DEFAULT, 0.0}};
    cn_optimizer *opt = cn_adamw_new_groups(groups, 2, lr, beta1, beta2, eps, weight_decay);
    cn__free(sorted);
    return opt;
}
