/* args.h: the numeric options of every command, parsed one way. A value
 * that is not a whole number (or a size, where the option takes one), has
 * anything after it, or lies outside the option's range is refused with
 * "wsync <cmd>: <opt>: expected <what is accepted>, got '<value>'" on
 * stderr. Each returns 0 with *out set, or 2 (the usage-error exit status)
 * with *out untouched. */
#ifndef WSYNC_CLI_ARGS_H
#define WSYNC_CLI_ARGS_H

#include <stdint.h>

/* --chunk: the plan refuses chunks below 4K (common/model/plan.c); 1T is far past
 * any image, so larger is a typo. */
#define CLI_MIN_CHUNK (4ULL << 10)
#define CLI_MAX_CHUNK (1ULL << 40)

/* Decimal digits with an optional leading '-'; nothing else around them. */
int cli_parse_long(const char *cmd, const char *opt, const char *text, long lo, long hi, long *out);
int cli_parse_int(const char *cmd, const char *opt, const char *text, int lo, int hi, int *out);

/* A duration in seconds: "90", "90s", "500ms", "10m", "2h", "7d", in (0, 10
 * years]; 0, or 1 and a message naming the option. */
int cli_parse_duration(const char *cmd, const char *opt, const char *text, double *out);

/* A fraction in [0, 1]: "0.02" (or "2%"). */
int cli_parse_fraction(const char *cmd, const char *opt, const char *text, double *out);

/* A size as wsync_parse_size reads it (4096, 64M, 1G, 1.5GiB) in [lo, hi]. */
int cli_parse_size(const char *cmd, const char *opt, const char *text, uint64_t lo, uint64_t hi, uint64_t *out);

/* --plan P: the plan setting (common/base/plan_spec.h) as a flag; a bad value
 * is refused saying what is accepted. */
int cli_set_plan(const char *cmd, const char *text);

#endif
