/* Writing small IDX files (the Fashion-MNIST format, uncompressed, which the loader reads like
 * the .gz ones) for tests that run `cinder train` or its data loading on data of their own. */
#ifndef CINDER_TESTS_IDX_FILE_H
#define CINDER_TESTS_IDX_FILE_H

#include <stdint.h>
#include <stdio.h>

/* Writes u8 data of dims[0..ndim) (row-major) to path; 0, or -1 when it cannot. */
static inline int th_write_idx(const char *path, const uint32_t *dims, int ndim,
                               const uint8_t *data) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    const uint8_t head[4] = {0, 0, 0x08, (uint8_t)ndim};
    size_t count = 1;
    fwrite(head, 1, 4, f);
    for (int d = 0; d < ndim; d++) {
        const uint8_t be[4] = {(uint8_t)(dims[d] >> 24), (uint8_t)(dims[d] >> 16),
                               (uint8_t)(dims[d] >> 8), (uint8_t)dims[d]};
        fwrite(be, 1, 4, f);
        count *= dims[d];
    }
    size_t wrote = fwrite(data, 1, count, f);
    return fclose(f) == 0 && wrote == count ? 0 : -1;
}

#endif
