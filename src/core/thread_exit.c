/* Thread-exit hooks for per-thread caches (thread_exit.h). */
#include "core/thread_exit.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void run(void *arg) {
    cn__thread_exit *h = arg;
    h->fn();
}

int cn__thread_exit_arm(cn__thread_exit *h) {
    if (!atomic_load_explicit(&h->ready, memory_order_acquire)) {
        pthread_mutex_lock(&lock);
        int ok = h->ready || pthread_key_create(&h->key, run) == 0;
        if (ok) atomic_store_explicit(&h->ready, 1, memory_order_release);
        pthread_mutex_unlock(&lock);
        if (!ok) return -1;
    }
    return pthread_setspecific(h->key, h) == 0 ? 0 : -1;
}
