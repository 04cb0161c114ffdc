/* explain_common.h -- what the GPU explain programs (cublas_explain.c,
 * cublaslt_nvfp4_explain.c) share: a clock, list options and the best
 * candidate of an nvfp4_explain report. */
#ifndef NVFP4_TESTS_GPU_EXPLAIN_COMMON_H
#define NVFP4_TESTS_GPU_EXPLAIN_COMMON_H

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whether `item` is one of the comma-separated `list` (every item when NULL). */
static inline int explain_in_list(const char *list, const char *item)
{
    if (!list) return 1;
    size_t n = strlen(item);
    for (const char *p = list; (p = strstr(p, item)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

/* The best candidate of an nvfp4_explain report and its verdicts. */
typedef struct explain_found {
    char model[16], rule[16], combine[16];
    int k_slices, unique, ambiguous;
    long long matched, evaluated;
} explain_found;

/* 1 with *r filled from the JSON report, 0 when it does not parse. */
static inline int explain_parse(const char *json, explain_found *r)
{
    json_t *root = json_loads(json, 0, NULL);
    if (!root) return 0;
    json_t *b = json_object_get(root, "best");
    snprintf(r->model, sizeof r->model, "%s", json_string_value(json_object_get(b, "model")));
    snprintf(r->rule, sizeof r->rule, "%s", json_string_value(json_object_get(b, "slice_rule")));
    snprintf(r->combine, sizeof r->combine, "%s", json_string_value(json_object_get(b, "combine")));
    r->k_slices = (int)json_integer_value(json_object_get(b, "k_slices"));
    r->matched = json_integer_value(json_object_get(b, "matched_count"));
    r->evaluated = json_integer_value(json_object_get(b, "evaluated"));
    r->unique = json_is_true(json_object_get(root, "unique"));
    r->ambiguous = json_is_true(json_object_get(root, "ambiguous"));
    json_decref(root);
    return 1;
}

#endif
