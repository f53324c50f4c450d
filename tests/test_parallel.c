/* The CPU thread pool as kernels see it (cn_cpu_threads, cn_cpu_parallel_for), and the
 * process-wide counters when tensors are made and freed on other threads. */
#include <pthread.h>
#include <stdatomic.h>

#include "harness.h"

enum { MAX_UNITS = 5000 };

typedef struct visits {
    atomic_int count[MAX_UNITS]; /* how often each unit was visited */
    atomic_int calls;            /* how many ranges fn received */
    atomic_int bad_range;        /* a range outside [0, n) or empty */
    int64_t n;
} visits;

static void visit(void *ctx, int64_t begin, int64_t end) {
    visits *v = ctx;
    atomic_fetch_add(&v->calls, 1);
    if (begin < 0 || end > v->n || begin >= end) atomic_store(&v->bad_range, 1);
    for (int64_t i = begin; i < end && i < v->n; i++) atomic_fetch_add(&v->count[i], 1);
}

/* Runs cn_cpu_parallel_for(n, chunks) and checks every unit is visited exactly once, in the
 * expected number of ranges. */
static void check_cover(int64_t n, int64_t chunks) {
    static visits v;
    memset(&v, 0, sizeof v);
    v.n = n;
    cn_cpu_parallel_for(n, chunks, visit, &v);
    int64_t once = 0;
    for (int64_t i = 0; i < n; i++) once += atomic_load(&v.count[i]) == 1;
    CHECK(once == n);
    CHECK(!atomic_load(&v.bad_range));
    /* ranges: chunks of [0, n), at most n of them, one when chunks <= 1; none for n == 0 */
    int64_t want = n <= 0 ? 0 : chunks <= 1 ? 1 : chunks < n ? chunks : n;
    if (atomic_load(&v.calls) != want) {
        fprintf(stderr, "n %lld chunks %lld: %d ranges, want %lld\n", (long long)n,
                (long long)chunks, atomic_load(&v.calls), (long long)want);
        th_checks_failed++;
    }
}

static void test_threads_at_least_one(void) {
    int t = cn_cpu_threads();
    CHECK(t >= 1);
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && atoi(env) > 0) CHECK(t == atoi(env));
}

static void test_ranges_cover_each_unit_once(void) {
    const int64_t sizes[] = {0, 1, 2, 7, 16, 100, 4999};
    const int64_t chunks[] = {-3, 0, 1, 2, 3, 8, 64, 10000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t j = 0; j < sizeof chunks / sizeof *chunks; j++) check_cover(sizes[i], chunks[j]);
}

/* A range function that itself splits its range: the inner call runs on the calling thread. */
typedef struct nested {
    visits *v;
} nested;

static void outer(void *ctx, int64_t begin, int64_t end) {
    nested *o = ctx;
    visits *inner = malloc(sizeof *inner);
    memset(inner, 0, sizeof *inner);
    inner->n = end - begin;
    cn_cpu_parallel_for(end - begin, 4, visit, inner);
    int ok = atomic_load(&inner->calls) == (end - begin < 4 ? end - begin : 4);
    for (int64_t i = 0; i < end - begin; i++) ok &= atomic_load(&inner->count[i]) == 1;
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&o->v->count[i], ok ? 1 : 100);
    free(inner);
}

static void test_nested_calls_cover_their_range(void) {
    static visits v;
    memset(&v, 0, sizeof v);
    v.n = 1000;
    nested o = {&v};
    cn_cpu_parallel_for(1000, 4, outer, &o);
    int64_t once = 0;
    for (int64_t i = 0; i < 1000; i++) once += atomic_load(&v.count[i]) == 1;
    CHECK(once == 1000);
}

static void test_null_function_is_ignored(void) { cn_cpu_parallel_for(10, 2, NULL, NULL); }

/* ---- counters across threads ---------------------------------------------------------------- */

static void *make_tensors(void *arg) {
    cn_tensor **out = arg;
    int64_t n = 1000;
    out[0] = cn_zeros(&n, 1, CN_F32, cn_cpu());      /* kept: freed by the main thread */
    cn_tensor *tmp = cn_ones(&n, 1, CN_F64, cn_cpu()); /* freed here */
    cn_release(tmp);
    return NULL;
}

static void test_counts_survive_threads(void) {
    int64_t tensors = cn_live_tensors(), bytes = cn_live_bytes();
    int64_t allocs = cn_alloc_count();
    cn_tensor *made[1] = {NULL};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, make_tensors, made) == 0);
    pthread_join(th, NULL); /* the thread has exited: its counts are kept */
    CHECK(made[0] != NULL);
    CHECK(cn_live_tensors() == tensors + 1);
    CHECK(cn_live_bytes() == bytes + 4000);
    CHECK(cn_alloc_count() > allocs);
    cn_release(made[0]); /* made on that thread, freed on this one */
    CHECK(cn_live_tensors() == tensors);
    CHECK(cn_live_bytes() == bytes);
}

int main(void) {
    RUN(test_threads_at_least_one);
    RUN(test_ranges_cover_each_unit_once);
    RUN(test_nested_calls_cover_their_range);
    RUN(test_null_function_is_ignored);
    RUN(test_counts_survive_threads);
    return th_finish();
}
