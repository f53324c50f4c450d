/* `cinder train --log FILE` (runlog.h): JSON Lines, one flushed line per event. A write that
 * fails (a full disk) is reported once on stderr and ends the log, not the training. */
#include <errno.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/runlog.h"

int cli_log_open(cli_log *l, const char *path, int append) {
    *l = (cli_log){.path = path};
    if (!path) return 0;
    l->f = fopen(path, append ? "a" : "w");
    if (!l->f) {
        fprintf(stderr,
                "cinder train: cannot write the log %s: %s; choose another path for --log\n", path,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* Ends the line, flushes it, and stops the log at the first failure. */
static void end_line(cli_log *l) {
    fputs("}\n", l->f);
    if (fflush(l->f) != 0 || ferror(l->f)) {
        fprintf(stderr,
                "cinder train: writing the log %s failed: %s; the training goes on, the "
                "log ends at the line before\n",
                l->path, strerror(errno));
        fclose(l->f);
        l->f = NULL;
        l->failed = 1;
    }
}

static void field_int(cli_log *l, const char *key, int64_t v) {
    fprintf(l->f, ",\"%s\":%lld", key, (long long)v);
}

static void field_number(cli_log *l, const char *key, double v, int digits) {
    fprintf(l->f, ",\"%s\":", key);
    cli_json_number(l->f, v, digits);
}

static void field_string(cli_log *l, const char *key, const char *v) {
    fprintf(l->f, ",\"%s\":", key);
    cli_json_string(l->f, v);
}

void cli_log_start(cli_log *l, const cli_log_run *r) {
    if (!l->f) return;
    fputs("{\"event\":\"start\"", l->f);
    field_string(l, "model", r->model);
    field_string(l, "device", r->device);
    field_int(l, "threads", r->threads);
    field_string(l, "optimizer", r->optimizer);
    field_number(l, "lr", r->lr, 9);
    field_int(l, "batch", r->batch);
    field_int(l, "epochs", r->epochs);
    field_int(l, "steps_per_epoch", r->steps_per_epoch);
    field_int(l, r->train_key ? r->train_key : "train_images", r->train_images);
    field_int(l, r->test_key ? r->test_key : "test_images", r->test_images);
    field_int(l, "parameters", r->parameters);
    field_int(l, "parameter_bytes", r->parameter_bytes);
    field_int(l, "seed", r->seed);
    end_line(l);
}

void cli_log_step(cli_log *l, int epoch, int64_t step, int64_t global_step, double loss, double lr,
                  double samples_per_s, double elapsed_s) {
    if (!l->f) return;
    fprintf(l->f, "{\"event\":\"step\",\"epoch\":%d", epoch);
    field_int(l, "step", step);
    field_int(l, "global_step", global_step);
    field_number(l, "loss", loss, 9);
    field_number(l, "lr", lr, 9);
    field_number(l, "samples_per_s", samples_per_s, 9);
    field_number(l, "elapsed_s", elapsed_s, 9);
    end_line(l);
}

void cli_log_epoch(cli_log *l, int epoch, double train_loss, const char *metric, double value,
                   double lr, double epoch_time_s, double elapsed_s) {
    if (!l->f) return;
    fprintf(l->f, "{\"event\":\"epoch\",\"epoch\":%d", epoch);
    field_number(l, "train_loss", train_loss, 9);
    field_number(l, metric, value, 9);
    field_number(l, "lr", lr, 9);
    field_number(l, "epoch_time_s", epoch_time_s, 9);
    field_number(l, "elapsed_s", elapsed_s, 9);
    end_line(l);
}

int cli_log_close(cli_log *l) {
    if (l->f && fclose(l->f) != 0 && !l->failed) {
        fprintf(stderr, "cinder train: closing the log %s failed: %s\n", l->path, strerror(errno));
        l->failed = 1;
    }
    l->f = NULL;
    return l->failed ? -1 : 0;
}
