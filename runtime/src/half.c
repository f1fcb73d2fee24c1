/* half.c: the f16 and bf16 scalar conversions.
 *
 * The f16 conversion is done in integer arithmetic rather than with _Float16
 * or F16C so it is identical on every compiler and CPU: round to nearest
 * even, subnormals produced and consumed, overflow to inf, and NaN kept as a
 * quiet NaN with its sign and top payload bits (as x86 F16C does). bf16
 * rounds to nearest even and forces NaNs quiet so that a NaN whose payload
 * lives only in the low bits does not round to inf. */
#include "gt/quant.h"

#include <string.h>

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float gt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        /* Zero or subnormal: man * 2^-24 is exact in f32. */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) /* inf (man == 0) or NaN, payload kept */
        return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp + (127 - 15)) << 23) | (man << 13));
}

uint16_t gt_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    /* 65520 is halfway between 65504 (odd mantissa) and 2^16: the tie and
     * everything above it round to inf. */
    if (ax >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00);
    if (ax >= 0x38800000u) { /* normal f16 range: >= 2^-14 */
        uint32_t h = (ax >> 13) - ((uint32_t)(127 - 15) << 10);
        uint32_t rem = ax & 0x1fff;
        /* A carry out of the mantissa bumps the exponent, which is right. */
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    /* 2^-25 is the tie between 0 and the smallest subnormal: it goes to 0. */
    if (ax <= 0x33000000u)
        return sign;
    /* Subnormal result: the value in units of 2^-24 is m >> shift. */
    uint32_t e = ax >> 23;            /* 102..112 here */
    uint32_t m = (ax & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;         /* 14..24 */
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
        h++; /* may become 0x400, the smallest normal: also right */
    return (uint16_t)(sign | h);
}

float gt_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t gt_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
