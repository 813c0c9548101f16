/* settings_table.c: the one table of wsync's settings (name, type, default,
 * range, environment variable, doc); settings.c resolves and parses them. */
#include "common/base/settings.h"

#include <stddef.h>
#include <stdlib.h>

#include "common/base/plan_spec.h"
#include "common/base/status.h"
#include "common/base/verbs_select.h"

static int check_ib_devices(const char *v)
{
    return verbs_dev_spec_valid(v && v[0] ? v : NULL);
}

/* A fraction in (0, 1]: "0.02". */
static int check_fraction(const char *v)
{
    char *end;
    double x = strtod(v ? v : "", &end);
    if (v == NULL || end == v || *end != '\0' || !(x > 0 && x <= 1)) {
        wsync_error(WSYNC_ERR_INVALID, "expected a fraction in (0, 1], such as 0.02, got '%s'", v ? v : "");
        return 0;
    }
    return 1;
}

/* Defaults are written as the environment would write them. Ranges are the
 * ones the code can honour: a port is 0..65535, the verbs ack timeout
 * exponent 1..31 and retry count 0..7 are what the hardware takes, 16 TCP
 * connections and 8 NCCL ops per group are the arrays' sizes. */
const wsync_setting_def_t wsync_settings_table[WSYNC_SET_COUNT] = {
    [WSYNC_SET_LOG] = {.name = "log",
                       .type = WSYNC_STYPE_ENUM,
                       .dflt = "warn",
                       .env = "WSYNC_LOG",
                       .choices = "error|warn|info|debug",
                       .doc = "messages at or below this level go to stderr (`serve` shows info)"},
    [WSYNC_SET_TRACE] = {.name = "trace",
                         .type = WSYNC_STYPE_BOOL,
                         .dflt = "0",
                         .env = "WSYNC_TRACE",
                         .doc = "a timestamped line per phase of a pull, one clock for all processes of a host"},
    [WSYNC_SET_TOKEN] = {.name = "token",
                         .type = WSYNC_STYPE_STRING,
                         .dflt = "",
                         .env = "WSYNC_TOKEN",
                         .secret = 1,
                         .doc = "the deployment's token: sent to the control endpoint and proven on every "
                                "data-plane connection (docs/SECURITY.md), when the caller gives none"},
    [WSYNC_SET_HOST_ID] = {.name = "host_id",
                           .type = WSYNC_STYPE_STRING,
                           .dflt = "",
                           .env = "WSYNC_HOST_ID",
                           .doc = "this machine's id (node boards and colocated trainer ranks are matched by "
                                  "it); empty: the host name"},
    [WSYNC_SET_CONNECT_TIMEOUT_MS] = {.name = "connect_timeout_ms",
                                      .type = WSYNC_STYPE_MS,
                                      .dflt = "10000",
                                      .min = 1,
                                      .max = 3600000,
                                      .env = "WSYNC_CONNECT_TIMEOUT_MS",
                                      .doc = "connect and handshake timeout of transports and the pull-request "
                                             "channel"},
    [WSYNC_SET_PUBLISH_THREADS] = {.name = "publish_threads",
                                   .type = WSYNC_STYPE_INT,
                                   .dflt = "0",
                                   .min = 0,
                                   .max = 8,
                                   .env = "WSYNC_PUBLISH_THREADS",
                                   .doc = "threads that digest and copy a publish in host memory; 0: one per CPU "
                                          "(at most 8)"},
    [WSYNC_SET_LOCAL_TRANSPORT] = {.name = "local_transport",
                                   .type = WSYNC_STYPE_BOOL,
                                   .dflt = "1",
                                   .env = "WSYNC_LOCAL_TRANSPORT",
                                   .doc = "pull from a trainer rank on this host's GPUs by CUDA IPC copy (0: use "
                                          "the configured transport)"},
    [WSYNC_SET_GPU_SHARED_LANDING] = {.name = "gpu_shared_landing",
                                      .type = WSYNC_STYPE_BOOL,
                                      .dflt = "1",
                                      .env = "WSYNC_GPU_SHARED_LANDING",
                                      .doc = "local ranks sharing the GPU of the trainer rank that owns a chunk "
                                             "each "
                                             "copy it from the trainer (0: one lands it, the others copy it from "
                                             "that "
                                             "rank)"},
    [WSYNC_SET_SPARSE_IMAGE] = {.name = "sparse_image",
                                .type = WSYNC_STYPE_BOOL,
                                .dflt = "1",
                                .env = "WSYNC_SPARSE_IMAGE",
                                .doc = "in place into the caller's tensors with a target: in host memory free the "
                                       "image's pages chunk by chunk, trainers putting in chunk order one put at "
                                       "a time; in GPU memory over tcp back only the bytes that do not land "
                                       "straight in the tensors (0: keep a whole image)"},
    [WSYNC_SET_TCP_PORT] = {.name = "tcp_port",
                            .type = WSYNC_STYPE_INT,
                            .dflt = "0",
                            .min = 0,
                            .max = 65535,
                            .env = "WSYNC_TCP_PORT",
                            .doc = "port the tcp transport of an engine rank listens on; 0: any free port"},
    [WSYNC_SET_TCP_CONNS] = {.name = "tcp_conns",
                             .type = WSYNC_STYPE_INT,
                             .dflt = "4",
                             .min = 1,
                             .max = 16,
                             .env = "WSYNC_TCP_CONNS",
                             .doc = "TCP connections per trainer-engine pair (puts are spread over them)"},
    [WSYNC_SET_VERBS_PORT] = {.name = "verbs_port",
                              .type = WSYNC_STYPE_INT,
                              .dflt = "0",
                              .min = 0,
                              .max = 65535,
                              .env = "WSYNC_VERBS_PORT",
                              .doc = "TCP port of the verbs transport's queue-pair handshake; 0: any free port"},
    [WSYNC_SET_IB_DEVICES] = {.name = "ib_devices",
                              .type = WSYNC_STYPE_STRING,
                              .dflt = "",
                              .env = "WSYNC_IB_DEVICES",
                              .check = check_ib_devices,
                              .doc = "RDMA devices to use, `name[:port]` list (`mlx5_0:1,mlx5_1`, `^mlx5_2`); "
                                     "empty: every active port"},
    [WSYNC_SET_IB_GID_INDEX] = {.name = "ib_gid_index",
                                .type = WSYNC_STYPE_INT,
                                .dflt = "-1",
                                .min = -1,
                                .max = 255,
                                .env = "WSYNC_IB_GID_INDEX",
                                .doc = "RoCE GID index; -1: the first RoCE v2 IPv4-mapped GID"},
    [WSYNC_SET_IB_TIMEOUT] = {.name = "ib_timeout",
                              .type = WSYNC_STYPE_INT,
                              .dflt = "14",
                              .min = 1,
                              .max = 31,
                              .env = "WSYNC_IB_TIMEOUT",
                              .doc = "verbs ack timeout exponent (4.096 us x 2^N; 14: a dead peer is seen in "
                                     "about 0.5 s)"},
    [WSYNC_SET_IB_RETRY_CNT] = {.name = "ib_retry_cnt",
                                .type = WSYNC_STYPE_INT,
                                .dflt = "7",
                                .min = 0,
                                .max = 7,
                                .env = "WSYNC_IB_RETRY_CNT",
                                .doc = "verbs transport retries before a queue pair fails"},
    [WSYNC_SET_NCCL_OP_TIMEOUT_MS] = {.name = "nccl_op_timeout_ms",
                                      .type = WSYNC_STYPE_MS,
                                      .dflt = "60000",
                                      .min = 1,
                                      .max = 3600000,
                                      .env = "WSYNC_NCCL_OP_TIMEOUT_MS",
                                      .doc = "an NCCL send/recv group without any completion for this long "
                                             "fails (the peer is gone)"},
    [WSYNC_SET_NCCL_GROUP] = {.name = "nccl_group",
                              .type = WSYNC_STYPE_INT,
                              .dflt = "8",
                              .min = 1,
                              .max = 8,
                              .env = "WSYNC_NCCL_GROUP",
                              .doc = "NCCL ops issued per group (both sides must agree)"},
    [WSYNC_SET_CONTROL_GRACE_MS] = {.name = "control_grace_ms",
                                    .type = WSYNC_STYPE_MS,
                                    .dflt = "60000",
                                    .min = 0,
                                    .max = 86400000,
                                    .env = "WSYNC_CONTROL_GRACE_MS",
                                    .doc = "how long trainers and engines retry an unreachable control endpoint "
                                           "(backoff with jitter) before a call fails; 0: no retries"},
    [WSYNC_SET_TCP_STALL_MS] = {.name = "tcp_stall_ms",
                                .type = WSYNC_STYPE_MS,
                                .dflt = "10000",
                                .min = 0,
                                .max = 3600000,
                                .env = "WSYNC_TCP_STALL_MS",
                                .doc = "a trainer's tcp put to a receiver that reads nothing for this long fails "
                                       "(frees the publish slot for the others); 0: no limit"},
    [WSYNC_SET_PLAN] = {.name = "plan",
                        .type = WSYNC_STYPE_STRING,
                        .dflt = "auto",
                        .env = "WSYNC_PLAN",
                        .check = wsync_plan_spec_valid,
                        .doc = "how engine nodes get a version: `direct` (every node from the trainer ranks), "
                               "`relay:F` (trees of fan-out F through engine nodes, `relay:1` a chain; "
                               "relays put over tcp, to nodes of the same targets), `auto` (the cost model's "
                               "choice with `links`, "
                               "else direct)"},
    [WSYNC_SET_RELAY_STALL_MS] = {.name = "relay_stall_ms",
                                  .type = WSYNC_STYPE_MS,
                                  .dflt = "3000",
                                  .min = 1,
                                  .max = 3600000,
                                  .env = "WSYNC_RELAY_STALL_MS",
                                  .doc = "a relay node that lands no piece for this long is given up: the node "
                                         "gets the missing pieces from the trainer ranks"},
    [WSYNC_SET_LINKS] = {.name = "links",
                         .type = WSYNC_STYPE_STRING,
                         .dflt = "",
                         .env = "WSYNC_LINKS",
                         .doc = "links file of this machine kind (configs/links/, or one `wsync calibrate` wrote) "
                                "for the cost model: `wsync plan --predict` and plan=auto; empty: none"},
    [WSYNC_SET_LATE_DIGESTS] = {.name = "late_digests",
                                .type = WSYNC_STYPE_ENUM,
                                .dflt = "auto",
                                .env = "WSYNC_LATE_DIGESTS",
                                .choices = "auto|on|off",
                                .doc = "a single-copy publish announces the version before its digests and "
                                       "posts them when done, engines landing meanwhile (auto: GPU trainers "
                                       "whose share is 512 MiB or more)"},
    [WSYNC_SET_HEARTBEAT_MS] = {.name = "heartbeat_ms",
                                .type = WSYNC_STYPE_MS,
                                .dflt = "10000",
                                .min = 0,
                                .max = 3600000,
                                .env = "WSYNC_HEARTBEAT_MS",
                                .doc = "trainer ranks and engine nodes register again this often so the control "
                                       "endpoint sees them live (`serve --lease`); 0: never"},
    [WSYNC_SET_DELTA] = {.name = "delta",
                         .type = WSYNC_STYPE_ENUM,
                         .dflt = "auto",
                         .env = "WSYNC_DELTA",
                         .choices = "auto|on|off",
                         .doc = "an engine rank holding a verified version asks for the next as deltas from it "
                                "(the elements that changed, docs/DELTA.md; of the trainer ranks or, under "
                                "relay:F, of its parent's relay), checked against the new version's "
                                "digests; auto: wherever the pieces come over tcp, into host or GPU memory, whole "
                                "images and engine targets, in place into the caller's own tensors too (the local "
                                "and nccl transports send full pieces: inside one GPU a full copy is the faster), "
                                "and with a links file only where the cost model finds the delta pull faster than "
                                "a full one"},
    [WSYNC_SET_DELTA_BASES] = {.name = "delta_bases",
                               .type = WSYNC_STYPE_INT,
                               .dflt = "1",
                               .min = 0,
                               .max = 4,
                               .env = "WSYNC_DELTA_BASES",
                               .doc = "versions a trainer rank keeps as delta bases: 1, the previous one, which "
                                      "the other publish slot holds (no extra memory); K > 1: K + 1 publish "
                                      "slots, "
                                      "each the rank's share of the image; 0: none, every piece goes full (a "
                                      "relaying engine node keeps one, its other image slot; 0: none)"},
    [WSYNC_SET_DELTA_DENSITY] = {.name = "delta_density",
                                 .type = WSYNC_STYPE_STRING,
                                 .dflt = "0.02",
                                 .env = "WSYNC_DELTA_DENSITY",
                                 .check = check_fraction,
                                 .doc = "delta=auto with a links file: the fraction of elements expected to "
                                        "change per version, which the cost model costs a delta pull at until the "
                                        "rank has measured one, and plan=auto its relay choice at "
                                        "(docs/DELTA.md)"},
    [WSYNC_SET_DIRECT_PACK] = {.name = "direct_pack",
                               .type = WSYNC_STYPE_BOOL,
                               .dflt = "on",
                               .env = "WSYNC_DIRECT_PACK",
                               .doc = "a GPU trainer rank gathers each packed put of a node of targets (a column "
                                      "slice) straight into the receiver's window over the local transport, "
                                      "summing what it writes, instead of packing a stage and copying out of it "
                                      "(off: the stage, as a receiver on another GPU gets; bench/RESULTS.md "
                                      "2026-12-04)"},
    [WSYNC_SET_DIGEST_MERGE] = {.name = "digest_merge",
                                .type = WSYNC_STYPE_ENUM,
                                .dflt = "auto",
                                .env = "WSYNC_DIGEST_MERGE",
                                .choices = "auto|on|off",
                                .doc = "a single-copy publish reads its share once for the record's digests and "
                                       "a node plan's put digests (trainer_side/digest_merge.c); auto: GPU "
                                       "trainers (on the host the two sums cost more than the read they save: "
                                       "bench/RESULTS.md 2026-12-04, evening)"},
};
