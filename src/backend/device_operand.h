/* device_operand.h -- an NVFP4 operand as the sm_90 kernels read it
 * (device_operand.c); used by the host-memory conveniences. */
#ifndef NVFP4_BACKEND_DEVICE_OPERAND_H
#define NVFP4_BACKEND_DEVICE_OPERAND_H

#include "nvfp4.h"

/* t with hi-first codes and tiled scales, as ComfyUI stores it; with
 * pad_rows, also rows rounded up to a multiple of 16, as ComfyUI pads a
 * weight's rows and as the kernels need N (the padding rows are zero codes
 * with zero scales; their outputs are dropped).  *out is t itself when it
 * already is so, else *tmp (allocated here; the caller frees it). */
nvfp4_status nvfp4_device_operand(const nvfp4_tensor *t, int pad_rows, nvfp4_tensor *tmp,
                                  const nvfp4_tensor **out);

#endif
