/* What every libFuzzer harness of fuzz/ shares: the invariants checked after each input, a
 * scratch file in memory-backed storage for the loaders that read paths, and a reader that turns
 * the input bytes into choices.
 *
 * The invariants (a broken one is abort(), which libFuzzer reports as a crash with the input):
 *   - a call that failed (NULL, a non-OK status) left cn_last_status() != CN_OK and a non-empty
 *     cn_last_error();
 *   - once the harness has released everything, cn_live_tensors() and cn_live_bytes() are back
 *     where they were before the input.
 * Leaks of plain memory are LeakSanitizer's (libFuzzer runs it after inputs that malloc more
 * than they free), and everything else is AddressSanitizer's and UBSan's. */
#ifndef CINDER_FUZZ_COMMON_H
#define CINDER_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinder/cinder.h"

/* Sanitizer settings that belong to the harness rather than to a command line, so that a crash
 * input replays the same way (./fuzz_x crash-file) as it failed: an allocation over 256 MB gets
 * NULL, as a machine without the memory would, so a shape that legitimately asks for gigabytes
 * makes the library report CN_ERR_OUT_OF_MEMORY instead of libFuzzer an out-of-memory crash. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1:halt_on_error=1"; }

#define FUZZ_FAIL(...)                                                                     \
    do {                                                                                   \
        fprintf(stderr, "fuzz invariant broken at %s:%d: ", __FILE__, __LINE__);           \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fprintf(stderr, "\n");                                                             \
        abort();                                                                           \
    } while (0)

/* After a call that failed: the error must say so. */
#define FUZZ_CHECK_FAILED(call)                                                            \
    do {                                                                                   \
        if (cn_last_status() == CN_OK)                                                     \
            FUZZ_FAIL("%s failed but cn_last_status() is CN_OK", call);                    \
        const char *msg_ = cn_last_error();                                                \
        if (!msg_ || !msg_[0])                                                             \
            FUZZ_FAIL("%s failed with %s but an empty message", call,                      \
                      cn_status_name(cn_last_status()));                                   \
    } while (0)

typedef struct fuzz_live {
    int64_t tensors, bytes;
} fuzz_live;

static inline fuzz_live fuzz_live_now(void) {
    fuzz_live l = {cn_live_tensors(), cn_live_bytes()};
    return l;
}

static inline void fuzz_check_live(fuzz_live before) {
    fuzz_live now = fuzz_live_now();
    if (now.tensors != before.tensors || now.bytes != before.bytes)
        FUZZ_FAIL("after releasing everything: %lld live tensors and %lld live bytes, "
                  "%lld and %lld before the input",
                  (long long)now.tensors, (long long)now.bytes, (long long)before.tensors,
                  (long long)before.bytes);
}

/* A per-process scratch path in /dev/shm (memory, no disk), or the temporary directory. */
static inline const char *fuzz_scratch_path(const char *name) {
    static char buf[8][256];
    static int next;
    char *p = buf[next++ % 8];
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(p, sizeof buf[0], "%s/cinder-fuzz-%ld-%s", dir ? dir : "/tmp", (long)getpid(), name);
    return p;
}

static inline void fuzz_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) FUZZ_FAIL("cannot write the scratch file %s", path);
    int bad = n && fwrite(data, 1, n, f) != n;
    if (fclose(f) != 0) bad = 1;
    if (bad) FUZZ_FAIL("cannot write the scratch file %s", path);
}

/* ---- the input as choices ------------------------------------------------------------------ */

typedef struct fuzz_in {
    const uint8_t *p;
    size_t n, at;
} fuzz_in;

static inline int fuzz_more(const fuzz_in *in) { return in->at < in->n; }

/* The next byte; 0 once the input is spent. */
static inline uint8_t fuzz_u8(fuzz_in *in) { return in->at < in->n ? in->p[in->at++] : 0; }

/* A choice among n (n >= 1). */
static inline int fuzz_pick(fuzz_in *in, int n) { return (int)(fuzz_u8(in) % (unsigned)n); }

static inline uint32_t fuzz_u32(fuzz_in *in) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++)
        v = v << 8 | fuzz_u8(in);
    return v;
}

static inline uint64_t fuzz_u64(fuzz_in *in) {
    uint64_t hi = fuzz_u32(in);
    return hi << 32 | fuzz_u32(in);
}

#endif
