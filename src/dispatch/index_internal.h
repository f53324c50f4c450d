/* What the indexing front-ends share (ops_layout.c defines them, ops_index.c uses them too). */
#ifndef CINDER_DISPATCH_INDEX_INTERNAL_H
#define CINDER_DISPATCH_INDEX_INTERNAL_H

#include "cinder/backend.h"
#include "cinder/tensor.h"

/* index is an int tensor of dtype i64: CN_ERR_KIND / CN_ERR_DTYPE naming op and 'index'. */
cn_status cn__check_index_i64(const char *op, const cn_tensor *index);

/* Routes in[0..n) (n <= 3, named names[i]), allocates the output of shape/ndim/dtype on their
 * device, runs op's kernel on the inputs' views as they are, and records the op. NULL with the
 * error set on failure (nothing leaked). */
cn_tensor *cn__run_index_op(cn_op op, cn_tensor *const *in, const char *const *names, int n,
                            const int64_t *shape, int ndim, cn_dtype dtype, const int64_t *ints,
                            int n_ints);

#endif
