/* spool: atomic one-file-per-stream queue on disk, bounded in size (see spool.h). */
#include "agent/spool.h"
#include "common/util.h"
#include "common/vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_PREFIX ".tmp."
#define REJECTED "rejected"
#define STALE_TMP_NS ((int64_t)3600 * 1000000000)

struct spool {
	char *dir;
	int dfd;              /* the spool directory, for the *at() calls */
	uint64_t max;
	uint64_t used;
	char err[512];
};

static int spool_fail(struct spool *sp, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int spool_fail(struct spool *sp, int code, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(sp->err, sizeof(sp->err), "spool %s: ", sp->dir);

	if (n < 0 || (size_t)n >= sizeof(sp->err))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(sp->err + n, sizeof(sp->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}

/* mkdir -p: every missing component of path, mode 0700. */
static int mkdirs(const char *path)
{
	char tmp[4096];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(tmp, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (tmp[i] != '/' && tmp[i] != '\0')
			continue;
		tmp[i] = '\0';
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
			return -1;
		tmp[i] = i < n ? '/' : '\0';
	}
	return 0;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Adds the sizes of the regular files in fd's directory to *used; with
 * `clean`, removes temporary files older than an hour (a crashed writer's). */
static int count_dir(int fd, int clean, uint64_t *used)
{
	int64_t now = util_now_real_ns();
	DIR *d = fdopendir(fd);
	struct dirent *de;

	if (!d) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (clean && strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 &&
		    now - mtime_ns(&st) > STALE_TMP_NS && unlinkat(dirfd(d), de->d_name, 0) == 0)
			continue;
		*used += (uint64_t)st.st_size;
	}
	closedir(d);
	return 0;
}

struct spool *spool_open(const char *dir, uint64_t max_bytes, int create, char *err,
			 size_t errlen)
{
	struct spool *sp = calloc(1, sizeof(*sp));
	int fd;

	if (!sp || !(sp->dir = strdup(dir))) {
		snprintf(err, errlen, "spool %s: out of memory", dir);
		goto fail_free;
	}
	sp->max = max_bytes;
	sp->dfd = -1;
	if (create && mkdirs(dir) < 0) {
		snprintf(err, errlen, "spool %s: cannot create the directory: %s", dir, strerror(errno));
		goto fail_free;
	}
	sp->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sp->dfd < 0) {
		snprintf(err, errlen, "spool %s: %s", dir, strerror(errno));
		goto fail_free;
	}
	fd = openat(sp->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || count_dir(fd, 1, &sp->used) < 0) {
		snprintf(err, errlen, "spool %s: cannot list: %s", dir, strerror(errno));
		goto fail_free;
	}
	fd = openat(sp->dfd, REJECTED, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		count_dir(fd, 1, &sp->used);
	return sp;
fail_free:
	spool_free(sp);
	return NULL;
}

void spool_free(struct spool *sp)
{
	if (!sp)
		return;
	if (sp->dfd >= 0)
		close(sp->dfd);
	free(sp->dir);
	free(sp);
}

const char *spool_error(const struct spool *sp)
{
	return sp->err;
}

uint64_t spool_used(const struct spool *sp)
{
	return sp->used;
}

/* A stream id usable as a file name: exactly the canonical lower-case UUID. */
static int valid_id(const char *id)
{
	char canon[37];
	size_t n = strlen(id);

	return util_uuid_canon(id, n, canon) && memcmp(canon, id, 37) == 0;
}

static uint64_t file_size_at(int dfd, const char *name)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return 0;
	return (uint64_t)st.st_size;
}

/* Writes a then b into name (relative to dirfd) through a temporary file,
 * fsync and rename, then fsyncs the directory so the rename itself is durable. */
static int write_atomic(struct spool *sp, int dirfd, const char *name, const char *a, size_t alen,
			const char *b, size_t blen)
{
	char tmp[128];
	unsigned char r[4];
	char rhex[9];
	int fd, saved;

	if (util_random(r, sizeof(r)) < 0)
		memset(r, 0, sizeof(r));
	util_hex(r, sizeof(r), rhex);
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s.%ld.%s", name, (long)getpid(), rhex);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return spool_fail(sp, SPOOL_EIO, "cannot create %s: %s", tmp, strerror(errno));
	if (util_write_all(fd, a, alen) < 0 || util_write_all(fd, b, blen) < 0 || fsync(fd) < 0)
		goto fail_unlink;
	if (close(fd) < 0) {
		fd = -1;
		goto fail_unlink;
	}
	fd = -1;
	if (renameat(dirfd, tmp, dirfd, name) < 0)
		goto fail_unlink;
	fsync(dirfd);
	return 0;
fail_unlink:
	saved = errno;
	if (fd >= 0)
		close(fd);
	unlinkat(dirfd, tmp, 0);
	return spool_fail(sp, SPOOL_EIO, "cannot write %s: %s", name, strerror(saved));
}

int spool_put(struct spool *sp, const char *id, const char *json, size_t len)
{
	char name[48];
	uint64_t old, need = (uint64_t)len + 1;
	int rc;

	if (!valid_id(id))
		return spool_fail(sp, SPOOL_EINVAL, "'%.40s' is not a stream id", id);
	snprintf(name, sizeof(name), "%s.json", id);
	old = file_size_at(sp->dfd, name);
	if (sp->used - old + need > sp->max)
		return spool_fail(sp, SPOOL_EFULL,
				  "full: %llu of %llu bytes used, stream %s needs %llu more; "
				  "drain it or raise --spool-max",
				  (unsigned long long)sp->used, (unsigned long long)sp->max, id,
				  (unsigned long long)need);
	rc = write_atomic(sp, sp->dfd, name, json, len, "\n", 1);
	if (rc < 0)
		return rc;
	sp->used = sp->used - old + need;
	return 0;
}

static int entry_cmp(const void *pa, const void *pb)
{
	const struct spool_entry *a = pa, *b = pb;

	if (a->mtime_ns != b->mtime_ns)
		return a->mtime_ns < b->mtime_ns ? -1 : 1;
	return strcmp(a->id, b->id);
}

int spool_list(struct spool *sp, struct spool_entry **out, size_t *n)
{
	struct spool_entry *v = NULL;
	size_t len = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd;

	*out = NULL;
	*n = 0;
	fd = openat(sp->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return spool_fail(sp, SPOOL_EIO, "cannot list: %s", strerror(errno));
	}
	while ((de = readdir(d))) {
		size_t nl = strlen(de->d_name);
		struct stat st;

		if (nl != 41 || strcmp(de->d_name + 36, ".json") != 0)
			continue;
		if (vec_reserve(&v, &cap, len + 1, sizeof(*v)) < 0) {
			closedir(d);
			free(v);
			return spool_fail(sp, SPOOL_EIO, "out of memory listing");
		}
		memcpy(v[len].id, de->d_name, 36);
		v[len].id[36] = '\0';
		if (!valid_id(v[len].id) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		v[len].size = (uint64_t)st.st_size;
		v[len].mtime_ns = mtime_ns(&st);
		len++;
	}
	closedir(d);
	if (len)
		qsort(v, len, sizeof(*v), entry_cmp);
	*out = v;
	*n = len;
	return 0;
}

size_t spool_count(const char *dir, uint64_t max_bytes)
{
	struct spool *sp;
	struct spool_entry *e = NULL;
	size_t n = 0;
	char err[256];

	if (!dir || !dir[0] || !(sp = spool_open(dir, max_bytes, 0, err, sizeof(err))))
		return 0;
	if (spool_list(sp, &e, &n) < 0)
		n = 0;
	free(e);
	spool_free(sp);
	return n;
}

int spool_read(struct spool *sp, const char *id, size_t max, char **data, size_t *len)
{
	char path[4200];

	if (!valid_id(id))
		return spool_fail(sp, SPOOL_EINVAL, "'%.40s' is not a stream id", id);
	snprintf(path, sizeof(path), "%s/%s.json", sp->dir, id);
	if (util_read_file(path, max, data, len) < 0)
		return spool_fail(sp, SPOOL_EIO, "cannot read %s.json: %s", id, strerror(errno));
	return 0;
}

int spool_remove(struct spool *sp, const char *id)
{
	char name[48];
	uint64_t old;

	if (!valid_id(id))
		return spool_fail(sp, SPOOL_EINVAL, "'%.40s' is not a stream id", id);
	snprintf(name, sizeof(name), "%s.json", id);
	old = file_size_at(sp->dfd, name);
	if (unlinkat(sp->dfd, name, 0) < 0 && errno != ENOENT)
		return spool_fail(sp, SPOOL_EIO, "cannot remove %s: %s", name, strerror(errno));
	sp->used -= old < sp->used ? old : sp->used;
	return 0;
}

int spool_reject(struct spool *sp, const char *id, const char *why)
{
	char name[48], ename[48];
	int rfd, rc;
	uint64_t old;

	if (!valid_id(id))
		return spool_fail(sp, SPOOL_EINVAL, "'%.40s' is not a stream id", id);
	if (mkdirat(sp->dfd, REJECTED, 0700) < 0 && errno != EEXIST)
		return spool_fail(sp, SPOOL_EIO, "cannot create " REJECTED "/: %s", strerror(errno));
	rfd = openat(sp->dfd, REJECTED, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return spool_fail(sp, SPOOL_EIO, "cannot open " REJECTED "/: %s", strerror(errno));
	snprintf(name, sizeof(name), "%s.json", id);
	snprintf(ename, sizeof(ename), "%s.error", id);
	/* the .error first: a crash in between leaves a note beside a stream still queued */
	old = file_size_at(rfd, ename);
	rc = write_atomic(sp, rfd, ename, why, strlen(why), "\n", 1);
	if (rc < 0)
		goto out_close;
	sp->used = sp->used - old + strlen(why) + 1;
	old = file_size_at(rfd, name);
	if (renameat(sp->dfd, name, rfd, name) < 0) {
		rc = spool_fail(sp, SPOOL_EIO, "cannot move %s to " REJECTED "/: %s", name,
				strerror(errno));
		goto out_close;
	}
	sp->used -= old < sp->used ? old : sp->used; /* a replaced older copy */
	fsync(rfd);
	fsync(sp->dfd);
out_close:
	close(rfd);
	return rc;
}
