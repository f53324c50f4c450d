/* cinder: devices.
 *
 * A cn_device is a small value naming where a tensor lives: which registered backend, which device
 * of that backend, and whether the autodiff layer wraps it. Compare devices with cn_device_eq. */
#ifndef CINDER_DEVICE_H
#define CINDER_DEVICE_H

#include "cinder/api.h"

#include <stddef.h>
#include <stdint.h>

#include "cinder/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Backend ids are handed out by the registry (see backend.h); the CPU is always 0. */
#define CN_BACKEND_CPU 0
#define CN_BACKEND_INVALID (-1)

typedef struct cn_device {
    int16_t backend;    /* registry id of the concrete backend, CN_BACKEND_INVALID if none */
    int16_t index;      /* device index within the backend (cuda:1 -> 1) */
    uint8_t autodiff;   /* non-zero: tensors here are tracked by the autodiff layer */
    uint8_t checkpoint; /* autodiff checkpointing strategy (0 = none) */
} cn_device;

/* The CPU device. */
CN_API cn_device cn_cpu(void);

/* The device named by the CINDER_DEVICE environment variable ("cpu", "cuda", "cuda:1"), or the CPU
 * when it is unset. An unknown or unavailable name sets the error (CN_ERR_UNKNOWN_DEVICE or
 * CN_ERR_DEVICE_UNAVAILABLE) and returns a device whose backend is CN_BACKEND_INVALID, on which
 * every tensor creation fails with that error. */
CN_API cn_device cn_default_device(void);

/* Parse "cpu", "cuda", "cuda:0", or the name of any registered backend with an optional ":index".
 * Checks that the backend exists and that the device index is available. */
CN_API cn_status cn_device_parse(const char *name, cn_device *out);

/* Non-zero when a and b are the same device (backend, index, autodiff and checkpointing). */
CN_API int cn_device_eq(cn_device a, cn_device b);

/* Writes "cpu:0" (or "autodiff(cpu:0)") into buf; returns buf. */
CN_API const char *cn_device_str(cn_device d, char *buf, size_t size);

/* Non-zero when the backend with this name is registered (compiled in). */
CN_API int cn_backend_compiled(const char *name);

/* Number of usable devices of the named backend (0 when compiled in but unusable, e.g. no GPU). */
CN_API int cn_backend_device_count(const char *name);

#ifdef __cplusplus
}
#endif
#endif
