/* safetensors_test.c: files written by wsync read back identically; the
 * reader's image layout; every malformed file refused with a message naming
 * the file, the tensor and the problem; the writer's atomicity. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/model/safetensors.h"
#include "tests/test.h"

static char dir[64];

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* Files in the test directory whose name starts with `prefix`. */
static int count_files(const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    if (d)
        closedir(d);
    return n;
}

/* Write a raw file: an 8-byte little-endian length (`hlen`, or the header's
 * own length when hlen is UINT64_MAX), the header, `data_len` data bytes. */
static void write_raw(const char *path, const char *header, uint64_t hlen, size_t data_len)
{
    FILE *f = fopen(path, "wb");
    unsigned char lenbuf[8];
    size_t i;
    if (hlen == UINT64_MAX)
        hlen = strlen(header);
    for (i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)(hlen >> (8 * i));
    fwrite(lenbuf, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    for (i = 0; i < data_len; i++)
        fputc((int)(i * 7 + 1) & 0xff, f);
    fclose(f);
}

/* The file built from (header, data_len) must be refused with FORMAT and a
 * message holding the file's path and `needle`. */
static void refused(const char *header, uint64_t hlen, size_t data_len, const char *needle, int line)
{
    char path[128];
    wsync_safetensors_t *st = NULL;
    wsync_status_t rc;
    path_of(path, sizeof(path), "bad.safetensors");
    write_raw(path, header, hlen, data_len);
    rc = wsync_safetensors_open(path, &st);
    if (rc != WSYNC_ERR_FORMAT || strstr(wsync_last_error(), needle) == NULL ||
        strstr(wsync_last_error(), path) == NULL) {
        fprintf(stderr, "  line %d: got %s '%s', wanted FORMAT naming %s and '%s'\n", line, wsync_status_str(rc),
                wsync_last_error(), path, needle);
        test_case_failed_ = 1;
    }
    CHECK(st == NULL);
    wsync_safetensors_close(st);
    unlink(path);
}
#define REFUSED(header, data_len, needle) refused(header, UINT64_MAX, data_len, needle, __LINE__)

/* --- round trips --------------------------------------------------------- */

static void written_files_read_back_identically(void)
{
    wsync_st_tensor_t t[WSYNC_DTYPE_COUNT + 3];
    int64_t shape[2] = {5, 8}, zero[2] = {0, 3};
    unsigned char *data[WSYNC_DTYPE_COUNT];
    char names[WSYNC_DTYPE_COUNT][32], path[128];
    double scalar = 2.5;
    json_t *meta = json_pack("{s:s, s:s}", "format", "pt", "note", "h\xc3\xa9llo \"quoted\"");
    wsync_safetensors_t *st = NULL;
    size_t n = 0, i, k;
    int d;

    for (d = 0; d < WSYNC_DTYPE_COUNT; d++) {
        size_t len = (size_t)wsync_dtype_nbytes((wsync_dtype_t)d, 40);
        data[d] = malloc(len);
        for (k = 0; k < len; k++)
            data[d][k] = (unsigned char)(k * 31 + (size_t)d * 7 + 3);
        snprintf(names[d], sizeof(names[d]), "layers.%d.%s", d, wsync_dtype_name((wsync_dtype_t)d));
        t[n++] = (wsync_st_tensor_t){names[d], (wsync_dtype_t)d, 2, shape, data[d]};
    }
    t[n++] = (wsync_st_tensor_t){"scalar", WSYNC_DTYPE_F64, 0, NULL, &scalar};
    t[n++] = (wsync_st_tensor_t){"zero", WSYNC_DTYPE_F32, 2, zero, NULL};
    t[n++] = (wsync_st_tensor_t){"zz.last", WSYNC_DTYPE_U8, 1, shape, "abcde"};
    path_of(path, sizeof(path), "round.safetensors");
    CHECK_OK(wsync_safetensors_write_tensors(path, n, t, meta));
    CHECK_OK(wsync_safetensors_open(path, &st));
    if (st) {
        const wsync_manifest_t *m = st->manifest;
        CHECK_EQ(m->ntensors, n);
        for (i = 0; i < n && i < m->ntensors; i++) {
            int64_t need = wsync_dtype_nbytes(t[i].dtype, 1);
            CHECK_STR(m->tensors[i].name, t[i].name);
            CHECK_EQ(m->tensors[i].dtype, t[i].dtype);
            CHECK_EQ(m->tensors[i].ndim, t[i].ndim);
            CHECK(memcmp(m->tensors[i].shape, t[i].shape ? t[i].shape : shape,
                         (size_t)t[i].ndim * sizeof(int64_t)) == 0);
            CHECK_EQ(m->tensors[i].offset % WSYNC_ALIGN, 0);
            (void)need;
            if (m->tensors[i].size)
                CHECK(memcmp(st->data[i], t[i].data, m->tensors[i].size) == 0);
        }
        CHECK(json_equal(m->metadata, meta));
        CHECK_EQ(m->tensors[n - 2].size, 0);
        CHECK_EQ(m->tensors[n - 3].ndim, 0);
        CHECK_EQ(m->tensors[n - 3].size, 8);
    }
    wsync_safetensors_close(st);
    for (d = 0; d < WSYNC_DTYPE_COUNT; d++)
        free(data[d]);
    json_decref(meta);
    CHECK_EQ(count_files("round.safetensors.tmp"), 0);
}

/* manifest + image -> file -> copy_to_image gives the same image, padding
 * zeroed even where the destination held garbage. */
static void image_survives_write_and_copy_back(void)
{
    wsync_manifest_t *m = NULL;
    wsync_safetensors_t *st = NULL;
    unsigned char *image, *back;
    char path[128], d1[33], d2[33];
    size_t i;
    CHECK_OK(wsync_manifest_synthetic(1 << 20, &m));
    if (m == NULL)
        return;
    image = calloc(1, m->image_size);
    back = malloc(m->image_size);
    memset(back, 0xAA, m->image_size);
    for (i = 0; i < m->ntensors; i++)
        for (size_t k = 0; k < m->tensors[i].size; k++)
            image[m->tensors[i].offset + k] = (unsigned char)(k ^ (i * 13));
    path_of(path, sizeof(path), "image.safetensors");
    CHECK_OK(wsync_safetensors_write(path, m, image, NULL));
    CHECK_OK(wsync_safetensors_open(path, &st));
    if (st) {
        CHECK_EQ(st->manifest->image_size, m->image_size);
        wsync_manifest_digest(m, d1);
        wsync_manifest_digest(st->manifest, d2);
        CHECK_STR(d1, d2);
        CHECK(st->manifest->metadata == NULL);
        CHECK_OK(wsync_safetensors_copy_to_image(st, back));
        CHECK(memcmp(image, back, m->image_size) == 0);
    }
    wsync_safetensors_close(st);
    free(image);
    free(back);
    wsync_manifest_free(m);
}

/* The format as the reference writer lays it out: header padded with spaces
 * to a multiple of 8, data packed right after it in tensor order. */
static void writer_lays_out_the_reference_format(void)
{
    int64_t s[1] = {3};
    wsync_st_tensor_t t[2] = {{"b", WSYNC_DTYPE_U8, 1, s, "xyz"}, {"a", WSYNC_DTYPE_U8, 1, s, "pqr"}};
    char path[128], buf[512];
    uint64_t hlen = 0;
    struct stat sb;
    FILE *f;
    size_t got;
    int i;
    path_of(path, sizeof(path), "layout.safetensors");
    CHECK_OK(wsync_safetensors_write_tensors(path, 2, t, NULL));
    f = fopen(path, "rb");
    if (f == NULL) {
        CHECK(f != NULL);
        return;
    }
    got = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    for (i = 7; i >= 0; i--)
        hlen = hlen << 8 | (unsigned char)buf[i];
    CHECK_EQ(hlen % 8, 0);
    CHECK_EQ(got, 8 + hlen + 6);
    CHECK_EQ(buf[8], '{');
    CHECK(buf[8 + hlen - 1] == '}' || buf[8 + hlen - 1] == ' ');
    CHECK(memcmp(buf + 8 + hlen, "xyzpqr", 6) == 0); /* manifest order, packed */
    CHECK(memmem(buf, got, "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}", 49) != NULL);
    CHECK_EQ(stat(path, &sb), 0);
    CHECK_EQ(sb.st_mode & 0777, 0644);
}

/* Tensors come out in data-offset order whatever the header's key order. */
static void reader_orders_tensors_by_data_offset(void)
{
    char path[128];
    wsync_safetensors_t *st = NULL;
    unsigned char image[1024];
    path_of(path, sizeof(path), "order.safetensors");
    write_raw(path,
              "{\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"__metadata__\":{\"k\":\"v\"},"
              "\"b\":{\"dtype\":\"I16\",\"shape\":[],\"data_offsets\":[4,6]}}",
              UINT64_MAX, 8);
    CHECK_OK(wsync_safetensors_open(path, &st));
    if (st == NULL)
        return;
    CHECK_EQ(st->manifest->ntensors, 3);
    CHECK_STR(st->manifest->tensors[0].name, "a");
    CHECK_STR(st->manifest->tensors[1].name, "b");
    CHECK_STR(st->manifest->tensors[2].name, "c");
    CHECK_EQ(st->manifest->tensors[1].offset, 256);
    CHECK_EQ(st->manifest->tensors[2].offset, 512);
    CHECK_EQ(st->manifest->image_size, 768);
    CHECK_STR(json_string_value(json_object_get(st->manifest->metadata, "k")), "v");
    memset(image, 0xEE, sizeof(image));
    CHECK_OK(wsync_safetensors_copy_to_image(st, image));
    /* write_raw's data bytes are (i * 7 + 1): a = 1 8 15 22, b = 29 36, c = 43 50 */
    CHECK_EQ(image[0], 1);
    CHECK_EQ(image[3], 22);
    CHECK_EQ(image[4], 0);
    CHECK_EQ(image[256], 29);
    CHECK_EQ(image[513], 50);
    CHECK_EQ(image[514], 0);
    CHECK_EQ(image[767], 0);
    wsync_safetensors_close(st);
}

static void scalars_and_zero_sized_tensors_are_valid(void)
{
    char path[128];
    wsync_safetensors_t *st = NULL;
    path_of(path, sizeof(path), "small.safetensors");
    write_raw(path,
              "{\"empty0\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
              "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
              "\"empty1\":{\"dtype\":\"BF16\",\"shape\":[4,0,2],\"data_offsets\":[8,8]}}    ",
              UINT64_MAX, 8);
    CHECK_OK(wsync_safetensors_open(path, &st));
    if (st) {
        CHECK_EQ(st->manifest->ntensors, 3);
        CHECK_EQ(st->manifest->tensors[wsync_manifest_find(st->manifest, "s")].ndim, 0);
        CHECK_EQ(st->manifest->tensors[wsync_manifest_find(st->manifest, "s")].size, 8);
        CHECK_EQ(st->manifest->tensors[wsync_manifest_find(st->manifest, "empty1")].size, 0);
        CHECK_EQ(st->manifest->tensors[wsync_manifest_find(st->manifest, "empty1")].ndim, 3);
    }
    wsync_safetensors_close(st);
    st = NULL;
    /* A file of no tensors at all is a valid (empty) model. */
    write_raw(path, "{}      ", UINT64_MAX, 0);
    CHECK_OK(wsync_safetensors_open(path, &st));
    if (st) {
        CHECK_EQ(st->manifest->ntensors, 0);
        CHECK_EQ(st->manifest->image_size, 0);
    }
    wsync_safetensors_close(st);
}

/* --- malformed files: one case each ---------------------------------------- */

#define E(name, dtype, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void refuses_file_shorter_than_8_bytes(void)
{
    char path[128];
    wsync_safetensors_t *st = NULL;
    FILE *f;
    path_of(path, sizeof(path), "short.safetensors");
    f = fopen(path, "wb");
    fwrite("\x10\0\0", 1, 3, f);
    fclose(f);
    CHECK_FAILS(wsync_safetensors_open(path, &st), WSYNC_ERR_FORMAT, "shorter than the 8-byte header length");
    CHECK(strstr(wsync_last_error(), "short.safetensors") != NULL);
    f = fopen(path, "wb");
    fclose(f);
    CHECK_FAILS(wsync_safetensors_open(path, &st), WSYNC_ERR_FORMAT, "file is 0 bytes");
    CHECK(st == NULL);
}

static void refuses_header_length_past_end_of_file(void)
{
    refused("{}", 4000, 0, "header length 4000 runs past the end of the file", __LINE__);
}

static void refuses_absurd_header_length(void)
{
    refused("{}", 1ull << 40, 0, "is absurd", __LINE__);
    refused("{}", UINT64_MAX - 1, 0, "is absurd", __LINE__);
}

static void refuses_header_that_is_not_json(void)
{
    REFUSED("{\"a\": {\"dtype\": ", 0, "header is not valid JSON");
    REFUSED("\x01\x02garbage", 0, "header is not valid JSON");
}

static void refuses_header_that_is_not_an_object(void)
{
    REFUSED("[1, 2, 3]", 0, "header is not a JSON object");
}

static void refuses_entry_that_is_not_an_object(void)
{
    REFUSED("{\"w\": [1, 2]}", 0, "tensor 'w': entry is not an object");
}

static void refuses_entry_without_dtype(void)
{
    REFUSED("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 'w': missing dtype");
}

static void refuses_entry_without_shape(void)
{
    REFUSED("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "tensor 'w': missing shape");
}

static void refuses_entry_without_data_offsets(void)
{
    REFUSED("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "tensor 'w': missing data_offsets");
    REFUSED("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "tensor 'w': data_offsets must be");
    REFUSED("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
            "tensor 'w': data_offsets must be");
}

static void refuses_unknown_dtype(void)
{
    REFUSED("{" E("w", "F128", "[2]", 0, 8) "}", 8, "tensor 'w': unknown dtype 'F128'");
}

static void refuses_negative_shape(void)
{
    REFUSED("{" E("w", "F32", "[2,-1]", 0, 8) "}", 8, "tensor 'w': shape[1] is not a non-negative integer");
}

static void refuses_non_integer_shape(void)
{
    REFUSED("{" E("w", "F32", "[2.0]", 0, 8) "}", 8, "tensor 'w': shape[0] is not a non-negative integer");
    REFUSED("{" E("w", "F32", "[\"2\"]", 0, 8) "}", 8, "tensor 'w': shape[0] is not a non-negative integer");
}

static void refuses_size_that_does_not_match_shape(void)
{
    REFUSED("{" E("w", "F32", "[3]", 0, 8) "}", 8,
            "tensor 'w': shape [3] x F32 needs 12 bytes but data_offsets cover 8");
    /* Sub-byte counts that do not fill whole bytes. */
    REFUSED("{" E("w", "F4", "[3]", 0, 2) "}", 2, "tensor 'w': 3 F4 elements do not fill whole bytes");
}

static void refuses_offsets_out_of_range(void)
{
    REFUSED("{" E("a", "U8", "[4]", 0, 4) "," E("w", "U8", "[8]", 4, 12) "}", 8,
            "tensor 'w': data_offsets [4, 12] run past the data section (8 bytes)");
}

static void refuses_overlapping_tensors(void)
{
    REFUSED("{" E("a", "U8", "[6]", 0, 6) "," E("b", "U8", "[4]", 4, 8) "}", 8,
            "tensor 'b' (bytes 4..8) overlaps tensor 'a'");
}

static void refuses_holes_in_the_data_section(void)
{
    REFUSED("{" E("a", "U8", "[2]", 0, 2) "," E("b", "U8", "[4]", 4, 8) "}", 8,
            "a hole of 2 bytes before tensor 'b'");
    REFUSED("{" E("a", "U8", "[4]", 0, 4) "}", 8, "4 bytes after the last tensor are not covered");
}

static void refuses_duplicate_names(void)
{
    REFUSED("{" E("w", "U8", "[4]", 0, 4) "," E("w", "U8", "[4]", 4, 8) "}", 8, "duplicate");
    REFUSED("{" E("w", "U8", "[4]", 0, 4) "," E("w", "U8", "[4]", 4, 8) "}", 8, "\"w\"");
}

static void refuses_metadata_that_is_not_an_object_of_strings(void)
{
    REFUSED("{\"__metadata__\":[\"a\"]," E("w", "U8", "[4]", 0, 4) "}", 4, "__metadata__ must be an object");
    REFUSED("{\"__metadata__\":{\"step\":3}," E("w", "U8", "[4]", 0, 4) "}", 4,
            "__metadata__ value 'step' is not a string");
}

static void refuses_missing_files_and_directories(void)
{
    char path[128];
    wsync_safetensors_t *st = NULL;
    path_of(path, sizeof(path), "no-such.safetensors");
    CHECK_FAILS(wsync_safetensors_open(path, &st), WSYNC_ERR_IO, "no-such.safetensors: No such file");
    CHECK_FAILS(wsync_safetensors_open(dir, &st), WSYNC_ERR_IO, "not a regular file");
    CHECK(st == NULL);
}

/* --- the writer's failures ------------------------------------------------ */

static void writer_refuses_an_unwritable_place_and_leaves_nothing(void)
{
    int64_t s[1] = {4};
    wsync_st_tensor_t t = {"w", WSYNC_DTYPE_U8, 1, s, "abcd"};
    char path[128];
    path_of(path, sizeof(path), "missing-dir/out.safetensors");
    CHECK_FAILS(wsync_safetensors_write_tensors(path, 1, &t, NULL), WSYNC_ERR_IO,
                "missing-dir/out.safetensors: cannot create a temp file in its directory");
    CHECK(access(path, F_OK) != 0);
}

/* A write that fails halfway (a full disk, simulated with RLIMIT_FSIZE, which
 * makes write() fail with EFBIG just as ENOSPC would) leaves neither a temp
 * file nor a changed target. */
static void writer_failing_midway_leaves_the_old_file(void)
{
    int64_t small[1] = {4}, big[1] = {1 << 20};
    unsigned char *bigdata = calloc(1, 1 << 20);
    wsync_st_tensor_t t1 = {"w", WSYNC_DTYPE_U8, 1, small, "abcd"}, t2 = {"w", WSYNC_DTYPE_U8, 1, big, bigdata};
    struct rlimit old, lim;
    wsync_safetensors_t *st = NULL;
    char path[128];
    path_of(path, sizeof(path), "full.safetensors");
    CHECK_OK(wsync_safetensors_write_tensors(path, 1, &t1, NULL));
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    signal(SIGXFSZ, SIG_IGN);
    CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    CHECK_FAILS(wsync_safetensors_write_tensors(path, 1, &t2, NULL), WSYNC_ERR_IO, "full.safetensors: write failed");
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK_EQ(count_files("full.safetensors.tmp"), 0);
    CHECK_OK(wsync_safetensors_open(path, &st));
    if (st) {
        CHECK_EQ(st->manifest->tensors[0].size, 4);
        CHECK(memcmp(st->data[0], "abcd", 4) == 0);
    }
    wsync_safetensors_close(st);
    free(bigdata);
}

static void writer_refuses_bad_metadata(void)
{
    int64_t s[1] = {4};
    wsync_st_tensor_t t = {"w", WSYNC_DTYPE_U8, 1, s, "abcd"};
    json_t *meta = json_pack("{s:i}", "step", 3), *arr = json_array();
    char path[128];
    path_of(path, sizeof(path), "meta.safetensors");
    CHECK_FAILS(wsync_safetensors_write_tensors(path, 1, &t, meta), WSYNC_ERR_INVALID,
                "__metadata__ value 'step' is not a string");
    CHECK_FAILS(wsync_safetensors_write_tensors(path, 1, &t, arr), WSYNC_ERR_INVALID, "object of strings");
    CHECK(access(path, F_OK) != 0);
    json_decref(meta);
    json_decref(arr);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/wsync-st-test.XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    RUN(written_files_read_back_identically);
    RUN(image_survives_write_and_copy_back);
    RUN(writer_lays_out_the_reference_format);
    RUN(reader_orders_tensors_by_data_offset);
    RUN(scalars_and_zero_sized_tensors_are_valid);
    RUN(refuses_file_shorter_than_8_bytes);
    RUN(refuses_header_length_past_end_of_file);
    RUN(refuses_absurd_header_length);
    RUN(refuses_header_that_is_not_json);
    RUN(refuses_header_that_is_not_an_object);
    RUN(refuses_entry_that_is_not_an_object);
    RUN(refuses_entry_without_dtype);
    RUN(refuses_entry_without_shape);
    RUN(refuses_entry_without_data_offsets);
    RUN(refuses_unknown_dtype);
    RUN(refuses_negative_shape);
    RUN(refuses_non_integer_shape);
    RUN(refuses_size_that_does_not_match_shape);
    RUN(refuses_offsets_out_of_range);
    RUN(refuses_overlapping_tensors);
    RUN(refuses_holes_in_the_data_section);
    RUN(refuses_duplicate_names);
    RUN(refuses_metadata_that_is_not_an_object_of_strings);
    RUN(refuses_missing_files_and_directories);
    RUN(writer_refuses_an_unwritable_place_and_leaves_nothing);
    RUN(writer_failing_midway_leaves_the_old_file);
    RUN(writer_refuses_bad_metadata);
    remove_dir();
    TEST_EXIT();
}
