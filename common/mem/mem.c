/* mem.c: picks a memory backend from "host", "cuda" or "cuda:N". */
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/mem/mem.h"

wsync_status_t wsync_mem_get(const char *spec, const wsync_mem_ops_t **ops, int *device)
{
    char *end = NULL;
    long d;
    if (spec == NULL || strcmp(spec, "host") == 0 || strcmp(spec, "cpu") == 0) {
        *ops = &wsync_mem_host;
        *device = 0;
        return WSYNC_OK;
    }
    if (strcmp(spec, "cuda") == 0) {
        *ops = &wsync_mem_cuda;
        *device = 0;
        return WSYNC_OK;
    }
    if (strncmp(spec, "cuda:", 5) == 0) {
        d = strtol(spec + 5, &end, 10);
        if (end != spec + 5 && *end == '\0' && d >= 0 && d < 1024) {
            *ops = &wsync_mem_cuda;
            *device = (int)d;
            return WSYNC_OK;
        }
    }
    return wsync_error(WSYNC_ERR_INVALID, "device '%s': expected host, cuda or cuda:N", spec);
}
