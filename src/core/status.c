/* Status strings and the per-thread error detail. */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[256];

flashattn_status fa_fail(flashattn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

void fa_clear_error(void) { last_error[0] = '\0'; }

const char *flashattn_last_error(void) { return last_error; }

const char *flashattn_strerror(flashattn_status s) {
    switch (s) {
    case FLASHATTN_OK: return "success";
    case FLASHATTN_ERR_NULL_POINTER: return "a required pointer is NULL";
    case FLASHATTN_ERR_BAD_SHAPE: return "invalid or inconsistent tensor shape";
    case FLASHATTN_ERR_BAD_HEAD_DIM: return "head_dim must be between 1 and 512";
    case FLASHATTN_ERR_BAD_HEADS: return "heads_q must be a positive multiple of heads_kv";
    case FLASHATTN_ERR_BAD_STRIDE: return "invalid stride (head_dim stride must be 1)";
    case FLASHATTN_ERR_BAD_DTYPE: return "unsupported dtype";
    case FLASHATTN_ERR_BAD_PARAM: return "invalid parameter";
    case FLASHATTN_ERR_BAD_TILE: return "tile size not supported by the kernels";
    case FLASHATTN_ERR_WORKSPACE_TOO_SMALL: return "workspace too small";
    case FLASHATTN_ERR_OVERFLOW: return "size overflows 64-bit arithmetic";
    case FLASHATTN_ERR_OUT_OF_MEMORY: return "out of memory";
    case FLASHATTN_ERR_UNSUPPORTED: return "not supported";
    default: return "unknown status code";
    }
}
