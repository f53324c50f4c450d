/* The models of `cinder train` and `cinder eval` (models.h): the MLP built on the fused
 * linear + relu extension op (on a backend without a kernel for it, the same layer as built-in
 * linear and relu), the CNN built from nn.h's modules, and their checkpoints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/models.h"
#include "cli/step_profile.h"
#include "fused.h"

#define IMAGE_SIDE   28
#define IMAGE_PIXELS (IMAGE_SIDE * IMAGE_SIDE)
#define CLASSES      10

const char *cli_model_name(cli_model_kind kind) { return kind == CLI_MODEL_CNN ? "cnn" : "mlp"; }

int cli_model_parse(const char *name, cli_model_kind *kind) {
    if (strcmp(name, "mlp") == 0) {
        *kind = CLI_MODEL_MLP;
        return 1;
    }
    if (strcmp(name, "cnn") == 0) {
        *kind = CLI_MODEL_CNN;
        return 1;
    }
    return 0;
}

/* ---- parameters ------------------------------------------------------------------------------ */

/* U(-bound, bound) in f32 on `device`; a leaf requiring grad on an autodiff device. */
static cn_tensor *uniform_param(const int64_t *shape, int ndim, double bound, cn_device device,
                                cn_generator *gen) {
    cn_tensor *t = cn_rand_uniform(gen, shape, ndim, -bound, bound, CN_F32, device);
    return device.autodiff ? cn_require_grad(t) : t;
}

/* ---- the fused linear + relu layer ----------------------------------------------------------- *
 * A module whose forward is the extension op, so that the MLP's parameters are named, listed,
 * saved and updated like those of nn.h's layers. */

typedef struct fused_state {
    cn_tensor *weight; /* [out, in], borrowed from the module's parameters */
    cn_tensor *bias;   /* [out] */
} fused_state;

/* x: [N, in] -> relu(x W^T + b): [N, out] */
static cn_tensor *fused_forward(cn_module *m, cn_tensor *x) {
    fused_state *s = cn_module_state(m);
    return fused_linear_relu(x, s->weight, s->bias);
}

/* The same layer from built-in ops, for a backend the extension has no kernel for. */
static cn_tensor *unfused_forward(cn_module *m, cn_tensor *x) {
    fused_state *s = cn_module_state(m);
    cn_tensor *z = cn_linear(x, s->weight, s->bias);
    return z ? cn_relu(z) : NULL; /* z belongs to the forward's scope */
}

static void fused_free_state(void *state) { free(state); }

static const cn_module_vtable fused_vtable = {"FusedLinearReLU", fused_forward, NULL,
                                              fused_free_state};
static const cn_module_vtable unfused_vtable = {"LinearReLU", unfused_forward, NULL,
                                                fused_free_state};

/* The layer's kind on device: the fused op where it has a kernel, built-in ops elsewhere; NULL
 * with the error set when the extension's registration failed. */
static const cn_module_vtable *layer_kind(cn_device device) {
    if (fused_register() != CN_OK) return NULL;
    return cn_ext_has_kernel(cn_ext_find("fused_linear_relu"), device) ? &fused_vtable
                                                                        : &unfused_vtable;
}

/* Parameters as torch.nn.Linear(in, out) draws them: weight, then bias, both from
 * U(-1/sqrt(in), 1/sqrt(in)). */
static cn_module *fused_layer_new(int64_t in, int64_t out, cn_device device, cn_generator *gen) {
    const cn_module_vtable *kind = layer_kind(device);
    if (!kind) return NULL;
    fused_state *s = calloc(1, sizeof *s);
    if (!s) {
        cn_set_error(CN_ERR_OUT_OF_MEMORY, "cli_model_new", "no memory for a layer's state");
        return NULL;
    }
    cn_module *m = cn_module_new(kind, s);
    if (!m) return NULL;
    double bound = 1.0 / sqrt((double)in);
    const int64_t wshape[2] = {out, in};
    s->weight = uniform_param(wshape, 2, bound, device, gen);
    if (cn_module_add_param(m, "weight", s->weight) != CN_OK) {
        cn_module_free(m);
        return NULL;
    }
    s->bias = uniform_param(&out, 1, bound, device, gen);
    if (cn_module_add_param(m, "bias", s->bias) != CN_OK) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- building ------------------------------------------------------------------------------- */

/* The MLP's container: its children applied in order, like a Sequential, but named by the
 * positions the layers have in PyTorch's nn.Sequential(Linear, ReLU, Linear, ReLU, Linear),
 * "0", "2" and "4": each fused layer stands for a Linear and the ReLU after it, so the checkpoint's
 * keys are those of that Sequential's state_dict. */
static cn_tensor *chain_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *h = x; /* each child's output is owned by this forward's scope */
    for (int i = 0; i < cn_module_child_count(m) && h; i++)
        h = cn_module_forward(cn_module_child(m, i), h);
    return h;
}

static const cn_module_vtable chain_vtable = {"Sequential", chain_forward, NULL, NULL};

#define MLP_LAYERS 3
static const char *const mlp_positions[MLP_LAYERS] = {"0", "2", "4"};

/* The layers are made one statement at a time: each draws from gen in turn, and the order of
 * the draws must not depend on the compiler's order of evaluating initialisers. */
static cn_module *mlp_new(cn_device device, cn_generator *gen) {
    cn_module *layers[MLP_LAYERS];
    layers[0] = fused_layer_new(IMAGE_PIXELS, 256, device, gen);
    layers[1] = fused_layer_new(256, 128, device, gen);
    layers[2] = cn_linear_new(128, CLASSES, 1, device, CN_F32, gen);
    int ok = layers[0] && layers[1] && layers[2];
    cn_module *m = ok ? cn_module_new(&chain_vtable, NULL) : NULL;
    for (int i = 0; i < MLP_LAYERS; i++) {
        if (!m) { /* the failed constructor's error stays */
            cn_module_free(layers[i]);
            continue;
        }
        if (cn_module_add_child(m, mlp_positions[i], layers[i]) != CN_OK) { /* freed layers[i] */
            cn_module_free(m);
            m = NULL;
        }
    }
    return m;
}

static cn_module *cnn_new(cn_device device, cn_generator *gen) {
    const cn_conv2d_params same = {.padding = {1, 1}};
    const cn_pool2d_params pool2 = {.kernel = {2, 2}, .stride = {2, 2}};
    cn_module *layers[10];
    layers[0] = cn_conv2d_new(1, 32, 3, 3, &same, 1, device, CN_F32, gen); /* [N, 32, 28, 28] */
    layers[1] = cn_activation_new(CN_ACT_RELU);
    layers[2] = cn_max_pool2d_new(&pool2);                                  /* [N, 32, 14, 14] */
    layers[3] = cn_conv2d_new(32, 64, 3, 3, &same, 1, device, CN_F32, gen); /* [N, 64, 14, 14] */
    layers[4] = cn_activation_new(CN_ACT_RELU);
    layers[5] = cn_max_pool2d_new(&pool2); /* [N, 64, 7, 7] */
    layers[6] = cn_flatten_new(1, -1);     /* [N, 3136] */
    layers[7] = cn_linear_new(64 * 7 * 7, 128, 1, device, CN_F32, gen);
    layers[8] = cn_activation_new(CN_ACT_RELU);
    layers[9] = cn_linear_new(128, CLASSES, 1, device, CN_F32, gen);
    return cn_sequential_new(layers, 10);
}

cn_status cli_model_new(cli_model_kind kind, cn_device device, cn_generator *gen, cli_model *out) {
    out->kind = kind;
    out->weights = CN_F32;
    out->net = kind == CLI_MODEL_CNN ? cnn_new(device, gen) : mlp_new(device, gen);
    return out->net ? CN_OK : cn_last_status();
}

void cli_model_free(cli_model *m) {
    cn_module_free(m->net);
    m->net = NULL;
}

/* ---- forward -------------------------------------------------------------------------------- */

cn_tensor *cli_model_forward(cli_model *m, cn_tensor *x) {
    if (m->kind == CLI_MODEL_MLP) return cn_module_forward(m->net, x);
    /* x: [N, 784] -> [N, 1, 28, 28] */
    const int64_t n = x ? cn_shape(x)[0] : 0;
    const int64_t image_shape[4] = {n, 1, IMAGE_SIDE, IMAGE_SIDE};
    cn_tensor *images = cn_reshape(x, image_shape, 4);
    cn_tensor *logits = cn_module_forward(m->net, images);
    cn_release(images);
    return logits;
}

/* ---- training ------------------------------------------------------------------------------- */

cn_status cli_model_train_step(cli_model *m, cn_optimizer *opt, cn_tensor *x, cn_tensor *y,
                               float *loss, int *applied) {
    *applied = 0;
    cn_status st = cn_scope_begin();
    if (st != CN_OK) return st; /* nothing ran: without a scope every intermediate would leak */
    cn_tensor *l = cn_cross_entropy(cli_model_forward(m, x), y, 0.0); /* 0-d */
    cli_profile_mark(CLI_PHASE_FORWARD); /* CINDER_TRAIN_PROFILE (step_profile.h) */
    cn_grads *g = l ? cn_backward(l) : NULL;
    if (!g) st = cn_last_status();
    /* the loss is read before the parameters change: a failure here must not follow an update */
    if (st == CN_OK) st = cn_read(l, loss, sizeof *loss);
    if (st == CN_OK && m->sync) st = m->sync(m->sync_ctx, g, loss);
    if (st == CN_OK && isfinite(*loss)) {
        st = cn_optimizer_step(opt, g);
        *applied = st == CN_OK;
    }
    cn_grads_free(g);
    cn_status end = cn_scope_end(); /* cannot fail: this function opened the scope */
    return st != CN_OK ? st : end;
}

/* The loader limits and normalises the images as it decompresses them, so the load holds one copy
 * of what it keeps ((p / 255 - mean) * (1 / std) in f32, as cn_add_scalar then cn_mul_scalar
 * make it); each split is then viewed on `device`. */
cn_status cli_data_load(const char *dir, cn_device device, int with_train, int64_t train_limit,
                        int64_t test_limit, cli_data *out) {
    *out = (cli_data){0};
    const cn_fashion_mnist_options opt = {.train_limit = train_limit,
                                          .test_limit = test_limit,
                                          .mean = CLI_FASHION_MEAN,
                                          .std = CLI_FASHION_STD};
    cn_tensor *t[4] = {NULL, NULL, NULL, NULL};
    cn_status st = cn_scope_begin();
    if (st != CN_OK) return st;
    st = cn_fashion_mnist_load_with(dir, cn_inner_device(device), &opt, with_train ? &t[0] : NULL,
                                    with_train ? &t[1] : NULL, &t[2], &t[3]);
    cn_tensor **dst[4] = {&out->train_x, &out->train_y, &out->test_x, &out->test_y};
    for (int k = with_train ? 0 : 2; k < 4 && st == CN_OK; k++) /* a new header on `device` */
        if (!(*dst[k] = cn_keep(cn_to_device(t[k], device)))) st = cn_last_status();
    if (st != CN_OK) cli_data_free(out);
    cn_scope_end(); /* releases the loader's tensors: the views keep their storage */
    return st;
}

void cli_data_free(cli_data *d) {
    cn_release(d->train_x);
    cn_release(d->train_y);
    cn_release(d->test_x);
    cn_release(d->test_y);
    *d = (cli_data){0};
}

double cli_model_accuracy(cli_model *m, cn_tensor *images, cn_tensor *labels, int64_t batch) {
    cn_batches *it = cn_batches_new(images, labels, batch, 0, 0, 0);
    if (!it) return -1;
    int was_training = cn_module_is_training(m->net);
    cn_module_train(m->net, 0);
    cn_no_grad_begin();
    int64_t correct = 0, seen = 0;
    int more = 1;
    while (more > 0) {
        if (cn_scope_begin() != CN_OK) {
            more = -1;
            break;
        }
        cn_tensor *x = NULL, *y = NULL;
        more = cn_batches_next(it, &x, &y);
        if (more > 0) {
            /* logits: [B, 10] -> predicted class [B] i64, compared with y: [B] i64 */
            cn_tensor *predicted = cn_argmax_dim(cli_model_forward(m, x), 1, 0);
            cn_tensor *hits = cn_sum(cn_cast(cn_eq(predicted, y), CN_I64));
            int64_t k = 0;
            if (!hits || cn_read(hits, &k, sizeof k) != CN_OK) more = -1;
            correct += k;
            seen += cn_shape(x)[0];
        }
        cn_scope_end();
    }
    cn_no_grad_end();
    cn_module_train(m->net, was_training);
    cn_batches_free(it);
    if (more < 0) return -1;
    return seen ? (double)correct / (double)seen : 0.0;
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

cn_status cli_model_save(cli_model *m, const char *path) {
    int n = 0;
    const cn_param *params = cn_module_params(m->net, &n);
    if (!params) return cn_last_status();
    const char **names = malloc(sizeof *names * (size_t)n);
    cn_tensor **tensors = malloc(sizeof *tensors * (size_t)n);
    cn_status st = CN_OK;
    if (!names || !tensors) {
        st = cn_set_error(CN_ERR_OUT_OF_MEMORY, "cli_model_save", "no memory for %d names", n);
    } else {
        for (int i = 0; i < n; i++) {
            names[i] = params[i].name;
            tensors[i] = params[i].tensor;
        }
        st = cn_safetensors_save(path, names, tensors, n);
    }
    free(names);
    free(tensors);
    return st;
}

const char *cli_shape_str(const cn_tensor *t, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < cn_ndim(t) && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? ", " : "",
                                (long long)cn_shape(t)[d]);
    if (len < size) snprintf(buf + len, size - len, "]");
    return buf;
}

cn_status cli_model_detect(const cn_safetensors *h, const char *path, cli_model_kind *kind) {
    cn_tensor *first = cn_safetensors_get(h, "0.weight");
    if (!first && cn_last_status() != CN_ERR_INVALID_ARG) return cn_last_status(); /* no memory */
    int ndim = first ? cn_ndim(first) : -1;
    int quantized = first && cn_kind_of(first) == CN_KIND_QUANTIZED;
    cn_release(first);
    if (quantized) { /* [out, K'] for both models: the metadata says which */
        const char *name = cn_safetensors_metadata(h, "model");
        if (name && cli_model_parse(name, kind)) return CN_OK;
        return cn_set_error(CN_ERR_IO, "eval",
                            "'%s': its '0.weight' is quantized, but its metadata 'model' is %s%s%s "
                            "instead of \"mlp\" or \"cnn\"; it was not written by `cinder "
                            "quantize`: quantize the f32 checkpoint with it",
                            path, name ? "\"" : "", name ? name : "absent", name ? "\"" : "");
    }
    if (ndim == 2) {
        *kind = CLI_MODEL_MLP;
        return CN_OK;
    }
    if (ndim == 4) {
        *kind = CLI_MODEL_CNN;
        return CN_OK;
    }
    const char *model = cn_safetensors_metadata(h, "model");
    if (model && strcmp(model, "gpt") == 0)
        return cn_set_error(CN_ERR_IO, "eval",
                            "'%s' holds a gpt (`cinder train --model gpt`), "
                            "which has no test accuracy to measure; sample from it with `cinder "
                            "generate --load %s`",
                            path, path);
    return cn_set_error(CN_ERR_IO, "eval",
                        "'%s': %s; it is not a checkpoint of `cinder train --save` (whose "
                        "'0.weight' is [256, 784] for the mlp and [32, 1, 3, 3] for the cnn)",
                        path,
                        ndim < 0 ? "it has no tensor '0.weight'"
                                 : "its '0.weight' is neither 2-D "
                                   "nor 4-D");
}

/* Whether h holds a tensor called `name`. */
static int has_tensor(const cn_safetensors *h, const char *name) {
    for (int i = 0; i < cn_safetensors_count(h); i++)
        if (strcmp(cn_safetensors_name(h, i), name) == 0) return 1;
    return 0;
}

/* Checkpoints written before the MLP's layers took PyTorch's positions name them 0, 1, 2 (the
 * Sequential's children in order): such a file has "1.weight" and no "4.weight". */
static int mlp_legacy_layout(const cli_model *m, const cn_safetensors *h) {
    return m->kind == CLI_MODEL_MLP && !has_tensor(h, "4.weight") && has_tensor(h, "1.weight");
}

/* The key of parameter `name` ("2.bias") in a legacy MLP checkpoint ("1.bias") into buf; the name
 * itself when its layer is not one of the MLP's. */
static const char *legacy_name(const char *name, char *buf, size_t size) {
    const char *dot = strchr(name, '.');
    for (int i = 0; dot && i < MLP_LAYERS; i++)
        if (strncmp(name, mlp_positions[i], (size_t)(dot - name)) == 0 &&
            mlp_positions[i][dot - name] == '\0') {
            snprintf(buf, size, "%d%s", i, dot);
            return buf;
        }
    return name;
}

/* The tensor `key` of h, checked against the parameter p; NULL with CN_ERR_IO otherwise. */
static cn_tensor *matching_tensor(const cn_safetensors *h, const char *path, const char *model,
                                  const char *key, const cn_param *p) {
    cn_tensor *t = cn_safetensors_get(h, key);
    char want[96], got[96];
    if (!t && cn_last_status() != CN_ERR_INVALID_ARG) return NULL; /* no memory: not the file's */
    if (!t) {
        cn_set_error(CN_ERR_IO, "eval",
                     "'%s' has no tensor '%s', a parameter of the %s (whose keys are those of "
                     "%s); it is not a checkpoint of `cinder train --model %s --save` or of that "
                     "PyTorch model, or it was cut short",
                     path, key, model,
                     strcmp(model, "cnn") == 0
                         ? "nn.Sequential(Conv2d, ReLU, MaxPool2d, Conv2d, ReLU, MaxPool2d, "
                           "Flatten, Linear, ReLU, Linear): 0, 3, 7, 9"
                         : "nn.Sequential(Linear, ReLU, Linear, ReLU, Linear): 0, 2, 4",
                     model);
        return NULL;
    }
    int same = cn_ndim(t) == cn_ndim(p->tensor) && cn_dtype_of(t) == cn_dtype_of(p->tensor);
    for (int d = 0; same && d < cn_ndim(t); d++)
        same = cn_shape(t)[d] == cn_shape(p->tensor)[d];
    if (!same) {
        cn_set_error(CN_ERR_IO, "eval",
                     "'%s': tensor '%s' is %s %s, but the %s's parameter is %s %s; the "
                     "checkpoint was written by another model",
                     path, key, cli_shape_str(t, got, sizeof got), cn_dtype_name(cn_dtype_of(t)),
                     model, cli_shape_str(p->tensor, want, sizeof want),
                     cn_dtype_name(cn_dtype_of(p->tensor)));
        cn_release(t);
        return NULL;
    }
    return t;
}

cn_status cli_model_load(cli_model *m, const cn_safetensors *h, const char *path) {
    int n = 0;
    const cn_param *params = cn_module_params(m->net, &n);
    if (!params) return cn_last_status();
    cn_status st = cn_scope_begin();
    if (st != CN_OK) return st;
    cn_tensor **values = calloc((size_t)n, sizeof *values);
    if (!values) st = cn_set_error(CN_ERR_OUT_OF_MEMORY, "eval", "no memory for %d tensors", n);
    int legacy = mlp_legacy_layout(m, h);
    for (int i = 0; i < n && st == CN_OK; i++) {
        char buf[64];
        const char *key = legacy ? legacy_name(params[i].name, buf, sizeof buf) : params[i].name;
        values[i] = matching_tensor(h, path, cli_model_name(m->kind), key, &params[i]);
        if (!values[i]) st = cn_last_status();
    }
    cn_no_grad_begin();
    for (int i = 0; i < n && st == CN_OK; i++)
        st = cn_copy_(params[i].tensor, values[i]);
    cn_no_grad_end();
    free(values);
    cn_scope_end();
    return st;
}

/* ---- quantized checkpoints (models.h) -------------------------------------------------------- */

#define QBLOCK 32 /* the block of CN_Q8_BLOCK and CN_Q4_BLOCK */

static int block_scheme(cn_dtype scheme) { return scheme == CN_Q8_BLOCK || scheme == CN_Q4_BLOCK; }

int64_t cli_quant_width(int64_t fan_in, cn_dtype scheme) {
    return block_scheme(scheme) ? (fan_in + QBLOCK - 1) / QBLOCK * QBLOCK : fan_in;
}

cn_tensor *cli_quantize_weight(cn_tensor *w, cn_dtype scheme) {
    if (!w) return NULL;
    if (cn_ndim(w) < 1 || cn_shape(w)[0] < 1) {
        cn_set_error(CN_ERR_SHAPE, "quantize", "a weight must have an output dim of size >= 1");
        return NULL;
    }
    if (cn_scope_begin() != CN_OK) return NULL;
    const int64_t out = cn_shape(w)[0], fan_in = cn_numel(w) / out;
    const int64_t matrix[2] = {out, fan_in}, pad[2] = {0, cli_quant_width(fan_in, scheme) - fan_in};
    cn_tensor *m = cn_reshape(w, matrix, 2);
    if (pad[1] > 0) m = cn_pad(m, pad, 2, CN_PAD_CONSTANT, 0.0);
    cn_tensor *q = cn_keep(cn_quantize(m, scheme));
    cn_scope_end();
    return q;
}

int cli_checkpoint_quantized(const cn_safetensors *h) {
    for (int i = 0; i < cn_safetensors_count(h); i++) {
        char key[256];
        if (snprintf(key, sizeof key, "cinder.quant.%s", cn_safetensors_name(h, i)) <
                (int)sizeof key &&
            cn_safetensors_metadata(h, key))
            return 1;
    }
    return 0;
}

/* A layer of the quantized model: y = x W^T + b with W quantized, x padded with zeros to W's
 * width; a conv runs it over the image's 3x3 patches (padding 1, stride 1, as the models'). */
typedef struct qlayer_state {
    cn_tensor *weight; /* quantized [out, K'], borrowed from the module's buffers */
    cn_tensor *bias;   /* f32 [out], borrowed from its parameters */
    int64_t fan_in;    /* K: the input's features (linear) or C * 3 * 3 (conv) */
    int conv;          /* x [N, C, H, W] -> [N, out, H, W] */
    int relu;          /* relu after (the mlp's hidden layers, which stand for linear + relu) */
} qlayer_state;

/* x [.., K] -> [.., out] */
static cn_tensor *qlayer_linear(const qlayer_state *s, cn_tensor *x) {
    const int64_t pad[2] = {0, cn_shape(s->weight)[1] - s->fan_in};
    if (pad[1] > 0) x = cn_pad(x, pad, 2, CN_PAD_CONSTANT, 0.0);
    return cn_quant_linear(x, s->weight, s->bias);
}

static cn_tensor *qlayer_forward(cn_module *m, cn_tensor *x) {
    const qlayer_state *s = cn_module_state(m);
    if (!s->conv) {
        cn_tensor *y = qlayer_linear(s, x);
        return s->relu ? cn_relu(y) : y;
    }
    if (cn_ndim(x) != 4) {
        cn_set_error(CN_ERR_SHAPE, "eval", "a quantized conv takes [N, C, H, W], not %d-D",
                     cn_ndim(x));
        return NULL;
    }
    /* im2col: the 3x3 patches (padding 1) as rows, [N, H * W, C * 9] in the order (c, i, j) of
     * the weight's [O, C, 3, 3]: unfold's columns transposed (one copy, made by the padding to
     * the weight's width or by the linear's making x dense) */
    const int64_t n = cn_shape(x)[0], h = cn_shape(x)[2], w = cn_shape(x)[3];
    const int64_t shape[4] = {n, cn_shape(s->weight)[0], h, w};
    const cn_fold_params patch = {{3, 3}, {1, 1}, {1, 1}, {1, 1}};
    cn_tensor *patches = cn_transpose(cn_unfold4d(x, &patch), 1, 2);
    cn_tensor *y = cn_transpose(qlayer_linear(s, patches), 1, 2); /* [N, O, H * W] */
    /* dense planes: the pooling and relu that follow take their vectorised paths on those (on
     * the transposed view, their general loops were 60% of a quantized cnn's evaluation) */
    return cn_reshape(cn_contiguous(y), shape, 4);
}

static void qlayer_free_state(void *state) { free(state); }

static const cn_module_vtable qlayer_vtable = {"QuantLinear", qlayer_forward, NULL,
                                               qlayer_free_state};

/* A layer taking `weight` and `bias` (references handed over, also on failure). */
static cn_module *qlayer_new(cn_tensor *weight, cn_tensor *bias, int64_t fan_in, int conv,
                             int relu) {
    qlayer_state *s = calloc(1, sizeof *s);
    cn_module *m = NULL;
    if (!s)
        cn_set_error(CN_ERR_OUT_OF_MEMORY, "eval", "no memory for a layer's state");
    else
        m = cn_module_new(&qlayer_vtable, s); /* frees s on failure */
    if (!m) {
        cn_release(weight);
        cn_release(bias);
        return NULL;
    }
    *s = (qlayer_state){weight, bias, fan_in, conv, relu};
    if (cn_module_add_buffer(m, "weight", weight) != CN_OK) {
        cn_release(bias);
        cn_module_free(m);
        return NULL;
    }
    if (cn_module_add_param(m, "bias", bias) != CN_OK) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

/* The layers with parameters, in the f32 model's order: their position, fan-in, outputs. */
typedef struct qlayer_spec {
    const char *position;
    int64_t fan_in, out;
    int conv;
} qlayer_spec;

static const qlayer_spec mlp_specs[] = {
    {"0", IMAGE_PIXELS, 256, 0}, {"2", 256, 128, 0}, {"4", 128, CLASSES, 0}};
static const qlayer_spec cnn_specs[] = {
    {"0", 1 * 9, 32, 1}, {"3", 32 * 9, 64, 1}, {"7", 64 * 7 * 7, 128, 0}, {"9", 128, CLASSES, 0}};

/* The quantized weight and the f32 bias of layer `l` from h, checked; CN_ERR_IO otherwise. */
static cn_status qlayer_tensors(const cn_safetensors *h, const char *path, const char *model,
                                const qlayer_spec *l, cn_tensor **weight, cn_tensor **bias) {
    char wname[32], bname[32], got[96];
    snprintf(wname, sizeof wname, "%s.weight", l->position);
    snprintf(bname, sizeof bname, "%s.bias", l->position);
    *weight = cn_safetensors_get(h, wname);
    *bias = *weight ? cn_safetensors_get(h, bname) : NULL;
    if (!*bias && cn_last_status() != CN_ERR_INVALID_ARG) return cn_last_status(); /* memory */
    if (!*bias)
        return cn_set_error(CN_ERR_IO, "eval",
                            "'%s' has no tensor '%s', a parameter of the %s; "
                            "it is not a checkpoint that `cinder quantize` wrote, or it was cut "
                            "short",
                            path, *weight ? bname : wname, model);
    const cn_dtype scheme = cn_dtype_of(*weight);
    const int64_t width = cli_quant_width(l->fan_in, scheme);
    if (cn_kind_of(*weight) != CN_KIND_QUANTIZED)
        return cn_set_error(CN_ERR_IO, "eval",
                            "'%s': '%s' is %s %s, not quantized, but the "
                            "file holds quantized weights; `cinder quantize` quantizes every "
                            "weight: quantize the f32 checkpoint again",
                            path, wname, cli_shape_str(*weight, got, sizeof got),
                            cn_dtype_name(scheme));
    if (cn_ndim(*weight) != 2 || cn_shape(*weight)[0] != l->out || cn_shape(*weight)[1] != width)
        return cn_set_error(CN_ERR_IO, "eval",
                            "'%s': '%s' is %s %s, but the %s's layer %s "
                            "takes [%lld, %lld] %s ([out, fan-in], the fan-in rounded up to a "
                            "multiple of 32 for the block schemes); the file was not written by "
                            "`cinder quantize`",
                            path, wname, cli_shape_str(*weight, got, sizeof got),
                            cn_dtype_name(scheme), model, l->position, (long long)l->out,
                            (long long)width, cn_dtype_name(scheme));
    if (cn_dtype_of(*bias) != CN_F32 || cn_ndim(*bias) != 1 || cn_shape(*bias)[0] != l->out)
        return cn_set_error(CN_ERR_IO, "eval",
                            "'%s': '%s' is %s %s, but the %s's layer %s "
                            "takes an f32 bias [%lld]; the file was not written by `cinder "
                            "quantize`",
                            path, bname, cli_shape_str(*bias, got, sizeof got),
                            cn_dtype_name(cn_dtype_of(*bias)), model, l->position,
                            (long long)l->out);
    return CN_OK;
}

cn_status cli_model_load_quantized(const cn_safetensors *h, const char *path, cli_model_kind kind,
                                   cli_model *out) {
    *out = (cli_model){.kind = kind};
    const char *model = cli_model_name(kind);
    const qlayer_spec *specs = kind == CLI_MODEL_CNN ? cnn_specs : mlp_specs;
    const int n = kind == CLI_MODEL_CNN ? 4 : MLP_LAYERS;
    cn_module *layers[4] = {NULL, NULL, NULL, NULL};
    cn_dtype scheme = CN_F32;
    cn_status st = cn_scope_begin();
    if (st != CN_OK) return st;
    for (int i = 0; i < n && st == CN_OK; i++) {
        cn_tensor *w = NULL, *b = NULL;
        st = qlayer_tensors(h, path, model, &specs[i], &w, &b);
        if (st == CN_OK) {
            const cn_dtype s = cn_dtype_of(w);
            scheme = i == 0 || s == scheme ? s : CN_DTYPE_COUNT;
            /* the hidden layers of the mlp are linear + relu */
            layers[i] = qlayer_new(cn_keep(w), cn_keep(b), specs[i].fan_in, specs[i].conv,
                                   kind == CLI_MODEL_MLP && i < MLP_LAYERS - 1);
            if (!layers[i]) st = cn_last_status();
        }
    }
    cn_scope_end(); /* releases what the checks took and did not hand to a layer */
    cn_module *net = NULL;
    if (st == CN_OK && kind == CLI_MODEL_MLP) {
        net = cn_module_new(&chain_vtable, NULL);
        for (int i = 0; i < n; i++) {
            if (net && cn_module_add_child(net, mlp_positions[i], layers[i]) != CN_OK) {
                cn_module_free(net); /* layers[i] was freed by the failed add */
                net = NULL;
            } else if (!net) {
                cn_module_free(layers[i]);
            }
            layers[i] = NULL;
        }
    } else if (st == CN_OK) {
        const cn_pool2d_params pool2 = {.kernel = {2, 2}, .stride = {2, 2}};
        cn_module *seq[10] = {layers[0],
                              cn_activation_new(CN_ACT_RELU),
                              cn_max_pool2d_new(&pool2),
                              layers[1],
                              cn_activation_new(CN_ACT_RELU),
                              cn_max_pool2d_new(&pool2),
                              cn_flatten_new(1, -1),
                              layers[2],
                              cn_activation_new(CN_ACT_RELU),
                              layers[3]};
        for (int i = 0; i < n; i++)
            layers[i] = NULL; /* the sequential takes them */
        net = cn_sequential_new(seq, 10);
    }
    for (int i = 0; i < n; i++)
        cn_module_free(layers[i]);
    if (st == CN_OK && !net) st = cn_last_status();
    if (st != CN_OK) return st;
    cn_module_train(net, 0);
    out->net = net;
    out->weights = scheme;
    return CN_OK;
}
