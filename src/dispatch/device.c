/* Device values: construction, parsing of names like "cuda:1", and CINDER_DEVICE. Their names
 * ("cpu:0") are written by core (core/device_str.c), from the names the registry gives it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/device.h"
#include "core/error_internal.h"
#include "dispatch/registry.h"

cn_device cn_cpu(void) {
    cn_device d = {CN_BACKEND_CPU, 0, 0, 0};
    return d;
}

int cn_device_eq(cn_device a, cn_device b) {
    return a.backend == b.backend && a.index == b.index && a.autodiff == b.autodiff &&
           a.checkpoint == b.checkpoint;
}

cn_status cn_device_parse(const char *name, cn_device *out) {
    const char *op = "device_parse";
    if (!name || !out) {
        cn__null_arg(op, !name ? "name" : "out");
        return CN_ERR_NULL_ARG;
    }
    char backend[64];
    const char *colon = strchr(name, ':');
    size_t len = colon ? (size_t)(colon - name) : strlen(name);
    if (len == 0 || len >= sizeof backend)
        return cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "'%s' is not a device name; use 'cpu', "
                            "'cuda' or 'cuda:N'", name);
    memcpy(backend, name, len);
    backend[len] = '\0';
    long index = 0;
    if (colon) {
        char *end;
        errno = 0;
        index = strtol(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end || index < 0 || index > 32767)
            return cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "'%s' has a bad device index; write "
                                "'%s:N' with N a small non-negative number", name, backend);
    }
    int id = cn__backend_load(op, backend);
    if (id < 0) return cn_last_status();
    cn_device d = {(int16_t)id, (int16_t)index, 0, 0};
    if (!cn__backend_for_device(op, d)) return cn_last_status();
    *out = d;
    return CN_OK;
}

cn_device cn_default_device(void) {
    const char *env = getenv("CINDER_DEVICE");
    if (!env || !*env) return cn_cpu();
    cn_device d;
    if (cn_device_parse(env, &d) != CN_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", cn_last_error());
        cn_set_error(cn_last_status(), "default_device", "CINDER_DEVICE='%s' is unusable (%s); "
                     "unset it or set it to a device this build has, e.g. cpu", env, why);
        cn_device bad = {CN_BACKEND_INVALID, 0, 0, 0};
        return bad;
    }
    return d;
}

int cn_backend_compiled(const char *name) {
    cn_backend_status st;
    return cn_backend_status_of(name, &st) == CN_OK && st.id >= 0;
}

int cn_backend_device_count(const char *name) {
    cn_backend_status st;
    return cn_backend_status_of(name, &st) == CN_OK ? st.devices : 0;
}
