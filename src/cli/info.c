/* `cinder info`: what this build of cinder is and what it can run on.
 *
 *     cinder 0.1.0
 *     build: Release GNU-12.2.0 openmp openblas
 *     backends:
 *       cpu    id 0   1 device    available
 *       cuda   not compiled in */
#include <stdio.h>
#include <string.h>

#include "cinder/backend.h"
#include "cinder/device.h"
#include "cinder/version.h"
#include "cli/cli.h"

/* Registry ids to look at: built-in backends come first, programs' own ones after. */
#define INFO_MAX_BACKEND_ID 16

/* Backends cinder ships; each is listed even when this build lacks it. */
static const char *const known_backends[] = {"cpu", "cuda"};

static void print_backend(const char *name, int id) {
    int devices = cn_backend_device_count(name);
    fprintf(stdout, "  %-8s id %-3d %d device%s  %s\n", name, id, devices, devices == 1 ? " " : "s",
            devices > 0 ? "available" : "compiled in, no usable device");
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
    for (int id = 0; id < INFO_MAX_BACKEND_ID; id++) {
        const cn_backend *b = cn_backend_get(id);
        if (b && b->name) print_backend(b->name, id);
    }
    for (size_t i = 0; i < sizeof known_backends / sizeof *known_backends; i++) {
        if (cn_backend_find(known_backends[i]) < 0)
            printf("  %-8s not compiled in\n", known_backends[i]);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cinder info: cannot write the output\n");
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}
