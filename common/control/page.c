/* page.c: serves the status page. Its bytes come from page/index.html
 * through a header the Makefile generates (build/gen/page_html.h, with od:
 * no tool beyond make and coreutils), so the page cannot drift from the
 * binary and nothing is read from disk or fetched at run time. */
#include <string.h>

#include "common/control/page.h"
#include "page_html.h" /* static const unsigned char ctl_page_html[], NUL-terminated */

enum MHD_Result ctl_page(wsync_control_server_t *s, req_ctx_t *c, const char *url)
{
    struct MHD_Response *r;
    enum MHD_Result ret;
    (void)url;
    /* Persistent: MHD sends the static bytes, copying nothing. */
    r = MHD_create_response_from_buffer(sizeof(ctl_page_html) - 1, (void *)ctl_page_html, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    /* The page's own script and style only; it talks to this endpoint alone. */
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                            "img-src data:; connect-src 'self'; frame-ancestors 'none'");
    ret = MHD_queue_response(c->conn, 200, r);
    MHD_destroy_response(r);
    ctl_count(s, "/", 200);
    return ret;
}
