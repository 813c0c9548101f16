/* page.h: GET / on the control endpoint: the status page (HTML, CSS and
 * JavaScript in one file, common/control/page/index.html, built into
 * the binary). The page holds no data: it reads /v1/status and the version
 * routes from the browser, with the token the user gives when
 * --private-status asks for one. */
#ifndef WSYNC_CONTROL_PAGE_H
#define WSYNC_CONTROL_PAGE_H

#include "common/control/server_internal.h"

/* Answers the page (200 text/html). MHD thread only. */
enum MHD_Result ctl_page(wsync_control_server_t *s, req_ctx_t *c, const char *url);

#endif
