/* verbs_select_test.c: which NICs WSYNC_IB_DEVICES selects (names,
 * prefixes, '=' exact lists, '^' exclusions, ports), PCI proximity to the
 * GPU, and the RoCE v2 GID choice. */
#include "common/base/verbs_select.h"
#include "tests/test.h"

static void empty_spec_selects_everything(void)
{
    CHECK(verbs_dev_selected(NULL, "mlx5_0", 1));
    CHECK(verbs_dev_selected("", "rxe0", 1));
}

static void names_are_prefixes(void)
{
    CHECK(verbs_dev_selected("mlx5", "mlx5_0", 1));
    CHECK(verbs_dev_selected("mlx5", "mlx5_10", 1));
    CHECK(!verbs_dev_selected("mlx5", "rxe0", 1));
    CHECK(verbs_dev_selected("mlx5_1", "mlx5_10", 1));
    CHECK(verbs_dev_selected("rxe0,mlx5_3", "mlx5_3", 1));
}

static void equals_means_exact_names(void)
{
    CHECK(verbs_dev_selected("=mlx5_1", "mlx5_1", 1));
    CHECK(!verbs_dev_selected("=mlx5_1", "mlx5_10", 1));
    CHECK(verbs_dev_selected("=mlx5_1,mlx5_2", "mlx5_2", 1));
}

static void caret_excludes(void)
{
    CHECK(!verbs_dev_selected("^mlx5_0", "mlx5_0", 1));
    CHECK(verbs_dev_selected("^mlx5_0", "mlx5_1", 1));
    CHECK(!verbs_dev_selected("^mlx5_0,mlx5_1", "mlx5_1", 1)); /* a leading ^ covers the list */
    CHECK(verbs_dev_selected("^mlx5_0,mlx5_1", "rxe0", 1));
    CHECK(verbs_dev_selected("mlx5,^mlx5_2", "mlx5_1", 1)); /* per-entry exclusion */
    CHECK(!verbs_dev_selected("mlx5,^mlx5_2", "mlx5_2", 1));
    CHECK(!verbs_dev_selected("mlx5,^mlx5_2", "rxe0", 1));
}

static void ports_limit_an_entry(void)
{
    CHECK(verbs_dev_selected("mlx5_0:1", "mlx5_0", 1));
    CHECK(!verbs_dev_selected("mlx5_0:2", "mlx5_0", 1));
    CHECK(verbs_dev_selected("mlx5_0:2", "mlx5_0", 2));
    CHECK(!verbs_dev_selected("^mlx5_0:1", "mlx5_0", 1));
    CHECK(verbs_dev_selected("^mlx5_0:1", "mlx5_0", 2));
}

static void bad_specs_are_named(void)
{
    CHECK(verbs_dev_spec_valid("mlx5_0:1,^rxe"));
    CHECK(!verbs_dev_spec_valid("mlx5_0:0"));
    CHECK(strstr(wsync_last_error(), "WSYNC_IB_DEVICES='mlx5_0:0'") != NULL);
    CHECK(!verbs_dev_spec_valid("mlx5_0:x"));
    CHECK(!verbs_dev_spec_valid("^:1"));
}

static void nearest_nics_share_the_longest_pci_path(void)
{
    const char *gpu = "/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/0000:04:00.0";
    const char *nics[] = {
        "/sys/devices/pci0000:80/0000:80:02.0/0000:81:00.0",              /* other socket */
        "/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/0000:04:01.0", /* same switch */
        "/sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0",              /* same root */
        "/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/0000:04:02.0", /* same switch */
    };
    int near[4];
    CHECK_EQ(verbs_pci_closest(gpu, nics, 4, near), 2);
    CHECK(!near[0] && near[1] && !near[2] && near[3]);
    CHECK_EQ(verbs_pci_closest(NULL, nics, 4, near), 0);
    CHECK(!near[1]);
}

static void roce_v2_ipv4_mapped_gid_wins(void)
{
    verbs_gid_entry_t t[4] = {0};
    t[0] = (verbs_gid_entry_t){.gid = {0xfe, 0x80, [15] = 1}, .type = VERBS_GID_ROCE_V1, .valid = 1};
    t[1] = (verbs_gid_entry_t){.gid = {0xfe, 0x80, [15] = 1}, .type = VERBS_GID_ROCE_V2, .valid = 1};
    t[2] = (verbs_gid_entry_t){.gid = {[10] = 0xff, [11] = 0xff, [12] = 10, [15] = 15},
                               .type = VERBS_GID_ROCE_V1,
                               .valid = 1};
    t[3] = (verbs_gid_entry_t){.gid = {[10] = 0xff, [11] = 0xff, [12] = 10, [15] = 15},
                               .type = VERBS_GID_ROCE_V2,
                               .valid = 1};
    CHECK_EQ(verbs_gid_pick(t, 4, -1), 3);
    CHECK_EQ(verbs_gid_pick(t, 4, 2), 2); /* configured index */
    CHECK_EQ(verbs_gid_pick(t, 4, 7), -1);
    CHECK(strstr(wsync_last_error(), "WSYNC_IB_GID_INDEX=7") != NULL);
    /* rxe's table: GID 0 link-local v2, GID 1 the ::ffff: IPv4 entry. */
    t[0].type = VERBS_GID_ROCE_V2;
    t[1] = t[3];
    CHECK_EQ(verbs_gid_pick(t, 2, -1), 1);
    /* only link-local: nothing routable */
    CHECK_EQ(verbs_gid_pick(t, 1, -1), -1);
    CHECK(strstr(wsync_last_error(), "IPv4 address") != NULL);
}

static void gid_prints_as_ipv6(void)
{
    uint8_t g[16] = {[10] = 0xff, [11] = 0xff, [12] = 10, [13] = 0, [14] = 2, [15] = 15};
    char buf[64];
    verbs_gid_format(g, buf, sizeof(buf));
    CHECK_STR(buf, "::ffff:10.0.2.15");
}

int main(void)
{
    RUN(empty_spec_selects_everything);
    RUN(names_are_prefixes);
    RUN(equals_means_exact_names);
    RUN(caret_excludes);
    RUN(ports_limit_an_entry);
    RUN(bad_specs_are_named);
    RUN(nearest_nics_share_the_longest_pci_path);
    RUN(roce_v2_ipv4_mapped_gid_wins);
    RUN(gid_prints_as_ipv6);
    TEST_EXIT();
}
