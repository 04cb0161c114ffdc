/* exact.c -- c + sum a[i] * b[i] computed exactly, rounded once to FP32 with
 * round-to-nearest-even.  Special values follow IEEE 754.
 *
 * The exact sum lives in one two's-complement fixed-point integer whose unit
 * is 2^-UNIT_SHIFT: that covers the smallest BF16 product (2^-133 * 2^-133 =
 * 2^-266) and FP32's smallest subnormal (2^-149); its 640 bits cover the
 * largest BF16 product (< 2^256) times any int64 number of terms. */
#include <string.h>

#include "oracle/oracle_internal.h"

#define UNIT_SHIFT 300
#define LIMBS 20 /* 32-bit limbs: 640 bits */

typedef struct wide {
    uint32_t limb[LIMBS]; /* little-endian two's complement */
} wide;

/* acc += (negative ? -1 : 1) * mant * 2^pos, with mant < 2^32 so that the
 * shifted value spans at most two limbs. */
static void wide_add(wide *acc, uint64_t mant, int pos, int negative)
{
    int index = pos / 32;
    uint64_t shifted = mant << (pos % 32); /* < 2^63 */
    uint64_t parts[2] = {shifted & 0xffffffffu, shifted >> 32};
    uint64_t carry = 0; /* carry when adding, borrow when subtracting */
    for (int i = index; i < LIMBS; i++) {
        uint64_t part = i - index < 2 ? parts[i - index] : 0;
        uint64_t cur = acc->limb[i];
        if (!negative) {
            uint64_t s = cur + part + carry;
            acc->limb[i] = (uint32_t)s;
            carry = s >> 32;
        } else {
            uint64_t need = part + carry;
            acc->limb[i] = (uint32_t)(cur - need);
            carry = cur < need;
        }
        if (i - index >= 1 && carry == 0) break;
    }
}

static int wide_is_negative(const wide *w) { return (int)(w->limb[LIMBS - 1] >> 31); }

static void wide_negate(wide *w)
{
    uint64_t carry = 1;
    for (int i = 0; i < LIMBS; i++) {
        uint64_t s = (uint64_t)(uint32_t)~w->limb[i] + carry;
        w->limb[i] = (uint32_t)s;
        carry = s >> 32;
    }
}

static int wide_bit(const wide *w, int i) { return i < 0 ? 0 : (int)((w->limb[i / 32] >> (i % 32)) & 1); }

static int wide_msb(const wide *w)
{
    for (int i = LIMBS - 1; i >= 0; i--) {
        if (w->limb[i]) {
            for (int b = 31; b >= 0; b--)
                if ((w->limb[i] >> b) & 1) return i * 32 + b;
        }
    }
    return -1;
}

/* Any bit set strictly below position i? */
static int wide_any_below(const wide *w, int i)
{
    for (int j = 0; j < i; j++)
        if (wide_bit(w, j)) return 1;
    return 0;
}

typedef struct value {
    int nan, inf, negative;
    uint64_t sig; /* integer significand */
    int lsb_exp;  /* value = sig * 2^lsb_exp */
} value;

static value decode(uint32_t bits, int ebits, int mbits)
{
    value v;
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t emax_field = (1u << ebits) - 1;
    uint32_t field = (bits >> mbits) & emax_field;
    uint32_t frac = bits & ((1u << mbits) - 1);
    memset(&v, 0, sizeof v);
    v.negative = (int)((bits >> (ebits + mbits)) & 1);
    if (field == emax_field) {
        v.nan = frac != 0;
        v.inf = frac == 0;
        return v;
    }
    v.sig = field ? ((1u << mbits) | frac) : frac;
    v.lsb_exp = (field ? (int)field : 1) - bias - mbits;
    return v;
}

static value decode16(uint16_t bits, nvfp4_operand type)
{
    return type == NVFP4_OPERAND_BF16 ? decode(bits, 8, 7) : decode(bits, 5, 10);
}

/* Round the non-negative fixed-point magnitude to FP32 bits (RNE). */
static uint32_t round_to_f32(const wide *mag)
{
    int p = wide_msb(mag);
    int min_keep = UNIT_SHIFT - 149; /* position of 2^-149 */
    int keep = p - 23 > min_keep ? p - 23 : min_keep;
    uint64_t m = 0;
    for (int i = p; i >= keep; i--) m = (m << 1) | (uint64_t)wide_bit(mag, i);
    int guard = wide_bit(mag, keep - 1);
    int sticky = wide_any_below(mag, keep - 1);
    if (guard && (sticky || (m & 1))) m++;
    uint64_t bits;
    if (keep == min_keep) {
        bits = m; /* subnormal or smallest binade: units of 2^-149 encode directly */
    } else {
        int x = p - UNIT_SHIFT; /* exponent of the leading bit */
        bits = ((uint64_t)(x + 127) << 23) + (m - (1u << 23));
    }
    return bits >= 0x7f800000u ? 0x7f800000u : (uint32_t)bits;
}

float nvfp4_exact_dot(float c, const uint16_t *a, const uint16_t *b, int64_t k, nvfp4_operand type)
{
    wide acc;
    memset(&acc, 0, sizeof acc);
    int nan = 0, pos_inf = 0, neg_inf = 0;
    int all_zero = 1, all_negative_zero = 1;

    uint32_t cbits;
    memcpy(&cbits, &c, sizeof cbits);
    value vc = decode(cbits, 8, 23);
    if (vc.nan) nan = 1;
    if (vc.inf) *(vc.negative ? &neg_inf : &pos_inf) = 1;
    if (!vc.nan && !vc.inf) {
        if (vc.sig) {
            all_zero = 0;
            wide_add(&acc, vc.sig, vc.lsb_exp + UNIT_SHIFT, vc.negative);
        }
        if (vc.sig || !vc.negative) all_negative_zero = 0;
    }

    for (int64_t i = 0; i < k; i++) {
        value x = decode16(a[i], type), y = decode16(b[i], type);
        int neg = x.negative ^ y.negative;
        if (x.nan || y.nan) {
            nan = 1;
            continue;
        }
        if (x.inf || y.inf) {
            if ((!x.inf && x.sig == 0) || (!y.inf && y.sig == 0)) nan = 1;
            else *(neg ? &neg_inf : &pos_inf) = 1;
            continue;
        }
        uint64_t mant = x.sig * y.sig;
        if (mant) {
            all_zero = 0;
            wide_add(&acc, mant, x.lsb_exp + y.lsb_exp + UNIT_SHIFT, neg);
        }
        if (mant || !neg) all_negative_zero = 0;
    }

    if (nan || (pos_inf && neg_inf)) return nvfp4_f32_from_bits(0x7fc00000u);
    if (pos_inf) return nvfp4_f32_from_bits(0x7f800000u);
    if (neg_inf) return nvfp4_f32_from_bits(0xff800000u);

    int negative = wide_is_negative(&acc);
    if (negative) wide_negate(&acc);
    if (wide_msb(&acc) < 0) {
        /* IEEE: an exact zero sum is +0 under RNE unless every addend is -0. */
        return nvfp4_f32_from_bits(all_zero && all_negative_zero ? 0x80000000u : 0);
    }
    return nvfp4_f32_from_bits((negative ? 0x80000000u : 0) | round_to_f32(&acc));
}
