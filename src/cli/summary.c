/* A model's summary (summary.h): its layers, their parameters, the totals. Everything comes from
 * nn.h's module API (children, named parameters), so it follows whatever the model builds. */
#include <stdlib.h>
#include <string.h>

#include "cli/summary.h"

#define MAX_LAYERS 64
#define TEXT_MAX   256

cn_status cli_summary_totals(cn_module *net, int64_t *params, int64_t *bytes) {
    int n = 0;
    const cn_param *ps = cn_module_params(net, &n);
    if (!ps) return cn_last_status(); /* NULL only on failure (nn.h) */
    *params = 0;
    *bytes = 0;
    for (int i = 0; i < n; i++) {
        int64_t numel = cn_numel(ps[i].tensor);
        *params += numel;
        *bytes += numel * (int64_t)cn_dtype_size(cn_dtype_of(ps[i].tensor));
    }
    return CN_OK;
}

/* Appends "name [d0, d1]" to text (of capacity TEXT_MAX), with ", " before it unless first. */
static void append_param(char *text, const char *name, const cn_tensor *t) {
    size_t len = strlen(text);
    if (len) len += (size_t)snprintf(text + len, TEXT_MAX - len, ", ");
    if (len < TEXT_MAX) len += (size_t)snprintf(text + len, TEXT_MAX - len, "%s [", name);
    for (int d = 0; d < cn_ndim(t) && len < TEXT_MAX; d++)
        len += (size_t)snprintf(text + len, TEXT_MAX - len, "%s%lld", d ? ", " : "",
                                (long long)cn_shape(t)[d]);
    if (len < TEXT_MAX) snprintf(text + len, TEXT_MAX - len, "]");
}

cn_status cli_summary_print(FILE *f, cn_module *net, const char *name) {
    /* a container's children are the layers; any other module is one layer */
    int layers = cn_module_child_count(net);
    int own = layers == 0;
    if (own) layers = 1;
    if (layers > MAX_LAYERS) layers = MAX_LAYERS;
    int counts[MAX_LAYERS];
    for (int i = 0; i < layers; i++) {
        int c = 0;
        if (!own && !cn_module_params(cn_module_child(net, i), &c)) return cn_last_status();
        counts[i] = own ? 0 : c;
    }
    /* the model's own list, after the children's: its names carry the children's prefixes, in
     * the children's order (nn.h) */
    int n = 0;
    const cn_param *ps = cn_module_params(net, &n);
    if (!ps) return cn_last_status(); /* NULL only on failure (nn.h) */
    if (own) counts[0] = n;

    char(*text)[TEXT_MAX] = calloc((size_t)layers, sizeof *text);
    int64_t *numel = calloc((size_t)layers, sizeof *numel);
    const char **kind = calloc((size_t)layers, sizeof *kind);
    if (!text || !numel || !kind) {
        free(text);
        free(numel);
        free(kind);
        return cn_set_error(CN_ERR_OUT_OF_MEMORY, "cli_summary_print", "no memory for %d layers",
                            layers);
    }
    int next = 0, name_w = (int)strlen("parameters"), kind_w = (int)strlen("layer");
    int64_t total = 0, bytes = 0;
    for (int i = 0; i < layers; i++) {
        kind[i] = cn_module_kind(own ? net : cn_module_child(net, i));
        for (int k = 0; k < counts[i] && next < n; k++, next++) {
            append_param(text[i], ps[next].name, ps[next].tensor);
            numel[i] += cn_numel(ps[next].tensor);
            bytes +=
                cn_numel(ps[next].tensor) * (int64_t)cn_dtype_size(cn_dtype_of(ps[next].tensor));
        }
        if (!text[i][0]) strcpy(text[i], "-");
        total += numel[i];
        if ((int)strlen(text[i]) > name_w) name_w = (int)strlen(text[i]);
        if ((int)strlen(kind[i]) > kind_w) kind_w = (int)strlen(kind[i]);
    }
    char total_text[32];
    int count_w = snprintf(total_text, sizeof total_text, "%lld", (long long)total);
    if (count_w < 5) count_w = 5;
    fprintf(f, "model %s: %d layer%s\n", name, layers, layers == 1 ? "" : "s");
    fprintf(f, "  %2s  %-*s  %-*s  %*s\n", "#", kind_w, "layer", name_w, "parameters", count_w,
            "count");
    for (int i = 0; i < layers; i++)
        fprintf(f, "  %2d  %-*s  %-*s  %*lld\n", i, kind_w, kind[i], name_w, text[i], count_w,
                (long long)numel[i]);
    fprintf(f, "  total: %lld parameters, %lld bytes (%.1f KiB)\n", (long long)total,
            (long long)bytes, (double)bytes / 1024.0);
    free(text);
    free(numel);
    free(kind);
    return CN_OK;
}
