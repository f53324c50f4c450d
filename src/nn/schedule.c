/* Learning-rate schedules in closed form: StepLR and CosineAnnealingLR. */
#include <math.h>

#include "core/error_internal.h"
#include "nn/nn_internal.h"

#define PI 3.14159265358979323846

cn_lr_schedule cn_lr_step(double base_lr, int64_t step_size, double gamma) {
    cn_lr_schedule s = {CN_LR_STEP, base_lr, step_size, gamma, 0, 0.0};
    return s;
}

cn_lr_schedule cn_lr_cosine(double base_lr, int64_t t_max, double eta_min) {
    cn_lr_schedule s = {CN_LR_COSINE, base_lr, 0, 0.0, t_max, eta_min};
    return s;
}

double cn_lr_schedule_at(const cn_lr_schedule *s, int64_t epoch) {
    const char *op = "lr_schedule_at";
    if (!s) {
        cn__null_arg(op, "s");
        return NAN;
    }
    if (epoch < 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "epoch = %lld; epochs count from 0", (long long)epoch);
        return NAN;
    }
    switch (s->kind) {
    case CN_LR_STEP:
        if (s->step_size < 1) break;
        return s->base_lr * pow(s->gamma, (double)(epoch / s->step_size));
    case CN_LR_COSINE:
        if (s->t_max < 1) break;
        return s->eta_min +
               (s->base_lr - s->eta_min) * (1.0 + cos(PI * (double)epoch / (double)s->t_max)) / 2;
    default:
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "schedule kind %d is unknown; make schedules with "
                     "cn_lr_step or cn_lr_cosine",
                     (int)s->kind);
        return NAN;
    }
    cn_set_error(CN_ERR_INVALID_ARG, op,
                 "step_size = %lld, t_max = %lld; the schedule's period "
                 "must be at least 1 epoch",
                 (long long)s->step_size, (long long)s->t_max);
    return NAN;
}
