#define _POSIX_C_SOURCE 200809L

/* cn_cpu_set_threads: the CPU pool's size, set before it starts. An out-of-range count is refused
 * with its range; a count set before the start replaces an earlier one and is the size the pool
 * starts with (checked by cn_cpu_threads, and by counting the distinct threads that run the
 * ranges of one job); after the start only the count it has is accepted, and asking for another
 * is an error that names both and says when to call. A process of its own: the pool must not
 * have started before main. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "harness.h"

#define WANT 3

static void test_out_of_range_counts_are_refused(void) {
    cn_clear_error();
    CHECK(cn_cpu_set_threads(0) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "1 to 256") != NULL);
    CHECK(cn_cpu_set_threads(-4) == CN_ERR_INVALID_ARG);
    CHECK(cn_cpu_set_threads(CN_CPU_MAX_THREADS + 1) == CN_ERR_INVALID_ARG);
    cn_clear_error();
}

/* Each range sleeps a little, so that every thread of the pool gets one; a thread records itself
 * in the first free slot. */
static pthread_t seen[64];
static _Atomic int n_seen;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_thread(void *ctx, int64_t begin, int64_t end) {
    (void)ctx;
    (void)begin;
    (void)end;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&seen_lock);
    int known = 0;
    for (int i = 0; i < n_seen; i++)
        known |= pthread_equal(seen[i], self);
    if (!known && n_seen < 64) seen[n_seen++] = self;
    pthread_mutex_unlock(&seen_lock);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void test_the_count_set_before_the_start_is_the_pool_size(void) {
    CHECK(cn_cpu_set_threads(5) == CN_OK);
    CHECK(cn_cpu_set_threads(WANT) == CN_OK); /* replaces 5 */
    CHECK(cn_cpu_threads() == WANT);          /* starts the pool */
    /* workers that start after a job was published wait for the next one: let them start */
    struct timespec settle = {0, 100 * 1000 * 1000};
    nanosleep(&settle, NULL);
    cn_cpu_parallel_for(64, 64, note_thread, NULL);
    printf("threads seen: %d\n", n_seen);
    CHECK(n_seen >= 1 && n_seen <= WANT);
    /* 64 ranges of 20 ms: the workers wake long before the caller could run them all */
    CHECK(n_seen == WANT);
}

static void test_after_the_start_only_the_same_count_is_accepted(void) {
    CHECK(cn_cpu_set_threads(WANT) == CN_OK);
    cn_clear_error();
    CHECK(cn_cpu_set_threads(WANT + 1) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "already started with 3 threads") != NULL);
    CHECK(strstr(cn_last_error(), "before the first CPU op") != NULL);
    CHECK(cn_cpu_threads() == WANT); /* unchanged */
    cn_clear_error();
}

int main(void) {
    RUN(test_out_of_range_counts_are_refused);
    RUN(test_the_count_set_before_the_start_is_the_pool_size);
    RUN(test_after_the_start_only_the_same_count_is_accepted);
    return th_finish();
}
