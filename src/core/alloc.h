/* Host allocation for the whole library: one place, so the allocation-failure test mode sees
 * every allocation. */
#ifndef CINDER_CORE_ALLOC_H
#define CINDER_CORE_ALLOC_H

#include <stddef.h>

/* malloc / calloc / free with failure injection (cn_alloc_fail_after). On failure they set
 * CN_ERR_OUT_OF_MEMORY naming `op` and return NULL. */
void *cn__malloc(const char *op, size_t nbytes);
void *cn__calloc(const char *op, size_t count, size_t size);
void *cn__aligned_alloc(const char *op, size_t nbytes); /* 64-byte aligned */
void cn__aligned_free(void *p);                        /* for cn__aligned_alloc's blocks */
void cn__free(void *p);

/* Counts one allocation and returns non-zero if the failure mode says it must fail. Device
 * allocators call this too. */
int cn__alloc_should_fail(void);

/* The same for n allocations at once: non-zero if one of them must fail. */
int cn__allocs_should_fail(int n);

#endif
