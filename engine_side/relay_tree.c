/* relay_tree.c: the parent of a node under relay:F (relay_tree.h). */
#include "engine_side/relay_tree.h"

#include <stdlib.h>
#include <string.h>

typedef struct ranked {
    const relay_node_t *node;
    size_t index;
    int holds;
} ranked_t;

static int by_order(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->holds != y->holds)
        return x->holds ? -1 : 1;
    return strcmp(x->node->id, y->node->id);
}

int relay_tree_parent(const relay_node_t *nodes, size_t n, const char *self, int fanout)
{
    ranked_t *order;
    size_t i, me = n;
    int parent = -1;
    if (n == 0 || fanout < 1 || (order = calloc(n, sizeof(*order))) == NULL)
        return -1;
    for (i = 0; i < n; i++)
        order[i] = (ranked_t){.node = &nodes[i],
                              .index = i,
                              .holds = nodes[i].holds && strcmp(nodes[i].id, self) != 0};
    qsort(order, n, sizeof(*order), by_order);
    for (i = 0; i < n; i++)
        if (strcmp(order[i].node->id, self) == 0 && me == n)
            me = i;
    if (me < n && me > 0)
        parent = (int)order[(me - 1) / (size_t)fanout].index;
    free(order);
    return parent;
}
