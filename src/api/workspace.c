#include "api/workspace.h"

#include <stdlib.h>

#include "core/status.h"

flashattn_status fa_workspace_get(void *user, size_t user_bytes, size_t need, void **ws,
                                  void **owned) {
    *owned = NULL;
    if (user) {
        if (user_bytes < need)
            return fa_fail(FLASHATTN_ERR_WORKSPACE_TOO_SMALL, "workspace has %zu bytes, needs %zu",
                           user_bytes, need);
        *ws = user;
        return FLASHATTN_OK;
    }
    *ws = *owned = malloc(need ? need : 1);
    if (!*owned)
        return fa_fail(FLASHATTN_ERR_OUT_OF_MEMORY, "could not allocate %zu workspace bytes", need);
    return FLASHATTN_OK;
}
