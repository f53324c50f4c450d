/* Defining extension ops: schema validation and a deep copy that lives for the process. */
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "dispatch/registry.h"
#include "extension/extension_internal.h"

#define MAX_EXT_OPS 256

static cn_ext_op *ops[MAX_EXT_OPS];
static int op_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

const cn_ext_op *cn_ext_find(const char *name) {
    if (!name) return NULL;
    pthread_mutex_lock(&lock);
    const cn_ext_op *found = NULL;
    for (int i = 0; i < op_count && !found; i++)
        if (strcmp(ops[i]->schema.name, name) == 0) found = ops[i];
    pthread_mutex_unlock(&lock);
    return found;
}

/* ---- validation ---------------------------------------------------------------------------- */

static cn_status bad_schema(const char *name, const char *why) {
    return cn_set_error(CN_ERR_INVALID_ARG, "ext_define", "schema of '%s' is malformed: %s; fix "
                        "the schema (or the op's declaration for cinder-extgen)",
                        name ? name : "(unnamed)", why);
}

static cn_status validate(const cn_ext_schema *s) {
    if (!s->name || !s->name[0]) return bad_schema(NULL, "it has no name");
    if (s->n_outputs < 1) return bad_schema(s->name, "it has no outputs (an op needs at least one)");
    if (!s->shape) return bad_schema(s->name, "it has no shape function");
    if (s->n_tensors < 0 || s->n_groups < 0 || s->n_ints < 0 || s->n_reals < 0)
        return bad_schema(s->name, "a count is negative");
    if ((s->n_tensors && !s->tensors) || (s->n_groups && !s->groups) ||
        (s->n_ints && !s->int_names) || (s->n_reals && !s->real_names) || !s->output_names)
        return bad_schema(s->name, "an array is NULL while its count is not zero");
    for (int g = 0; g < s->n_groups; g++) {
        const cn_ext_group *gr = &s->groups[g];
        if (!gr->name) return bad_schema(s->name, "a composite input has no name");
        if (gr->kind != CN_EXT_STRUCT && gr->kind != CN_EXT_UNION)
            return bad_schema(s->name, "a composite is neither a struct nor a union");
        if (gr->kind == CN_EXT_UNION && (gr->n_variants < 1 || !gr->variant_names))
            return bad_schema(s->name, "a union has no variants");
    }
    for (int i = 0; i < s->n_tensors; i++) {
        const cn_ext_tensor_arg *t = &s->tensors[i];
        if (!t->name) return bad_schema(s->name, "a tensor input has no name");
        if (t->kind != CN_KIND_FLOAT && t->kind != CN_KIND_INT && t->kind != CN_KIND_BOOL &&
            t->kind != CN_KIND_QUANTIZED)
            return bad_schema(s->name, "a tensor input's kind is not float, int, bool or "
                              "quantized");
        if (t->group < -1 || t->group >= s->n_groups)
            return bad_schema(s->name, "a tensor input names a composite that does not exist");
        if (t->group >= 0 && s->groups[t->group].kind == CN_EXT_UNION &&
            (t->variant < 0 || t->variant >= s->groups[t->group].n_variants))
            return bad_schema(s->name, "a union member names a variant that does not exist");
    }
    return CN_OK;
}

/* ---- deep copy ----------------------------------------------------------------------------- */

static char *copy_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = cn__malloc("ext_define", n);
    if (c) memcpy(c, s, n);
    return c;
}

/* Copies n strings; NULL on failure (what was copied is freed). */
static const char *const *copy_strs(const char *const *src, int n) {
    if (n == 0) return NULL;
    char **dst = cn__calloc("ext_define", (size_t)n, sizeof *dst);
    for (int i = 0; dst && i < n; i++) {
        dst[i] = copy_str(src[i] ? src[i] : "");
        if (!dst[i]) {
            for (int j = 0; j < i; j++) cn__free(dst[j]);
            cn__free(dst);
            dst = NULL;
        }
    }
    return (const char *const *)dst;
}

static void free_strs(const char *const *s, int n) {
    for (int i = 0; s && i < n; i++) cn__free((void *)s[i]);
    cn__free((void *)s);
}

static void free_op(cn_ext_op *op) {
    cn_ext_schema *s = &op->schema;
    for (int i = 0; s->tensors && i < s->n_tensors; i++) cn__free((void *)s->tensors[i].name);
    cn__free((void *)s->tensors);
    for (int g = 0; s->groups && g < s->n_groups; g++) {
        cn__free((void *)s->groups[g].name);
        free_strs(s->groups[g].variant_names, s->groups[g].n_variants);
    }
    cn__free((void *)s->groups);
    free_strs(s->int_names, s->n_ints);
    free_strs(s->real_names, s->n_reals);
    free_strs(s->output_names, s->n_outputs);
    cn__free((void *)s->name);
    cn__free(op);
}

static cn_ext_op *copy_op(const cn_ext_schema *src) {
    cn_ext_op *op = cn__calloc("ext_define", 1, sizeof *op);
    if (!op) return NULL;
    cn_ext_schema *s = &op->schema;
    *s = *src;
    s->name = NULL;
    s->tensors = NULL;
    s->groups = NULL;
    s->int_names = s->real_names = s->output_names = NULL;
    int ok = (s->name = copy_str(src->name)) != NULL;
    if (ok && src->n_tensors) {
        cn_ext_tensor_arg *t = cn__calloc("ext_define", (size_t)src->n_tensors, sizeof *t);
        s->tensors = t;
        for (int i = 0; t && i < src->n_tensors && ok; i++) {
            t[i] = src->tensors[i];
            ok = (t[i].name = copy_str(src->tensors[i].name)) != NULL;
        }
        ok = ok && t;
    }
    if (ok && src->n_groups) {
        cn_ext_group *g = cn__calloc("ext_define", (size_t)src->n_groups, sizeof *g);
        s->groups = g;
        for (int i = 0; g && i < src->n_groups && ok; i++) {
            g[i] = src->groups[i];
            g[i].variant_names = NULL;
            ok = (g[i].name = copy_str(src->groups[i].name)) != NULL;
            if (ok && g[i].kind == CN_EXT_UNION)
                ok = (g[i].variant_names = copy_strs(src->groups[i].variant_names,
                                                     src->groups[i].n_variants)) != NULL;
        }
        ok = ok && g;
    }
    if (ok && src->n_ints) ok = (s->int_names = copy_strs(src->int_names, src->n_ints)) != NULL;
    if (ok && src->n_reals)
        ok = (s->real_names = copy_strs(src->real_names, src->n_reals)) != NULL;
    if (ok) ok = (s->output_names = copy_strs(src->output_names, src->n_outputs)) != NULL;
    if (!ok) {
        free_op(op);
        return NULL;
    }
    return op;
}

const cn_ext_op *cn_ext_define(const cn_ext_schema *schema) {
    if (!schema) {
        cn__null_arg("ext_define", "schema");
        return NULL;
    }
    if (validate(schema) != CN_OK) return NULL;
    cn_ext_op *op = copy_op(schema);
    if (!op) return NULL;
    pthread_mutex_lock(&lock);
    const char *why = NULL;
    for (int i = 0; i < op_count && !why; i++)
        if (strcmp(ops[i]->schema.name, schema->name) == 0) why = "the name is taken";
    if (!why && op_count == MAX_EXT_OPS) why = "the extension registry is full";
    if (!why) ops[op_count++] = op;
    pthread_mutex_unlock(&lock);
    if (why) {
        cn_set_error(CN_ERR_INVALID_ARG, "ext_define", "cannot define '%s': %s; look it up with "
                     "cn_ext_find or choose another name", schema->name, why);
        free_op(op);
        return NULL;
    }
    return op;
}

/* Under the lock: moves the pending kernel of backend id (named name) into place. */
static void attach_locked(cn_ext_op *o, int id, const char *name) {
    for (int i = 0; i < o->n_pending; i++) {
        if (strcmp(o->pending[i].backend, name) != 0) continue;
        if (!o->kernels[id]) o->kernels[id] = o->pending[i].kernel;
        o->pending[i] = o->pending[--o->n_pending];
        return;
    }
}

/* The op argument of a registration may come from a failed cn_ext_define or cn_ext_find: a NULL
 * there keeps the earlier error, as chained calls do. A NULL function or backend name is the
 * caller's own mistake and always gets a message of its own. */
cn_status cn_ext_register_kernel(const cn_ext_op *op, const char *backend, cn_kernel_fn kernel) {
    const char *name = "ext_register_kernel";
    if (!op) {
        cn__null_arg(name, "op");
        return cn_last_status();
    }
    const char *op_name = op->schema.name;
    if (!backend)
        return cn_set_error(CN_ERR_NULL_ARG, name, "argument 'backend' is NULL for op '%s'; pass "
                            "the backend's name, e.g. \"cpu\"", op_name);
    if (!kernel)
        return cn_set_error(CN_ERR_NULL_ARG, name, "argument 'kernel' is NULL for op '%s' on "
                            "backend '%s'; pass the kernel function", op_name, backend);
    size_t len = strlen(backend);
    if (len == 0 || len >= sizeof op->pending[0].backend)
        return cn_set_error(CN_ERR_INVALID_ARG, name, "backend name '%s' for op '%s' is empty or "
                            "longer than %d characters; pass a backend's name, e.g. \"cpu\"",
                            backend, op_name, (int)sizeof op->pending[0].backend - 1);
    cn_ext_op *o = (cn_ext_op *)op;
    /* a backend not registered yet (a module not loaded yet) keeps the kernel by name: loading
     * a GPU module here would cost every program that never uses a GPU */
    int id = cn_backend_find(backend);
    cn_kernel_fn had = NULL;
    int full = 0;
    pthread_mutex_lock(&lock);
    if (id >= 0) {
        attach_locked(o, id, backend);
        had = o->kernels[id];
        if (!had) o->kernels[id] = kernel;
    } else {
        int i = 0;
        while (i < o->n_pending && strcmp(o->pending[i].backend, backend) != 0) i++;
        if (i < o->n_pending) {
            had = o->pending[i].kernel;
        } else if (o->n_pending == CN_EXT_MAX_PENDING) {
            full = 1;
        } else {
            memcpy(o->pending[i].backend, backend, len + 1);
            o->pending[i].kernel = kernel;
            o->n_pending++;
        }
    }
    pthread_mutex_unlock(&lock);
    if (full)
        return cn_set_error(CN_ERR_INVALID_ARG, name, "op '%s' already has kernels for %d "
                            "backends that are not registered yet; register the kernel of '%s' "
                            "once that backend is (cn_backend_load)", op_name, CN_EXT_MAX_PENDING,
                            backend);
    if (had && had != kernel)
        return cn_set_error(CN_ERR_INVALID_ARG, name, "op '%s' already has a kernel for backend "
                            "'%s', which stays registered; register each backend's kernel once "
                            "(a second, different one is refused rather than replacing it), or "
                            "define an op of another name for the other kernel", op_name,
                            backend);
    return CN_OK;
}

cn_kernel_fn cn__ext_kernel(const cn_ext_op *op, int id) {
    if (id < 0 || id >= CN_MAX_BACKENDS) return NULL;
    cn_kernel_fn k = op->kernels[id];
    if (k || op->n_pending == 0) return k; /* read unlocked: a stale count only costs the lock */
    const cn_backend *b = cn_backend_get(id);
    if (!b) return NULL;
    cn_ext_op *o = (cn_ext_op *)op;
    pthread_mutex_lock(&lock);
    attach_locked(o, id, b->name);
    k = o->kernels[id];
    pthread_mutex_unlock(&lock);
    return k;
}

int cn_ext_has_kernel(const cn_ext_op *op, cn_device device) {
    return op && cn__ext_kernel(op, device.backend) != NULL;
}

cn_status cn_ext_register_backward(const cn_ext_op *op, cn_ext_backward_fn backward) {
    const char *name = "ext_register_backward";
    if (!op) {
        cn__null_arg(name, "op");
        return cn_last_status();
    }
    const char *op_name = op->schema.name;
    if (!backward)
        return cn_set_error(CN_ERR_NULL_ARG, name, "argument 'backward' is NULL for op '%s'; pass "
                            "the backward function (an op without one is concrete-only: simply "
                            "do not register it)", op_name);
    if (op->schema.flags & CN_EXT_NON_DIFFERENTIABLE)
        return cn_set_error(CN_ERR_INVALID_ARG, name, "op '%s' is declared non-differentiable "
                            "(CN_EXT_NON_DIFFERENTIABLE), so its backward would never run; drop "
                            "the flag from its schema to make it differentiable, or do not "
                            "register a backward", op_name);
    pthread_mutex_lock(&lock);
    cn_ext_backward_fn had = ((cn_ext_op *)op)->backward;
    if (!had) ((cn_ext_op *)op)->backward = backward;
    pthread_mutex_unlock(&lock);
    if (had && had != backward)
        return cn_set_error(CN_ERR_INVALID_ARG, name, "op '%s' already has a backward, which "
                            "stays registered; register it once (a second, different one is "
                            "refused rather than replacing it)", op_name);
    return CN_OK;
}
