/* status.c: `wsync status`: where every engine stands, for a person. */
#include <getopt.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/control_client.h"
#include "common/util.h"

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

static void print_table(const json_t *st)
{
    const json_t *e, *t;
    size_t i, ntr = 0, reg = 0;
    time_t now = time(NULL);
    json_array_foreach(json_object_get(st, "trainers"), i, t)
    {
        ntr++;
        reg += json_is_true(json_object_get(t, "registered"));
    }
    const json_t *sf = json_object_get(st, "state_file");
    printf("latest version %lld   trainer ranks %zu/%zu registered   engines %zu\n",
           (long long)json_integer_value(json_object_get(st, "latest_version")), reg, ntr,
           json_array_size(json_object_get(st, "engines")));
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
        double upd = json_number_value(json_object_get(e, "updated"));
        char prog[128];
        printf("%-16s %-8s %8lld %6lld %5lld %9.3fs %9.2f  %s%.0fs ago%s%s\n",
               json_string_value(json_object_get(e, "id")), json_string_value(json_object_get(e, "state")),
               (long long)json_integer_value(json_object_get(e, "version")),
               (long long)json_integer_value(json_object_get(e, "behind")),
               (long long)json_integer_value(json_object_get(e, "local_ranks")),
               json_number_value(json_object_get(e, "last_sync_s")),
               json_number_value(json_object_get(e, "last_gbps")), progress_text(e, prog, sizeof(prog)),
               upd > 0 ? difftime(now, (time_t)upd) : 0.0, err && err[0] ? "  " : "", err && err[0] ? err : "");
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
                   "A table of engines: version held, state, versions behind, last sync time and GB/s.\n"
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
