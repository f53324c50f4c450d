/* Freeing a thread's caches when it exits. The hot paths keep per-thread caches (tensor headers,
 * storages, small blocks, graph nodes); a program that runs cinder on short-lived threads would
 * leak them without this. A module arms its hook the first time a thread fills its cache; at
 * that thread's exit, the hook's function frees what the cache holds. */
#ifndef CINDER_CORE_THREAD_EXIT_H
#define CINDER_CORE_THREAD_EXIT_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct cn__thread_exit {
    void (*fn)(void); /* frees the calling thread's cache of one module */
    atomic_int ready; /* key made */
    pthread_key_t key;
} cn__thread_exit;

#define CN__THREAD_EXIT_INIT(fn) {(fn), 0, 0}

/* Arranges for h->fn to run at the calling thread's exit (a thread that has exited runs it once
 * per arming). Returns 0, or -1 when the system refused (then the cache is not freed at exit). */
int cn__thread_exit_arm(cn__thread_exit *h);

#endif
