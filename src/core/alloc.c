/* Host allocation with failure injection. Allocations are counted per thread (core/counters.h);
 * the failure mode, when armed, counts down on one process-wide atomic, so that it also sees the
 * allocations of worker threads, and costs one relaxed load when off. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "cinder/memory.h"
#include "core/alloc.h"
#include "core/counters.h"
#include "core/error_internal.h"
#include "core/thread_exit.h"

static atomic_int armed;
static _Atomic int64_t countdown; /* allocations left before the one that fails */

void cn_alloc_fail_after(int64_t n) {
    atomic_store(&armed, 0);
    atomic_store(&countdown, n);
    atomic_store(&armed, n > 0);
}

int64_t cn_alloc_count(void) { return cn__counter_total(CN__ALLOCS); }

int cn__allocs_should_fail(int n) {
    cn__count(CN__ALLOCS, n);
    if (!atomic_load_explicit(&armed, memory_order_relaxed)) return 0;
    int64_t left = atomic_fetch_sub(&countdown, n); /* the failing one is the left-th of these */
    if (left < 1 || left > n) return 0;
    atomic_store(&armed, 0);
    return 1;
}

int cn__alloc_should_fail(void) { return cn__allocs_should_fail(1); }

static void *oom(const char *op, size_t nbytes) {
    cn_set_error(CN_ERR_OUT_OF_MEMORY, op,
                 "could not allocate %zu bytes of host memory; free tensors you no longer need "
                 "(cn_release, scopes) or use smaller batches", nbytes);
    return NULL;
}

void *cn__malloc(const char *op, size_t nbytes) {
    if (cn__alloc_should_fail()) return oom(op, nbytes);
    void *p = malloc(nbytes ? nbytes : 1);
    return p ? p : oom(op, nbytes);
}

void *cn__calloc(const char *op, size_t count, size_t size) {
    if (cn__alloc_should_fail()) return oom(op, count * size);
    void *p = calloc(count ? count : 1, size ? size : 1);
    return p ? p : oom(op, count * size);
}

/* Aligned blocks carry a 64-byte prefix holding their size class, so that small blocks (the
 * outputs of tiny ops) are recycled through per-thread free lists instead of glibc's memalign,
 * whose splitting and consolidation cost more than a tiny op itself. */
#define ALIGN 64
#define SMALL_CLASSES 7 /* 64 B .. 4 KiB */
#define SMALL_SLOTS 32
#define LARGE_CLASS SMALL_CLASSES

typedef struct small_list {
    void *items[SMALL_SLOTS];
    int count;
} small_list;

static _Thread_local small_list small_lists[SMALL_CLASSES];
static _Thread_local int lists_armed; /* this thread's exit hook is set */

/* At a thread's exit, its small blocks go back to the C library. */
static void free_lists(void) {
    lists_armed = 0;
    for (int c = 0; c < SMALL_CLASSES; c++)
        while (small_lists[c].count > 0)
            free((char *)small_lists[c].items[--small_lists[c].count] - ALIGN);
}

static cn__thread_exit lists_exit = CN__THREAD_EXIT_INIT(free_lists);

static int size_class(size_t nbytes) {
    size_t cap = ALIGN;
    for (int c = 0; c < SMALL_CLASSES; c++, cap <<= 1)
        if (nbytes <= cap) return c;
    return LARGE_CLASS;
}

void *cn__aligned_alloc(const char *op, size_t nbytes) {
    if (cn__alloc_should_fail()) return oom(op, nbytes);
    int c = size_class(nbytes);
    if (c < SMALL_CLASSES && small_lists[c].count > 0)
        return small_lists[c].items[--small_lists[c].count];
    size_t body = c < SMALL_CLASSES ? (size_t)ALIGN << c : (nbytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (body < nbytes || body > SIZE_MAX - ALIGN) return oom(op, nbytes);
    char *block = aligned_alloc(ALIGN, body + ALIGN);
    if (!block) return oom(op, nbytes);
    *(int *)block = c;
    return block + ALIGN;
}

void cn__aligned_free(void *p) {
    if (!p) return;
    char *block = (char *)p - ALIGN;
    int c = *(int *)block;
    if (c < SMALL_CLASSES && small_lists[c].count < SMALL_SLOTS) {
        if (!lists_armed) {
            lists_armed = 1;
            cn__thread_exit_arm(&lists_exit);
        }
        small_lists[c].items[small_lists[c].count++] = p;
        return;
    }
    free(block);
}

void cn__free(void *p) { free(p); }
