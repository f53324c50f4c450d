/* Process-wide statistics (allocations, live tensors, live bytes), counted per thread.
 *
 * Every op allocates and frees a tensor, so these counters change several times per op. A shared
 * atomic costs a locked instruction each time (about as much as the rest of a tiny op's
 * bookkeeping), so each thread counts in its own slot with plain loads and stores, and a reader
 * sums the slots. Slots are registered on a thread's first count and folded into a shared total
 * when the thread exits. */
#ifndef CINDER_CORE_COUNTERS_H
#define CINDER_CORE_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum cn__counter { CN__ALLOCS, CN__TENSORS, CN__BYTES, CN__COUNTER_COUNT } cn__counter;

typedef struct cn__counter_slot {
    _Atomic int64_t value[CN__COUNTER_COUNT]; /* written by the owning thread only */
    int registered;
    struct cn__counter_slot *prev, *next;     /* the list of live threads' slots */
} cn__counter_slot;

extern _Thread_local cn__counter_slot cn__my_counters;

void cn__counters_register(void); /* links this thread's slot into the list */

/* Adds delta to this thread's count of c. Relaxed load and store: only this thread writes the
 * slot, and readers only need a value that was true at some moment. */
static inline void cn__count(cn__counter c, int64_t delta) {
    cn__counter_slot *s = &cn__my_counters;
    if (!s->registered) cn__counters_register();
    int64_t v = atomic_load_explicit(&s->value[c], memory_order_relaxed);
    atomic_store_explicit(&s->value[c], v + delta, memory_order_relaxed);
}

/* A tensor made (+1, +bytes) or freed (-1, -bytes): both counts with one registration check. */
static inline void cn__count_tensor(int64_t tensors, int64_t bytes) {
    cn__counter_slot *s = &cn__my_counters;
    if (!s->registered) cn__counters_register();
    int64_t t = atomic_load_explicit(&s->value[CN__TENSORS], memory_order_relaxed);
    int64_t b = atomic_load_explicit(&s->value[CN__BYTES], memory_order_relaxed);
    atomic_store_explicit(&s->value[CN__TENSORS], t + tensors, memory_order_relaxed);
    atomic_store_explicit(&s->value[CN__BYTES], b + bytes, memory_order_relaxed);
}

/* The process-wide total of c: exited threads' counts plus every live thread's. */
int64_t cn__counter_total(cn__counter c);

#endif
