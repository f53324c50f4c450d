/* Modules: a vtable, a private state, named parameters and buffers, and named children. The
 * forward wrapper runs each forward in its own scope; the flattened parameter list names nested
 * entries "<child>.<name>" as PyTorch's state_dict does. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/tensor_impl.h"
#include "nn/nn_internal.h"

/* ---- helpers shared by the nn files ---------------------------------------------------------- */

cn_tensor *nn_unscoped(cn_tensor *t) {
    if (t) cn__scope_forget(t);
    return t;
}

cn_status nn_check_float_dtype(const char *op, cn_dtype dtype) {
    if (dtype >= 0 && dtype < CN_DTYPE_COUNT && cn_dtype_kind(dtype) == CN_KIND_FLOAT) return CN_OK;
    return cn_set_error(CN_ERR_DTYPE, op,
                        "dtype %s is not a float dtype; parameters are floats "
                        "(CN_F32 usually)",
                        cn_dtype_name(dtype));
}

cn_status nn_check_positive(const char *op, const char *arg, int64_t size) {
    if (size >= 1) return CN_OK;
    return cn_set_error(CN_ERR_INVALID_ARG, op, "%s = %lld; it must be at least 1", arg,
                        (long long)size);
}

cn_tensor *nn_grad_or_null(const cn_grads *grads, cn_tensor *t) {
    return cn_grad_find(grads, t);
}

cn_module *nn_with_param(cn_module *m, const char *name, cn_tensor *t) {
    if (!m) {
        cn_release(nn_unscoped(t));
        return NULL;
    }
    if (cn_module_add_param(m, name, t) != CN_OK) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

cn_module *nn_with_buffer(cn_module *m, const char *name, cn_tensor *t) {
    if (!m) {
        cn_release(nn_unscoped(t));
        return NULL;
    }
    if (cn_module_add_buffer(m, name, t) != CN_OK) {
        cn_module_free(m);
        return NULL;
    }
    return m;
}

static char *copy_string(const char *op, const char *s) {
    size_t n = strlen(s) + 1;
    char *c = cn__malloc(op, n);
    if (c) memcpy(c, s, n);
    return c;
}

/* ---- creation and registration --------------------------------------------------------------- */

cn_module *cn_module_new(const cn_module_vtable *vt, void *state) {
    const char *op = "module_new";
    if (!vt || !vt->forward) {
        if (vt && vt->free_state) vt->free_state(state);
        if (!vt)
            cn__null_arg(op, "vt");
        else
            cn_set_error(CN_ERR_NULL_ARG, op,
                         "the vtable of '%s' has no forward; every module "
                         "kind needs one",
                         vt->kind ? vt->kind : "(unnamed)");
        return NULL;
    }
    cn_module *m = cn__calloc(op, 1, sizeof *m);
    if (!m) {
        if (vt->free_state) vt->free_state(state);
        return NULL;
    }
    m->vt = vt;
    m->state = state;
    m->training = 1;
    return m;
}

/* A name must be non-empty, have no '.', and be new among m's parameters, buffers and children. */
static cn_status check_name(const char *op, const cn_module *m, const char *name) {
    if (!name || !*name || strchr(name, '.'))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "name '%s' is not allowed; give a non-empty "
                            "name without '.' (dots join the names of nested modules)",
                            name ? name : "(NULL)");
    int taken = 0;
    for (int i = 0; i < m->params.count && !taken; i++)
        taken = !strcmp(m->params.items[i].name, name);
    for (int i = 0; i < m->buffers.count && !taken; i++)
        taken = !strcmp(m->buffers.items[i].name, name);
    for (int i = 0; i < m->n_children && !taken; i++)
        taken = !strcmp(m->children[i].name, name);
    if (taken)
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "the %s already has a parameter, buffer or "
                            "child called '%s'; give each a name of its own",
                            m->vt->kind ? m->vt->kind : "module", name);
    return CN_OK;
}

static cn_status list_add(const char *op, cn_module *m, nn_list *l, const char *name,
                          cn_tensor *t) {
    nn_unscoped(t); /* the module owns the caller's reference from now on */
    if (!m || !t) {
        cn__null_arg(op, !m ? "m" : "t");
        cn_release(t);
        return cn_last_status();
    }
    if (check_name(op, m, name) != CN_OK) {
        cn_release(t);
        return cn_last_status();
    }
    if (l->count == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        nn_named *items = cn__malloc(op, sizeof *items * (size_t)cap);
        if (!items) {
            cn_release(t);
            return CN_ERR_OUT_OF_MEMORY;
        }
        if (l->count) memcpy(items, l->items, sizeof *items * (size_t)l->count);
        cn__free(l->items);
        l->items = items;
        l->cap = cap;
    }
    char *copy = copy_string(op, name);
    if (!copy) {
        cn_release(t);
        return CN_ERR_OUT_OF_MEMORY;
    }
    l->items[l->count].name = copy;
    l->items[l->count++].tensor = t;
    return CN_OK;
}

cn_status cn_module_add_param(cn_module *m, const char *name, cn_tensor *t) {
    const char *op = "module_add_param";
    if (m && t && cn_device_of(t).autodiff && !cn_requires_grad(t)) {
        /* on an autodiff device a parameter that is not a tracked leaf would never train, with
         * every call returning OK; one on a concrete device is an inference model's */
        char buf[128];
        nn_unscoped(t);
        cn_set_error(CN_ERR_INVALID_ARG, op, "'%s' is %s on an autodiff device but does not "
                     "require grad, so it would never train; call cn_require_grad on it first, "
                     "or register it with cn_module_add_buffer if it is state that is not "
                     "trained (a frozen weight, running statistics)",
                     name ? name : "(null)", cn_tensor_str(t, buf, sizeof buf));
        cn_release(t);
        return CN_ERR_INVALID_ARG;
    }
    return list_add(op, m, m ? &m->params : NULL, name, t);
}

cn_status cn_module_add_buffer(cn_module *m, const char *name, cn_tensor *t) {
    return list_add("module_add_buffer", m, m ? &m->buffers : NULL, name, t);
}

cn_status cn_module_add_child(cn_module *m, const char *name, cn_module *child) {
    const char *op = "module_add_child";
    if (!m || !child) {
        cn__null_arg(op, !m ? "m" : "child");
        cn_module_free(child);
        return cn_last_status();
    }
    if (child == m) {
        cn_module_free(child); /* never reached for a valid tree; keeps the ownership rule */
        return cn_set_error(CN_ERR_INVALID_ARG, op, "a module cannot be its own child");
    }
    if (check_name(op, m, name) != CN_OK) {
        cn_module_free(child);
        return cn_last_status();
    }
    if (m->n_children == m->cap_children) {
        int cap = m->cap_children ? m->cap_children * 2 : 4;
        nn_child *items = cn__malloc(op, sizeof *items * (size_t)cap);
        if (!items) {
            cn_module_free(child);
            return CN_ERR_OUT_OF_MEMORY;
        }
        if (m->n_children) memcpy(items, m->children, sizeof *items * (size_t)m->n_children);
        cn__free(m->children);
        m->children = items;
        m->cap_children = cap;
    }
    char *copy = copy_string(op, name);
    if (!copy) {
        cn_module_free(child);
        return CN_ERR_OUT_OF_MEMORY;
    }
    m->children[m->n_children].name = copy;
    m->children[m->n_children++].module = child;
    return CN_OK;
}

void *cn_module_state(const cn_module *m) { return m ? m->state : NULL; }

const char *cn_module_kind(const cn_module *m) { return m && m->vt->kind ? m->vt->kind : "module"; }

int cn_module_child_count(const cn_module *m) { return m ? m->n_children : 0; }

cn_module *cn_module_child_named(const cn_module *m, const char *path) {
    const char *op = "module_child_named";
    if (!m || !path) {
        cn__null_arg(op, !m ? "m" : "path");
        return NULL;
    }
    const cn_module *at = m;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        const cn_module *next = NULL;
        for (int i = 0; i < at->n_children && !next; i++)
            if (strlen(at->children[i].name) == len && memcmp(at->children[i].name, p, len) == 0)
                next = at->children[i].module;
        if (!next) {
            char names[160] = "";
            size_t used = 0;
            for (int i = 0; i < at->n_children && used + 1 < sizeof names; i++) {
                int w = snprintf(names + used, sizeof names - used, "%s'%s'", i ? ", " : "",
                                 at->children[i].name);
                if (w < 0) break;
                used += (size_t)w;
            }
            cn_set_error(CN_ERR_INVALID_ARG, op, "'%s': the %s at '%.*s' has no child '%.*s'; "
                         "its children are %s", path, cn_module_kind(at), (int)(p - path),
                         path, (int)len, p, at->n_children ? names : "none");
            return NULL;
        }
        at = next;
        if (!dot) return (cn_module *)at;
        p = dot + 1;
    }
}

cn_module *cn_module_child(const cn_module *m, int i) {
    if (!m) {
        cn__null_arg("module_child", "m");
        return NULL;
    }
    if (i < 0 || i >= m->n_children) {
        cn_set_error(CN_ERR_INVALID_ARG, "module_child",
                     "child %d of a %s with %d children; "
                     "use 0 .. cn_module_child_count(m) - 1",
                     i, cn_module_kind(m), m->n_children);
        return NULL;
    }
    return m->children[i].module;
}

/* ---- forward --------------------------------------------------------------------------------- */

cn_tensor *cn_module_forward(cn_module *m, cn_tensor *x) {
    const char *op = "module_forward";
    if (!m || !x) {
        cn__null_arg(op, !m ? "m" : "x");
        return NULL;
    }
    if (cn_scope_begin() != CN_OK) return NULL;
    cn_tensor *y = m->vt->forward(m, x);
    if (y == x) /* an identity must still hand out a reference of its own */
        y = cn_reshape(x, cn_shape(x), cn_ndim(x));
    if (!y && cn_last_status() == CN_OK)
        cn_set_error(CN_ERR_BACKEND, op,
                     "the forward of '%s' returned NULL without setting an "
                     "error; a forward must report why it failed with cn_set_error",
                     cn_module_kind(m));
    cn_keep(y);
    cn_scope_end();
    return y;
}

/* ---- flattened parameters and buffers -------------------------------------------------------- */

static void flat_clear(nn_flat *f) {
    for (int i = 0; i < f->count; i++)
        cn__free((char *)f->items[i].name);
    cn__free(f->items);
    f->items = NULL;
    f->count = 0;
}

static int count_entries(const cn_module *m, int buffers) {
    int n = buffers ? m->buffers.count : m->params.count;
    for (int i = 0; i < m->n_children; i++)
        n += count_entries(m->children[i].module, buffers);
    return n;
}

/* Appends m's entries (prefixed) and its children's to f->items; f->count entries are filled. */
static cn_status flatten(const char *op, const cn_module *m, const char *prefix, int buffers,
                         nn_flat *f) {
    const nn_list *l = buffers ? &m->buffers : &m->params;
    size_t plen = strlen(prefix);
    for (int i = 0; i < l->count; i++) {
        size_t len = plen + strlen(l->items[i].name) + 1;
        char *name = cn__malloc(op, len);
        if (!name) return CN_ERR_OUT_OF_MEMORY;
        snprintf(name, len, "%s%s", prefix, l->items[i].name);
        f->items[f->count].name = name;
        f->items[f->count++].tensor = l->items[i].tensor;
    }
    for (int i = 0; i < m->n_children; i++) {
        size_t len = plen + strlen(m->children[i].name) + 2;
        char *sub = cn__malloc(op, len);
        if (!sub) return CN_ERR_OUT_OF_MEMORY;
        snprintf(sub, len, "%s%s.", prefix, m->children[i].name);
        cn_status s = flatten(op, m->children[i].module, sub, buffers, f);
        cn__free(sub);
        if (s != CN_OK) return s;
    }
    return CN_OK;
}

static const cn_param *flat_entries(const char *op, cn_module *m, int buffers, int *count) {
    if (count) *count = 0;
    if (!m) {
        cn__null_arg(op, "m");
        return NULL;
    }
    nn_flat *f = buffers ? &m->flat_buffers : &m->flat_params;
    flat_clear(f);
    int n = count_entries(m, buffers);
    f->items = cn__calloc(op, (size_t)(n ? n : 1), sizeof *f->items);
    if (!f->items) return NULL;
    if (flatten(op, m, "", buffers, f) != CN_OK) {
        flat_clear(f);
        return NULL;
    }
    if (count) *count = f->count;
    return f->items;
}

const cn_param *cn_module_params(cn_module *m, int *count) {
    return flat_entries("module_params", m, 0, count);
}

const cn_param *cn_module_buffers(cn_module *m, int *count) {
    return flat_entries("module_buffers", m, 1, count);
}

/* Looks `name` up without building the flat list: the first component picks a child. */
static cn_tensor *find_in(const cn_module *m, const char *name) {
    const char *dot = strchr(name, '.');
    if (!dot) {
        for (int i = 0; i < m->params.count; i++)
            if (!strcmp(m->params.items[i].name, name)) return m->params.items[i].tensor;
        for (int i = 0; i < m->buffers.count; i++)
            if (!strcmp(m->buffers.items[i].name, name)) return m->buffers.items[i].tensor;
        return NULL;
    }
    size_t len = (size_t)(dot - name);
    for (int i = 0; i < m->n_children; i++)
        if (strlen(m->children[i].name) == len && !strncmp(m->children[i].name, name, len))
            return find_in(m->children[i].module, dot + 1);
    return NULL;
}

cn_tensor *cn_module_find(cn_module *m, const char *name) {
    const char *op = "module_find";
    if (!m || !name) {
        cn__null_arg(op, !m ? "m" : "name");
        return NULL;
    }
    cn_tensor *t = find_in(m, name);
    if (!t)
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "the %s has no parameter or buffer '%s'; list them "
                     "with cn_module_params and cn_module_buffers",
                     cn_module_kind(m), name);
    return t;
}

/* ---- mode and lifetime ----------------------------------------------------------------------- */

void cn_module_train(cn_module *m, int on) {
    if (!m) return;
    m->training = on != 0;
    if (m->vt->set_training) m->vt->set_training(m, m->training);
    for (int i = 0; i < m->n_children; i++)
        cn_module_train(m->children[i].module, on);
}

int cn_module_is_training(const cn_module *m) { return m ? m->training : 0; }

static void list_free(nn_list *l) {
    for (int i = 0; i < l->count; i++) {
        cn__free(l->items[i].name);
        cn_release(l->items[i].tensor);
    }
    cn__free(l->items);
}

void cn_module_free(cn_module *m) {
    if (!m) return;
    for (int i = 0; i < m->n_children; i++) {
        cn__free(m->children[i].name);
        cn_module_free(m->children[i].module);
    }
    cn__free(m->children);
    list_free(&m->params);
    list_free(&m->buffers);
    flat_clear(&m->flat_params);
    flat_clear(&m->flat_buffers);
    if (m->vt->free_state) m->vt->free_state(m->state);
    cn__free(m);
}
