/* cinder: neural-network building blocks in plain C: modules, initialisers, losses, optimizers,
 * learning-rate schedules and gradient clipping, with PyTorch's semantics (torch.nn, torch.optim).
 *
 *     cn_device dev = cn_autodiff(cn_cpu());
 *     cn_generator gen = cn_generator_new(0);
 *     cn_module *net = cn_sequential_new((cn_module *[]){
 *         cn_linear_new(784, 128, 1, dev, CN_F32, &gen),
 *         cn_activation_new(CN_ACT_RELU),
 *         cn_linear_new(128, 10, 1, dev, CN_F32, &gen)}, 3);
 *     int n;
 *     const cn_param *params = cn_module_params(net, &n);
 *     cn_optimizer *opt = cn_adamw_new(params, n, 1e-3, 0.9, 0.999, 1e-8, 0.01);
 *     for (...) {
 *         cn_scope_begin();
 *         cn_tensor *loss = cn_cross_entropy(cn_module_forward(net, x), labels, 0.0);
 *         cn_grads *g = cn_backward(loss);
 *         cn_clip_grad_norm(g, params, n, 1.0);
 *         cn_optimizer_step(opt, g);
 *         cn_grads_free(g);                  // "zero_grad": gradients live in g only
 *         cn_scope_end();
 *     }
 *     cn_optimizer_free(opt);
 *     cn_module_free(net);
 *
 * Ownership: a module owns its parameters and buffers (no scope owns them, so they survive the
 * scopes of a training loop); an optimizer owns its state (momentum buffers, Adam moments) the
 * same way. Tensors that forward passes and losses return follow the usual rule (memory.h): one
 * reference for the caller, owned by the innermost open scope; their intermediates are released
 * before the call returns.
 *
 * Errors follow error.h: calls returning a pointer return NULL with the error set; a NULL module
 * or tensor argument keeps an earlier error, so chains can be checked once at the end. */
#ifndef CINDER_NN_H
#define CINDER_NN_H

#include "cinder/api.h"

#include <stdint.h>

#include "cinder/autodiff.h"
#include "cinder/device.h"
#include "cinder/error.h"
#include "cinder/io.h"
#include "cinder/ops.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- parameters and modules ------------------------------------------------------------------ */

/* A named tensor of a module: a parameter (what optimizers update) or a buffer (state that is not
 * trained, such as BatchNorm's running statistics). Names are PyTorch's state_dict keys:
 * "weight", "bias", and "<child>.<name>" inside containers ("0.weight", "2.bias", "1.0.weight"
 * for nested containers). Both the name and the tensor are borrowed from the module. */
typedef struct cn_param {
    const char *name;
    cn_tensor *tensor;
} cn_param;

typedef struct cn_module cn_module;

/* What a kind of module does. Built-in modules use their own; a program defines new modules with
 * cn_module_new and a vtable of its own (usually a static const). */
typedef struct cn_module_vtable {
    /* the kind's name, as PyTorch spells the class ("Linear"); used in messages */
    const char *kind;
    /* y = f(x). Runs inside a scope that cn_module_forward opens, so everything it makes may be
     * left to that scope; it must return an op's result made in the call (never x itself or a
     * parameter), or NULL with the error set. Reads its state with cn_module_state and its mode
     * with cn_module_is_training. */
    cn_tensor *(*forward)(cn_module *m, cn_tensor *x);
    /* optional: called by cn_module_train after the module's flag has changed */
    void (*set_training)(cn_module *m, int on);
    /* optional: frees the state given to cn_module_new (parameters are released separately) */
    void (*free_state)(void *state);
} cn_module_vtable;

/* A new module of kind `vt` (borrowed: it must outlive the module) with private `state` (owned:
 * passed to vt->free_state when the module is freed, also when this call fails). Starts in
 * training mode with no parameters; add them with cn_module_add_param. */
CN_API cn_module *cn_module_new(const cn_module_vtable *vt, void *state);

/* Registers `t` as the parameter `name` (copied; no '.'; unique in m). The module takes over the
 * caller's reference, also when t is scope-owned (the scope lets go of it) and also on failure
 * (t is released then). On an autodiff device t must require grad (a leaf: cn_require_grad),
 * else CN_ERR_INVALID_ARG: such a parameter would never train. State that is saved with the
 * module but not trained (a frozen weight, running statistics) is a buffer
 * (cn_module_add_buffer), as PyTorch separates parameters from buffers. A parameter on a
 * concrete device (an inference-only model) is accepted as it is. Register parameters before
 * adding the module to a container. */
CN_API cn_status cn_module_add_param(cn_module *m, const char *name, cn_tensor *t);

/* The same for a buffer (state saved with the module but not trained). */
CN_API cn_status cn_module_add_buffer(cn_module *m, const char *name, cn_tensor *t);

/* Adds `child` (owned from now on, also on failure, when it is freed) under `name`: its
 * parameters and buffers appear in m's as "<name>.<its name>", and cn_module_train reaches it. */
CN_API cn_status cn_module_add_child(cn_module *m, const char *name, cn_module *child);

/* The state given to cn_module_new; the kind's vtable. */
CN_API void *cn_module_state(const cn_module *m);
CN_API const char *cn_module_kind(const cn_module *m);

/* y = m(x): a new tensor (NULL with the error set on failure). Intermediates are released before
 * it returns; tracked parameters make y tracked, so cn_backward reaches them. */
CN_API cn_tensor *cn_module_forward(cn_module *m, cn_tensor *x);

/* The module's parameters, its own first, then each child's in the order added (recursively),
 * named as above; *count receives their number. The array is the module's: valid until the next
 * cn_module_params call on m or cn_module_free(m). NULL (count 0) on failure. */
CN_API const cn_param *cn_module_params(cn_module *m, int *count);

/* The same for buffers (BatchNorm: "running_mean", "running_var", "num_batches_tracked"). */
CN_API const cn_param *cn_module_buffers(cn_module *m, int *count);

/* The parameter or buffer called `name` ("0.weight"), borrowed; NULL with CN_ERR_INVALID_ARG when
 * m has none of that name. */
CN_API cn_tensor *cn_module_find(cn_module *m, const char *name);

/* Children: their number, and child i (borrowed; NULL with CN_ERR_INVALID_ARG out of range). */
CN_API int cn_module_child_count(const cn_module *m);
/* The child at `path`: a child's name, or names joined by '.' for a grandchild ("3", "blocks.0.
 * attn"), as the prefixes of cn_module_params' names. Borrowed (m owns it). NULL with
 * CN_ERR_INVALID_ARG naming the missing part and the children there when there is none. */
CN_API cn_module *cn_module_child_named(const cn_module *m, const char *path);
CN_API cn_module *cn_module_child(const cn_module *m, int i);

/* Training mode (on != 0) or evaluation mode (on = 0), for m and all its children, like
 * torch's module.train(on) / module.eval(). Dropout and BatchNorm behave differently in each.
 * Modules start in training mode. */
CN_API void cn_module_train(cn_module *m, int on);
CN_API int cn_module_is_training(const cn_module *m);

/* Frees m, its children, and its parameters and buffers (tensors other code still references
 * stay alive). NULL-safe. */
CN_API void cn_module_free(cn_module *m);

/* ---- layers -------------------------------------------------------------------------------------
 *
 * Constructors put parameters on `device` in `dtype` (a float dtype). On an autodiff device
 * (cn_autodiff(cn_cpu()) for training) parameters are leaves that require grad; on a concrete
 * device they are plain tensors, for inference. `gen` draws the initial values and advances;
 * modules made from the same seed in the same order get the same numbers. */

/* y = x W^T + b (torch.nn.Linear). x: [..., in] -> [..., out]. W: "weight" [out, in], b: "bias"
 * [out] when bias != 0. Both drawn from U(-1/sqrt(in), 1/sqrt(in)), PyTorch's default (Kaiming
 * uniform with a = sqrt(5) for W). */
CN_API cn_module *cn_linear_new(int64_t in_features, int64_t out_features, int bias, cn_device device,
                         cn_dtype dtype, cn_generator *gen);

/* 2-D convolution (torch.nn.Conv2d). x: [N, in, H, W] -> [N, out, OH, OW]. "weight"
 * [out, in / groups, kh, kw], "bias" [out] when bias != 0; both from U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)), fan_in = in / groups * kh * kw. p: stride, padding, dilation and groups as in
 * cn_conv2d (NULL: stride 1, no padding, one group); in and out must be multiples of groups. */
CN_API cn_module *cn_conv2d_new(int64_t in_channels, int64_t out_channels, int64_t kernel_h,
                         int64_t kernel_w, const cn_conv2d_params *p, int bias, cn_device device,
                         cn_dtype dtype, cn_generator *gen);

/* Pooling over [N, C, H, W] (torch.nn.MaxPool2d / AvgPool2d), as cn_max_pool2d / cn_avg_pool2d
 * with the parameters copied from p. No parameters. */
CN_API cn_module *cn_max_pool2d_new(const cn_pool2d_params *p);
CN_API cn_module *cn_avg_pool2d_new(const cn_pool2d_params *p);

/* Flattens dims start_dim..end_dim (inclusive, negative counting from the end) into one
 * (torch.nn.Flatten; PyTorch's default is start_dim 1, end_dim -1: [N, C, H, W] -> [N, C*H*W]). */
CN_API cn_module *cn_flatten_new(int start_dim, int end_dim);

/* Dropout (torch.nn.Dropout), 0 <= p <= 1. In training mode each element is zeroed with
 * probability p and the survivors are scaled by 1 / (1 - p), so the expectation is unchanged (p =
 * 1 zeroes everything); the mask is drawn with cn_rand_uniform from the module's own stream,
 * whose seed is derived from *gen's state (gen advances by 1, so dropouts made one after another
 * draw unrelated masks; the same seed gives the same masks). In evaluation mode it is the
 * identity. */
CN_API cn_module *cn_dropout_new(double p, cn_generator *gen);

/* Batch normalisation (torch.nn.BatchNorm2d: x [N, C, H, W]; BatchNorm1d: x [N, C] or
 * [N, C, L]), normalising each channel c:
 *     y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c
 * In training mode mean_c and var_c are the batch's (over every dim but 1; var biased, i.e.
 * divided by n = numel / C), and the buffers are updated under no-grad mode:
 *     running_mean = (1 - momentum) * running_mean + momentum * mean_c
 *     running_var  = (1 - momentum) * running_var  + momentum * var_c * n / (n - 1)   (unbiased)
 *     num_batches_tracked += 1
 * (n = 1 is an error in training mode, as in PyTorch). In evaluation mode the running statistics
 * are used instead. Parameters "weight" (ones) and "bias" (zeros), [C], when affine != 0;
 * buffers "running_mean" (zeros) and "running_var" (ones) [C] in dtype, and
 * "num_batches_tracked" (i64, 0-d). PyTorch's defaults: eps = 1e-5, momentum = 0.1. */
CN_API cn_module *cn_batchnorm2d_new(int64_t num_features, double eps, double momentum, int affine,
                              cn_device device, cn_dtype dtype);
CN_API cn_module *cn_batchnorm1d_new(int64_t num_features, double eps, double momentum, int affine,
                              cn_device device, cn_dtype dtype);

/* Layer normalisation over the last `ndim` dims (torch.nn.LayerNorm(normalized_shape)): x's
 * trailing dims must equal normalized_shape, and each slice over them is normalised with its own
 * mean and biased variance:  y = (x - mean) / sqrt(var + eps) * weight + bias, with "weight"
 * (ones) and "bias" (zeros) of shape normalized_shape when elementwise_affine != 0. The forward
 * is cn_layer_norm (one fused op; its errors, e.g. CN_ERR_SHAPE for x's trailing dims). eps must
 * be finite and > 0 (PyTorch's default: 1e-5). */
CN_API cn_module *cn_layernorm_new(const int64_t *normalized_shape, int ndim, double eps,
                            int elementwise_affine, cn_device device, cn_dtype dtype);

/* Root-mean-square normalisation over the last `ndim` dims (torch.nn.RMSNorm(normalized_shape,
 * eps, elementwise_affine)): y = x / sqrt(mean(x^2) + eps) * weight over each slice, with
 * "weight" (ones) of shape normalized_shape when elementwise_affine != 0 (no bias, as PyTorch's).
 * eps: finite and >= 0, or CN_RMS_NORM_EPS_DEFAULT (cinder/ops.h) for PyTorch's default eps=None,
 * the epsilon of x's dtype. The forward is cn_rms_norm (one fused op, and its errors).
 * Errors: CN_ERR_NULL_ARG (normalized_shape), CN_ERR_INVALID_ARG (ndim outside [1, CN_MAX_DIMS],
 * a size < 1, eps), CN_ERR_DTYPE (not a float dtype), CN_ERR_OUT_OF_MEMORY. Returns a new module
 * (cn_module_free); threads: as every module. */
CN_API cn_module *cn_rmsnorm_new(const int64_t *normalized_shape, int ndim, double eps,
                                 int elementwise_affine, cn_device device, cn_dtype dtype);

/* A lookup table (torch.nn.Embedding): x, integer indices of any shape, each in
 * [0, num_embeddings), -> x's shape + [embedding_dim], the rows of "weight"
 * [num_embeddings, embedding_dim], drawn from N(0, 1) like PyTorch. Gradients reach only the rows
 * looked up (summed when an index repeats). An index out of range is CN_ERR_INDEX. */
CN_API cn_module *cn_embedding_new(int64_t num_embeddings, int64_t embedding_dim, cn_device device,
                            cn_dtype dtype, cn_generator *gen);

/* Elementwise activations, as modules (the functions are cn_relu, cn_gelu, ... in ops.h). */
typedef enum cn_activation {
    CN_ACT_RELU = 0,
    CN_ACT_GELU = 1,      /* exact: x * Phi(x) (torch.nn.GELU()) */
    CN_ACT_GELU_TANH = 2, /* tanh approximation (torch.nn.GELU(approximate="tanh")) */
    CN_ACT_TANH = 3,
    CN_ACT_SIGMOID = 4,
    CN_ACT_SILU = 5,
    CN_ACT_COUNT
} cn_activation;

CN_API cn_module *cn_activation_new(cn_activation act);

/* A container that applies its modules in order (torch.nn.Sequential): y = mn(...m1(m0(x))).
 * Takes ownership of all n modules (n >= 0), also when it fails: then the non-NULL ones are freed,
 * and a NULL entry (a constructor that failed) keeps that constructor's error. Child i is named
 * "i", so its parameters are "i.weight", ... With no modules it is the identity. */
CN_API cn_module *cn_sequential_new(cn_module *const *modules, int n);

/* ---- initialisers -------------------------------------------------------------------------------
 *
 * torch.nn.init's in-place initialisers. Each overwrites t (any float tensor, tracked
 * parameters included: the write runs under no-grad mode) with values drawn from *gen, which
 * advances by numel(t). Values are drawn in f64 for f64 tensors and f32 otherwise, then converted
 * to t's dtype. */

/* fan_in = size(1) * receptive field, fan_out = size(0) * receptive field, where the receptive
 * field is the product of dims 2..; t needs at least 2 dims (CN_ERR_SHAPE otherwise). */
CN_API cn_status cn_init_fans(const cn_tensor *t, int64_t *fan_in, int64_t *fan_out);

typedef enum cn_fan_mode { CN_FAN_IN = 0, CN_FAN_OUT = 1 } cn_fan_mode;

/* The recommended gain for an activation (torch.nn.init.calculate_gain): relu sqrt(2), tanh 5/3,
 * sigmoid 1. GELU and SiLU have none in PyTorch: NAN with CN_ERR_INVALID_ARG. */
CN_API double cn_init_gain(cn_activation act);

CN_API cn_status cn_init_uniform_(cn_tensor *t, double low, double high, cn_generator *gen);
CN_API cn_status cn_init_normal_(cn_tensor *t, double mean, double std, cn_generator *gen);
CN_API cn_status cn_init_constant_(cn_tensor *t, double value);

/* Kaiming (He) initialisation for a leaky-ReLU with negative slope `a` (a = 0: ReLU):
 * gain = sqrt(2 / (1 + a^2)), fan = fan_in or fan_out by `mode`;
 *   uniform: U(-b, b), b = gain * sqrt(3 / fan);   normal: N(0, gain / sqrt(fan)). */
CN_API cn_status cn_init_kaiming_uniform_(cn_tensor *t, double a, cn_fan_mode mode, cn_generator *gen);
CN_API cn_status cn_init_kaiming_normal_(cn_tensor *t, double a, cn_fan_mode mode, cn_generator *gen);

/* Xavier (Glorot) initialisation: std = gain * sqrt(2 / (fan_in + fan_out));
 *   uniform: U(-b, b), b = sqrt(3) * std;   normal: N(0, std). */
CN_API cn_status cn_init_xavier_uniform_(cn_tensor *t, double gain, cn_generator *gen);
CN_API cn_status cn_init_xavier_normal_(cn_tensor *t, double gain, cn_generator *gen);

/* ---- sampling ---------------------------------------------------------------------------------
 * Draws from gen (a seeded Philox generator: the same seed gives the same samples, on any
 * backend); composed from public ops on the input's device, with three scalar reads to check
 * the input. Inputs are never tracked (the results are i64). Threads: as the ops (gen is
 * advanced: one generator per thread). */

/* torch.multinomial: probs [C] or [R, C] (float, finite, >= 0, a positive sum per row; need not
 * be normalised) -> i64 [n] or [R, n], category indices. With replacement any n >= 1; without,
 * n <= the categories of positive probability in each row, distinct within a row. Errors:
 * CN_ERR_NULL_ARG, CN_ERR_KIND / CN_ERR_SHAPE for probs, CN_ERR_INVALID_ARG for n or for
 * probabilities that are not a distribution (naming the smallest entry and row sum). */
CN_API cn_tensor *cn_multinomial(cn_tensor *probs, int64_t n, int replacement, cn_generator *gen);

/* The next token of a language model: one index per row of logits [.., V] -> i64 [..], drawn
 * from softmax(logits / temperature) restricted to the top_k most likely tokens (0: all) and
 * then to the smallest set of the most likely whose probability reaches top_p (nucleus
 * sampling; 1: all; the most likely token is always kept), as Hugging Face's generate applies
 * them. temperature 0 takes the most likely token (greedy, no draw). Errors: CN_ERR_NULL_ARG,
 * CN_ERR_KIND / CN_ERR_SHAPE for logits, CN_ERR_INVALID_ARG for temperature < 0, top_k < 0 or
 * top_p outside (0, 1]. */
CN_API cn_tensor *cn_sample_logits(cn_tensor *logits, double temperature, int64_t top_k,
                                   double top_p, cn_generator *gen);

/* ---- losses ---------------------------------------------------------------------------------- */

/* Cross-entropy from unnormalised logits (torch.nn.functional.cross_entropy, reduction "mean"),
 * computed in one pass as log-softmax + negative log-likelihood:
 *     logp = log_softmax(logits, 1)
 *     loss = mean_i -( (1 - s) * logp[i, labels[i]] + s * mean_c logp[i, c] )
 * where s = label_smoothing in [0, 1] (0: plain cross-entropy). logits: [N, C] float; labels:
 * [N] integer class indices in [0, C). A label out of range is CN_ERR_INDEX naming
 * cross_entropy, 'labels', the first bad value and its position. Returns a 0-d tensor. */
CN_API cn_tensor *cn_cross_entropy(cn_tensor *logits, cn_tensor *labels, double label_smoothing);

/* Mean squared error, mean((pred - target)^2) over all elements (torch.nn.functional.mse_loss).
 * pred and target must have the same shape (CN_ERR_SHAPE otherwise: no silent broadcasting). */
CN_API cn_tensor *cn_mse_loss(cn_tensor *pred, cn_tensor *target);

/* ---- optimizers ---------------------------------------------------------------------------------
 *
 * An optimizer keeps a reference to each parameter it was given and its own state. A step reads
 * each parameter's gradient from the cn_grads of the last cn_backward (parameters without a
 * gradient there are skipped, as PyTorch skips p.grad None) and updates the parameters in place
 * under no-grad mode, so every tensor that refers to a parameter sees the update, and a value
 * saved for a backward that has not run yet is now stale (that backward fails with
 * CN_ERR_AUTODIFF_MODIFIED). SGD updates each parameter and its momentum buffer in one pass of
 * the backend's fused sgd_step kernel (a registered backend without that kernel gets the same
 * rule from composed ops, written with cn_copy_); AdamW computes the new values with composed
 * ops and writes them with cn_copy_. Every gradient is checked against its parameter (shape,
 * dtype, device) and every new value and buffer is prepared before the first parameter is
 * written, so a step that fails on a mismatched gradient or an allocation leaves every parameter
 * and the optimizer's state as they were.
 *
 * There is no zero_grad: cn_backward returns fresh gradients in a new cn_grads each time, so
 * freeing it (cn_grads_free) is zeroing. To accumulate gradients over several backward passes,
 * add them yourself before the step. */
typedef struct cn_optimizer cn_optimizer;

/* Stochastic gradient descent (torch.optim.SGD), per parameter p with gradient g:
 *     g = g + weight_decay * p
 *     buf = g                                     (first step)
 *     buf = momentum * buf + (1 - dampening) * g  (later steps)       when momentum != 0
 *     g = nesterov ? g + momentum * buf : buf                           when momentum != 0
 *     p = p - lr * g
 * lr, momentum, dampening, weight_decay >= 0; nesterov needs momentum > 0 and dampening 0.
 * params: n >= 1 float tensors (usually from cn_module_params). */
CN_API cn_optimizer *cn_sgd_new(const cn_param *params, int n, double lr, double momentum,
                         double dampening, int nesterov, double weight_decay);

/* AdamW (torch.optim.AdamW): Adam with decoupled weight decay. Per parameter, t counting the
 * steps in which p had a gradient:
 *     p = p * (1 - lr * weight_decay)
 *     m = beta1 * m + (1 - beta1) * g             (m, v start at 0)
 *     v = beta2 * v + (1 - beta2) * g * g
 *     p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * 0 <= beta1, beta2 < 1; lr, eps, weight_decay >= 0. PyTorch's defaults: lr 1e-3, betas
 * (0.9, 0.999), eps 1e-8, weight_decay 0.01. */
CN_API cn_optimizer *cn_adamw_new(const cn_param *params, int n, double lr, double beta1, double beta2,
                           double eps, double weight_decay);

/* Parameter groups (torch.optim's param_groups): parameters with their own learning rate and
 * weight decay, e.g. no weight decay for biases and normalisation weights. lr, weight_decay:
 * >= 0, or CN_GROUP_DEFAULT for the optimizer's. A group's lr follows the optimizer's in
 * proportion: cn_optimizer_set_lr(opt, x) makes it (its lr) * x / (the optimizer's lr at
 * construction), as PyTorch's schedulers scale each group's initial lr by one factor (so an
 * optimizer with a group lr needs a positive lr of its own). The parameters are taken in group
 * order: state names and indices count across groups. Errors as the constructors', and
 * CN_ERR_INVALID_ARG for a negative n, lr or weight decay of a group. */
#define CN_GROUP_DEFAULT (-1.0)
typedef struct cn_param_group {
    const cn_param *params; /* borrowed for the call */
    int n;
    double lr;
    double weight_decay;
} cn_param_group;
CN_API cn_optimizer *cn_sgd_new_groups(const cn_param_group *groups, int n_groups, double lr,
                                       double momentum, double dampening, int nesterov,
                                       double weight_decay);
CN_API cn_optimizer *cn_adamw_new_groups(const cn_param_group *groups, int n_groups, double lr,
                                         double beta1, double beta2, double eps,
                                         double weight_decay);

/* One update of every parameter that has a gradient in `grads`. */
CN_API cn_status cn_optimizer_step(cn_optimizer *opt, const cn_grads *grads);

/* The learning rate used by the next steps (>= 0; CN_ERR_INVALID_ARG otherwise); with parameter
 * groups, the optimizer's, which each group's follows in proportion. */
CN_API cn_status cn_optimizer_set_lr(cn_optimizer *opt, double lr);
CN_API double cn_optimizer_get_lr(const cn_optimizer *opt);

/* Releases the optimizer, its state and its references to the parameters. NULL-safe. */
CN_API void cn_optimizer_free(cn_optimizer *opt);

/* ---- optimizer and training state ---------------------------------------------------------------
 *
 * An optimizer's state, as named tensors, so that a run saved and loaded into a new optimizer
 * (over a model loaded the same way) continues with the same bits as a run that never stopped.
 * The names are "<parameter>.<key>", the parameter named as it was given to the constructor
 * (cn_module_params' names: "0.weight") or, given without a name, by its index ("3"); the keys
 * are those of PyTorch's optimizer state_dict:
 *   SGD with momentum   "<p>.momentum_buffer"                  p's shape and dtype
 *   AdamW               "<p>.exp_avg", "<p>.exp_avg_sq"        p's shape and dtype
 *                       "<p>.step"                             i64, 0-d: p's step count t
 * A parameter that has not been stepped has no state, as in PyTorch (SGD without momentum never
 * has any). Hyper-parameters (lr, momentum, betas, eps, weight decay) are not state: the
 * constructor and cn_optimizer_set_lr set them. Parameters whose names repeat cannot have their
 * state named: both calls refuse them with CN_ERR_INVALID_ARG. */

/* The state of opt, in parameter order, keys in the order above; *count receives the number of
 * tensors (0 before the first step). The array, its names and its tensors are the optimizer's:
 * valid until the next cn_optimizer_state, cn_optimizer_step, cn_optimizer_load_state or
 * cn_optimizer_free on opt. The buffers are the optimizer's own concrete tensors (read them,
 * save them with cn_safetensors_save; do not write them); each step count is a new CPU tensor.
 * NULL with count 0 on failure. */
CN_API const cn_param *cn_optimizer_state(cn_optimizer *opt, int *count);

/* Replaces opt's whole state with state[0..n) (names and tensors as cn_optimizer_state gives
 * them, e.g. read back with cn_safetensors_get), copied onto each parameter's device; a
 * parameter without entries starts afresh (its first step is a first step). The tensors are
 * copied, so the caller keeps its references. All or nothing: every entry is checked (its
 * name is one of opt's parameters with one of its kind's keys, given once; a buffer has its
 * parameter's shape and dtype; a step is a 0-d tensor of any dtype holding a whole number >= 1;
 * each parameter has all its keys or none) and every copy made before the state is replaced, so a
 * failure leaves it as it was. Errors: CN_ERR_NULL_ARG; CN_ERR_INVALID_ARG for n < 0, an unknown
 * or repeated name (state of the other optimizer kind is named as such), a parameter's state in
 * part, a bad step; CN_ERR_SHAPE, CN_ERR_DTYPE for a buffer that does not match; CN_ERR_OUT_OF_MEMORY. */
CN_API cn_status cn_optimizer_load_state(cn_optimizer *opt, const cn_param *state, int n);

/* Writes a whole training state to `path` as one safetensors file (io.h), written the atomic
 * way cn_safetensors_save writes (an existing file survives a failed save):
 *   - model's parameters and buffers, under their names (cn_module_params / cn_module_buffers),
 *     so the file is also a model checkpoint (cn_safetensors_load_into, `cinder eval --load`);
 *   - opt's state (cn_optimizer_state) under "optimizer.<name>" (opt NULL: none);
 *   - extra[0..n_extra): the caller's own tensors (a loss history, ...) under their names;
 *   - the metadata "format": "pt", "cinder.train_state": "1" (this layout's version), then the
 *     caller's keys[i]: values[i] (i < n_meta): the run's position and settings (epoch, step,
 *     seed, ...), read back with cn_safetensors_metadata.
 * Errors: those of cn_safetensors_save_metadata (a name given twice across the three groups is
 * CN_ERR_INVALID_ARG), CN_ERR_NULL_ARG for a NULL path or model, CN_ERR_INVALID_ARG for a key
 * "cinder.train_state" or n_extra < 0, and those of cn_optimizer_state. */
CN_API cn_status cn_train_state_save(const char *path, cn_module *model, cn_optimizer *opt,
                                     const cn_param *extra, int n_extra, const char *const *keys,
                                     const char *const *values, int n_meta);

/* Restores model and opt from the training state h (cn_safetensors_load of a file that
 * cn_train_state_save wrote, onto any device; its metadata and extra tensors stay in h for the
 * caller): every parameter and buffer of model from its tensor, and opt's state from the
 * "optimizer." tensors as cn_optimizer_load_state loads them (opt NULL: they are ignored). All
 * or nothing: the file's version, every name, shape and dtype and the whole optimizer state are
 * checked first; then the optimizer state is swapped in and the module's tensors are copied
 * (copies between tensors checked to match, which allocate nothing). Errors: CN_ERR_NULL_ARG;
 * CN_ERR_IO for a file that is not a training state (no "cinder.train_state" metadata) or of
 * another version; CN_ERR_INVALID_ARG for a parameter or buffer the file lacks; CN_ERR_SHAPE,
 * CN_ERR_DTYPE for one that differs; those of cn_optimizer_load_state. */
CN_API cn_status cn_train_state_restore(const cn_safetensors *h, cn_module *model,
                                        cn_optimizer *opt);

/* ---- learning-rate schedules --------------------------------------------------------------------
 *
 * Closed-form schedules: the learning rate at an epoch is a function of the epoch alone, so a
 * loop sets it at the start of each epoch:
 *     cn_lr_schedule s = cn_lr_cosine(0.1, epochs, 0.0);
 *     for (e = 0; e < epochs; e++) { cn_optimizer_set_lr(opt, cn_lr_schedule_at(&s, e)); ... } */
typedef enum cn_lr_kind { CN_LR_STEP = 0, CN_LR_COSINE = 1 } cn_lr_kind;

typedef struct cn_lr_schedule {
    cn_lr_kind kind;
    double base_lr;
    int64_t step_size; /* step */
    double gamma;      /* step */
    int64_t t_max;     /* cosine */
    double eta_min;    /* cosine */
} cn_lr_schedule;

/* torch.optim.lr_scheduler.StepLR: base_lr * gamma^floor(epoch / step_size). */
CN_API cn_lr_schedule cn_lr_step(double base_lr, int64_t step_size, double gamma);

/* torch.optim.lr_scheduler.CosineAnnealingLR in its closed form:
 * eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / t_max)) / 2 (base_lr at epoch 0, eta_min
 * at epoch t_max; beyond t_max the cosine continues, rising again). */
CN_API cn_lr_schedule cn_lr_cosine(double base_lr, int64_t t_max, double eta_min);

/* The learning rate at `epoch` (>= 0). NAN with CN_ERR_INVALID_ARG for a negative epoch or a
 * schedule with step_size or t_max < 1 (or CN_ERR_NULL_ARG for a NULL s). */
CN_API double cn_lr_schedule_at(const cn_lr_schedule *s, int64_t epoch);

/* ---- gradient clipping ----------------------------------------------------------------------- */

/* Clips the gradients of params by their global L2 norm (torch.nn.utils.clip_grad_norm_):
 *     total = sqrt(sum over params with a gradient in grads of sum(g^2))
 * and when max_norm / (total + 1e-6) < 1 multiplies each of those gradients by that factor, in
 * place in `grads`. Returns total (the norm before clipping), or -1 with the error set on failure
 * (then no gradient was changed). max_norm >= 0. Parameters without a gradient are skipped. */
CN_API double cn_clip_grad_norm(cn_grads *grads, const cn_param *params, int n, double max_norm);

/* ---- a GPT -------------------------------------------------------------------------------------
 *
 * The decoder-only transformer of karpathy/nanoGPT's model.py (class GPT, dropout 0), for
 * character- or token-level language models:
 *
 *     x = wte(idx) + wpe([0, 1, .., T-1])                     idx: [B, T] i64 -> x: [B, T, C]
 *     for each block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
 *         attn: q, k, v = split(c_attn(x), C) as [B, n_head, T, C / n_head] each;
 *               c_proj(causal scaled-dot-product attention (cn_scaled_dot_product_attention))
 *         mlp:  c_proj(gelu(c_fc(x)))   (c_fc: C -> 4C, exact erf GELU as torch.nn.GELU())
 *     logits = ln_f(x) W_te^T                                 -> [B, T, vocab_size]
 * LayerNorms have eps 1e-5, a "weight" and (with bias) a "bias"; the Linears have biases when
 * bias != 0; lm_head has no bias and its weight is wte's (weight tying).
 *
 * Parameters are named as the keys of nanoGPT's state_dict (and listed in the order of its
 * named_parameters(), which lists the tied weight once):
 *     transformer.wte.weight [vocab, C]        transformer.wpe.weight [block_size, C]
 *     transformer.h.<i>.ln_1.weight [C]         transformer.h.<i>.ln_1.bias [C]
 *     transformer.h.<i>.attn.c_attn.weight [3C, C]   .bias [3C]
 *     transformer.h.<i>.attn.c_proj.weight [C, C]    .bias [C]
 *     transformer.h.<i>.ln_2.weight, .bias      transformer.h.<i>.mlp.c_fc.weight [4C, C], .bias
 *     transformer.h.<i>.mlp.c_proj.weight [C, 4C], .bias [C]
 *     transformer.ln_f.weight, .bias
 * (no ".bias" entries without bias). The tied weight is one tensor, listed, trained and saved
 * once, as "transformer.wte.weight"; a file saved from the module's parameters (cli,
 * cn_train_state_save) has that key and no "lm_head.weight". PyTorch reads such a file with
 * safetensors.torch.load_model (which accepts either key of a tied pair) or
 * load_state_dict(load_file(path), strict=False); safetensors.torch.save_model writes the pair
 * as "lm_head.weight" alone. cn_gpt_load reads files with either key or both. */
typedef struct cn_gpt_config {
    int64_t vocab_size; /* tokens: ids in [0, vocab_size) */
    int64_t block_size; /* the longest context: T <= block_size */
    int64_t n_layer;    /* transformer blocks */
    int64_t n_head;     /* attention heads; n_embd % n_head == 0 */
    int64_t n_embd;     /* the width C */
    int bias;           /* != 0: biases in the Linears and LayerNorms (nanoGPT's default True) */
} cn_gpt_config;

/* A GPT (a module of kind "GPT") with parameters on `device` in `dtype` (a float dtype), drawn as
 * nanoGPT's _init_weights draws them: every Linear and Embedding weight from N(0, 0.02), each
 * c_proj weight (attn and mlp) from N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights
 * 1 and biases 0. gen advances by those normal draws, module by module in the order of the
 * names above. cn_module_forward(gpt, idx): idx [B, T] integer token ids on the parameters'
 * device, 1 <= T <= block_size, each in [0, vocab_size) -> logits [B, T, vocab_size] (new,
 * tracked when the parameters are). Errors: CN_ERR_NULL_ARG (cfg, gen); CN_ERR_INVALID_ARG for a
 * size < 1, n_embd not a multiple of n_head (naming both), or sizes whose parameters would pass
 * int64 elements; CN_ERR_DTYPE; CN_ERR_OUT_OF_MEMORY. The forward: CN_ERR_KIND for idx that is
 * not integer, CN_ERR_SHAPE for idx not [B, T] or T > block_size (naming both; crop the context
 * to its last block_size tokens), CN_ERR_INDEX for an id out of range (naming it). Threads: one
 * module per thread, as every module. */
CN_API cn_module *cn_gpt_new(const cn_gpt_config *cfg, cn_device device, cn_dtype dtype,
                             cn_generator *gen);

/* The configuration gpt was made with, into *cfg. CN_ERR_NULL_ARG; CN_ERR_INVALID_ARG when gpt
 * is not a module that cn_gpt_new made. */
CN_API cn_status cn_gpt_config_of(const cn_module *gpt, cn_gpt_config *cfg);

/* Copies every parameter of gpt from the checkpoint h (cn_safetensors_load: a file of cinder's,
 * of safetensors.torch.save_model or save_file(model.state_dict()) of nanoGPT's GPT), in place
 * under no-grad mode. The tied weight is read from "transformer.wte.weight" or, when the file
 * lacks that key, from "lm_head.weight"; a file with both must hold the same values under both
 * (else CN_ERR_INVALID_ARG: the model cannot tie two different matrices). Other tensors in h (an
 * optimizer's state, "transformer.h.<i>.attn.bias" masks of older nanoGPT files) are ignored.
 * All or nothing: every name, shape and dtype is checked and every tensor is in hand before the
 * first parameter is written. Errors: CN_ERR_NULL_ARG; CN_ERR_INVALID_ARG for gpt not a GPT or a
 * parameter the file lacks (naming it); CN_ERR_SHAPE, CN_ERR_DTYPE for one that differs (naming
 * the key, both shapes or dtypes); CN_ERR_OUT_OF_MEMORY. */
CN_API cn_status cn_gpt_load(cn_module *gpt, const cn_safetensors *h);

/* AdamW over gpt's parameters in two groups, as nanoGPT's configure_optimizers makes it: the
 * parameters of 2 or more dims (the Linear and Embedding weights) with weight_decay, the others
 * (biases, LayerNorm weights) with none; each group in the order of cn_module_params. Errors as
 * cn_adamw_new_groups, and CN_ERR_INVALID_ARG when gpt is not a GPT. */
CN_API cn_optimizer *cn_gpt_adamw_new(cn_module *gpt, double lr, double beta1, double beta2,
                                      double eps, double weight_decay);

#ifdef __cplusplus
}
#endif
#endif
