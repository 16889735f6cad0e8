#include <stdio.h>
#include <stdlib.h>
#include "util.h"
#define BUF_SIZE 4096

/* Counts lines, words and bytes of the files named on the command line. */
struct counts {
    long lines;
    long words;
    long bytes;
};

static int in_word = 0;

int count_file(const char *path, struct counts *c)
{
    FILE *f = fopen(path, "rb");
    char buf[BUF_SIZE];
    size_t n, i;
    if (f == NULL) {
        perror(path);
        return -1;
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        c->bytes += n;
        for (i = 0; i < n; i++) {
            char ch = buf[i];
            if (ch == '\n')
                c->lines++;
            if (ch == ' ' || ch == '\n' || ch == '\t') {
                in_word = 0;
            } else if (!in_word) {
                in_word = 1;
                c->words += 1;
            }
        }
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    struct counts total = {0, 0, 0};
    int i, status = 0;
    for (i = 1; i < argc; i++) {
        struct counts c = {0, 0, 0};
        if (count_file(argv[i], &c) != 0) {
            status = 1;
            continue;
        }
        printf("%7ld %7ld %7ld %s\n", c.lines, c.words, c.bytes, argv[i]);
        total.lines += c.lines;
        total.words += c.words;
        total.bytes += c.bytes;
    }
    if (argc > 2)
        printf("%7ld %7ld %7ld total\n", total.lines, total.words, total.bytes);
    return status;
}
