/* board_internal.h: the node board's shared memory and handle, for its two
 * files only: board.c (the shared memory's operations) and board_service.c
 * (rank 0's service that hands it out, and joining it). */
#ifndef WSYNC_ENGINE_BOARD_INTERNAL_H
#define WSYNC_ENGINE_BOARD_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "common/net/preauth.h"
#include "engine_side/board.h"

#include "common/net/handshake.h"

#define BOARD_MAGIC 0x647261426e797357ULL /* "WsynBard" */

typedef struct board_rank {
    int32_t pid;         /* 0: never joined */
    uint32_t epoch;      /* bumps on each (re)join: peers remap its windows */
    uint64_t done_gen;   /* newest generation this rank holds verified */
    uint64_t failed_gen; /* newest generation this rank failed */
    int32_t device;      /* its GPU ordinal, -1 for host memory (set before pid) */
    int32_t slots;       /* image slots it set up (0: not yet since it joined) */
    char error[256];     /* why, for failed_gen */
    uint64_t delta[4];   /* its last done attempt's delta counts (wsync_report_delta_t), before done_gen */
} board_rank_t;

/* The shared memory; board.h says who writes each part, and how. */
typedef struct board_shared {
    uint64_t magic;
    uint32_t local_world;
    int32_t leader_pid;
    uint64_t gen;     /* current pull attempt */
    uint32_t gen_seq; /* bumped with gen: the futex followers sleep on */
    uint32_t rank_seq; /* bumped when a rank is done or failed, or an attempt closes: what board_wait_ranks sleeps on */
    uint64_t gen_version; /* the version it brings */
    uint32_t gen_slot;    /* image slot it lands in */
    uint32_t cur_slot;    /* slot of the held version */
    uint64_t closed_gen;  /* attempts up to this one have ended ... */
    uint64_t closed_ok;   /* ... and this says whether closed_gen succeeded */
    uint64_t held_version;
    board_rank_t ranks[BOARD_MAX_RANKS];            /* each rank writes its own entry */
    uint64_t landed[BOARD_SLOTS][BOARD_MAX_CHUNKS]; /* gen at which the chunk landed (landing rank writes) */
    uint64_t copied[BOARD_SLOTS][BOARD_MAX_CHUNKS]; /* gen << 7 | ranks that copied it out (each adds one) */
    uint64_t land_gen;                              /* land[] below is for this attempt */
    uint8_t land[BOARD_MAX_CHUNKS];                 /* local rank each chunk lands on (rank 0 writes) */
} board_shared_t;

enum { OP_JOIN = 1, OP_PUT_WIN = 2, OP_GET_WIN = 3 };
/* A refused OP_JOIN's reply: status WSYNC_ERR_CONFLICT, slot one of these;
 * epoch the board's local world (WORLD), len the pid that holds the rank
 * (DUPLICATE). */
enum { BOARD_JOIN_WORLD = 1, BOARD_JOIN_DUPLICATE = 2 };

typedef struct board_msg {
    uint32_t op;
    int32_t rank;
    int32_t slot;
    int32_t status; /* reply: wsync_status_t */
    uint64_t len;
    uint32_t epoch;
    uint32_t pad;
    wsync_blob_t blob;
} board_msg_t;

/* Service entries per rank: the image windows, then its texts (board_text_t:
 * the layout spec, the version record). */
#define BOARD_ENTRIES (BOARD_SLOTS + 2)
#define BOARD_TEXT0 BOARD_SLOTS

typedef struct board_win {
    int present;
    wsync_blob_t blob;
    int fd;
    uint64_t len;
} board_win_t;

/* A member's connection to rank 0's service, and the process behind it. */
typedef struct board_client {
    int fd;
    int32_t pid;
} board_client_t;

#define BOARD_MAX_CLIENTS (BOARD_MAX_RANKS * 2)

struct board {
    int local_rank;
    wsync_auth_t auth;
    int device; /* GPU ordinal, -1 host */
    char name[128];
    board_shared_t *sh;
    int memfd;
    int sock; /* rank > 0: connection to rank 0's service */
    int32_t leader_pid;
    /* rank 0 only */
    int listen_fd;
    pthread_t thread;
    int serving; /* thread started */
    int stopping;
    pthread_mutex_t lock; /* wins, clients, claimed */
    board_win_t wins[BOARD_MAX_RANKS][BOARD_ENTRIES];
    board_client_t clients[BOARD_MAX_CLIENTS];
    int nclients;
    int32_t claimed[BOARD_MAX_RANKS]; /* pid each rank was last let in as (the duplicate check) */
    int admitting;                    /* admission threads running (atomic) */
    wsync_preauth_t strangers;        /* other uids proving the token */
    wsync_loglimit_t warned;
    /* the rank watch (board_watch): the service thread calls it */
    pthread_mutex_t watch_lock;
    board_watch_fn watch;
    void *watch_ctx;
    int32_t seen[BOARD_MAX_RANKS];     /* pid the watch last saw run as the rank */
    int32_t lost[BOARD_MAX_RANKS];     /* pid it saw go, until the rank is back */
    uint64_t gone_at[BOARD_MAX_RANKS]; /* when it saw the rank close its board */
    uint64_t watch_next;               /* the service thread's next round of the watch */
};

/* Rank 0's service thread, every round: call the watch for each rank that
 * went or came back since the last round (board.c). */
void board_watch_ranks(board_t *b);

/* 1 if process `pid` runs (a zombie, exited but not yet reaped, does not). */
int board_pid_alive(int32_t pid);

#endif
