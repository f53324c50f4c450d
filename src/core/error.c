/* The thread-local error state: one status and one message per thread. */
#include <stdarg.h>
#include <stdio.h>

#include "core/error_internal.h"

static _Thread_local cn_status last_status = CN_OK;
static _Thread_local char last_message[1024];

cn_status cn_last_status(void) { return last_status; }

const char *cn_last_error(void) { return last_message; }

void cn_clear_error(void) {
    last_status = CN_OK;
    last_message[0] = '\0';
}

static const char *const status_names[CN_STATUS_COUNT] = {
    [CN_OK] = "CN_OK",
    [CN_ERR_NULL_ARG] = "CN_ERR_NULL_ARG",
    [CN_ERR_INVALID_ARG] = "CN_ERR_INVALID_ARG",
    [CN_ERR_SHAPE] = "CN_ERR_SHAPE",
    [CN_ERR_DTYPE] = "CN_ERR_DTYPE",
    [CN_ERR_KIND] = "CN_ERR_KIND",
    [CN_ERR_DEVICE_MISMATCH] = "CN_ERR_DEVICE_MISMATCH",
    [CN_ERR_NO_KERNEL] = "CN_ERR_NO_KERNEL",
    [CN_ERR_OUT_OF_MEMORY] = "CN_ERR_OUT_OF_MEMORY",
    [CN_ERR_OVERFLOW] = "CN_ERR_OVERFLOW",
    [CN_ERR_UNKNOWN_DEVICE] = "CN_ERR_UNKNOWN_DEVICE",
    [CN_ERR_DEVICE_UNAVAILABLE] = "CN_ERR_DEVICE_UNAVAILABLE",
    [CN_ERR_BACKEND] = "CN_ERR_BACKEND",
    [CN_ERR_INDEX] = "CN_ERR_INDEX",
    [CN_ERR_SCOPE] = "CN_ERR_SCOPE",
    [CN_ERR_BUFFER] = "CN_ERR_BUFFER",
    [CN_ERR_AUTODIFF_DEVICE] = "CN_ERR_AUTODIFF_DEVICE",
    [CN_ERR_AUTODIFF_NO_GRAD] = "CN_ERR_AUTODIFF_NO_GRAD",
    [CN_ERR_AUTODIFF_MODIFIED] = "CN_ERR_AUTODIFF_MODIFIED",
    [CN_ERR_AUTODIFF_GRAPH] = "CN_ERR_AUTODIFF_GRAPH",
    [CN_ERR_AUTODIFF_INPLACE] = "CN_ERR_AUTODIFF_INPLACE",
    [CN_ERR_AUTODIFF_REACHED_CONCRETE] = "CN_ERR_AUTODIFF_REACHED_CONCRETE",
    [CN_ERR_AUTODIFF_NONFLOAT] = "CN_ERR_AUTODIFF_NONFLOAT",
    [CN_ERR_AUTODIFF_PLAIN_ENABLED] = "CN_ERR_AUTODIFF_PLAIN_ENABLED",
    [CN_ERR_EXT_MIXED_TRACKING] = "CN_ERR_EXT_MIXED_TRACKING",
    [CN_ERR_EXT_NO_TENSOR] = "CN_ERR_EXT_NO_TENSOR",
    [CN_ERR_CHECKPOINT_MISMATCH] = "CN_ERR_CHECKPOINT_MISMATCH",
    [CN_ERR_IO] = "CN_ERR_IO",
};

const char *cn_status_name(cn_status s) {
    if ((int)s < 0 || s >= CN_STATUS_COUNT || !status_names[s]) return "CN_UNKNOWN";
    return status_names[s];
}

cn_status cn_set_error(cn_status s, const char *op, const char *fmt, ...) {
    last_status = s;
    int n = snprintf(last_message, sizeof last_message, "%s: %s: ", op ? op : "cinder",
                     cn__status_phrase(s));
    if (n < 0) n = 0;
    if ((size_t)n < sizeof last_message) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(last_message + n, sizeof last_message - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return s;
}

void cn__null_arg(const char *op, const char *arg) {
    if (last_status != CN_OK) return; /* an earlier failure produced this NULL: keep its error */
    cn_set_error(CN_ERR_NULL_ARG, op,
                 "argument '%s' is NULL; check the call that produced it (it returned NULL "
                 "without an error, or the error was cleared)", arg);
}

void cn__error_save(cn__saved_error *saved) {
    saved->status = last_status;
    snprintf(saved->message, sizeof saved->message, "%s", last_message);
}

void cn__error_restore(const cn__saved_error *saved) {
    last_status = saved->status;
    snprintf(last_message, sizeof last_message, "%s", saved->message);
}
