/* The library's version, from the public header's numbers. */
#include "flashattn.h"

#define FA_STR2(x) #x
#define FA_STR(x) FA_STR2(x)

const char *flashattn_version(void) {
    return FA_STR(FLASHATTN_VERSION_MAJOR) "." FA_STR(FLASHATTN_VERSION_MINOR) "." FA_STR(
        FLASHATTN_VERSION_PATCH);
}
