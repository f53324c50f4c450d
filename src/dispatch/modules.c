/* Backend modules: finding a backend's shared object, checking its ABI, registering its table
 * (include/cinder/backend.h describes the search and the contract).
 *
 * Loads are serialised by one lock, so two threads asking for "cuda" at once load it once. A
 * failed search by name is remembered with its message, so a program that asks for a missing
 * backend on every call does not search the disk each time. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "dispatch/registry.h"

#ifndef CN_MODULE_DIR
#define CN_MODULE_DIR "" /* the install's libdir, given by the build */
#endif
#ifndef CN_MODULE_RELDIR
#define CN_MODULE_RELDIR "lib" /* the same, relative to the install prefix */
#endif

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Names whose search failed, with the message (load_lock held). */
#define FAILED_MAX 8
static struct {
    char name[64];
    char why[1024];
} failed[FAILED_MAX];
static int failed_count;

/* ---- the services a module gets ----------------------------------------------------------------- */

static const cn_backend_host host = {
    .abi_version = CN_BACKEND_ABI_VERSION,
    .set_error = cn_set_error,
    .last_status = cn_last_status,
    .clear_error = cn_clear_error,
    .malloc = cn__malloc,
    .calloc = cn__calloc,
    .free = cn__free,
    .alloc_should_fail = cn__alloc_should_fail,
    .dtype_size = cn_dtype_size,
    .dtype_name = cn_dtype_name,
    .op_name = cn_op_name,
};

/* Registers what init returns (load_lock held). file: where it came from ("" when linked in). */
static int register_module(const char *op, cn_backend_module_init_fn init, const char *file,
                           const char *want_name) {
    const cn_backend_module *m = init(&host);
    if (!m) {
        if (cn_last_status() == CN_OK)
            cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "the backend module %s returned no table from "
                         "cn_backend_module_init; rebuild the module", file[0] ? file : "(linked in)");
        return -1;
    }
    if (m->abi_version != CN_BACKEND_ABI_VERSION) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "the backend module %s was built for backend ABI "
                     "version %d, this libcinder has version %d; rebuild the module against this "
                     "cinder's headers", file[0] ? file : "(linked in)", m->abi_version,
                     CN_BACKEND_ABI_VERSION);
        return -1;
    }
    if (!m->backend || !m->backend->name) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "the backend module %s gave no backend table or "
                     "name; rebuild the module", file[0] ? file : "(linked in)");
        return -1;
    }
    if (want_name && strcmp(m->backend->name, want_name) != 0) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "the module %s registers a backend named '%s', not "
                     "'%s'; rename the file libcinder_%s.so or load it by its path", file,
                     m->backend->name, want_name, m->backend->name);
        return -1;
    }
    cn__backend_extra extra;
    memset(&extra, 0, sizeof extra);
    snprintf(extra.module, sizeof extra.module, "%s", file);
    extra.unavailable_reason = m->unavailable_reason;
    extra.api = m->api;
    return cn__backend_register(op, m->backend, &extra);
}

/* Opens file and registers its backend; -1 with the error set. why/size: dlopen's complaint when
 * the file could not be opened (then no error is set, so that the search can go on), else "". */
static int load_file(const char *op, const char *file, const char *want_name, char *why,
                     size_t size, int *opened) {
    why[0] = '\0';
    *opened = 0;
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (!e) e = "dlopen failed";
        size_t n = strlen(file); /* dlerror repeats the file's name: say it once */
        if (strncmp(e, file, n) == 0 && strncmp(e + n, ": ", 2) == 0) e += n + 2;
        snprintf(why, size, "%s", e);
        return -1;
    }
    *opened = 1;
    cn_backend_module_init_fn init;
    *(void **)&init = dlsym(h, "cn_backend_module_init");
    if (!init) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "%s is not a cinder backend module (it has no "
                     "cn_backend_module_init); check CINDER_BACKEND_PATH", file);
        dlclose(h);
        return -1;
    }
    char *full = realpath(file, NULL); /* NULL for a bare name the loader found */
    int id = register_module(op, init, full ? full : file, want_name);
    free(full); /* realpath's own malloc, not cinder's */
    /* A module whose code is registered stays loaded for the life of the process. */
    if (id < 0) dlclose(h);
    return id;
}

/* Appends "\n  <place>: <why>" to the list of places looked at. */
static void note(char *list, size_t size, const char *place, const char *why) {
    size_t used = strlen(list);
    if (used + 1 < size) snprintf(list + used, size - used, "\n  %s: %s", place, why);
}

/* The directory of the file holding this code, into dir ("" if unknown). */
static void own_directory(char *dir, size_t size) {
    Dl_info info;
    dir[0] = '\0';
    if (dladdr((void *)&cn_backend_load, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        char *full = realpath(info.dli_fname, NULL);
        snprintf(dir, size, "%s", full ? full : info.dli_fname);
        free(full); /* realpath's own malloc, not cinder's */
        *strrchr(dir, '/') = '\0';
    }
}

/* Tries dir/file; returns the id, -1 to go on searching (places updated), -2 on a hard error (a
 * file was found but refused: the error is set). */
static int try_dir(const char *op, const char *dir, const char *file, const char *name,
                   char *places, size_t size) {
    char path[1024], why[512];
    int opened;
    if (!dir[0]) return -1;
    char *full = realpath(dir, NULL); /* "bin/../lib" reads better as "lib" */
    snprintf(path, sizeof path, "%s/%s", full ? full : dir, file);
    free(full); /* realpath's own malloc, not cinder's */
    int id = load_file(op, path, name, why, sizeof why, &opened);
    if (id >= 0) return id;
    if (opened) return -2;
    note(places, size, path, why);
    return -1;
}

static int search(const char *op, const char *name) {
    char file[128], places[1024] = "";
    snprintf(file, sizeof file, "libcinder_%s.so", name);
    int id = -1;

    const char *env = getenv("CINDER_BACKEND_PATH");
    if (env && env[0]) {
        const char *p = env;
        while (id == -1 && *p) {
            const char *colon = strchr(p, ':');
            size_t len = colon ? (size_t)(colon - p) : strlen(p);
            char dir[512];
            snprintf(dir, sizeof dir, "%.*s", (int)(len < sizeof dir ? len : sizeof dir - 1), p);
            id = try_dir(op, dir, file, name, places, sizeof places);
            p = colon ? colon + 1 : p + len;
        }
    }
    char own[512], up[600];
    own_directory(own, sizeof own);
    if (id == -1) id = try_dir(op, own, file, name, places, sizeof places);
    if (id == -1 && own[0]) {
        snprintf(up, sizeof up, "%s/../%s", own, CN_MODULE_RELDIR);
        id = try_dir(op, up, file, name, places, sizeof places);
    }
    if (id == -1 && strcmp(CN_MODULE_DIR, own) != 0)
        id = try_dir(op, CN_MODULE_DIR, file, name, places, sizeof places);
    if (id == -1) {
        char why[512];
        int opened;
        id = load_file(op, file, name, why, sizeof why, &opened);
        if (id < 0 && !opened) {
            note(places, sizeof places, "the dynamic loader's search", why);
            cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "no backend named '%s' is registered and its "
                         "module %s was not found; looked at:%s\n(install the module, set "
                         "CINDER_BACKEND_PATH to its directory, or use the cpu device)", name,
                         file, places);
        }
    }
    return id < 0 ? -1 : id;
}

static int valid_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n >= 48) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int cn__backend_load(const char *op, const char *name) {
    if (!name) {
        cn__null_arg(op, "name");
        return -1;
    }
    int id = cn_backend_find(name);
    if (id >= 0) return id;
    int by_path = strchr(name, '/') != NULL;
    if (!by_path && !valid_name(name)) {
        cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "'%s' is not a backend name (lower-case letters, "
                     "digits, '_' and '-') nor a path to a module; use e.g. 'cpu', 'cuda' or "
                     "'./libcinder_mine.so'", name);
        return -1;
    }
    pthread_mutex_lock(&load_lock);
    id = by_path ? -1 : cn_backend_find(name); /* another thread may have loaded it */
    if (id < 0 && by_path) {
        char why[512];
        int opened;
        id = load_file(op, name, NULL, why, sizeof why, &opened);
        if (id < 0 && !opened)
            cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "cannot load the backend module %s: %s; check "
                         "the path", name, why);
    } else if (id < 0) {
        int f = 0;
        while (f < failed_count && strcmp(failed[f].name, name) != 0) f++;
        if (f < failed_count) {
            cn_set_error(CN_ERR_UNKNOWN_DEVICE, op, "%s", failed[f].why);
        } else {
            id = search(op, name);
            if (id < 0 && failed_count < FAILED_MAX) {
                snprintf(failed[failed_count].name, sizeof failed[0].name, "%s", name);
                /* keep the detail after "<op>: <phrase>: " so the repeat reads the same */
                const char *msg = cn_last_error();
                const char *detail = strstr(msg, ": ");
                detail = detail ? strstr(detail + 2, ": ") : NULL;
                snprintf(failed[failed_count].why, sizeof failed[0].why, "%s",
                         detail ? detail + 2 : msg);
                failed_count++;
            }
        }
    }
    pthread_mutex_unlock(&load_lock);
    return id;
}

int cn_backend_load(const char *name) { return cn__backend_load("backend_load", name); }

int cn_backend_add_module(cn_backend_module_init_fn init) {
    const char *op = "backend_add_module";
    if (!init) {
        cn__null_arg(op, "init");
        return -1;
    }
    pthread_mutex_lock(&load_lock);
    int id = register_module(op, init, "", NULL);
    pthread_mutex_unlock(&load_lock);
    return id;
}

cn_status cn_backend_status_of(const char *name, cn_backend_status *out) {
    const char *op = "backend_status_of";
    if (!name || !out) {
        cn__null_arg(op, !name ? "name" : "out");
        return CN_ERR_NULL_ARG;
    }
    memset(out, 0, sizeof *out);
    cn__saved_error saved;
    cn__error_save(&saved);
    int id = cn__backend_load(op, name);
    out->id = id;
    if (id < 0) {
        /* a failed load is an answer here, not an error of this call */
        snprintf(out->why, sizeof out->why, "%s", cn_last_error());
        cn__error_restore(&saved);
        return CN_OK;
    }
    const cn__backend_extra *x = cn__backend_extra_of(id);
    out->devices = cn__backend_devices(id);
    snprintf(out->module, sizeof out->module, "%s", x->module);
    if (out->devices == 0 && x->unavailable_reason) {
        const char *why = x->unavailable_reason();
        snprintf(out->why, sizeof out->why, "%s", why ? why : "");
    }
    return CN_OK;
}
