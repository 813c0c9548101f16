/* links.c: the links file (one JSON file per machine kind in configs/links/): one object per link class
 * with its alpha and rates, read and written with one table of classes and
 * one table of fields, so a bad file is refused naming the file, the key and
 * what is accepted. GB/s here are 1e9 bytes per second. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cost/cost.h"
#include "common/base/checks.h"

static const char *const class_names[COST_CLASS_COUNT] = {
    [COST_LOCAL] = "local",
    [COST_GPU_PEER] = "gpu_peer",
    [COST_WINDOW] = "window",
    [COST_HOST_GPU] = "host_gpu",
    [COST_NIC_PUT] = "nic_put",
    [COST_NIC_STAGED] = "nic_staged",
    [COST_TCP] = "tcp",
    [COST_HOST_MEMCPY] = "host_memcpy",
    [COST_DIGEST_HOST] = "digest_host",
    [COST_DIGEST_GPU] = "digest_gpu",
    [COST_PACK_HOST] = "pack_host",
    [COST_PACK_GPU] = "pack_gpu",
    [COST_CONTROL] = "control",
    [COST_TCP_TRAINER] = "tcp_trainer",
    [COST_TCP_ENGINE] = "tcp_engine",
    [COST_FUSED_GPU] = "copy_digest_gpu",
    [COST_VERSION] = "version",
    [COST_DELTA_ENCODE_HOST] = "delta_encode_host",
    [COST_DELTA_ENCODE_GPU] = "delta_encode_gpu",
    [COST_DELTA_APPLY_HOST] = "delta_apply_host",
    [COST_DELTA_APPLY_GPU] = "delta_apply_gpu",
    [COST_QUANT_HOST] = "quant_host",
    [COST_QUANT_GPU] = "quant_gpu",
};

#define CLASS_LIST                                                                                         \
    "local, gpu_peer, window, host_gpu, nic_put, nic_staged, tcp, host_memcpy, digest_host, digest_gpu, "  \
    "pack_host, pack_gpu, control, tcp_trainer, tcp_engine, copy_digest_gpu, version, delta_encode_host, " \
    "delta_encode_gpu, delta_apply_host, delta_apply_gpu, quant_host, quant_gpu"
#define FIELD_LIST "alpha_us, gbps, fan_out_gbps, fan_in_gbps, host_gbps, min_gbps, max_gbps, reps, present, note"

const char *cost_class_name(cost_class_t c)
{
    return (unsigned)c < COST_CLASS_COUNT ? class_names[c] : NULL;
}

/* The numeric fields of a class: key, where it goes, and its scale from the
 * file's unit to seconds or bytes per second. */
typedef struct field {
    const char *key;
    size_t off;
    double scale;
} field_t;

static const field_t fields[] = {
    {"alpha_us", offsetof(cost_link_t, alpha_s), 1e-6},
    {"gbps", offsetof(cost_link_t, bw), 1e9},
    {"fan_out_gbps", offsetof(cost_link_t, fan_out_bw), 1e9},
    {"fan_in_gbps", offsetof(cost_link_t, fan_in_bw), 1e9},
    {"host_gbps", offsetof(cost_link_t, host_bw), 1e9},
    {"min_gbps", offsetof(cost_link_t, bw_min), 1e9},
    {"max_gbps", offsetof(cost_link_t, bw_max), 1e9},
};

static const field_t *find_field(const char *key)
{
    size_t i;
    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strcmp(fields[i].key, key) == 0)
            return &fields[i];
    return NULL;
}

/* A number that is finite, not negative and below a petabyte per second or
 * a thousand seconds (a typo past that is caught here, not as a 0 s plan). */
static int good_number(const json_t *v, double *out)
{
    double x;
    if (!json_is_number(v))
        return 0;
    x = json_number_value(v);
    if (!isfinite(x) || x < 0 || x > 1e6)
        return 0;
    *out = x;
    return 1;
}

static wsync_status_t parse_class(const char *what, const char *name, const json_t *obj, cost_link_t *l)
{
    const char *key;
    json_t *v;
    if (!json_is_object(obj))
        return wsync_error(WSYNC_ERR_FORMAT, "%s: links.%s: expected an object of " FIELD_LIST, what, name);
    memset(l, 0, sizeof(*l));
    l->present = 1;
    json_object_foreach((json_t *)obj, key, v)
    {
        const field_t *f = find_field(key);
        double x;
        if (f != NULL) {
            if (!good_number(v, &x))
                return wsync_error(WSYNC_ERR_FORMAT, "%s: links.%s.%s: expected a number from 0 to 1000000, got %s",
                                   what, name, key, json_is_string(v) ? "a string" : "something else");
            *(double *)((char *)l + f->off) = x * f->scale;
        } else if (strcmp(key, "reps") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
                return wsync_error(WSYNC_ERR_FORMAT,
                                   "%s: links.%s.reps: expected a whole number from 0 to 1000000", what, name);
            l->reps = (int)json_integer_value(v);
        } else if (strcmp(key, "present") == 0) {
            if (!json_is_boolean(v))
                return wsync_error(WSYNC_ERR_FORMAT, "%s: links.%s.present: expected true or false", what, name);
            l->present = json_is_true(v);
        } else if (strcmp(key, "note") == 0) {
            if (!json_is_string(v))
                return wsync_error(WSYNC_ERR_FORMAT, "%s: links.%s.note: expected a string", what, name);
        } else {
            return wsync_error(WSYNC_ERR_FORMAT, "%s: links.%s: unknown key '%s' (accepted: " FIELD_LIST ")", what,
                               name, key);
        }
    }
    if (!l->present) {
        memset(l, 0, sizeof(*l));
        return WSYNC_OK;
    }
    if (strcmp(name, "control") == 0 || strcmp(name, "version") == 0) { /* a time, no bandwidth */
        if (l->alpha_s <= 0)
            return wsync_error(WSYNC_ERR_FORMAT, "%s: links.%s: alpha_us (%s) is required and > 0", what, name,
                               name[0] == 'c' ? "the round trip" : "the fixed cost of a version");
    } else if (l->bw <= 0) {
        return wsync_error(WSYNC_ERR_FORMAT,
                           "%s: links.%s: gbps is required and > 0 (or \"present\": false for a class this "
                           "machine "
                           "lacks)",
                           what, name);
    }
    return WSYNC_OK;
}

static wsync_status_t parse_host(const char *what, const json_t *h, cost_links_t *out)
{
    const char *key;
    json_t *v;
    if (!json_is_object(h))
        return wsync_error(WSYNC_ERR_FORMAT, "%s: host: expected an object {\"gpus\": N, \"nics\": N}", what);
    json_object_foreach((json_t *)h, key, v)
    {
        int *dst = strcmp(key, "gpus") == 0 ? &out->host_gpus : strcmp(key, "nics") == 0 ? &out->host_nics : NULL;
        if (dst == NULL)
            return wsync_error(WSYNC_ERR_FORMAT, "%s: host: unknown key '%s' (accepted: gpus, nics)", what, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4096)
            return wsync_error(WSYNC_ERR_FORMAT, "%s: host.%s: expected a whole number from 0 to 4096", what, key);
        *dst = (int)json_integer_value(v);
    }
    return WSYNC_OK;
}

static wsync_status_t parse_root(const char *what, const json_t *root, cost_links_t *out)
{
    const char *key;
    json_t *v;
    int have_links = 0;
    if (!json_is_object(root))
        return wsync_error(WSYNC_ERR_FORMAT, "%s: expected a JSON object with \"links\"", what);
    json_object_foreach((json_t *)root, key, v)
    {
        if (strcmp(key, "machine") == 0 || strcmp(key, "source") == 0 || strcmp(key, "about") == 0) {
            if (!json_is_string(v))
                return wsync_error(WSYNC_ERR_FORMAT, "%s: %s: expected a string", what, key);
            if (key[0] == 'm')
                snprintf(out->machine, sizeof(out->machine), "%s", json_string_value(v));
            else if (key[0] == 's')
                snprintf(out->source, sizeof(out->source), "%s", json_string_value(v));
        } else if (strcmp(key, "host") == 0) {
            WSYNC_CHECK(parse_host(what, v, out));
        } else if (strcmp(key, "links") == 0) {
            const char *cname;
            json_t *c;
            if (!json_is_object(v))
                return wsync_error(WSYNC_ERR_FORMAT,
                                   "%s: links: expected an object of link classes (" CLASS_LIST ")", what);
            json_object_foreach(v, cname, c)
            {
                int i;
                for (i = 0; i < COST_CLASS_COUNT && strcmp(class_names[i], cname) != 0; i++)
                    ;
                if (i == COST_CLASS_COUNT)
                    return wsync_error(WSYNC_ERR_FORMAT,
                                       "%s: links: unknown link class '%s' (accepted: " CLASS_LIST ")", what, cname);
                WSYNC_CHECK(parse_class(what, cname, c, &out->link[i]));
            }
            have_links = 1;
        } else {
            return wsync_error(WSYNC_ERR_FORMAT,
                               "%s: unknown key '%s' (accepted: machine, source, about, host, links)", what, key);
        }
    }
    if (!have_links)
        return wsync_error(WSYNC_ERR_FORMAT, "%s: no \"links\" object (link classes: " CLASS_LIST ")", what);
    return WSYNC_OK;
}

wsync_status_t cost_links_parse(const char *text, size_t len, const char *what, cost_links_t *out)
{
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    cost_links_t l;
    wsync_status_t st;
    if (root == NULL)
        return wsync_error(WSYNC_ERR_FORMAT, "%s: not JSON: %s (line %d, column %d)", what, err.text, err.line,
                           err.column);
    memset(&l, 0, sizeof(l));
    st = parse_root(what, root, &l);
    json_decref(root);
    if (st == WSYNC_OK)
        *out = l;
    return st;
}

wsync_status_t cost_links_load(const char *path, cost_links_t *out)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    wsync_status_t st;
    if (f == NULL)
        return wsync_error(WSYNC_ERR_IO, "links file %s: %s", path, strerror(errno));
    for (;;) {
        size_t got;
        if (n == cap) {
            char *nb;
            if (cap >= (1u << 24)) {
                fclose(f);
                free(buf);
                return wsync_error(WSYNC_ERR_FORMAT, "links file %s: larger than 16 MiB", path);
            }
            cap = cap ? cap * 2 : 65536;
            nb = realloc(buf, cap);
            if (nb == NULL) {
                fclose(f);
                free(buf);
                return wsync_error(WSYNC_ERR_NOMEM, "links file %s: out of memory", path);
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    st = ferror(f) ? wsync_error(WSYNC_ERR_IO, "links file %s: read failed", path) : WSYNC_OK;
    fclose(f);
    if (st == WSYNC_OK) {
        char what[512];
        snprintf(what, sizeof(what), "links file %s", path);
        st = cost_links_parse(buf, n, what, out);
    }
    free(buf);
    return st;
}

/* Figures rounded to 4 significant digits: a file a person reads. */
static json_t *num(double x)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%.4g", x);
    return json_real(strtod(buf, NULL));
}

json_t *cost_links_to_json(const cost_links_t *l)
{
    json_t *root = json_object(), *links = json_object();
    int i;
    size_t k;
    if (l->machine[0])
        json_object_set_new(root, "machine", json_string(l->machine));
    if (l->source[0])
        json_object_set_new(root, "source", json_string(l->source));
    if (l->host_gpus || l->host_nics)
        json_object_set_new(root, "host", json_pack("{s:i, s:i}", "gpus", l->host_gpus, "nics", l->host_nics));
    for (i = 0; i < COST_CLASS_COUNT; i++) {
        const cost_link_t *c = &l->link[i];
        json_t *o = json_object();
        if (!c->present) {
            json_object_set_new(o, "present", json_false());
        } else {
            for (k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
                double x = *(const double *)((const char *)c + fields[k].off);
                if (x > 0)
                    json_object_set_new(o, fields[k].key, num(x / fields[k].scale));
            }
            if (c->reps)
                json_object_set_new(o, "reps", json_integer(c->reps));
        }
        json_object_set_new(links, class_names[i], o);
    }
    json_object_set_new(root, "links", links);
    return root;
}
