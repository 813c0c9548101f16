/* delay_link: a user-space Ethernet link with netem's fixed delay and random
 * loss, for the network-fault tests (this kernel has no netem qdisc). It joins
 * two interfaces of one network namespace through AF_PACKET sockets: every
 * frame that arrives on one leaves through the other DELAY ms later, unless a
 * seeded generator drops it (probability LOSS) or its direction's queue is
 * full (then it is dropped too, as netem's `limit` does). Frames the kernel
 * sends out of an interface (PACKET_OUTGOING, which includes the ones this
 * program sends) are never read back, so nothing loops.
 *
 * The delay is the same for every frame of a direction, so arrival order is
 * departure order and each direction's queue is a FIFO ring of fixed slots
 * (one frame each, sized for the interfaces' MTU). The interfaces it serves
 * must not hand it frames above their MTU (turn TSO/GSO/GRO off with
 * `ethtool -K`, and tx checksum offload too, or frames leave with a partial
 * checksum); one that does is counted as oversized and dropped.
 *
 * Usage: delay_link --if-a IF --if-b IF [--delay-ms 50] [--loss 0.01]
 *                   [--seed N] [--queue FRAMES]
 * Prints one "forwarding" line on stdout once both sockets are bound, and the
 * counters of each direction on stderr at SIGUSR1 and at exit (SIGTERM,
 * SIGINT). Runs as root (CAP_NET_RAW). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

/* 8192 frames of 1514 bytes per direction hold 50 ms of traffic at 2 Gbit/s,
 * about what this relay forwards at all: 1.9 Gbit/s of one TCP stream with no
 * delay, measured on the 2-core dev VM. */
#define DEFAULT_QUEUE 8192
#define RECV_BATCH 64 /* frames read from one socket before looking at the other */

struct options {
    const char *if_a, *if_b;
    double delay_ms, loss;
    uint64_t seed;
    size_t queue;
};

/* One direction: frames read from rx_fd wait in a ring until due, then go out
 * of tx_fd. */
struct lane {
    const char *from, *to;
    int rx_fd, tx_fd;
    size_t slot, cap, head, count;
    uint64_t *due_ns;
    uint32_t *len;
    uint8_t *data;
    uint64_t received, sent, lost, full, oversized, send_errors;
};

static volatile sig_atomic_t stop_requested, stats_requested;

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        stats_requested = 1;
    else
        stop_requested = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: a seeded generator, so a run's drops can be replayed. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int lose_frame(uint64_t *state, double loss)
{
    return loss > 0 && (double)(next_random(state) >> 11) * 0x1.0p-53 < loss;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: delay_link --if-a IF --if-b IF [--delay-ms MS] [--loss P] [--seed N] [--queue FRAMES]\n"
            "  forwards every Ethernet frame between the two interfaces after MS milliseconds (default 50)\n"
            "  each way, dropping a fraction P (0..1, default 0) at random from seed N (default 1);\n"
            "  FRAMES per direction are queued at most (default %d), the rest dropped\n",
            DEFAULT_QUEUE);
}

/* 0 to run, 1 after --help, -1 after printing what was wrong with the command line. */
static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longs[] = {
        {"if-a", required_argument, NULL, 'a'},     {"if-b", required_argument, NULL, 'b'},
        {"delay-ms", required_argument, NULL, 'd'}, {"loss", required_argument, NULL, 'l'},
        {"seed", required_argument, NULL, 's'},     {"queue", required_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    char *end;
    int c;

    *o = (struct options){.delay_ms = 50, .seed = 1, .queue = DEFAULT_QUEUE};
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        errno = 0;
        switch (c) {
        case 'a': o->if_a = optarg; break;
        case 'b': o->if_b = optarg; break;
        case 'd':
            o->delay_ms = strtod(optarg, &end);
            if (*end || errno || o->delay_ms < 0 || o->delay_ms > 60000) {
                fprintf(stderr, "delay_link: --delay-ms '%s': want milliseconds from 0 to 60000\n", optarg);
                return -1;
            }
            break;
        case 'l':
            o->loss = strtod(optarg, &end);
            if (*end || errno || !(o->loss >= 0 && o->loss <= 1)) {
                fprintf(stderr, "delay_link: --loss '%s': want a fraction from 0 to 1 (0.01 is 1%%)\n", optarg);
                return -1;
            }
            break;
        case 's':
            o->seed = strtoull(optarg, &end, 0);
            if (*end || errno) {
                fprintf(stderr, "delay_link: --seed '%s': want an unsigned integer\n", optarg);
                return -1;
            }
            break;
        case 'q':
            o->queue = strtoull(optarg, &end, 0);
            if (*end || errno || o->queue < 1 || o->queue > (1u << 20)) {
                fprintf(stderr, "delay_link: --queue '%s': want frames from 1 to 1048576\n", optarg);
                return -1;
            }
            break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (!o->if_a || !o->if_b || optind != argc) {
        fprintf(stderr, "delay_link: %s\n",
                optind != argc ? "unexpected argument" : "--if-a and --if-b are required");
        usage(stderr);
        return -1;
    }
    if (!strcmp(o->if_a, o->if_b)) {
        fprintf(stderr, "delay_link: --if-a and --if-b are both '%s'; want two interfaces\n", o->if_a);
        return -1;
    }
    return 0;
}

/* A raw socket on interface NAME: every frame it receives (promiscuous), none
 * it or anyone else sends; *mtu_p gets the interface's MTU. -1 on error. */
static int open_port(const char *name, int *mtu_p)
{
    struct ifreq ifr = {0};
    struct sockaddr_ll sll = {0};
    struct packet_mreq mr = {0};
    int one = 1, rcvbuf = 8 << 20;
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));

    if (fd < 0) {
        fprintf(stderr, "delay_link: socket(AF_PACKET): %s (needs root or CAP_NET_RAW)\n", strerror(errno));
        return -1;
    }
    if (strlen(name) >= sizeof ifr.ifr_name) {
        fprintf(stderr, "delay_link: interface name '%s' is too long\n", name);
        goto err_close;
    }
    strcpy(ifr.ifr_name, name);
    if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) {
        fprintf(stderr, "delay_link: interface '%s': %s (ip link shows the names)\n", name, strerror(errno));
        goto err_close;
    }
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = ifr.ifr_ifindex;
    mr.mr_ifindex = ifr.ifr_ifindex;
    mr.mr_type = PACKET_MR_PROMISC;
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) < 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0) {
        fprintf(stderr, "delay_link: binding to '%s': %s\n", name, strerror(errno));
        goto err_close;
    }
    /* A burst of 50 ms can arrive between two reads on a busy box. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (ioctl(fd, SIOCGIFMTU, &ifr) < 0) {
        fprintf(stderr, "delay_link: MTU of '%s': %s\n", name, strerror(errno));
        goto err_close;
    }
    *mtu_p = ifr.ifr_mtu;
    return fd;

err_close:
    close(fd);
    return -1;
}

static int lane_init(struct lane *l, const char *from, const char *to, int rx_fd, int tx_fd, size_t slot, size_t cap)
{
    *l = (struct lane){.from = from, .to = to, .rx_fd = rx_fd, .tx_fd = tx_fd, .slot = slot, .cap = cap};
    l->due_ns = calloc(cap, sizeof *l->due_ns);
    l->len = calloc(cap, sizeof *l->len);
    l->data = malloc(cap * slot);
    if (!l->due_ns || !l->len || !l->data) {
        fprintf(stderr, "delay_link: no memory for a queue of %zu frames of %zu bytes (try a smaller --queue)\n",
                cap, slot);
        return -1;
    }
    return 0;
}

static void lane_free(struct lane *l)
{
    free(l->due_ns);
    free(l->len);
    free(l->data);
}

/* Reads up to RECV_BATCH frames that wait on the lane's socket into its ring
 * (or drops them). 0, or -1 on a socket error. */
static int lane_receive(struct lane *l, uint64_t delay_ns, double loss, uint64_t *rng, uint8_t *scratch,
                        size_t scratch_len)
{
    for (int i = 0; i < RECV_BATCH; i++) {
        struct sockaddr_ll from;
        socklen_t fromlen = sizeof from;
        size_t tail = (l->head + l->count) % l->cap;
        int room = l->count < l->cap;
        uint8_t *buf = room ? l->data + tail * l->slot : scratch;
        size_t cap = room ? l->slot : scratch_len;
        ssize_t n = recvfrom(l->rx_fd, buf, cap, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &fromlen);

        if (n < 0) {
            /* ENETDOWN: the interface was set down (a cut link); the socket
             * reports it once and works again once it is up. */
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENETDOWN)
                return 0;
            fprintf(stderr, "delay_link: reading from '%s': %s\n", l->from, strerror(errno));
            return -1;
        }
        if (from.sll_pkttype == PACKET_OUTGOING) /* older kernels ignore PACKET_IGNORE_OUTGOING */
            continue;
        l->received++;
        if ((size_t)n > cap) {
            l->oversized += room;
            l->full += !room;
            continue;
        }
        if (!room) {
            l->full++;
            continue;
        }
        if (lose_frame(rng, loss)) {
            l->lost++;
            continue;
        }
        l->due_ns[tail] = now_ns() + delay_ns;
        l->len[tail] = (uint32_t)n;
        l->count++;
    }
    return 0;
}

/* Sends every frame whose time has come. */
static void lane_release(struct lane *l, uint64_t now)
{
    while (l->count && l->due_ns[l->head] <= now) {
        if (send(l->tx_fd, l->data + l->head * l->slot, l->len[l->head], 0) < 0)
            l->send_errors++; /* a full transmit queue: the frame is lost, as on a wire */
        else
            l->sent++;
        l->head = (l->head + 1) % l->cap;
        l->count--;
    }
}

static void lane_print(const struct lane *l)
{
    fprintf(stderr,
            "delay_link: %s -> %s: received %llu, sent %llu, lost %llu (random), %llu dropped (queue full), "
            "%llu oversized, %llu send errors, %zu queued\n",
            l->from, l->to, (unsigned long long)l->received, (unsigned long long)l->sent,
            (unsigned long long)l->lost, (unsigned long long)l->full, (unsigned long long)l->oversized,
            (unsigned long long)l->send_errors, l->count);
}

/* Forwards until a stop signal. 0, or -1 on a socket error. */
static int forward(struct lane lanes[2], const struct options *o, uint8_t *scratch, size_t scratch_len,
                   const sigset_t *wait_mask)
{
    uint64_t delay_ns = (uint64_t)(o->delay_ms * 1e6), rng = o->seed;
    struct pollfd fds[2] = {{.fd = lanes[0].rx_fd, .events = POLLIN}, {.fd = lanes[1].rx_fd, .events = POLLIN}};

    while (!stop_requested) {
        uint64_t now = now_ns(), next = UINT64_MAX;
        struct timespec ts, *tsp = NULL;

        if (stats_requested) {
            stats_requested = 0;
            lane_print(&lanes[0]);
            lane_print(&lanes[1]);
        }
        for (int i = 0; i < 2; i++) {
            lane_release(&lanes[i], now);
            if (lanes[i].count && lanes[i].due_ns[lanes[i].head] < next)
                next = lanes[i].due_ns[lanes[i].head];
        }
        if (next != UINT64_MAX) {
            uint64_t wait = next > now ? next - now : 0;
            ts = (struct timespec){.tv_sec = (time_t)(wait / 1000000000u), .tv_nsec = (long)(wait % 1000000000u)};
            tsp = &ts;
        }
        /* Signals are blocked except inside ppoll, so a stop cannot slip in
         * between the test of stop_requested and the wait. */
        if (ppoll(fds, 2, tsp, wait_mask) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "delay_link: ppoll: %s\n", strerror(errno));
            return -1;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].revents & POLLNVAL) {
                fprintf(stderr, "delay_link: socket of '%s' is not open\n", lanes[i].from);
                return -1;
            }
            /* POLLERR: reading returns (and clears) the error. */
            if ((fds[i].revents & (POLLIN | POLLERR)) &&
                lane_receive(&lanes[i], delay_ns, o->loss, &rng, scratch, scratch_len))
                return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    struct lane lanes[2] = {0};
    struct sigaction sa = {.sa_handler = on_signal};
    sigset_t block, wait_mask;
    size_t slot, scratch_len = 1 << 16;
    uint8_t *scratch = NULL;
    int mtu_a, mtu_b, fd_a = -1, fd_b = -1, rc = 1;
    int parsed = parse_options(argc, argv, &o);

    if (parsed)
        return parsed > 0 ? 0 : 2;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &wait_mask);
    sigdelset(&wait_mask, SIGTERM);
    sigdelset(&wait_mask, SIGINT);
    sigdelset(&wait_mask, SIGUSR1);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);

    if ((fd_a = open_port(o.if_a, &mtu_a)) < 0 || (fd_b = open_port(o.if_b, &mtu_b)) < 0)
        goto out;
    /* A frame is the MTU plus the Ethernet header (and a VLAN tag). */
    slot = (size_t)(mtu_a > mtu_b ? mtu_a : mtu_b) + 18;
    scratch = malloc(scratch_len);
    if (!scratch || lane_init(&lanes[0], o.if_a, o.if_b, fd_a, fd_b, slot, o.queue) ||
        lane_init(&lanes[1], o.if_b, o.if_a, fd_b, fd_a, slot, o.queue))
        goto out;
    printf("delay_link: forwarding %s <-> %s: delay %g ms each way, loss %g, seed %llu, queue %zu frames of %zu "
           "bytes\n",
           o.if_a, o.if_b, o.delay_ms, o.loss, (unsigned long long)o.seed, o.queue, slot);
    fflush(stdout);
    if (forward(lanes, &o, scratch, scratch_len, &wait_mask) == 0)
        rc = 0;
    lane_print(&lanes[0]);
    lane_print(&lanes[1]);
out:
    lane_free(&lanes[0]);
    lane_free(&lanes[1]);
    free(scratch);
    if (fd_b >= 0)
        close(fd_b);
    if (fd_a >= 0)
        close(fd_a);
    return rc;
}
