/* rcp_table_c.c -- build-time generator: the H200's rcp.approx.ftz.f32 table
 * (src/quant/rcp_sm90_table.bin.xz, decompressed, on stdin) -> a C source
 * defining nvfp4_sm90_rcp_packed (src/quant/quant_sm90.h) on stdout.
 *
 * Input format (tests/gpu/probe_fastmath.cu writes it): "NVFP4RCP", u32
 * little-endian 2^23, then 2 bits per mantissa m (byte m/4, bits 2*(m%4)
 * upward): 0 -> diff 0, 1 -> +1 ulp, 2 -> -1 ulp, 3 -> an exception listed
 * apart.  The H200 has no exceptions, so code 3 is refused here: a table
 * with one would need the model extended first.  The makefile compiles this
 * with the host compiler and runs `xz -dc ... | rcp_table_c > file.c`. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MANTISSAS (1u << 23)
#define PACKED_BYTES (MANTISSAS / 4)

static unsigned char table[12 + PACKED_BYTES + 1];

int main(void)
{
    size_t n = fread(table, 1, sizeof table, stdin);
    uint32_t count = (uint32_t)table[8] | (uint32_t)table[9] << 8 | (uint32_t)table[10] << 16 |
                     (uint32_t)table[11] << 24;
    if (n != 12 + PACKED_BYTES || memcmp(table, "NVFP4RCP", 8) != 0 || count != MANTISSAS) {
        fprintf(stderr, "rcp_table_c: input is not a %u-byte NVFP4RCP table of 2^23 mantissas\n",
                12 + PACKED_BYTES);
        return 1;
    }
    const unsigned char *packed = table + 12;
    for (uint32_t i = 0; i < PACKED_BYTES; i++)
        for (int slot = 0; slot < 4; slot++)
            if (((packed[i] >> (2 * slot)) & 3u) == 3u) {
                fprintf(stderr, "rcp_table_c: mantissa %u is an exception (code 3)\n",
                        4 * i + (uint32_t)slot);
                return 1;
            }
    printf("/* GENERATED at build time by tools/rcp_table_c.c from\n"
           " * src/quant/rcp_sm90_table.bin.xz; do not edit. */\n"
           "#include \"quant/quant_sm90.h\"\n\n"
           "const uint64_t nvfp4_sm90_rcp_packed[NVFP4_SM90_RCP_WORDS] = {\n");
    for (uint32_t w = 0; w < PACKED_BYTES / 8; w++) {
        uint64_t v = 0;
        for (int b = 7; b >= 0; b--) v = v << 8 | packed[8 * w + (uint32_t)b];
        printf("0x%llxu,%s", (unsigned long long)v, w % 8 == 7 ? "\n" : "");
    }
    printf("};\n");
    return ferror(stdout) ? 1 : 0;
}
