/* fault.h: fault-injection hooks for the test suite, read from WSYNC_TEST_*
 * environment variables. They are compiled into every build so the tests
 * exercise the shipped binary; none is set in a deployment, and none is a
 * setting (`wsync config` lists them apart, docs/CONFIG.md "Test hooks"). */
#ifndef WSYNC_COMMON_FAULT_H
#define WSYNC_COMMON_FAULT_H

#include "common/wsync.h"

typedef enum wsync_fault_id {
    WSYNC_FAULT_CORRUPT_PIECE,   /* trainer: flip a byte of this piece after digesting it */
    WSYNC_FAULT_COPY_FAIL_PIECE, /* trainer: fail the snapshot copy of this piece */
    WSYNC_FAULT_COPY_DELAY_MS,   /* trainer: sleep before each snapshot copy */
    WSYNC_FAULT_SERVE_DELAY_MS,  /* trainer: hold each pull request this long */
    WSYNC_FAULT_LAND_DELAY_MS,   /* engine: slow the landing of each chunk */
    WSYNC_FAULT_CORRUPT_PACKED,  /* trainer: flip a byte of a packed column slice (engine layouts) */
    WSYNC_FAULT_SETUP_DELAY_MS,  /* engine: a slow image set-up (first pull) */
    WSYNC_FAULT_RECV_STALL_MS,   /* engine: tcp receiver stops reading once, after its first put */
    WSYNC_FAULT_NO_DIGESTS,      /* trainer: announce a late-digest version, never post its digests */
    WSYNC_FAULT_BAD_DIGEST,      /* trainer: post a wrong late digest for this piece */
    WSYNC_FAULT_DIGEST_DELAY_MS, /* trainer: wait before posting late digests */
    WSYNC_FAULT_HOST_FAN_WINDOW, /* engine: the sparse GPU image's path on host memory (a whole shm image) */
    WSYNC_FAULT_CORRUPT_HELD, /* engine: flip a byte of this piece (put) of the held version before a delta pull */
    WSYNC_FAULT_CORRUPT_WIRE, /* trainer or relay: break the magic of this piece's delta wire */
    WSYNC_FAULT_AMAX_REFUSE,  /* trainer rank N: refuse its peers' requests for FP8 block maxima */
    WSYNC_FAULT_TDIG_DELAY_MS,   /* trainer: a slow digest of a target's puts or segments */
    WSYNC_FAULT_REJOIN_MS,       /* engine: a local rank > 0 waits this long for rank 0's board */
    WSYNC_FAULT_REFUSE_REDIRECT, /* engine: its tcp transport refuses to land bytes in the caller's tensors */
    WSYNC_FAULT_ONE_GPU_HINT,    /* engine: a node of targets plans as if it and its trainers shared one GPU */
    WSYNC_FAULT_COUNT
} wsync_fault_id_t;

typedef struct wsync_fault_def {
    const char *env;
    long long off; /* value when unset: -1 (no piece) or 0 (no delay) */
    long long min, max;
    const char *doc;
} wsync_fault_def_t;

const wsync_fault_def_t *wsync_fault_def(wsync_fault_id_t id);

/* Reads and checks every hook once; an unparsable or out-of-range value is
 * refused (library entry points fail with this error). Thread-safe. */
wsync_status_t wsync_faults_init(void);

/* Reads the variables again (tests that change them between cases). */
wsync_status_t wsync_faults_reload(void);

/* The hook's value, or its `off` value when unset (or after a failed init). */
long long wsync_fault(wsync_fault_id_t id);

#endif
