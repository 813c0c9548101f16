/* manifest_json_fuzz.c: libFuzzer target for the manifest's JSON reader (the
 * form a manifest takes on the wire and in state files). */
#include <stdlib.h>
#include <string.h>

#include "common/model/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *j = json_loadb((const char *)data, size, 0, &err), *again = NULL;
    wsync_manifest_t *m = NULL, *back = NULL;
    char d1[33], d2[33];

    if (j == NULL)
        return 0;
    if (wsync_manifest_from_json(j, &m) == WSYNC_OK) {
        /* Accepted: it must survive its own round trip with the same layout. */
        if (wsync_manifest_to_json(m, &again) != WSYNC_OK || wsync_manifest_from_json(again, &back) != WSYNC_OK)
            abort();
        wsync_manifest_digest(m, d1);
        wsync_manifest_digest(back, d2);
        if (strcmp(d1, d2) != 0 || m->ntensors != back->ntensors || m->image_size != back->image_size)
            abort();
    }
    wsync_manifest_free(back);
    wsync_manifest_free(m);
    json_decref(again);
    json_decref(j);
    return 0;
}
