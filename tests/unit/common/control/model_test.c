/* model_test.c: the control endpoint's rules without HTTP: pending versions
 * (dropped when a later one completes, capped when ranks never finish),
 * world changes, engine ids, the status generation, the state round
 * trip through ctl_state_json / ctl_state_load, and late digests (a version
 * announced without them, filled in by each rank's second report). */
#include <string.h>

#include "common/base/log.h"
#include "tests/test.h"
#include "common/control/model.h"

/* Rank `rank` of `world` reports version v (manifest digest `mdigest`): its
 * one 8-byte piece at `off`, with `digest` or (NULL) without one. */
static int report(ctl_model_t *m, int rank, int world, int v, const char *mdigest, int off, const char *digest)
{
    json_t *b = json_pack("{s:i, s:i, s:i, s:{s:s, s:i, s:s, s:s, s:i, s:i}, s:[{s:i, s:i, s:i}]}", "rank", rank,
                          "world", world, "version", v, "layout", "manifest_digest", mdigest, "chunk_size", 4,
                          "layout", "even", "layout_digest", "cd", "image_size", 8 * world, "world", world,
                          "pieces", "id", rank, "offset", off, "len", 8);
    json_t *reply = NULL;
    char err[512] = "";
    int changed = 0, code;
    if (digest)
        json_object_set_new(json_array_get(json_object_get(b, "pieces"), 0), "digest", json_string(digest));
    if (rank == 0)
        json_object_set_new(json_object_get(b, "layout"), "manifest", json_object());
    code = ctl_publish(m, b, &reply, err, sizeof(err), &changed);
    json_decref(reply);
    json_decref(b);
    return code;
}

static int publish(ctl_model_t *m, int rank, int world, int v, const char *mdigest)
{
    return report(m, rank, world, v, mdigest, rank * 8, "00");
}

static int register_engine(ctl_model_t *m, const char *id)
{
    json_t *b = json_pack("{s:s, s:s, s:i}", "id", id, "host", "h", "local_ranks", 2);
    char err[512];
    int changed = 0, code = ctl_register_engine(m, b, err, sizeof(err), &changed);
    json_decref(b);
    return code;
}

static void test_pending_dropped_by_later_version(void)
{
    ctl_model_t m;
    json_t *st;
    ctl_model_init(&m);
    CHECK_EQ(publish(&m, 1, 2, 5, "aa"), 200); /* v5 never completes */
    CHECK_EQ(publish(&m, 1, 2, 6, "aa"), 200);
    CHECK_EQ(publish(&m, 0, 2, 6, "aa"), 200);
    CHECK_EQ(ctl_latest(&m), 6);
    st = ctl_status_json(&m);
    CHECK_EQ(json_integer_value(json_object_get(st, "pending")), 0);
    json_decref(st);
    CHECK_EQ(publish(&m, 0, 2, 5, "aa"), 409); /* too old now */
    ctl_model_free(&m);
}

static void test_pending_capped(void)
{
    ctl_model_t m;
    json_t *st;
    int v;
    ctl_model_init(&m);
    wsync_log_set_level(WSYNC_LOG_ERROR);
    for (v = 1; v <= CTL_MAX_PENDING + 5; v++)
        CHECK_EQ(publish(&m, 1, 2, v, "aa"), 200);
    st = ctl_status_json(&m);
    CHECK_EQ(json_integer_value(json_object_get(st, "pending")), CTL_MAX_PENDING);
    json_decref(st);
    /* The newest survive: finishing the last one works. */
    CHECK_EQ(publish(&m, 0, 2, CTL_MAX_PENDING + 5, "aa"), 200);
    CHECK_EQ(ctl_latest(&m), CTL_MAX_PENDING + 5);
    wsync_log_set_level(WSYNC_LOG_INFO);
    ctl_model_free(&m);
}

/* A new trainer job may bring another world size; published versions keep
 * the world they were made with. */
static void test_world_change_keeps_old_records(void)
{
    ctl_model_t m;
    json_t *v1;
    ctl_model_init(&m);
    CHECK_EQ(publish(&m, 0, 1, 1, "aa"), 200);
    CHECK_EQ(publish(&m, 1, 2, 2, "aa"), 200);
    CHECK_EQ(publish(&m, 0, 2, 2, "aa"), 200);
    CHECK_EQ(ctl_latest(&m), 2);
    v1 = ctl_version_json(&m, 1);
    CHECK_EQ(json_integer_value(json_object_get(v1, "world")), 1);
    json_decref(v1);
    v1 = ctl_version_json(&m, 2);
    CHECK_EQ(json_array_size(json_object_get(v1, "pieces")), 2);
    json_decref(v1);
    ctl_model_free(&m);
}

static void test_engine_ids(void)
{
    ctl_model_t m;
    ctl_model_init(&m);
    CHECK_EQ(register_engine(&m, "node-1.rack:a_b"), 200);
    CHECK_EQ(register_engine(&m, "a\nb"), 422);
    CHECK_EQ(register_engine(&m, "a\"b"), 422);
    CHECK_EQ(register_engine(&m, "a%2fb"), 422);
    CHECK_EQ(register_engine(&m, "caf\xc3\xa9"), 422);
    ctl_model_free(&m);
}

static void test_generation_moves_on_change_only(void)
{
    ctl_model_t m;
    uint64_t g;
    ctl_model_init(&m);
    g = ctl_generation(&m);
    CHECK_EQ(register_engine(&m, "bad id"), 422);
    CHECK_EQ(ctl_generation(&m), g);
    CHECK_EQ(register_engine(&m, "n"), 200);
    CHECK(ctl_generation(&m) > g);
    g = ctl_generation(&m);
    CHECK_EQ(publish(&m, 0, 1, 1, "aa"), 200);
    CHECK(ctl_generation(&m) > g);
    ctl_model_free(&m);
}

static void test_state_round_trip(void)
{
    ctl_model_t m, back;
    json_t *s1, *s2, *v;
    int i;
    ctl_model_init(&m);
    ctl_model_init(&back);
    CHECK_EQ(register_engine(&m, "n1"), 200);
    for (i = 1; i <= 10; i++)
        CHECK_EQ(publish(&m, 0, 1, i, "aa"), 200);
    s1 = ctl_state_json(&m);
    CHECK_EQ(json_array_size(json_object_get(s1, "versions")), CTL_RETAIN);
    CHECK_OK(ctl_state_load(&back, s1, "test"));
    CHECK_EQ(ctl_latest(&back), 10);
    v = ctl_version_json(&back, 3);
    CHECK(v != NULL);
    json_decref(v);
    CHECK(ctl_version_json(&back, 2) == NULL);
    s2 = ctl_state_json(&back);
    CHECK(json_equal(json_object_get(s1, "versions"), json_object_get(s2, "versions")));
    CHECK(json_equal(json_object_get(s1, "engines"), json_object_get(s2, "engines")));
    /* After a restart, the same report of the latest version is that publish
     * again (idempotent); other content under its number is refused. */
    CHECK_EQ(publish(&back, 0, 1, 10, "aa"), 200);
    CHECK_EQ(ctl_latest(&back), 10);
    CHECK_EQ(publish(&back, 0, 1, 10, "bb"), 409);
    json_decref(s1);
    json_decref(s2);
    ctl_model_free(&m);
    ctl_model_free(&back);
}

/* Rank `rank` of 2 reports version v: its one piece (offset `off`), with
 * `digest` or (NULL) without one. */
static int report_piece(ctl_model_t *m, int rank, int v, int off, const char *digest)
{
    return report(m, rank, 2, v, "aa", off, digest);
}

static json_int_t pending_of(ctl_model_t *m, uint64_t v)
{
    json_t *rec = ctl_version_json(m, v);
    json_int_t n = json_integer_value(json_object_get(rec, "digests_pending"));
    if (rec && json_object_get(rec, "digests_pending") == NULL)
        n = 0;
    json_decref(rec);
    return rec ? n : -1;
}

static const char *digest_of(const json_t *rec, int id)
{
    const json_t *pc;
    size_t i;
    json_array_foreach(json_object_get(rec, "pieces"), i,
                       pc) if (json_integer_value(json_object_get(pc, "id")) ==
                               id) return json_string_value(json_object_get(pc, "digest"));
    return NULL;
}

static void test_late_digests_filled_by_second_report(void)
{
    ctl_model_t m;
    json_t *before, *after;
    ctl_model_init(&m);
    wsync_log_set_level(WSYNC_LOG_ERROR);
    CHECK_EQ(report_piece(&m, 0, 1, 0, NULL), 200);
    CHECK_EQ(ctl_latest(&m), 0);
    CHECK_EQ(report_piece(&m, 1, 1, 8, NULL), 200);
    CHECK_EQ(ctl_latest(&m), 1); /* announced: published without digests */
    CHECK_EQ(pending_of(&m, 1), 2);
    CHECK_EQ(ctl_digests_done(&m, 1), 0);
    CHECK_EQ(report_piece(&m, 0, 1, 0, NULL), 200); /* the first report again (its answer lost) */
    CHECK_EQ(pending_of(&m, 1), 2);
    before = ctl_version_json(&m, 1);
    CHECK_EQ(report_piece(&m, 0, 1, 0, "0a"), 200); /* rank 0's digests */
    after = ctl_version_json(&m, 1);
    CHECK(before != after); /* a new record object: answers cached by object are not reused */
    CHECK(digest_of(before, 0) == NULL);
    CHECK_STR(digest_of(after, 0), "0a");
    CHECK(digest_of(after, 1) == NULL);
    CHECK_EQ(pending_of(&m, 1), 1);
    CHECK_EQ(ctl_digests_done(&m, 1), 0);
    CHECK_EQ(report_piece(&m, 0, 1, 0, "0a"), 200);  /* the same again: idempotent */
    CHECK_EQ(report_piece(&m, 0, 1, 0, "0b"), 409);  /* another digest for a piece that has one */
    CHECK_EQ(report_piece(&m, 1, 1, 16, "0c"), 409); /* not the piece the record has */
    CHECK_EQ(pending_of(&m, 1), 1);
    CHECK_EQ(report_piece(&m, 1, 1, 8, "0c"), 200);
    CHECK_EQ(pending_of(&m, 1), 0);
    CHECK_EQ(ctl_digests_done(&m, 1), 1);
    CHECK_EQ(ctl_digests_done(&m, 7), 1); /* not retained: nothing to wait for */
    json_decref(before);
    json_decref(after);
    after = ctl_version_json(&m, 1);
    CHECK_STR(digest_of(after, 1), "0c");
    json_decref(after);
    ctl_model_free(&m);
}

int main(void)
{
    RUN(test_pending_dropped_by_later_version);
    RUN(test_pending_capped);
    RUN(test_world_change_keeps_old_records);
    RUN(test_engine_ids);
    RUN(test_generation_moves_on_change_only);
    RUN(test_state_round_trip);
    RUN(test_late_digests_filled_by_second_report);
    TEST_EXIT();
}
