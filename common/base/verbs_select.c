/* verbs_select.c: device-name rules, PCI proximity and GID choice for the
 * verbs transport (see verbs_select.h for the grammar). */
#include "common/base/verbs_select.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"

#define ENTRY_MAX 64

/* Next entry of the list at *p: its name (without '^'), port (0 = any) and
 * whether it was written as an exclusion. 0 at the end of the list. */
static int next_entry(const char **p, char *name, int *port, int *neg, int *bad)
{
    const char *s = *p, *end, *colon;
    size_t n;
    while (*s == ',')
        s++;
    if (*s == '\0')
        return 0;
    end = strchr(s, ',');
    if (end == NULL)
        end = s + strlen(s);
    *neg = 0;
    if (*s == '^') {
        *neg = 1;
        s++;
    }
    colon = memchr(s, ':', (size_t)(end - s));
    n = (size_t)((colon ? colon : end) - s);
    *bad = n == 0 || n >= ENTRY_MAX;
    if (n >= ENTRY_MAX)
        n = ENTRY_MAX - 1;
    memcpy(name, s, n);
    name[n] = '\0';
    *port = 0;
    if (colon) {
        char *e = NULL;
        long v = strtol(colon + 1, &e, 10);
        if (e != end || v < 1 || v > 255)
            *bad = 1;
        else
            *port = (int)v;
    }
    *p = end;
    return 1;
}

int verbs_dev_spec_valid(const char *spec)
{
    const char *p = spec;
    char name[ENTRY_MAX];
    int port, neg, bad;
    if (spec == NULL)
        return 1;
    if (*p == '=' || *p == '^')
        p++;
    while (next_entry(&p, name, &port, &neg, &bad))
        if (bad) {
            wsync_error(WSYNC_ERR_INVALID,
                        "WSYNC_IB_DEVICES='%s': entry '%s' is not name[:port] with a port 1-255 "
                        "(example: mlx5_0:1,mlx5_1 or ^mlx5_2)",
                        spec, name);
            return 0;
        }
    return 1;
}

int verbs_dev_selected(const char *spec, const char *name, int port)
{
    const char *p = spec;
    char ent[ENTRY_MAX];
    int exact = 0, all_neg = 0, includes = 0, included = 0, eport, neg, bad;
    if (spec == NULL || *spec == '\0')
        return 1;
    if (*p == '=') {
        exact = 1;
        p++;
    } else if (*p == '^') {
        all_neg = 1;
        p++;
    }
    while (next_entry(&p, ent, &eport, &neg, &bad)) {
        int match;
        if (bad)
            continue;
        match = exact ? strcmp(name, ent) == 0 : strncmp(name, ent, strlen(ent)) == 0;
        match = match && (eport == 0 || eport == port);
        if (neg || all_neg) {
            if (match)
                return 0;
        } else {
            includes++;
            included |= match;
        }
    }
    return includes == 0 || included;
}

/* Leading '/'-separated components two paths share. */
static int common_depth(const char *a, const char *b)
{
    int depth = 0;
    for (;;) {
        const char *ea = strchr(a, '/'), *eb = strchr(b, '/');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        if (la != lb || strncmp(a, b, la) != 0)
            return depth;
        if (la > 0)
            depth++;
        if (ea == NULL || eb == NULL)
            return depth;
        a = ea + 1;
        b = eb + 1;
    }
}

int verbs_pci_closest(const char *gpu_path, const char *const *nic_paths, int n, int *near)
{
    int best = -1, i, count = 0;
    for (i = 0; i < n; i++)
        near[i] = 0;
    if (gpu_path == NULL || *gpu_path == '\0' || n == 0)
        return 0;
    for (i = 0; i < n; i++) {
        int d = nic_paths[i] ? common_depth(gpu_path, nic_paths[i]) : -1;
        if (d > best)
            best = d;
    }
    for (i = 0; i < n; i++)
        if (nic_paths[i] && common_depth(gpu_path, nic_paths[i]) == best) {
            near[i] = 1;
            count++;
        }
    return count;
}

static int ipv4_mapped(const uint8_t g[16])
{
    static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g, pre, 12) == 0;
}

static int link_local(const uint8_t g[16])
{
    return g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
}

static int zero_gid(const uint8_t g[16])
{
    static const uint8_t z[16];
    return memcmp(g, z, 16) == 0;
}

int verbs_gid_pick(const verbs_gid_entry_t *table, int n, int want)
{
    int i;
    if (want >= 0) {
        if (want < n && table[want].valid && !zero_gid(table[want].gid))
            return want;
        wsync_error(WSYNC_ERR_INVALID, "WSYNC_IB_GID_INDEX=%d names an empty GID entry (the port has %d)", want, n);
        return -1;
    }
    for (i = 0; i < n; i++)
        if (table[i].valid && table[i].type == VERBS_GID_ROCE_V2 && ipv4_mapped(table[i].gid))
            return i;
    for (i = 0; i < n; i++)
        if (table[i].valid && table[i].type == VERBS_GID_ROCE_V2 && !link_local(table[i].gid) &&
            !zero_gid(table[i].gid))
            return i;
    wsync_error(WSYNC_ERR_UNSUPPORTED,
                "no RoCE v2 GID with an IP address on this port: give its network interface an IPv4 "
                "address, or set WSYNC_IB_GID_INDEX");
    return -1;
}

void verbs_gid_format(const uint8_t gid[16], char *out, int len)
{
    char buf[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, gid, buf, sizeof(buf)) == NULL)
        snprintf(buf, sizeof(buf), "?");
    snprintf(out, (size_t)len, "%s", buf);
}
