/* cinder: scopes, and the allocation-failure test mode.
 *
 * Scopes spare training loops from releasing every intermediate by hand:
 *
 *     cn_scope_begin();
 *     cn_tensor *h = cn_relu(cn_linear(x, w, b));   // intermediates owned by the scope
 *     cn_tensor *loss = cn_keep(cn_mean(h));          // survives the scope
 *     cn_scope_end();                                 // releases everything else
 *
 * Every tensor that a call returns while a scope is open is owned by the innermost scope: the
 * reference the call returned is the scope's, dropped at cn_scope_end. Releasing it yourself
 * before then frees the tensor early and the scope forgets it, which is fine (cinder's composite
 * ops do it with their temporaries) as long as nothing else retained the tensor. If something
 * did, the scope's end still drops a reference and the tensor dies under its other holder: a
 * bug, which debug and sanitizer builds catch at that holder's next use or release of it,
 * stopping with a message that names the tensor and the call. cn_keep hands the scope's
 * reference to the enclosing scope (or to the caller
 * when it is the outermost). Scopes are per thread and nest. */
#ifndef CINDER_MEMORY_H
#define CINDER_MEMORY_H

#include "cinder/api.h"

#include <stdint.h>

#include "cinder/error.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a scope. Returns CN_ERR_OUT_OF_MEMORY if the scope stack cannot grow. */
CN_API cn_status cn_scope_begin(void);

/* Releases every tensor the innermost scope owns, and closes it. CN_ERR_SCOPE without a scope. */
CN_API cn_status cn_scope_end(void);

/* Moves t out of the innermost scope (to the enclosing one, or to the caller); returns t. A tensor
 * the scope does not own is returned unchanged (a NULL stays NULL, keeping the error). */
CN_API cn_tensor *cn_keep(cn_tensor *t);

/* Number of scopes open on this thread. */
CN_API int cn_scope_depth(void);

/* Allocation-failure test mode (SQLite style). After cn_alloc_fail_after(n), the n-th host or
 * device allocation from now on fails (n = 1: the next one), and every later one succeeds again.
 * n <= 0 switches the mode off. cn_alloc_count() counts allocations since the process started,
 * so a test can measure how many a computation makes and then fail each in turn. */
CN_API void cn_alloc_fail_after(int64_t n);
CN_API int64_t cn_alloc_count(void);

/* Live tensor objects in this process (for leak checks in tests and benchmarks). */
CN_API int64_t cn_live_tensors(void);

/* Bytes of tensor storage alive in this process, on every device (views share storage and count
 * once). */
CN_API int64_t cn_live_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
