/*
 * Unit tests of the agent's shipping (agent/ship.c) and spool (agent/spool.c):
 * the retry policy, Retry-After parsing, the spool on disk, splitting input
 * files into streams, and whole shipper runs against a small HTTP server
 * started in this process (libmicrohttpd) that answers as the ingest server
 * does, or with the failures a test asks for.
 */
#include "agent/ship.h"
#include "agent/spool.h"
#include "common/log.h"
#include "common/util.h"
#include "tests/unit/check.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

/* ---- helpers ---- */

static char *make_tmpdir(void)
{
	char tmpl[] = "/tmp/test_ship.XXXXXX";
	char *d = mkdtemp(tmpl);

	return d ? strdup(d) : NULL;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_tree(char *dir)
{
	if (dir)
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static int count_files(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name), sl = strlen(suffix);

		if (de->d_name[0] != '.' && l >= sl && strcmp(de->d_name + l - sl, suffix) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static char *slurp(const char *path)
{
	char *data = NULL;
	size_t len;

	if (util_read_file(path, 1 << 20, &data, &len) < 0)
		return NULL;
	return data;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* A valid stream as one line of JSON; `app` "bad" makes the test server reject it. */
static void stream_json(struct buf *b, const char *id, const char *app, size_t nframes)
{
	buf_printf(b, "{\"v\":1,\"stream_id\":\"%s\",\"host\":\"web-1\",\"app\":\"%s\","
		   "\"symptom\":{\"kind\":\"manual\",\"tid\":7,\"start_ns\":0,\"end_ns\":100},"
		   "\"frames\":[", id, app);
	for (size_t i = 0; i < nframes; i++)
		buf_printf(b, "%s\"mod!function_%zu\"", i ? "," : "", i);
	buf_puts(b, "],\"stacks\":[[0]],\"events\":[{\"kind\":\"run\",\"tid\":7,\"ts_ns\":10,"
		 "\"dur_ns\":50,\"stack\":0}]}");
}

static const char pretty[] =
	"{\n"
	"  \"v\": 1,\n"
	"  \"stream_id\": \"%s\",\n"
	"  \"host\": \"web-17\", \"app\": \"nginx\",\n"
	"  \"labels\": {\"note\": \"braces { and [ in a string }\"},\n"
	"  \"symptom\": {\"kind\": \"unit_violation\", \"tid\": 4211,\n"
	"              \"start_ns\": 81234000000, \"end_ns\": 81684000000},\n"
	"  \"frames\": [\"nginx!main\", \"libc.so.6!fdatasync\"],\n"
	"  \"stacks\": [[0, 1]],\n"
	"  \"events\": [\n"
	"    {\"kind\": \"wait\", \"tid\": 4211, \"ts_ns\": 81300000000, \"dur_ns\": 240000000,\n"
	"     \"stack\": 0, \"readier_tid\": 0}\n"
	"  ]\n"
	"}\n";

static void new_id(char id[37])
{
	util_uuid_v4(id);
}

/* ---- the test server ---- */

#define MAX_SCRIPT 16
#define MAX_SEEN 64

struct seen {
	int status;
	int lines;
	size_t bytes;          /* decompressed */
	char ctype[64], enc[32], auth[96];
};

static struct {
	struct MHD_Daemon *d;
	unsigned port;
	pthread_mutex_t lock;
	int script[MAX_SCRIPT];     /* statuses to answer first, in order */
	int retry_after[MAX_SCRIPT];/* -1: no header */
	int nscript, next;
	int always;                 /* non-zero: answer every request with this */
	int max_lines;              /* more lines than this: 413 (0: no limit) */
	const char *answer;         /* a fixed 200 body instead of the computed one */
	int hang_ms;                /* sleep before answering the first request */
	struct seen seen[MAX_SEEN];
	int nseen;
} srv = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void srv_reset(void)
{
	pthread_mutex_lock(&srv.lock);
	srv.nscript = srv.next = srv.always = srv.max_lines = srv.nseen = srv.hang_ms = 0;
	srv.answer = NULL;
	pthread_mutex_unlock(&srv.lock);
}

static void srv_script(int status, int retry_after)
{
	srv.script[srv.nscript] = status;
	srv.retry_after[srv.nscript] = retry_after;
	srv.nscript++;
}

struct srv_req {
	struct buf body;
};

static int decompress(const struct buf *in, struct buf *out)
{
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	ZSTD_inBuffer zin = { in->data, in->len, 0 };
	size_t ret = 1;

	while (zin.pos < zin.size || ret != 0) {
		ZSTD_outBuffer zout;

		if (buf_reserve(out, 65536) < 0)
			break;
		zout.dst = out->data + out->len;
		zout.size = 65536;
		zout.pos = 0;
		ret = ZSTD_decompressStream(dc, &zout, &zin);
		if (ZSTD_isError(ret) || (zin.pos == zin.size && ret != 0 && zout.pos < zout.size)) {
			ZSTD_freeDCtx(dc);
			return -1;
		}
		out->len += zout.pos;
	}
	ZSTD_freeDCtx(dc);
	buf_cstr(out);
	return 0;
}

static MHD_RESULT srv_answer(struct MHD_Connection *conn, int status, const char *body,
			     int retry_after)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	MHD_RESULT ret;
	char ra[16];

	MHD_add_response_header(r, "Content-Type", "application/json");
	if (retry_after >= 0) {
		snprintf(ra, sizeof(ra), "%d", retry_after);
		MHD_add_response_header(r, "Retry-After", ra);
	}
	ret = MHD_queue_response(conn, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

static MHD_RESULT srv_handle(void *cls, struct MHD_Connection *conn, const char *url,
			     const char *method, const char *version, const char *upload,
			     size_t *upload_size, void **con_cls)
{
	struct srv_req *rq = *con_cls;
	struct buf plain = BUF_INIT(0), out = BUF_INIT(0), rej = BUF_INIT(0);
	struct seen sn;
	const char *v;
	int status = 200, ra = -1, accepted = 0, nrej = 0, hang;
	MHD_RESULT ret;

	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	if (!rq) {
		*con_cls = calloc(1, sizeof(struct srv_req));
		return *con_cls ? MHD_YES : MHD_NO;
	}
	if (*upload_size) {
		buf_append(&rq->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	memset(&sn, 0, sizeof(sn));
	if ((v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type")))
		snprintf(sn.ctype, sizeof(sn.ctype), "%s", v);
	if ((v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Encoding")))
		snprintf(sn.enc, sizeof(sn.enc), "%s", v);
	if ((v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization")))
		snprintf(sn.auth, sizeof(sn.auth), "%s", v);
	if (decompress(&rq->body, &plain) < 0)
		status = 400;
	sn.bytes = plain.len;
	for (size_t i = 0, start = 0; i < plain.len; i++) {
		if (plain.data[i] != '\n')
			continue;
		sn.lines++;
		if (memmem(plain.data + start, i - start, "\"app\":\"bad\"", 11)) {
			buf_printf(&rej, "%s{\"line\":%d,\"stream_id\":null,\"error\":\"app: refused by the test server\"}",
				   nrej ? "," : "", sn.lines);
			nrej++;
		} else {
			accepted++;
		}
		start = i + 1;
	}

	pthread_mutex_lock(&srv.lock);
	hang = srv.nseen == 0 ? srv.hang_ms : 0;
	if (srv.next < srv.nscript) {
		ra = srv.retry_after[srv.next];
		status = srv.script[srv.next++];
	} else if (srv.always) {
		status = srv.always;
	} else if (srv.max_lines && sn.lines > srv.max_lines) {
		status = 413;
	} else if (memmem(plain.data ? plain.data : "", plain.len, "\"app\":\"huge\"", 12)) {
		status = 413;
	}
	if (status == 200 && srv.answer)
		buf_puts(&out, srv.answer);
	else if (status == 200)
		buf_printf(&out, "{\"accepted\":%d,\"duplicates\":0,\"rejected\":[%s]}", accepted,
			   rej.len ? rej.data : "");
	else
		buf_printf(&out, "{\"error\":\"test server says %d\"}", status);
	sn.status = status;
	if (srv.nseen < MAX_SEEN)
		srv.seen[srv.nseen++] = sn;
	pthread_mutex_unlock(&srv.lock);

	if (hang) {
		struct timespec ts = { hang / 1000, (hang % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	ret = srv_answer(conn, status, out.data, ra);
	buf_release(&plain);
	buf_release(&out);
	buf_release(&rej);
	return ret;
}

static void srv_done(void *cls, struct MHD_Connection *conn, void **con_cls,
		     enum MHD_RequestTerminationCode toe)
{
	struct srv_req *rq = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (rq) {
		buf_release(&rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

static int srv_start(void)
{
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION,
				 0, NULL, NULL, srv_handle, NULL, MHD_OPTION_SOCK_ADDR,
				 (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, srv_done, NULL,
				 MHD_OPTION_END);
	if (!srv.d)
		return -1;
	info = MHD_get_daemon_info(srv.d, MHD_DAEMON_INFO_BIND_PORT);
	srv.port = info ? info->port : 0;
	return srv.port ? 0 : -1;
}

/* ---- a shipper pointed at the test server, recording its reports ---- */

#define MAX_REPORTS 32

struct reports {
	int n;
	enum ship_event ev[MAX_REPORTS];
	char origin[MAX_REPORTS][256];
	char id[MAX_REPORTS][37];
	char msg[MAX_REPORTS][512];
};

static void record(void *ctx, enum ship_event ev, const char *origin, const char *id,
		   const char *msg)
{
	struct reports *r = ctx;

	if (r->n == MAX_REPORTS)
		return;
	r->ev[r->n] = ev;
	snprintf(r->origin[r->n], sizeof(r->origin[0]), "%s", origin);
	snprintf(r->id[r->n], sizeof(r->id[0]), "%s", id);
	snprintf(r->msg[r->n], sizeof(r->msg[0]), "%s", msg);
	r->n++;
}

static char url[64];

static struct shipper *open_shipper(const char *spool, struct reports *r, size_t batch,
				    int attempts)
{
	struct ship_opts o;
	char err[256];
	struct shipper *sh;

	ship_opts_init(&o);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", srv.port);
	o.url = url;
	o.token = "tok-123";
	o.spool_dir = spool;
	o.batch_count = batch;
	o.max_attempts = attempts;
	o.timeout_s = 5;
	o.report = record;
	o.report_ctx = r;
	memset(r, 0, sizeof(*r));
	sh = shipper_open(&o, err, sizeof(err));
	if (!sh)
		fprintf(stderr, "  shipper_open: %s\n", err);
	srv_reset();
	return sh;
}

static int add_stream(struct shipper *sh, const char *app, char id[37])
{
	struct buf b = BUF_INIT(0);
	int rc;

	new_id(id);
	stream_json(&b, id, app, 2);
	rc = shipper_add_json(sh, b.data, b.len, "test");
	buf_release(&b);
	return rc;
}

/* ---- retry policy ---- */

static void test_backoff_bounds(void)
{
	/* attempt 1: jitter over [0, 200] */
	CHECK_INT(ship_backoff_ms(1, -1, 0), 0);
	CHECK_INT(ship_backoff_ms(1, -1, 200), 200);
	CHECK_INT(ship_backoff_ms(1, -1, 201), 0);
	CHECK_INT(ship_backoff_ms(1, -1, 350), 149);
	CHECK(ship_backoff_ms(1, -1, UINT64_MAX) <= 200);
	/* attempt 0 counts as the first */
	CHECK_INT(ship_backoff_ms(0, -1, 200), 200);
	/* doubling: 400, 800, ... */
	CHECK_INT(ship_backoff_ms(2, -1, 400), 400);
	CHECK_INT(ship_backoff_ms(2, -1, 401), 0);
	CHECK_INT(ship_backoff_ms(3, -1, 800), 800);
	CHECK_INT(ship_backoff_ms(8, -1, 25600), 25600);
	/* 200 * 2^8 = 51200 is past the cap */
	CHECK_INT(ship_backoff_ms(9, -1, 30000), 30000);
	CHECK_INT(ship_backoff_ms(9, -1, 30001), 0);
	CHECK_INT(ship_backoff_ms(64, -1, 30000), 30000);
	CHECK_INT(ship_backoff_ms(1000000, -1, UINT64_MAX), (int64_t)(UINT64_MAX % 30001));
}

static void test_backoff_growth(void)
{
	int64_t prev = 0;

	/* the largest possible wait doubles until the cap, then stays there */
	for (int a = 1; a <= 12; a++) {
		int64_t ceil = (int64_t)200 << (a - 1);
		int64_t top;

		if (ceil > 30000)
			ceil = 30000;
		top = ship_backoff_ms(a, -1, (uint64_t)ceil);
		CHECK_INT(top, ceil);
		CHECK_INT(ship_backoff_ms(a, -1, (uint64_t)ceil + 1), 0);
		CHECK(top >= prev);
		prev = top;
	}
	CHECK_INT(prev, 30000);
}

static void test_backoff_retry_after(void)
{
	CHECK_INT(ship_backoff_ms(1, 2000, 0), 2000);
	CHECK_INT(ship_backoff_ms(1, 2000, 150), 2150);
	CHECK_INT(ship_backoff_ms(1, 0, 150), 150);
	CHECK_INT(ship_backoff_ms(3, 1000, 800), 1800);
	CHECK_INT(ship_backoff_ms(1, 40000, 0), 30000);
	CHECK_INT(ship_backoff_ms(5, 29000, 3000), 30000);
}

static void test_retry_after_parse(void)
{
	CHECK_INT(ship_retry_after_ms("2"), 2000);
	CHECK_INT(ship_retry_after_ms(" 7\r\n"), 7000);
	CHECK_INT(ship_retry_after_ms("0"), 0);
	CHECK_INT(ship_retry_after_ms("30"), 30000);
	CHECK_INT(ship_retry_after_ms("31"), 30000);
	CHECK_INT(ship_retry_after_ms("99999999999999999999999"), 30000);
	CHECK_INT(ship_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT"), 30000);
	CHECK_INT(ship_retry_after_ms("Sunday, 06-Nov-94 08:49:37 GMT"), 30000);
	CHECK_INT(ship_retry_after_ms("Sun Nov  6 08:49:37 1994"), 30000);
	CHECK_INT(ship_retry_after_ms(""), -1);
	CHECK_INT(ship_retry_after_ms("   "), -1);
	CHECK_INT(ship_retry_after_ms("abc"), -1);
	CHECK_INT(ship_retry_after_ms("-1"), -1);
	CHECK_INT(ship_retry_after_ms("1.5"), -1);
	CHECK_INT(ship_retry_after_ms("2 s"), -1);
	CHECK_INT(ship_retry_after_ms("Wed, 21 Oct 2015"), -1);
	CHECK_INT(ship_retry_after_ms(NULL), -1);
}

/* ---- spool ---- */

static void set_mtime(const char *dir, const char *name, time_t t)
{
	char path[512];
	struct timespec ts[2] = { { t, 0 }, { t, 0 } };

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	utimensat(AT_FDCWD, path, ts, 0);
}

static void test_spool_put_list_remove(void)
{
	char *tmp = make_tmpdir(), dir[256], path[512], err[256], a[37], b[37], name[64];
	struct spool_entry *list = NULL;
	struct spool *sp;
	size_t n = 0, len = 0;
	char *data = NULL;

	snprintf(dir, sizeof(dir), "%s/deep/spool", tmp);
	CHECK(spool_open(dir, 1 << 20, 0, err, sizeof(err)) == NULL);  /* not there, not created */
	sp = spool_open(dir, 1 << 20, 1, err, sizeof(err));
	CHECK(sp != NULL);
	if (!sp)
		goto out;
	CHECK_INT(spool_used(sp), 0);
	new_id(a);
	new_id(b);
	CHECK_INT(spool_put(sp, a, "{\"a\":1}", 7), SPOOL_OK);
	CHECK_INT(spool_put(sp, b, "{\"b\":22}", 8), SPOOL_OK);
	CHECK_INT(spool_used(sp), 8 + 9);
	snprintf(path, sizeof(path), "%s/%s.json", dir, a);
	data = slurp(path);
	CHECK_STR(data, "{\"a\":1}\n");
	free(data);
	/* b older than a: listed first */
	snprintf(name, sizeof(name), "%s.json", a);
	set_mtime(dir, name, 2000000000);
	snprintf(name, sizeof(name), "%s.json", b);
	set_mtime(dir, name, 1000000000);
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	write_text(path, "not a stream");
	CHECK_INT(spool_list(sp, &list, &n), SPOOL_OK);
	CHECK_INT(n, 2);
	if (n == 2) {
		CHECK_STR(list[0].id, b);
		CHECK_STR(list[1].id, a);
		CHECK_INT(list[0].size, 9);
	}
	free(list);
	CHECK_INT(spool_read(sp, b, 1024, &data, &len), SPOOL_OK);
	CHECK_INT(len, 9);
	CHECK(data && memcmp(data, "{\"b\":22}\n", 9) == 0);
	free(data);
	/* replacing a stream counts only the new copy */
	CHECK_INT(spool_put(sp, a, "{\"a\":12345}", 11), SPOOL_OK);
	CHECK_INT(spool_used(sp), 12 + 9);
	CHECK_INT(spool_remove(sp, a), SPOOL_OK);
	CHECK_INT(spool_used(sp), 9);
	CHECK_INT(spool_remove(sp, a), SPOOL_OK);  /* already gone */
	CHECK_INT(count_files(dir, ".json"), 1);
	/* ids are file names: nothing else gets through */
	CHECK_INT(spool_put(sp, "../../etc/passwd", "x", 1), SPOOL_EINVAL);
	CHECK_INT(spool_put(sp, "5F0C6F0E-3D0B-4A53-9A43-6D1C2F0A9B11", "x", 1), SPOOL_EINVAL);
	CHECK_INT(spool_remove(sp, "notes"), SPOOL_EINVAL);
	CHECK(strstr(spool_error(sp), "not a stream id") != NULL);
	spool_free(sp);
	spool_free(NULL);
out:
	rm_tree(tmp);
}

static void test_spool_atomic(void)
{
	char *tmp = make_tmpdir(), err[256], id[37], stale[128], fresh[128];
	struct spool *sp;

	new_id(id);
	/* what a writer that crashed left: an old temporary file and a recent one */
	snprintf(stale, sizeof(stale), "%s/.tmp.%s.json.1.aaaa", tmp, id);
	snprintf(fresh, sizeof(fresh), "%s/.tmp.%s.json.2.bbbb", tmp, id);
	write_text(stale, "{\"half\":");
	write_text(fresh, "{\"writing\":");
	set_mtime(tmp, strrchr(stale, '/') + 1, time(NULL) - 7200);
	sp = spool_open(tmp, 1 << 20, 1, err, sizeof(err));
	CHECK(sp != NULL);
	if (!sp)
		goto out;
	CHECK(access(stale, F_OK) != 0);   /* removed */
	CHECK(access(fresh, F_OK) == 0);   /* maybe still being written by someone: kept */
	CHECK_INT(spool_used(sp), 11);     /* and counted */
	unlink(fresh);
	CHECK_INT(spool_put(sp, id, "{}", 2), SPOOL_OK);
	/* the put leaves only the final file behind */
	CHECK_INT(count_files(tmp, ""), 1);
	CHECK_INT(count_files(tmp, ".json"), 1);
	spool_free(sp);
out:
	rm_tree(tmp);
}

static void test_spool_limit(void)
{
	char *tmp = make_tmpdir(), err[256], a[37], b[37], c[37], body[61];
	struct spool *sp;

	memset(body, 'x', 60);
	body[60] = '\0';
	new_id(a);
	new_id(b);
	new_id(c);
	sp = spool_open(tmp, 130, 1, err, sizeof(err));
	CHECK(sp != NULL);
	if (!sp)
		goto out;
	CHECK_INT(spool_put(sp, a, body, 60), SPOOL_OK);
	CHECK_INT(spool_put(sp, b, body, 60), SPOOL_OK);
	CHECK_INT(spool_used(sp), 122);
	CHECK_INT(spool_put(sp, c, body, 8), SPOOL_EFULL);  /* 131 > 130 */
	CHECK(strstr(spool_error(sp), "full") != NULL);
	CHECK(strstr(spool_error(sp), "--spool-max") != NULL);
	CHECK_INT(spool_used(sp), 122);
	CHECK_INT(count_files(tmp, ".json"), 2);
	CHECK_INT(spool_put(sp, c, body, 7), SPOOL_OK);     /* exactly 130 fits */
	spool_free(sp);
	/* a new handle counts what is there */
	sp = spool_open(tmp, 130, 0, err, sizeof(err));
	CHECK(sp != NULL);
	if (!sp)
		goto out;
	CHECK_INT(spool_used(sp), 130);
	CHECK_INT(spool_put(sp, a, body, 60), SPOOL_OK);    /* replaces a: same size */
	CHECK_INT(spool_put(sp, a, body, 61), SPOOL_EFULL);
	spool_free(sp);
out:
	rm_tree(tmp);
}

static void test_spool_reject(void)
{
	char *tmp = make_tmpdir(), err[256], id[37], path[512], rdir[300];
	struct spool_entry *list = NULL;
	struct spool *sp;
	size_t n = 9;
	char *data;

	new_id(id);
	sp = spool_open(tmp, 1 << 20, 1, err, sizeof(err));
	CHECK(sp != NULL);
	if (!sp)
		goto out;
	CHECK_INT(spool_put(sp, id, "{\"x\":1}", 7), SPOOL_OK);
	CHECK_INT(spool_reject(sp, id, "events[0].stack: index 9 out of range"), SPOOL_OK);
	CHECK_INT(spool_list(sp, &list, &n), SPOOL_OK);
	CHECK_INT(n, 0);
	free(list);
	snprintf(rdir, sizeof(rdir), "%s/rejected", tmp);
	snprintf(path, sizeof(path), "%s/%s.json", rdir, id);
	data = slurp(path);
	CHECK_STR(data, "{\"x\":1}\n");
	free(data);
	snprintf(path, sizeof(path), "%s/%s.error", rdir, id);
	data = slurp(path);
	CHECK_STR(data, "events[0].stack: index 9 out of range\n");
	free(data);
	/* rejected streams still take room */
	CHECK_INT(spool_used(sp), 8 + 38);
	spool_free(sp);
	sp = spool_open(tmp, 1 << 20, 0, err, sizeof(err));
	CHECK(sp && spool_used(sp) == 8 + 38);
	spool_free(sp);
out:
	rm_tree(tmp);
}

/* ---- splitting input into streams ---- */

struct pieces {
	int n;
	size_t line[16];
	char text[16][2048];
};

static int collect_piece(void *ctx, const char *obj, size_t len, size_t line)
{
	struct pieces *p = ctx;

	if (p->n < 16) {
		p->line[p->n] = line;
		snprintf(p->text[p->n], sizeof(p->text[0]), "%.*s", (int)len, obj);
	}
	p->n++;
	return 0;
}

/* Splits text in pieces of chunk bytes: the pieces must be those of the whole text. */
static void split_chunked(const char *text, const struct pieces *whole, size_t max, size_t chunk)
{
	struct pieces got;
	struct ship_splitter *sp = ship_splitter_open(max, collect_piece, &got);
	size_t n = strlen(text);

	memset(&got, 0, sizeof(got));
	for (size_t i = 0; i < n; i += chunk)
		CHECK_INT(ship_splitter_feed(sp, text + i, n - i < chunk ? n - i : chunk), 0);
	CHECK_INT(ship_splitter_finish(sp), 0);
	ship_splitter_free(sp);
	CHECK_INT(got.n, whole->n);
	for (int i = 0; i < whole->n && i < got.n && i < 16; i++) {
		CHECK_INT(got.line[i], whole->line[i]);
		CHECK_STR(got.text[i], whole->text[i]);
	}
}

/* Splits text whole, and again one byte and a few bytes at a time: all must give the same pieces. */
static void split(const char *text, struct pieces *whole, size_t max)
{
	struct ship_splitter *sp = ship_splitter_open(max, collect_piece, whole);

	memset(whole, 0, sizeof(*whole));
	CHECK_INT(ship_splitter_feed(sp, text, strlen(text)), 0);
	CHECK_INT(ship_splitter_finish(sp), 0);
	ship_splitter_free(sp);
	split_chunked(text, whole, max, 1);
	split_chunked(text, whole, max, 3);
	split_chunked(text, whole, max, 7);
}

static void test_split_ndjson(void)
{
	struct pieces p;

	/* a broken line does not swallow the next ones */
	split("{\"a\":1}\n\n  {\"b\":\"}\\\"{\"}\r\n{\"c\":[1,\n{\"d\":4}\n", &p, 1024);
	CHECK_INT(p.n, 4);
	CHECK_INT(p.line[0], 1);
	CHECK_STR(p.text[0], "{\"a\":1}");
	CHECK_INT(p.line[1], 3);
	CHECK_STR(p.text[1], "{\"b\":\"}\\\"{\"}\r");
	CHECK_INT(p.line[2], 4);
	CHECK_STR(p.text[2], "{\"c\":[1,");
	CHECK_INT(p.line[3], 5);
	CHECK_STR(p.text[3], "{\"d\":4}");
	/* no final newline */
	split("{\"a\":1}\n{\"b\":2}", &p, 1024);
	CHECK_INT(p.n, 2);
	CHECK_STR(p.text[1], "{\"b\":2}");
	CHECK_INT(p.line[1], 2);
	/* nothing at all */
	split("\n \n\t\n", &p, 1024);
	CHECK_INT(p.n, 0);
}

static void test_split_pretty(void)
{
	struct pieces p;

	/* objects over several lines, brackets inside strings, two in a row */
	split("\n{\n  \"a\": \"x}\",\n  \"b\": [1,\n 2]\n}\n\n{\"c\":\n 3} \n{\"d\":\n4}", &p, 1024);
	CHECK_INT(p.n, 3);
	CHECK_INT(p.line[0], 2);
	CHECK_STR(p.text[0], "{\n  \"a\": \"x}\",\n  \"b\": [1,\n 2]\n}");
	CHECK_INT(p.line[1], 8);
	CHECK_STR(p.text[1], "{\"c\":\n 3}");
	CHECK_INT(p.line[2], 10);
	CHECK_STR(p.text[2], "{\"d\":\n4}");
	/* a line that is no object is handed over alone, with its line */
	split("{\n\"a\": 1\n}\ngarbage here\n{\n\"b\": 2\n}\n", &p, 1024);
	CHECK_INT(p.n, 3);
	CHECK_STR(p.text[1], "garbage here");
	CHECK_INT(p.line[1], 4);
	CHECK_INT(p.line[2], 5);
	/* a first line cut short does not swallow the lines after it */
	split("{\"v\": 1, \"stream_id\": \"x\"\n{\"a\":1}\n{\"b\":2}\n", &p, 1024);
	CHECK_INT(p.n, 3);
	CHECK_STR(p.text[0], "{\"v\": 1, \"stream_id\": \"x\"\n");
	CHECK_INT(p.line[1], 2);
	CHECK_STR(p.text[1], "{\"a\":1}");
	CHECK_STR(p.text[2], "{\"b\":2}");
	/* nor does one cut inside a string */
	split("{\"v\": 1, \"host\": \"we\n{\"a\":1}\n", &p, 1024);
	CHECK_INT(p.n, 2);
	CHECK_STR(p.text[1], "{\"a\":1}");
	CHECK_INT(p.line[1], 2);
	/* an unterminated object at the end */
	split("{\n\"a\": [1,\n", &p, 1024);
	CHECK_INT(p.n, 1);
	CHECK_STR(p.text[0], "{\n\"a\": [1,\n");
}

static void test_split_limit(void)
{
	struct pieces p;
	struct ship_splitter *sp;

	memset(&p, 0, sizeof(p));
	sp = ship_splitter_open(16, collect_piece, &p);
	CHECK_INT(ship_splitter_feed(sp, "{\"a\":1}\n\n{\"bb\":\"0123456789abcdef\"}\n", 36), -1);
	CHECK_STR(ship_splitter_error(sp), "line 3: stream text longer than 16 bytes");
	CHECK_INT(p.n, 1);
	ship_splitter_free(sp);
}

/* ---- shipping against the test server ---- */

static void test_file_reading(void)
{
	char *tmp = make_tmpdir(), path[300], spool[300], ida[37], idb[37], idc[37];
	struct buf text = BUF_INIT(0);
	struct reports r;
	struct shipper *sh;

	snprintf(path, sizeof(path), "%s/streams.ndjson", tmp);
	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	new_id(ida);
	new_id(idb);
	new_id(idc);
	stream_json(&text, ida, "nginx", 2);
	buf_puts(&text, "\n");
	/* line 2: an event pointing at a stack that is not there */
	buf_printf(&text, "{\"v\":1,\"stream_id\":\"%s\",\"host\":\"h\",\"app\":\"a\","
		   "\"symptom\":{\"kind\":\"manual\",\"tid\":1,\"start_ns\":0,\"end_ns\":1},"
		   "\"frames\":[\"m!f\"],\"stacks\":[[0]],\"events\":[{\"kind\":\"run\",\"tid\":1,"
		   "\"ts_ns\":0,\"dur_ns\":1,\"stack\":3}]}\n", idb);
	buf_puts(&text, "not json at all\n");
	stream_json(&text, idc, "nginx", 2);
	buf_puts(&text, "\n");
	write_text(path, text.data);

	sh = open_shipper(spool, &r, 16, 1);
	if (!sh)
		goto out;
	CHECK_INT(shipper_add_file(sh, path), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 1);
	CHECK_INT(srv.seen[0].lines, 2);
	CHECK_INT(shipper_counters(sh)->accepted, 2);
	CHECK_INT(shipper_counters(sh)->invalid, 2);
	CHECK_INT(r.n, 2);
	if (r.n == 2) {
		char want[320];

		CHECK_INT(r.ev[0], SHIP_EV_INVALID);
		snprintf(want, sizeof(want), "%s:2", path);
		CHECK_STR(r.origin[0], want);
		CHECK_STR(r.id[0], idb);
		CHECK_STR(r.msg[0], "events[0].stack: index 3 out of range (1 stacks)");
		snprintf(want, sizeof(want), "%s:3", path);
		CHECK_STR(r.origin[1], want);
		CHECK_STR(r.id[1], "");
		CHECK(strncmp(r.msg[1], "not JSON", 8) == 0);
	}
	/* the same streams pretty-printed, one object per file and two in one */
	buf_reset(&text);
	buf_printf(&text, pretty, ida);
	write_text(path, text.data);
	CHECK_INT(shipper_add_file(sh, path), SHIP_OK);
	buf_printf(&text, pretty, idc);
	write_text(path, text.data);
	CHECK_INT(shipper_add_file(sh, path), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 2);
	CHECK_INT(srv.seen[1].lines, 3);
	CHECK_INT(shipper_counters(sh)->accepted, 5);
	CHECK_INT(shipper_counters(sh)->invalid, 2);
	CHECK_INT(r.n, 2);
	/* a file that is not there */
	CHECK_INT(shipper_add_file(sh, "/nonexistent/streams.json"), SHIP_EINPUT);
	CHECK_STR(shipper_error(sh), "/nonexistent/streams.json: No such file or directory");
	shipper_free(sh);
out:
	buf_release(&text);
	rm_tree(tmp);
}

static void test_request_format(void)
{
	struct reports r;
	struct shipper *sh = open_shipper(NULL, &r, 16, 1);
	char id[37];

	if (!sh)
		return;
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);  /* nothing queued: no request */
	CHECK_INT(srv.nseen, 1);
	CHECK_STR(srv.seen[0].ctype, "application/x-ndjson");
	CHECK_STR(srv.seen[0].enc, "zstd");
	CHECK_STR(srv.seen[0].auth, "Bearer tok-123");
	CHECK_INT(shipper_counters(sh)->requests, 1);
	shipper_free(sh);
}

static void test_batch_by_count(void)
{
	struct reports r;
	struct shipper *sh = open_shipper(NULL, &r, 2, 1);
	char id[37];

	if (!sh)
		return;
	for (int i = 0; i < 5; i++)
		CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(srv.nseen, 2);  /* two full batches went as soon as they filled */
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 3);
	CHECK_INT(srv.seen[0].lines, 2);
	CHECK_INT(srv.seen[1].lines, 2);
	CHECK_INT(srv.seen[2].lines, 1);
	CHECK_INT(shipper_counters(sh)->accepted, 5);
	CHECK_INT(r.n, 0);
	shipper_free(sh);
}

static void test_batch_by_size(void)
{
	struct ship_opts o;
	struct reports r;
	struct buf b = BUF_INIT(0);
	struct shipper *sh;
	char err[256], id[37];
	size_t line;

	new_id(id);
	stream_json(&b, id, "nginx", 2);
	line = b.len + 1;
	ship_opts_init(&o);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", srv.port);
	o.url = url;
	o.batch_count = 100;
	o.batch_bytes = 2 * line + 1;  /* two streams fit, three do not */
	o.max_attempts = 1;
	o.report = record;
	o.report_ctx = &r;
	memset(&r, 0, sizeof(r));
	sh = shipper_open(&o, err, sizeof(err));
	CHECK(sh != NULL);
	if (!sh)
		goto out;
	srv_reset();
	for (int i = 0; i < 5; i++)
		CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	/* a stream larger than a whole batch goes alone */
	buf_reset(&b);
	new_id(id);
	stream_json(&b, id, "nginx", 40);
	CHECK_INT(shipper_add_json(sh, b.data, b.len, "big"), SHIP_OK);
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 5);
	CHECK_INT(srv.seen[0].lines, 2);
	CHECK_INT(srv.seen[0].bytes, 2 * line);
	CHECK_INT(srv.seen[1].lines, 2);
	CHECK_INT(srv.seen[2].lines, 1);
	CHECK_INT(srv.seen[3].lines, 1);
	CHECK_INT(srv.seen[3].bytes, b.len + 1);
	CHECK_INT(srv.seen[4].lines, 1);
	CHECK_INT(shipper_counters(sh)->accepted, 7);
	shipper_free(sh);
out:
	buf_release(&b);
}

static void test_retry_then_deliver(void)
{
	struct reports r;
	struct shipper *sh = open_shipper(NULL, &r, 16, 6);
	char id[37];
	int64_t t0;

	if (!sh)
		return;
	srv_script(503, 0);
	srv_script(500, -1);
	srv_script(429, 1);
	t0 = util_now_mono_ns();
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 4);
	CHECK_INT(srv.seen[3].status, 200);
	CHECK_INT(shipper_counters(sh)->accepted, 1);
	CHECK_INT(shipper_counters(sh)->requests, 4);
	CHECK_INT(shipper_counters(sh)->spooled, 0);
	CHECK(!shipper_stopped(sh));
	/* the 429 asked for a second; backoff adds jitter of at most 800 ms in all */
	CHECK(util_now_mono_ns() - t0 >= 1000000000LL);
	CHECK(util_now_mono_ns() - t0 < 2500000000LL);
	CHECK_INT(r.n, 0);
	shipper_free(sh);
}

static void test_timeout_retried(void)
{
	struct ship_opts o;
	struct reports r;
	struct shipper *sh;
	char err[256], id[37];

	ship_opts_init(&o);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", srv.port);
	o.url = url;
	o.timeout_s = 1;
	o.max_attempts = 2;
	o.report = record;
	o.report_ctx = &r;
	memset(&r, 0, sizeof(r));
	sh = shipper_open(&o, err, sizeof(err));
	CHECK(sh != NULL);
	if (!sh)
		return;
	srv_reset();
	srv.hang_ms = 1500;
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(shipper_counters(sh)->requests, 2);
	CHECK_INT(shipper_counters(sh)->accepted, 1);
	shipper_free(sh);
}

static void test_give_up_spools(void)
{
	char *tmp = make_tmpdir(), spool[300], id1[37], id2[37], path[400];
	struct reports r;
	struct shipper *sh;
	char *data;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	sh = open_shipper(spool, &r, 16, 3);
	if (!sh)
		goto out;
	srv.always = 503;
	CHECK_INT(add_stream(sh, "nginx", id1), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 3);
	CHECK(shipper_stopped(sh));
	CHECK_STR(shipper_error(sh), "gave up after 3 attempts: server answered 503: test server says 503");
	CHECK_INT(shipper_counters(sh)->spooled, 1);
	snprintf(path, sizeof(path), "%s/%s.json", spool, id1);
	data = slurp(path);
	CHECK(data && strstr(data, id1) && data[strlen(data) - 1] == '\n');
	free(data);
	/* the server is left alone from now on: straight to the spool */
	CHECK_INT(add_stream(sh, "nginx", id2), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 3);
	CHECK_INT(shipper_counters(sh)->spooled, 2);
	CHECK_INT(count_files(spool, ".json"), 2);
	CHECK_INT(r.n, 2);
	CHECK_INT(r.ev[0], SHIP_EV_SPOOLED);
	CHECK_STR(r.id[1], id2);
	shipper_free(sh);
out:
	rm_tree(tmp);
}

static void test_no_retry_on_4xx(void)
{
	char *tmp = make_tmpdir(), spool[300], id[37];
	struct reports r;
	struct shipper *sh;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	sh = open_shipper(spool, &r, 16, 6);
	if (!sh)
		goto out;
	srv_script(400, -1);
	srv_script(415, -1);
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 2);
	CHECK_INT(shipper_counters(sh)->spooled, 2);
	CHECK(!shipper_stopped(sh));
	CHECK_INT(r.n, 2);
	CHECK_STR(r.msg[0], "server answered 400: test server says 400");
	CHECK_STR(r.msg[1], "server answered 415: test server says 415");
	/* a later batch is sent normally */
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 3);
	CHECK_INT(shipper_counters(sh)->accepted, 1);
	shipper_free(sh);
out:
	rm_tree(tmp);
}

static void test_unauthorized_stops(void)
{
	char *tmp = make_tmpdir(), spool[300], id[37];
	struct reports r;
	struct shipper *sh;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	sh = open_shipper(spool, &r, 2, 6);
	if (!sh)
		goto out;
	srv.always = 401;
	for (int i = 0; i < 5; i++)
		CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 1);
	CHECK(shipper_stopped(sh));
	CHECK_STR(shipper_error(sh), "stopped: server answered 401: test server says 401");
	CHECK_INT(shipper_counters(sh)->spooled, 5);
	CHECK_INT(count_files(spool, ".json"), 5);
	shipper_free(sh);
out:
	rm_tree(tmp);
}

static void test_413_splits(void)
{
	char *tmp = make_tmpdir(), spool[300], ids[6][37];
	struct reports r;
	struct shipper *sh;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	sh = open_shipper(spool, &r, 6, 2);
	if (!sh)
		goto out;
	srv.max_lines = 2;
	/* [huge a b c d e] -> 413; [huge a b] -> 413; [huge] -> 413 (rejected);
	 * [a b] ok; [c d e] -> 413; [c] ok; [d e] ok */
	CHECK_INT(add_stream(sh, "huge", ids[0]), SHIP_OK);
	for (int i = 1; i < 5; i++)
		CHECK_INT(add_stream(sh, "nginx", ids[i]), SHIP_OK);
	CHECK_INT(add_stream(sh, "nginx", ids[5]), SHIP_OK);  /* the sixth fills the batch */
	CHECK_INT(srv.nseen, 7);
	CHECK_INT(srv.seen[0].lines, 6);
	CHECK_INT(srv.seen[1].lines, 3);
	CHECK_INT(srv.seen[2].lines, 1);
	CHECK_INT(srv.seen[2].status, 413);
	CHECK_INT(srv.seen[3].lines, 2);
	CHECK_INT(srv.seen[4].lines, 3);
	CHECK_INT(srv.seen[5].lines, 1);
	CHECK_INT(srv.seen[6].lines, 2);
	CHECK_INT(shipper_counters(sh)->accepted, 5);
	CHECK_INT(shipper_counters(sh)->rejected, 1);
	CHECK_INT(shipper_counters(sh)->spooled, 0);
	CHECK_INT(r.n, 1);
	CHECK_INT(r.ev[0], SHIP_EV_REJECTED);
	CHECK_STR(r.id[0], ids[0]);
	CHECK_STR(r.msg[0], "server answered 413: test server says 413");
	CHECK_INT(count_files(spool, ".json"), -1);  /* never needed */
	shipper_free(sh);
out:
	rm_tree(tmp);
}

static void test_rejected_reported(void)
{
	char *tmp = make_tmpdir(), spool[300], id[37], bad[37];
	struct reports r;
	struct shipper *sh;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	sh = open_shipper(spool, &r, 16, 6);
	if (!sh)
		goto out;
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(add_stream(sh, "bad", bad), SHIP_OK);
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 1);
	CHECK_INT(shipper_counters(sh)->accepted, 2);
	CHECK_INT(shipper_counters(sh)->rejected, 1);
	CHECK_INT(shipper_counters(sh)->spooled, 0);
	CHECK_INT(r.n, 1);
	CHECK_INT(r.ev[0], SHIP_EV_REJECTED);
	CHECK_STR(r.id[0], bad);
	CHECK_STR(r.origin[0], "test");
	CHECK_STR(r.msg[0], "app: refused by the test server");
	CHECK(access(spool, F_OK) != 0);
	shipper_free(sh);
out:
	rm_tree(tmp);
}

static void test_answer_must_add_up(void)
{
	char *tmp = make_tmpdir(), spool[300], id[37];
	struct reports r;
	struct shipper *sh;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	sh = open_shipper(spool, &r, 16, 6);
	if (!sh)
		goto out;
	srv.answer = "{\"accepted\":1,\"duplicates\":0,\"rejected\":[]}";
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 1);
	CHECK_INT(shipper_counters(sh)->spooled, 2);
	CHECK_STR(r.msg[0], "server's answer does not add up: 1 accepted + 0 duplicates + 0 rejected for 2 streams");
	shipper_free(sh);
out:
	rm_tree(tmp);
}

static void test_drain(void)
{
	char *tmp = make_tmpdir(), spool[300], err[256], good[3][37], bad[37], broken[37], path[400];
	struct buf b = BUF_INIT(0);
	struct reports r;
	struct shipper *sh;
	struct spool *sp;
	char *data;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	sp = spool_open(spool, 1 << 20, 1, err, sizeof(err));
	CHECK(sp != NULL);
	if (!sp)
		goto out;
	for (int i = 0; i < 3; i++) {
		new_id(good[i]);
		buf_reset(&b);
		stream_json(&b, good[i], "nginx", 2);
		CHECK_INT(spool_put(sp, good[i], b.data, b.len), SPOOL_OK);
	}
	new_id(bad);
	buf_reset(&b);
	stream_json(&b, bad, "bad", 2);
	CHECK_INT(spool_put(sp, bad, b.data, b.len), SPOOL_OK);
	new_id(broken);
	CHECK_INT(spool_put(sp, broken, "{\"v\":1,", 7), SPOOL_OK);
	spool_free(sp);

	/* the server down: everything stays */
	sh = open_shipper(spool, &r, 16, 2);
	if (!sh)
		goto out;
	srv.always = 503;
	CHECK_INT(shipper_drain(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 2);
	CHECK(shipper_stopped(sh));
	CHECK_INT(count_files(spool, ".json"), 4);
	CHECK_INT(shipper_counters(sh)->spooled, 4);
	CHECK_INT(shipper_counters(sh)->invalid, 1);
	shipper_free(sh);

	/* the server up: delivered ones go, the refused one moves aside */
	sh = open_shipper(spool, &r, 2, 2);
	if (!sh)
		goto out;
	CHECK_INT(shipper_drain(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 2);
	CHECK_INT(shipper_counters(sh)->accepted, 3);
	CHECK_INT(shipper_counters(sh)->rejected, 1);
	CHECK_INT(shipper_counters(sh)->spooled, 0);
	CHECK_INT(count_files(spool, ".json"), 0);
	snprintf(path, sizeof(path), "%s/rejected/%s.error", spool, bad);
	data = slurp(path);
	CHECK_STR(data, "app: refused by the test server\n");
	free(data);
	snprintf(path, sizeof(path), "%s/rejected/%s.error", spool, broken);
	data = slurp(path);
	CHECK(data && strncmp(data, "not JSON", 8) == 0);
	free(data);
	snprintf(path, sizeof(path), "%s/rejected", spool);
	CHECK_INT(count_files(path, ".json"), 2);
	/* nothing left: a second drain sends nothing */
	CHECK_INT(shipper_drain(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 2);
	shipper_free(sh);

	/* a spool that was never made is empty, not an error */
	snprintf(path, sizeof(path), "%s/never", tmp);
	sh = open_shipper(path, &r, 2, 2);
	CHECK(sh != NULL);
	CHECK_INT(shipper_drain(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 0);
	shipper_free(sh);
out:
	buf_release(&b);
	rm_tree(tmp);
}

static void test_spool_full_is_lost(void)
{
	struct ship_opts o;
	char *tmp = make_tmpdir(), spool[300], err[256], id[37];
	struct reports r;
	struct shipper *sh;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	ship_opts_init(&o);
	o.url = "http://127.0.0.1:9";   /* nothing listens on the discard port */
	o.spool_dir = spool;
	o.spool_max = 300;              /* room for one stream */
	o.max_attempts = 1;
	o.report = record;
	o.report_ctx = &r;
	memset(&r, 0, sizeof(r));
	sh = shipper_open(&o, err, sizeof(err));
	CHECK(sh != NULL);
	if (!sh)
		goto out;
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(shipper_counters(sh)->spooled, 1);
	CHECK_INT(shipper_counters(sh)->lost, 1);
	CHECK_INT(r.n, 2);
	CHECK_INT(r.ev[1], SHIP_EV_LOST);
	CHECK(strstr(r.msg[1], "full") != NULL);
	CHECK(strstr(r.msg[1], "Couldn't connect") != NULL ||
	      strstr(r.msg[1], "Failed to connect") != NULL);
	shipper_free(sh);
out:
	rm_tree(tmp);
}

static void test_cancel(void)
{
	char *tmp = make_tmpdir(), spool[300], err[256], id[37];
	static volatile sig_atomic_t stop;
	struct ship_opts o;
	struct reports r;
	struct shipper *sh;

	snprintf(spool, sizeof(spool), "%s/spool", tmp);
	ship_opts_init(&o);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", srv.port);
	o.url = url;
	o.spool_dir = spool;
	o.cancel = &stop;
	o.report = record;
	o.report_ctx = &r;
	memset(&r, 0, sizeof(r));
	stop = 0;
	sh = shipper_open(&o, err, sizeof(err));
	CHECK(sh != NULL);
	if (!sh)
		goto out;
	srv_reset();
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 1);
	/* cancelled: nothing more is sent, everything is spooled */
	stop = 1;
	CHECK_INT(add_stream(sh, "nginx", id), SHIP_OK);
	CHECK_INT(shipper_flush(sh), SHIP_OK);
	CHECK_INT(srv.nseen, 1);
	CHECK(shipper_stopped(sh));
	CHECK_STR(shipper_error(sh), "interrupted");
	CHECK_INT(shipper_counters(sh)->spooled, 1);
	CHECK_INT(count_files(spool, ".json"), 1);
	shipper_free(sh);
out:
	rm_tree(tmp);
}

static void test_open_checks(void)
{
	struct ship_opts o;
	char err[256];

	ship_opts_init(&o);
	o.url = "ftp://x";
	CHECK(shipper_open(&o, err, sizeof(err)) == NULL);
	CHECK_STR(err, "url 'ftp://x': must start with http:// or https://");
	o.url = "http://x";
	o.token = "abc\r\nX-Evil: 1";
	CHECK(shipper_open(&o, err, sizeof(err)) == NULL);
	CHECK_STR(err, "token: empty, or holds spaces or control characters");
	o.token = NULL;
	o.max_attempts = 0;
	CHECK(shipper_open(&o, err, sizeof(err)) == NULL);
	shipper_free(NULL);
}

int main(void)
{
	log_init("test", LOG_WARN);  /* the retries are expected here */
	RUN(test_backoff_bounds);
	RUN(test_backoff_growth);
	RUN(test_backoff_retry_after);
	RUN(test_retry_after_parse);
	RUN(test_spool_put_list_remove);
	RUN(test_spool_atomic);
	RUN(test_spool_limit);
	RUN(test_spool_reject);
	RUN(test_split_ndjson);
	RUN(test_split_pretty);
	RUN(test_split_limit);
	RUN(test_open_checks);
	if (srv_start() < 0) {
		fprintf(stderr, "cannot start the test server\n");
		return 1;
	}
	RUN(test_file_reading);
	RUN(test_request_format);
	RUN(test_batch_by_count);
	RUN(test_batch_by_size);
	RUN(test_retry_then_deliver);
	RUN(test_timeout_retried);
	RUN(test_give_up_spools);
	RUN(test_no_retry_on_4xx);
	RUN(test_unauthorized_stops);
	RUN(test_413_splits);
	RUN(test_rejected_reported);
	RUN(test_answer_must_add_up);
	RUN(test_drain);
	RUN(test_spool_full_is_lost);
	RUN(test_cancel);
	MHD_stop_daemon(srv.d);
	return CHECK_DONE();
}
