/* verbs_select.h: which RDMA devices and which GID the verbs transport uses:
 * the WSYNC_IB_DEVICES rules, PCI proximity to the GPU, and RoCE v2 GID
 * choice. Pure functions of their inputs (no device), unit-tested. */
#ifndef WSYNC_COMMON_VERBS_SELECT_H
#define WSYNC_COMMON_VERBS_SELECT_H

#include <stdint.h>

#include "common/wsync.h"

/* WSYNC_IB_DEVICES grammar (NCCL_IB_HCA-like): a comma-separated list of
 * entries "name[:port]".
 *   - an entry matches a device whose name starts with it ("mlx5" matches
 *     mlx5_0 and mlx5_10; "mlx5_1" matches mlx5_1 and mlx5_10);
 *   - a list that starts with '=' matches exact names only;
 *   - a list that starts with '^' excludes every entry it names, and any
 *     single entry written "^name" is an exclusion too ("mlx5,^mlx5_1");
 *   - without inclusions, every device not excluded is selected;
 *   - ":port" limits an entry to that port.
 * NULL or "" selects everything. 1 if (name, port) is selected. */
int verbs_dev_selected(const char *spec, const char *name, int port);

/* 1 if `spec` parses (non-empty names, ports 1..255), else 0 with the reason
 * recorded in the last error. */
int verbs_dev_spec_valid(const char *spec);

/* PCI proximity: of n NICs given by their sysfs device paths
 * (/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0), set near[i] = 1 for
 * those sharing the most leading path components with the GPU's path, and
 * return how many (0 when gpu_path is NULL or n == 0: no preference). */
int verbs_pci_closest(const char *gpu_path, const char *const *nic_paths, int n, int *near);

/* One entry of a port's GID table, as the device reports it. */
#define VERBS_GID_ROCE_V1 1
#define VERBS_GID_ROCE_V2 2
#define VERBS_GID_IB 0
typedef struct verbs_gid_entry {
    uint8_t gid[16];
    int type;  /* VERBS_GID_* */
    int valid; /* 0: empty slot */
} verbs_gid_entry_t;

/* The GID index to use on a RoCE port: `want` (>= 0) if that entry is valid;
 * otherwise the first RoCE v2 entry holding an IPv4-mapped address
 * (::ffff:a.b.c.d, routable across subnets), else the first RoCE v2 entry
 * that is not link-local (fe80::). -1 when nothing fits, with the reason
 * recorded. */
int verbs_gid_pick(const verbs_gid_entry_t *table, int n, int want);

/* "::ffff:10.0.2.15" or the hex form, for messages. */
void verbs_gid_format(const uint8_t gid[16], char *out, int len);

#endif
