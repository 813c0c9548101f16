/* model.h: the stand-ins' model source: a synthetic LLM-shaped manifest whose
 * content is a deterministic function of (version, byte position), or a list
 * of safetensors files (version i is file i, cycling). */
#ifndef WSYNC_CLI_MODEL_H
#define WSYNC_CLI_MODEL_H

#include "common/model/manifest.h"
#include "common/model/safetensors.h"

typedef struct cli_model {
    wsync_manifest_t *manifest; /* owned */
    int nfiles;
    wsync_safetensors_t **files; /* [nfiles], or NULL for synthetic */
    char **paths;
} cli_model_t;

/* From "--synthetic SIZE" (files == NULL) or a comma-separated file list; all
 * files must share one layout (names, dtypes, shapes). */
wsync_status_t cli_model_open(const char *synthetic, const char *files, cli_model_t *out);
void cli_model_close(cli_model_t *m);

/* Fill image bytes [off, off+len) of `version` into dst (host memory). */
wsync_status_t cli_model_fill(const cli_model_t *m, uint64_t version, void *dst, uint64_t off, uint64_t len);

#endif
