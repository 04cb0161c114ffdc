/* rcp_sm90_table.c -- a look-up in the H200's rcp.approx.ftz.f32 table
 * (quant_sm90.h).  The array itself is generated at build time from
 * rcp_sm90_table.bin.xz by tools/rcp_table_c.c. */
#include "quant/quant_sm90.h"

int nvfp4_sm90_rcp_diff(uint32_t m)
{
    m &= 0x7FFFFFu;
    unsigned c = (unsigned)(nvfp4_sm90_rcp_packed[m >> 5] >> (2u * (m & 31u))) & 3u;
    return c == 1u ? 1 : c == 2u ? -1 : 0;
}
