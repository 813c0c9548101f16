/* status.c: `wsync status`: where every engine stands, for a person. */
#include <getopt.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/control/client.h"
#include "common/base/util.h"

/* "landing 1.20 GiB of 4.00 GiB" for an engine's progress note, or "". */
static const char *progress_text(const json_t *e, char *buf, size_t len)
{
    const json_t *p = json_object_get(e, "progress");
    char a[32], b[32];
    buf[0] = '\0';
    if (p == NULL || strcmp(json_string_value(json_object_get(e, "state")) ?: "", "pulling") != 0)
        return buf;
    if (strcmp(json_string_value(json_object_get(p, "phase")) ?: "", "setup") == 0)
        snprintf(buf, len, "setting up: reserving %s of image memory  ",
                 wsync_fmt_size((uint64_t)json_integer_value(json_object_get(p, "total")), a, sizeof(a)));
    else
        snprintf(buf, len, "landing %s of %s  ",
                 wsync_fmt_size((uint64_t)json_integer_value(json_object_get(p, "bytes")), a, sizeof(a)),
                 wsync_fmt_size((uint64_t)json_integer_value(json_object_get(p, "total")), b, sizeof(b)));
    return buf;
}

/* "3 s ago" / "2 min ago" / "1.5 h ago" for a unix time, or "never". */
static const char *ago(double t, time_t now, char *buf, size_t len)
{
    double d = difftime(now, (time_t)t);
    if (t <= 0)
        snprintf(buf, len, "never");
    else if (d < 120)
        snprintf(buf, len, "%.0fs ago", d < 0 ? 0 : d);
    else if (d < 7200)
        snprintf(buf, len, "%.0f min ago", d / 60);
    else
        snprintf(buf, len, "%.1f h ago", d / 3600);
    return buf;
}

/* Trainer ranks: live or gone (with when each gone one was last seen). */
static void print_trainers(const json_t *st, time_t now)
{
    const json_t *t;
    size_t i, n = 0, live = 0, gone = 0;
    char when[32];
    json_array_foreach(json_object_get(st, "trainers"), i, t)
    {
        const char *p = json_string_value(json_object_get(t, "presence"));
        n++;
        /* An endpoint from before presence: registered means live. */
        if (p ? strcmp(p, "live") == 0 : json_is_true(json_object_get(t, "registered")))
            live++;
        gone += p && strcmp(p, "gone") == 0;
    }
    printf("trainer ranks %zu/%zu live", live, n);
    if (gone) {
        printf(", gone:");
        json_array_foreach(json_object_get(st, "trainers"), i, t)
        {
            if (strcmp(json_string_value(json_object_get(t, "presence")) ?: "", "gone") == 0)
                printf(" rank %lld (%s, last seen %s)", (long long)json_integer_value(json_object_get(t, "rank")),
                       json_string_value(json_object_get(t, "host")) ?: "?",
                       ago(json_number_value(json_object_get(t, "last_seen")), now, when, sizeof(when)));
        }
    }
    if (n > live + gone)
        printf(", %zu never registered", n - live - gone);
}

/* "1, 3" from an array of ranks, at most a line's worth. */
static void print_ranks(const json_t *arr)
{
    const json_t *r;
    size_t i;
    json_array_foreach(arr, i, r)
    {
        if (i == 16) {
            printf(" and %zu more", json_array_size(arr) - 16);
            break;
        }
        printf("%s%lld", i ? ", " : "", (long long)json_integer_value(r));
    }
}

static void print_table(const json_t *st)
{
    const json_t *e, *p;
    size_t i, live = 0;
    time_t now = time(NULL);
    const json_t *sf = json_object_get(st, "state_file");
    json_array_foreach(json_object_get(st, "engines"), i, e)
        live += strcmp(json_string_value(json_object_get(e, "presence")) ?: "live", "live") == 0;
    printf("latest version %lld   ", (long long)json_integer_value(json_object_get(st, "latest_version")));
    print_trainers(st, now);
    printf("   engines %zu (%zu live)\n", json_array_size(json_object_get(st, "engines")), live);
    json_array_foreach(json_object_get(st, "pending_versions"), i, p)
    {
        printf("version %lld pending: reported by rank%s ",
               (long long)json_integer_value(json_object_get(p, "version")),
               json_array_size(json_object_get(p, "reported")) == 1 ? "" : "s");
        print_ranks(json_object_get(p, "reported"));
        printf("; not yet by rank%s ", json_array_size(json_object_get(p, "missing")) == 1 ? "" : "s");
        print_ranks(json_object_get(p, "missing"));
        printf("\n");
    }
    if (sf && !json_is_true(json_object_get(sf, "ok")))
        printf("STATE FILE NOT WRITTEN (%lld failed writes): %s\n",
               (long long)json_integer_value(json_object_get(sf, "failed_writes")),
               json_string_value(json_object_get(sf, "error")) ? json_string_value(json_object_get(sf, "error"))
                                                               : "");
    printf("%-16s %-8s %8s %6s %5s %10s %9s  %s\n", "ENGINE", "STATE", "VERSION", "BEHIND", "RANKS", "LAST SYNC",
           "GB/s", "UPDATED / ERROR");
    json_array_foreach(json_object_get(st, "engines"), i, e)
    {
        const char *err = json_string_value(json_object_get(e, "last_error"));
        const char *node = json_string_value(json_object_get(e, "node"));
        const char *state = json_string_value(json_object_get(e, "state"));
        int gone = strcmp(json_string_value(json_object_get(e, "presence")) ?: "live", "gone") == 0;
        double upd = json_number_value(json_object_get(e, "updated"));
        char prog[128], ver[24], when[32];
        json_int_t held = json_integer_value(json_object_get(e, "version"));
        /* Version 0: the node holds none (never pulled, or a failed pull in
         * place overwrote what it held). */
        if (held > 0)
            snprintf(ver, sizeof(ver), "%lld", (long long)held);
        else
            snprintf(ver, sizeof(ver), "none");
        if (gone)
            state = json_is_true(json_object_get(e, "exited")) ? "exited" : "gone";
        printf("%-16s %-8s %8s %6lld %5lld %9.3fs %9.2f  %s", json_string_value(json_object_get(e, "id")), state,
               ver, (long long)json_integer_value(json_object_get(e, "behind")),
               (long long)json_integer_value(json_object_get(e, "local_ranks")),
               json_number_value(json_object_get(e, "last_sync_s")),
               json_number_value(json_object_get(e, "last_gbps")), progress_text(e, prog, sizeof(prog)));
        if (gone)
            printf("last seen %s", ago(json_number_value(json_object_get(e, "last_seen")), now, when, sizeof(when)));
        else
            printf("%s", ago(upd, now, when, sizeof(when)));
        printf("%s%s%s%s\n", node && node[0] ? "  NODE: " : "", node && node[0] ? node : "",
               err && err[0] ? "  " : "", err && err[0] ? err : "");
    }
}

int cmd_status(int argc, char **argv)
{
    static const struct option opts[] = {{"control", 1, 0, 'c'},
                                         {"watch", 0, 0, 'w'},
                                         {"json", 0, 0, 'j'},
                                         {"help", 0, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *url = "http://127.0.0.1:8470";
    wsync_control_t *c = NULL;
    int o, watch = 0, as_json = 0, rc = 0;
    wsync_status_t st;

    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'c': url = optarg; break;
        case 'w': watch = 1; break;
        case 'j': as_json = 1; break;
        case 'h':
            printf("usage: wsync status [--control URL] [--watch] [--json]\n"
                   "A table of engines: version held, state (gone: not seen for the endpoint's lease, or\n"
                   "exited), versions behind, last sync time and GB/s; the trainer ranks live and gone;\n"
                   "versions some ranks reported and others not yet.\n"
                   "  --watch  redraw every second      --json  print GET /v1/status as is\n");
            return 0;
        default: return 2;
        }
    }
    if ((st = wsync_control_open(url, NULL, &c)) != WSYNC_OK) {
        cli_report("status", "bad control URL", st);
        return 2;
    }
    /* One look answers at once; --watch rides through endpoint restarts. */
    if (!watch)
        wsync_control_set_grace(c, 0);
    do {
        json_t *s = NULL;
        if ((st = wsync_control_status(c, &s)) != WSYNC_OK) {
            cli_report("status", "cannot read the status", st);
            rc = 1;
            break;
        }
        if (watch && isatty(STDOUT_FILENO)) /* a file or a pipe gets the tables one after another */
            printf("\033[H\033[2J");
        if (as_json) {
            char *text = json_dumps(s, JSON_INDENT(2));
            printf("%s\n", text ? text : "{}");
            free(text);
        } else {
            print_table(s);
        }
        fflush(stdout);
        json_decref(s);
        if (watch)
            sleep(1);
    } while (watch);
    wsync_control_close(c);
    return rc;
}
