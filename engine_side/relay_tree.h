/* relay_tree.h: which node is whose parent under relay:F, derived by every
 * node from the same inputs: the engine nodes that relay (registered with a
 * relay address) and which of them hold the version already. They are
 * ordered holders first, then the others, each group by engine id; the
 * node at position i > 0 gets the version from the node at (i - 1) / F, the
 * one at 0 from the trainer ranks. So relay:1 is a chain in id order, a late
 * joiner or a restarted node hangs below the nodes that hold the version
 * (catching up from a peer), and a parent always comes before its child in
 * the order: whatever two nodes saw, parents never form a cycle through
 * nodes that still pull (a holder pulls nothing). Pure, unit-tested. */
#ifndef WSYNC_ENGINE_RELAY_TREE_H
#define WSYNC_ENGINE_RELAY_TREE_H

#include <stddef.h>

typedef struct relay_node {
    char id[128];
    char addr[160]; /* its relay's "host:port" */
    int holds;      /* holds the version being pulled */
} relay_node_t;

/* The index in nodes[] of `self`'s parent for fan-out `fanout`, or -1: get
 * it from the trainer ranks (self is first, or not among the nodes). A node
 * that names itself a holder is taken as one that still pulls. */
int relay_tree_parent(const relay_node_t *nodes, size_t n, const char *self, int fanout);

#endif
