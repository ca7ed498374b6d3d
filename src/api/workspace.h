/* The two-phase calls' workspace: the caller's, or one allocated here. */
#ifndef FA_WORKSPACE_H
#define FA_WORKSPACE_H

#include <stddef.h>

#include "flashattn.h"

/* user == NULL: allocate need bytes into *ws and *owned (free *owned when
 * done). Otherwise check that user_bytes >= need and hand user back, with
 * *owned = NULL. Fails with OUT_OF_MEMORY or WORKSPACE_TOO_SMALL. */
flashattn_status fa_workspace_get(void *user, size_t user_bytes, size_t need, void **ws,
                                  void **owned);

#endif
