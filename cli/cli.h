/* cli.h -- shared pieces of the nvfp4 command. */
#ifndef NVFP4_CLI_H
#define NVFP4_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "nvfp4.h"

/* Print "nvfp4 <cmd>: <message>" (one line) on stderr; returns 1 (the exit status). */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, appending the library's last error. */
int cli_lib_error(const char *cmd, nvfp4_status st, const char *what);

/* Progress on stderr, only when stderr is a terminal: a rewritten line. */
int cli_is_tty(void);
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_progress_done(void);
/* Adapter for nvfp4_st_writer_write's progress callback (ctx: a label string). */
void cli_write_progress(void *ctx, uint64_t done, uint64_t total);

/* Parse helpers: return 0 on success. */
int cli_parse_int(const char *s, long long *out);
int cli_parse_float(const char *s, float *out);

/* The options several commands share, parsed in one place: --threads N
 * (0..1024, 0 = all cores) into *threads, --backend auto|cpu|cuda into
 * *backend, --model sm90|exact|sm120 into *model; a NULL pointer means the
 * command has no such option.  argv[*i] is the argument looked at; a match
 * consumes its value (*i advances).  @return 1 matched, 0 not one of them,
 * -1 a bad value (error printed). */
int cli_shared_option(const char *cmd, int argc, char **argv, int *i, long long *threads,
                      const char **backend, nvfp4_model *model);

/* "FILE:NAME" -> file path and tensor name (split at the last ':'). */
int cli_split_spec(const char *spec, char *path, size_t path_len, const char **name);

/* Read a tensor of any float dtype (F32, F16, BF16) as a float array (malloc'ed). */
nvfp4_status cli_tensor_to_f32(const nvfp4_st_tensor *t, float **out);

double cli_now(void); /* monotonic seconds */

/* 1 if s ends with suffix. */
int cli_ends_with(const char *s, const char *suffix);

/* Monotone FP32 ordering: the distance in ULPs between two finite floats. */
uint64_t cli_ulp_distance(float a, float b);

/* 1 if both paths name the same existing file (st_dev and st_ino). */
int cli_same_file(const char *a, const char *b);
/* An error unless out is a different file than in (or force): 0 if fine. */
int cli_refuse_same_file(const char *cmd, const char *in, const char *out, int force);

/* s with control bytes (< 0x20, 0x7F) as \xNN, into buf (always terminated; a
 * string that does not fit ends in "..."). */
const char *cli_printable(char *buf, size_t len, const char *s);

/* Count the NaN and Inf values of n elements of a float dtype (F32, F16, BF16). */
int64_t cli_count_nonfinite(const void *data, nvfp4_dtype dtype, int64_t n);

/* Shared by matmul, linear and check (common.c). */
int cli_load_nvfp4_spec(const char *cmd, const char *spec, nvfp4_tensor *t);
int cli_load_vector_spec(const char *cmd, const char *spec, int64_t n, float **out);
int cli_write_result(const char *cmd, const char *path, const float *raw, const uint16_t *out,
                     int64_t m, int64_t n);
void cli_report_exact(const nvfp4_gemm_args *g, const float *raw, const uint16_t *out);

/* Subcommands. */
int cmd_quantize(int argc, char **argv);
int cmd_dequantize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_matmul(int argc, char **argv);
int cmd_linear(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_example(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_convert(int argc, char **argv);

#endif
