/* relay_registration.h: an engine node's registration with the control
 * endpoint (POST /v1/engines/register), sent at start and as its heartbeat:
 * its id, host and local ranks, what it holds, and its endpoint: the host id
 * (a single-copy trainer on that host waits for it) and, under plan relay:F
 * or auto, the relay port other nodes pull from ("relay": "host:port").
 * Built by engine_side/receiver.c, reporter.c and common/control/client.c,
 * parsed by the control model; the parser names the field that is wrong and
 * what it must be. */
#ifndef WSYNC_COMMON_RELAY_REGISTRATION_H
#define WSYNC_COMMON_RELAY_REGISTRATION_H

#include <jansson.h>
#include <stdint.h>

#include "common/wsync.h"

#define WSYNC_REG_MAX_ENDPOINT 4096 /* the endpoint object, bytes as compact JSON */
#define WSYNC_REG_MAX_RANKS 4096

typedef struct wsync_relay_registration {
    char id[128];    /* printable, without '/', quotes, '\\', '%', '?', '#' or spaces (URLs, metric labels) */
    char host[128];  /* 1 .. 127 bytes */
    int local_ranks; /* 1 .. 4096 */
    int64_t holds;   /* the version the node holds; -1: not said */
    /* The endpoint object as sent (owned, or NULL: none), and what wsync's
     * nodes put in it ("" when absent). Building without `endpoint` makes
     * one of host_id and relay when either is set. */
    json_t *endpoint;
    char host_id[128];
    char relay[128];
} wsync_relay_registration_t;

/* 1 when `id` is a valid engine id (see the struct). */
int wsync_engine_id_ok(const char *id);

/* The registration as JSON (new reference), or NULL without memory. */
json_t *wsync_relay_registration_to_json(const wsync_relay_registration_t *r);
/* The endpoint object the registration sends (new reference; NULL when it
 * has none or without memory). */
json_t *wsync_relay_registration_endpoint(const wsync_relay_registration_t *r);
/* Parses and checks `j`; on success *out holds a reference to the endpoint:
 * release it with wsync_relay_registration_clear. */
wsync_status_t wsync_relay_registration_from_json(const json_t *j, wsync_relay_registration_t *out);
void wsync_relay_registration_clear(wsync_relay_registration_t *r);

#endif
