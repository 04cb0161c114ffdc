/* cmd_bench.c -- `nvfp4 bench`: forwards to the CUDA benchmark (bench/). */
#include <string.h>

#include "cli.h"

#if defined(NVFP4_WITH_CUDA)
int nvfp4_cli_bench(int argc, char **argv); /* bench/bench.c */
#endif

int cmd_bench(int argc, char **argv)
{
#if defined(NVFP4_WITH_CUDA)
    return nvfp4_cli_bench(argc, argv);
#else
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs("usage: nvfp4 bench [--json FILE] [--m LIST] [--quick]\n"
                  "\nTimes the H200 kernel against cuBLAS BF16 and FP8 side by side.  This build\n"
                  "has no CUDA (nvcc was not found when it was built).\n", stdout);
            return 0;
        }
    return cli_error("bench", "no CUDA device: this nvfp4 was built without CUDA; rebuild "
                              "where nvcc is installed and run on an H100 or H200");
#endif
}
