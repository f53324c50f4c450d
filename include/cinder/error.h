/* cinder: status codes and the thread-local error state.
 *
 * Every fallible call reports through one path: it returns NULL (ops) or a non-zero cn_status
 * (everything else), and leaves a status code and a message in thread-local storage. The message
 * names the operation, the offending argument with its shape/dtype/device, and a way out.
 *
 * The status is sticky, like errno: a successful call does not clear it. An op given a NULL tensor
 * returns NULL and keeps the first error, so a chain `cn_exp(cn_add(a, b))` is checked once at the
 * end. Call cn_clear_error() after handling an error. */
#ifndef CINDER_ERROR_H
#define CINDER_ERROR_H

#include "cinder/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stable codes: the numbers never change meaning; new codes are appended. Each has an entry in
 * the error catalogue (`cinder explain <code>`). */
typedef enum cn_status {
    CN_OK = 0,
    CN_ERR_NULL_ARG = 1,           /* a required argument was NULL */
    CN_ERR_INVALID_ARG = 2,        /* a scalar argument is out of range (dim, size, step, ...) */
    CN_ERR_SHAPE = 3,              /* tensor shapes are incompatible for the op */
    CN_ERR_DTYPE = 4,              /* the dtypes differ or the op does not support the dtype */
    CN_ERR_KIND = 5,               /* wrong tensor kind (float / int / bool) for the op */
    CN_ERR_DEVICE_MISMATCH = 6,    /* inputs live on different devices */
    CN_ERR_NO_KERNEL = 7,          /* the backend has no kernel for the op */
    CN_ERR_OUT_OF_MEMORY = 8,      /* an allocation failed */
    CN_ERR_OVERFLOW = 9,           /* a shape product or stride overflows 64 bits */
    CN_ERR_UNKNOWN_DEVICE = 10,    /* no backend of that name, or an unparsable device string */
    CN_ERR_DEVICE_UNAVAILABLE = 11,/* the backend exists but that device cannot be used here */
    CN_ERR_BACKEND = 12,           /* the backend reported a failure of its own */
    CN_ERR_INDEX = 13,             /* an index tensor holds a value out of range */
    CN_ERR_SCOPE = 14,             /* scope API misuse (end without begin, keep outside a scope) */
    CN_ERR_BUFFER = 15,            /* a caller's buffer has the wrong size */
    CN_ERR_AUTODIFF_DEVICE = 16,   /* an autodiff call on a tensor of a concrete device */
    CN_ERR_AUTODIFF_NO_GRAD = 17,  /* backward/grad of a tensor that is not tracked */
    CN_ERR_AUTODIFF_MODIFIED = 18, /* a tensor saved for backward was changed in place */
    CN_ERR_AUTODIFF_GRAPH = 19,    /* backward through a graph already freed by a backward */
    CN_ERR_AUTODIFF_INPLACE = 20,  /* in-place write to a tracked tensor outside no-grad mode */
    CN_ERR_AUTODIFF_REACHED_CONCRETE = 21, /* a tracked float would reach a concrete kernel */
    CN_ERR_AUTODIFF_NONFLOAT = 22, /* an int/bool tensor carries an autodiff primitive */
    CN_ERR_AUTODIFF_PLAIN_ENABLED = 23, /* a plain float carries an enabled autodiff context */
    CN_ERR_EXT_MIXED_TRACKING = 24,/* tracked and untracked floats where one tracking is required */
    CN_ERR_EXT_NO_TENSOR = 25,     /* no tensor input to choose a backend from */
    CN_ERR_CHECKPOINT_MISMATCH = 26, /* inputs use different checkpointing strategies */
    CN_ERR_IO = 27,                /* a file is missing, unreadable, truncated or corrupt */
    CN_STATUS_COUNT                /* number of codes; not a code */
} cn_status;

/* The status of the last failed call on this thread (CN_OK if none since cn_clear_error). */
CN_API cn_status cn_last_status(void);

/* The message of the last failed call on this thread ("" if none). Valid until the next failure
 * on this thread. */
CN_API const char *cn_last_error(void);

/* Forget the last error on this thread. */
CN_API void cn_clear_error(void);

/* The stable name of a status code, e.g. "CN_ERR_SHAPE"; "CN_UNKNOWN" for an unknown value. */
CN_API const char *cn_status_name(cn_status s);

/* Record a failure: for backend and extension authors whose kernels fail. `op` names the
 * operation; the message is the catalogue phrase of `s` followed by the formatted detail, which
 * should name the offending argument and a way out. Returns `s`. */
CN_API cn_status cn_set_error(cn_status s, const char *op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
