/* state_file.h: the control endpoint's durable state, written atomically. */
#ifndef WSYNC_CONTROL_STATE_FILE_H
#define WSYNC_CONTROL_STATE_FILE_H

#include <jansson.h>

#include "common/wsync.h"

/* Write `state` to `path` via a temp file in the same directory, fsync,
 * rename, fsync of the directory: a crash leaves the old or the new file. */
wsync_status_t ctl_state_save(const char *path, const json_t *state);
/* The same; *written (when not NULL) the file's size. */
wsync_status_t ctl_state_save_sized(const char *path, const json_t *state, size_t *written);
/* Creates the file's directory (and its parents, mode 0755) when missing;
 * an error names the directory that could not be made and why. */
wsync_status_t ctl_state_prepare_dir(const char *path);
/* *out = NULL when the file does not exist; a file that cannot be read or
 * parsed is an error naming the file and the problem. */
wsync_status_t ctl_state_read(const char *path, json_t **out);

/* The state file's log, PATH.log: JSON lines appended (and fdatasync'ed)
 * between two writes of the whole state (state_store.c). Append `len`
 * bytes; remove it (after the state file took it in); read it whole
 * (*text NULL when there is none; malloc'ed, NUL-terminated). */
void ctl_state_log_path(const char *path, char *out, size_t len);
wsync_status_t ctl_state_log_append(const char *path, const char *text, size_t len);
void ctl_state_log_remove(const char *path);
wsync_status_t ctl_state_log_read(const char *path, char **text, size_t *len);

#endif
