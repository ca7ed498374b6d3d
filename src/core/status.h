/* Status codes with a per-thread detail message. */
#ifndef FA_CORE_STATUS_H
#define FA_CORE_STATUS_H

#include "flashattn.h"

/* Record a detail message for flashattn_last_error() and return s. */
flashattn_status fa_fail(flashattn_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void fa_clear_error(void);

#endif
