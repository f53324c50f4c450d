/* `cinder info`: what this build of cinder is and what it can run on.
 *
 *     cinder 0.1.0
 *     build: Release GNU-12.2.0 thread-pool openblas zlib cuda-module lto
 *     backends:
 *       cpu      id 0   1 device   available
 *       cuda     id 1   0 devices  module found (/usr/lib/libcinder_cuda.so), no usable device:
 *                cudaGetDeviceCount: no CUDA-capable device is detected (cudaErrorNoDevice)
 *
 * A backend that is not registered is looked for as a module (cinder/backend.h); one that is not
 * found is listed with every place looked at. */
#include <stdio.h>
#include <string.h>

#include "cinder/backend.h"
#include "cinder/device.h"
#include "cinder/version.h"
#include "cli/cli.h"

/* Registry ids to look at: built-in backends come first, programs' own ones after. */
#define INFO_MAX_BACKEND_ID 16

/* Backends cinder ships; each is listed even when it cannot be found. */
static const char *const known_backends[] = {"cpu", "cuda"};

/* Prints text indented under the backend's line, one line of it per line. */
static void print_indented(const char *text) {
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        while (len > 0 && (*p == ' ')) {
            p++;
            len--;
        }
        if (len > 0) printf("           %.*s\n", len, p);
        p = nl ? nl + 1 : p + len;
    }
}

static void print_backend(const char *name) {
    cn_backend_status st;
    if (cn_backend_status_of(name, &st) != CN_OK) return;
    if (st.id < 0) {
        printf("  %-8s not found\n", name);
        print_indented(st.why);
        return;
    }
    printf("  %-8s id %-3d %d device%s  ", name, st.id, st.devices, st.devices == 1 ? " " : "s");
    if (st.module[0]) printf("module %s, ", st.module);
    if (st.devices > 0) {
        printf("available\n");
    } else {
        printf("no usable device%s\n", st.why[0] ? ":" : "");
        print_indented(st.why);
    }
}

int cli_info(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: cinder info\n");
        return CLI_EXIT_USAGE;
    }
    const char *version = cn_version();
    printf("cinder %s", version);
    if (strcmp(version, CN_VERSION_STRING) != 0) printf(" (headers %s)", CN_VERSION_STRING);
    printf("\nbuild: %s\n", cn_build_config());

    printf("backends:\n");
    for (size_t i = 0; i < sizeof known_backends / sizeof *known_backends; i++)
        print_backend(known_backends[i]);
    for (int id = 0; id < INFO_MAX_BACKEND_ID; id++) {
        const cn_backend *b = cn_backend_get(id);
        int known = 0;
        for (size_t i = 0; b && i < sizeof known_backends / sizeof *known_backends; i++)
            known |= strcmp(b->name, known_backends[i]) == 0;
        if (b && !known) print_backend(b->name);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cinder info: cannot write the output\n");
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}
