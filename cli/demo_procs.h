/* demo_procs.h: `wsync demo`'s child processes: started with their stderr
 * passed through (each one's last line kept, to say why it failed), watched
 * until the engines are done or one fails, then stopped and reaped. */
#ifndef WSYNC_CLI_DEMO_PROCS_H
#define WSYNC_CLI_DEMO_PROCS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DEMO_MAX_PROCS 512
/* After a failure or a signal the children get this long to end on the
 * signal forwarded to them (they end within a second) before SIGKILL. */
#define DEMO_REAP_MS 5000

typedef struct proc {
    pid_t pid;
    int engine; /* 1 engine rank, 0 trainer */
    int status;
    int exited;
    int errfd;      /* read end of its stderr: passed on, its last line kept */
    size_t linelen; /* bytes of the line being read */
    char line[512];
    char last[512]; /* its last complete line: why it failed */
    char name[128];
} proc_t;

/* Starts this binary with argv as p (p->name and p->engine set by the caller). */
void demo_spawn(char *const argv[], proc_t *p);

/* Until every engine rank ended, one child failed, *interrupted (the signal
 * that came) is set or the deadline passed; 1 when a child failed or the
 * engines did not finish, having said which and why on stderr. */
int demo_watch(proc_t *procs, int nprocs, int engines, uint64_t deadline, const volatile sig_atomic_t *interrupted);

/* Sends `sig` to every child still running and reaps them all, SIGKILL for
 * any still there after DEMO_REAP_MS. */
void demo_stop(proc_t *procs, int nprocs, int sig);

#endif
