/* Checkpoints shared with PyTorch, checked without Python: the oracle is data that PyTorch wrote
 * (tests/data, by bench/torch/checkpoints.py --write-test-data).
 *   - torch_mlp.safetensors: the MLP nn.Sequential(Linear, ReLU, Linear, ReLU, Linear) trained
 *     one epoch in PyTorch and saved with safetensors.torch.save_file; its metadata holds the
 *     number of test images PyTorch classified right. `cinder eval --load` on it must count the
 *     same images.
 *   - torch_state_dict.txt: the keys, dtypes and shapes of the state_dict of both models'
 *     PyTorch nn.Sequential. What `cinder train --save` writes must be exactly those.
 * Also: an MLP checkpoint of the earlier layout (layers 0, 1, 2) still loads, and one that lacks
 * a layer is an error naming PyTorch's keys.
 *
 * Runs the built `cinder` (<build>/cinder); without Fashion-MNIST it exits 77 (skipped). */
#define _POSIX_C_SOURCE 200809L

#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "cli_run.h"

#define TORCH_MLP   TEST_DATA_DIR "/torch_mlp.safetensors"
#define TORCH_KEYS  TEST_DATA_DIR "/torch_state_dict.txt"
#define MAX_ENTRIES 32
#define MAX_DIMS    4

static char tmp_dir[] = "/tmp/cinder_test_torch_ckpt_XXXXXX";

static const char *tmp_path(const char *name, char *buf, size_t size) {
    snprintf(buf, size, "%s/%s", tmp_dir, name);
    return buf;
}

/* `cinder eval --load path`: the accuracy and the count of "test accuracy X (N correct)";
 * *correct is -1 when the line is not there. */
static run_result eval_file(const char *path, double *accuracy, long long *correct) {
    char args[4400];
    snprintf(args, sizeof args, "eval --load '%s' --threads 2", path);
    run_result r = run_cli(args, 1);
    const char *at = r.out ? strstr(r.out, "test accuracy ") : NULL;
    *correct = -1;
    if (at && sscanf(at, "test accuracy %lf (%lld correct)", accuracy, correct) != 2) *correct = -1;
    return r;
}

/* The file's metadata `key` as an integer, or -1. */
static long long metadata_int(const cn_safetensors *h, const char *key) {
    const char *v = h ? cn_safetensors_metadata(h, key) : NULL;
    return v ? strtoll(v, NULL, 10) : -1;
}

/* ---- a checkpoint that PyTorch wrote -------------------------------------------------------- */

static void test_eval_of_pytorchs_mlp_counts_what_pytorch_counted(void) {
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(TORCH_MLP, cn_cpu(), &h) == CN_OK);
    long long want = metadata_int(h, "test_correct"), images = metadata_int(h, "test_images");
    const char *model = h ? cn_safetensors_metadata(h, "model") : NULL;
    CHECK(model && strcmp(model, "mlp") == 0);
    cn_safetensors_free(h);
    CHECK(want > 8000 && images == 10000); /* one epoch of PyTorch training: about 84% */

    double accuracy = -1;
    long long correct = -1;
    run_result r = eval_file(TORCH_MLP, &accuracy, &correct);
    if (r.out) printf("%s", r.out);
    CHECK(r.status == 0);
    CHECK(r.out && strstr(r.out, "mlp from "));
    printf("PyTorch: %lld of %lld correct; cinder eval: %lld\n", want, images, correct);
    CHECK(correct == want);
    CHECK(fabs(accuracy - (double)want / (double)images) <= 1e-4); /* printed to 4 places */
    free(r.out);
}

/* The same tensors under the names of the earlier layout (0, 1, 2): cinder eval recognises it and
 * counts the same images. */
static void test_an_mlp_of_the_earlier_layout_still_loads(void) {
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(TORCH_MLP, cn_cpu(), &h) == CN_OK);
    long long want = metadata_int(h, "test_correct");
    const char *now[6] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
    const char *old[6] = {"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"};
    cn_tensor *t[6] = {0};
    for (int i = 0; i < 6; i++) {
        t[i] = h ? cn_safetensors_get(h, now[i]) : NULL;
        CHECK(t[i] != NULL);
    }
    char path[4200];
    tmp_path("legacy_mlp.safetensors", path, sizeof path);
    CHECK(cn_safetensors_save(path, old, t, 6) == CN_OK);
    for (int i = 0; i < 6; i++)
        cn_release(t[i]);
    cn_safetensors_free(h);

    double accuracy = -1;
    long long correct = -1;
    run_result r = eval_file(path, &accuracy, &correct);
    CHECK(r.status == 0);
    CHECK(correct == want);
    free(r.out);
    remove(path);
}

/* A file with the first layer only: the error names the missing key and the model's keys. */
static void test_a_checkpoint_without_a_layer_names_pytorchs_keys(void) {
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(TORCH_MLP, cn_cpu(), &h) == CN_OK);
    const char *names[2] = {"0.weight", "0.bias"};
    cn_tensor *t[2] = {h ? cn_safetensors_get(h, names[0]) : NULL,
                       h ? cn_safetensors_get(h, names[1]) : NULL};
    char path[4200];
    tmp_path("first_layer.safetensors", path, sizeof path);
    CHECK(cn_safetensors_save(path, names, t, 2) == CN_OK);
    cn_release(t[0]);
    cn_release(t[1]);
    cn_safetensors_free(h);

    double accuracy = -1;
    long long correct = -1;
    run_result r = eval_file(path, &accuracy, &correct);
    if (r.out) printf("%s", r.out);
    CHECK(r.status == 1);
    CHECK(r.out && strstr(r.out, "has no tensor '2.weight'"));
    CHECK(r.out && strstr(r.out, "nn.Sequential(Linear, ReLU, Linear, ReLU, Linear): 0, 2, 4"));
    free(r.out);
    remove(path);
}

/* ---- what cinder writes: PyTorch's state_dict ----------------------------------------------- */

typedef struct entry {
    char key[64], dtype[8];
    int ndim;
    long long shape[MAX_DIMS];
} entry;

/* The entries of `model` in torch_state_dict.txt ("<model> <key> <dtype> <d0,d1,...>"). */
static int torch_entries(const char *model, entry *out) {
    FILE *f = fopen(TORCH_KEYS, "r");
    CHECK(f != NULL);
    if (!f) return 0;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < MAX_ENTRIES) {
        char kind[8], dims[64];
        if (line[0] == '#') continue;
        if (sscanf(line, "%7s %63s %7s %63s", kind, out[n].key, out[n].dtype, dims) != 4) continue;
        if (strcmp(kind, model) != 0) continue;
        out[n].ndim = 0;
        for (char *p = dims; *p && out[n].ndim < MAX_DIMS; p += *p == ',')
            out[n].shape[out[n].ndim++] = strtoll(p, &p, 10);
        n++;
    }
    fclose(f);
    return n;
}

/* `cinder train --model <model> --save` on a few images: its file holds exactly PyTorch's keys,
 * each with PyTorch's dtype and shape. */
static void check_saved_keys(const char *model) {
    char path[4200], args[8800];
    snprintf(path, sizeof path, "%s/%s.safetensors", tmp_dir, model);
    snprintf(args, sizeof args,
             "train --model %s --epochs 1 --limit 32 --batch 16 --test-limit 10 --threads 2 "
             "--save '%s'",
             model, path);
    run_result r = run_cli(args, 1);
    CHECK(r.status == 0);
    free(r.out);

    entry want[MAX_ENTRIES];
    int n = torch_entries(model, want);
    /* a weight and a bias for each layer with parameters: 3 in the mlp, 4 in the cnn */
    CHECK(n == (strcmp(model, "mlp") == 0 ? 6 : 8));
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    CHECK(h && cn_safetensors_count(h) == n);
    for (int i = 0; i < n && h; i++) {
        cn_tensor *t = cn_safetensors_get(h, want[i].key);
        if (!t) fprintf(stderr, "%s: no '%s', a key of PyTorch's state_dict\n", model, want[i].key);
        CHECK(t != NULL);
        if (!t) continue;
        char dtype[8];
        snprintf(dtype, sizeof dtype, "%s", cn_dtype_name(cn_dtype_of(t)));
        for (char *p = dtype; *p; p++)
            if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
        CHECK(strcmp(dtype, want[i].dtype) == 0);
        CHECK(cn_ndim(t) == want[i].ndim);
        for (int d = 0; d < want[i].ndim && d < cn_ndim(t); d++)
            CHECK(cn_shape(t)[d] == want[i].shape[d]);
        cn_release(t);
    }
    cn_safetensors_free(h);
    remove(path);
}

static void test_the_mlp_saves_pytorchs_keys_and_shapes(void) { check_saved_keys("mlp"); }

static void test_the_cnn_saves_pytorchs_keys_and_shapes(void) { check_saved_keys("cnn"); }

int main(void) {
    if (!require_cli()) return 1;
    if (fashion_mnist_missing(CN_FASHION_MNIST_DIR, "t10k-images-idx3-ubyte")) return 77;
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_eval_of_pytorchs_mlp_counts_what_pytorch_counted);
    RUN(test_an_mlp_of_the_earlier_layout_still_loads);
    RUN(test_a_checkpoint_without_a_layer_names_pytorchs_keys);
    RUN(test_the_mlp_saves_pytorchs_keys_and_shapes);
    RUN(test_the_cnn_saves_pytorchs_keys_and_shapes);
    rmdir(tmp_dir);
    return th_finish();
}
