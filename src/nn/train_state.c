/* A whole training state in one safetensors file (nn.h): the model's parameters and buffers under
 * their own names, the optimizer's state under "optimizer.", the caller's extra tensors, and
 * string metadata with the layout's version. Restoring checks the whole file against the model
 * and the optimizer before it writes either. */
#include <stdio.h>
#include <string.h>

#include "cinder/io.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "nn/nn_internal.h"

#define STATE_KEY     "cinder.train_state"
#define STATE_VERSION "1"
#define OPT_PREFIX    "optimizer."

/* ---- saving ---------------------------------------------------------------------------------- */

cn_status cn_train_state_save(const char *path, cn_module *model, cn_optimizer *opt,
                              const cn_param *extra, int n_extra, const char *const *keys,
                              const char *const *values, int n_meta) {
    const char *op = "train_state_save";
    if (!path || !model || (n_extra > 0 && !extra) || (n_meta > 0 && (!keys || !values))) {
        cn__null_arg(op, !path                     ? "path"
                         : !model                  ? "model"
                         : (n_extra > 0 && !extra) ? "extra"
                         : !keys                   ? "keys"
                                                   : "values");
        return cn_last_status();
    }
    if (n_extra < 0 || n_meta < 0)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "%s = %d; it must be >= 0",
                            n_extra < 0 ? "n_extra" : "n_meta", n_extra < 0 ? n_extra : n_meta);
    for (int i = 0; i < n_meta; i++)
        if (keys[i] && !strcmp(keys[i], STATE_KEY))
            return cn_set_error(CN_ERR_INVALID_ARG, op,
                                "keys[%d] is \"" STATE_KEY "\", which the save writes itself (the "
                                "layout's version); use another key",
                                i);
    int np = 0, nb = 0, ns = 0;
    const cn_param *params = cn_module_params(model, &np);
    const cn_param *buffers = params ? cn_module_buffers(model, &nb) : NULL;
    if (!params || !buffers) return cn_last_status();
    const cn_param *state = opt ? cn_optimizer_state(opt, &ns) : NULL;
    if (opt && !state) return cn_last_status();
    int n = np + nb + ns + n_extra;
    const char **names = cn__calloc(op, (size_t)n + 1, sizeof *names);
    char **owned = cn__calloc(op, (size_t)ns + 1, sizeof *owned); /* "optimizer.<name>" */
    cn_tensor **tensors = cn__calloc(op, (size_t)n + 1, sizeof *tensors);
    const char **mkeys = cn__calloc(op, (size_t)n_meta + 1, sizeof *mkeys);
    const char **mvalues = cn__calloc(op, (size_t)n_meta + 1, sizeof *mvalues);
    cn_status s = names && owned && tensors && mkeys && mvalues ? CN_OK : CN_ERR_OUT_OF_MEMORY;
    int k = 0;
    for (int i = 0; i < np && !s; i++, k++) {
        names[k] = params[i].name;
        tensors[k] = params[i].tensor;
    }
    for (int i = 0; i < nb && !s; i++, k++) {
        names[k] = buffers[i].name;
        tensors[k] = buffers[i].tensor;
    }
    for (int i = 0; i < ns && !s; i++, k++) {
        size_t len = strlen(state[i].name);
        if (!(owned[i] = cn__malloc(op, sizeof OPT_PREFIX + len))) {
            s = CN_ERR_OUT_OF_MEMORY;
            break;
        }
        memcpy(owned[i], OPT_PREFIX, sizeof OPT_PREFIX - 1);
        memcpy(owned[i] + sizeof OPT_PREFIX - 1, state[i].name, len + 1);
        names[k] = owned[i];
        tensors[k] = state[i].tensor;
    }
    for (int i = 0; i < n_extra && !s; i++, k++) {
        names[k] = extra[i].name;
        tensors[k] = extra[i].tensor;
    }
    if (!s) {
        mkeys[0] = STATE_KEY;
        mvalues[0] = STATE_VERSION;
        for (int i = 0; i < n_meta; i++) {
            mkeys[i + 1] = keys[i];
            mvalues[i + 1] = values[i];
        }
        s = cn_safetensors_save_metadata(path, names, tensors, n, mkeys, mvalues, n_meta + 1);
    }
    for (int i = 0; owned && i < ns; i++)
        cn__free(owned[i]);
    cn__free(owned);
    cn__free(names);
    cn__free(tensors);
    cn__free(mkeys);
    cn__free(mvalues);
    return s;
}

/* ---- restoring ------------------------------------------------------------------------------- */

/* h's tensor for the module tensor p, checked against it and viewed on p's device; NULL with
 * the error set. The result belongs to the open scope. */
static cn_tensor *module_source(const char *op, const cn_safetensors *h, const cn_param *p,
                                const char *what) {
    char want[128], got[128];
    cn_tensor *t = cn_safetensors_get(h, p->name);
    if (!t && cn_last_status() == CN_ERR_INVALID_ARG) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "the training state has no tensor '%s', a %s of the model; it was saved "
                     "from another model: restore it into the model that saved it",
                     p->name, what);
        return NULL;
    }
    if (!t) return NULL;
    cn_tensor_str(p->tensor, want, sizeof want);
    cn_tensor_str(t, got, sizeof got);
    if (cn_dtype_of(t) != cn_dtype_of(p->tensor)) {
        cn_set_error(CN_ERR_DTYPE, op,
                     "the training state's '%s' is %s but the model's %s is %s; restore it into "
                     "a model of the same dtype",
                     p->name, got, what, want);
        return NULL;
    }
    if (cn_ndim(t) != cn_ndim(p->tensor) ||
        memcmp(cn_shape(t), cn_shape(p->tensor), sizeof(int64_t) * (size_t)cn_ndim(t)) != 0) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "the training state's '%s' is %s but the model's %s is %s; it was saved "
                     "from a model of other sizes: build the model with the sizes that saved it",
                     p->name, got, what, want);
        return NULL;
    }
    return cn_to_device(t, cn_device_of(p->tensor));
}

static cn_status check_version(const char *op, const cn_safetensors *h) {
    const char *v = cn_safetensors_metadata(h, STATE_KEY);
    if (!v)
        return cn_set_error(CN_ERR_IO, op,
                            "the checkpoint has no metadata '" STATE_KEY "', so it is not a "
                            "training state (cn_train_state_save writes one); a model-only "
                            "checkpoint loads with cn_safetensors_load_into");
    if (strcmp(v, STATE_VERSION) != 0)
        return cn_set_error(CN_ERR_IO, op,
                            "the training state is of layout version '%s', and this cinder reads "
                            "version " STATE_VERSION "; restore it with the cinder that wrote it",
                            v);
    return CN_OK;
}

/* The optimizer's entries of h ("optimizer.<name>" as "<name>") into *out (count *n), their
 * tensors owned by the open scope; the array is the caller's (cn__free). */
static cn_status optimizer_entries(const char *op, const cn_safetensors *h, cn_param **out,
                                   int *n) {
    int count = cn_safetensors_count(h), k = 0;
    cn_param *e = cn__calloc(op, (size_t)count + 1, sizeof *e);
    if (!e) return CN_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < count; i++) {
        const char *name = cn_safetensors_name(h, i);
        if (strncmp(name, OPT_PREFIX, sizeof OPT_PREFIX - 1) != 0) continue;
        if (!(e[k].tensor = cn_safetensors_get(h, name))) {
            cn__free(e);
            return cn_last_status();
        }
        e[k++].name = name + sizeof OPT_PREFIX - 1;
    }
    *out = e;
    *n = k;
    return CN_OK;
}

cn_status cn_train_state_restore(const cn_safetensors *h, cn_module *model, cn_optimizer *opt) {
    const char *op = "train_state_restore";
    if (!h || !model) {
        cn__null_arg(op, !h ? "h" : "model");
        return cn_last_status();
    }
    cn_status s = check_version(op, h);
    if (s != CN_OK) return s;
    int np = 0, nb = 0;
    const cn_param *params = cn_module_params(model, &np);
    const cn_param *buffers = params ? cn_module_buffers(model, &nb) : NULL;
    if (!params || !buffers) return cn_last_status();
    if ((s = cn_scope_begin()) != CN_OK) return s;
    cn_tensor **src = cn__calloc(op, (size_t)(np + nb) + 1, sizeof *src);
    cn_param *entries = NULL;
    int n_entries = 0;
    if (!src) s = CN_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < np + nb && !s; i++) {
        const cn_param *p = i < np ? &params[i] : &buffers[i - np];
        if (!(src[i] = module_source(op, h, p, i < np ? "parameter" : "buffer")))
            s = cn_last_status();
    }
    if (!s && opt) s = optimizer_entries(op, h, &entries, &n_entries);
    /* the optimizer checks its whole state before it replaces any of it */
    if (!s && opt) s = cn_optimizer_load_state(opt, entries, n_entries);
    /* copies between tensors checked to match, on one device, under no-grad: they allocate
     * nothing, so once the optimizer has its state the model gets its values */
    cn_no_grad_begin();
    for (int i = 0; i < np + nb && !s; i++)
        s = cn_copy_(i < np ? params[i].tensor : buffers[i - np].tensor, src[i]);
    cn_no_grad_end();
    cn__free(entries);
    cn__free(src);
    cn_scope_end();
    return s;
}
