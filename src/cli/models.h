/* The models of `cinder train` and `cinder eval`: building them, their forward pass, the input
 * normalisation they share, and finding which model a checkpoint holds.
 *
 *   mlp  784-256-128-10: two hidden layers that are each the fused linear + relu extension op
 *        (examples/extension, fused_linear_relu), then a plain linear layer.
 *   cnn  conv(1->32, 3x3, pad 1) relu maxpool2 conv(32->64, 3x3, pad 1) relu maxpool2 flatten
 *        linear(3136->128) relu linear(128->10), from nn.h's modules.
 *
 * Both take images as f32 [N, 784] (the layout cn_fashion_mnist_load returns) and return logits
 * [N, 10]. Parameters are named, shaped and laid out as in the state_dict of the equivalent
 * PyTorch nn.Sequential, so a checkpoint loads on either side as it is (docs/pytorch.md):
 *   mlp  nn.Sequential(Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10)):
 *        0.weight [256, 784], 0.bias, 2.weight [128, 256], 2.bias, 4.weight [10, 128], 4.bias
 *        (each fused layer stands at its Linear's position; the ReLUs at 1 and 3 have no
 *        parameters)
 *   cnn  nn.Sequential(Conv2d(1, 32, 3, padding=1), ReLU(), MaxPool2d(2),
 *        Conv2d(32, 64, 3, padding=1), ReLU(), MaxPool2d(2), Flatten(), Linear(3136, 128),
 *        ReLU(), Linear(128, 10)):
 *        0.weight [32, 1, 3, 3], 0.bias, 3.weight [64, 32, 3, 3], 3.bias, 7.weight [128, 3136],
 *        7.bias, 9.weight [10, 128], 9.bias (Flatten takes NCHW as C, H, W, as PyTorch's does)
 * Weights are [out, in] and [out, in, kh, kw], f32, row-major; there are no buffers. */
#ifndef CINDER_CLI_MODELS_H
#define CINDER_CLI_MODELS_H

#include "cinder/cinder.h"

typedef enum cli_model_kind { CLI_MODEL_MLP = 0, CLI_MODEL_CNN = 1 } cli_model_kind;

typedef struct cli_model {
    cli_model_kind kind;
    cn_module *net; /* owns the parameters */
    /* CN_F32 for a model of f32 weights; for one built from a quantized checkpoint
     * (cli_model_load_quantized) the scheme of its weights (CN_Q8_BLOCK, ...), or
     * CN_DTYPE_COUNT when its layers use different schemes. */
    cn_dtype weights;
    /* Data-parallel runs (`cinder train --ddp`, ddp.h): called by cli_model_train_step after the
     * backward, with the step's gradients and the loss read back, before the loss is checked and
     * the optimizer steps; it replaces both by their means over the ranks, so every rank takes
     * the same step (or skips the same non-finite one). NULL: one process. */
    cn_status (*sync)(void *ctx, cn_grads *grads, float *loss);
    void *sync_ctx;
} cli_model;

/* "mlp" / "cnn". */
const char *cli_model_name(cli_model_kind kind);

/* t's shape as "[2, 3]" into buf (cut short to fit size); returns buf. */
const char *cli_shape_str(const cn_tensor *t, char *buf, size_t size);

/* Parses "mlp" or "cnn"; 0 when the name is neither. */
int cli_model_parse(const char *name, cli_model_kind *kind);

/* Builds the model with its parameters on `device`, drawn from *gen like PyTorch's defaults
 * (U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for every weight and bias, layer by layer, weight first).
 * On an autodiff device the parameters are leaves that require grad (for training); on a
 * concrete device plain tensors (for inference). CN_OK, or the error status with *out zeroed. */
cn_status cli_model_new(cli_model_kind kind, cn_device device, cn_generator *gen, cli_model *out);

/* logits [N, 10] = model(x), x: [N, 784] f32 (normalised: (x - mean) / std, below). A new tensor,
 * or NULL with the error set. */
cn_tensor *cli_model_forward(cli_model *m, cn_tensor *x);

void cli_model_free(cli_model *m);

/* One optimisation step of m on a batch (x: [B, 784] f32 normalised, y: [B] i64 labels), all or
 * nothing. It runs in a scope of its own: forward, cross-entropy, cn_backward, the loss read back
 * into *loss, and only then, when everything before has succeeded and the loss is finite,
 * cn_optimizer_step (itself all or nothing). So a failure at any point (the scope, an allocation,
 * an op, reading the loss) returns its status with the parameters and the optimizer state as they
 * were, and leaks nothing. A loss that is not finite is CN_OK with *loss set and *applied 0: the
 * step is not taken (the caller reports the divergence). *applied is 1 when the parameters were
 * updated. */
cn_status cli_model_train_step(cli_model *m, cn_optimizer *opt, cn_tensor *x, cn_tensor *y,
                               float *loss, int *applied);

/* Fashion-MNIST's per-pixel statistics over the training set, for images scaled to [0, 1]: the
 * mean and standard deviation that common Fashion-MNIST setups normalise with
 * (transforms.Normalize((0.2860,), (0.3530,))). */
#define CLI_FASHION_MEAN 0.2860
#define CLI_FASHION_STD  0.3530

/* Fashion-MNIST as the models take it: images f32 [N, 784] normalised ((x - mean) / std), labels
 * i64 [N], viewed on the training device (untracked), so they mix with the parameters. */
typedef struct cli_data {
    cn_tensor *train_x, *train_y; /* NULL unless asked for */
    cn_tensor *test_x, *test_y;
} cli_data;

/* Loads the data set from `dir` (NULL: CN_FASHION_MNIST_DIR) onto the concrete device under
 * `device` and views it on `device`. with_train: 0 to skip the training files. train_limit,
 * test_limit: keep only the first that many images (0: all). CN_OK, or the error status (a
 * missing data set is CN_ERR_IO, whose message says how to install it) with *out zeroed. */
cn_status cli_data_load(const char *dir, cn_device device, int with_train, int64_t train_limit,
                        int64_t test_limit, cli_data *out);

void cli_data_free(cli_data *d);

/* Which model the checkpoint `h` holds, judged from its parameters: "0.weight" is [256, 784] for
 * the mlp and [32, 1, 3, 3] for the cnn; a quantized "0.weight" (a quantized checkpoint, below)
 * is 2-D for both, so there the metadata "model" says which. CN_OK, or CN_ERR_IO with a message
 * naming `path` (CN_ERR_OUT_OF_MEMORY when memory runs out: not the file's fault). */
cn_status cli_model_detect(const cn_safetensors *h, const char *path, cli_model_kind *kind);

/* Copies every parameter of m from `h` (loaded from `path`), checking names, shapes and dtypes
 * first: a checkpoint that lacks one, or holds it with another shape, is CN_ERR_IO naming the
 * parameter and the model's keys; no memory is CN_ERR_OUT_OF_MEMORY. Nothing is written unless
 * all match and every tensor is in hand. Other tensors in h (an optimizer's state) are ignored.
 * An mlp checkpoint of the earlier layout (layers 0, 1, 2: it has "1.weight" and no "4.weight")
 * loads too, its layers taken in order. */
cn_status cli_model_load(cli_model *m, const cn_safetensors *h, const char *path);

/* Writes m's parameters to `path` as safetensors, under their names. */
cn_status cli_model_save(cli_model *m, const char *path);

/* The fraction of the images whose argmax of the logits equals the label, computed in batches
 * of `batch` under no-grad mode with the model in evaluation mode (restored afterwards).
 * images: [N, 784] normalised, labels: [N] i64. Returns -1 with the error set on failure. */
double cli_model_accuracy(cli_model *m, cn_tensor *images, cn_tensor *labels, int64_t batch);

/* ---- quantized checkpoints: `cinder quantize` and `cinder eval` --------------------------------
 *
 * A quantized checkpoint holds the f32 checkpoint's tensors under the same names, each weight
 * quantized (cinder/quant.h) as the matrix that its layer multiplies by: [out, K'], K the layer's
 * fan-in (in for a linear layer; C * kh * kw for a conv, whose [O, C, kh, kw] weight is flattened
 * row-major, the order in which cn_unfold4d lays out a patch), and K' = K for CN_Q8_TENSOR and
 * CN_Q8_CHANNEL, K rounded up to a multiple of 32 for CN_Q8_BLOCK and CN_Q4_BLOCK (whose blocks
 * run along whole rows: the columns added are zeros, and the layer pads its input with zeros to
 * K', so they add nothing). Biases stay f32. The file is written with
 * cn_safetensors_save_metadata (each quantized tensor as its values and scales, cinder/io.h),
 * with the metadata "model" ("mlp" or "cnn") and "cinder.quantize" (the scheme's name). The
 * model rebuilt from it runs every layer as cn_quant_linear on the quantized weight (a conv as
 * im2col: cn_unfold4d, then cn_quant_linear over the patches), never dequantizing it. */

/* K' above: the width of the quantized weight of a layer of fan-in `fan_in` under `scheme`. */
int64_t cli_quant_width(int64_t fan_in, cn_dtype scheme);

/* The f32 weight w ([out, in] or [out, C, kh, kw]) quantized with `scheme` as the [out, K']
 * matrix above: a new tensor on w's device (owned by the caller, or by the open scope), or NULL
 * with the error set (cn_quantize's: a non-finite weight is CN_ERR_INVALID_ARG). */
cn_tensor *cli_quantize_weight(cn_tensor *w, cn_dtype scheme);

/* Non-zero when h holds a quantized tensor (one that the metadata "cinder.quant.<name>" marks). */
int cli_checkpoint_quantized(const cn_safetensors *h);

/* Builds the model of `kind` (cli_model_detect) from the quantized checkpoint h (loaded from
 * `path`), for inference, on the concrete device h was loaded onto: each weight and bias is
 * taken from h as it is (no copy; the quantized weights are the model's buffers, the biases
 * its parameters). Every weight must be quantized, of the shape [out, K'] above, and every bias
 * f32 [out]; anything else is CN_ERR_IO naming the tensor, what it is and what the model needs
 * (no memory: CN_ERR_OUT_OF_MEMORY). CN_OK, or the error status with *out zeroed. */
cn_status cli_model_load_quantized(const cn_safetensors *h, const char *path, cli_model_kind kind,
                                   cli_model *out);

#endif
