/* not_built_test.c: a transport the build left out (not_built.h) refuses
 * with one message naming it, what the build lacked and what to do: from
 * can_use (so "auto" passes it over), open, and wsync_transport_get by name.
 * Each case runs only in a build without that transport (make asan and
 * valgrind build CUDA=0 NCCL=0); with it, the case is skipped. */
#include "common/transport/not_built.h"
#include "common/transport/transport.h"
#include "tests/test.h"

static void check_refuses(const wsync_transport_ops_t *ops, const char *needle)
{
    wsync_transport_config_t cfg = {.device = 0, .timeout_ms = 1000};
    const wsync_transport_ops_t *got = NULL;
    wsync_transport_t *t = NULL;
    CHECK(!ops->can_use(&cfg));
    CHECK(strstr(wsync_last_error(), needle) != NULL);
    CHECK_FAILS(ops->open(&cfg, &t), WSYNC_ERR_UNSUPPORTED, needle);
    CHECK(t == NULL);
    CHECK_FAILS(wsync_transport_get(ops->name, &cfg, &got), WSYNC_ERR_UNSUPPORTED, needle);
    CHECK(got == NULL);
    ops->close(NULL);
}

static void local_without_cuda(void)
{
    if (WSYNC_HAVE_CUDA)
        SKIP("built with CUDA");
    check_refuses(&wsync_transport_local, "transport local: wsync was not built with CUDA (");
}

static void nccl_without_nccl(void)
{
    if (WSYNC_HAVE_CUDA && WSYNC_HAVE_NCCL)
        SKIP("built with CUDA and NCCL");
    check_refuses(&wsync_transport_nccl, "transport nccl: wsync was not built with CUDA and NCCL (rebuild with");
}

static void verbs_without_libibverbs(void)
{
    if (WSYNC_HAVE_VERBS)
        SKIP("built with libibverbs");
    check_refuses(&wsync_transport_verbs, "transport verbs: wsync was not built with libibverbs (install");
}

/* The shared message itself, in every build. */
static void message_names_all(void)
{
    CHECK_EQ(wsync_transport_not_built("x", "Y", "do z"), WSYNC_ERR_UNSUPPORTED);
    CHECK_STR(wsync_last_error(), "transport x: wsync was not built with Y (do z)");
}

int main(void)
{
    RUN(local_without_cuda);
    RUN(nccl_without_nccl);
    RUN(verbs_without_libibverbs);
    RUN(message_names_all);
    TEST_EXIT();
}
