/* state_file.c: atomic write and careful read of the state file. */
#include "common/control/state_file.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/checks.h"
#include "common/base/log.h"
#include "common/control/validate.h"

wsync_status_t ctl_state_save(const char *path, const json_t *state)
{
    return ctl_state_save_sized(path, state, NULL);
}

/* Writes all `len` bytes of `text` to fd (again after EINTR); 0, or the
 * errno of the write that failed. */
static int write_all(int fd, const char *text, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return errno ? errno : EIO;
        off += (size_t)n;
    }
    return 0;
}

wsync_status_t ctl_state_save_sized(const char *path, const json_t *state, size_t *written)
{
    char tmp[4096], dir[4096];
    char *text = json_dumps(state, JSON_COMPACT);
    size_t len;
    int fd, dfd, e;

    WSYNC_CHECK_ALLOC(text);
    len = strlen(text);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(text);
        return wsync_error(WSYNC_ERR_IO, "state file: cannot create %s: %s", tmp, strerror(errno));
    }
    if ((e = write_all(fd, text, len)) != 0) {
        close(fd);
        unlink(tmp);
        free(text);
        return wsync_error(WSYNC_ERR_IO, "state file: cannot write %s: %s (the previous state is kept)", tmp,
                           strerror(e));
    }
    free(text);
    if (written)
        *written = len;
    if (fsync(fd) != 0 || close(fd) != 0) {
        e = errno;
        unlink(tmp);
        return wsync_error(WSYNC_ERR_IO, "state file: cannot sync %s: %s (the previous state is kept)", tmp,
                           strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return wsync_error(WSYNC_ERR_IO, "state file: cannot replace %s: %s", path, strerror(e));
    }
    snprintf(dir, sizeof(dir), "%s", path);
    dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return WSYNC_OK;
}

wsync_status_t ctl_state_prepare_dir(const char *path)
{
    char buf[4096], dir[4096];
    struct stat sb;
    size_t i;
    snprintf(buf, sizeof(buf), "%s", path);
    snprintf(dir, sizeof(dir), "%s", dirname(buf));
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            return wsync_error(WSYNC_ERR_IO, "state file %s: %s is not a directory", path, dir);
        return WSYNC_OK;
    }
    /* Each missing component in turn, as mkdir -p. */
    for (i = 1; dir[i]; i++) {
        if (dir[i] != '/')
            continue;
        dir[i] = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return wsync_error(WSYNC_ERR_IO, "state file %s: cannot create directory %s: %s", path, dir,
                               strerror(errno));
        dir[i] = '/';
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return wsync_error(WSYNC_ERR_IO, "state file %s: cannot create directory %s: %s", path, dir,
                           strerror(errno));
    return WSYNC_OK;
}

/* 1 when `v` is an integer at or past 2^53, which no route accepts as a
 * version (CTL_MAX_VERSION): a hand-edited or foreign file. */
static int version_too_big(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) > CTL_MAX_VERSION;
}

/* A state file's versions at or past 2^53 are refused one by one, each
 * named (file, field, value), and the rest of the state is kept: a record
 * with one is dropped, a trainer's or engine's held version becomes 0, and
 * latest_version becomes the newest record kept (0 without one). Failing
 * the start instead would lose every registration over one field. */
static void refuse_big_versions(const char *path, json_t *state)
{
    json_t *records = json_object_get(state, "versions"), *e;
    const char *held_in[] = {"trainers", "engines"};
    json_int_t newest = 0;
    size_t i, k, dropped = 0;
    json_array_foreach(records, i, e)
    {
        if (version_too_big(json_object_get(e, "version"))) {
            LOG_ERROR("state file %s: versions[%zu].version %lld is 2^53 or more (versions are below 2^53, as "
                      "POST /v1/publish requires): that record is dropped, the rest of the state is kept",
                      path, i + dropped, (long long)json_integer_value(json_object_get(e, "version")));
            json_array_remove(records, i--); /* i wraps to -1 at 0: the loop's i++ brings it back */
            dropped++;
            continue;
        }
        if (json_integer_value(json_object_get(e, "version")) > newest)
            newest = json_integer_value(json_object_get(e, "version"));
    }
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(state, held_in[k]), i, e)
        {
            if (!version_too_big(json_object_get(e, "version")))
                continue;
            LOG_ERROR("state file %s: %s[%zu].version %lld is 2^53 or more: taken as 0 (holds nothing); the rest "
                      "of "
                      "the state is kept",
                      path, held_in[k], i, (long long)json_integer_value(json_object_get(e, "version")));
            json_object_set_new(e, "version", json_integer(0));
        }
    if (version_too_big(json_object_get(state, "latest_version"))) {
        LOG_ERROR("state file %s: latest_version %lld is 2^53 or more (versions are below 2^53, as POST "
                  "/v1/versions requires): refused; the latest is now %lld, the newest version record kept, and "
                  "the rest of the state is kept (trainers publish versions above it)",
                  path, (long long)json_integer_value(json_object_get(state, "latest_version")), (long long)newest);
        json_object_set_new(state, "latest_version", json_integer(newest));
    }
}

wsync_status_t ctl_state_read(const char *path, json_t **out)
{
    json_error_t jerr;
    json_t *j;
    *out = NULL;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return WSYNC_OK;
    j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (j == NULL)
        return wsync_error(WSYNC_ERR_FORMAT,
                           "state file %s is unreadable or corrupt (%s, line %d); refusing to "
                           "start empty: fix it, or move it away to start from scratch",
                           path, jerr.text, jerr.line);
    if (json_is_object(j) && json_object_get(j, "latest_version"))
        refuse_big_versions(path, j); /* a layout file has none */
    *out = j;
    return WSYNC_OK;
}

void ctl_state_log_path(const char *path, char *out, size_t len)
{
    snprintf(out, len, "%s.log", path);
}

wsync_status_t ctl_state_log_append(const char *path, const char *text, size_t len)
{
    char log[4096];
    int fd, e;
    ctl_state_log_path(path, log, sizeof(log));
    fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return wsync_error(WSYNC_ERR_IO, "state file: cannot open its log %s: %s", log, strerror(errno));
    if ((e = write_all(fd, text, len)) != 0) {
        close(fd);
        return wsync_error(WSYNC_ERR_IO, "state file: cannot append to %s: %s", log, strerror(e));
    }
    if (fdatasync(fd) != 0) {
        e = errno;
        close(fd);
        return wsync_error(WSYNC_ERR_IO, "state file: cannot sync %s: %s", log, strerror(e));
    }
    close(fd);
    return WSYNC_OK;
}

void ctl_state_log_remove(const char *path)
{
    char log[4096];
    ctl_state_log_path(path, log, sizeof(log));
    unlink(log);
}

wsync_status_t ctl_state_log_read(const char *path, char **text, size_t *len)
{
    char log[4096];
    FILE *f;
    size_t cap = 0, n;
    char *buf = NULL;
    *text = NULL;
    *len = 0;
    ctl_state_log_path(path, log, sizeof(log));
    f = fopen(log, "rb");
    if (f == NULL)
        return errno == ENOENT
                   ? WSYNC_OK
                   : wsync_error(WSYNC_ERR_IO, "state file: cannot read its log %s: %s", log, strerror(errno));
    for (;;) {
        if (*len + 65536 + 1 > cap) {
            char *nb = realloc(buf, cap = (*len + 65536 + 1) * 2);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return wsync_error(WSYNC_ERR_NOMEM, "state file: out of memory reading %s", log);
            }
            buf = nb;
        }
        n = fread(buf + *len, 1, 65536, f);
        *len += n;
        if (n < 65536)
            break;
    }
    fclose(f);
    buf[*len] = '\0';
    *text = buf;
    return WSYNC_OK;
}
