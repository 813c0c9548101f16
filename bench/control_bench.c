/* control_bench.c: load on the control endpoint over loopback. (1) GET
 * /v1/status with 1000 registered engine nodes: requests per second and
 * p50/p99 latency, against GET /healthz in the same run (the server's floor
 * per request), and again while one node's reports change the model before
 * nearly every request (the document is built again each time). (2) Time from a publish until 1000 and 10 000 held long polls
 * are all answered, against the raw loopback ceiling: writing one small
 * response on as many plain TCP connections and reading them all.
 * The server runs in a child process so each side has its own descriptor
 * limit (10 000 polls need 10 000 sockets on each side).
 * Usage: control_bench [engines=1000] [seconds per load=2] */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/control/client.h"
#include "common/base/util.h"
#include "common/control/control_server.h"

#define PARALLEL 8

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Child: run the server until killed; the URL goes up the pipe. */
static pid_t spawn_server(char *url, size_t len)
{
    int p[2];
    pid_t pid;
    if (pipe(p) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        wsync_control_server_config_t cfg = {.listen = "127.0.0.1:0", .max_connections = 19000};
        const char *threads = getenv("CONTROL_BENCH_THREADS"); /* the server's MHD threads; default: its own */
        cfg.threads = threads ? atoi(threads) : 0;
        wsync_control_server_t *s = NULL;
        close(p[0]);
        raise_nofile();
        wsync_log_set_level(WSYNC_LOG_WARN);
        if (wsync_control_server_start(&cfg, &s) != WSYNC_OK) {
            fprintf(stderr, "server: %s\n", wsync_last_error());
            _exit(1);
        }
        if (write(p[1], wsync_control_server_url(s), strlen(wsync_control_server_url(s)) + 1) < 0)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    if (pid < 0 || read(p[0], url, len) <= 0) {
        close(p[0]);
        return -1;
    }
    close(p[0]);
    return pid;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

/* Bytes of the last answer on the wire (after any gzip), for the report. */
static double last_wire_bytes;

/* GET `path` from PARALLEL keep-alive connections for `secs`: rate, p50,
 * p99; with `gz` the clients accept gzip (as `wsync status`, curl
 * --compressed and browsers do) and keep it compressed: the bench measures
 * what the endpoint serves, and one client thread inflating every answer
 * (~0.1 ms for 260 KB) would measure the client instead. */
static void load(const char *base, const char *path, int gz, double secs, double *rps, double *p50, double *p99)
{
    CURLM *m = curl_multi_init();
    CURL *h[PARALLEL];
    struct curl_slist *hdrs = curl_slist_append(NULL, "Accept-Encoding: gzip");
    char url[256];
    size_t cap = 1 << 20, n = 0;
    double *lat = malloc(cap * sizeof(*lat)), t0 = wsync_now_s(), t_end = t0 + secs, t1;
    int i, running = 1, stopping = 0;
    snprintf(url, sizeof(url), "%s%s", base, path);
    for (i = 0; i < PARALLEL; i++) {
        h[i] = curl_easy_init();
        curl_easy_setopt(h[i], CURLOPT_URL, url);
        curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, discard);
        if (gz) {
            curl_easy_setopt(h[i], CURLOPT_HTTPHEADER, hdrs);
            curl_easy_setopt(h[i], CURLOPT_HTTP_CONTENT_DECODING, 0L);
        }
        curl_multi_add_handle(m, h[i]);
    }
    while (running) {
        CURLMsg *msg;
        int left;
        curl_multi_perform(m, &running);
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            double t = 0;
            long code = 0;
            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_TOTAL_TIME, &t);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            if (msg->data.result == CURLE_OK && code == 200 && n < cap) {
                curl_off_t wire = 0;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_SIZE_DOWNLOAD_T, &wire);
                last_wire_bytes = (double)wire;
                lat[n++] = t;
            }
            curl_multi_remove_handle(m, msg->easy_handle);
            if (!stopping) {
                curl_multi_add_handle(m, msg->easy_handle); /* again, same connection */
                running = 1;
            }
        }
        if (!stopping && wsync_now_s() >= t_end)
            stopping = 1;
        if (running)
            curl_multi_poll(m, NULL, 0, 50, NULL);
    }
    t1 = wsync_now_s();
    for (i = 0; i < PARALLEL; i++)
        curl_easy_cleanup(h[i]);
    curl_multi_cleanup(m);
    curl_slist_free_all(hdrs);
    qsort(lat, n, sizeof(*lat), cmp_d);
    *rps = (double)n / (t1 - t0);
    *p50 = n ? lat[n / 2] * 1e3 : 0;
    *p99 = n ? lat[n * 99 / 100] * 1e3 : 0;
    free(lat);
}

/* A child that reports "pulling" for one node as fast as the endpoint
 * answers, for `secs`: every report changes the model, so every GET
 * /v1/status after it builds the document again (a fleet whose nodes report
 * progress). Its report count goes up `fd`. */
static pid_t spawn_churn(const char *base, double secs, int fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        wsync_control_t *c = NULL;
        long n = 0;
        double end = wsync_now_s() + secs;
        if (wsync_control_open(base, NULL, &c) == WSYNC_OK)
            while (wsync_now_s() < end)
                n += wsync_control_report(c, "node-00000", (uint64_t)(n & 1) + 1, "pulling", 0, 0, NULL) == WSYNC_OK;
        if (write(fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
            _exit(1);
        _exit(0);
    }
    return pid;
}

/* GET /v1/status while spawn_churn changes the model: its rate, and the
 * reports per second that went with it. */
static void load_churn(const char *base, double secs, double *rps, double *reports)
{
    int p[2];
    long n = 0;
    double p50, p99;
    pid_t pid;
    *rps = *reports = 0;
    if (pipe(p) != 0)
        return;
    pid = spawn_churn(base, secs, p[1]);
    load(base, "/v1/status", 1, secs, rps, &p50, &p99);
    if (pid > 0 && read(p[0], &n, sizeof(n)) == (ssize_t)sizeof(n))
        *reports = (double)n / secs;
    if (pid > 0)
        waitpid(pid, NULL, 0);
    close(p[0]);
    close(p[1]);
}

static int connect_to(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static long long waiting(wsync_control_t *c, const char *base)
{
    CURL *h = curl_easy_init();
    char url[256], *text = NULL, *p;
    size_t len = 0;
    long long n = -1;
    FILE *mem = open_memstream(&text, &len);
    (void)c;
    snprintf(url, sizeof(url), "%s/metrics", base);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, mem);
    if (curl_easy_perform(h) == CURLE_OK) {
        fflush(mem);
        if (text && (p = strstr(text, "\nwsync_long_polls_waiting ")) != NULL)
            n = atoll(p + 26);
    }
    fclose(mem);
    free(text);
    curl_easy_cleanup(h);
    return n;
}

/* Read every socket's answer; the time the last one completed, or -1. */
static double drain(int *fds, int n, int ep)
{
    struct epoll_event ev[256];
    int done = 0, i;
    double last = -1;
    char buf[4096];
    for (i = 0; i < n; i++) {
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
    }
    while (done < n) {
        int k = epoll_wait(ep, ev, 256, 10000);
        if (k <= 0)
            break;
        for (i = 0; i < k; i++) {
            int fd = fds[ev[i].data.u32];
            ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (r > 0 || r == 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                done++;
                last = wsync_now_s();
            }
        }
    }
    return done == n ? last : -1;
}

static uint64_t published;
static pid_t server_pid;

/* CPU time the server process has run, all threads (ns, from schedstat):
 * what answering costs, apart from when a shared machine schedules it. */
static double server_cpu_ms(void)
{
    char path[64], line[128];
    unsigned long long total = 0, ns;
    int t;
    DIR *d;
    struct dirent *e;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)server_pid);
    if ((d = opendir(path)) == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        FILE *f;
        if (e->d_name[0] == '.' || (t = atoi(e->d_name)) <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)server_pid, t);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(line, sizeof(line), f) && sscanf(line, "%llu", &ns) == 1)
            total += ns;
        fclose(f);
    }
    closedir(d);
    return (double)total / 1e6;
}

static json_t *one_rank_layout(void)
{
    return json_pack("{s:s, s:i, s:s, s:s, s:i, s:i, s:{s:[]}}", "manifest_digest",
                     "0123456789abcdef0123456789abcdef", "chunk_size", 1024, "layout", "even", "layout_digest",
                     "ab", "image_size", 1024, "world", 1, "manifest", "tensors");
}

/* N long polls held, then one publish: ms until all are answered (from the
 * publish request and from its response). */
static int long_polls(wsync_control_t *c, const char *base, int n, double *from_req, double *from_resp,
                      double *cpu_ms)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int *fds = calloc((size_t)n, sizeof(int)), i, ep = epoll_create1(0), port = 0, ok = -1;
    char req[256], host[64];
    json_t *layout = one_rank_layout(), *pieces = json_pack("[{s:i, s:i, s:i, s:s}]", "id", 0, "offset", 0, "len",
                                                            1024, "digest", "0011223344556677");
    double t_req, t_resp, t_last, cpu0;
    sscanf(base, "http://%63[^:]:%d", host, &port);
    sa.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, host, &sa.sin_addr);
    snprintf(req, sizeof(req), "GET /v1/versions/latest?after=%llu&timeout_ms=60000 HTTP/1.1\r\nHost: b\r\n\r\n",
             (unsigned long long)published);
    for (i = 0; i < n; i++) {
        if ((fds[i] = connect_to(&sa)) < 0 || send(fds[i], req, strlen(req), 0) != (ssize_t)strlen(req)) {
            fprintf(stderr, "long poll %d: connect/send: %s\n", i, strerror(errno));
            n = i + (fds[i] >= 0);
            goto out;
        }
        if (i % 200 == 199) /* stay within the listen backlog */
            while (waiting(c, base) < i + 1)
                usleep(2000);
    }
    while (waiting(c, base) < n)
        usleep(2000);
    cpu0 = server_cpu_ms();
    t_req = wsync_now_s();
    if (wsync_control_publish(c, 0, 1, published + 1, layout, pieces) != WSYNC_OK) {
        fprintf(stderr, "publish: %s\n", wsync_last_error());
        goto out;
    }
    t_resp = wsync_now_s();
    published++;
    t_last = drain(fds, n, ep);
    if (t_last < 0) {
        fprintf(stderr, "not every long poll was answered\n");
        goto out;
    }
    *cpu_ms = server_cpu_ms() - cpu0;
    *from_req = (t_last - t_req) * 1e3;
    *from_resp = (t_last - t_resp) * 1e3;
    ok = 0;
out:
    for (i = 0; i < n; i++)
        close(fds[i]);
    close(ep);
    free(fds);
    json_decref(layout);
    json_decref(pieces);
    return ok;
}

/* Ceiling: N plain loopback connections, one 120-byte write on each server
 * side (a child process, for its own descriptor limit), all read here. */
static double raw_ceiling(int n)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), ep = epoll_create1(0), i, go[2], ready[2], made = 0;
    int *cfd = calloc((size_t)n, sizeof(int));
    char msg[120], b = 0;
    double t0, t1, ms = -1;
    pid_t pid;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 4096) != 0 || pipe(go) != 0 ||
        pipe(ready) != 0)
        return -1;
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    pid = fork();
    if (pid == 0) {
        int *sfd = calloc((size_t)n, sizeof(int));
        raise_nofile();
        memset(msg, 'r', sizeof(msg));
        for (i = 0; i < n; i++)
            if ((sfd[i] = accept(lfd, NULL, NULL)) < 0)
                _exit(1);
        if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
            _exit(1);
        for (i = 0; i < n; i++)
            if (send(sfd[i], msg, sizeof(msg), 0) != (ssize_t)sizeof(msg))
                _exit(1);
        if (read(go[0], &b, 1) < 0) /* until the parent is done */
            _exit(1);
        _exit(0);
    }
    close(lfd);
    for (i = 0; i < n; i++, made++)
        if ((cfd[i] = connect_to(&sa)) < 0) {
            fprintf(stderr, "ceiling: socket %d: %s\n", i, strerror(errno));
            goto out;
        }
    if (read(ready[0], &b, 1) != 1)
        goto out;
    t0 = wsync_now_s();
    if (write(go[1], &b, 1) != 1)
        goto out;
    t1 = drain(cfd, n, ep);
    if (t1 > 0)
        ms = (t1 - t0) * 1e3;
out:
    for (i = 0; i < made; i++)
        close(cfd[i]);
    close(go[1]);
    close(go[0]);
    close(ready[0]);
    close(ready[1]);
    close(ep);
    free(cfd);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return ms;
}

int main(int argc, char **argv)
{
    int engines = argc > 1 ? atoi(argv[1]) : 1000, i, rc = 1;
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    char url[256] = "", id[64];
    pid_t pid;
    wsync_control_t *c = NULL;
    double rps, p50, p99, hrps, hp50, hp99, crps, creports, zrps, zp50, zp99, plain_kb;
    static const int counts[] = {1000, 10000};

    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    pid = server_pid = spawn_server(url, sizeof(url));
    if (pid < 0) {
        fprintf(stderr, "control_bench: cannot start the server\n");
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (wsync_control_open(url, NULL, &c) != WSYNC_OK)
        goto out;
    for (i = 0; i < engines; i++) {
        snprintf(id, sizeof(id), "node-%05d", i);
        if (wsync_control_register_engine(c, id, "10.2.0.1", 8, NULL) != WSYNC_OK) {
            fprintf(stderr, "register %s: %s\n", id, wsync_last_error());
            goto out;
        }
    }
    load(url, "/healthz", 0, secs, &hrps, &hp50, &hp99);
    load(url, "/v1/status", 0, secs, &rps, &p50, &p99);
    plain_kb = last_wire_bytes / 1e3;
    load(url, "/v1/status", 1, secs, &zrps, &zp50, &zp99);
    printf("control_bench: GET /v1/status, %d engine nodes, %d connections, gzip accepted: %.0f req/s, p50 %.3f "
           "ms, p99 %.3f ms, %.1f KB per answer\n",
           engines, PARALLEL, zrps, zp50, zp99, last_wire_bytes / 1e3);
    printf("control_bench: GET /v1/status, plain (a client that takes no gzip): %.0f req/s, p50 %.3f ms, p99 %.3f "
           "ms, %.1f KB per answer\n",
           rps, p50, p99, plain_kb);
    printf("control_bench: ceiling GET /healthz, same server: %.0f req/s, p50 %.3f ms, p99 %.3f ms; ratio gzip "
           "%.2f, plain %.2f\n",
           hrps, hp50, hp99, hrps > 0 ? zrps / hrps : 0, hrps > 0 ? rps / hrps : 0);
    load_churn(url, secs, &crps, &creports);
    printf("control_bench: GET /v1/status while a node reports (each report changes the model): %.0f req/s with "
           "%.0f reports/s; ratio to /healthz %.2f\n",
           crps, creports, hrps > 0 ? crps / hrps : 0);
    for (i = 0; i < 2 && getenv("CONTROL_BENCH_NO_POLLS") == NULL; i++) { /* set: the request rates only */
        double from_req = 0, from_resp = 0, ceil_ms, cpu_ms = 0;
        if (long_polls(c, url, counts[i], &from_req, &from_resp, &cpu_ms) != 0)
            goto out;
        ceil_ms = raw_ceiling(counts[i]);
        printf("control_bench: %d long polls: all answered %.2f ms after the publish request (%.2f ms after its "
               "response); raw loopback ceiling %.2f ms; ratio %.2f; server CPU %.1f ms (%.1f us per poll)\n",
               counts[i], from_req, from_resp, ceil_ms, from_req > 0 ? ceil_ms / from_req : 0, cpu_ms,
               cpu_ms * 1e3 / counts[i]);
    }
    rc = 0;
out:
    wsync_control_close(c);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return rc;
}
