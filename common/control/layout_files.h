/* layout_files.h: layouts beside the state file. Each layout's manifest is
 * its own file, STATE.layout-<digest>.json, written once (atomically, as the
 * state file) before the first state file that lists it, and removed after
 * the first one that no longer does: a version's save rewrites the state
 * file (O(pieces)), never a manifest (~10 MB for 100k tensors). */
#ifndef WSYNC_CONTROL_LAYOUT_FILES_H
#define WSYNC_CONTROL_LAYOUT_FILES_H

#include <jansson.h>

#include "common/control/model.h"

/* Writes every layout of the model not written yet. Returns the first
 * failure (the state file is then not written either: it would list a
 * layout that has no file). */
wsync_status_t ctl_layout_files_write(ctl_model_t *m, const char *state_path);
/* Removes the files of the `n` dropped layouts. */
void ctl_layout_files_remove(const char *state_path, char (*digests)[33], int n);
/* Reads the files of the layouts `state` lists into the model (marked
 * written); a missing or malformed one is an error naming it. */
wsync_status_t ctl_layout_files_load(ctl_model_t *m, const json_t *state, const char *state_path);

#endif
