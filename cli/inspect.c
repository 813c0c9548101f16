/* inspect.c: `wsync inspect FILE.safetensors`: the tensor table, the image
 * size and the manifest digest of a file. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "common/model/safetensors.h"
#include "common/base/util.h"

int cmd_inspect(int argc, char **argv)
{
    static const struct option opts[] = {{"json", 0, 0, 'j'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    wsync_safetensors_t *st = NULL;
    const wsync_manifest_t *m;
    char digest[33], sz[32], shape[256];
    int o, as_json = 0, d;
    size_t i;
    wsync_status_t rc;

    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'j') {
            as_json = 1;
        } else if (o == 'h') {
            printf("usage: wsync inspect [--json] FILE.safetensors\n"
                   "Prints every tensor (name, dtype, shape, bytes, offset in the image), the image size and\n"
                   "the manifest digest; --json prints the manifest.\n");
            return 0;
        } else {
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: wsync inspect [--json] FILE.safetensors\n");
        return 2;
    }
    rc = wsync_safetensors_open(argv[optind], &st);
    if (rc != WSYNC_OK) {
        fprintf(stderr, "wsync inspect: %s\n", wsync_last_error());
        /* Missing, unreadable or malformed: all bad input. */
        return rc == WSYNC_ERR_FORMAT || rc == WSYNC_ERR_IO ? 2 : 1;
    }
    m = st->manifest;
    wsync_manifest_digest(m, digest);
    if (as_json) {
        json_t *j = NULL;
        char *text = NULL;
        if (wsync_manifest_to_json(m, &j) == WSYNC_OK)
            text = json_dumps(j, JSON_INDENT(2));
        json_decref(j);
        if (text == NULL) {
            fprintf(stderr, "wsync inspect: %s: out of memory printing the manifest\n", argv[optind]);
            wsync_safetensors_close(st);
            return 1;
        }
        printf("%s\n", text);
        free(text);
    } else {
        printf("%-56s %-8s %-24s %14s %14s\n", "TENSOR", "DTYPE", "SHAPE", "BYTES", "IMAGE OFFSET");
        for (i = 0; i < m->ntensors; i++) {
            const wsync_tensor_t *t = &m->tensors[i];
            int n = snprintf(shape, sizeof(shape), "[");
            for (d = 0; d < t->ndim && n < (int)sizeof(shape) - 24; d++)
                n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
            snprintf(shape + n, sizeof(shape) - (size_t)n, "]");
            printf("%-56s %-8s %-24s %14llu %14llu\n", t->name, wsync_dtype_name(t->dtype), shape,
                   (unsigned long long)t->size, (unsigned long long)t->offset);
        }
        printf("%zu tensors, image %s (%llu bytes, tensors aligned to %d), manifest digest %s\n", m->ntensors,
               wsync_fmt_size(m->image_size, sz, sizeof(sz)), (unsigned long long)m->image_size, WSYNC_ALIGN,
               digest);
    }
    wsync_safetensors_close(st);
    return 0;
}
