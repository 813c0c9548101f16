/* dests_procs.h: whole-image receivers with the caller's tensors
 * (config.dests) as real processes: this process runs the control endpoint
 * and one trainer rank (host memory); L forked engine processes form one
 * node (shm windows on the host, CUDA IPC windows between processes on one
 * GPU), each with every other manifest tensor (a different half per rank),
 * or every tensor (ranks in `full`, a bit mask), in memory of its own,
 * allocated on the receiver's device. Staged, the node sets up one image
 * slot per rank when every rank gives every tensor, else two (checked
 * after each pull); in place on the host with every tensor given, each
 * rank's image is sparse and holds under a quarter of its pages after each
 * pull (engine_side/release.h). Per version
 * the parent publishes, then tells every child which version to pull; a
 * child pulls it and compares its tensors, copied back to the host, with
 * the bytes the trainer's fill gives at their image offsets (regenerated in
 * the child, not read through wsync). Versions: 1, 2 clean; 3 corrupted
 * after its digest (WSYNC_TEST_CORRUPT_PIECE=0: every rank holds piece 0,
 * every rank must fail; staged: the tensors still hold version 2; in place:
 * nothing held); 4 clean again. Shared by the host test
 * (tests/unit/engine_side/dests_procs_test.c) and the GPU one
 * (tests/gpu/dests_test.c). */
#ifndef WSYNC_TESTS_DESTS_PROCS_H
#define WSYNC_TESTS_DESTS_PROCS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/digest/digest.h"
#include "common/base/fault.h"
#include "common/model/manifest.h"
#include "common/mem/mem.h"
#include "common/base/util.h"
#include "engine_side/receiver_internal.h"
#include "engine_side/wsync_receiver.h"
#include "common/control/control_server.h"
#include "trainer_side/wsync_publisher.h"

#define DP_IMAGE (6u << 20)
#define DP_CHUNK (1u << 20)
#define DP_MAX_L 4

enum { DP_OK = 0, DP_PULL_FAILED = 1, DP_MISMATCH = 2, DP_SETUP = 3 };

static uint64_t dp_seed(uint64_t v)
{
    return 1000 + v;
}

/* NULL, or the target every rank's receiver holds (set before
 * dests_procs_run: the children inherit it), e.g. the whole image as a
 * target, so the node runs as a node of identity targets. */
static const char *dests_procs_target;

/* Every tensor of `d` holds version v's bytes (copied back to the host). */
static int dp_dests_hold(const wsync_mem_ops_t *mem, const wsync_manifest_t *m, const size_t *idx,
                         const wsync_dest_tensor_t *d, int nd, uint64_t v)
{
    int i, bad = 0;
    for (i = 0; i < nd && !bad; i++) {
        const wsync_tensor_t *t = &m->tensors[idx[i]];
        char *want = malloc(t->size + 1), *have = malloc(t->size + 1);
        bad = !want || !have || mem->copy(have, d[i].ptr, t->size) != WSYNC_OK;
        if (!bad) {
            wsync_fill_pattern(want, t->size, t->offset, dp_seed(v));
            bad = memcmp(want, have, t->size) != 0;
            if (bad)
                fprintf(stderr, "  %s differs from version %llu\n", t->name, (unsigned long long)v);
        }
        free(want);
        free(have);
    }
    return bad;
}

/* In place on the host with every tensor given: the image is sparse and
 * holds under a quarter of its pages (0), else 1 with why on stderr. */
static int dp_image_sparse(const wsync_receiver_t *r, int rank)
{
    struct stat st;
    if (!r->images.sparse || !r->images.win[0].sparse || fstat(r->images.win[0].fd, &st) != 0) {
        fprintf(stderr, "  rank %d: the image is not a sparse window\n", rank);
        return 1;
    }
    if ((uint64_t)st.st_blocks * 512 >= r->images.len / 4) {
        fprintf(stderr, "  rank %d: the sparse image holds %llu of its %zu bytes after the pull\n", rank,
                (unsigned long long)st.st_blocks * 512, r->images.len);
        return 1;
    }
    return 0;
}

/* An engine rank: pulls the versions it is told (0: stop), answers one
 * result byte each. */
static int dp_child(const char *engine, const char *device, wsync_mode_t mode, int rank, int L, unsigned full,
                    int cmd_fd, int res_fd)
{
    const int all = full == (1u << L) - 1, slots = mode == WSYNC_MODE_IN_PLACE || all ? 1 : 2;
    char url[128] = "";
    const wsync_mem_ops_t *mem = NULL;
    wsync_manifest_t *m = NULL;
    wsync_receiver_t *r = NULL;
    wsync_dest_tensor_t *d = NULL;
    size_t *idx = NULL, i;
    uint64_t v, good = 0;
    int dev = 0, nd = 0, k;
    char setup = DP_SETUP;
    wsync_receiver_config_t rc = {.engine_id = engine,
                                  .local_rank = rank,
                                  .local_world = L,
                                  .device = device,
                                  .mode = mode,
                                  .transport = "tcp",
                                  .bind_host = "127.0.0.1",
                                  .host_id = "dests-procs-engine"};
    /* the control endpoint's URL first (it starts after the fork: no threads here) */
    if (read(cmd_fd, url, sizeof(url)) != (ssize_t)sizeof(url))
        return 1;
    url[sizeof(url) - 1] = '\0';
    rc.control_url = url;
    rc.target_json = dests_procs_target;
    if (wsync_mem_get(device, &mem, &dev) != WSYNC_OK || mem->init(dev) != WSYNC_OK ||
        wsync_manifest_synthetic(DP_IMAGE, &m) != WSYNC_OK) {
        fprintf(stderr, "  rank %d set-up: %s\n", rank, wsync_last_error());
        return write(res_fd, &setup, 1) == 1 ? 1 : 1;
    }
    d = calloc(m->ntensors, sizeof(*d));
    idx = calloc(m->ntensors, sizeof(*idx));
    for (i = 0; d && idx && i < m->ntensors; i++)
        if ((full >> rank & 1) || (i + (size_t)rank) % 2 == 0) {
            void *p = NULL;
            if (mem->alloc(m->tensors[i].size, &p) != WSYNC_OK)
                break;
            d[nd] = (wsync_dest_tensor_t){.name = m->tensors[i].name, .ptr = p, .nbytes = m->tensors[i].size};
            idx[nd++] = i;
        }
    rc.dests = d;
    rc.ndests = nd;
    if (!d || !idx || i < m->ntensors || wsync_receiver_create(&rc, &r) != WSYNC_OK) {
        fprintf(stderr, "  rank %d create: %s\n", rank, wsync_last_error());
        return write(res_fd, &setup, 1) == 1 ? 1 : 1;
    }
    setup = DP_OK;
    if (write(res_fd, &setup, 1) != 1)
        return 1;
    while (read(cmd_fd, &v, sizeof(v)) == sizeof(v) && v != 0) {
        char res = DP_OK;
        if (wsync_receiver_pull(r, v, 30000, NULL) != WSYNC_OK) {
            fprintf(stderr, "  rank %d, version %llu: %s\n", rank, (unsigned long long)v, wsync_last_error());
            res = DP_PULL_FAILED;
            /* staged: the tensors keep the last good version; in place: nothing held */
            if (mode == WSYNC_MODE_STAGED ? (good && dp_dests_hold(mem, m, idx, d, nd, good))
                                          : wsync_receiver_version(r) != 0)
                res = DP_MISMATCH;
        } else {
            good = v;
            if (dp_dests_hold(mem, m, idx, d, nd, v))
                res = DP_MISMATCH;
            if (mode == WSYNC_MODE_IN_PLACE && all && mem->kind == WSYNC_MEM_HOST && dp_image_sparse(r, rank))
                res = DP_MISMATCH;
            if (r->images.nslots != slots) {
                fprintf(stderr, "  rank %d set up %d image slots, expected %d\n", rank, r->images.nslots, slots);
                res = DP_MISMATCH;
            }
        }
        if (write(res_fd, &res, 1) != 1)
            break;
    }
    wsync_receiver_destroy(r);
    for (k = 0; k < nd; k++)
        mem->free(d[k].ptr);
    free(d);
    free(idx);
    wsync_manifest_free(m);
    return 0;
}

/* Runs the versions; returns the number of checks that failed (messages on stderr). */
static int dests_procs_run(const char *device, wsync_mode_t mode, int L, unsigned full, const char *engine)
{
    wsync_control_server_config_t sc = {.listen = "127.0.0.1:0"};
    wsync_publisher_config_t pc = {.rank = 0,
                                   .world = 1,
                                   .chunk_size = DP_CHUNK,
                                   .listen = "127.0.0.1:0",
                                   .advertise_host = "127.0.0.1",
                                   .host_id = "dests-procs-trainer"};
    /* expected result per version: clean ones pass, the corrupted one fails everywhere */
    static const struct {
        uint64_t v;
        int corrupt;
    } steps[] = {{1, 0}, {2, 0}, {3, 1}, {4, 0}};
    wsync_control_server_t *server = NULL;
    wsync_publisher_t *pub = NULL;
    wsync_manifest_t *m = NULL;
    json_t *mj = NULL;
    char *mtext = NULL, *src = NULL;
    int cmd[DP_MAX_L][2], res[DP_MAX_L][2], p, s, failures = 0;
    pid_t pids[DP_MAX_L];
    uint64_t zero = 0;

    if (wsync_manifest_synthetic(DP_IMAGE, &m) != WSYNC_OK || wsync_manifest_to_json(m, &mj) != WSYNC_OK ||
        (mtext = json_dumps(mj, JSON_COMPACT)) == NULL || (src = malloc(m->image_size)) == NULL) {
        fprintf(stderr, "  set-up: %s\n", wsync_last_error());
        failures = 1;
        goto out;
    }
    for (p = 0; p < L; p++) { /* before any thread of ours exists */
        if (pipe(cmd[p]) != 0 || pipe(res[p]) != 0)
            return 1;
        fflush(NULL);
        pids[p] = fork();
        if (pids[p] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(cmd[p][1]);
            close(res[p][0]);
            json_decref(mj); /* the parent's: the child builds its own */
            wsync_manifest_free(m);
            free(mtext);
            free(src);
            _exit(dp_child(engine, device, mode, p, L, full, cmd[p][0], res[p][1]));
        }
        close(cmd[p][0]);
        close(res[p][1]);
    }
    if (wsync_control_server_start(&sc, &server) != WSYNC_OK) {
        fprintf(stderr, "  control endpoint: %s\n", wsync_last_error());
        failures++;
    }
    for (p = 0; p < L; p++) {
        char url[128] = "";
        snprintf(url, sizeof(url), "%s", server ? wsync_control_server_url(server) : "");
        if (write(cmd[p][1], url, sizeof(url)) != (ssize_t)sizeof(url))
            failures++;
    }
    for (p = 0; p < L; p++) {
        char c = DP_SETUP;
        if (read(res[p][0], &c, 1) != 1 || c != DP_OK)
            failures++;
    }
    pc.control_url = wsync_control_server_url(server);
    pc.manifest_json = mtext;
    pc.image = src;
    if (failures == 0 && wsync_publisher_create(&pc, &pub) != WSYNC_OK) {
        fprintf(stderr, "  publisher: %s\n", wsync_last_error());
        failures++;
    }
    for (s = 0; failures == 0 && s < (int)(sizeof(steps) / sizeof(steps[0])); s++) {
        if (steps[s].corrupt)
            setenv("WSYNC_TEST_CORRUPT_PIECE", "0", 1);
        wsync_faults_reload();
        wsync_fill_pattern(src, m->image_size, 0, dp_seed(steps[s].v));
        if (wsync_publisher_publish(pub, steps[s].v) != WSYNC_OK) {
            fprintf(stderr, "  publish %llu: %s\n", (unsigned long long)steps[s].v, wsync_last_error());
            failures++;
        }
        unsetenv("WSYNC_TEST_CORRUPT_PIECE");
        wsync_faults_reload();
        for (p = 0; p < L; p++)
            if (write(cmd[p][1], &steps[s].v, sizeof(steps[s].v)) != sizeof(steps[s].v))
                failures++;
        for (p = 0; p < L; p++) {
            char c = DP_SETUP;
            if (read(res[p][0], &c, 1) != 1 || c != (steps[s].corrupt ? DP_PULL_FAILED : DP_OK)) {
                fprintf(stderr, "  version %llu, rank %d: result %d, expected %d\n",
                        (unsigned long long)steps[s].v, p, c, steps[s].corrupt ? DP_PULL_FAILED : DP_OK);
                failures++;
            }
        }
    }
    for (p = 0; p < L; p++) {
        int status = 0;
        if (write(cmd[p][1], &zero, sizeof(zero)) != sizeof(zero))
            kill(pids[p], SIGKILL);
        close(cmd[p][1]);
        close(res[p][0]);
        waitpid(pids[p], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failures++;
    }
out:
    wsync_publisher_destroy(pub);
    wsync_control_server_stop(server);
    json_decref(mj);
    wsync_manifest_free(m);
    free(mtext);
    free(src);
    return failures;
}

#endif
