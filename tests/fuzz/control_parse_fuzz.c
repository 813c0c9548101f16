/* control_parse_fuzz.c: libFuzzer target for the control endpoint's parsers
 * that are not a request: the first byte picks one. 0: every route's body
 * schema (ctl_check) on any JSON, integers read as integers and as reals;
 * 1: the route table on any URL and method; 2: the token-file reader on any
 * file; 3: a state file into a fresh model (what a restart reads), which
 * must render and save again. None may crash; each refusal says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/net/auth.h"
#include "common/control/server_internal.h"
#include "common/control/validate.h"

static void schemas(const uint8_t *data, size_t size)
{
    static const ctl_schema_t *all[] = {&ctl_req_register_trainer, &ctl_req_register_engine, &ctl_req_publish,
                                        &ctl_req_report, &ctl_req_layout};
    size_t flags[] = {JSON_REJECT_DUPLICATES, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL}, i, k;
    char err[512];
    for (k = 0; k < 2; k++) {
        json_t *j = json_loadb((const char *)data, size, flags[k], NULL);
        for (i = 0; j && i < sizeof(all) / sizeof(all[0]); i++) {
            err[0] = '\0';
            if (ctl_check(j, all[i], err, sizeof(err)) != 0 && err[0] == '\0')
                abort();
        }
        json_decref(j);
    }
}

static void routes(const uint8_t *data, size_t size)
{
    static const char *methods[] = {"GET", "POST", "PUT", "HEAD"};
    char url[4096];
    int known = 0;
    const ctl_route_t *r;
    size_t n = size < sizeof(url) - 1 ? size : sizeof(url) - 1;
    memcpy(url, data, n);
    url[n] = '\0';
    r = ctl_route_find(url, methods[n % 4], &known);
    if (r != NULL && (!known || strcmp(r->method, methods[n % 4]) != 0))
        abort();
}

static void token_file(const uint8_t *data, size_t size)
{
    char path[64], out[512];
    int fd = memfd_create("token", 0);
    if (fd < 0)
        return;
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if (wsync_auth_read_token_file(path, out, sizeof(out)) == WSYNC_OK) {
        size_t i, n = strlen(out);
        if (n == 0 || n > sizeof(out) - 3)
            abort();
        for (i = 0; i < n; i++)
            if ((unsigned char)out[i] <= ' ' || (unsigned char)out[i] >= 0x7f)
                abort();
    } else if (strstr(wsync_last_error(), path) == NULL) {
        abort(); /* the refusal names the file */
    }
    close(fd);
}

static void state(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, 0, NULL), *st, *again;
    ctl_model_t m;
    if (j == NULL)
        return;
    ctl_model_init(&m);
    if (ctl_state_load(&m, j, "fuzz") == WSYNC_OK) {
        st = ctl_status_json(&m);
        again = ctl_state_json(&m);
        if (st == NULL || again == NULL)
            abort();
        json_decref(st);
        json_decref(again);
    }
    ctl_model_free(&m);
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    wsync_log_set_level(WSYNC_LOG_ERROR);
    switch (data[0] % 4) {
    case 0: schemas(data + 1, size - 1); break;
    case 1: routes(data + 1, size - 1); break;
    case 2: token_file(data + 1, size - 1); break;
    case 3: state(data + 1, size - 1); break;
    }
    return 0;
}
