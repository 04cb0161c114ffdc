/* cli.h -- shared pieces of the nvfp4 command. */
#ifndef NVFP4_CLI_H
#define NVFP4_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "nvfp4.h"
/* The library's atomic files (internal to libnvfp4; the command links the
 * static archive): every output is written through them. */
#include "io/atomic.h"

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

/* Parsing numbers: 0 on success. */
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

/* SIGINT, SIGTERM, SIGHUP and SIGQUIT (where their action is the default)
 * remove the temporary files of the outputs being written, then end the
 * process as the signal would have; SIGBUS (an input truncated while it is
 * mapped) removes them and exits 1 with a message.  Installed by main(). */
void cli_install_signal_handlers(void);

/* 1 if both paths name the same file: the same existing file (st_dev and
 * st_ino, links followed), or, where one does not exist yet, the same name
 * in the same directory. */
int cli_same_file(const char *a, const char *b);
/* The files a command reads (inputs) and writes (outputs): an error when an
 * output is an input (unless force) or two outputs are one file.  NULL
 * entries are skipped.  0 if fine, else 1 (message printed). */
int cli_check_paths(const char *cmd, const char *const *inputs, int n_in,
                    const char *const *outputs, int n_out, int force);

/* Outputs are opened (a temporary file beside each) before the work that
 * fills them, so an unwritable path fails at once, and committed at the end:
 * 0, or 1 with the message printed (the temporary file is removed). */
int cli_open_output(const char *cmd, const char *path, nvfp4_atomic_file **f);
int cli_commit_safetensors(const char *cmd, nvfp4_st_writer *w, nvfp4_atomic_file *f,
                           const char *path);
int cli_commit_text(const char *cmd, nvfp4_atomic_file *f, const char *text);
/* Commit w into f when st (how filling w went) is NVFP4_OK, else discard f
 * and say why; w is freed either way.  0, or 1 with the message printed. */
int cli_commit_prepared(const char *cmd, nvfp4_status st, nvfp4_st_writer *w,
                        nvfp4_atomic_file *f, const char *path);

/* "1 NaN and 2 Inf values (the first, NaN, at row 3, col 17)" into buf. */
const char *cli_nonfinite_str(char *buf, size_t len, const nvfp4_nonfinite *nf);
/* Say what NaN / Inf values did: `what` (a name, quoted in the message) held
 * *in before the quantizer made q, whose first rows x cols values are what
 * it became (computed_scale: q's per-tensor scale is amax/2688 of the input;
 * quantizer: whose arithmetic made it, "ComfyUI's").
 * A warning on stderr, or with strict an error.  0, or 1 when strict refused. */
int cli_report_quantized(const char *cmd, const char *what, const nvfp4_nonfinite *in,
                         const nvfp4_tensor *q, int64_t rows, int64_t cols, int computed_scale,
                         const char *quantizer, int strict);
/* NaN / Inf among an NVFP4 operand's values (what: "the weight 'L.weight'"),
 * and among m x n BF16 outputs: a warning, or with strict an error.  0, or 1
 * when strict refused. */
int cli_report_operand(const char *cmd, const char *what, const nvfp4_tensor *t, int strict);
int cli_report_outputs(const char *cmd, const uint16_t *out, int64_t m, int64_t n, int strict);
/* A warning line on stderr, or with strict an error saying --strict refused:
 * 0, or 1 when strict refused. */
int cli_nonfinite_notice(const char *cmd, int strict, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* s with control bytes (< 0x20, 0x7F) as \xNN, into buf (always terminated; a
 * string that does not fit ends in "..."). */
const char *cli_printable(char *buf, size_t len, const char *s);

/* Shared by matmul, linear and check (common.c).  Loading a tensor that is
 * stored as floats, not NVFP4, says to quantize it first. */
int cli_load_nvfp4_spec(const char *cmd, const char *spec, nvfp4_tensor *t);
/* NAME is stored as floats, not NVFP4, in the checkpoint c read from path:
 * 1 with the hint "quantize it first" printed, else 0. */
int cli_not_quantized(const char *cmd, const nvfp4_ckpt *c, const char *path, const char *name);
/* Layer LAYER of the checkpoint c (opened from path, any format). */
int cli_load_layer(const char *cmd, const nvfp4_ckpt *c, const char *path, const char *layer,
                   nvfp4_layer *l);
int cli_load_vector_spec(const char *cmd, const char *spec, int64_t n, float **out);
/* Commit raw (F32) and out (BF16) [m, n] to an output opened with cli_open_output. */
int cli_write_result(const char *cmd, nvfp4_atomic_file *f, const char *path, const float *raw,
                     const uint16_t *out, int64_t m, int64_t n);
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
