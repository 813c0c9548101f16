/* plan_spec.h: the `plan` setting's value, how engine nodes get a version's
 * pieces: "auto" (engine_side/plan_choice.c picks), "direct" (every node
 * from the trainer ranks) or "relay:F" (nodes form trees of fan-out F, a
 * node gets each piece from its parent node, the root from the trainer
 * ranks; relay:1 is a chain). docs/ARCHITECTURE.md, "Relays". */
#ifndef WSYNC_COMMON_PLAN_SPEC_H
#define WSYNC_COMMON_PLAN_SPEC_H

#include <stddef.h>

#include "common/wsync.h"

#define WSYNC_RELAY_MAX_FANOUT 64

typedef enum wsync_plan_kind {
    WSYNC_PLAN_AUTO = 0,
    WSYNC_PLAN_DIRECT = 1,
    WSYNC_PLAN_RELAY = 2,
} wsync_plan_kind_t;

typedef struct wsync_plan_spec {
    wsync_plan_kind_t kind;
    int fanout; /* relay: 1..WSYNC_RELAY_MAX_FANOUT; else 0 */
} wsync_plan_spec_t;

/* Parses "auto", "direct" or "relay:F"; a bad value fails saying what is
 * accepted. */
wsync_status_t wsync_plan_spec_parse(const char *text, wsync_plan_spec_t *out);
/* The spec as its setting text ("relay:2"). */
const char *wsync_plan_spec_name(const wsync_plan_spec_t *s, char *buf, size_t len);
/* The settings table's check (1: valid, else 0 with the last error set). */
int wsync_plan_spec_valid(const char *text);

#endif
