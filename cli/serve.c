/* serve.c: `wsync serve`: the control endpoint, standalone. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/base/log.h"
#include "common/control/control_server.h"

/* Each connection holds a descriptor: past Linux's default fs.nr_open no
 * process gets that many. */
#define SERVE_MAX_CONNECTIONS (1 << 20)

static volatile sig_atomic_t stop_flag;

/* Whether HOST:PORT's host is a loopback address (only this machine can
 * reach it). */
static int loopback_listen(const char *listen)
{
    return strncmp(listen, "127.", 4) == 0 || strncmp(listen, "localhost:", 10) == 0 ||
           strncmp(listen, "[::1]", 5) == 0;
}

/* Every waiting long poll holds a socket: lift the soft descriptor limit
 * towards the connection cap (as far as the hard limit allows). */
static void raise_fd_limit(int max_connections)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)(max_connections > 0 ? max_connections : 16384) + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        LOG_WARN("cannot raise the open-file limit to %llu: %m", (unsigned long long)rl.rlim_cur);
}

/* SIGINT/SIGTERM: the loops here stop, and every wait inside the library
 * (retries of the control endpoint, long polls, a pull) returns at once. */
static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
    wsync_interrupt();
}

const struct option cli_serve_options[] = {{"listen", 1, 0, 'l'},         {"state", 1, 0, 's'},
                                           {"token-file", 1, 0, 't'},     {"max-connections", 1, 0, 'm'},
                                           {"max-engines", 1, 0, 'E'},    {"max-client-connections", 1, 0, 'C'},
                                           {"private-status", 0, 0, 'P'}, {"lease", 1, 0, 'L'},
                                           {"forget-after", 1, 0, 'F'},   {"request-timeout", 1, 0, 'T'},
                                           {"help", 0, 0, 'h'},           {0, 0, 0, 0}};

int cmd_serve(int argc, char **argv)
{
    const struct option *opts = cli_serve_options;
    wsync_control_server_config_t cfg = {.listen = "0.0.0.0:8470"};
    wsync_control_server_t *s = NULL;
    wsync_status_t st;
    int o;

    if ((o = cli_config_apply("serve", &argc, &argv)) != 0)
        return o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'l': cfg.listen = optarg; break;
        case 's': cfg.state_file = optarg; break;
        case 't': cfg.token_file = optarg; break;
        /* 0 in each: the default (16384, 100000, no limit). */
        case 'm':
            if (cli_parse_int("serve", "--max-connections", optarg, 0, SERVE_MAX_CONNECTIONS, &cfg.max_connections))
                return 2;
            break;
        case 'E':
            if (cli_parse_int("serve", "--max-engines", optarg, 0, INT_MAX, &cfg.max_engines))
                return 2;
            break;
        case 'C':
            if (cli_parse_int("serve", "--max-client-connections", optarg, 0, INT_MAX, &cfg.max_client_connections))
                return 2;
            break;
        case 'P': cfg.private_status = 1; break;
        case 'T':
            if (cli_parse_int("serve", "--request-timeout", optarg, 1, 3600, &cfg.request_timeout_s))
                return 2;
            break;
        case 'L':
            if (cli_parse_duration("serve", "--lease", optarg, &cfg.lease_s))
                return 2;
            break;
        case 'F':
            if (cli_parse_duration("serve", "--forget-after", optarg, &cfg.forget_after_s))
                return 2;
            break;
        case 'h':
            printf("usage: wsync serve [--listen HOST:PORT] [--state FILE] [--token-file FILE] "
                   "[--max-connections N]\n"
                   "                   [--max-engines N] [--max-client-connections N] [--private-status]\n"
                   "                   [--request-timeout S] [--lease DURATION] [--forget-after DURATION]\n"
                   "                   [--config FILE] [--set SETTING=VALUE]...\n"
                   "Runs the control endpoint (default 0.0.0.0:8470) until SIGINT/SIGTERM.\n"
                   "  --state FILE       keep versions and registrations across restarts (atomic writes)\n"
                   "  --token-file FILE  require 'Authorization: Bearer <token>' on every mutating call\n"
                   "  --max-engines N    engine nodes registered at once (default 100000); a new one past\n"
                   "                     it is refused with 403\n"
                   "  --max-client-connections N\n"
                   "                     open connections per client address (default: no limit); past it\n"
                   "                     requests are answered 429 (clients retry with backoff), and 4\n"
                   "                     past it new connections from that address are closed at once\n"
                   "  --request-timeout S\n"
                   "                     a connection must deliver a whole request (headers and body)\n"
                   "                     within S seconds of opening or of its previous answer, else it\n"
                   "                     is closed (default 30; idle ones too)\n"
                   "  --private-status   GET /v1/status, /v1/trainers, /v1/versions/<v> and the long poll's\n"
                   "                     record=1 need the token too (who runs where, pull addresses);\n"
                   "                     needs --token-file\n"
                   "  --lease DURATION   a trainer rank or engine node not seen for this long (they send\n"
                   "                     a heartbeat every 10 s) shows as gone in status (default 30s)\n"
                   "  --forget-after DURATION\n"
                   "                     remove what was not seen for this long (default: never)\n"
                   "  --config FILE      read settings and these options from FILE's \"serve\" object\n"
                   "                     (docs/CONFIG.md; flags given here override the file)\n");
            return 0;
        default: return 2;
        }
    }
    wsync_log_set_level(wsync_log_enabled(WSYNC_LOG_DEBUG) ? WSYNC_LOG_DEBUG : WSYNC_LOG_INFO);
    raise_fd_limit(cfg.max_connections);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if ((st = wsync_control_server_start(&cfg, &s)) != WSYNC_OK) {
        cli_report("serve", "cannot start", st);
        return st == WSYNC_ERR_INVALID || st == WSYNC_ERR_FORMAT ? 2 : 1;
    }
    if (cfg.token_file == NULL && !loopback_listen(cfg.listen))
        fprintf(stderr,
                "wsync serve: warning: listening on %s without a token: anyone who reaches this port can "
                "publish versions and register engines; give --token-file FILE (docs/SECURITY.md), or "
                "--listen 127.0.0.1:PORT to serve this machine only\n",
                cfg.listen);
    printf("wsync serve: %s\n", wsync_control_server_url(s));
    fflush(stdout);
    while (!stop_flag)
        pause();
    wsync_control_server_stop(s);
    return 0;
}
