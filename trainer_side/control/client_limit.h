/* client_limit.h: open connections per client address, so one client (a
 * runaway script, a flood) cannot take all of the endpoint's connections:
 * past the limit a new request is answered 429 naming the address and the
 * limit. Not thread-safe on its own: the server calls it under its lock. */
#ifndef WSYNC_CONTROL_CLIENT_LIMIT_H
#define WSYNC_CONTROL_CLIENT_LIMIT_H

#include <stddef.h>
#include <sys/socket.h>

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

#endif
