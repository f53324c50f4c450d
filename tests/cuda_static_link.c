/* A static program links the CUDA backend in (libcinder_cuda.a) and registers it itself, instead
 * of letting libcinder load libcinder_cuda.so: the backend is then registered with no module file,
 * a second registration is refused, and tensors on cuda:0 work when a GPU is there (skipped, exit
 * 77, after the registration checks when there is none). */
#include <stdio.h>
#include <string.h>

#include "cinder/cinder.h"
#include "cinder/cuda.h"

int main(void) {
    int id = cn_backend_add_module(cn_cuda_backend_module);
    if (id < 0) {
        fprintf(stderr, "cn_backend_add_module: %s\n", cn_last_error());
        return 1;
    }
    if (cn_backend_find("cuda") != id || cn_backend_load("cuda") != id) {
        fprintf(stderr, "the linked-in cuda backend is not the one found\n");
        return 1;
    }
    if (cn_backend_add_module(cn_cuda_backend_module) != -1 ||
        cn_last_status() != CN_ERR_INVALID_ARG || !strstr(cn_last_error(), "already registered")) {
        fprintf(stderr, "a second registration was not refused: %s\n", cn_last_error());
        return 1;
    }
    cn_clear_error();
    cn_backend_status st;
    if (cn_backend_status_of("cuda", &st) != CN_OK || st.id != id || st.module[0]) {
        fprintf(stderr, "status of the linked-in backend: id %d, module '%s'\n", st.id, st.module);
        return 1;
    }
    printf("cuda linked in as backend %d, %d device(s)%s%s\n", id, st.devices,
           st.why[0] ? ": " : "", st.why);
    if (st.devices == 0) return 77;
    cn_device gpu;
    if (cn_device_parse("cuda:0", &gpu) != CN_OK) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    const float v[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    cn_tensor *x = cn_from_data(v, shape, 1, CN_F32, gpu);
    cn_tensor *y = cn_add(x, x);
    float out[3] = {0};
    int bad = !y || cn_read(y, out, sizeof out) != CN_OK || out[0] != 2 || out[1] != 4 ||
              out[2] != 6;
    cn_release(y);
    cn_release(x);
    if (bad) fprintf(stderr, "cuda add: %s\n", cn_last_error());
    return bad;
}
