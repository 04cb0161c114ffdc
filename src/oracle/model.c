/* model.c -- names of the accumulation models; the K-slice rule of the contract. */
#include <string.h>

#include "internal.h"

static const char *const model_names[] = {"sm90", "exact", "sm120"};

const char *nvfp4_model_name(nvfp4_model model)
{
    if ((int)model < 0 || (int)model >= (int)(sizeof model_names / sizeof model_names[0]))
        return "invalid";
    return model_names[model];
}

nvfp4_status nvfp4_model_from_name(nvfp4_model *out, const char *name)
{
    if (!out || !name)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_model_from_name: NULL argument");
    for (int i = 0; i < (int)(sizeof model_names / sizeof model_names[0]); i++) {
        if (strcmp(name, model_names[i]) == 0) {
            *out = (nvfp4_model)i;
            return NVFP4_OK;
        }
    }
    return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                      "unknown accumulation model \"%s\" (expected sm90, exact or sm120)", name);
}

int64_t nvfp4_k_slice_elems(int64_t k, int k_slices)
{
    if (k < 0) k = 0;
    int64_t groups = k / 64 + (k % 64 != 0);
    int64_t s = k_slices < 1 ? 1 : k_slices > NVFP4_MAX_K_SLICES ? NVFP4_MAX_K_SLICES : k_slices;
    int64_t per = groups / s + (groups % s != 0);
    return (per < 1 ? 1 : per) * 64;
}
