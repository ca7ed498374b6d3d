/*
 * Runs a fuzz harness over files instead of under libFuzzer: each argument
 * is a file, or a directory whose files (not recursing) are each one input.
 * `make test` replays the corpus in tests/fuzz/corpus/ this way, in every
 * build (under ASan and UBSan in build-asan), with no clang needed. A
 * broken property aborts (fz_fail); an input that cannot be read fails.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return fprintf(stderr, "replay: cannot open %s\n", path), 1;
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;)
        if ((n += got) == cap) buf = realloc(buf, cap *= 2);
    const int bad = ferror(f);
    fclose(f);
    if (bad) return free(buf), fprintf(stderr, "replay: cannot read %s\n", path), 1;
    /* exactly n bytes, so that ASan sees a harness read past the input */
    unsigned char *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    LLVMFuzzerTestOneInput(exact, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* REPLAY_TIMES=1: each input's seconds, to keep the corpus quick to replay */
    if (getenv("REPLAY_TIMES"))
        fprintf(stderr, "%.4f %s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), path);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int failed = 0, inputs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
            failed++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed += run_file(argv[i]), inputs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        char **names = NULL;
        size_t n = 0;
        for (struct dirent *e; d && (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            names = realloc(names, (n + 1) * sizeof *names);
            names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            sprintf(names[n++], "%s/%s", argv[i], e->d_name);
        }
        if (d) closedir(d);
        qsort(names, n, sizeof *names, by_name);
        for (size_t k = 0; k < n; k++) {
            failed += run_file(names[k]), inputs++;
            free(names[k]);
        }
        free(names);
    }
    printf("replay: %d inputs, %d unreadable\n", inputs, failed);
    return failed || !inputs;
}
