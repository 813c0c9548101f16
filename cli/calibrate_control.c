/* calibrate_control.c: the control class of `wsync calibrate`: round trips
 * to a control endpoint started in this process on loopback (GET /healthz
 * through the same client the trainers and engines use). What it measures
 * is the endpoint's and the client's own cost; a deployment's round trip
 * adds its network's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/calibrate.h"
#include "common/control/client.h"
#include "common/base/util.h"
#include "common/control/control_server.h"

#define ROUND_TRIPS 50

void calib_control(calib_t *cb)
{
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    wsync_control_server_t *server = NULL;
    wsync_control_t *c = NULL;
    double rtt[ROUND_TRIPS];
    char what[120];
    int i;
    if (wsync_control_server_start(&sc, &server) != WSYNC_OK ||
        wsync_control_open(wsync_control_server_url(server), NULL, &c) != WSYNC_OK) {
        calib_absent(cb, COST_CONTROL, "a control endpoint on loopback could not start");
        goto out;
    }
    for (i = 0; i < ROUND_TRIPS; i++) {
        long http = 0;
        uint64_t t0 = wsync_now_ns();
        if (wsync_control_request(c, "GET", "/healthz", NULL, 5000, &http, NULL) != WSYNC_OK || http != 200) {
            calib_absent(cb, COST_CONTROL, "the loopback control endpoint did not answer /healthz");
            goto out;
        }
        rtt[i] = (wsync_now_ns() - t0) / 1e9;
    }
    snprintf(what, sizeof(what), "median of %d GET /healthz round trips to a control endpoint on loopback",
             ROUND_TRIPS);
    calib_set_time(cb, COST_CONTROL, rtt, ROUND_TRIPS, what);
out:
    wsync_control_close(c);
    wsync_control_server_stop(server);
}
