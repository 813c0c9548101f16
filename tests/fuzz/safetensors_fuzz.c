/* safetensors_fuzz.c: libFuzzer target for the safetensors reader: the input
 * is a whole file, opened through the same mmap path the engine uses. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/model/safetensors.h"

static int memfd = -1;
static char memfd_path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wsync_safetensors_t *st = NULL;
    unsigned char *image;
    size_t i;

    /* One memfd for the whole run, reached by path so that open() and
     * mmap() run exactly as they do on a real file. */
    if (memfd < 0) {
        memfd = memfd_create("safetensors_fuzz", MFD_CLOEXEC);
        if (memfd < 0)
            abort();
        snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
    }
    if (ftruncate(memfd, 0) != 0 || (size && pwrite(memfd, data, size, 0) != (ssize_t)size))
        abort();
    if (wsync_safetensors_open(memfd_path, &st) != WSYNC_OK)
        return 0;
    /* Accepted: the image layout must hold and every byte must copy over. */
    image = malloc(st->manifest->image_size ? st->manifest->image_size : 1);
    if (image == NULL)
        abort();
    memset(image, 0xA5, st->manifest->image_size);
    if (wsync_safetensors_copy_to_image(st, image) != WSYNC_OK)
        abort();
    for (i = 0; i < st->manifest->ntensors; i++) {
        const wsync_tensor_t *t = &st->manifest->tensors[i];
        if (t->offset % WSYNC_ALIGN || t->offset + t->size > st->manifest->image_size ||
            memcmp(image + t->offset, st->data[i], t->size) != 0)
            abort();
    }
    free(image);
    wsync_safetensors_close(st);
    return 0;
}
