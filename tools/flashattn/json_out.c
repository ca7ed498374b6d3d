#include "json_out.h"

#include <stdio.h>

void fa_json_str(const char *key, const char *v) {
    printf(", \"%s\": \"", key);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\') printf("\\%c", *v);
        else if ((unsigned char)*v < 0x20) printf("\\u%04x", (unsigned)(unsigned char)*v);
        else putchar(*v);
    }
    putchar('"');
}

void fa_json_num(const char *key, double v, int ok) {
    if (ok) printf(", \"%s\": %.10g", key, v);
    else printf(", \"%s\": null", key);
}

void fa_json_size(const char *key, size_t v, int ok) {
    if (ok) printf(", \"%s\": %zu", key, v);
    else printf(", \"%s\": null", key);
}
