/* blob.h: opaque, self-contained bytes one side sends the other (transport
 * addresses, region keys, window handles). Here, below every layer that
 * carries one, so a message or a window need not include a transport. */
#ifndef WSYNC_COMMON_BASE_BLOB_H
#define WSYNC_COMMON_BASE_BLOB_H

#include <stdint.h>

#define WSYNC_BLOB_MAX 512
typedef struct wsync_blob {
    uint32_t len;
    unsigned char data[WSYNC_BLOB_MAX];
} wsync_blob_t;

#endif
