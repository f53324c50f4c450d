/* `cinder info`: what this build of cinder is and what it can run on.
 *
 *     cinder 0.1.0
 *     build: Release GNU-12.2.0 thread-pool openblas zlib cuda-module lto
 *     cpu threads: 16
 *     backends:
 *       cpu      id 0   1 device   available
 *       cuda     id 1   0 devices  module found (/usr/lib/libcinder_cuda.so), no usable device:
 *                cudaGetDeviceCount: no CUDA-capable device is detected (cudaErrorNoDevice)
 *
 * A backend that is not registered is looked for as a module (cinder/backend.h); one that is not
 * found is listed with every place looked at. `cinder info --json` prints the same facts as one
 * JSON object (the fields are listed in `cinder info --help`, main.c). */
#include <stdio.h>
#include <string.h>

#include "cinder/backend.h"
#include "cinder/device.h"
#include "cinder/version.h"
#include "cli/cli.h"

#define CMD "info"

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

/* The backends to list, in order: cinder's own, then those a program registered; returns how
 * many names were put in names[] (each borrowed). */
static int backend_names(const char **names, int cap) {
    int n = 0;
    for (size_t i = 0; i < sizeof known_backends / sizeof *known_backends && n < cap; i++)
        names[n++] = known_backends[i];
    for (int id = 0; id < INFO_MAX_BACKEND_ID && n < cap; id++) {
        const cn_backend *b = cn_backend_get(id);
        int known = 0;
        for (size_t i = 0; b && i < sizeof known_backends / sizeof *known_backends; i++)
            known |= strcmp(b->name, known_backends[i]) == 0;
        if (b && !known) names[n++] = b->name;
    }
    return n;
}

/* One backend as a JSON object: found false (id null) when it is not registered and could not
 * be loaded; module null for one built in; why null when there is nothing to say. */
static void json_backend(const char *name) {
    cn_backend_status st;
    if (cn_backend_status_of(name, &st) != CN_OK) return;
    printf("{\"name\":");
    cli_json_string(stdout, name);
    printf(",\"found\":%s,\"id\":", st.id >= 0 ? "true" : "false");
    if (st.id >= 0)
        printf("%d", st.id);
    else
        printf("null");
    printf(",\"devices\":%d,\"module\":", st.devices);
    cli_json_string(stdout, st.module[0] ? st.module : NULL);
    printf(",\"why\":");
    cli_json_string(stdout, st.why[0] ? st.why : NULL);
    printf("}");
}

static void print_json(const char **names, int n) {
    printf("{\"version\":");
    cli_json_string(stdout, cn_version());
    printf(",\"headers_version\":");
    cli_json_string(stdout, CN_VERSION_STRING);
    printf(",\"build\":");
    cli_json_string(stdout, cn_build_config());
    printf(",\"cpu_threads\":%d,\"backends\":[", cn_cpu_threads());
    for (int i = 0; i < n; i++) {
        if (i) printf(",");
        json_backend(names[i]);
    }
    printf("]}\n");
}

static void print_text(const char **names, int n) {
    const char *version = cn_version();
    printf("cinder %s", version);
    if (strcmp(version, CN_VERSION_STRING) != 0) printf(" (headers %s)", CN_VERSION_STRING);
    printf("\nbuild: %s\n", cn_build_config());
    printf("cpu threads: %d\n", cn_cpu_threads());
    printf("backends:\n");
    for (int i = 0; i < n; i++)
        print_backend(names[i]);
}

int cli_info(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_flag(argv[i], CMD, "--json");
        if (r < 0) return CLI_EXIT_USAGE;
        if (r == 0) {
            fprintf(stderr, "cinder info: unknown argument '%s' (see `cinder info --help`)\n",
                    argv[i]);
            return CLI_EXIT_USAGE;
        }
        json = 1;
    }
    /* the known backends first (loading their modules), so that the registry lists them too */
    const char *names[INFO_MAX_BACKEND_ID + 2];
    for (size_t i = 0; i < sizeof known_backends / sizeof *known_backends; i++) {
        cn_backend_status st;
        cn_backend_status_of(known_backends[i], &st);
    }
    int n = backend_names(names, (int)(sizeof names / sizeof *names));
    if (json)
        print_json(names, n);
    else
        print_text(names, n);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "cinder info: cannot write the output\n");
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}
