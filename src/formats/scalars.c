/* scalars.c -- the scalar formats: E2M1, E4M3 (fn), BF16, F16 <-> FP32.
 *
 * Encoders reproduce the exact bit-level algorithms ComfyUI's quantizer runs
 * (comfy-kitchen's E2M1 rounding, PyTorch's float8_e4m3fn cast), including
 * what they do with NaN and out-of-range inputs; docs/FORMATS.md has the
 * rules.  Every FP32 operation here is a single correctly rounded IEEE op. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "formats/layout.h"

uint32_t nvfp4_f32_bits(float v) { return nvfp4_bits_of_f32(v); }

float nvfp4_f32_from_bits(uint32_t bits)
{
    return nvfp4_f32_of_bits(bits);
}

/*-------------------------------- E2M1 --------------------------------*/

float nvfp4_e2m1_to_f32(uint8_t code)
{
    return nvfp4_e2m1_value(code);
}

uint8_t nvfp4_e2m1_from_f32(float v)
{
    uint32_t bits = nvfp4_f32_bits(v);
    uint8_t sign = (uint8_t)((bits >> 31) << 3);
    uint32_t mag = bits & 0x7FFFFFFFu;
    float a = nvfp4_f32_from_bits(mag);
    uint8_t code;
    if (a >= 6.0f) {
        code = 7; /* saturate (also +Inf); false for NaN */
    } else if (a < 1.0f) {
        /* Below the smallest normal (1.0): adding 2^22 (whose ulp is 0.5)
         * rounds a to a multiple of 0.5 with RNE; the low bits are the code
         * (0, 1 or 2; 2 is the normal 1.0). */
        code = (uint8_t)(nvfp4_f32_bits(a + 4194304.0f) - 0x4A800000u);
    } else {
        /* Normal range, and every NaN (both comparisons above are false):
         * rebias the exponent (127 -> 1), round the 23-bit mantissa to 1 bit
         * with ties to even, keep the low 8 bits of the result.  A NaN comes
         * out as 2, 3 or 4 depending on its payload (the quiet NaN
         * 0x7FC00000 gives 3, 0x7FF00000 and 0x7FFFFFFF give 4), exactly as
         * comfy-kitchen's integer arithmetic does. */
        uint32_t odd = (mag >> 22) & 1u;
        code = (uint8_t)((mag - 0x3F000000u + 0x001FFFFFu + odd) >> 22);
    }
    return (uint8_t)(code | sign);
}

/*-------------------------------- E4M3 --------------------------------*/

float nvfp4_e4m3_to_f32(uint8_t byte)
{
    uint32_t sign = (uint32_t)(byte & 0x80) << 24;
    uint32_t exp = (byte >> 3) & 15u, man = byte & 7u;
    if (exp == 15 && man == 7) /* the NaN decodes to PyTorch's bits */
        return nvfp4_f32_from_bits(sign | 0x7FF00000u);
    float m = exp == 0 ? ldexpf((float)man, -9) : ldexpf((float)(8 + man), (int)exp - 10);
    return (byte & 0x80) ? -m : m;
}

uint8_t nvfp4_e4m3_from_f32(float v)
{
    uint32_t bits = nvfp4_f32_bits(v);
    uint8_t sign = (uint8_t)((bits >> 24) & 0x80);
    uint32_t mag = bits & 0x7FFFFFFFu;
    uint8_t byte;
    if (mag >= 0x43F00000u) { /* |v| >= 480, Inf, NaN */
        byte = 0x7F;
    } else if (mag < 0x3C800000u) { /* |v| < 2^-6: subnormal or zero */
        /* 2^14 has an ulp of 2^-9, the E4M3 subnormal step: the FP32 add
         * rounds |v| to that grid (RNE); the low bits are the byte. */
        byte = (uint8_t)(nvfp4_f32_bits(nvfp4_f32_from_bits(mag) + 16384.0f) - 0x46800000u);
    } else {
        /* Rebias 127 -> 7 and round 23 mantissa bits to 3, ties to even.
         * Values in (464, 480) carry into 0x7F, which is NaN: PyTorch's cast
         * behaves the same. */
        uint32_t odd = (mag >> 20) & 1u;
        byte = (uint8_t)((mag - 0x3C000000u + 0x0007FFFFu + odd) >> 20);
    }
    return (uint8_t)(byte | sign);
}

/*---------------------------- BF16 and F16 ----------------------------*/

float nvfp4_bf16_to_f32(uint16_t bits)
{
    return nvfp4_f32_from_bits((uint32_t)bits << 16);
}

uint16_t nvfp4_bf16_from_f32(float v)
{
    uint32_t b = nvfp4_f32_bits(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep sign and top payload, make quiet */
        return (uint16_t)((b >> 16) | 0x0040u);
    b += 0x7FFFu + ((b >> 16) & 1u); /* RNE; a carry into the exponent is right */
    return (uint16_t)(b >> 16);
}

float nvfp4_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 31u, man = h & 0x3FFu;
    if (exp == 31) return nvfp4_f32_from_bits(sign | 0x7F800000u | (man << 13));
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact */
        float m = ldexpf((float)man, -24);
        return sign ? -m : m;
    }
    return nvfp4_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t nvfp4_f16_from_f32(float v)
{
    uint32_t b = nvfp4_f32_bits(v);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    uint32_t mag = b & 0x7FFFFFFFu;
    if (mag > 0x7F800000u) /* NaN: quiet, same sign, top payload bits */
        return (uint16_t)(sign | 0x7E00u | ((mag >> 13) & 0x3FFu));
    if (mag >= 0x477FF000u) /* >= 65520 rounds to Inf (65520 is the tie, Inf "even") */
        return (uint16_t)(sign | 0x7C00u);
    if (mag < 0x38800000u) {
        /* Below 2^-14: 0.5 has an ulp of 2^-24, the F16 subnormal step, so
         * the FP32 add rounds to it (RNE); a result of 0x400 is the
         * smallest normal, encoded correctly by the same bits. */
        uint32_t r = nvfp4_f32_bits(nvfp4_f32_from_bits(mag) + 0.5f) - 0x3F000000u;
        return (uint16_t)(sign | r);
    }
    uint32_t odd = (mag >> 13) & 1u;
    return (uint16_t)(sign | ((mag - 0x38000000u + 0x0FFFu + odd) >> 13));
}
