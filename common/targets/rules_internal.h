/* rules_internal.h: what rules.c (table, patterns) and rules_target.c
 * (targets from rules) share. */
#ifndef WSYNC_COMMON_RULES_INTERNAL_H
#define WSYNC_COMMON_RULES_INTERNAL_H

#include <stddef.h>

#include "common/targets/rules.h"

/* What a pattern's groups matched. */
typedef struct capture {
    const char *star;
    size_t star_len;
    long expert; /* -1: none */
    int alt;     /* index in the {..} list; 0 without one */
} capture_t;

/* 1 when `name` matches `pattern` (rules.h syntax), with the captures. */
int rules_match(const char *pattern, const char *name, capture_t *c);
/* Words in the pattern's {a,b,..} list (1 without one). */
int rules_alt_count(const char *pattern);

extern const wsync_rules_t rules_builtin_;

#endif
