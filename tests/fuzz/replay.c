/*
 * replay.c - runs a fuzz target over every file of a corpus folder.
 *
 * Linked with one fuzz_<name>.c when libFuzzer is absent (and in every build),
 * so the corpus is an ordinary regression test: a crash, a sanitizer report or
 * a leak on any stored input fails the test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf == NULL)
        return -1;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (d == NULL) {
        perror(argv[1]);
        return 1;
    }
    int count = 0, failed = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
        if (replay_file(path) != 0)
            failed++;
        count++;
    }
    closedir(d);
    printf("%d passed, %d failed\n", count - failed, failed);
    if (count == 0) {
        fprintf(stderr, "%s: empty corpus\n", argv[1]);
        return 1;
    }
    return failed != 0;
}
