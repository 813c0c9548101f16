/* rules.c: the rules table (built in, or parsed from JSON) and name patterns
 * (see rules.h for the syntax); rules_target.c makes targets from them. */
#include "common/targets/rules.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/targets/rules_internal.h"
#include "common/targets/target_internal.h"

/* vLLM's names and conventions for Llama/Qwen-family models. The same rules
 * are data in configs/rules/vllm.json (a test checks both give the same
 * targets). */
static const wsync_rule_t builtin_rules[] = {
    {"*.self_attn.{q,k,v}_proj.weight", "*.self_attn.qkv_proj.weight", WSYNC_SPLIT_ROWS, 0, NULL},
    {"*.self_attn.{q,k,v}_proj.bias", "*.self_attn.qkv_proj.bias", WSYNC_SPLIT_ROWS, 0, NULL},
    {"*.mlp.{gate,up}_proj.weight", "*.mlp.gate_up_proj.weight", WSYNC_SPLIT_ROWS, 0, NULL},
    {"*.self_attn.o_proj.weight", NULL, WSYNC_SPLIT_COLS, 0, NULL},
    {"*.mlp.down_proj.weight", NULL, WSYNC_SPLIT_COLS, 0, NULL},
    {"model.embed_tokens.weight", NULL, WSYNC_SPLIT_VOCAB, 64, NULL},
    {"lm_head.weight", NULL, WSYNC_SPLIT_VOCAB, 64, NULL},
    {"*.mlp.experts.{e}.{gate,up}_proj.weight", "*.mlp.experts.w13_weight", WSYNC_SPLIT_EXPERTS, 0, NULL},
    {"*.mlp.experts.{e}.down_proj.weight", "*.mlp.experts.w2_weight", WSYNC_SPLIT_EXPERTS, 0, NULL},
};

const wsync_rules_t rules_builtin_ = {WSYNC_ARRAY_LEN(builtin_rules), builtin_rules, NULL};

static const char *const split_names[] = {
    [WSYNC_SPLIT_REPLICATE] = "replicate", [WSYNC_SPLIT_ROWS] = "rows",       [WSYNC_SPLIT_COLS] = "cols",
    [WSYNC_SPLIT_VOCAB] = "vocab",         [WSYNC_SPLIT_EXPERTS] = "experts",
};

const wsync_rules_t *wsync_rules_builtin(void)
{
    return &rules_builtin_;
}

const char *wsync_split_name(wsync_split_t s)
{
    return (unsigned)s < WSYNC_ARRAY_LEN(split_names) ? split_names[s] : "?";
}

int wsync_split_parse(const char *name, wsync_split_t *out)
{
    size_t i;
    for (i = 0; name && i < WSYNC_ARRAY_LEN(split_names); i++)
        if (strcmp(name, split_names[i]) == 0) {
            *out = (wsync_split_t)i;
            return 0;
        }
    return -1;
}

/* --- patterns ------------------------------------------------------------ */

int rules_match(const char *p, const char *s, capture_t *c)
{
    if (*p == '\0')
        return *s == '\0';
    if (*p == '*') {
        size_t n, len = strlen(s);
        for (n = 1; n <= len; n++) {
            c->star = s;
            c->star_len = n;
            if (rules_match(p + 1, s + n, c))
                return 1;
        }
        return 0;
    }
    if (*p == '{') {
        const char *close = strchr(p, '}'), *a = p + 1;
        int idx = 0;
        if (close == NULL)
            return 0;
        if (close - a == 1 && *a == 'e') {
            size_t n;
            for (n = 1; isdigit((unsigned char)s[n - 1]) && n < 19; n++) {
                if (rules_match(close + 1, s + n, c)) {
                    char digits[20];
                    memcpy(digits, s, n);
                    digits[n] = '\0';
                    c->expert = strtol(digits, NULL, 10);
                    return 1;
                }
            }
            return 0;
        }
        while (a < close) {
            const char *comma = memchr(a, ',', (size_t)(close - a));
            size_t len = (size_t)((comma ? comma : close) - a);
            if (strncmp(s, a, len) == 0 && rules_match(close + 1, s + len, c)) {
                c->alt = idx;
                return 1;
            }
            idx++;
            a += len + 1;
        }
        return 0;
    }
    return *p == *s && rules_match(p + 1, s + 1, c);
}

/* Words in the pattern's {a,b,..} list (1 without one). */
int rules_alt_count(const char *p)
{
    for (; (p = strchr(p, '{')) != NULL; p++) {
        const char *close = strchr(p, '}'), *q;
        int n = 1;
        if (close == NULL)
            return 1;
        if (close - p == 2 && p[1] == 'e')
            continue;
        for (q = p; q < close; q++)
            n += *q == ',';
        return n;
    }
    return 1;
}

/* Checks a pattern's syntax; NULL when good, else what is wrong. */
static const char *pattern_problem(const char *p, int is_into)
{
    int stars = 0, experts = 0, alts = 0;
    for (; *p; p++) {
        if (*p == '*') {
            stars++;
        } else if (*p == '{') {
            const char *close = strchr(p, '}');
            if (is_into)
                return "\"into\" may hold '*' only, no {..} group";
            if (close == NULL || memchr(p + 1, '{', (size_t)(close - p - 1)) != NULL)
                return "a '{' has no matching '}'";
            if (close - p == 2 && p[1] == 'e') {
                experts++;
            } else {
                const char *q;
                if (close == p + 1 || p[1] == ',' || close[-1] == ',')
                    return "a {..} list has an empty word";
                for (q = p + 1; q < close; q++)
                    if (*q == ',' && q[1] == ',')
                        return "a {..} list has an empty word";
                alts++;
            }
            p = close;
        } else if (*p == '}') {
            return "a '}' has no matching '{'";
        }
    }
    if (stars > 1)
        return "at most one '*' per pattern";
    if (experts > 1 || alts > 1)
        return "at most one {e} and one {a,b,..} list per pattern";
    return NULL;
}

/* --- rules as data ------------------------------------------------------- */

typedef struct owned {
    wsync_rule_t *rules;
    wsync_rule_fp8_t *fp8;
    char **strings;
    size_t nstrings;
} owned_t;

void wsync_rules_free(wsync_rules_t *r)
{
    owned_t *o;
    size_t i;
    if (r == NULL || r == &rules_builtin_)
        return;
    o = r->owned_;
    if (o != NULL) {
        for (i = 0; i < o->nstrings; i++)
            free(o->strings[i]);
        free(o->strings);
        free(o->rules);
        free(o->fp8);
        free(o);
    }
    free(r);
}

static wsync_status_t rule_check(const wsync_rule_t *r, size_t i)
{
    const char *why = pattern_problem(r->match, 0);
    if (why == NULL && r->into != NULL)
        why = pattern_problem(r->into, 1);
    if (why == NULL && r->into != NULL && strchr(r->into, '*') && !strchr(r->match, '*'))
        why = "\"into\" has a '*' but \"match\" has none to fill it";
    if (why == NULL && r->split == WSYNC_SPLIT_EXPERTS && (strstr(r->match, "{e}") == NULL || r->into == NULL))
        why = "an experts split needs {e} in \"match\" and an \"into\" name";
    if (why == NULL && r->split == WSYNC_SPLIT_VOCAB && r->pad < 1)
        why = "\"pad\" must be at least 1";
    if (why != NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "rules: rule %zu (\"%s\"): %s", i, r->match, why);
    return WSYNC_OK;
}

static wsync_status_t keep(owned_t *o, const char *s, const char **out)
{
    char *d = strdup(s);
    WSYNC_CHECK_ALLOC(d);
    o->strings[o->nstrings++] = d;
    *out = d;
    return WSYNC_OK;
}

/* Rule i's "quant" object into o->fp8[i]. */
static wsync_status_t rule_fp8(owned_t *o, const json_t *q, size_t i, wsync_rule_t *ru)
{
    char what[4200];
    const char *scale;
    wsync_rule_fp8_t *f = &o->fp8[i];
    snprintf(what, sizeof(what), "rules: rule %zu (\"%s\")", i, ru->match);
    WSYNC_CHECK(tgt_fp8_from_json(q, &f->spec, &scale, what));
    if (scale != NULL && strchr(scale, '*') != strrchr(scale, '*'))
        return wsync_error(WSYNC_ERR_FORMAT, "%s: \"quant\".\"scale\" may hold one '*' (the destination's name)",
                           what);
    WSYNC_CHECK(keep(o, scale ? scale : "*_scale_inv", &f->scale));
    ru->fp8 = f;
    return WSYNC_OK;
}

wsync_status_t wsync_rules_from_json(const char *json, size_t len, wsync_rules_t **out)
{
    json_error_t err;
    json_t *j = json_loadb(json, len, 0, &err), *arr, *e;
    wsync_rules_t *r = NULL;
    owned_t *o = NULL;
    wsync_status_t st = WSYNC_OK;
    size_t i;

    if (j == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "rules: not JSON (line %d, column %d: %s)", err.line, err.column,
                           err.text);
    arr = json_object_get(j, "rules");
    if (!json_is_object(j) || json_integer_value(json_object_get(j, "version")) != 1 || !json_is_array(arr)) {
        json_decref(j);
        return wsync_error(WSYNC_ERR_FORMAT, "rules: expected {\"version\": 1, \"rules\": [...]}");
    }
    r = calloc(1, sizeof(*r));
    o = calloc(1, sizeof(*o));
    if (r == NULL || o == NULL)
        goto nomem;
    r->owned_ = o;
    o->rules = calloc(json_array_size(arr) + 1, sizeof(*o->rules));
    o->strings = calloc(3 * json_array_size(arr) + 1, sizeof(*o->strings));
    o->fp8 = calloc(json_array_size(arr) + 1, sizeof(*o->fp8));
    if (o->rules == NULL || o->strings == NULL || o->fp8 == NULL)
        goto nomem;
    json_array_foreach(arr, i, e)
    {
        wsync_rule_t *ru = &o->rules[i];
        const char *m = json_string_value(json_object_get(e, "match"));
        const json_t *into = json_object_get(e, "into"), *pad = json_object_get(e, "pad");
        const char *split = json_string_value(json_object_get(e, "split"));
        if (!json_is_object(e) || m == NULL || m[0] == '\0') {
            st = wsync_error(WSYNC_ERR_FORMAT, "rules: rule %zu has no \"match\" pattern", i);
            goto err;
        }
        if (split == NULL || wsync_split_parse(split, &ru->split) != 0) {
            st = wsync_error(WSYNC_ERR_FORMAT,
                             "rules: rule %zu (\"%s\"): \"split\" must be one of replicate, rows, "
                             "cols, vocab, experts",
                             i, m);
            goto err;
        }
        if ((into != NULL && !json_is_string(into)) || (pad != NULL && !json_is_integer(pad))) {
            st = wsync_error(WSYNC_ERR_FORMAT,
                             "rules: rule %zu (\"%s\"): \"into\" must be a string and \"pad\" an "
                             "integer",
                             i, m);
            goto err;
        }
        WSYNC_CHECK_GOTO(keep(o, m, &ru->match), st, err);
        if (into != NULL)
            WSYNC_CHECK_GOTO(keep(o, json_string_value(into), &ru->into), st, err);
        ru->pad = pad ? (int)json_integer_value(pad) : ru->split == WSYNC_SPLIT_VOCAB ? 64 : 0;
        if (json_object_get(e, "quant") != NULL)
            WSYNC_CHECK_GOTO(rule_fp8(o, json_object_get(e, "quant"), i, ru), st, err);
        WSYNC_CHECK_GOTO(rule_check(ru, i), st, err);
        r->nrules++;
    }
    r->rules = o->rules;
    json_decref(j);
    *out = r;
    return WSYNC_OK;
nomem:
    st = wsync_error(WSYNC_ERR_NOMEM, "out of memory");
err:
    if (r != NULL)
        r->owned_ = o;
    else
        free(o);
    wsync_rules_free(r);
    json_decref(j);
    return st;
}

wsync_status_t wsync_rules_load(const char *path, wsync_rules_t **out)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    wsync_status_t st;
    if (f == NULL)
        return wsync_error(WSYNC_ERR_IO, "rules file %s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        (buf = malloc((size_t)n + 1)) == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return wsync_error(WSYNC_ERR_IO, "rules file %s: cannot read it", path);
    }
    fclose(f);
    st = wsync_rules_from_json(buf, (size_t)n, out);
    free(buf);
    if (st != WSYNC_OK)
        return wsync_error(st, "rules file %s: %s", path, wsync_last_error());
    return WSYNC_OK;
}
