// Build tool: writes a C file defining `const char NAME[]` with the text of
// a file, so generated kernels can include the same math the eager kernels
// use without a path to the source tree at run time.
//   embed_tool NAME INPUT OUTPUT
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: embed_tool NAME INPUT OUTPUT\n");
        return 2;
    }
    FILE *in = fopen(argv[2], "rb");
    if (!in) {
        perror(argv[2]);
        return 1;
    }
    FILE *out = fopen(argv[3], "wb");
    if (!out) {
        perror(argv[3]);
        fclose(in);
        return 1;
    }
    fprintf(out, "// Generated from %s; do not edit.\nconst char %s[] = {\n", argv[2], argv[1]);
    int c, col = 0;
    while ((c = fgetc(in)) != EOF) {
        fprintf(out, "%d,", c);
        if (++col == 24) {
            fputc('\n', out);
            col = 0;
        }
    }
    fprintf(out, "0};\n");
    int bad = ferror(in) || fclose(out) != 0;
    fclose(in);
    if (bad) {
        fprintf(stderr, "embed_tool: writing %s failed\n", argv[3]);
        return 1;
    }
    return 0;
}
