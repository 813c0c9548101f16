/* receiver_cli.c: what the command line reads from a receiver beyond the
 * public API (receiver_cli.h says why). */
#include "engine_side/receiver_cli.h"

#include <stdlib.h>

#include "common/base/checks.h"
#include "engine_side/receiver_internal.h"

wsync_status_t recv_cli_host_image(const wsync_receiver_t *r, void **copy, const void **bytes, size_t *len)
{
    void *img = NULL, *host;
    wsync_status_t st;
    *copy = NULL;
    WSYNC_CHECK(wsync_receiver_image(r, &img, len));
    if (r->mem->kind == WSYNC_MEM_HOST) {
        *bytes = img;
        return WSYNC_OK;
    }
    host = malloc(*len ? *len : 1);
    if (host == NULL)
        return wsync_error(WSYNC_ERR_NOMEM, "out of memory for a host copy of the %zu-byte image", *len);
    if ((st = r->mem->copy(host, img, *len)) != WSYNC_OK) {
        free(host);
        return st;
    }
    *copy = host;
    *bytes = host;
    return WSYNC_OK;
}

const json_t *recv_cli_metadata(const wsync_receiver_t *r)
{
    return r->held.layout ? r->held.layout->manifest->metadata : NULL;
}

double recv_cli_last_pull_s(const wsync_receiver_t *r)
{
    return r->held.last_secs;
}
