/* Writing the tuning file (`flashattn tune --save`): tool-only, so it is
 * not in the shipped library, which only reads the file
 * (plan/tune_file.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "tool/tool.h"

static int write_all(FILE *f, const fa_tune_entry *e, int n) {
    int ok = fprintf(f, "%s\n# written by `flashattn tune --save`; used when FLASHATTN_TUNE_FILE "
                        "names this file\n# cpu\tisa\thead_dim\tdtype\tcausal\tblock_m\tblock_n\tnote\n",
                     FA_TUNE_HEADER) > 0;
    for (int i = 0; i < n && ok; i++)
        ok = fprintf(f, "%s\t%s\t%lld\t%s\t%d\t%d\t%d\t%s\n", e[i].key.cpu, e[i].key.isa,
                     (long long)e[i].key.head_dim, fa_dtype_name(e[i].key.dtype), e[i].key.causal,
                     e[i].block_m, e[i].block_n, e[i].note) > 0;
    return ok;
}

int fa_tune_save(const char *path, const fa_tune_entry *entry, char *why, size_t why_n) {
    char reason[256], tmp[4200];
    size_t len = 0;
    int n = 0, slot, rc = -1;
    char *text = NULL;
    fa_tune_entry *entries = malloc(sizeof *entries * FA_TUNE_MAX_ENTRIES);
    FILE *probe = fopen(path, "rb");
    if (!entries) {
        snprintf(why, why_n, "out of memory");
        goto done;
    }
    if (probe) {
        fclose(probe);
        if (!(text = fa_tune_read_file(path, &len, reason, sizeof reason)) ||
            !fa_tune_parse(text, len, entries, FA_TUNE_MAX_ENTRIES, &n, reason, sizeof reason)) {
            snprintf(why, why_n, "%s: %s; not overwriting it", path, reason);
            goto done;
        }
    }
    for (slot = 0; slot < n && !fa_tune_key_equal(&entries[slot].key, &entry->key); slot++) continue;
    if (slot == FA_TUNE_MAX_ENTRIES) {
        snprintf(why, why_n, "%s already holds %d entries", path, FA_TUNE_MAX_ENTRIES);
        goto done;
    }
    if (strpbrk(entry->key.cpu, "\t\n") || strpbrk(entry->key.isa, "\t\n") ||
        strpbrk(entry->note, "\t\n")) {
        snprintf(why, why_n, "an entry field holds a tab or a newline");
        goto done;
    }
    entries[slot] = *entry;
    if (slot == n) n++;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(why, why_n, "cannot write %s: %s", tmp, strerror(errno));
        goto done;
    }
    const int ok = write_all(f, entries, n);
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        snprintf(why, why_n, "cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        goto done;
    }
    rc = 0;
done:
    free(text);
    free(entries);
    return rc;
}
