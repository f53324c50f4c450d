/* The CPU backend's threads: a pool in which the calling thread never waits for a thread that
 * has not started.
 *
 * Why not OpenMP's parallel regions: a region ends at a barrier that every thread of the team
 * must reach, so when the machine runs more threads than it has cores (a build beside the
 * program, or the program's own threads), the caller waits for a worker that the kernel has not
 * scheduled yet, a time slice of several ms for an op of a few us. Training a small MLP on a
 * loaded 2-core machine ran 10x slower on 2 threads than on one. And OpenBLAS keeps its own
 * pthreads, which spin beside OpenMP's and take their cores.
 *
 * Here work is cut into chunks that any thread claims from one atomic word; the caller claims
 * chunks too, and returns as soon as every chunk is finished. A worker that wakes late finds
 * nothing left and goes back to waiting; only a chunk that a worker has claimed is waited for.
 * Workers spin for a short while after a job (ops come in quick succession), then sleep on a
 * condition variable. OpenBLAS is set to one thread, and large GEMMs are split over this pool
 * (gemm.c), so the process has one set of threads.
 *
 * The word: generation (32 bits) | chunk count (16) | next chunk (16). A claim is a
 * compare-and-swap that succeeds only while the generation is the job's, so a stale worker never
 * claims a chunk of another job; the job's function and context are read only after a claim
 * succeeds, when the caller is still waiting for that chunk and cannot have replaced them. */
#define _GNU_SOURCE /* sched_getcpu; pthread_sigmask, sigset_t */

#include <cblas.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/cpu/cpu_internal.h"
#include "cinder/error.h"

#define MAX_CHUNKS        0xFFFF
#define WORKER_SPINS      4096 /* polls (a pause each) before a worker sleeps: ~0.2 ms */
#define CHUNKS_PER_THREAD 4

#if defined(__x86_64__) || defined(__i386__)
#define CPU_PAUSE() __builtin_ia32_pause()
#else
#define CPU_PAUSE() ((void)0)
#endif

static struct {
    int threads; /* the caller plus the workers */
    _Atomic uint64_t word;
    _Atomic int64_t done; /* chunks of the current job finished */
    /* the current job, written by the caller before it publishes the generation */
    cpu_range_fn fn;
    void *ctx;
    int64_t n;
    atomic_flag busy; /* a job is running: a second caller runs its chunks itself */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    _Atomic int sleepers;
} pool = {
    .busy = ATOMIC_FLAG_INIT, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

/* cn_cpu_set_threads: the size asked for before the pool started (0: none), and whether it has
 * started; both under config_lock, which pool_start takes too, so a request either reaches the
 * pool or is told that it came too late. */
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static int requested_threads;
static int pool_started;
static _Thread_local int in_chunk; /* this thread is running a chunk: nested calls run inline */

static uint32_t word_gen(uint64_t w) { return (uint32_t)(w >> 32); }
static int64_t word_count(uint64_t w) { return (int64_t)((w >> 16) & 0xFFFF); }
static int64_t word_next(uint64_t w) { return (int64_t)(w & 0xFFFF); }

static void run_chunk(int64_t n, int64_t chunks, int64_t c, cpu_range_fn fn, void *ctx) {
    fn(ctx, c, n * c / chunks, n * (c + 1) / chunks);
}

/* Claims and runs chunks of generation gen until none are left. */
static void claim_chunks(uint32_t gen) {
    uint64_t w = atomic_load_explicit(&pool.word, memory_order_acquire);
    for (;;) {
        if (word_gen(w) != gen || word_next(w) >= word_count(w)) return;
        if (!atomic_compare_exchange_weak_explicit(&pool.word, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        in_chunk = 1;
        run_chunk(pool.n, word_count(w), word_next(w), pool.fn, pool.ctx);
        in_chunk = 0;
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        w = atomic_load_explicit(&pool.word, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    uint32_t seen = word_gen(atomic_load(&pool.word));
    for (;;) {
        uint64_t w = atomic_load_explicit(&pool.word, memory_order_acquire);
        for (int i = 0; i < WORKER_SPINS && word_gen(w) == seen; i++) {
            CPU_PAUSE();
            w = atomic_load_explicit(&pool.word, memory_order_acquire);
        }
        if (word_gen(w) == seen) {
            /* sleepers is incremented before the generation is read again under the lock; the
             * caller publishes the generation before it reads sleepers: one of the two sees the
             * other (both sequentially consistent), so no wake-up is lost */
            pthread_mutex_lock(&pool.lock);
            atomic_fetch_add(&pool.sleepers, 1);
            while (word_gen(w = atomic_load(&pool.word)) == seen)
                pthread_cond_wait(&pool.wake, &pool.lock);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = word_gen(w);
        claim_chunks(seen);
    }
    return NULL;
}

static void pool_start(void) {
    pthread_mutex_lock(&config_lock);
#ifdef _OPENMP
    long n = omp_get_max_threads(); /* OMP_NUM_THREADS when set, else the cores */
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    if (requested_threads > 0) n = requested_threads; /* cn_cpu_set_threads wins */
    pool.threads = n < 1 ? 1 : n > CN_CPU_MAX_THREADS ? CN_CPU_MAX_THREADS : (int)n;
    pool_started = 1;
    pthread_mutex_unlock(&config_lock);
    /* GEMMs are split over this pool (gemm.c); OpenBLAS's own threads would only compete */
    openblas_set_num_threads(1);
    /* Signals sent to the process (a user's Ctrl-C, a SIGTERM) go to the program's own threads,
     * never to a worker in the middle of a kernel: the workers start with them blocked (they
     * inherit the mask; the faults a thread causes itself, SIGSEGV and the like, stay open) */
    sigset_t async, saved;
    sigemptyset(&async);
    const int blocked[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2, SIGPIPE};
    for (size_t k = 0; k < sizeof blocked / sizeof *blocked; k++) sigaddset(&async, blocked[k]);
    pthread_sigmask(SIG_BLOCK, &async, &saved);
    for (int i = 1; i < pool.threads; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int started = pthread_create(&t, &attr, worker_main, NULL) == 0;
        pthread_attr_destroy(&attr);
        if (!started) { /* run with the workers we have */
            pool.threads = i;
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

int cpu_threads(void) {
    pthread_once(&pool_once, pool_start);
    return pool.threads;
}

int64_t cpu_chunks(int64_t n, int64_t grain) {
    if (grain < 1) grain = 1;
    if (n < 2 * grain) return 1;
    int64_t most = (int64_t)cpu_threads() * CHUNKS_PER_THREAD;
    int64_t c = n / grain;
    return c < most ? c : most;
}

void cpu_parallel(int64_t n, int64_t chunks, cpu_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (chunks > n) chunks = n;
    if (chunks > MAX_CHUNKS) chunks = MAX_CHUNKS;
    if (chunks <= 1) {
        fn(ctx, 0, 0, n);
        return;
    }
    if (in_chunk || cpu_threads() == 1 ||
        atomic_flag_test_and_set_explicit(&pool.busy, memory_order_acquire)) {
        for (int64_t c = 0; c < chunks; c++)
            run_chunk(n, chunks, c, fn, ctx);
        return;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    uint32_t gen = word_gen(atomic_load_explicit(&pool.word, memory_order_relaxed)) + 1;
    atomic_store(&pool.word, (uint64_t)gen << 32 | (uint64_t)chunks << 16);
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    claim_chunks(gen);
    /* every chunk is claimed; wait for those that workers are still running */
    for (int spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < chunks;)
        if (++spins % 256 == 0)
            sched_yield(); /* the worker may have been preempted mid-chunk */
        else
            CPU_PAUSE();
    atomic_flag_clear_explicit(&pool.busy, memory_order_release);
}

/* ---- chunks with a preferred thread ---------------------------------------------------------- *
 * cpu_parallel hands chunk 0 to whichever thread comes first, so the part of a tensor that a core
 * wrote in one op is, half the time, what the other core reads in the next: a step of the MLP
 * moves its 800 KB weight matrix, its gradient and its momentum between the cores' private caches
 * (2 MB each here) several times. Here the chunks are cut into one stripe per thread, stripe s =
 * chunks [s C / T, (s + 1) C / T), and a thread takes first, in order, the chunks of the stripe of
 * the core it runs on (the data is in the core's cache, not the thread's: on a busy machine the
 * scheduler moves threads), then any chunk left, so a worker that starts late leaves its stripe to
 * the others. Every chunk runs exactly once, with the bounds cpu_parallel gives it, so results
 * are those of cpu_parallel with the same count. */
#define AFFINE_MAX_CHUNKS 64

typedef struct affine_job {
    int64_t n, chunks;
    int threads;
    cpu_range_fn fn;
    void *ctx;
    atomic_char taken[AFFINE_MAX_CHUNKS];
} affine_job;

static atomic_int next_slot;
static _Thread_local int slot = -1; /* without sched_getcpu: this thread's number, by first use */

static int preferred_stripe(int threads) {
#ifdef __linux__
    int cpu = sched_getcpu();
    if (cpu >= 0) return cpu % threads;
#endif
    if (slot < 0) slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    return slot % threads;
}

/* One pool chunk: claims one of the job's chunks, this thread's stripe first. There are as many
 * pool chunks as job chunks and each claims one, so every job chunk runs once. */
static void affine_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk, (void)begin, (void)end;
    affine_job *j = ctx;
    int64_t first = j->chunks * preferred_stripe(j->threads) / j->threads;
    for (int64_t k = 0; k < j->chunks; k++) {
        int64_t c = (first + k) % j->chunks;
        if (atomic_exchange_explicit(&j->taken[c], 1, memory_order_relaxed)) continue;
        run_chunk(j->n, j->chunks, c, j->fn, j->ctx);
        return;
    }
}

void cpu_parallel_affine(int64_t n, int64_t chunks, cpu_range_fn fn, void *ctx) {
    if (chunks > n) chunks = n;
    int threads = cpu_threads();
    if (chunks <= 1 || chunks > AFFINE_MAX_CHUNKS || threads == 1 || in_chunk) {
        cpu_parallel(n, chunks, fn, ctx);
        return;
    }
    affine_job j = {.n = n, .chunks = chunks, .threads = threads, .fn = fn, .ctx = ctx};
    for (int64_t c = 0; c < chunks; c++) atomic_init(&j.taken[c], 0);
    cpu_parallel(chunks, chunks, affine_chunk, &j);
}

/* ---- the public face (backend.h) -------------------------------------------------------------- */

int cn_cpu_threads(void) { return cpu_threads(); }

cn_status cn_cpu_set_threads(int n) {
    if (n < 1 || n > CN_CPU_MAX_THREADS)
        return cn_set_error(CN_ERR_INVALID_ARG, "cn_cpu_set_threads",
                            "%d threads: the CPU pool takes 1 to %d (the caller included)", n,
                            CN_CPU_MAX_THREADS);
    pthread_mutex_lock(&config_lock);
    int started = pool_started, have = pool.threads;
    if (!started) requested_threads = n;
    pthread_mutex_unlock(&config_lock);
    if (started && have != n)
        return cn_set_error(CN_ERR_INVALID_ARG, "cn_cpu_set_threads",
                            "the CPU pool has already started with %d threads and cannot take %d; "
                            "call cn_cpu_set_threads before the first CPU op (or set "
                            "OMP_NUM_THREADS=%d before the program starts)",
                            have, n, n);
    return CN_OK;
}

typedef struct public_job {
    cn_range_fn fn;
    void *ctx;
} public_job;

static void run_public(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const public_job *j = ctx;
    j->fn(j->ctx, begin, end);
}

void cn_cpu_parallel_for(int64_t n, int64_t chunks, cn_range_fn fn, void *ctx) {
    if (!fn) return;
    public_job j = {fn, ctx};
    cpu_parallel_affine(n, chunks, run_public, &j);
}
