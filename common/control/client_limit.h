/* client_limit.h: open connections per client address, so one client (a
 * runaway script, a flood) cannot take all of the endpoint's connections:
 * past the limit a new request is answered 429 naming the address and the
 * limit. Not thread-safe on its own: the server calls it under its lock. */
#ifndef WSYNC_CONTROL_CLIENT_LIMIT_H
#define WSYNC_CONTROL_CLIENT_LIMIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Connections an address may open past its limit: each is answered 429
 * (saying why) and closed; one past these is closed at accept. */
#define CTL_CLIENT_SLACK 4

typedef struct ctl_client_count {
    unsigned char addr[17]; /* family byte + up to 16 address bytes */
    int open;
} ctl_client_count_t;

typedef struct ctl_clients {
    ctl_client_count_t *v; /* clients with open connections */
    size_t n, cap;
} ctl_clients_t;

/* A connection from `sa` opened (+1) or closed (-1); returns the client's
 * open connections afterwards (0 when the address is not IP). */
int ctl_clients_add(ctl_clients_t *c, const struct sockaddr *sa, int delta);
/* The client's open connections now. */
int ctl_clients_open(const ctl_clients_t *c, const struct sockaddr *sa);
/* The address as text, for messages. */
void ctl_clients_name(const struct sockaddr *sa, char *out, size_t len);
void ctl_clients_free(ctl_clients_t *c);

/* Every open connection, for the request deadline: a connection that has
 * not delivered a whole request (headers and body) within the deadline of
 * opening or of its previous answer is shut down (shutdown(2): its owner,
 * MHD, sees the end and closes it). Under the server's lock; the server
 * removes a connection before MHD closes its descriptor. */
typedef struct ctl_conn_track {
    int fd;
    int receiving; /* 1: a request is awaited or arriving (the deadline runs) */
    int cut;       /* shut down already */
    uint64_t since_ns;
    struct ctl_conn_track *prev, *next;
} ctl_conn_track_t;

typedef struct ctl_conns {
    ctl_conn_track_t *head;
    size_t n;
} ctl_conns_t;

ctl_conn_track_t *ctl_conns_open(ctl_conns_t *cs, int fd, uint64_t now_ns); /* NULL: out of memory */
void ctl_conns_close(ctl_conns_t *cs, ctl_conn_track_t *t);                 /* t may be NULL */
void ctl_conns_receiving(ctl_conn_track_t *t, int receiving, uint64_t now_ns);
/* Shuts down connections receiving for longer than deadline_ns; returns how many. */
int ctl_conns_expire(ctl_conns_t *cs, uint64_t now_ns, uint64_t deadline_ns);

#endif
