/* receiver_cli.h: the three things `wsync engine` (cli/engine.c) reads from
 * a receiver that the public API (wsync_receiver.h) does not give, so the
 * command line need not include the receiver's internals: the held image's
 * bytes on the host (to dump it as safetensors files when it lives in GPU
 * memory), the held version's safetensors __metadata__ (kept in the files it
 * writes) and how long the last pull took without its set-up (the figure it
 * prints). Not public: they serve a stand-in's printing and dumping, and a
 * library caller has its own tensors, metadata and clock. */
#ifndef WSYNC_ENGINE_RECEIVER_CLI_H
#define WSYNC_ENGINE_RECEIVER_CLI_H

#include <jansson.h>

#include "engine_side/wsync_receiver.h"

/* The held image readable on the host: *bytes is the image itself in host
 * memory, else a copy in *copy (malloc'd: the caller frees it; NULL when
 * none was needed); *len its length. NOT_FOUND before the first pull. */
wsync_status_t recv_cli_host_image(const wsync_receiver_t *r, void **copy, const void **bytes, size_t *len);
/* The held version's safetensors __metadata__ (an object of strings, owned
 * by the receiver until the next pull), or NULL. */
const json_t *recv_cli_metadata(const wsync_receiver_t *r);
/* Seconds the last successful pull took, set-up excluded (0 before one). */
double recv_cli_last_pull_s(const wsync_receiver_t *r);

#endif
