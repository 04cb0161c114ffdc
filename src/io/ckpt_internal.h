/* ckpt_internal.h -- the checkpoint handle's insides, shared by ckpt.c and
 * convert.c; not installed. */
#ifndef NVFP4_CKPT_INTERNAL_H
#define NVFP4_CKPT_INTERNAL_H

#include <jansson.h>

#include "fmt_internal.h"

/* A tensor of the checkpoint: in a safetensors shard or in the GGUF file. */
typedef struct ck_entry {
    const char *name;
    int order;                 /* position in file order (shards in turn) */
    int shard;                 /* index into shards, -1 for GGUF */
    const nvfp4_st_tensor *st; /* or */
    const gguf_tensor *gg;
} ck_entry;

typedef struct ck_shard {
    char *name; /* file name in the directory */
    nvfp4_st_file *st;
} ck_shard;

struct nvfp4_ckpt {
    char *path;
    char *dir;       /* the directory holding config files */
    int is_dir;
    ck_shard *shards;
    size_t nshards;
    nvfp4_gguf *gguf;
    ck_entry *sorted; /* by name */
    size_t nsorted;
    json_t *config;   /* config.json, hf_quant_config.json, the index (or NULL) */
    json_t *hf_quant;
    json_t *index;
    nvfp4_format format;
    char evidence[512];
    char **weights;   /* NVFP4 tensors by weight name, file order */
    size_t nweights;
    const ck_entry **order; /* every tensor in file order */
    const char **meta_k, **meta_v; /* string metadata (GGUF's values: meta_owned) */
    size_t nmeta;
    char **meta_owned;
};

const ck_entry *nvfp4_ck_find(const nvfp4_ckpt *c, const char *name);

/* One F32 value stored as [] or [1] (GGUF: one F32 element): *found says
 * whether `name` exists; *ndim its rank.  An error when it is not that. */
nvfp4_status nvfp4_ck_scalar(const nvfp4_ckpt *c, const char *name, float *v, int *ndim, int *found);

/* nvfp4_ckpt_read's checks, shape and scalars without reading the arrays
 * (out->t.codes and scales NULL). */
nvfp4_status nvfp4_ck_probe(nvfp4_ckpt_tensor *out, const nvfp4_ckpt *c, const char *w);

#endif
