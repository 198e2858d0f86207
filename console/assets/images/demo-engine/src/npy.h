/* Writes float32 arrays as .npy (format version 1.0), the files the console
 * reads for parity. Part of the measuring apparatus (protected). */
#ifndef DEMO_NPY_H
#define DEMO_NPY_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Returns 0, or -1 on any I/O error. Data are written little-endian. */
static int npy_write_f32(const char *path, const float *data, int ndim, const long *shape)
{
    char dict[256], shp[128] = "";
    size_t count = 1, len = 0;
    for (int i = 0; i < ndim; i++) {
        len += (size_t)snprintf(shp + len, sizeof shp - len, "%ld,%s", shape[i],
                                (i + 1 < ndim) ? " " : "");
        count *= (size_t)shape[i];
    }
    int n = snprintf(dict, sizeof dict,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shp);
    /* magic(6) + version(2) + header length(2) + dict + padding + '\n' ≡ 0 (mod 64) */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    unsigned hl = (unsigned)(n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    for (size_t i = 0; ok && i < count; i++) {
        uint32_t u;
        memcpy(&u, &data[i], sizeof u);
        unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8),
                              (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
        ok = fwrite(b, 1, 4, f) == 4;
    }
    if (fclose(f) != 0) ok = 0;
    return ok ? 0 : -1;
}

#endif
