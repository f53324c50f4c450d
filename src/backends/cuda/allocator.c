/* The CUDA backend's caching allocator: the one place that calls cudaMalloc and cudaFree.
 *
 * cudaMalloc and cudaFree are slow and cudaFree synchronises the device, so freed blocks are kept
 * and handed out again, as PyTorch's caching allocator does. A request is rounded up to a size
 * class and served from that class's free list when it holds a block; otherwise from the driver.
 * Size classes:
 *   <= 1 MiB            multiples of 512 bytes (at least 512);
 *   (p, 2p], p >= 1 MiB multiples of min(p / 4, 2 MiB): at most 25% and at most 2 MiB waste.
 * Blocks are not split or merged, so memory can be wasted across sizes that never recur; the
 * cache is returned to the driver on an out-of-memory retry and by cn_cuda_empty_cache.
 *
 * All work runs on one stream per device, so a freed block may be handed out at once: whatever
 * uses it next is queued after whatever used it last. Live blocks are found by address in a
 * chained hash table. One lock serves all devices (the driver calls dominate anyway). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "core/alloc.h"

#define SMALL_LIMIT ((size_t)1 << 20)
#define SMALL_STEP ((size_t)512)
#define LARGE_STEP_MAX ((size_t)2 << 20)
#define TABLE_MIN 256

typedef struct block {
    void *ptr;
    size_t size;          /* its size class */
    size_t requested;     /* while live */
    struct block *next;   /* hash chain while live, free list while cached */
} block;

typedef struct bin {
    size_t size;
    block *free;
    struct bin *next;     /* bins sorted by size */
} bin;

typedef struct cache {
    block **table;        /* live blocks by address */
    size_t table_size;    /* a power of two, or 0 before the first allocation */
    size_t live;
    bin *bins;
    cn_cuda_memory_stats_t stats;
} cache;

static cache caches[CU_MAX_DEVICES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- size classes and tables -------------------------------------------------------------------- */

/* The class of a request; 0 when rounding would overflow (no device has that much anyway). */
static size_t size_class(size_t n) {
    if (n <= SMALL_STEP) return SMALL_STEP;
    size_t step = SMALL_STEP;
    if (n > SMALL_LIMIT) {
        size_t p = SMALL_LIMIT;
        while (p < n / 2) p *= 2; /* p < n <= 2p */
        step = p / 4 < LARGE_STEP_MAX ? p / 4 : LARGE_STEP_MAX;
    }
    if (n > SIZE_MAX - step) return 0;
    return (n + step - 1) / step * step;
}

static size_t slot(const cache *c, const void *ptr) {
    uintptr_t h = (uintptr_t)ptr >> 9; /* blocks are at least 512-byte aligned */
    h ^= h >> 17;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (c->table_size - 1);
}

/* Doubles the table when it is crowded; keeps the old one if memory is short. */
static void maybe_grow(cache *c) {
    if (c->live < c->table_size * 2) return;
    size_t n = c->table_size * 2;
    block **t = cn__calloc("cuda alloc", n, sizeof *t);
    if (!t) {
        cn_clear_error(); /* not a failure: lookups just walk longer chains */
        return;
    }
    block **old = c->table;
    size_t old_n = c->table_size;
    c->table = t;
    c->table_size = n;
    for (size_t i = 0; i < old_n; i++) {
        for (block *b = old[i], *next; b; b = next) {
            next = b->next;
            size_t s = slot(c, b->ptr);
            b->next = t[s];
            t[s] = b;
        }
    }
    cn__free(old);
}

/* The bin of class size, made if missing (NULL when that fails). */
static bin *get_bin(cache *c, size_t size, int make) {
    bin **at = &c->bins;
    while (*at && (*at)->size < size) at = &(*at)->next;
    if (*at && (*at)->size == size) return *at;
    if (!make) return NULL;
    bin *b = cn__malloc("cuda alloc", sizeof *b);
    if (!b) return NULL;
    b->size = size;
    b->free = NULL;
    b->next = *at;
    *at = b;
    return b;
}

static void note_peaks(cn_cuda_memory_stats_t *s) {
    if (s->bytes_in_use > s->peak_bytes_in_use) s->peak_bytes_in_use = s->bytes_in_use;
    if (s->bytes_reserved > s->peak_bytes_reserved) s->peak_bytes_reserved = s->bytes_reserved;
}

/* Returns every cached block of c to the driver; the bytes returned. Lock held, device current. */
static size_t release_cached(cache *c) {
    size_t released = 0;
    for (bin *b = c->bins; b; b = b->next) {
        while (b->free) {
            block *k = b->free;
            b->free = k->next;
            cudaFree(k->ptr);
            released += k->size;
            c->stats.driver_frees++;
            c->stats.bytes_cached -= (int64_t)k->size;
            c->stats.bytes_reserved -= (int64_t)k->size;
            cn__free(k);
        }
    }
    (void)cudaGetLastError();
    return released;
}

/* ---- the allocator ------------------------------------------------------------------------------- */

static cn_status out_of_memory(const char *op, int device, size_t nbytes, const char *why,
                               int64_t in_use) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
    return cn_set_error(CN_ERR_OUT_OF_MEMORY, op,
                        "could not allocate %zu bytes on cuda:%d (%s); live tensors hold %lld "
                        "bytes and the device has %zu of %zu bytes free; free tensors you no "
                        "longer need (cn_release, scopes) or use smaller batches",
                        nbytes, device, why, (long long)in_use, free_b, total_b);
}

cn_status cu_cache_alloc(int device, const char *op, size_t nbytes, void **ptr) {
    *ptr = NULL;
    pthread_mutex_lock(&lock);
    cache *c = &caches[device];
    int64_t in_use = c->stats.bytes_in_use;
    if (cn__alloc_should_fail()) {
        pthread_mutex_unlock(&lock);
        return out_of_memory(op, device, nbytes, "allocation-failure test mode", in_use);
    }
    size_t size = size_class(nbytes);
    if (c->table_size == 0 && size) {
        c->table = cn__calloc(op, TABLE_MIN, sizeof *c->table);
        if (c->table) c->table_size = TABLE_MIN;
    }
    bin *b = size && c->table_size ? get_bin(c, size, 1) : NULL;
    if (!b) { /* an impossible size, or the host is out of memory for the bookkeeping */
        pthread_mutex_unlock(&lock);
        if (size) return CN_ERR_OUT_OF_MEMORY; /* cn__malloc set the error */
        return out_of_memory(op, device, nbytes, "the size is beyond any device", in_use);
    }

    block *k = b->free;
    if (k) {
        b->free = k->next;
        c->stats.cache_hits++;
        c->stats.bytes_cached -= (int64_t)size;
    } else {
        k = cn__malloc(op, sizeof *k);
        if (!k) {
            pthread_mutex_unlock(&lock);
            return CN_ERR_OUT_OF_MEMORY;
        }
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, size);
        size_t released = 0;
        if (e != cudaSuccess) { /* give the cache back to the driver and try once more */
            (void)cudaGetLastError();
            released = release_cached(c);
            e = cudaMalloc(&p, size);
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            c->stats.oom_count++;
            cn__free(k);
            pthread_mutex_unlock(&lock);
            char why[160];
            snprintf(why, sizeof why, "%s, after returning %zu cached bytes to the driver",
                     cudaGetErrorString(e), released);
            return out_of_memory(op, device, nbytes, why, in_use);
        }
        k->ptr = p;
        k->size = size;
        c->stats.driver_allocs++;
        c->stats.bytes_reserved += (int64_t)size;
    }
    k->requested = nbytes;
    size_t s = slot(c, k->ptr);
    k->next = c->table[s];
    c->table[s] = k;
    c->live++;
    c->stats.alloc_count++;
    c->stats.bytes_in_use += (int64_t)nbytes;
    note_peaks(&c->stats);
    maybe_grow(c);
    *ptr = k->ptr;
    pthread_mutex_unlock(&lock);
    return CN_OK;
}

void cu_cache_free(int device, void *ptr) {
    pthread_mutex_lock(&lock);
    cache *c = &caches[device];
    block *k = NULL;
    if (c->table_size) {
        block **at = &c->table[slot(c, ptr)];
        while (*at && (*at)->ptr != ptr) at = &(*at)->next;
        k = *at;
        if (k) *at = k->next;
    }
    if (k) { /* its bin exists: it was made when the block was */
        bin *b = get_bin(c, k->size, 0);
        c->live--;
        c->stats.bytes_in_use -= (int64_t)k->requested;
        c->stats.bytes_cached += (int64_t)k->size;
        k->next = b->free;
        b->free = k;
    }
    pthread_mutex_unlock(&lock);
}

cn_status cu_cache_empty(int device) {
    pthread_mutex_lock(&lock);
    release_cached(&caches[device]);
    pthread_mutex_unlock(&lock);
    return CN_OK;
}

void cu_cache_stats(int device, cn_cuda_memory_stats_t *out) {
    pthread_mutex_lock(&lock);
    *out = caches[device].stats;
    pthread_mutex_unlock(&lock);
}

void cu_cache_reset_peaks(int device) {
    pthread_mutex_lock(&lock);
    cn_cuda_memory_stats_t *s = &caches[device].stats;
    s->peak_bytes_in_use = s->bytes_in_use;
    s->peak_bytes_reserved = s->bytes_reserved;
    pthread_mutex_unlock(&lock);
}
