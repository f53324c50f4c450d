/* CPU data movement and creation kernels: cast and copy between the eight dtypes, fill, and the
 * Philox random generators (the stream itself is defined in core/philox.h).
 *
 * Conversion rules (cn_cast):
 * - to f32/f64: exact where representable, otherwise round to nearest even. f16 and bf16 are
 *   converted by hand (no compiler half type): from f32 with round-to-nearest-even, keeping inf,
 *   NaN (made quiet) and signed zero, overflowing to inf and gradually underflowing through the
 *   f16 subnormals. f64 and i64 reach f16/bf16 through f32 (as PyTorch does).
 * - float -> int: truncation toward zero, saturating at the integer dtype's range; NaN gives 0.
 * - int -> narrower int (i64 -> i32, anything -> u8): wraps modulo 2^bits, like C.
 * - anything -> bool: x != 0 (so NaN -> true); bool is stored as one byte, 0 or 1. */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"
#include "core/philox.h"

/* ---- f16 and bf16 ---------------------------------------------------------------------------- */

static uint32_t f32_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float f32_from_bits(uint32_t x) {
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
static uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) return sign | 0x7e00;   /* NaN: a quiet NaN */
    if (mag >= 0x477ff000u) return sign | 0x7c00;  /* >= 65520 (incl. inf) rounds to inf */
    if (mag >= 0x38800000u) {                      /* >= 2^-14: a normal f16 */
        /* round to nearest even at mantissa bit 13 (a carry correctly bumps the exponent),
         * then rebias the exponent from 127 to 15 */
        uint32_t rounded = mag + 0xfffu + ((mag >> 13) & 1u);
        return sign | (uint16_t)((rounded - 0x38000000u) >> 13);
    }
    /* f16 subnormal: m * 2^-24 with m = (1.mantissa) * 2^(e - 126), e the f32 biased exponent */
    uint32_t e = mag >> 23;
    if (e < 102) return sign;                      /* below 2^-25 (or exactly it): to zero */
    uint32_t full = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;                      /* 14..24 */
    uint32_t m = full >> shift;
    uint32_t rem = full & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (m & 1u))) m++; /* m = 0x400 is the smallest normal */
    return sign | (uint16_t)m;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return f32_from_bits(sign | 0x7f800000u | (m << 13)); /* inf, NaN */
    if (e != 0) return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
    float v = (float)m * 0x1p-24f;                 /* zero or subnormal, exact */
    return sign ? -v : v;
}

/* bfloat16: the top 16 bits of an f32, rounded to nearest even. */
static uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float bf16_to_f32(uint16_t b) {
    return f32_from_bits((uint32_t)b << 16);
}

/* The next f16 or bf16 value toward -inf (both are sign-magnitude: the same bit step). */
static uint16_t half_bits_below(uint16_t h) {
    if ((h & 0x7fff) == 0) return 0x8001;        /* +-0 -> the smallest negative subnormal */
    return (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

/* ---- conversion through a pivot --------------------------------------------------------------- *
 * A run is converted a block at a time: loaded into a double block (float sources) or an int64
 * block (integer and bool sources), both exact, then stored as the target dtype. Each load and
 * store is one loop per dtype, so the per-element work has no dtype switch. */

#define CAST_BLOCK 256
#define AT(T, p, s, i) (*(T *)((p) + (i) * (s)))

static void load_float(double *restrict v, const char *p, int64_t s, int64_t n, cn_dtype dt) {
    switch (dt) {
    case CN_F32: for (int64_t i = 0; i < n; i++) v[i] = AT(const float, p, s, i); break;
    case CN_F64: for (int64_t i = 0; i < n; i++) v[i] = AT(const double, p, s, i); break;
    case CN_F16: for (int64_t i = 0; i < n; i++) v[i] = f16_to_f32(AT(const uint16_t, p, s, i));
        break;
    case CN_BF16: for (int64_t i = 0; i < n; i++) v[i] = bf16_to_f32(AT(const uint16_t, p, s, i));
        break;
    default: break;
    }
}

static void load_int(int64_t *restrict v, const char *p, int64_t s, int64_t n, cn_dtype dt) {
    switch (dt) {
    case CN_I32: for (int64_t i = 0; i < n; i++) v[i] = AT(const int32_t, p, s, i); break;
    case CN_I64: for (int64_t i = 0; i < n; i++) v[i] = AT(const int64_t, p, s, i); break;
    case CN_U8:
    case CN_BOOL: for (int64_t i = 0; i < n; i++) v[i] = AT(const uint8_t, p, s, i); break;
    default: break;
    }
}

/* float -> integer: truncate toward zero, saturate to [lo, hi], NaN -> 0. Both bounds are exact
 * doubles (or 2^63 for INT64_MAX), so the comparisons decide before any conversion happens. */
#define FLOAT_TO_INT(T, v, lo, hi) \
    ((v) != (v) ? (T)0 : (v) <= (double)(lo) ? (T)(lo) : (v) >= (double)(hi) ? (T)(hi) : (T)(v))

static void store_float(char *p, int64_t s, const double *restrict v, int64_t n, cn_dtype dt) {
    switch (dt) {
    case CN_F32: for (int64_t i = 0; i < n; i++) AT(float, p, s, i) = (float)v[i]; break;
    case CN_F64: for (int64_t i = 0; i < n; i++) AT(double, p, s, i) = v[i]; break;
    case CN_F16: for (int64_t i = 0; i < n; i++) AT(uint16_t, p, s, i) = f32_to_f16((float)v[i]);
        break;
    case CN_BF16:
        for (int64_t i = 0; i < n; i++) AT(uint16_t, p, s, i) = f32_to_bf16((float)v[i]);
        break;
    case CN_I32:
        for (int64_t i = 0; i < n; i++)
            AT(int32_t, p, s, i) = FLOAT_TO_INT(int32_t, v[i], INT32_MIN, INT32_MAX);
        break;
    case CN_I64:
        for (int64_t i = 0; i < n; i++)
            AT(int64_t, p, s, i) = FLOAT_TO_INT(int64_t, v[i], INT64_MIN, INT64_MAX);
        break;
    case CN_U8:
        for (int64_t i = 0; i < n; i++) AT(uint8_t, p, s, i) = FLOAT_TO_INT(uint8_t, v[i], 0, 255);
        break;
    case CN_BOOL: for (int64_t i = 0; i < n; i++) AT(uint8_t, p, s, i) = v[i] != 0.0; break;
    default: break;
    }
}

static void store_int(char *p, int64_t s, const int64_t *restrict v, int64_t n, cn_dtype dt) {
    switch (dt) {
    case CN_F32: for (int64_t i = 0; i < n; i++) AT(float, p, s, i) = (float)v[i]; break;
    case CN_F64: for (int64_t i = 0; i < n; i++) AT(double, p, s, i) = (double)v[i]; break;
    case CN_F16: for (int64_t i = 0; i < n; i++) AT(uint16_t, p, s, i) = f32_to_f16((float)v[i]);
        break;
    case CN_BF16:
        for (int64_t i = 0; i < n; i++) AT(uint16_t, p, s, i) = f32_to_bf16((float)v[i]);
        break;
    case CN_I32: for (int64_t i = 0; i < n; i++) AT(int32_t, p, s, i) = (int32_t)v[i]; break;
    case CN_I64: for (int64_t i = 0; i < n; i++) AT(int64_t, p, s, i) = v[i]; break;
    case CN_U8: for (int64_t i = 0; i < n; i++) AT(uint8_t, p, s, i) = (uint8_t)v[i]; break;
    case CN_BOOL: for (int64_t i = 0; i < n; i++) AT(uint8_t, p, s, i) = v[i] != 0; break;
    default: break;
    }
}

static int is_float_dtype(cn_dtype dt) {
    return dt == CN_F32 || dt == CN_F64 || dt == CN_F16 || dt == CN_BF16;
}

typedef struct cast_ctx {
    cn_dtype src, dst;
} cast_ctx;

/* operand 0: out (dst dtype), operand 1: in (src dtype) */
static void cast_row(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {
    const cast_ctx *c = ctx;
    for (int64_t b = 0; b < n; b += CAST_BLOCK) {
        int64_t m = n - b < CAST_BLOCK ? n - b : CAST_BLOCK;
        char *dst = ptrs[0] + b * step[0];
        const char *src = ptrs[1] + b * step[1];
        if (is_float_dtype(c->src)) {
            double v[CAST_BLOCK];
            load_float(v, src, step[1], m, c->src);
            store_float(dst, step[0], v, m, c->dst);
        } else {
            int64_t v[CAST_BLOCK];
            load_int(v, src, step[1], m, c->src);
            store_int(dst, step[0], v, m, c->dst);
        }
    }
}

/* Same dtype: moves elements as raw words of the dtype's size (ctx points at that size). */
static void copy_row(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {
    const int64_t es = *(const int64_t *)ctx;
    if (step[0] == es && step[1] == es) {
        memmove(ptrs[0], ptrs[1], (size_t)(n * es)); /* a copy may overlap its source */
        return;
    }
    switch (es) {
    case 1: for (int64_t i = 0; i < n; i++) AT(uint8_t, ptrs[0], step[0], i) =
                AT(const uint8_t, ptrs[1], step[1], i);
        break;
    case 2: for (int64_t i = 0; i < n; i++) AT(uint16_t, ptrs[0], step[0], i) =
                AT(const uint16_t, ptrs[1], step[1], i);
        break;
    case 4: for (int64_t i = 0; i < n; i++) AT(uint32_t, ptrs[0], step[0], i) =
                AT(const uint32_t, ptrs[1], step[1], i);
        break;
    default: for (int64_t i = 0; i < n; i++) AT(uint64_t, ptrs[0], step[0], i) =
                AT(const uint64_t, ptrs[1], step[1], i);
        break;
    }
}

static int valid_dtype(cn_dtype dt) {
    return (int)dt >= 0 && dt < CN_DTYPE_COUNT;
}

/* A dtype outside the enum: a guard against a direct call (the router passes valid ones). */
static cn_status bad_dtype(const cn_kernel_args *a, cn_dtype dt) {
    return cn__kernel_dtype_error("cpu", a->op, dt);
}

/* in[0] (src dtype, any strides) -> out[0] (dst dtype, any strides). Serves cast and copy. */
cn_status cpu_cast(const cn_kernel_args *a) {
    cn_dtype src = a->in[0].dtype, dst = a->out[0].dtype;
    if (!valid_dtype(src)) return bad_dtype(a, src);
    if (!valid_dtype(dst)) return bad_dtype(a, dst);

    const cn_view *views[2] = {&a->out[0], &a->in[0]};
    cpu_iter it;
    cpu_iter_init(&it, 2, views);
    if (src == dst) {
        int64_t es = (int64_t)cn_dtype_size(src);
        cpu_iter_run(&it, copy_row, &es);
    } else {
        cast_ctx c = {src, dst};
        cpu_iter_run(&it, cast_row, &c);
    }
    return CN_OK;
}

/* ---- fill ------------------------------------------------------------------------------------ */

typedef struct fill_ctx {
    int64_t size;
    unsigned char bytes[8]; /* the value, already in the output dtype */
} fill_ctx;

static void fill_row(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {
    const fill_ctx *c = ctx;
    switch (c->size) {
    case 1: {
        uint8_t v;
        memcpy(&v, c->bytes, 1);
        for (int64_t i = 0; i < n; i++) AT(uint8_t, ptrs[0], step[0], i) = v;
        break;
    }
    case 2: {
        uint16_t v;
        memcpy(&v, c->bytes, 2);
        for (int64_t i = 0; i < n; i++) AT(uint16_t, ptrs[0], step[0], i) = v;
        break;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, c->bytes, 4);
        for (int64_t i = 0; i < n; i++) AT(uint32_t, ptrs[0], step[0], i) = v;
        break;
    }
    default: {
        uint64_t v;
        memcpy(&v, c->bytes, 8);
        for (int64_t i = 0; i < n; i++) AT(uint64_t, ptrs[0], step[0], i) = v;
        break;
    }
    }
}

/* out[0] (any strides) = reals[0], converted to its dtype by the cast rules. */
cn_status cpu_fill(const cn_kernel_args *a) {
    cn_dtype dt = a->out[0].dtype;
    if (!valid_dtype(dt)) return bad_dtype(a, dt);
    if (a->n_reals < 1)
        return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                            "the kernel needs the fill value in reals[0]; call cn_full");
    fill_ctx c = {.size = (int64_t)cn_dtype_size(dt)};
    store_float((char *)c.bytes, 0, &a->reals[0], 1, dt);

    const cn_view *views[1] = {&a->out[0]};
    cpu_iter it;
    cpu_iter_init(&it, 1, views);
    cpu_iter_run(&it, fill_row, &c);
    return CN_OK;
}

/* ---- random ---------------------------------------------------------------------------------- */

typedef struct rand_params {
    int normal;
    uint64_t seed, offset;
    double p0, p1; /* low, high or mean, std */
    cn_dtype dtype;
} rand_params;

/* Elements [begin, end) of a random call into the contiguous buffer out (philox.h's rules). */
static void rand_range(const rand_params *r, void *out, int64_t begin, int64_t end) {
    const uint64_t seed = r->seed, off = r->offset;
    const double p0 = r->p0, p1 = r->p1;
    switch (r->dtype) {
    case CN_F32: {
        float *o = out;
        if (r->normal)
            for (int64_t i = begin; i < end; i++)
                o[i] = (float)cn_philox_normal(seed, off, (uint64_t)i, p0, p1);
        else
            for (int64_t i = begin; i < end; i++)
                o[i] = cn_philox_uniform_f32(seed, off, (uint64_t)i, p0, p1);
        break;
    }
    case CN_F64: {
        double *o = out;
        if (r->normal)
            for (int64_t i = begin; i < end; i++)
                o[i] = cn_philox_normal(seed, off, (uint64_t)i, p0, p1);
        else
            for (int64_t i = begin; i < end; i++)
                o[i] = cn_philox_uniform_f64(seed, off, (uint64_t)i, p0, p1);
        break;
    }
    default: { /* f16, bf16: the f32 value, rounded once more */
        uint16_t *o = out;
        int bf16 = r->dtype == CN_BF16;
        for (int64_t i = begin; i < end; i++) {
            float f = r->normal ? (float)cn_philox_normal(seed, off, (uint64_t)i, p0, p1)
                                : cn_philox_uniform_f32(seed, off, (uint64_t)i, p0, p1);
            uint16_t h = bf16 ? f32_to_bf16(f) : f32_to_f16(f);
            if (!r->normal && p0 < p1) {
                float back = bf16 ? bf16_to_f32(h) : f16_to_f32(h);
                if ((double)back >= p1) h = half_bits_below(h); /* rounded up onto high */
            }
            o[i] = h;
        }
        break;
    }
    }
}

typedef struct rand_job {
    const rand_params *r;
    void *out;
} rand_job;

static void rand_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const rand_job *j = ctx;
    rand_range(j->r, j->out, begin, end);
}

/* out[0] contiguous f32/f64/f16/bf16; ints[0] = seed, ints[1] = offset; reals = (low, high) or
 * (mean, std). Element i depends only on (seed, offset + i), so any thread split gives the same
 * numbers. */
cn_status cpu_rand(const cn_kernel_args *a) {
    const cn_view *out = &a->out[0];
    /* dtype: a float one (the op's kinds; the router checks) */
    if (a->n_ints < 2 || a->n_reals < 2)
        return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                            "the kernel needs ints = (seed, offset) and two reals; call "
                            "cn_rand_uniform or cn_rand_normal");
    rand_params r = {
        .normal = a->op == CN_OP_RAND_NORMAL,
        .seed = (uint64_t)a->ints[0],
        .offset = (uint64_t)a->ints[1],
        .p0 = a->reals[0],
        .p1 = a->reals[1],
        .dtype = out->dtype,
    };
    int64_t n = 1;
    for (int d = 0; d < out->ndim; d++) n *= out->shape[d];
    rand_job j = {&r, out->data};
    cpu_parallel(n, cpu_chunks(n, CPU_PARALLEL_GRAIN), rand_chunk, &j);
    return CN_OK;
}
