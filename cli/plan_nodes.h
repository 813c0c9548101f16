/* plan_nodes.h: `wsync plan --tp`: per engine node, the node plan over its
 * ranks' targets (see plan_nodes.c). */
#ifndef WSYNC_CLI_PLAN_NODES_H
#define WSYNC_CLI_PLAN_NODES_H

#include <jansson.h>

#include "common/model/plan.h"

typedef struct plan_nodes plan_nodes_t;

/* tp_spec: NULL (every node holds the whole image) or "T[,T...]" per node
 * ("image" for a whole-image node; the last repeats). Returns the exit status
 * to use on failure (1 or 2, after a message on stderr), 0 on success. */
int plan_nodes_build(const char *tp_spec, const char *rules_path, const wsync_manifest_t *m,
                     const wsync_layout_t *layout, int M, int L, uint64_t chunk, plan_nodes_t **out);
/* nodes: [{engine, tp, network_bytes, intra_node_copy_bytes, chunks, puts, copies,
 *          trainer_send_bytes: [..], ranks: [{local_rank, tp_rank, land_bytes, holds_bytes,
 *          copy_in_bytes}]}]: a new reference. */
json_t *plan_nodes_json(const plan_nodes_t *pn);
void plan_nodes_print(const plan_nodes_t *pn);
/* The most bytes any node needs from the network, any rank lands, any rank
 * holds (what `wsync plan --predict --tp` costs). */
void plan_nodes_max(const plan_nodes_t *pn, uint64_t *node, uint64_t *land, uint64_t *hold);
void plan_nodes_free(plan_nodes_t *pn);

#endif
