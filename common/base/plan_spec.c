/* plan_spec.c: the `plan` setting's text, parsed and checked (plan_spec.h). */
#include "common/base/plan_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"

wsync_status_t wsync_plan_spec_parse(const char *text, wsync_plan_spec_t *out)
{
    const char *t = text ? text : "";
    if (strcmp(t, "auto") == 0 || t[0] == '\0') {
        *out = (wsync_plan_spec_t){.kind = WSYNC_PLAN_AUTO};
        return WSYNC_OK;
    }
    if (strcmp(t, "direct") == 0) {
        *out = (wsync_plan_spec_t){.kind = WSYNC_PLAN_DIRECT};
        return WSYNC_OK;
    }
    if (strncmp(t, "relay:", 6) == 0) {
        char *end;
        long f;
        errno = 0;
        f = strtol(t + 6, &end, 10);
        if (errno == 0 && end != t + 6 && *end == '\0' && f >= 1 && f <= WSYNC_RELAY_MAX_FANOUT) {
            *out = (wsync_plan_spec_t){.kind = WSYNC_PLAN_RELAY, .fanout = (int)f};
            return WSYNC_OK;
        }
    }
    return wsync_error(WSYNC_ERR_INVALID,
                       "plan '%s' is not one of auto, direct, relay:F (F a fan-out in 1..%d, relay:1 a chain)", t,
                       WSYNC_RELAY_MAX_FANOUT);
}

const char *wsync_plan_spec_name(const wsync_plan_spec_t *s, char *buf, size_t len)
{
    switch (s->kind) {
    case WSYNC_PLAN_DIRECT: snprintf(buf, len, "direct"); break;
    case WSYNC_PLAN_RELAY: snprintf(buf, len, "relay:%d", s->fanout); break;
    default: snprintf(buf, len, "auto"); break;
    }
    return buf;
}

int wsync_plan_spec_valid(const char *text)
{
    wsync_plan_spec_t s;
    return wsync_plan_spec_parse(text, &s) == WSYNC_OK;
}
