/* delta_wire.c: `wsync delta encode` and `wsync delta apply`: a version's
 * image as delta wires against another's, in a file, and back. The file is
 * the pieces' wires back to back, each self-describing (delta.h), in image
 * order: pieces of --chunk bytes (64 MiB by default, as the plan's chunks),
 * each with its tensors' element width. Tools and tests use it to check the
 * wire against other implementations. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/delta.h"
#include "common/base/le.h"
#include "common/base/util.h"
#include "common/delta/delta.h"
#include "common/model/safetensors.h"

#define DELTA_USAGE                                                                       \
    "usage: wsync delta encode [--chunk SIZE] OLD.safetensors NEW.safetensors OUT.wire\n" \
    "       wsync delta apply [--chunk SIZE] OLD.safetensors WIRES OUT.safetensors\n"

/* The options and the three paths; 0, or 2 after a message. */
static int parse(int argc, char **argv, uint64_t *chunk, const char **paths)
{
    static const struct option opts[] = {{"chunk", 1, 0, 'c'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int o;
    *chunk = 64ull << 20;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'c' && wsync_parse_size(optarg, "--chunk", chunk) == WSYNC_OK && *chunk > 0)
            continue;
        fprintf(o == 'h' ? stdout : stderr,
                DELTA_USAGE "encode writes NEW's image as one delta wire per --chunk piece (default 64M)\n"
                            "against OLD's; apply applies such a file to OLD's image and writes the result.\n");
        return o == 'h' ? -1 : 2;
    }
    if (optind != argc - 3) {
        fprintf(stderr, DELTA_USAGE);
        return 2;
    }
    for (int i = 0; i < 3; i++)
        paths[i] = argv[optind + i];
    return 0;
}

/* OLD's (and NEW's) image; 0, or 2 after a message. */
static int load_image(const char *path, wsync_safetensors_t **st, unsigned char **image)
{
    if (wsync_safetensors_open(path, st) != WSYNC_OK) {
        fprintf(stderr, "wsync delta: %s\n", wsync_last_error());
        return 2;
    }
    *image = calloc(1, (*st)->manifest->image_size ? (*st)->manifest->image_size : 1);
    if (*image == NULL || wsync_safetensors_copy_to_image(*st, *image) != WSYNC_OK) {
        fprintf(stderr, "wsync delta: %s: out of memory for its image\n", path);
        return 1;
    }
    return 0;
}

int cli_delta_encode(int argc, char **argv)
{
    const char *p[3];
    uint64_t chunk, total = 0, npieces = 0;
    wsync_safetensors_t *a = NULL, *b = NULL;
    unsigned char *ia = NULL, *ib = NULL, *out = NULL;
    FILE *f = NULL;
    int rc = parse(argc, argv, &chunk, p);
    char da[33], db[33];
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if ((rc = load_image(p[0], &a, &ia)) != 0 || (rc = load_image(p[1], &b, &ib)) != 0)
        goto out;
    wsync_manifest_digest(a->manifest, da);
    wsync_manifest_digest(b->manifest, db);
    rc = 2;
    if (strcmp(da, db) != 0) {
        fprintf(stderr, "wsync delta encode: %s and %s hold different layouts (manifest digests %s and %s)\n",
                p[0], p[1], da, db);
        goto out;
    }
    out = malloc(wsync_delta_bound(chunk, 1));
    f = fopen(p[2], "wb");
    if (out == NULL || f == NULL) {
        fprintf(stderr, "wsync delta encode: %s: cannot write it (or out of memory)\n", p[2]);
        rc = 1;
        goto out;
    }
    for (uint64_t off = 0; off < a->manifest->image_size; off += chunk, npieces++) {
        uint64_t end = off + chunk < a->manifest->image_size ? off + chunk : a->manifest->image_size;
        size_t wl = 0;
        if (wsync_delta_encode(ia + off, ib + off, end - off, cli_delta_piece_width(a->manifest, off, end), out,
                               wsync_delta_bound(chunk, 1), &wl, NULL) != WSYNC_OK ||
            fwrite(out, 1, wl, f) != wl) {
            fprintf(stderr, "wsync delta encode: piece at %llu: %s\n", (unsigned long long)off, wsync_last_error());
            rc = 1;
            goto out;
        }
        total += wl;
    }
    printf("%llu pieces, %llu wire bytes for an image of %llu (%.4f)\n", (unsigned long long)npieces,
           (unsigned long long)total, (unsigned long long)a->manifest->image_size,
           a->manifest->image_size ? (double)total / (double)a->manifest->image_size : 0.0);
    rc = 0;
out:
    if (f != NULL && fclose(f) != 0 && rc == 0)
        rc = 1;
    free(out), free(ia), free(ib);
    wsync_safetensors_close(a);
    wsync_safetensors_close(b);
    return rc;
}

/* The whole file; NULL after a message. */
static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        (buf = malloc((size_t)n + 1)) == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "wsync delta apply: %s: cannot read it\n", path);
        free(buf);
        buf = NULL;
    } else {
        *len = (size_t)n;
    }
    if (f != NULL)
        fclose(f);
    return buf;
}

int cli_delta_apply(int argc, char **argv)
{
    const char *p[3];
    uint64_t chunk, at = 0, off = 0;
    wsync_safetensors_t *a = NULL;
    unsigned char *ia = NULL, *w = NULL;
    size_t wlen = 0;
    int rc = parse(argc, argv, &chunk, p);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if ((rc = load_image(p[0], &a, &ia)) != 0)
        goto out;
    rc = 2;
    if ((w = read_all(p[1], &wlen)) == NULL)
        goto out;
    for (; off < a->manifest->image_size; off += chunk) {
        uint64_t end = off + chunk < a->manifest->image_size ? off + chunk : a->manifest->image_size;
        /* Each wire's length is in its header (payload, at byte 24). */
        uint64_t payload = wlen - at >= WSYNC_DELTA_HEADER ? wsync_get64(w + at + 24) : 0;
        const char *why = wlen - at < WSYNC_DELTA_HEADER             ? "the file ends before its header"
                          : payload > wlen - at - WSYNC_DELTA_HEADER ? "the file ends before its payload"
                          : wsync_delta_apply(ia + off, end - off, w + at, WSYNC_DELTA_HEADER + payload) != WSYNC_OK
                              ? wsync_last_error()
                              : NULL;
        if (why != NULL) {
            fprintf(stderr, "wsync delta apply: %s: the wire of the piece at image offset %llu (byte %llu): %s\n",
                    p[1], (unsigned long long)off, (unsigned long long)at, why);
            goto out;
        }
        at += WSYNC_DELTA_HEADER + payload;
    }
    if (at != wlen) {
        fprintf(stderr, "wsync delta apply: %s: %llu bytes past the last piece's wire\n", p[1],
                (unsigned long long)(wlen - at));
        goto out;
    }
    if (wsync_safetensors_write(p[2], a->manifest, ia, a->manifest->metadata) != WSYNC_OK) {
        fprintf(stderr, "wsync delta apply: %s\n", wsync_last_error());
        rc = 1;
        goto out;
    }
    rc = 0;
out:
    free(ia), free(w);
    wsync_safetensors_close(a);
    return rc;
}
