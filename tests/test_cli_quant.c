/* `cinder quantize` and `cinder eval` on quantized checkpoints (issue 19's CLI).
 *
 * Without the data set (run as `test_cli_quant`):
 * - the file: for the mlp and the cnn (built with cli_model_new, saved with cli_model_save) and
 *   each scheme, the command exits 0; the file holds exactly the bytes the scheme's layout says
 *   (counted here by hand from the shapes: values, f16 or f32 scales, f32 biases) after its
 *   header; the printed totals and file sizes are those; each weight dequantizes to the f32
 *   weight, flattened as [out, fan-in], within the scheme's documented rounding (pad columns
 *   exactly 0), and each bias is the f32 bias bit for bit;
 * - the model that `cinder eval` builds from it (cli_model_load_quantized) holds quantized
 *   weights only, and its logits on random images lie within an error bound of a float64
 *   forward pass with the dequantized weights: the bound is propagated layer by layer from the
 *   quantized linear's documented contract (each activation group quantized to int8 with scale
 *   amax / 127, error at most scale / 2; relu and max-pool do not widen it);
 * - misuse: the command line (exit 2), missing, unwritable, quantized, gpt and foreign files
 *   (exit 1), quantized checkpoints that `cinder quantize` did not write (exit 1), and
 *   cn_safetensors_load_into with a quantized tensor on either side.
 * With the data set (run as `test_cli_quant accuracy`, the ctest cli_quant_accuracy): an mlp and
 * a cnn trained briefly by `cinder train`, quantized with each scheme and evaluated by `cinder
 * eval` on the same test images, keep their accuracy within a tolerance of the f32 model's. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/models.h"
#include "cli_run.h"
#include "harness.h"

static char tmp_dir[] = "/tmp/cinder_test_cli_quant_XXXXXX";

static const char *in_tmp(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", tmp_dir, name);
    return buf;
}

/* ---- the models' layers, written out by hand (src/cli/models.h) ---------------------------- */

typedef struct layer {
    const char *weight, *bias;
    int64_t out, fan_in;
    int conv; /* 3x3, padding 1 */
} layer;

static const layer mlp_layers[] = {{"0.weight", "0.bias", 256, 784, 0},
                                   {"2.weight", "2.bias", 128, 256, 0},
                                   {"4.weight", "4.bias", 10, 128, 0}};
static const layer cnn_layers[] = {{"0.weight", "0.bias", 32, 9, 1},
                                   {"3.weight", "3.bias", 64, 288, 1},
                                   {"7.weight", "7.bias", 128, 3136, 0},
                                   {"9.weight", "9.bias", 10, 128, 0}};

typedef struct model_case {
    const char *name;
    cli_model_kind kind;
    const layer *layers;
    int n_layers;
} model_case;

static const model_case models[] = {{"mlp", CLI_MODEL_MLP, mlp_layers, 3},
                                    {"cnn", CLI_MODEL_CNN, cnn_layers, 4}};

static const struct {
    const char *name;
    cn_dtype dtype;
} schemes[] = {{"q8_block", CN_Q8_BLOCK}, {"q8_channel", CN_Q8_CHANNEL}, {"q4_block", CN_Q4_BLOCK}};

#define N_MODELS  2
#define N_SCHEMES 3

static int is_block(cn_dtype s) { return s == CN_Q8_BLOCK || s == CN_Q4_BLOCK; }

/* The quantized weight's width: the fan-in, rounded up to 32 for the block schemes. */
static int64_t width_of(int64_t fan_in, cn_dtype s) {
    return is_block(s) ? (fan_in + 31) / 32 * 32 : fan_in;
}

/* The bytes a quantized [out, fan-in] weight takes in the file: int8 values one a byte (4-bit:
 * two a byte) and the scales (f16 per block of 32; f32 per row for q8_channel). */
static long long weight_bytes(int64_t out, int64_t fan_in, cn_dtype s) {
    const long long w = width_of(fan_in, s);
    switch (s) {
    case CN_Q8_CHANNEL:
        return out * w + out * 4;
    case CN_Q8_BLOCK:
        return out * w + out * (w / 32) * 2;
    default:
        return out * w / 2 + out * (w / 32) * 2; /* q4_block */
    }
}

static char f32_path[N_MODELS][4200], q_path[N_MODELS][N_SCHEMES][4200];

/* ---- the f32 checkpoints and their quantized files, made once ------------------------------- */

static int make_f32_checkpoints(void) {
    for (int mi = 0; mi < N_MODELS; mi++) {
        cn_generator gen = cn_generator_new(100 + (uint64_t)mi);
        cli_model m = {0};
        char name[64];
        snprintf(name, sizeof name, "%s.safetensors", models[mi].name);
        in_tmp(f32_path[mi], sizeof f32_path[mi], name);
        if (cli_model_new(models[mi].kind, cn_cpu(), &gen, &m) != CN_OK ||
            cli_model_save(&m, f32_path[mi]) != CN_OK) {
            fprintf(stderr, "cannot make the %s: %s\n", models[mi].name, cn_last_error());
            cli_model_free(&m);
            return 0;
        }
        cli_model_free(&m);
        for (int si = 0; si < N_SCHEMES; si++) {
            snprintf(name, sizeof name, "%s-%s.safetensors", models[mi].name, schemes[si].name);
            in_tmp(q_path[mi][si], sizeof q_path[mi][si], name);
        }
    }
    return 1;
}

static run_result quantize(int mi, int si) {
    char args[9000];
    snprintf(args, sizeof args, "quantize --load '%s' --scheme %s --out '%s'", f32_path[mi],
             schemes[si].name, q_path[mi][si]);
    return run_cli(args, 0);
}

/* ---- the file ------------------------------------------------------------------------------- */

static long long file_size(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 ? (long long)s.st_size : -1;
}

/* The header length, the first 8 bytes of a safetensors file (little-endian). */
static long long header_length(const char *path) {
    unsigned char b[8];
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(b, 1, 8, f) : 0;
    if (f) fclose(f);
    if (got != 8) return -1;
    unsigned long long n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | b[i];
    return (long long)n;
}

/* Checks the dequantized weight q [out, K'] against the f32 weight w (any shape, read as
 * [out, fan-in]): within the scheme's rounding (cinder/quant.h) and zero past the fan-in. */
static void check_weight(const char *what, cn_tensor *w, cn_tensor *q, const layer *l, cn_dtype s) {
    const int64_t width = width_of(l->fan_in, s);
    cn_tensor *dq = cn_dequantize(q, CN_F64);
    double *want = th_values(w), *got = th_values(dq);
    int bad = 0;
    double worst = 0; /* the largest error as a fraction of its bound */
    for (int64_t r = 0; r < l->out && !bad; r++) {
        /* groups: the row (q8_channel) or blocks of 32 along the padded row */
        const int64_t group = is_block(s) ? 32 : width;
        for (int64_t g0 = 0; g0 < width && !bad; g0 += group) {
            double amax = 0;
            for (int64_t k = g0; k < g0 + group && k < l->fan_in; k++)
                amax = fmax(amax, fabs(want[r * l->fan_in + k]));
            /* q8: |error| <= scale / 2 with scale = amax / 127, plus (blocks) |q| <= 127 times
             * the f16 rounding of the scale, 2^-11 relative; q4_block: d = amax / 8, and a
             * value of the sign opposite to the block's largest maps to at most 7, an error up
             * to d, plus 8 times the f16 rounding of d */
            const double bound = s == CN_Q8_CHANNEL ? amax / 127 * 0.5
                                 : s == CN_Q8_BLOCK ? amax / 127 * (0.5 + 127.0 / 2048)
                                                    : amax / 8 * (1 + 8.0 / 2048);
            for (int64_t k = g0; k < g0 + group; k++) {
                const double v = got[r * width + k];
                if (k >= l->fan_in) {
                    bad = v != 0;
                    continue;
                }
                const double err = fabs(v - want[r * l->fan_in + k]);
                if (err > bound * (1 + 1e-6) + 1e-30) bad = 1;
                if (bound > 0) worst = fmax(worst, err / bound);
                if (bad)
                    fprintf(stderr, "%s: [%lld, %lld] = %.9g, the f32 weight %.9g (bound %.3g)\n",
                            what, (long long)r, (long long)k, v, want[r * l->fan_in + k], bound);
            }
        }
    }
    CHECK(!bad);
    printf("  %s %s: largest error %.3f of the bound\n", what, l->weight, worst);
    free(want);
    free(got);
    cn_release(dq);
}

/* The numbers of "N weights quantized, M biases kept f32: A -> B bytes of tensors (R x ...)"
 * and "wrote PATH: S bytes; PATH: T bytes (R2x smaller)". */
static void check_printed_sizes(const char *out, long long f32_bytes, long long q_bytes, int mi,
                                int si) {
    long long a = -1, b = -1, s = -1, t = -1;
    int nq = -1, nk = -1;
    double r = 0, r2 = 0;
    const char *totals = out ? strstr(out, "weights quantized, ") : NULL;
    while (totals && totals > out && totals[-1] != '\n')
        totals--;
    CHECK(totals && sscanf(totals,
                           "%d weights quantized, %d biases kept f32: %lld -> %lld bytes "
                           "of tensors (%lfx smaller)",
                           &nq, &nk, &a, &b, &r) == 5);
    CHECK(nq == models[mi].n_layers && nk == models[mi].n_layers);
    CHECK(a == f32_bytes && b == q_bytes);
    char want_ratio[32], got_ratio[32];
    snprintf(want_ratio, sizeof want_ratio, "%.2f", (double)f32_bytes / (double)q_bytes);
    snprintf(got_ratio, sizeof got_ratio, "%.2f", r);
    CHECK(strcmp(want_ratio, got_ratio) == 0);
    char line[9000];
    snprintf(line, sizeof line, "wrote %s: ", q_path[mi][si]);
    const char *wrote = out ? strstr(out, line) : NULL;
    CHECK(wrote != NULL);
    if (wrote) s = strtoll(wrote + strlen(line), NULL, 10);
    snprintf(line, sizeof line, "bytes; %s: ", f32_path[mi]);
    const char *in = wrote ? strstr(wrote, line) : NULL;
    CHECK(in && sscanf(in + strlen(line), "%lld bytes (%lfx smaller)", &t, &r2) == 2);
    CHECK(s == file_size(q_path[mi][si]) && t == file_size(f32_path[mi]));
    snprintf(want_ratio, sizeof want_ratio, "%.2f", (double)t / (double)s);
    snprintf(got_ratio, sizeof got_ratio, "%.2f", r2);
    CHECK(strcmp(want_ratio, got_ratio) == 0);
}

static void test_quantize_writes_each_scheme_in_the_bytes_it_takes(void) {
    for (int mi = 0; mi < N_MODELS; mi++) {
        const model_case *mc = &models[mi];
        cn_safetensors *f32 = NULL;
        CHECK(cn_safetensors_load(f32_path[mi], cn_cpu(), &f32) == CN_OK);
        for (int si = 0; si < N_SCHEMES && f32; si++) {
            const cn_dtype s = schemes[si].dtype;
            char what[64];
            snprintf(what, sizeof what, "%s %s", mc->name, schemes[si].name);
            run_result r = quantize(mi, si);
            CHECK(r.status == 0);
            if (r.status != 0 && r.out) fprintf(stderr, "%s: %s\n", what, r.out);
            long long f32_bytes = 0, q_bytes = 0;
            for (int i = 0; i < mc->n_layers; i++) {
                const layer *l = &mc->layers[i];
                f32_bytes += (l->out * l->fan_in + l->out) * 4;
                q_bytes += weight_bytes(l->out, l->fan_in, s) + l->out * 4;
            }
            check_printed_sizes(r.out, f32_bytes, q_bytes, mi, si);
            /* the data section holds exactly the tensors' bytes */
            const long long hlen = header_length(q_path[mi][si]);
            CHECK(hlen > 0 && file_size(q_path[mi][si]) == 8 + hlen + q_bytes);
            printf("%s: %lld -> %lld bytes of tensors (%.2fx); file %lld -> %lld bytes\n", what,
                   f32_bytes, q_bytes, (double)f32_bytes / (double)q_bytes, file_size(f32_path[mi]),
                   file_size(q_path[mi][si]));
            /* the bars of issue 19 (about 4x for q8, 7x for q4) follow from the layout */
            CHECK((double)f32_bytes / (double)q_bytes > (s == CN_Q4_BLOCK ? 6.8 : 3.6));
            free(r.out);

            cn_safetensors *h = NULL;
            CHECK(cn_safetensors_load(q_path[mi][si], cn_cpu(), &h) == CN_OK);
            if (!h) continue;
            const char *model = cn_safetensors_metadata(h, "model");
            const char *scheme = cn_safetensors_metadata(h, "cinder.quantize");
            CHECK(model && strcmp(model, mc->name) == 0);
            CHECK(scheme && strcmp(scheme, schemes[si].name) == 0);
            for (int i = 0; i < mc->n_layers; i++) {
                const layer *l = &mc->layers[i];
                cn_tensor *q = cn_safetensors_get(h, l->weight);
                cn_tensor *w = cn_safetensors_get(f32, l->weight);
                cn_tensor *qb = cn_safetensors_get(h, l->bias);
                cn_tensor *b = cn_safetensors_get(f32, l->bias);
                const int64_t shape[2] = {l->out, width_of(l->fan_in, s)};
                CHECK(q && cn_dtype_of(q) == s);
                th_check_shape(what, q, shape, 2);
                if (q && cn_dtype_of(q) == s) check_weight(what, w, q, l, s);
                CHECK(qb && b && cn_dtype_of(qb) == CN_F32 && cn_numel(qb) == l->out);
                float vb[256], vqb[256];
                if (qb && b && cn_numel(qb) == l->out) {
                    CHECK(cn_read(b, vb, sizeof(float) * (size_t)l->out) == CN_OK);
                    CHECK(cn_read(qb, vqb, sizeof(float) * (size_t)l->out) == CN_OK);
                    CHECK(memcmp(vb, vqb, sizeof(float) * (size_t)l->out) == 0);
                }
                cn_release(q);
                cn_release(w);
                cn_release(qb);
                cn_release(b);
            }
            cn_safetensors_free(h);
        }
        cn_safetensors_free(f32);
    }
}

/* ---- the quantized model against a float64 reference with the dequantized weights ---------- */

/* A value and the bound on how far the model's value of it may be. */
typedef struct vb {
    double v, e;
} vb;

/* One layer over one input vector x [K] (padded with zeros to K' = the weight's width): y [N]
 * = W x + b, W the dequantized weight [N, K'], in float64. With `acts` (the quantized linear's
 * contract, cinder/quant.h) the bound is that of the model's value: each group of x (blocks of
 * 32 for the block weights, the row otherwise) is quantized to int8 with scale amax / 127, an
 * error of at most scale / 2 per element, through |W|; the input's own error e goes through |W|
 * too (and widens amax); plus f32 rounding, 1e-5 of sum |W| (|x| + e) + |b|, far above its size.
 * Without `acts`, only e and the f32 rounding: the dequantize-then-matmul reference. */
static void layer_ref(const double *w, const double *b, int64_t n, int64_t k_in, int64_t width,
                      cn_dtype s, int acts, const vb *x, vb *y) {
    const int64_t group = is_block(s) ? 32 : width;
    double half_scale[4096 / 32 + 1]; /* per group */
    for (int64_t g0 = 0, g = 0; g0 < width; g0 += group, g++) {
        double amax = 0, emax = 0;
        for (int64_t k = g0; k < g0 + group && k < k_in; k++) {
            amax = fmax(amax, fabs(x[k].v));
            emax = fmax(emax, x[k].e);
        }
        half_scale[g] = acts ? (amax + emax) / 127 / 2 : 0;
    }
    for (int64_t j = 0; j < n; j++) {
        double sum = b[j], err = 0, mag = fabs(b[j]);
        for (int64_t k = 0; k < k_in; k++) {
            const double wk = w[j * width + k];
            sum += wk * x[k].v;
            err += fabs(wk) * (x[k].e + half_scale[k / group]);
            mag += fabs(wk) * (fabs(x[k].v) + x[k].e);
        }
        y[j] = (vb){sum, err + 1e-5 * mag + 1e-7};
    }
}

static void relu_ref(vb *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i].v = fmax(x[i].v, 0);
}

/* 3x3 conv with padding 1 of x [C, H, W] -> y [O, H, W], the patch in unfold's order (c, i, j) */
static void conv_ref(const double *w, const double *b, int64_t o, int64_t c, int64_t h, int64_t wd,
                     int64_t width, cn_dtype s, int acts, const vb *x, vb *y) {
    vb *patch = calloc((size_t)width, sizeof *patch), *col = calloc((size_t)o, sizeof *col);
    for (int64_t p = 0; p < h * wd; p++) {
        const int64_t ph = p / wd, pw = p % wd;
        for (int64_t ci = 0; ci < c; ci++)
            for (int64_t i = 0; i < 3; i++)
                for (int64_t j = 0; j < 3; j++) {
                    const int64_t r = ph + i - 1, q = pw + j - 1;
                    const int inside = r >= 0 && r < h && q >= 0 && q < wd;
                    patch[(ci * 3 + i) * 3 + j] = inside ? x[(ci * h + r) * wd + q] : (vb){0, 0};
                }
        layer_ref(w, b, o, c * 9, width, s, acts, patch, col);
        for (int64_t oi = 0; oi < o; oi++)
            y[oi * h * wd + p] = col[oi];
    }
    free(patch);
    free(col);
}

/* 2x2 max-pool, stride 2, of x [C, H, W]; the bound of a maximum is the largest of its window */
static void pool_ref(int64_t c, int64_t h, int64_t w, const vb *x, vb *y) {
    for (int64_t ci = 0; ci < c; ci++)
        for (int64_t r = 0; r < h / 2; r++)
            for (int64_t q = 0; q < w / 2; q++) {
                vb m = {-INFINITY, 0};
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 2; j++) {
                        const vb e = x[(ci * h + 2 * r + i) * w + 2 * q + j];
                        m.v = fmax(m.v, e.v);
                        m.e = fmax(m.e, e.e);
                    }
                y[(ci * (h / 2) + r) * (w / 2) + q] = m;
            }
}

/* Layer j of mc (its relu included for the mlp's hidden layers) over one input (x: the layer's
 * input for one image, [K] or [C, H, W]) into y ([N] or [O, H, W]). */
static void one_layer_ref(const model_case *mc, int j, cn_dtype s, int acts, const double *w,
                          const double *b, const vb *x, vb *y) {
    const layer *l = &mc->layers[j];
    const int64_t width = width_of(l->fan_in, s);
    if (l->conv) {
        const int64_t side = j == 0 ? 28 : 14;
        conv_ref(w, b, l->out, l->fan_in / 9, side, side, width, s, acts, x, y);
        return;
    }
    layer_ref(w, b, l->out, l->fan_in, width, s, acts, x, y);
    if (mc->kind == CLI_MODEL_MLP && j < mc->n_layers - 1) relu_ref(y, l->out);
}

/* The whole model's logits [10] for one image [784], in float64 with the dequantized weights
 * w[i] and biases b[i] (acts 0: no activation quantization). */
static void forward_ref(const model_case *mc, cn_dtype s, double *const *w, double *const *b,
                        const double *image, vb *logits) {
    vb *a = calloc(32 * 28 * 28, sizeof *a), *t = calloc(32 * 28 * 28, sizeof *t);
    for (int k = 0; k < 784; k++)
        a[k] = (vb){image[k], 0};
    if (mc->kind == CLI_MODEL_MLP) {
        one_layer_ref(mc, 0, s, 0, w[0], b[0], a, t);
        one_layer_ref(mc, 1, s, 0, w[1], b[1], t, a);
        one_layer_ref(mc, 2, s, 0, w[2], b[2], a, logits);
    } else {
        one_layer_ref(mc, 0, s, 0, w[0], b[0], a, t);
        relu_ref(t, 32 * 28 * 28);
        pool_ref(32, 28, 28, t, a);
        one_layer_ref(mc, 1, s, 0, w[1], b[1], a, t);
        relu_ref(t, 64 * 14 * 14);
        pool_ref(64, 14, 14, t, a); /* [64, 7, 7], flattened as C, H, W */
        one_layer_ref(mc, 2, s, 0, w[2], b[2], a, t);
        relu_ref(t, 128);
        one_layer_ref(mc, 3, s, 0, w[3], b[3], t, logits);
    }
    free(a);
    free(t);
}

#define IMAGES 3

/* The output of the model's layer j (out, for IMAGES images) against the reference over the
 * model's own input to it (in): within the bound of the quantized linear's contract, which must
 * be narrow (a fifth of the spread of the outputs) to tell a wrong layer from a right one. */
static void check_layer(const char *what, const model_case *mc, int j, cn_dtype s, const double *w,
                        const double *b, cn_tensor *in, cn_tensor *out) {
    const int64_t n_in = cn_numel(in) / IMAGES, n_out = cn_numel(out) / IMAGES;
    double *x = th_values(in), *got = th_values(out);
    vb *xv = calloc((size_t)n_in, sizeof *xv), *ref = calloc((size_t)n_out, sizeof *ref);
    double worst = 0, widest = 0, lo = INFINITY, hi = -INFINITY;
    int bad = 0;
    for (int img = 0; img < IMAGES; img++) {
        for (int64_t k = 0; k < n_in; k++)
            xv[k] = (vb){x[img * n_in + k], 0};
        one_layer_ref(mc, j, s, 1, w, b, xv, ref);
        for (int64_t k = 0; k < n_out; k++) {
            const double err = fabs(got[img * n_out + k] - ref[k].v);
            if (!(err <= ref[k].e) && bad++ < 3)
                fprintf(stderr, "%s %s: image %d output %lld = %.7g, reference %.7g, bound %.3g\n",
                        what, mc->layers[j].weight, img, (long long)k, got[img * n_out + k],
                        ref[k].v, ref[k].e);
            worst = fmax(worst, err / ref[k].e);
            widest = fmax(widest, ref[k].e);
            lo = fmin(lo, ref[k].v);
            hi = fmax(hi, ref[k].v);
        }
    }
    CHECK(!bad);
    CHECK(widest < 0.2 * (hi - lo));
    printf("  %s %s: error at most %.3f of its bound; widest bound %.3g, %.3f of the outputs' "
           "spread\n",
           what, mc->layers[j].weight, worst, widest, widest / (hi - lo));
    free(x);
    free(got);
    free(xv);
    free(ref);
}

/* Layer by layer, each quantized layer of the model against the float64 reference over the
 * model's own input to it (the bound of the quantized linear's contract, which does not compound
 * over layers); then the whole model's logits (cli_model_forward, as `cinder eval` runs it):
 * the same values as the layers gave, and within a stated tolerance of the dequantize-then-f64
 * reference of the whole model: 2% of the logits' spread (the activations'
 * int8 rounding, compounded over the layers). */
static void test_the_quantized_model_matches_a_dequantized_f64_reference(void) {
    cn_generator gen = cn_generator_new(7);
    /* images in the range of the normalised pixels, (0 - 0.286) / 0.353 to (1 - 0.286) / 0.353 */
    const int64_t xshape[2] = {IMAGES, 784}, ishape[4] = {IMAGES, 1, 28, 28};
    cn_tensor *x = cn_rand_uniform(&gen, xshape, 2, -0.81, 2.02, CN_F32, cn_cpu());
    double *images = th_values(x);
    for (int mi = 0; mi < N_MODELS; mi++) {
        const model_case *mc = &models[mi];
        for (int si = 0; si < N_SCHEMES; si++) {
            const cn_dtype s = schemes[si].dtype;
            char what[64];
            snprintf(what, sizeof what, "%s %s", mc->name, schemes[si].name);
            cn_safetensors *h = NULL;
            cli_model_kind kind;
            cli_model m = {0};
            CHECK(cn_safetensors_load(q_path[mi][si], cn_cpu(), &h) == CN_OK);
            CHECK(h && cli_model_detect(h, q_path[mi][si], &kind) == CN_OK && kind == mc->kind);
            CHECK(h && cli_model_load_quantized(h, q_path[mi][si], mc->kind, &m) == CN_OK);
            if (!m.net) {
                cn_safetensors_free(h);
                continue;
            }
            CHECK(m.weights == s);
            double *w[4] = {NULL}, *b[4] = {NULL};
            for (int i = 0; i < mc->n_layers; i++) {
                /* the model runs the quantized weights themselves */
                cn_tensor *held = cn_module_find(m.net, mc->layers[i].weight);
                CHECK(held && cn_dtype_of(held) == s);
                cn_tensor *q = cn_safetensors_get(h, mc->layers[i].weight);
                cn_tensor *dq = cn_dequantize(q, CN_F64);
                cn_tensor *bias = cn_safetensors_get(h, mc->layers[i].bias);
                w[i] = th_values(dq);
                b[i] = th_values(bias);
                cn_release(q);
                cn_release(dq);
                cn_release(bias);
            }
            cn_safetensors_free(h);
            /* layer by layer */
            cn_tensor *a = mc->kind == CLI_MODEL_CNN ? cn_reshape(x, ishape, 4) : cn_retain(x);
            int j = 0;
            for (int c = 0; c < cn_module_child_count(m.net) && a; c++) {
                cn_module *child = cn_module_child(m.net, c);
                cn_tensor *next = cn_module_forward(child, a);
                CHECK(next != NULL);
                if (next && strcmp(cn_module_kind(child), "QuantLinear") == 0 && j < mc->n_layers) {
                    check_layer(what, mc, j, s, w[j], b[j], a, next);
                    j++;
                }
                cn_release(a);
                a = next;
            }
            CHECK(j == mc->n_layers);
            /* the whole model */
            cn_tensor *logits = cli_model_forward(&m, x);
            CHECK(logits && cn_ndim(logits) == 2 && cn_shape(logits)[1] == 10);
            double *got = th_values(logits), *layered = th_values(a);
            CHECK(logits && a && memcmp(got, layered, sizeof(double) * IMAGES * 10) == 0);
            double worst = 0, spread = 0;
            for (int img = 0; img < IMAGES && logits; img++) {
                vb ref[10];
                forward_ref(mc, s, w, b, images + img * 784, ref);
                double lo = INFINITY, hi = -INFINITY;
                for (int c = 0; c < 10; c++) {
                    worst = fmax(worst, fabs(got[img * 10 + c] - ref[c].v));
                    lo = fmin(lo, ref[c].v);
                    hi = fmax(hi, ref[c].v);
                }
                spread = fmax(spread, hi - lo);
            }
            const double tol = 0.02; /* the same int8 activations for every scheme */
            printf("%s: logits within %.4f of the dequantized f64 model's (%.2f%% of their "
                   "spread %.3g; tolerance %.0f%%)\n",
                   what, worst, 100 * worst / spread, spread, 100 * tol);
            CHECK(worst <= tol * spread);
            free(got);
            free(layered);
            cn_release(logits);
            cn_release(a);
            for (int i = 0; i < 4; i++) {
                free(w[i]);
                free(b[i]);
            }
            cli_model_free(&m);
        }
    }
    free(images);
    cn_release(x);
}

/* ---- misuse --------------------------------------------------------------------------------- */

/* Runs `cinder <args>` (stderr merged) and checks its exit status and that the output holds
 * `needle`. */
static void check_fails(const char *args, int status, const char *needle) {
    run_result r = run_cli(args, 1);
    CHECK(r.status == status);
    CHECK(r.out && strstr(r.out, needle));
    if (r.status != status || !r.out || !strstr(r.out, needle))
        fprintf(stderr, "`cinder %s` exited %d, want %d with \"%s\":\n%s\n", args, r.status, status,
                needle, r.out ? r.out : "(no output)");
    free(r.out);
}

static void test_the_command_line_is_checked(void) {
    char args[9000];
    check_fails("quantize", 2, "cinder quantize: --load FILE is required");
    snprintf(args, sizeof args, "quantize --load '%s' --out x.safetensors", f32_path[0]);
    check_fails(args, 2, "cinder quantize: --scheme is required: q8_block, q8_channel or q4_block");
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q8_block", f32_path[0]);
    check_fails(args, 2, "cinder quantize: --out FILE is required");
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q5_0 --out x.safetensors",
             f32_path[0]);
    check_fails(args, 2,
                "cinder quantize: unknown scheme 'q5_0' for --scheme: q8_block, q8_channel or "
                "q4_block");
    snprintf(args, sizeof args, "quantize --load '%s' --out x.safetensors --scheme", f32_path[0]);
    check_fails(args, 2, "--scheme");
    check_fails("quantize --zz-no-such-option", 2, "unknown argument '--zz-no-such-option'");
    /* the same file under another name */
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q8_block --out '%s/../%s/%s'",
             f32_path[0], tmp_dir, strrchr(tmp_dir, '/') + 1, "mlp.safetensors");
    check_fails(args, 2, "is the --load file: writing over it would lose the f32 checkpoint");
    CHECK(file_size(f32_path[0]) > 0);
}

static void rewrite(const char *from, const char *to, const char *drop, cn_tensor *replace,
                    const char *model);

static void test_files_that_cannot_be_quantized_are_refused(void) {
    char args[9000], path[4200], out[4200];
    in_tmp(out, sizeof out, "never.safetensors");
    /* missing */
    in_tmp(path, sizeof path, "missing.safetensors");
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q8_block --out '%s'", path, out);
    check_fails(args, 1, "cinder quantize: cannot load the model: ");
    check_fails(args, 1, path);
    /* already quantized */
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q4_block --out '%s'", q_path[0][0],
             out);
    check_fails(args, 1,
                "is already quantized (q8_block, by `cinder quantize`); give the f32 "
                "checkpoint that `cinder train --save` wrote");
    /* not a cinder model: a safetensors file of other tensors, then a file of text */
    in_tmp(path, sizeof path, "other.safetensors");
    cn_tensor *t = cn_zeros((int64_t[]){4}, 1, CN_F32, cn_cpu());
    CHECK(cn_safetensors_save(path, (const char *[]){"embedding"}, &t, 1) == CN_OK);
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q8_block --out '%s'", path, out);
    check_fails(args, 1,
                "it has no tensor '0.weight'; it is not a checkpoint of `cinder train "
                "--save`");
    in_tmp(path, sizeof path, "gpt.safetensors");
    CHECK(cn_safetensors_save_metadata(path, (const char *[]){"wte.weight"}, &t, 1,
                                       (const char *[]){"model"}, (const char *[]){"gpt"},
                                       1) == CN_OK);
    cn_release(t);
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q8_block --out '%s'", path, out);
    check_fails(args, 1,
                "holds a gpt (`cinder train --model gpt`); quantize takes the mlp and cnn");
    in_tmp(path, sizeof path, "text.safetensors");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("not a checkpoint at all", f);
        fclose(f);
    }
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q8_block --out '%s'", path, out);
    check_fails(args, 1, "cinder quantize: cannot load the model: ");
    /* a weight that is not finite */
    in_tmp(path, sizeof path, "nan.safetensors");
    cn_safetensors *f32 = NULL;
    CHECK(cn_safetensors_load(f32_path[0], cn_cpu(), &f32) == CN_OK);
    cn_tensor *w2 = cn_safetensors_get(f32, "2.weight");
    cn_safetensors_free(f32);
    cn_tensor *nan = cn_mul_scalar(w2, NAN);
    rewrite(f32_path[0], path, "2.weight", nan, NULL);
    cn_release(nan);
    cn_release(w2);
    snprintf(args, sizeof args, "quantize --load '%s' --scheme q8_block --out '%s'", path, out);
    check_fails(args, 1, "cinder quantize: cannot quantize '2.weight': ");
    unlink(path);
    /* an output that cannot be written */
    snprintf(args, sizeof args,
             "quantize --load '%s' --scheme q8_block --out /nonexistent-dir/q.safetensors",
             f32_path[0]);
    check_fails(args, 1, "cinder quantize: cannot write the quantized model: ");
    check_fails(args, 1, "/nonexistent-dir/q.safetensors");
    CHECK(access(out, F_OK) != 0); /* nothing was written by any of these */
}

/* Writes the tensors of the quantized file `from`, with `drop` left out and `replace` (when not
 * NULL) put in its place under the same name, to `to` with the metadata given. */
static void rewrite(const char *from, const char *to, const char *drop, cn_tensor *replace,
                    const char *model) {
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(from, cn_cpu(), &h) == CN_OK);
    if (!h) return;
    const char *names[16];
    cn_tensor *tensors[16];
    int n = 0;
    for (int i = 0; i < cn_safetensors_count(h) && n < 16; i++) {
        const char *name = cn_safetensors_name(h, i);
        if (strstr(name, ".__qscales")) continue; /* written again with their tensor */
        if (drop && strcmp(name, drop) == 0) {
            if (!replace) continue;
            names[n] = name;
            tensors[n++] = cn_retain(replace);
            continue;
        }
        names[n] = name;
        tensors[n++] = cn_safetensors_get(h, name);
    }
    const char *keys[1] = {"model"}, *values[1] = {model};
    CHECK(cn_safetensors_save_metadata(to, names, tensors, n, keys, values, model ? 1 : 0) ==
          CN_OK);
    for (int i = 0; i < n; i++)
        cn_release(tensors[i]);
    cn_safetensors_free(h);
}

static void test_eval_refuses_quantized_files_that_quantize_did_not_write(void) {
    char args[9000], path[4200];
    in_tmp(path, sizeof path, "bad.safetensors");
    snprintf(args, sizeof args, "eval --load '%s'", path);
    /* no "model" in the metadata */
    rewrite(q_path[0][0], path, NULL, NULL, NULL);
    check_fails(args, 1,
                "its '0.weight' is quantized, but its metadata 'model' is absent "
                "instead of \"mlp\" or \"cnn\"");
    /* one weight left f32 */
    cn_safetensors *f32 = NULL;
    CHECK(cn_safetensors_load(f32_path[0], cn_cpu(), &f32) == CN_OK);
    cn_tensor *w2 = cn_safetensors_get(f32, "2.weight");
    cn_safetensors_free(f32);
    rewrite(q_path[0][0], path, "2.weight", w2, "mlp");
    check_fails(args, 1,
                "'2.weight' is [128, 256] f32, not quantized, but the file holds "
                "quantized weights; `cinder quantize` quantizes every weight");
    cn_release(w2);
    /* a weight of another width: q8_channel padded as the block schemes are */
    cn_tensor *padded = cn_zeros((int64_t[]){128, 288}, 2, CN_F32, cn_cpu());
    cn_tensor *wrong = cn_quantize(padded, CN_Q8_CHANNEL);
    cn_release(padded);
    rewrite(q_path[0][1], path, "2.weight", wrong, "mlp");
    check_fails(args, 1,
                "'2.weight' is [128, 288] q8_channel, but the mlp's layer 2 takes "
                "[128, 256] q8_channel");
    cn_release(wrong);
    /* layers of different schemes: a model the CLI does not write, but runs */
    cn_safetensors *ch = NULL;
    CHECK(cn_safetensors_load(q_path[0][1], cn_cpu(), &ch) == CN_OK);
    cn_tensor *w2c = cn_safetensors_get(ch, "2.weight"); /* q8_channel */
    cn_safetensors_free(ch);
    rewrite(q_path[0][0], path, "2.weight", w2c, "mlp");
    cn_release(w2c);
    cn_safetensors *h = NULL;
    cli_model m = {0};
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    CHECK(h && cli_model_load_quantized(h, path, CLI_MODEL_MLP, &m) == CN_OK);
    CHECK(m.net && m.weights == CN_DTYPE_COUNT); /* "weights quantized, schemes mixed" */
    cli_model_free(&m);
    cn_safetensors_free(h);
    /* a bias missing */
    rewrite(q_path[1][2], path, "9.bias", NULL, "cnn");
    check_fails(args, 1, "has no tensor '9.bias', a parameter of the cnn");
    unlink(path);
}

/* cn_safetensors_load_into copies into plain tensors: a quantized tensor on either side is an
 * error that names the way that works. */
static void test_load_into_names_the_way_for_quantized_tensors(void) {
    cn_tensor *dst = cn_zeros((int64_t[]){256, 800}, 2, CN_F32, cn_cpu());
    cn_tensor *qdst = cn_quantize(dst, CN_Q8_BLOCK);
    const char *name = "0.weight";
    CHECK_STATUS_FAILS(cn_safetensors_load_into(q_path[0][0], &name, &qdst, 1), CN_ERR_INVALID_ARG,
                       "tensors[0] is quantized ([256, 800] q8_block cpu:0); load_into copies "
                       "into plain tensors: read a quantized tensor with cn_safetensors_load and "
                       "cn_safetensors_get");
    CHECK_STATUS_FAILS(cn_safetensors_load_into(q_path[0][0], &name, &dst, 1), CN_ERR_DTYPE,
                       "tensor '0.weight' in");
    CHECK_STATUS_FAILS(cn_safetensors_load_into(q_path[0][0], &name, &dst, 1), CN_ERR_DTYPE,
                       "is q8_block: read it with cn_safetensors_load and cn_safetensors_get, "
                       "then cn_dequantize it");
    double *v = th_values(dst); /* untouched */
    CHECK(v[0] == 0 && v[256 * 800 - 1] == 0);
    free(v);
    cn_release(dst);
    cn_release(qdst);
}

/* ---- accuracy (the data set) ---------------------------------------------------------------- */

/* "test accuracy 0.7600 (380 correct)": the count, or -1 */
static long long correct_of(const char *out) {
    const char *at = out ? strstr(out, "test accuracy ") : NULL;
    at = at ? strchr(at, '(') : NULL;
    return at ? strtoll(at + 1, NULL, 10) : -1;
}

/* `cinder eval` on `path`: the count of correct images; its first line names the scheme of
 * quantized weights (NULL: f32, none named). */
static long long eval_count(const char *path, int images, const char *scheme) {
    char args[9000], first[128];
    snprintf(args, sizeof args, "eval --load '%s' --test-limit %d --threads 2", path, images);
    run_result r = run_cli(args, 0);
    CHECK(r.status == 0);
    snprintf(first, sizeof first, " (weights %s) from ", scheme ? scheme : "");
    CHECK(r.out && (scheme ? strstr(r.out, first) != NULL : strstr(r.out, "(weights") == NULL));
    long long k = correct_of(r.out);
    if (r.out) printf("%s", r.out);
    free(r.out);
    return k;
}

/* Trained briefly (the mlp on 1000 images, the cnn on 300: about 70% and 43% on these test
 * images), each model keeps its accuracy on the same test images within 1 point (q8; 2 for the
 * cnn, whose 100 images make a point one image) and 3 points (q4) of the f32 model's. Issue 19's
 * bars (0.5 and 2 points) are for the whole test set of 10000 images; on a few hundred, one
 * borderline image moves the figure by 0.2 to 1 point, hence the margins (docs/benchmarks.md
 * has the whole-set figures). */
static void test_quantized_models_keep_their_accuracy(void) {
    static const struct {
        const char *train;
        int images;
        double q8_points, q4_points;
    } runs[N_MODELS] = {
        {"--model mlp --limit 1000 --batch 16 --lr 0.01", 500, 1.0, 3.0},
        {"--model cnn --limit 300 --batch 32", 100, 2.0, 3.0},
    };
    for (int mi = 0; mi < N_MODELS; mi++) {
        char args[9000];
        snprintf(args, sizeof args,
                 "train %s --epochs 1 --test-limit %d --threads 2 --save '%s' 2>/dev/null",
                 runs[mi].train, runs[mi].images, f32_path[mi]);
        run_result r = run_cli(args, 0);
        CHECK(r.status == 0);
        free(r.out);
        const long long f32 = eval_count(f32_path[mi], runs[mi].images, NULL);
        CHECK(f32 > runs[mi].images * 3 / 10); /* it learned something: chance is 10% */
        for (int si = 0; si < N_SCHEMES; si++) {
            run_result q = quantize(mi, si);
            CHECK(q.status == 0);
            free(q.out);
            const long long k = eval_count(q_path[mi][si], runs[mi].images, schemes[si].name);
            const double points = 100.0 * (double)(k - f32) / runs[mi].images;
            const double tol =
                schemes[si].dtype == CN_Q4_BLOCK ? runs[mi].q4_points : runs[mi].q8_points;
            printf("%s %s: %lld correct against %lld for f32 (%+.1f points; tolerance %.1f)\n",
                   models[mi].name, schemes[si].name, k, f32, points, tol);
            CHECK(k >= 0 && fabs(points) <= tol);
        }
    }
}

static void remove_files(void) {
    char path[4200];
    for (int mi = 0; mi < N_MODELS; mi++) {
        unlink(f32_path[mi]);
        for (int si = 0; si < N_SCHEMES; si++)
            unlink(q_path[mi][si]);
    }
    const char *others[] = {"other.safetensors", "gpt.safetensors", "text.safetensors"};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        unlink(in_tmp(path, sizeof path, others[i]));
    rmdir(tmp_dir);
}

int main(int argc, char **argv) {
    const int accuracy = argc > 1 && strcmp(argv[1], "accuracy") == 0;
    if (!require_cli()) return 1;
    if (accuracy && fashion_mnist_missing(CN_FASHION_MNIST_DIR, "train-images-idx3-ubyte"))
        return 77;
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    if (!make_f32_checkpoints()) {
        remove_files();
        return 1;
    }
    if (accuracy) {
        RUN(test_quantized_models_keep_their_accuracy);
    } else {
        RUN(test_quantize_writes_each_scheme_in_the_bytes_it_takes);
        RUN(test_the_quantized_model_matches_a_dequantized_f64_reference);
        RUN(test_the_command_line_is_checked);
        RUN(test_files_that_cannot_be_quantized_are_refused);
        RUN(test_eval_refuses_quantized_files_that_quantize_did_not_write);
        RUN(test_load_into_names_the_way_for_quantized_tensors);
    }
    remove_files();
    return th_finish();
}
