/* demo_procs.c: the demo's children (demo_procs.h). */
#include "cli/demo_procs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/util.h"

/* Starts this binary with argv; its stderr comes back through p->errfd. */
void demo_spawn(char *const argv[], proc_t *p)
{
    int fds[2];
    p->errfd = -1;
    if (pipe2(fds, O_CLOEXEC) != 0)
        fds[0] = fds[1] = -1;
    p->pid = fork();
    if (p->pid == 0) {
        if (fds[1] >= 0)
            dup2(fds[1], 2);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "wsync demo: cannot exec %s: %m\n", argv[0]);
        _exit(127);
    }
    if (fds[1] >= 0)
        close(fds[1]);
    if (fds[0] >= 0 && p->pid > 0) {
        p->errfd = fds[0];
        fcntl(p->errfd, F_SETFL, O_NONBLOCK);
    } else if (fds[0] >= 0) {
        close(fds[0]);
    }
}

/* Passes on what child p wrote to stderr, line by line, keeping the last
 * line; at EOF closes its pipe. */
static void drain_stderr(proc_t *p)
{
    char buf[4096];
    ssize_t n, i;
    while (p->errfd >= 0 && (n = read(p->errfd, buf, sizeof(buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return;
            break;
        }
        fwrite(buf, 1, (size_t)n, stderr);
        for (i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                p->line[p->linelen] = '\0';
                if (p->linelen > 0)
                    memcpy(p->last, p->line, p->linelen + 1);
                p->linelen = 0;
            } else if (p->linelen + 1 < sizeof(p->line)) {
                p->line[p->linelen++] = buf[i];
            }
        }
    }
    close(p->errfd);
    p->errfd = -1;
}

/* Waits up to ms for output from any child, passing it on. */
static void pump_stderr(proc_t *procs, int nprocs, int ms)
{
    struct pollfd pf[DEMO_MAX_PROCS];
    int i, n = 0;
    for (i = 0; i < nprocs; i++)
        if (procs[i].errfd >= 0)
            pf[n++] = (struct pollfd){.fd = procs[i].errfd, .events = POLLIN};
    if (poll(pf, (nfds_t)n, ms) <= 0)
        return;
    for (i = 0; i < nprocs; i++)
        if (procs[i].errfd >= 0)
            drain_stderr(&procs[i]);
}

int demo_watch(proc_t *procs, int nprocs, int engines_left, uint64_t deadline,
               const volatile sig_atomic_t *interrupted)
{
    int i, failed = 0;
    while (engines_left > 0 && !failed && !*interrupted && wsync_now_ns() < deadline) {
        int status;
        pid_t pid;
        pump_stderr(procs, nprocs, 20);
        while (!failed && (pid = waitpid(-1, &status, WNOHANG)) > 0)
            for (i = 0; i < nprocs; i++) {
                proc_t *p = &procs[i];
                if (p->pid != pid)
                    continue;
                p->exited = 1;
                p->status = status;
                engines_left -= p->engine;
                drain_stderr(p);
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                    continue;
                fprintf(stderr, "wsync demo: %s failed (%s %d)%s%s; stopping the others\n", p->name,
                        WIFEXITED(status) ? "exit status" : "signal",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), p->last[0] ? ": " : "", p->last);
                failed = 1;
            }
    }
    if (engines_left > 0 && !failed) {
        fprintf(stderr, "wsync demo: %s; %d engine ranks still running; stopping them\n",
                *interrupted ? "interrupted" : "timed out", engines_left);
        failed = 1;
    }
    return failed;
}

void demo_stop(proc_t *procs, int nprocs, int sig)
{
    uint64_t until = wsync_now_ns() + (uint64_t)DEMO_REAP_MS * 1000000ULL;
    int i, left = 0;
    for (i = 0; i < nprocs; i++)
        if (!procs[i].exited && procs[i].pid > 0) {
            kill(procs[i].pid, sig);
            left++;
        }
    while (left > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            if (wsync_now_ns() >= until) {
                for (i = 0; i < nprocs; i++)
                    if (!procs[i].exited && procs[i].pid > 0) {
                        fprintf(stderr, "wsync demo: %s did not stop in %d s; killing it\n", procs[i].name,
                                DEMO_REAP_MS / 1000);
                        kill(procs[i].pid, SIGKILL);
                    }
                until = UINT64_MAX;
            }
            pump_stderr(procs, nprocs, 20);
            continue;
        }
        for (i = 0; i < nprocs; i++)
            if (procs[i].pid == pid && !procs[i].exited) {
                procs[i].exited = 1;
                left--;
            }
    }
    for (i = 0; i < nprocs; i++)
        drain_stderr(&procs[i]);
}
