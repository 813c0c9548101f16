/* cost.h: the link cost model (docs/COST_MODEL.md). A machine kind's links
 * are read from a JSON file (configs/links/, written by hand from
 * measurements or by `wsync calibrate`); a deployment (trainer ranks and
 * hosts, engine nodes, ranks per node, the bytes each node and rank needs,
 * chunk size, memory kind, transport) is costed per candidate plan as stages
 * of loads on links, each load alpha per message + bytes / the rate the link
 * gives it (fan-out, fan-in and whole-host caps applied), the stages
 * overlapping chunk by chunk where the data path pipelines them. Pure
 * arithmetic: nothing here does I/O except cost_links_load. Thread-safe (no
 * shared state). */
#ifndef WSYNC_COMMON_COST_COST_H
#define WSYNC_COMMON_COST_COST_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/wsync.h"

/* Link classes, as named in the links file's "links" object. */
typedef enum cost_class {
    COST_LOCAL,       /* copy inside one GPU (copy engine) */
    COST_GPU_PEER,    /* one GPU to another of the same host, staged (NCCL send/recv over NVLink or PCIe) */
    COST_WINDOW,      /* copies out of a peer GPU's mapped window on the same host (CUDA IPC) */
    COST_HOST_GPU,    /* pinned host memory <-> GPU */
    COST_NIC_PUT,     /* one-sided puts across hosts (verbs, NCCL puts): leave through the sender's adapter */
    COST_NIC_STAGED,  /* staged send/recv across hosts (NCCL): may relay over the host's other adapters */
    COST_TCP,         /* the tcp transport (loopback or a NIC) */
    COST_HOST_MEMCPY, /* host memory copies (shm windows of host-memory engines) */
    COST_DIGEST_HOST, /* wsync_digest on CPU cores, one thread */
    COST_DIGEST_GPU,  /* the GPU digest kernel */
    COST_PACK_HOST,   /* gathering strided runs into a packed buffer, host */
    COST_PACK_GPU,    /* the GPU gather kernel */
    COST_CONTROL,     /* a control-endpoint round trip (alpha only) */
    COST_TCP_TRAINER, /* tcp out of a trainer host (its uplink); absent: tcp */
    COST_TCP_ENGINE,  /* tcp into and out of an engine host (relays); absent: tcp */
    COST_FUSED_GPU,   /* the GPU's copy that computes the digest of what it copies (the fused landing) */
    COST_VERSION,     /* a version's fixed cost end to end, publish start to ready, of a small model (alpha
                         only): the control path, the pull request's connection, the first piece */
    COST_DELTA_ENCODE_HOST, /* the delta encoder on one CPU core (bytes of the version per second) */
    COST_DELTA_ENCODE_GPU,  /* the GPU delta encoder kernels */
    COST_DELTA_APPLY_HOST,  /* applying a delta on one CPU core (bytes of the version per second) */
    COST_DELTA_APPLY_GPU,   /* the GPU delta apply kernels */
    COST_QUANT_HOST,        /* block FP8 quantization on one CPU core (bytes of the bf16 source per second) */
    COST_QUANT_GPU,         /* the GPU block FP8 quantization kernel (bytes of the bf16 source per second) */
    COST_CLASS_COUNT
} cost_class_t;

/* One class. Rates in bytes per second, times in seconds; 0 = not given. */
typedef struct cost_link {
    int present;       /* the file has the class (and it is not "present": false) */
    double alpha_s;    /* per message */
    double bw;         /* one sender to one receiver */
    double fan_out_bw; /* one sender to many at once, aggregate (0: bw) */
    double fan_in_bw;  /* many senders into one, aggregate (0: bw) */
    double host_bw;    /* every GPU (or adapter) of a host at once, aggregate (0: no cap) */
    double bw_min, bw_max;
    int reps; /* repetitions behind the figures (calibrate), 0 when not measured here */
} cost_link_t;

typedef struct cost_links {
    char machine[128];
    char source[1024];
    int host_gpus; /* GPUs per host (0: not said) */
    int host_nics; /* network adapters per host (0: not said: one) */
    cost_link_t link[COST_CLASS_COUNT];
} cost_links_t;

/* "nic_put", ...; NULL for a bad id. */
const char *cost_class_name(cost_class_t c);

/* Reads a links file. A malformed file fails with WSYNC_ERR_FORMAT (or
 * WSYNC_ERR_IO when it cannot be read), the message naming the file, the key
 * and what is accepted. cost_links_parse does the same on text in memory
 * (`what` names it in messages). */
wsync_status_t cost_links_load(const char *path, cost_links_t *out);
wsync_status_t cost_links_parse(const char *text, size_t len, const char *what, cost_links_t *out);
/* The links file form of `l` (the schema cost_links_parse reads): a new
 * reference. */
json_t *cost_links_to_json(const cost_links_t *l);

typedef enum cost_mem {
    COST_MEM_GPU = 0,
    COST_MEM_HOST = 1,
} cost_mem_t;

typedef enum cost_net {
    COST_NET_PUT = 0,    /* verbs / NCCL puts: nic_put */
    COST_NET_STAGED = 1, /* NCCL send/recv: nic_staged */
    COST_NET_TCP = 2,    /* tcp */
    COST_NET_LOCAL = 3,  /* trainer and engine ranks on one GPU (colocated): the local transport's fused
                            copy+digest, `local`; every engine rank on the GPU lands each chunk itself */
} cost_net_t;

/* A deployment. cost_deploy_init fills a whole-image one (every engine rank
 * holds the whole image, chunks land round-robin and fan out through
 * windows); change node_bytes / rank_land_bytes / rank_copy_bytes /
 * node_groups for engine layouts and sharded replicas. */
typedef struct cost_deploy {
    int trainers;             /* trainer ranks (each owns image_bytes / trainers) */
    int trainer_hosts;        /* hosts they run on, ranks spread evenly */
    int engines;              /* engine nodes */
    int local_ranks;          /* engine ranks per node */
    uint64_t image_bytes;     /* the whole image */
    uint64_t node_bytes;      /* bytes one node needs from outside it */
    uint64_t rank_land_bytes; /* most bytes one local rank lands from the network */
    uint64_t rank_copy_bytes; /* most bytes one local rank copies out of its peers' windows */
    uint64_t rank_hold_bytes; /* bytes one local rank holds (and verifies) */
    int node_groups;          /* nodes hold this many different byte sets (a replica spans that many
                                  nodes; relays forward only inside a group); 1: all the same */
    uint64_t chunk_bytes;     /* the plan's chunk */
    cost_mem_t mem;           /* where trainer and engine images live */
    cost_net_t net;           /* the cross-host transport */
    int tcp_conns;            /* tcp: connections per trainer rank and engine rank (the tcp_conns setting); each
                                 carries other chunks at once (0: 1) */
    uint64_t pack_bytes;      /* bytes the trainer ranks gather into packed puts per version (engine layouts) */
    int slot_copy;            /* the trainers copy the version into a publish slot before their puts go */
    int verify_after;         /* the engine ranks verify what they hold after every piece landed (targets'
                                 segments), not chunk by chunk */
    int delta;                /* COST_DELTA_OFF (full pulls), _ON (delta pulls), _AUTO (both costed, the faster
                                 chosen); docs/DELTA.md */
    double delta_wire;        /* a delta pull's wire bytes per byte of the version (the chosen forms' sizes at
                                 the changed fraction: wsync_delta_stats_from); > 0 for delta plans */
    int delta_base_copy;      /* the pulling slot first gets the base by a local copy (staged engines) */
    uint64_t quant_src_bytes; /* > 0: the trainers publish this many bytes of bf16 and quantize them to block
                                 FP8 (docs/FP8.md) before their digests; image_bytes is then what crosses,
                                 FP8 and scales */
} cost_deploy_t;

enum { COST_DELTA_OFF = 0, COST_DELTA_ON = 1, COST_DELTA_AUTO = 2 };

void cost_deploy_init(cost_deploy_t *d, int trainers, int trainer_hosts, int engines, int local_ranks,
                      uint64_t image_bytes, uint64_t chunk_bytes, cost_mem_t mem, cost_net_t net);

/* One resource a stage loads: `bytes` in `msgs` messages at `rate`. */
#define COST_WHAT_LEN 72
typedef struct cost_load {
    char what[COST_WHAT_LEN]; /* "trainer rank's adapter (nic_put)" */
    cost_class_t cls;
    double bytes, msgs, rate, alpha_s;
    double seconds; /* msgs * alpha_s + bytes / rate */
} cost_load_t;

/* A stage: its loads run at once; it lasts as long as its slowest load.
 * Pipelined stages overlap each other unit by unit (a chunk); a serial stage
 * runs alone, before the pipelined ones (or after the previous serial one). */
#define COST_MAX_LOADS 8
typedef struct cost_stage {
    char name[24]; /* "announce", "cross", "relay", "windows", "verify", ... */
    int pipelined;
    double units; /* pieces it pipelines in (chunks); >= 1 */
    int hops;     /* times a unit passes through it one after another (a relay chain's depth); >= 1 */
    int wave;     /* units it completes at once (parallel streams, each another chunk): the next pipelined
                     stage gets them a wave at a time, so the fill adds wave - 1 of the smaller unit */
    int nloads;
    cost_load_t loads[COST_MAX_LOADS];
    double seconds;
    int bottleneck; /* index of the slowest load */
} cost_stage_t;

#define COST_MAX_STAGES 12
#define COST_NAME_LEN 32
typedef struct cost_plan {
    char name[COST_NAME_LEN]; /* "direct", "relay:2", "direct+own", "direct+delta" */
    int runnable;             /* a runtime plan name (direct, relay:F), with +delta for a delta pull */
    int delta;                /* a delta pull: the trainers encode, the wire carries delta_wire of the bytes,
                                 the landing ranks apply */
    char landing[16];         /* "windows" or "own" */
    int nstages;
    cost_stage_t stages[COST_MAX_STAGES];
    double predicted_s;
    double bytes_by_class[COST_CLASS_COUNT];
    char bottleneck[COST_WHAT_LEN + 32]; /* "cross: engine node's adapters (nic_put)" */
} cost_plan_t;

/* Adds a load to stage `s`: rate <= 0 or a class not present fails
 * (WSYNC_ERR_INVALID naming the class: the links file lacks it). */
wsync_status_t cost_stage_add(cost_stage_t *s, const cost_links_t *links, cost_class_t cls, const char *what,
                              double bytes, double msgs, double rate);
/* Times every stage and the plan: serial stages add up; the pipelined ones
 * take the slowest plus, for fill and drain, `hops` units of each (one unit
 * less of the slowest, which its own time holds). */
void cost_plan_finish(cost_plan_t *p);

/* Every candidate plan for `d` (direct, relay:F for F = 1, 2, 4, ... below
 * the node count, direct+own where ranks could pull their own bytes) into
 * plans[0..*n); at most `max`. With d->delta ON the same plans as delta
 * pulls ("direct+delta", ...); AUTO gives both sets. WSYNC_ERR_INVALID for a
 * deployment that does not add up or links the transport needs that the
 * file lacks (a delta plan needs delta_encode_* and delta_apply_*). */
#define COST_MAX_PLANS 24
wsync_status_t cost_predict(const cost_links_t *links, const cost_deploy_t *d, cost_plan_t *plans, size_t max,
                            size_t *n);

/* What plan=auto uses: the fastest runnable plan. */
typedef struct cost_choice {
    char name[COST_NAME_LEN]; /* "direct" or "relay:F", as the `plan` setting writes it */
    int delta;                /* the choice is a delta pull (d->delta ON, or AUTO and faster than full) */
    double predicted_s;
    double full_s; /* the fastest full pull, for comparison (d->delta AUTO; else 0) */
    char bottleneck[COST_WHAT_LEN + 32];
} cost_choice_t;

wsync_status_t cost_choose(const cost_links_t *links, const cost_deploy_t *d, cost_choice_t *out);

/* The floor of a deployment: each engine node's distinct bytes over its
 * adapters (host_nics x the transport's one-adapter rate). */
double cost_floor_s(const cost_links_t *links, const cost_deploy_t *d);

#endif
