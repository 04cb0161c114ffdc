/* test_rcp_sm90_table.c -- the H200 rcp.approx.ftz.f32 table the build
 * embeds (src/quant/rcp_sm90_table.bin.xz -> nvfp4_sm90_rcp_diff) is the one
 * tests/gpu/probe_fastmath.cu measured: its counts, a few entries, and
 * reciprocals the probe printed from the hardware. */
#include <stdio.h>
#include <string.h>

#include "quant/quant_sm90.h"
#include "testlib.h"

static uint32_t bits(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}

int main(void)
{
    TEST("counts of the measured differences (probe_fastmath.txt)")
    {
        long minus = 0, plus = 0, zero = 0, other = 0;
        for (uint32_t m = 0; m < (1u << 23); m++) {
            int d = nvfp4_sm90_rcp_diff(m);
            if (d == -1) minus++;
            else if (d == 1) plus++;
            else if (d == 0) zero++;
            else other++;
        }
        CHECKF(minus + plus == 1108522, "%ld mantissas differ, the H200 1108522", minus + plus);
        CHECKF(minus == 374723, "-1 ulp: %ld, the H200 374723", minus);
        CHECKF(plus == 733799, "+1 ulp: %ld, the H200 733799", plus);
        CHECKF(zero == 7280086 && other == 0, "0 ulp: %ld (7280086), other: %ld (0)", zero, other);
    }
    TEST("entries of the probe's rcp_table.bin (first and last of each kind)")
    {
        static const struct { uint32_t m; int diff; } want[] = {
            {1449, -1}, {1450, -1}, {1451, -1}, {8376316, -1}, {8376318, -1},
            {59442, 1}, {59478, 1}, {59584, 1}, {8385536, 1}, {8385552, 1},
            {0, 0}, {0x600000, 0}, {3115934, 0}, {3868131, 0}, {4878104, 0}, {0x7FFFFF, 0},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            CHECKF(nvfp4_sm90_rcp_diff(want[i].m) == want[i].diff, "m = %u: diff %d, table %d",
                   want[i].m, nvfp4_sm90_rcp_diff(want[i].m), want[i].diff);
        /* only the low 23 bits select an entry */
        CHECK(nvfp4_sm90_rcp_diff(0x3F800000u | 1449u) == -1);
    }
    TEST("reciprocals the H200 printed: table + exponent")
    {
        /* rcp.approx.ftz(448 = 1.75 * 2^8) = 0x3B124925; rcp(1) = 1;
         * rcp(2^-126) = 2^126 (0x7E800000) */
        uint32_t m448 = 0x43E00000u & 0x7FFFFFu;
        uint32_t r448 = bits(1.0f / 1.75f) + (uint32_t)nvfp4_sm90_rcp_diff(m448) - (8u << 23);
        CHECKF(r448 == 0x3B124925u, "rcp(448) = 0x%08x, the H200 0x3B124925", r448);
        CHECK(bits(1.0f) + (uint32_t)nvfp4_sm90_rcp_diff(0) == 0x3F800000u);
        CHECK(bits(1.0f) + (uint32_t)nvfp4_sm90_rcp_diff(0) + (126u << 23) == 0x7E800000u);
    }
    return test_summary("rcp_sm90_table");
}
