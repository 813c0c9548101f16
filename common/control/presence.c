/* presence.c: who is still there. Trainer ranks and engine nodes are seen on
 * every request they make (registrations, heartbeats, publishes, reports);
 * one not seen for the lease shows as gone, with when it was last seen, and
 * one not seen for --forget-after is removed. Also the state-file log
 * entries (the journal) the model's changes leave for state_store.c, and the
 * pending versions as status shows them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "common/base/checks.h"
#include "common/control/model.h"

void ctl_journal_locked(ctl_model_t *m, json_t *entry)
{
    /* Loading the state file or replaying its log: nothing new to write. */
    if (entry == NULL || m->replaying) {
        json_decref(entry);
        return;
    }
    json_object_set_new(entry, "seq", json_integer((json_int_t)++m->journal_seq));
    if (m->journal == NULL)
        m->journal = json_array();
    /* Out of memory: the whole state goes to the file instead. */
    if (m->journal == NULL || json_array_append_new(m->journal, entry) != 0)
        m->snapshot_due = 1;
}

static void forget_engine(ctl_model_t *m, int i)
{
    json_decref(m->engines[i].endpoint);
    memmove(&m->engines[i], &m->engines[i + 1], (size_t)(m->nengines - i - 1) * sizeof(m->engines[0]));
    m->nengines--;
}

static void forget_trainer(ctl_model_t *m, int r)
{
    json_decref(m->trainers[r].endpoint);
    m->trainers[r].endpoint = NULL;
    m->trainers[r].registered = 0;
    m->trainers[r].gone = 0;
}

int ctl_sweep(ctl_model_t *m, double now)
{
    int i, forgot = 0;
    if (now <= 0) {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        now = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
    }
    pthread_mutex_lock(&m->lock);
    double lease = m->lease_s > 0 ? m->lease_s : CTL_LEASE_S, forget = m->forget_after_s;
    for (i = 0; i < m->world; i++) {
        ctl_trainer_t *t = &m->trainers[i];
        if (!t->registered)
            continue;
        if (forget > 0 && now - t->last_seen >= forget) {
            LOG_INFO("trainer rank %d: forgotten (not seen for %.0f s, --forget-after)", i, now - t->last_seen);
            forget_trainer(m, i);
            ctl_journal_locked(m, json_pack("{s:s, s:i}", "op", "forget_trainer", "rank", i));
            forgot = 1;
        } else if (!t->gone && now - t->last_seen >= lease) {
            LOG_WARN("trainer rank %d (%s): gone, not seen for %.0f s", i, t->host, now - t->last_seen);
            t->gone = 1;
            m->gen++;
        }
    }
    for (i = 0; i < m->nengines;) {
        ctl_engine_t *e = &m->engines[i];
        if (forget > 0 && now - e->last_seen >= forget) {
            LOG_INFO("engine %s: forgotten (not seen for %.0f s, --forget-after)", e->id, now - e->last_seen);
            ctl_journal_locked(m, json_pack("{s:s, s:s}", "op", "forget_engine", "id", e->id));
            forget_engine(m, i);
            forgot = 1;
            continue;
        }
        if (!e->gone && now - e->last_seen >= lease) {
            LOG_WARN("engine %s (%s): gone, not seen for %.0f s", e->id, e->host, now - e->last_seen);
            e->gone = 1;
            m->gen++;
        }
        i++;
    }
    if (forgot || m->seen_dirty)
        m->gen++;
    m->seen_dirty = 0;
    pthread_mutex_unlock(&m->lock);
    return forgot;
}

static json_t *entry_body(const json_t *entry, const char *op, char *err, size_t errlen)
{
    json_t *body = json_object_get(entry, "body");
    if (!json_is_object(body))
        snprintf(err, errlen, "a '%s' entry without its body", op);
    return json_is_object(body) ? body : NULL;
}

int ctl_journal_apply(ctl_model_t *m, const json_t *entry, char *err, size_t errlen)
{
    const char *op = json_string_value(json_object_get(entry, "op"));
    int changed = 0, code = 200, i;
    json_t *body;
    if (op == NULL) {
        snprintf(err, errlen, "an entry without 'op'");
        return -1;
    }
    if (strcmp(op, "trainer") == 0 || strcmp(op, "engine") == 0) {
        if ((body = entry_body(entry, op, err, errlen)) == NULL)
            return -1;
        code = op[0] == 't' ? ctl_register_trainer(m, body, err, errlen, &changed)
                            : ctl_register_engine(m, body, err, errlen, &changed);
        return code == 200 ? 0 : -1;
    }
    pthread_mutex_lock(&m->lock);
    if (strcmp(op, "held") == 0 || strcmp(op, "forget_engine") == 0) {
        const char *id = json_string_value(json_object_get(entry, "id"));
        ctl_engine_t *e = id ? ctl_find_engine_locked(m, id) : NULL;
        if (e && op[0] == 'h')
            e->version = (uint64_t)json_integer_value(json_object_get(entry, "version"));
        else if (e)
            forget_engine(m, (int)(e - m->engines));
    } else if (strcmp(op, "forget_trainer") == 0) {
        i = (int)json_integer_value(json_object_get(entry, "rank"));
        if (i >= 0 && i < m->world)
            forget_trainer(m, i);
    } else {
        snprintf(err, errlen, "unknown op '%s'", op);
        code = -1;
    }
    pthread_mutex_unlock(&m->lock);
    return code == -1 ? -1 : 0;
}

json_t *ctl_pending_json_locked(const ctl_model_t *m)
{
    json_t *arr = json_array();
    int i, r, done = 0;
    uint64_t last = 0;
    /* Oldest first: at most CTL_MAX_PENDING, a selection by smallest. */
    while (arr && done < m->npending) {
        const ctl_pending_t *p = NULL;
        for (i = 0; i < m->npending; i++)
            if (m->pending[i].version > last && (p == NULL || m->pending[i].version < p->version))
                p = &m->pending[i];
        if (p == NULL)
            break;
        json_t *rep = json_array(), *miss = json_array();
        for (r = 0; r < p->world; r++)
            json_array_append_new(p->pieces[r] ? rep : miss, json_integer(r));
        json_array_append_new(arr, json_pack("{s:I, s:i, s:o, s:o}", "version", (json_int_t)p->version, "world",
                                             p->world, "reported", rep, "missing", miss));
        last = p->version;
        done++;
    }
    return arr;
}
