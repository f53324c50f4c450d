/* Host allocation with failure injection. The counters are process-wide atomics so the test mode
 * also sees allocations made by worker threads. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "cinder/memory.h"
#include "core/alloc.h"
#include "core/error_internal.h"

static _Atomic int64_t alloc_count;
static _Atomic int64_t fail_at; /* alloc_count value that fails; 0 = off */

void cn_alloc_fail_after(int64_t n) { fail_at = n > 0 ? alloc_count + n : 0; }

int64_t cn_alloc_count(void) { return alloc_count; }

int cn__alloc_should_fail(void) {
    int64_t n = atomic_fetch_add(&alloc_count, 1) + 1;
    int64_t target = fail_at;
    if (target != 0 && n == target) {
        fail_at = 0;
        return 1;
    }
    return 0;
}

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

void *cn__aligned_alloc(const char *op, size_t nbytes) {
    if (cn__alloc_should_fail()) return oom(op, nbytes);
    size_t rounded = (nbytes + 63) & ~(size_t)63; /* aligned_alloc wants a multiple */
    if (rounded < nbytes) return oom(op, nbytes);
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    return p ? p : oom(op, nbytes);
}

void cn__free(void *p) { free(p); }
