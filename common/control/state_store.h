/* state_store.h: the state file and its log (see state_store.c): what a
 * change costs to save, and how a start reads it back. */
#ifndef WSYNC_CONTROL_STATE_STORE_H
#define WSYNC_CONTROL_STATE_STORE_H

#include "common/wsync.h"
#include "common/control/model.h"

/* Saves what changed since the last call: the model's journal appended to
 * PATH.log, or (`snapshot`, a publish or new layout, or a log past the
 * state's size) the whole state written atomically and the log removed.
 * One caller at a time (the server's save lock). A failure is returned
 * (the next call then writes the whole state). */
wsync_status_t ctl_store_save(ctl_model_t *m, const char *path, int snapshot);
/* Reads PATH (if there: *found = 1), its layouts and then the log's newer
 * entries into the model; an unreadable or corrupt file or line is an
 * error naming it. */
wsync_status_t ctl_store_load(ctl_model_t *m, const char *path, int *found);

#endif
