/* calibrate.h: the parts of `wsync calibrate` (cli/calibrate.c): repeated
 * timings reduced to median and spread, the TCP peer, the GPU classes. */
#ifndef WSYNC_CLI_CALIBRATE_H
#define WSYNC_CLI_CALIBRATE_H

#include <stddef.h>
#include <stdio.h>

#include "common/cost/cost.h"

#define CALIB_NOTE_LEN 160

typedef struct calib {
    cost_links_t links;
    char note[COST_CLASS_COUNT][CALIB_NOTE_LEN];
    size_t bytes; /* per repetition */
    int reps;
    FILE *log;              /* one line per class */
    cost_class_t tcp_class; /* what the tcp measure is written as: tcp, tcp_trainer or tcp_engine */
} calib_t;

/* Sorts v[0..n) in place and returns its median. */
double calib_median(double *v, int n);
/* Records class `c` from `reps` rates (bytes/s) and alpha (s, 0: none). */
void calib_set(calib_t *cb, cost_class_t c, const double *rates, int reps, double alpha_s, const char *note);
/* Records class `c` as a time alone (no bandwidth: control, version): alpha
 * the median of `reps` times (s, sorted in place), noted as "<what> (min A,
 * max B us)". */
void calib_set_time(calib_t *cb, cost_class_t c, double *times, int reps, const char *what);
/* Marks `c` absent with the reason, printed as "<class>: <why>". */
void calib_absent(calib_t *cb, cost_class_t c, const char *why);

/* The GPU classes (local, gpu_peer, window, host_gpu, digest_gpu,
 * pack_gpu): measured when CUDA devices are present, else each "skipped: no
 * CUDA device". */
void calib_gpu(calib_t *cb);

/* The delta classes (delta_encode_host, delta_apply_host, and the _gpu ones
 * on GPU 0 when there is one): bf16, 2% changed. */
void calib_delta(calib_t *cb);

/* The FP8 classes (quant_host, and quant_gpu on GPU 0 when there is one):
 * bf16 in 128 x 128 blocks, fp32 scales. */
void calib_quant(calib_t *cb);

/* The control class: round trips to a control endpoint started here on
 * loopback. */
void calib_control(calib_t *cb);

/* The version class: one version end to end (publish() start -> ready) of a
 * small model, a trainer and an engine rank in this process on loopback, in
 * GPU 0's memory when there is one, else host memory. */
void calib_version(calib_t *cb);

/* `wsync calibrate --serve HOST:PORT`: answers pings and bulk transfers
 * until killed. Returns an exit status. */
int calib_serve(const char *hostport);
/* Measures tcp to `hostport` (a --serve peer): alpha from ping round trips,
 * bandwidth from bulk transfers; written as cb->tcp_class. */
wsync_status_t calib_tcp(calib_t *cb, const char *hostport);

#endif
