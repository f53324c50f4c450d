/* `cinder train` and `cinder eval`, run as a user runs them: training the MLP on a 2,000-image
 * subset of Fashion-MNIST for one epoch makes the loss fall and the test accuracy beat 70%; the
 * plot is an SVG file; `cinder eval` on the saved checkpoint reports the same accuracy; a missing
 * data set, an unknown model and a missing or corrupt checkpoint are clear errors with the right
 * exit codes. The oracle is the program's own output, parsed, and the files it writes.
 *
 * The binary is found next to the tests folder of the build tree (<build>/tests/test_train runs
 * <build>/cinder). Without the data set (apt-get install dataset-fashion-mnist) the test exits 77
 * (skipped). */
#define _POSIX_C_SOURCE 200809L

#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "cli_run.h"

/* ---- running the program -------------------------------------------------------------------- */

static char tmp_dir[] = "/tmp/cinder_test_train_XXXXXX";
static char checkpoint[4200], plot[4200];

/* ---- the training run, shared by the tests below -------------------------------------------- */

static run_result training;

/* 125 steps of 16 images: enough for the MLP to pass 70% with a margin (it reaches about 73%). */
static void train_once(void) {
    char args[9000];
    snprintf(args, sizeof args,
             "train --limit 2000 --epochs 1 --batch 16 --lr 0.01 --save '%s' --plot '%s'",
             checkpoint, plot);
    training = run_cli(args, 1); /* the progress lines are on stderr */
    if (training.out) printf("%s", training.out);
}

/* The progress lines ("... batch 2/125: loss 2.2937, ...") report the mean loss of the batches
 * since the previous line; the first and the last bracket the epoch. */
static void test_trains_the_mlp_on_a_subset_and_the_loss_falls(void) {
    CHECK(training.status == 0);
    double first = NAN, last = NAN;
    int lines = 0;
    for (const char *p = training.out; p && (p = strstr(p, "] batch ")); p++) {
        double loss = number_after(p, ": loss ");
        if (lines++ == 0) first = loss;
        last = loss;
    }
    printf("progress lines %d, loss %.4f -> %.4f\n", lines, first, last);
    CHECK(lines >= 5);
    CHECK(first > 1.5);        /* near ln(10) = 2.30 at the start */
    CHECK(last < first * 0.7); /* and clearly lower at the end */
}

static void test_one_epoch_on_2000_images_beats_70_percent(void) {
    const char *line = training.out ? strstr(training.out, "epoch 1/1: train loss ") : NULL;
    CHECK(line != NULL);
    double accuracy = number_after(line, "test accuracy ");
    double seconds = number_after(line, "epoch time ");
    printf("test accuracy %.4f\n", accuracy);
    CHECK(accuracy > 0.70 && accuracy <= 1.0);
    CHECK(seconds > 0);
    CHECK(training.out && strstr(training.out, "saved the mlp to"));
}

static void test_the_plot_is_an_svg_image(void) {
    FILE *f = fopen(plot, "rb");
    CHECK(f != NULL);
    if (!f) return;
    char svg[65536];
    size_t n = fread(svg, 1, sizeof svg - 1, f);
    fclose(f);
    svg[n] = '\0';
    CHECK(n > 1000 && n < sizeof svg - 1);
    CHECK(strncmp(svg, "<?xml", 5) == 0);
    CHECK(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"") != NULL);
    CHECK(strstr(svg, "<polyline") != NULL);
    CHECK(strstr(svg, "test accuracy") != NULL);
    CHECK(strstr(svg, "training loss") != NULL);
    const char *end = strstr(svg, "</svg>");
    CHECK(end != NULL && strspn(end + 6, "\n") == strlen(end + 6)); /* nothing after it */
}

static void test_eval_reports_the_same_accuracy(void) {
    char args[4400];
    snprintf(args, sizeof args, "eval --load '%s'", checkpoint);
    run_result r = run_cli(args, 0);
    CHECK(r.status == 0);
    const char *trained = training.out ? strstr(training.out, "test accuracy ") : NULL;
    const char *evaluated = r.out ? strstr(r.out, "test accuracy ") : NULL;
    CHECK(trained && evaluated);
    /* the same text: "test accuracy 0.xxxx" */
    if (trained && evaluated)
        CHECK(strncmp(trained, evaluated, strlen("test accuracy 0.xxxx")) == 0);
    if (r.out) printf("%s", r.out);
    free(r.out);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_a_missing_data_set_says_how_to_install_it(void) {
    run_result r = run_cli("train --epochs 1 --data /nonexistent/fashion-mnist", 1);
    CHECK(r.status == 1);
    CHECK(r.out && strstr(r.out, "apt-get install dataset-fashion-mnist"));
    CHECK(r.out && strstr(r.out, "/nonexistent/fashion-mnist"));
    free(r.out);
    char args[4400];
    snprintf(args, sizeof args, "eval --load '%s' --data /nonexistent/fashion-mnist", checkpoint);
    run_result e = run_cli(args, 1);
    CHECK(e.status == 1);
    CHECK(e.out && strstr(e.out, "apt-get install dataset-fashion-mnist"));
    free(e.out);
}

static void test_an_unknown_model_or_option_is_a_usage_error(void) {
    run_result r = run_cli("train --model resnet --limit 100", 1);
    CHECK(r.status == 2);
    CHECK(r.out && strstr(r.out, "unknown model 'resnet'") && strstr(r.out, "mlp, cnn or gpt"));
    free(r.out);
    run_result bad_epochs = run_cli("train --epochs 0", 1);
    CHECK(bad_epochs.status == 2);
    CHECK(bad_epochs.out && strstr(bad_epochs.out, "--epochs"));
    free(bad_epochs.out);
    run_result unknown = run_cli("train --frobnicate", 1);
    CHECK(unknown.status == 2);
    CHECK(unknown.out && strstr(unknown.out, "--frobnicate"));
    free(unknown.out);
    run_result no_load = run_cli("eval", 1);
    CHECK(no_load.status == 2);
    CHECK(no_load.out && strstr(no_load.out, "--load"));
    free(no_load.out);
}

static void test_a_missing_or_corrupt_checkpoint_is_a_clear_error(void) {
    char path[4300], args[8800];
    snprintf(path, sizeof path, "%s/missing.safetensors", tmp_dir);
    snprintf(args, sizeof args, "eval --load '%s'", path);
    run_result missing = run_cli(args, 1);
    CHECK(missing.status == 1);
    CHECK(missing.out && strstr(missing.out, path));
    free(missing.out);

    snprintf(path, sizeof path, "%s/corrupt.safetensors", tmp_dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs("this is not a checkpoint", f);
    fclose(f);
    snprintf(args, sizeof args, "eval --load '%s'", path);
    run_result corrupt = run_cli(args, 1);
    CHECK(corrupt.status == 1);
    CHECK(corrupt.out && strstr(corrupt.out, path) && strstr(corrupt.out, "cannot load"));
    free(corrupt.out);
    remove(path);
}

int main(void) {
    if (!require_cli()) return 1;
    if (fashion_mnist_missing(CN_FASHION_MNIST_DIR, "train-images-idx3-ubyte")) return 77;
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(checkpoint, sizeof checkpoint, "%s/mlp.safetensors", tmp_dir);
    snprintf(plot, sizeof plot, "%s/curves.svg", tmp_dir);
    train_once();
    RUN(test_trains_the_mlp_on_a_subset_and_the_loss_falls);
    RUN(test_one_epoch_on_2000_images_beats_70_percent);
    RUN(test_the_plot_is_an_svg_image);
    RUN(test_eval_reports_the_same_accuracy);
    RUN(test_a_missing_data_set_says_how_to_install_it);
    RUN(test_an_unknown_model_or_option_is_a_usage_error);
    RUN(test_a_missing_or_corrupt_checkpoint_is_a_clear_error);
    free(training.out);
    remove(checkpoint);
    remove(plot);
    rmdir(tmp_dir);
    return th_finish();
}
