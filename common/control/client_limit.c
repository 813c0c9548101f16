/* client_limit.c: open connections counted per client address (a flat
 * array: one entry per client host with a connection open, scanned once per
 * connection and request; a thousand hosts cost microseconds). */
#include "common/control/client_limit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int key_of(const struct sockaddr *sa, unsigned char key[17])
{
    memset(key, 0, 17);
    if (sa == NULL)
        return 0;
    if (sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 1;
    }
    if (sa->sa_family == AF_INET6) {
        key[0] = 6;
        memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

static ctl_client_count_t *find(const ctl_clients_t *c, const unsigned char key[17])
{
    size_t i;
    for (i = 0; i < c->n; i++)
        if (memcmp(c->v[i].addr, key, 17) == 0)
            return &c->v[i];
    return NULL;
}

int ctl_clients_add(ctl_clients_t *c, const struct sockaddr *sa, int delta)
{
    unsigned char key[17];
    ctl_client_count_t *e;
    int open;
    if (!key_of(sa, key))
        return 0;
    e = find(c, key);
    if (e == NULL) {
        if (delta <= 0)
            return 0;
        if (c->n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 64;
            ctl_client_count_t *nv = realloc(c->v, cap * sizeof(*nv));
            if (nv == NULL)
                return 0; /* not counted: never refuse for our own memory */
            c->v = nv;
            c->cap = cap;
        }
        e = &c->v[c->n++];
        memcpy(e->addr, key, 17);
        e->open = 0;
    }
    e->open += delta;
    open = e->open;
    if (open <= 0) /* the last one closed: forget the client */
        *e = c->v[--c->n];
    return open > 0 ? open : 0;
}

int ctl_clients_open(const ctl_clients_t *c, const struct sockaddr *sa)
{
    unsigned char key[17];
    const ctl_client_count_t *e;
    if (!key_of(sa, key))
        return 0;
    e = find(c, key);
    return e ? e->open : 0;
}

void ctl_clients_name(const struct sockaddr *sa, char *out, size_t len)
{
    char buf[INET6_ADDRSTRLEN] = "?";
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, sizeof(buf));
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, sizeof(buf));
    snprintf(out, len, "%s", buf);
}

void ctl_clients_free(ctl_clients_t *c)
{
    free(c->v);
    memset(c, 0, sizeof(*c));
}

ctl_conn_track_t *ctl_conns_open(ctl_conns_t *cs, int fd, uint64_t now_ns)
{
    ctl_conn_track_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->fd = fd;
    t->receiving = 1;
    t->since_ns = now_ns;
    t->next = cs->head;
    if (cs->head)
        cs->head->prev = t;
    cs->head = t;
    cs->n++;
    return t;
}

void ctl_conns_close(ctl_conns_t *cs, ctl_conn_track_t *t)
{
    if (t == NULL)
        return;
    if (t->prev)
        t->prev->next = t->next;
    else
        cs->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    cs->n--;
    free(t);
}

void ctl_conns_receiving(ctl_conn_track_t *t, int receiving, uint64_t now_ns)
{
    if (t == NULL)
        return;
    t->receiving = receiving;
    t->since_ns = now_ns;
}

int ctl_conns_expire(ctl_conns_t *cs, uint64_t now_ns, uint64_t deadline_ns)
{
    ctl_conn_track_t *t;
    int n = 0;
    for (t = cs->head; t; t = t->next)
        if (t->receiving && !t->cut && now_ns - t->since_ns > deadline_ns) {
            shutdown(t->fd, SHUT_RDWR);
            t->cut = 1;
            n++;
        }
    return n;
}
