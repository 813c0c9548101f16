/* delta_land.h: a pull that asks for deltas (docs/DELTA.md), by the puts of
 * the node plan: the whole image's (put i is piece i) or a node of
 * targets' (TP/EP slices, FP8 codes and scales). When this rank holds a
 * verified version of the same layout and targets (and the setting `delta`
 * allows it), each request to a trainer rank names it as the base and a
 * part of a staging region where the trainer may put puts as delta wires.
 * A wire is applied once both it and the trainer's answer (which says
 * where each wire is) are in: staged, onto a copy of the base's bytes of
 * the same put taken from the held slot; in place, onto the held bytes.
 * The put then counts as landed and is checked against the new version's
 * digests: on an identity node with its chunk, as every chunk is (a
 * digest pass: no put sum covers an applied put); on a node verifying by
 * segments, against the digest of the put's new bytes the trainer's answer
 * gives, before its chunk counts as landed (its segments are verified at
 * the end, as always). A put that fails (a wrong base, a refused wire) is
 * asked again in full from its trainer rank and the log says which put,
 * which rank, which base and why. Host or GPU memory, tcp, no caller
 * tensors in place: otherwise the pull asks for full puts. Under relay:F
 * the rank asks the parent's relay with the base instead (relay_delta.h;
 * a node of targets asks the trainer ranks its segments' digests alone,
 * whose answers place no wire), and a failing put is asked again in full
 * from its trainer rank. */
#ifndef WSYNC_ENGINE_DELTA_LAND_H
#define WSYNC_ENGINE_DELTA_LAND_H

#include "engine_side/fetch_internal.h"

/* Before the requests: decides whether this attempt asks for deltas (f->delta
 * set) and lays out the staging region. Failure only without memory. */
wsync_status_t recv_delta_begin(fetch_t *f);
/* After recv_delta_begin: whether some request of the attempt asks its
 * trainer rank for deltas (over tcp only, of a rank that keeps the base:
 * a single-copy trainer keeps none, and then the puts verify by their sums,
 * target_puts.h). */
int recv_delta_asks(const fetch_t *f);
/* Adds the base and the staging part of trainer rank t to its request `msg`
 * (built for transport rt); nothing without f->delta or over another
 * transport than tcp. */
wsync_status_t recv_delta_ask(fetch_t *f, int t, recv_transport_t *rt, json_t *msg);
/* Under relay:F: the parent's relay's request `msg` (over rt) names the
 * base and the whole staging region; its answer is read as a trainer
 * rank's (any piece of this rank's chunks may come as a wire). */
wsync_status_t recv_delta_ask_relay(fetch_t *f, recv_transport_t *rt, json_t *msg);
/* The ops' relay_gone: the relay is given up, before the transports are
 * reset: the staging region deregistered, the pieces of chunks still
 * missing forgotten (they come again, the trainer ranks asked for deltas
 * as without a relay). */
wsync_status_t recv_delta_relay_gone(recv_pull_t *p);
/* The ops' delta_landed: piece `id`'s wire landed in the staging region. */
wsync_status_t recv_delta_landed(recv_pull_t *p, uint32_t id, const wsync_completion_t *cp);
/* Each turn of the fetch: the trainer answers (where the wires are), the
 * wires both landed and placed applied, the re-fetches sent and watched. */
wsync_status_t recv_delta_poll(fetch_t *f, int *progressed);
/* Chunk c landed here (on an identity node: summed, sums by put of the
 * chunk; else sums unused): its applied puts against the digests. *again
 * 1: some failed and the chunk is asked again in full from their trainer
 * ranks (it is not done). */
wsync_status_t recv_delta_verify(fetch_t *f, uint32_t c, const uint64_t *sums, int *again);
/* The end of the attempt (before its transports may be reset): the
 * re-fetches ended, the staging region deregistered, the version's line
 * logged when st is WSYNC_OK. */
void recv_delta_end(fetch_t *f, wsync_status_t st);

#endif
