#include "core/layout.h"

#include <stdio.h>
#include <string.h>

#include "core/size.h"

void fa_layout_init(fa_layout *l, const char *name) {
    memset(l, 0, sizeof *l);
    l->name = name;
}

static void add(fa_layout *l, int id, const char *name, size_t count, size_t bytes, size_t stride) {
    size_t span, end;
    if (l->overflow || id != l->n || l->n == FA_LAYOUT_MAX_REGIONS ||
        !fa_mul_size(count, stride, &span) || !fa_add_size(l->size, span, &end) ||
        end > SIZE_MAX - FA_LAYOUT_ALIGN) {
        l->overflow = 1;
        return;
    }
    fa_region *r = &l->r[l->n++];
    r->name = name;
    r->offset = l->size;
    r->count = count;
    r->stride = stride;
    r->bytes = bytes;
    l->size = fa_round_up(end, FA_LAYOUT_ALIGN);
}

void fa_layout_array(fa_layout *l, int id, const char *name, size_t count, size_t bytes) {
    if (bytes > SIZE_MAX - FA_LAYOUT_ALIGN) {
        l->overflow = 1;
        return;
    }
    add(l, id, name, count, bytes, fa_round_up(bytes, FA_LAYOUT_ALIGN));
}

void fa_layout_scalars(fa_layout *l, int id, const char *name, size_t count, size_t bytes) {
    add(l, id, name, count, bytes, bytes);
}

size_t fa_layout_workspace_bytes(const fa_layout *l) {
    return l->overflow ? 0 : l->size + FA_LAYOUT_ALIGN;
}

int fa_layout_check(const fa_layout *l, size_t capacity, char *why, size_t why_n) {
    if (l->overflow) return snprintf(why, why_n, "%s: overflowed", l->name), 0;
    for (int a = 0; a < l->n; a++) {
        const fa_region *r = &l->r[a];
        const int scalars = r->stride == r->bytes && r->stride % FA_LAYOUT_ALIGN != 0;
        if (r->offset % FA_LAYOUT_ALIGN || (!scalars && r->stride % FA_LAYOUT_ALIGN))
            return snprintf(why, why_n, "%s.%s: not aligned", l->name, r->name), 0;
        if (r->bytes > r->stride && r->count > 1)
            return snprintf(why, why_n, "%s.%s: items overlap", l->name, r->name), 0;
        const size_t end = r->offset + r->count * r->stride;
        if (end > capacity || end > l->size)
            return snprintf(why, why_n, "%s.%s: ends at %zu, past %zu", l->name, r->name, end,
                            capacity < l->size ? capacity : l->size), 0;
        for (int b = 0; b < a; b++) {
            const fa_region *q = &l->r[b];
            if (r->offset < q->offset + q->count * q->stride && q->offset < end && r->count && q->count)
                return snprintf(why, why_n, "%s.%s overlaps %s", l->name, r->name, q->name), 0;
        }
    }
    return 1;
}
