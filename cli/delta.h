/* delta.h: the parts of `wsync delta` (cli/delta.c: stats; cli/delta_wire.c:
 * encode and apply, the wire form as files, for tools and cross-checks). */
#ifndef WSYNC_CLI_DELTA_H
#define WSYNC_CLI_DELTA_H

#include <stdint.h>

#include "common/model/manifest.h"

/* The width a piece [off, end) of the image is encoded with: the one width
 * of the tensors it touches when it divides the piece, else 1. */
unsigned cli_delta_piece_width(const wsync_manifest_t *m, uint64_t off, uint64_t end);

/* `wsync delta encode [--chunk SIZE] OLD NEW OUT`: NEW's image as one wire
 * per --chunk piece of the image (delta.h), against OLD's, back to back. */
int cli_delta_encode(int argc, char **argv);
/* `wsync delta apply [--chunk SIZE] OLD WIRES OUT.safetensors`: OLD's image
 * with the wires applied, written as OUT. */
int cli_delta_apply(int argc, char **argv);

#endif
