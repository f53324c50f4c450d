/* The error catalogue: one complete entry per status code, lookups by code, name, slug and
 * message, and, for every code, a real call through the public API whose raised message matches
 * the entry's pattern and names the op. A code appended to error.h without a trigger here fails
 * test_every_code_is_triggered. */
#include <ctype.h>

#include "cinder/catalogue.h"
#include "core/error_internal.h"
#include "harness.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static int non_empty(const char *s) { return s && s[0] != '\0'; }

static size_t list_len(const char *const *items) {
    size_t n = 0;
    while (items && items[n])
        n++;
    return n;
}

static cn_tensor *tensor_on(const int64_t *shape, int ndim, cn_dtype dtype, cn_device device) {
    cn_tensor *t = cn_ones(shape, ndim, dtype, device);
    if (!t) fprintf(stderr, "setup: cn_ones failed: %s\n", cn_last_error());
    return t;
}

/* A backend named `name` that is a copy of the CPU backend changed by `edit`, registered on first
 * use (names are unique in the registry, which lives as long as the process). Its device 0. */
static cn_device copied_backend(const char *name, void (*edit)(cn_backend *b)) {
    if (cn_backend_find(name) < 0) {
        cn_backend copy = *cn_backend_get(CN_BACKEND_CPU);
        copy.name = name;
        if (edit) edit(&copy);
        if (cn_backend_register(&copy) < 0)
            fprintf(stderr, "setup: cannot register %s: %s\n", name, cn_last_error());
    }
    cn_device d = {CN_BACKEND_INVALID, 0, 0, 0};
    if (cn_device_parse(name, &d) != CN_OK)
        fprintf(stderr, "setup: cannot parse %s: %s\n", name, cn_last_error());
    return d;
}

static void without_exp(cn_backend *b) { b->kernels[CN_OP_EXP] = NULL; }

static cn_status failing_kernel(const cn_kernel_args *a) {
    return cn_set_error(CN_ERR_BACKEND, cn_op_name(a->op),
                        "simulated device fault in the test backend 'cpu_faulty'");
}

static void with_failing_add(cn_backend *b) { b->kernels[CN_OP_ADD] = failing_kernel; }

/* ---- triggers: one real failing call per status --------------------------------------------- *
 * Each function makes the call and returns what it returned as a status (NULL tensor -> the
 * thread's status); the error is left set for the checks, and every tensor is released. */

static const int64_t s2[1] = {2};
static const int64_t s23[2] = {2, 3};
static const int64_t s4[1] = {4};

static cn_status op_status(cn_tensor *r) {
    if (!r) return cn_last_status();
    cn_release(r);
    return CN_OK;
}

static cn_status raise_null_arg(void) {
    cn_tensor *x = tensor_on(s2, 1, CN_F32, cn_cpu());
    cn_clear_error(); /* a NULL with an error pending keeps that error instead */
    cn_status s = op_status(cn_add(NULL, x));
    cn_release(x);
    return s;
}

static cn_status raise_invalid_arg(void) {
    cn_tensor *x = tensor_on(s23, 2, CN_F32, cn_cpu());
    cn_status s = op_status(cn_transpose(x, 0, 7));
    cn_release(x);
    return s;
}

static cn_status raise_shape(void) {
    cn_tensor *a = tensor_on(s23, 2, CN_F32, cn_cpu());
    cn_tensor *b = tensor_on(s4, 1, CN_F32, cn_cpu());
    cn_status s = op_status(cn_add(a, b));
    cn_release(a);
    cn_release(b);
    return s;
}

static cn_status raise_dtype(void) {
    cn_tensor *a = tensor_on(s2, 1, CN_F32, cn_cpu());
    cn_tensor *b = tensor_on(s2, 1, CN_F64, cn_cpu());
    cn_status s = op_status(cn_add(a, b));
    cn_release(a);
    cn_release(b);
    return s;
}

static cn_status raise_kind(void) {
    cn_tensor *x = tensor_on(s2, 1, CN_I32, cn_cpu());
    cn_status s = op_status(cn_exp(x));
    cn_release(x);
    return s;
}

static cn_status raise_device_mismatch(void) {
    cn_device other = copied_backend("cpu2", NULL);
    cn_tensor *a = tensor_on(s2, 1, CN_F32, cn_cpu());
    cn_tensor *b = tensor_on(s2, 1, CN_F32, other);
    cn_status s = op_status(cn_add(a, b));
    cn_release(a);
    cn_release(b);
    return s;
}

static cn_status raise_no_kernel(void) {
    cn_device dev = copied_backend("cpu_noexp", without_exp);
    cn_tensor *x = tensor_on(s2, 1, CN_F32, dev);
    cn_status s = op_status(cn_exp(x));
    cn_release(x);
    return s;
}

static cn_status raise_out_of_memory(void) {
    cn_alloc_fail_after(1);
    cn_status s = op_status(cn_full(s4, 1, 0.0, CN_F32, cn_cpu()));
    cn_alloc_fail_after(0);
    return s;
}

static cn_status raise_overflow(void) {
    const int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    return op_status(cn_empty(huge, 2, CN_F32, cn_cpu()));
}

static cn_status raise_unknown_device(void) {
    cn_device d;
    return cn_device_parse("tpu:0", &d);
}

static cn_status raise_device_unavailable(void) {
    cn_device d;
    return cn_device_parse("cpu:3", &d);
}

static cn_status raise_backend(void) {
    cn_device dev = copied_backend("cpu_faulty", with_failing_add);
    cn_tensor *a = tensor_on(s2, 1, CN_F32, dev);
    cn_tensor *b = tensor_on(s2, 1, CN_F32, dev);
    cn_status s = op_status(cn_add(a, b));
    cn_release(a);
    cn_release(b);
    return s;
}

static cn_status raise_index(void) {
    const double xv[3] = {1, 2, 3};
    const int64_t s3[1] = {3}, s1[1] = {1};
    const int64_t iv[1] = {99};
    cn_tensor *x = cn_from_data(xv, s3, 1, CN_F64, cn_cpu());
    cn_tensor *idx = cn_from_data(iv, s1, 1, CN_I64, cn_cpu());
    cn_status s = op_status(cn_index_select(x, 0, idx));
    cn_release(x);
    cn_release(idx);
    return s;
}

static cn_status raise_scope(void) {
    if (cn_scope_depth() != 0) {
        fprintf(stderr, "setup: a scope is open\n");
        return CN_OK;
    }
    return cn_scope_end();
}

static cn_status raise_buffer(void) {
    cn_tensor *t = tensor_on(s23, 2, CN_F32, cn_cpu());
    double out[6];
    cn_status s = cn_read(t, out, sizeof out); /* 48 bytes for a 24-byte tensor */
    cn_release(t);
    return s;
}

/* The autodiff codes: raised by the autodiff layer's own calls on small tracked tensors. */

static cn_tensor *tracked_pair(double a, double b) {
    const double v[2] = {a, b};
    return cn_require_grad(cn_from_data(v, s2, 1, CN_F64, cn_autodiff(cn_cpu())));
}

static cn_status grads_status(cn_grads *g) {
    if (!g) return cn_last_status();
    cn_grads_free(g);
    return CN_OK;
}

static cn_status raise_autodiff_device(void) {
    cn_tensor *t = tensor_on(s2, 1, CN_F32, cn_cpu()); /* concrete: no graph is recorded there */
    cn_status s = cn_require_grad(t) ? CN_OK : cn_last_status(); /* returns t, or NULL */
    cn_release(t);
    return s;
}

static cn_status raise_autodiff_no_grad(void) {
    cn_tensor *t = tensor_on(s2, 1, CN_F32, cn_autodiff(cn_cpu())); /* not marked */
    cn_status s = grads_status(cn_backward(t));
    cn_release(t);
    return s;
}

static cn_status raise_autodiff_modified(void) {
    cn_tensor *w = tracked_pair(3, 4), *x = tracked_pair(5, 6);
    cn_tensor *prod = cn_mul(w, x); /* saves x for its backward */
    cn_tensor *y = cn_sum(prod);
    cn_no_grad_begin();
    cn_status copied = cn_copy_(x, w);
    cn_no_grad_end();
    /* the write itself must succeed; the failure is the later backward's */
    cn_status s = copied != CN_OK ? CN_OK : grads_status(cn_backward(y));
    cn_release(y);
    cn_release(prod);
    cn_release(w);
    cn_release(x);
    return s;
}

static cn_status raise_autodiff_graph(void) {
    cn_tensor *w = tracked_pair(3, 4);
    cn_tensor *sq = cn_mul(w, w);
    cn_tensor *z = cn_sum(sq);
    /* the first backward must succeed (else CN_OK: a wrong status, reported by the check) */
    cn_status s = grads_status(cn_backward(z)) != CN_OK ? CN_OK : grads_status(cn_backward(z));
    cn_release(z);
    cn_release(sq);
    cn_release(w);
    return s;
}

static cn_status raise_autodiff_inplace(void) {
    cn_tensor *w = tracked_pair(3, 4);
    cn_tensor *update = tensor_on(s2, 1, CN_F64, cn_autodiff(cn_cpu()));
    cn_status s = cn_copy_(w, update); /* grad mode is on */
    cn_release(update);
    cn_release(w);
    return s;
}

/* The routing invariants of extension ops: a one-input op with a kernel and no backward, and a
 * two-input op that wants its float inputs tracked alike, defined once. */

static cn_status same_shape(const cn_view *in, int n_in, const int64_t *ints, const double *reals,
                            cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    int i = in[0].ndim < 0 ? 1 : 0;
    out[0] = in[i];
    out[0].dtype = CN_F64;
    return CN_OK;
}

static cn_status copy_kernel(const cn_kernel_args *a) {
    int i = a->in[0].data ? 0 : 1;
    memcpy(a->out[0].data, a->in[i].data, (size_t)a->out[0].shape[0] * sizeof(double));
    return CN_OK;
}

static cn_status pass_backward(cn_tensor *const *in, const int *needs_grad, int n_in, cn_tensor *const *out,
                               cn_tensor *const *gout, int n_out, const int64_t *ints,
                               const double *reals, cn_tensor **gin) {
    (void)in, (void)needs_grad, (void)out, (void)n_out, (void)ints, (void)reals;
    for (int i = 0; i < n_in; i++) gin[i] = cn_retain(gout[0]);
    return CN_OK;
}

static const cn_ext_op *ext_op(int which) {
    static const cn_ext_op *ops[2];
    static const char *const out_names[] = {"y"};
    static const cn_ext_tensor_arg one[] = {{"x", CN_KIND_FLOAT, 1, -1, 0},
                                            {"ids", CN_KIND_INT, 1, -1, 0}};
    static const cn_ext_tensor_arg two[] = {{"a", CN_KIND_FLOAT, 0, -1, 0},
                                            {"b", CN_KIND_FLOAT, 0, -1, 0}};
    if (!ops[0]) {
        cn_ext_schema s = {.name = "catalogue_concrete", .n_tensors = 2, .tensors = one,
                           .n_outputs = 1, .output_names = out_names, .shape = same_shape};
        ops[0] = cn_ext_define(&s);
        cn_ext_register_kernel(ops[0], "cpu", copy_kernel);
        s.name = "catalogue_pair";
        s.tensors = two;
        s.flags = CN_EXT_SAME_TRACKING;
        ops[1] = cn_ext_define(&s);
        cn_ext_register_kernel(ops[1], "cpu", copy_kernel);
        cn_ext_register_backward(ops[1], pass_backward);
    }
    return ops[which];
}

static cn_status ext_status(int which, cn_tensor *a, cn_tensor *b) {
    cn_tensor *in[2] = {a, b}, *out = NULL;
    cn_status s = cn_ext_call(ext_op(which), CN_EXT_ROUTE_AUTO, in, NULL, NULL, NULL, &out);
    cn_release(out);
    return s;
}

static cn_status raise_reached_concrete(void) {
    cn_tensor *x = tracked_pair(1, 2);
    cn_status s = ext_status(0, x, NULL);
    cn_release(x);
    return s;
}

static cn_status raise_nonfloat(void) {
    cn_tensor *x = tracked_pair(1, 2); /* a tracked float in the int slot */
    cn_status s = ext_status(0, NULL, x);
    cn_release(x);
    return s;
}

static cn_status raise_plain_enabled(void) {
    cn_device malformed = {CN_BACKEND_CPU, 0, 0, CN_CHECKPOINT_BALANCED};
    cn_tensor *x = tensor_on(s2, 1, CN_F64, malformed);
    cn_status s = ext_status(0, x, NULL);
    cn_release(x);
    return s;
}

static cn_status raise_mixed_tracking(void) {
    cn_tensor *a = tracked_pair(1, 2), *b = tensor_on(s2, 1, CN_F64, cn_cpu());
    cn_status s = ext_status(1, a, b);
    cn_release(a);
    cn_release(b);
    return s;
}

static cn_status raise_no_tensor(void) { return ext_status(0, NULL, NULL); }

static cn_status raise_checkpoint_mismatch(void) {
    cn_tensor *a = tensor_on(s2, 1, CN_F64, cn_autodiff(cn_cpu()));
    cn_tensor *b = tensor_on(s2, 1, CN_F64,
                             cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED));
    cn_status s = op_status(cn_add(a, b));
    cn_release(a);
    cn_release(b);
    return s;
}

static cn_status raise_io(void) {
    cn_safetensors *h = NULL;
    cn_status s = cn_safetensors_load("/nonexistent-cinder-dir/model.safetensors", cn_cpu(), &h);
    cn_safetensors_free(h);
    return s;
}

typedef struct trigger {
    cn_status status;
    const char *op; /* the op the message must name (in its "<op>: " part); NULL only
                     * for a code whose pattern has no {op} */
    cn_status (*raise)(void);
    const char *call; /* what raise does, for failure reports */
} trigger;

static const trigger triggers[] = {
    {CN_ERR_NULL_ARG, "add", raise_null_arg, "cn_add(NULL, x)"},
    {CN_ERR_INVALID_ARG, "transpose", raise_invalid_arg, "cn_transpose([2, 3], 0, 7)"},
    {CN_ERR_SHAPE, "add", raise_shape, "cn_add([2, 3], [4])"},
    {CN_ERR_DTYPE, "add", raise_dtype, "cn_add(f32, f64)"},
    {CN_ERR_KIND, "exp", raise_kind, "cn_exp(i32)"},
    {CN_ERR_DEVICE_MISMATCH, "add", raise_device_mismatch, "cn_add(cpu:0, cpu2:0)"},
    {CN_ERR_NO_KERNEL, "exp", raise_no_kernel, "cn_exp on a backend without exp"},
    {CN_ERR_OUT_OF_MEMORY, "full", raise_out_of_memory, "cn_alloc_fail_after(1); cn_full"},
    {CN_ERR_OVERFLOW, "empty", raise_overflow, "cn_empty([2^40, 2^40])"},
    {CN_ERR_UNKNOWN_DEVICE, "device_parse", raise_unknown_device, "cn_device_parse(\"tpu:0\")"},
    {CN_ERR_DEVICE_UNAVAILABLE, "device_parse", raise_device_unavailable,
     "cn_device_parse(\"cpu:3\")"},
    {CN_ERR_BACKEND, "add", raise_backend, "cn_add on a backend whose add kernel fails"},
    {CN_ERR_INDEX, "index_select", raise_index, "cn_index_select([3], 0, [99])"},
    {CN_ERR_SCOPE, "scope_end", raise_scope, "cn_scope_end() without a scope"},
    {CN_ERR_BUFFER, "read", raise_buffer, "cn_read(f32 [2, 3], 48 bytes)"},
    {CN_ERR_AUTODIFF_DEVICE, "require_grad", raise_autodiff_device,
     "cn_require_grad of a cn_cpu() tensor"},
    {CN_ERR_AUTODIFF_NO_GRAD, "backward", raise_autodiff_no_grad,
     "cn_backward of an untracked tensor"},
    {CN_ERR_AUTODIFF_MODIFIED, "backward", raise_autodiff_modified,
     "cn_copy_ into an input saved by cn_mul (under no-grad), then cn_backward"},
    {CN_ERR_AUTODIFF_GRAPH, "backward", raise_autodiff_graph, "cn_backward twice on one loss"},
    {CN_ERR_AUTODIFF_INPLACE, "copy_", raise_autodiff_inplace,
     "cn_copy_ into a tracked tensor outside no-grad mode"},
    {CN_ERR_AUTODIFF_REACHED_CONCRETE, "catalogue_concrete", raise_reached_concrete,
     "a tracked float into an extension op without backward"},
    {CN_ERR_AUTODIFF_NONFLOAT, "catalogue_concrete", raise_nonfloat,
     "a tracked float in an extension op's int input"},
    {CN_ERR_AUTODIFF_PLAIN_ENABLED, "catalogue_concrete", raise_plain_enabled,
     "a tensor on a device with checkpointing but no autodiff flag"},
    {CN_ERR_EXT_MIXED_TRACKING, "catalogue_pair", raise_mixed_tracking,
     "tracked and plain floats into a CN_EXT_SAME_TRACKING op"},
    {CN_ERR_EXT_NO_TENSOR, "catalogue_concrete", raise_no_tensor,
     "an extension op with every input absent"},
    {CN_ERR_CHECKPOINT_MISMATCH, "add", raise_checkpoint_mismatch,
     "cn_add of tensors from two checkpointing strategies"},
    {CN_ERR_IO, "safetensors_load", raise_io, "cn_safetensors_load of a missing file"},
};

#define N_TRIGGERS (sizeof triggers / sizeof *triggers)

/* ---- the entries ---------------------------------------------------------------------------- */

static void test_every_code_has_a_complete_entry(void) {
    const cn_error_entry *entries = NULL;
    size_t n = cn_error_catalogue(&entries);
    CHECK(entries != NULL);
    CHECK(n == (size_t)CN_STATUS_COUNT - 1);
    for (int code = 1; code < CN_STATUS_COUNT; code++) {
        const cn_error_entry *e = cn_error_entry_of((cn_status)code);
        if (!e) {
            fprintf(stderr, "status %d (%s) has no catalogue entry\n", code,
                    cn_status_name((cn_status)code));
            th_checks_failed++;
            continue;
        }
        CHECK(e->status == (cn_status)code);
        CHECK(n >= (size_t)code && &entries[code - 1] == e); /* the array is in code order */
        const char *fields[] = {e->name,
                                e->error_code,
                                e->slug,
                                e->phrase,
                                e->message_pattern,
                                e->documentation,
                                e->trigger_scenarios,
                                e->common_situations,
                                e->example_fix};
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            if (!non_empty(fields[f])) {
                fprintf(stderr, "%s: string field %zu is empty\n", cn_status_name(e->status), f);
                th_checks_failed++;
            }
        }
        CHECK(list_len(e->solutions) >= 2);
        CHECK(list_len(e->prevention_tips) >= 2);
        for (size_t i = 0; i < list_len(e->solutions); i++)
            CHECK(non_empty(e->solutions[i]));
        for (size_t i = 0; i < list_len(e->prevention_tips); i++)
            CHECK(non_empty(e->prevention_tips[i]));
        /* the example shows code before and after the fix */
        CHECK(strstr(e->example_fix, "// before") == e->example_fix);
        CHECK(strstr(e->example_fix, "\n// after") != NULL);
    }
    CHECK(cn_error_entry_of(CN_OK) == NULL);
    CHECK(cn_error_entry_of(CN_STATUS_COUNT) == NULL);
    CHECK(cn_error_entry_of((cn_status)-1) == NULL);
    CHECK(cn_error_catalogue(NULL) == n);
}

/* The name and number agree with error.h (cn_status_name is written independently in error.c),
 * and the phrase that cn_set_error uses is the entry's. */
static void test_names_codes_and_phrases_agree_with_error_h(void) {
    for (int code = 1; code < CN_STATUS_COUNT; code++) {
        const cn_error_entry *e = cn_error_entry_of((cn_status)code);
        if (!e) continue;
        CHECK(strcmp(e->name, cn_status_name((cn_status)code)) == 0);
        char want[96];
        snprintf(want, sizeof want, "%s (%d)", e->name, code);
        CHECK(strcmp(e->error_code, want) == 0);
        CHECK(strcmp(cn__status_phrase((cn_status)code), e->phrase) == 0);
        /* the pattern carries the phrase; a phrase never contains the ": " separator */
        CHECK(strstr(e->message_pattern, e->phrase) != NULL);
        CHECK(strstr(e->phrase, ": ") == NULL);
    }
    CHECK(strcmp(cn__status_phrase(CN_OK), "") == 0);
    CHECK(strcmp(cn__status_phrase(CN_STATUS_COUNT), "") == 0);
}

static void test_slugs_and_phrases_are_unique_and_well_formed(void) {
    const cn_error_entry *entries;
    size_t n = cn_error_catalogue(&entries);
    for (size_t i = 0; i < n; i++) {
        const char *slug = entries[i].slug;
        int ok = islower((unsigned char)slug[0]) != 0;
        for (const char *p = slug; *p; p++)
            ok &= islower((unsigned char)*p) || isdigit((unsigned char)*p) ||
                  (*p == '-' && p[1] != '-' && p[1] != '\0');
        if (!ok) {
            fprintf(stderr, "slug \"%s\" is not lowercase-with-dashes\n", slug);
            th_checks_failed++;
        }
        for (size_t j = i + 1; j < n; j++) {
            CHECK(strcmp(slug, entries[j].slug) != 0);
            CHECK(strcmp(entries[i].phrase, entries[j].phrase) != 0);
            CHECK(strcmp(entries[i].name, entries[j].name) != 0);
        }
    }
}

/* ---- matching and lookup -------------------------------------------------------------------- */

static void test_message_matching_follows_the_pattern(void) {
    const cn_error_entry *shape = cn_error_entry_of(CN_ERR_SHAPE);
    const cn_error_entry *oom = cn_error_entry_of(CN_ERR_OUT_OF_MEMORY);
    CHECK(strcmp(shape->message_pattern, "{op}: incompatible shapes: {detail}") == 0);
    CHECK(cn_error_message_matches(shape, "add: incompatible shapes: [2, 3] and [4]"));
    CHECK(cn_error_message_matches(shape, "matmul: incompatible shapes: a: b: c"));
    CHECK(cn_error_message_matches(shape, "add: incompatible shapes: "));
    CHECK(!cn_error_message_matches(shape, "add: incompatible shapes"));   /* no separator */
    CHECK(!cn_error_message_matches(shape, "add: incompatible shape: x")); /* other phrase */
    CHECK(!cn_error_message_matches(oom, "add: incompatible shapes: x"));
    CHECK(!cn_error_message_matches(shape, NULL));
    CHECK(!cn_error_message_matches(NULL, "add: incompatible shapes: x"));

    /* A row may give its own pattern (later codes will): without placeholders it is exact. */
    const cn_error_entry exact = {.message_pattern = "autodiff float input reached concrete "
                                                     "dispatch"};
    CHECK(cn_error_message_matches(&exact, "autodiff float input reached concrete dispatch"));
    CHECK(!cn_error_message_matches(&exact, "x: autodiff float input reached concrete dispatch"));
    CHECK(!cn_error_message_matches(&exact, "autodiff float input reached concrete dispatch!"));
    /* placeholders anywhere; a lone brace is literal text */
    const cn_error_entry mid = {.message_pattern = "{op} {x}{y} end {"};
    CHECK(cn_error_message_matches(&mid, "a b end {"));
    CHECK(cn_error_message_matches(&mid, "a  end {"));
    CHECK(!cn_error_message_matches(&mid, "a b end"));
}

static void test_lookup_by_code_name_slug_and_message(void) {
    const cn_error_entry *shape = cn_error_entry_of(CN_ERR_SHAPE);
    CHECK(cn_error_lookup("3") == shape);
    CHECK(cn_error_lookup("  3\n") == shape);
    CHECK(cn_error_lookup("CN_ERR_SHAPE") == shape);
    CHECK(cn_error_lookup("cn_err_shape") == shape);
    CHECK(cn_error_lookup("CN_ERR_SHAPE (3)") == shape);
    CHECK(cn_error_lookup("incompatible-shapes") == shape);
    CHECK(cn_error_lookup("add: incompatible shapes: [2, 3] and [4]") == shape);
    CHECK(cn_error_lookup("add: incompatible shapes: [2, 3] and [4]\n") == shape);
    /* a phrase in the detail does not win over the message's own phrase */
    CHECK(cn_error_lookup("add: incompatible shapes: got out of memory: odd") == shape);
    /* a log line that wraps a message */
    CHECK(cn_error_lookup("step 7 failed: add: incompatible shapes: [2] and [3]") == shape);
    for (int code = 1; code < CN_STATUS_COUNT; code++) {
        const cn_error_entry *e = cn_error_entry_of((cn_status)code);
        if (!e) continue;
        char num[16];
        snprintf(num, sizeof num, "%d", code);
        CHECK(cn_error_lookup(num) == e);
        CHECK(cn_error_lookup(e->name) == e);
        CHECK(cn_error_lookup(e->slug) == e);
        CHECK(cn_error_lookup(e->error_code) == e);
    }
    CHECK(cn_error_lookup("0") == NULL);
    CHECK(cn_error_lookup("99") == NULL);
    CHECK(cn_error_lookup("99999999999999999999") == NULL);
    CHECK(cn_error_lookup("no-such-error") == NULL);
    CHECK(cn_error_lookup("CN_ERR_NOPE") == NULL);
    CHECK(cn_error_lookup("") == NULL);
    CHECK(cn_error_lookup(" \t") == NULL);
    CHECK(cn_error_lookup(NULL) == NULL);
}

/* ---- raised messages ------------------------------------------------------------------------ */

/* Checks that the op is named in the part of msg before ": <phrase>". */
static void check_names_op(const trigger *t, const cn_error_entry *e, const char *msg) {
    char sep[160];
    snprintf(sep, sizeof sep, ": %s", e->phrase);
    const char *at = strstr(msg, sep);
    size_t op_len = at ? (size_t)(at - msg) : 0;
    char op_part[160] = "";
    if (op_len < sizeof op_part) {
        memcpy(op_part, msg, op_len);
        op_part[op_len] = '\0';
    }
    if (!at || !strstr(op_part, t->op)) {
        fprintf(stderr, "%s: message \"%s\" does not name the op \"%s\" before \"%s\"\n", e->name,
                msg, t->op, sep);
        th_checks_failed++;
    }
}

/* Runs one trigger and checks its status, that the message matches the entry's pattern, names the
 * op, and leads back to the entry by lookup. */
static void check_trigger(const trigger *t) {
    const cn_error_entry *e = cn_error_entry_of(t->status);
    cn_clear_error();
    cn_status got = t->raise();
    const char *msg = cn_last_error();
    const char *name = cn_status_name(t->status);
    if (got != t->status || cn_last_status() != t->status) {
        fprintf(stderr, "%s: %s returned %s (thread status %s), message \"%s\"\n", name, t->call,
                cn_status_name(got), cn_status_name(cn_last_status()), msg);
        th_checks_failed++;
    } else if (!e) {
        fprintf(stderr, "%s: no catalogue entry\n", name);
        th_checks_failed++;
    } else {
        if (!cn_error_message_matches(e, msg)) {
            fprintf(stderr, "%s: message \"%s\" does not match \"%s\"\n", name, msg,
                    e->message_pattern);
            th_checks_failed++;
        }
        if (t->op) check_names_op(t, e, msg);
        if (cn_error_lookup(msg) != e) {
            fprintf(stderr, "%s: cn_error_lookup(\"%s\") does not find its entry\n", name, msg);
            th_checks_failed++;
        }
    }
    cn_clear_error();
}

static void test_every_code_is_triggered(void) {
    for (int code = 1; code < CN_STATUS_COUNT; code++) {
        int found = 0;
        for (size_t i = 0; i < N_TRIGGERS; i++)
            found += triggers[i].status == (cn_status)code;
        if (found != 1) {
            fprintf(stderr,
                    "%s (%d) has %d triggers in tests/test_catalogue.c; add exactly one "
                    "real call that raises it to triggers[]\n",
                    cn_status_name((cn_status)code), code, found);
            th_checks_failed++;
        }
    }
}

static void test_raised_messages_match_their_entries(void) {
    for (size_t i = 0; i < N_TRIGGERS; i++)
        check_trigger(&triggers[i]);
}

int main(void) {
    RUN(test_every_code_has_a_complete_entry);
    RUN(test_names_codes_and_phrases_agree_with_error_h);
    RUN(test_slugs_and_phrases_are_unique_and_well_formed);
    RUN(test_message_matching_follows_the_pattern);
    RUN(test_lookup_by_code_name_slug_and_message);
    RUN(test_every_code_is_triggered);
    RUN(test_raised_messages_match_their_entries);
    return th_finish();
}
