/* The batch iterator: mini-batches gathered with cn_index_select along dim 0, in an order that a
 * counter-based generator shuffles reproducibly (the algorithm is specified in
 * include/cinder/io.h). The order is a host array of sample indices; each batch uploads its slice
 * of it as an i64 index tensor on the data's device. */
#include <string.h>

#include "cinder/io.h"
#include "cinder/ops.h"
#include "core/alloc.h"
#include "core/error_internal.h"
#include "core/philox.h"

struct cn_batches {
    cn_tensor *images, *labels; /* references (labels may be NULL) */
    int64_t n, batch;           /* samples, samples per batch */
    int shuffle, drop_last;
    uint64_t seed;
    int64_t *order; /* this epoch's order of the n samples (of this rank's share when sharded) */
    int64_t n_all;  /* samples in the data set (n is this rank's share) */
    int rank, world;
    int64_t next;   /* position in order of the next batch */
};

/* order = the Fisher-Yates shuffle of 0..n-1 for (seed, epoch), as io.h specifies. */
static void shuffle_order(int64_t *order, int64_t n, uint64_t seed, uint64_t epoch) {
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int64_t i = n - 1; i > 0; i--) {
        const uint64_t u = (uint64_t)i;
        const uint32_t ctr[4] = {(uint32_t)u, (uint32_t)(u >> 32), (uint32_t)epoch,
                                 (uint32_t)(epoch >> 32)};
        uint32_t w[4];
        cn_philox4x32_10(ctr, key, w);
        uint64_t j = ((uint64_t)w[0] | (uint64_t)w[1] << 32) % (u + 1);
        int64_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
}

cn_batches *cn_batches_new(cn_tensor *images, cn_tensor *labels, int64_t batch, int shuffle,
                           uint64_t seed, int drop_last) {
    return cn_batches_new_sharded(images, labels, batch, shuffle, seed, drop_last, 0, 1);
}

cn_batches *cn_batches_new_sharded(cn_tensor *images, cn_tensor *labels, int64_t batch,
                                   int shuffle, uint64_t seed, int drop_last, int rank,
                                   int world) {
    const char *op = world == 1 && rank == 0 ? "batches_new" : "batches_new_sharded";
    if (world < 1 || rank < 0 || rank >= world) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "rank = %d of world = %d; give world >= 1 and "
                     "0 <= rank < world (cn_dist_rank(), cn_dist_world_size())", rank, world);
        return NULL;
    }
    if (!images) {
        cn__null_arg(op, "images");
        return NULL;
    }
    char a[128], b[128];
    if (batch < 1) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "batch = %lld; it must be at least 1",
                     (long long)batch);
        return NULL;
    }
    if (cn_ndim(images) == 0 || (labels && cn_ndim(labels) == 0)) {
        cn_set_error(CN_ERR_SHAPE, op, "'%s' %s is 0-d; samples are indexed by dim 0, so give "
                     "it at least one dim", cn_ndim(images) == 0 ? "images" : "labels",
                     cn_tensor_str(cn_ndim(images) == 0 ? images : labels, a, sizeof a));
        return NULL;
    }
    int64_t n = cn_shape(images)[0];
    if (labels && cn_shape(labels)[0] != n) {
        cn_set_error(CN_ERR_SHAPE, op, "'images' %s and 'labels' %s differ in dim 0 (the sample "
                     "count); pass labels for the same samples",
                     cn_tensor_str(images, a, sizeof a), cn_tensor_str(labels, b, sizeof b));
        return NULL;
    }
    cn_batches *it = cn__calloc(op, 1, sizeof *it);
    if (!it) return NULL;
    it->order = cn__malloc(op, n ? (size_t)n * sizeof *it->order : 1); /* the whole epoch */
    if (!it->order) {
        cn__free(it);
        return NULL;
    }
    it->images = cn_retain(images);
    it->labels = cn_retain(labels);
    it->n_all = n;
    it->n = n / world; /* every rank the same count: the last n mod world samples are left out */
    it->rank = rank;
    it->world = world;
    it->batch = batch;
    it->shuffle = shuffle != 0;
    it->drop_last = drop_last != 0;
    it->seed = seed;
    cn_batches_reset(it, 0);
    return it;
}

void cn_batches_reset(cn_batches *b, uint64_t epoch) {
    if (!b) return;
    if (b->shuffle) {
        shuffle_order(b->order, b->n_all, b->seed, epoch);
    } else {
        for (int64_t i = 0; i < b->n_all; i++)
            b->order[i] = i;
    }
    /* this rank's share: every world-th sample of the epoch's order from the rank's own, as
     * PyTorch's DistributedSampler splits it (in place: i * world + rank >= i) */
    if (b->world > 1)
        for (int64_t i = 0; i < b->n; i++)
            b->order[i] = b->order[i * b->world + b->rank];
    b->next = 0;
}

cn_status cn_batches_seek(cn_batches *b, uint64_t epoch, int64_t index) {
    if (!b) {
        cn__null_arg("batches_seek", "b");
        return cn_last_status();
    }
    int64_t count = cn_batches_count(b);
    if (index < 0 || index > count)
        return cn_set_error(CN_ERR_INVALID_ARG, "batches_seek",
                            "index = %lld, but an epoch has %lld batches; give 0 to %lld",
                            (long long)index, (long long)count, (long long)count);
    cn_batches_reset(b, epoch);
    /* index <= count <= ceil(n / batch), so this stays within n */
    b->next = index * b->batch < b->n ? index * b->batch : b->n;
    return CN_OK;
}

int64_t cn_batches_count(const cn_batches *b) {
    if (!b) return 0;
    return b->drop_last ? b->n / b->batch : (b->n + b->batch - 1) / b->batch;
}

/* t's rows at order[0, k), gathered on t's device. */
static cn_tensor *gather(cn_tensor *t, const int64_t *order, int64_t k) {
    cn_tensor *index = cn_from_data(order, &k, 1, CN_I64, cn_device_of(t));
    cn_tensor *rows = cn_index_select(t, 0, index);
    cn_release(index);
    return rows;
}

int cn_batches_next(cn_batches *b, cn_tensor **x, cn_tensor **y) {
    const char *op = "batches_next";
    if (x) *x = NULL;
    if (y) *y = NULL;
    if (!b || !x) {
        cn__null_arg(op, !b ? "b" : "x");
        return -1;
    }
    int64_t left = b->n - b->next;
    int64_t k = left < b->batch ? left : b->batch;
    if (k == 0 || (b->drop_last && k < b->batch)) return 0;
    const int64_t *rows = b->order + b->next;
    cn_tensor *bx = gather(b->images, rows, k);
    cn_tensor *by = bx && b->labels && y ? gather(b->labels, rows, k) : NULL;
    if (!bx || (b->labels && y && !by)) {
        cn_release(bx);
        return -1;
    }
    b->next += k;
    *x = bx;
    if (y) *y = by;
    return 1;
}

void cn_batches_free(cn_batches *b) {
    if (!b) return;
    cn_release(b->images);
    cn_release(b->labels);
    cn__free(b->order);
    cn__free(b);
}
