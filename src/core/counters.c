/* Per-thread counters and their process-wide totals (counters.h). */
#include <pthread.h>

#include "core/counters.h"

_Thread_local cn__counter_slot cn__my_counters;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cn__counter_slot *live_slots;                 /* guarded by lock */
static int64_t retired[CN__COUNTER_COUNT];           /* exited threads' counts; guarded by lock */
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* Runs when a registered thread exits: its counts move to `retired`, its slot leaves the list. */
static void retire(void *arg) {
    cn__counter_slot *s = arg;
    pthread_mutex_lock(&lock);
    for (int c = 0; c < CN__COUNTER_COUNT; c++)
        retired[c] += atomic_load_explicit(&s->value[c], memory_order_relaxed);
    if (s->prev) s->prev->next = s->next;
    else live_slots = s->next;
    if (s->next) s->next->prev = s->prev;
    pthread_mutex_unlock(&lock);
}

static void make_key(void) { pthread_key_create(&exit_key, retire); }

void cn__counters_register(void) {
    cn__counter_slot *s = &cn__my_counters;
    s->registered = 1;
    pthread_once(&key_once, make_key);
    /* without the exit hook the slot would outlive its thread in the list: count unlisted (the
     * totals then miss this thread, which only a failed setspecific can cause) */
    if (pthread_setspecific(exit_key, s) != 0) return;
    pthread_mutex_lock(&lock);
    s->prev = NULL;
    s->next = live_slots;
    if (live_slots) live_slots->prev = s;
    live_slots = s;
    pthread_mutex_unlock(&lock);
}

int64_t cn__counter_total(cn__counter c) {
    pthread_mutex_lock(&lock);
    int64_t sum = retired[c];
    for (cn__counter_slot *s = live_slots; s; s = s->next)
        sum += atomic_load_explicit(&s->value[c], memory_order_relaxed);
    pthread_mutex_unlock(&lock);
    return sum;
}
