/* state_store.c: what reaches the state file, at O(1) per registration.
 * A registration (or a held version) is one JSON line appended to PATH.log
 * and fdatasync'ed before it is answered; the whole state is written
 * (atomically, as before) after a publish or a new layout, or once the log
 * grew past the state's own size (at least 64 KiB), and the log is then
 * removed. So N registrations write O(N) bytes, not O(N^2) (25.10), with the
 * same promise: what was answered 2xx survives a crash.
 *
 * Each log entry carries a sequence number; the state file records the
 * last one it took in ("log_seq"), so a log left behind by a crash between
 * the state file's rename and the log's removal is not replayed twice. */
#include "common/control/state_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/checks.h"
#include "common/control/layout_files.h"
#include "common/control/state_file.h"

#define STORE_LOG_MIN ((uint64_t)64 << 10)

/* The whole state, then the log goes. Called with nothing locked. */
static wsync_status_t write_snapshot(ctl_model_t *m, const char *path)
{
    char dropped[CTL_MAX_DROPPED][33];
    int ndropped = ctl_layouts_take_dropped(m, dropped, CTL_MAX_DROPPED);
    json_t *st = ctl_state_json(m);
    size_t len = 0;
    wsync_status_t rc = st ? ctl_layout_files_write(m, path)
                           : wsync_error(WSYNC_ERR_NOMEM, "state file: out of memory");
    if (rc == WSYNC_OK)
        rc = ctl_state_save_sized(path, st, &len);
    json_decref(st);
    pthread_mutex_lock(&m->lock);
    if (rc == WSYNC_OK) {
        m->snapshot_bytes = len;
        m->log_bytes = 0;
        m->store_bytes_written += len;
    } else {
        m->snapshot_due = 1;
    }
    pthread_mutex_unlock(&m->lock);
    if (rc == WSYNC_OK) {
        ctl_state_log_remove(path);
        ctl_layout_files_remove(path, dropped, ndropped);
    }
    return rc;
}

/* The journal as JSON lines; NULL when out of memory. */
static char *journal_text(const json_t *journal, size_t *len)
{
    size_t i, cap = 256, n = 0;
    const json_t *e;
    char *buf = malloc(cap);
    json_array_foreach(journal, i, e)
    {
        char *line = json_dumps(e, JSON_COMPACT);
        size_t l = line ? strlen(line) : 0;
        if (line == NULL || buf == NULL) {
            free(line);
            free(buf);
            return NULL;
        }
        if (n + l + 2 > cap) {
            char *nb = realloc(buf, cap = (n + l + 2) * 2);
            if (nb == NULL) {
                free(line);
                free(buf);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + n, line, l);
        n += l;
        buf[n++] = '\n';
        free(line);
    }
    *len = n;
    return buf;
}

wsync_status_t ctl_store_save(ctl_model_t *m, const char *path, int snapshot)
{
    json_t *journal;
    wsync_status_t rc;
    char *text;
    size_t len = 0;
    pthread_mutex_lock(&m->lock);
    journal = m->journal;
    m->journal = NULL;
    snapshot |= m->snapshot_due ||
                m->log_bytes > (m->snapshot_bytes > STORE_LOG_MIN ? m->snapshot_bytes : STORE_LOG_MIN);
    m->snapshot_due = 0;
    pthread_mutex_unlock(&m->lock);
    if (snapshot) { /* the journal's entries are in the state it writes */
        json_decref(journal);
        return write_snapshot(m, path);
    }
    if (json_array_size(journal) == 0) {
        json_decref(journal);
        return WSYNC_OK;
    }
    text = journal_text(journal, &len);
    json_decref(journal);
    rc = text ? ctl_state_log_append(path, text, len) : wsync_error(WSYNC_ERR_NOMEM, "state file: out of memory");
    free(text);
    if (rc != WSYNC_OK) /* the whole state then (it has the journal): one condition, one error to show */
        return write_snapshot(m, path);
    pthread_mutex_lock(&m->lock);
    m->log_bytes += len;
    m->store_bytes_written += len;
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* Replays the log's entries newer than the state file's log_seq. A last
 * line without its newline is a write a crash cut short: never answered,
 * so dropped; any other bad line refuses the start. */
static wsync_status_t replay_log(ctl_model_t *m, const char *path)
{
    char *text = NULL, *line, *nl, err[256] = "";
    size_t len = 0;
    int lineno = 0, applied = 0;
    wsync_status_t rc = ctl_state_log_read(path, &text, &len);
    if (rc != WSYNC_OK || text == NULL)
        return rc;
    for (line = text; *line; line = nl + 1) {
        json_error_t jerr;
        json_t *e;
        json_int_t seq;
        lineno++;
        if ((nl = strchr(line, '\n')) == NULL) {
            LOG_WARN("state file %s.log: line %d was cut short (a crash while it was written): dropped", path,
                     lineno);
            break;
        }
        *nl = '\0';
        e = json_loads(line, 0, &jerr);
        seq = json_integer_value(json_object_get(e, "seq"));
        if (e == NULL || !json_is_integer(json_object_get(e, "seq"))) {
            json_decref(e);
            free(text);
            return wsync_error(WSYNC_ERR_FORMAT,
                               "state file %s.log: line %d is corrupt (%s); refusing to start: fix it, or move "
                               "it away to start from the state file alone",
                               path, lineno, e ? "no 'seq'" : jerr.text);
        }
        if ((uint64_t)seq > m->journal_seq) {
            if (ctl_journal_apply(m, e, err, sizeof(err)) != 0) {
                json_decref(e);
                free(text);
                return wsync_error(WSYNC_ERR_FORMAT,
                                   "state file %s.log: line %d: %s; refusing to start: fix it, or move it away",
                                   path, lineno, err);
            }
            m->journal_seq = (uint64_t)seq;
            applied++;
        }
        json_decref(e);
    }
    free(text);
    if (applied)
        LOG_INFO("state file %s: %d changes replayed from its log", path, applied);
    return WSYNC_OK;
}

wsync_status_t ctl_store_load(ctl_model_t *m, const char *path, int *found)
{
    json_t *state = NULL;
    wsync_status_t rc;
    *found = 0;
    WSYNC_CHECK(ctl_state_read(path, &state));
    m->replaying = 1;
    if (state) {
        rc = ctl_state_load(m, state, path);
        if (rc == WSYNC_OK)
            rc = ctl_layout_files_load(m, state, path);
        json_decref(state);
        *found = 1;
    } else {
        rc = WSYNC_OK;
    }
    if (rc == WSYNC_OK)
        rc = replay_log(m, path);
    m->replaying = 0;
    /* Loading journals what it registers: the first save writes it all. */
    json_decref(m->journal);
    m->journal = NULL;
    return rc;
}
