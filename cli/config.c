/* config.c: deployment files (`--config FILE`, format in docs/CONFIG.md) and
 * `wsync config`, which prints every setting with its value and source.
 *
 * A file's "settings" object feeds the settings table (common/base/settings.h);
 * its "serve", "trainer", "engine" and "demo" objects hold those commands'
 * options, key = option name with '_' for '-'. A command's options from the
 * file are placed before the command line's, so a flag given on the command
 * line overrides the file (getopt keeps the last value). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/commands.h"
#include "common/base/fault.h"
#include "common/base/settings.h"

typedef struct section {
    const char *name;
    const struct option *opts;
} section_t;

static const section_t sections[] = {
    {"serve", cli_serve_options},
    {"trainer", cli_trainer_options},
    {"engine", cli_engine_options},
    {"demo", cli_demo_options},
};

static const struct option *find_option(const struct option *opts, const char *key)
{
    char name[128];
    size_t i;
    for (i = 0; key[i] && i < sizeof(name) - 1; i++)
        name[i] = key[i] == '_' ? '-' : key[i];
    name[i] = '\0';
    if (strcmp(name, "help") == 0 || strcmp(name, "config") == 0 || strcmp(name, "set") == 0)
        return NULL;
    for (; opts->name; opts++)
        if (strcmp(opts->name, name) == 0)
            return opts;
    return NULL;
}

static void list_options(const struct option *opts, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (; opts->name && n < len; opts++) {
        const char *o = opts->name;
        if (strcmp(o, "help") == 0)
            continue;
        n += (size_t)snprintf(buf + n, len - n, "%s", n ? ", " : "");
        for (; *o && n < len - 1; o++)
            buf[n++] = *o == '-' ? '_' : *o;
        buf[n < len ? n : len - 1] = '\0';
    }
}

/* One option's value as command-line text; arrays of strings join with ','
 * (--safetensors a,b). NULL with *why set when the JSON type does not fit. */
static char *value_text(const json_t *v, const char **why)
{
    char buf[4096];
    size_t i, n = 0;
    json_t *e;
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
        return strdup(buf);
    }
    if (json_is_real(v)) {
        snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
        return strdup(buf);
    }
    if (json_is_array(v) && json_array_size(v) > 0) {
        buf[0] = '\0';
        json_array_foreach(v, i, e)
        {
            if (!json_is_string(e) || n + strlen(json_string_value(e)) + 2 > sizeof(buf)) {
                *why = "an array must hold strings (joined with ',')";
                return NULL;
            }
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? "," : "", json_string_value(e));
        }
        return strdup(buf);
    }
    *why = "must be a string, a number or an array of strings";
    return NULL;
}

/* Checks a command's object against its options; with `argv_out` also
 * appends "--name value" pairs to it. 0 or 2 (message printed). */
static int section_args(const char *file, const section_t *sec, const json_t *obj, char **argv_out, int *n)
{
    const char *key, *why = NULL;
    json_t *v;
    char known[1024];
    if (!json_is_object(obj)) {
        fprintf(stderr, "wsync: %s: \"%s\" must be an object of option: value\n", file, sec->name);
        return 2;
    }
    json_object_foreach((json_t *)obj, key, v)
    {
        const struct option *o = find_option(sec->opts, key);
        char *text = NULL, *flag;
        if (o == NULL) {
            list_options(sec->opts, known, sizeof(known));
            fprintf(stderr, "wsync: %s: %s.%s is not an option of wsync %s (known: %s)\n", file, sec->name, key,
                    sec->name, known);
            return 2;
        }
        if (o->has_arg == no_argument && !json_is_boolean(v)) {
            fprintf(stderr, "wsync: %s: %s.%s is a switch: true or false\n", file, sec->name, key);
            return 2;
        }
        if (o->has_arg != no_argument && (text = value_text(v, &why)) == NULL) {
            fprintf(stderr, "wsync: %s: %s.%s %s\n", file, sec->name, key, why ? why : "(out of memory)");
            return 2;
        }
        if (argv_out == NULL || json_is_false(v)) {
            free(text);
            continue;
        }
        flag = malloc(strlen(o->name) + 3);
        if (flag == NULL) {
            free(text);
            fprintf(stderr, "wsync: out of memory\n");
            return 2;
        }
        sprintf(flag, "--%s", o->name);
        argv_out[(*n)++] = flag;
        if (text)
            argv_out[(*n)++] = text;
    }
    return 0;
}

/* Loads FILE: checks every top-level key and section, applies "settings".
 * *root_out keeps the document. 0 or 2. */
static int load_file(const char *file, json_t **root_out)
{
    json_error_t jerr;
    json_t *root = json_load_file(file, 0, &jerr), *v;
    const char *key;
    size_t i;
    if (root == NULL) {
        fprintf(stderr, "wsync: config file %s: %s (line %d)\n", file, jerr.text, jerr.line);
        return 2;
    }
    if (!json_is_object(root)) {
        fprintf(stderr, "wsync: config file %s: must be a JSON object\n", file);
        json_decref(root);
        return 2;
    }
    json_object_foreach(root, key, v)
    {
        int known = strcmp(key, "about") == 0 && json_is_string(v);
        if (strcmp(key, "settings") == 0) {
            if (wsync_settings_load_json(v, file) != WSYNC_OK) {
                fprintf(stderr, "wsync: %s\n", wsync_last_error());
                json_decref(root);
                return 2;
            }
            known = 1;
        }
        for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
            if (strcmp(key, sections[i].name) == 0) {
                if (section_args(file, &sections[i], v, NULL, NULL) != 0) {
                    json_decref(root);
                    return 2;
                }
                known = 1;
            }
        if (!known) {
            char expected[128] = "about, settings";
            for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
                snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), ", %s", sections[i].name);
            fprintf(stderr, "wsync: config file %s: unknown key \"%s\" (expected %s)\n", file, key, expected);
            json_decref(root);
            return 2;
        }
    }
    *root_out = root;
    return 0;
}

static int apply_set(const char *kv)
{
    char name[128];
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv || (size_t)(eq - kv) >= sizeof(name)) {
        fprintf(stderr, "wsync: --set %s: expected SETTING=VALUE (e.g. --set tcp_conns=8)\n", kv);
        return 2;
    }
    memcpy(name, kv, (size_t)(eq - kv));
    name[eq - kv] = '\0';
    if (wsync_settings_set_flag(name, eq + 1) != WSYNC_OK) {
        fprintf(stderr, "wsync: --set %s: %s\n", kv, wsync_last_error());
        return 2;
    }
    return 0;
}

/* Takes "--config FILE" and "--set K=V" (any number) out of the command line. */
static int take_common(int *argc, char **argv, const char **file)
{
    int i, k = 1;
    for (i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--config") == 0 || strcmp(a, "--set") == 0) && i + 1 >= *argc) {
            fprintf(stderr, "wsync: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--config") == 0)
            *file = argv[++i];
        else if (strncmp(a, "--config=", 9) == 0)
            *file = a + 9;
        else if (strcmp(a, "--set") == 0) {
            if (apply_set(argv[++i]))
                return 2;
        } else if (strncmp(a, "--set=", 6) == 0) {
            if (apply_set(a + 6))
                return 2;
        } else
            argv[k++] = argv[i];
    }
    *argc = k;
    argv[k] = NULL;
    return 0;
}

static char **volatile kept_argv; /* volatile: a store never read would be optimised away */

int cli_config_apply(const char *cmd, int *argc, char ***argv)
{
    const char *file = NULL;
    json_t *root = NULL, *obj;
    char **nargv;
    int n = 1, i, rc;
    size_t s;
    if ((rc = take_common(argc, *argv, &file)) != 0)
        return rc;
    if (file && (rc = load_file(file, &root)) != 0)
        return rc;
    if (wsync_settings_init() != WSYNC_OK) {
        fprintf(stderr, "wsync %s: %s\n", cmd, wsync_last_error());
        json_decref(root);
        return 2;
    }
    obj = json_object_get(root, cmd);
    if (obj == NULL) {
        json_decref(root);
        return 0;
    }
    /* Every option twice (name and value) at most, then the command line. */
    nargv = calloc(2 * json_object_size(obj) + (size_t)*argc + 1, sizeof(*nargv));
    if (nargv == NULL) {
        json_decref(root);
        return 2;
    }
    nargv[0] = (*argv)[0];
    for (s = 0; s < sizeof(sections) / sizeof(sections[0]); s++)
        if (strcmp(sections[s].name, cmd) == 0 && section_args(file, &sections[s], obj, nargv, &n) != 0) {
            json_decref(root);
            free(nargv);
            return 2;
        }
    for (i = 1; i < *argc; i++)
        nargv[n++] = (*argv)[i];
    nargv[n] = NULL;
    /* The process keeps the new vector (and its strings) to its end; held
     * here so it stays reachable (LeakSanitizer) after the caller returns. */
    kept_argv = nargv;
    *argc = n;
    *argv = nargv;
    json_decref(root);
    return 0;
}

static const char *type_name(const wsync_setting_def_t *d)
{
    static const char *names[] = {"int", "size", "bool", "string", "ms", "enum"};
    return names[d->type];
}

static void range_text(const wsync_setting_def_t *d, char *buf, size_t len)
{
    const char *c;
    size_t i = 0;
    if (d->type == WSYNC_STYPE_ENUM) {
        /* "a|b" would split a markdown cell: "a, b". */
        for (c = d->choices; *c && i + 3 < len; c++) {
            if (*c == '|') {
                buf[i++] = ',';
                buf[i++] = ' ';
            } else {
                buf[i++] = *c;
            }
        }
        buf[i] = '\0';
    } else if (d->type == WSYNC_STYPE_BOOL)
        snprintf(buf, len, "0, 1");
    else if (d->type == WSYNC_STYPE_STRING)
        snprintf(buf, len, "text");
    else
        snprintf(buf, len, "%lld..%lld%s", d->min, d->max, d->type == WSYNC_STYPE_MS ? " ms" : "");
}

/* The tables of docs/CONFIG.md, generated from the code (a test compares). */
static void print_markdown(void)
{
    char range[128];
    int i;
    printf("| setting | environment | type | default | accepted | what it does |\n");
    printf("|---|---|---|---|---|---|\n");
    for (i = 0; i < WSYNC_SET_COUNT; i++) {
        const wsync_setting_def_t *d = wsync_setting_def((wsync_setting_id_t)i);
        range_text(d, range, sizeof(range));
        printf("| `%s` | `%s` | %s | `%s` | %s | %s |\n", d->name, d->env, type_name(d),
               d->dflt[0] ? d->dflt : "\"\"", range, d->doc);
    }
    printf("\n| test hook | off | accepted | what it does |\n|---|---|---|---|\n");
    for (i = 0; i < WSYNC_FAULT_COUNT; i++) {
        const wsync_fault_def_t *f = wsync_fault_def((wsync_fault_id_t)i);
        printf("| `%s` | `%lld` | %lld..%lld | %s |\n", f->env, f->off, f->min, f->max, f->doc);
    }
}

static void print_effective(void)
{
    int i, hooks = 0;
    printf("%-20s %-24s %-12s %s\n", "SETTING", "VALUE", "SOURCE", "ENVIRONMENT");
    for (i = 0; i < WSYNC_SET_COUNT; i++) {
        const wsync_setting_def_t *d = wsync_setting_def((wsync_setting_id_t)i);
        const char *v = wsync_setting_text((wsync_setting_id_t)i);
        if (d->secret && v[0])
            v = "(set, not shown)";
        printf("%-20s %-24s %-12s %s\n", d->name, v[0] ? v : "\"\"",
               wsync_setting_source_name(wsync_setting_source((wsync_setting_id_t)i)), d->env);
    }
    for (i = 0; i < WSYNC_FAULT_COUNT; i++) {
        const wsync_fault_def_t *f = wsync_fault_def((wsync_fault_id_t)i);
        if (wsync_fault((wsync_fault_id_t)i) != f->off) {
            if (hooks++ == 0)
                printf("test hooks set (fault injection, for tests only):\n");
            printf("  %s=%lld\n", f->env, wsync_fault((wsync_fault_id_t)i));
        }
    }
}

int cmd_config(int argc, char **argv)
{
    static const struct option opts[] = {{"markdown", 0, 0, 'm'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int o, markdown = 0, rc;
    if ((rc = cli_config_apply("config", &argc, &argv)) != 0)
        return rc;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'm': markdown = 1; break;
        case 'h':
            printf("usage: wsync config [--config FILE] [--set SETTING=VALUE]... [--markdown]\n"
                   "Prints every setting with the value in effect and where it came from (default, config\n"
                   "file, env, flag); with --config FILE also checks that file's serve, trainer, engine and\n"
                   "demo options. --markdown prints the tables of docs/CONFIG.md instead.\n");
            return 0;
        default: return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "wsync config: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (markdown)
        print_markdown();
    else
        print_effective();
    return 0;
}
