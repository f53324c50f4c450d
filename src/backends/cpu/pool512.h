/* 2x2 max pooling at stride 2 with kept choices, and its backward, 16 windows at a time on
 * AVX-512 (pool512.c): the k = 2 rows of pool_index.c's planes, the same values and choices bit
 * for bit (selects only: no arithmetic on the values but the backward's 0 + g).
 *
 * Callers check cpu_pool512() first; without AVX-512 (or under ThreadSanitizer, as cpu_math.h's
 * clones) it is 0 and the functions are never called. */
#ifndef CINDER_CPU_POOL512_H
#define CINDER_CPU_POOL512_H

#include <stdint.h>

/* Non-zero when the CPU has AVX-512 F, BW and VL (the byte loads and stores of the choices). */
int cpu_pool512(void);

/* z: [PH rows of 2, at row stride W] (each row at least 2 PW long) -> out [PH, PW] (row stride
 * PW) and, when idx is not NULL, idx [PH, PW]: a window's first NaN, else its first maximum,
 * as i * 2 + j; the value is the chosen element. bias: NULL, or a value added to each element
 * of z first (the convolution's bias, as conv.c's epilogue adds it: z is then never written). */
void cpu_pool2_plane512_f32(const float *z, int64_t W, int64_t PH, int64_t PW, const float *bias,
                            float *out, uint8_t *idx);

/* The backward of one pooled plane: g [PH, PW] (row stride gs_h, unit column stride), idx
 * [PH, PW] -> gz rows [2 PH, W]: 0 + g at each window's choice, +0 at its other three places,
 * +0 in the columns [2 PW, W). */
void cpu_pool2_back_plane512_f32(const float *g, int64_t gs_h, const uint8_t *idx, int64_t PH,
                                 int64_t PW, int64_t W, float *gz);

#endif
