/* preauth.h: bounds on connections that have not proved who they are yet
 * (a pull or relay port's handshake; another uid on a node board). Each such
 * connection holds a thread until its handshake ends or times out, so a
 * flood of silent connections must not hold an unbounded number, nor keep
 * out a real peer that comes after it:
 *
 *   - at most max_per_peer pending per peer (an IP address, or a uid) and
 *     max_total in all;
 *   - a newcomer over a cap takes the place of the oldest pending one (of
 *     its peer, or of all) if that one has waited evict_ms already: a real
 *     handshake takes milliseconds, so only a silent connection is that old,
 *     and it is shut down; otherwise the newcomer is turned away at once.
 *
 * A log limiter goes with it: a flood writes a few warning lines per
 * interval, the next one with the count of those it held back. Both are thread-safe. */
#ifndef WSYNC_COMMON_NET_PREAUTH_H
#define WSYNC_COMMON_NET_PREAUTH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wsync.h"

#define WSYNC_PREAUTH_PEER_LEN 64

typedef struct wsync_preauth_entry {
    char peer[WSYNC_PREAUTH_PEER_LEN];
    int fd;         /* shut down (never closed) when evicted */
    uint64_t since; /* wsync_now_ns() when it came */
    uint32_t gen;   /* bumps each time the entry is freed: a ticket names one use */
    int used;
} wsync_preauth_entry_t;

typedef struct wsync_preauth {
    pthread_mutex_t lock;
    int max_total, max_per_peer;
    uint64_t evict_ns;
    wsync_preauth_entry_t *e;  /* max_total entries */
    uint64_t evicted, refused; /* counts since init, for tests and logs */
} wsync_preauth_t;

/* A pending connection's place; pass it back to wsync_preauth_leave. */
typedef uint64_t wsync_preauth_ticket_t;

wsync_status_t wsync_preauth_init(wsync_preauth_t *pa, int max_total, int max_per_peer, int evict_ms);
void wsync_preauth_destroy(wsync_preauth_t *pa);
/* Connection `fd` from `peer` starts its handshake at now_ns. 1 with
 * *ticket: go on (an older silent one may have been shut down to make
 * room); 0: over the caps, close fd now. */
int wsync_preauth_enter(wsync_preauth_t *pa, const char *peer, int fd, uint64_t now_ns,
                        wsync_preauth_ticket_t *ticket);
/* Its handshake ended (proved, failed or shut down): call before closing
 * the fd, so an eviction never shuts down a descriptor reused since. */
void wsync_preauth_leave(wsync_preauth_t *pa, wsync_preauth_ticket_t ticket);
/* How many connections are pending now. */
int wsync_preauth_pending(wsync_preauth_t *pa);

/* The peer a cap counts by: "IP" of a TCP socket (the port left out), "uid
 * N" of a Unix socket's process. */
void wsync_preauth_peer_of(int fd, char *out, size_t len);

/* At most `burst` lines per interval_ms window (a few refusals are each
 * worth a line; a flood is not): 1 if a line may be written now at now_ns,
 * with *held_back the lines dropped since the last one written. */
typedef struct wsync_loglimit {
    pthread_mutex_t lock;
    uint64_t interval_ns, window_start, held_back;
    int burst, in_window, any;
} wsync_loglimit_t;
void wsync_loglimit_init(wsync_loglimit_t *l, int interval_ms, int burst);
void wsync_loglimit_destroy(wsync_loglimit_t *l);
int wsync_loglimit_take(wsync_loglimit_t *l, uint64_t now_ns, uint64_t *held_back);

#endif
