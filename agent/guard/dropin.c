/* dropin: the systemd drop-ins that guard a service (see dropin.h). */
#include "agent/guard/dropin.h"
#include "common/buf.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNIT_DIR "/etc/systemd/system"

int dropin_unit_name(const char *unit, char *out, size_t cap, char *err, size_t errlen)
{
	size_t n = strlen(unit);
	const char *dot = strrchr(unit, '.');

	if (n == 0 || n > 200) {
		snprintf(err, errlen, "UNIT: 1 to 200 characters");
		return -1;
	}
	/* systemd's unit name characters; no path, no template without an instance */
	for (const char *p = unit; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      strchr(":-_.\\@", *p))) {
			snprintf(err, errlen, "UNIT '%.64s': not a unit name (letters, digits and :-_.\\@)", unit);
			return -1;
		}
	if (unit[0] == '.' || (strchr(unit, '@') && unit[n - 1] == '@')) {
		snprintf(err, errlen, "UNIT '%.64s': not a unit name", unit);
		return -1;
	}
	if (dot && strcmp(dot, ".service") != 0) {
		snprintf(err, errlen, "UNIT '%.64s': only services can be guarded", unit);
		return -1;
	}
	if ((size_t)snprintf(out, cap, "%s%s", unit, dot ? "" : ".service") >= cap) {
		snprintf(err, errlen, "UNIT: too long");
		return -1;
	}
	return 0;
}

/* value as one word of a systemd assignment: quoted, \ and " escaped, % doubled (specifiers) */
static void put_quoted(struct buf *b, const char *key, const char *value)
{
	buf_putc(b, '"');
	buf_puts(b, key);
	buf_putc(b, '=');
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			buf_putc(b, '\\');
		if (*p == '%')
			buf_putc(b, '%');
		buf_putc(b, *p);
	}
	buf_putc(b, '"');
}

static int no_newline(const char *what, const char *s, char *err, size_t errlen)
{
	if (s && strpbrk(s, "\n\r")) {
		snprintf(err, errlen, "%s: no line breaks", what);
		return -1;
	}
	return 0;
}

static int make_dirs(const char *path, char *err, size_t errlen)
{
	char tmp[4096];

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s", path) >= sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
				snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
				return -1;
			}
			*p = '/';
		}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	return 0;
}

int dropin_write(const struct dropin_spec *s, char *path, size_t pathcap, char *err, size_t errlen)
{
	char unit[256], dir[4096], tmp[4200];
	struct buf b = BUF_INIT(64 * 1024);
	int fd, rc = -1;

	if (dropin_unit_name(s->unit, unit, sizeof(unit), err, errlen) < 0 ||
	    no_newline("--app", s->app, err, errlen) < 0 || no_newline("--label", s->labels, err, errlen) < 0 ||
	    no_newline("library path", s->lib, err, errlen) < 0)
		return -1;
	if ((size_t)snprintf(dir, sizeof(dir), "%s" UNIT_DIR "/%s.d", s->root, unit) >= sizeof(dir) ||
	    (size_t)snprintf(path, pathcap, "%s/" DROPIN_NAME, dir) >= pathcap) {
		snprintf(err, errlen, "path too long");
		return -1;
	}
	buf_printf(&b, "# Written by sm-guard enable %s; `sm-guard disable %s` removes it. Restart the\n"
		       "# service for a change to take effect. docs/guard.md, \"Under systemd\".\n"
		       "[Service]\n", unit, unit);
	if (s->conf && *s->conf)
		buf_printf(&b, "EnvironmentFile=-%s\n", s->conf);
	buf_puts(&b, "Environment=");
	put_quoted(&b, "LD_PRELOAD", s->lib);
	buf_putc(&b, '\n');
	if (s->app && *s->app) {
		buf_puts(&b, "Environment=");
		put_quoted(&b, "SM_GUARD_APP", s->app);
		buf_putc(&b, '\n');
	}
	if (s->labels && *s->labels) {
		buf_puts(&b, "Environment=");
		put_quoted(&b, "SM_GUARD_LABELS", s->labels);
		buf_putc(&b, '\n');
	}
	/* hardened units (Debian's redis: ProtectSystem=strict) would make the spool, the profiles and
	 * the host's collector's directory read-only for the agent; '-': no error where they do not exist */
	buf_puts(&b, "ReadWritePaths=-/var/spool/stackmine -/var/lib/stackmine/profiles -/run/stackmine/guard\n");
	/* the service's user reads the token file (mode 0640, group stackmine), which the package made */
	if (s->group && *s->group)
		buf_printf(&b, "SupplementaryGroups=%s\n", s->group);
	if (buf_error(&b) != BUF_OK) {
		snprintf(err, errlen, "drop-in: %s", buf_error_text(&b));
		goto out;
	}
	if (make_dirs(dir, err, errlen) < 0)
		goto out;
	/* atomically: a reload never reads half a file */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || util_write_all(fd, b.data, b.len) < 0 || fsync(fd) < 0 || close(fd) < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		if (fd >= 0)
			unlink(tmp);
		goto out;
	}
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	buf_release(&b);
	return rc;
}

int dropin_remove(const char *root, const char *unit, char *err, size_t errlen)
{
	char name[256], dir[4096], path[4200];

	if (dropin_unit_name(unit, name, sizeof(name), err, errlen) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s" UNIT_DIR "/%s.d", root, name);
	snprintf(path, sizeof(path), "%s/" DROPIN_NAME, dir);
	if (unlink(path) < 0) {
		if (errno == ENOENT)
			return 1;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	rmdir(dir);   /* only when empty: other drop-ins stay */
	return 0;
}

/* The value of "KEY=..." in a drop-in's Environment= line, unquoted, into out ("" when absent). */
static void env_value(const char *text, const char *key, char *out, size_t cap)
{
	char want[64];
	const char *p;
	size_t n = 0;

	snprintf(want, sizeof(want), "Environment=\"%s=", key);
	out[0] = '\0';
	if (!(p = strstr(text, want)))
		return;
	for (p += strlen(want); *p && *p != '\n' && n + 1 < cap; p++) {
		if (*p == '"')
			break;
		if (*p == '\\' && p[1])
			p++;
		else if (*p == '%' && p[1] == '%')
			p++;
		out[n++] = *p;
	}
	out[n] = '\0';
}

static int cmp_info(const void *a, const void *b)
{
	return strcmp(((const struct dropin_info *)a)->unit, ((const struct dropin_info *)b)->unit);
}

int dropin_list(const char *root, struct dropin_info *out, size_t max, size_t *n, char *err, size_t errlen)
{
	char dir[4096];
	DIR *d;
	struct dirent *de;

	*n = 0;
	snprintf(dir, sizeof(dir), "%s" UNIT_DIR, root);
	if (!(d = opendir(dir))) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) && *n < max) {
		size_t len = strlen(de->d_name);
		char path[4400], *text = NULL;
		size_t tlen;

		if (len < 3 || strcmp(de->d_name + len - 2, ".d") != 0 || len - 2 >= sizeof(out->unit))
			continue;
		snprintf(path, sizeof(path), "%s/%s/" DROPIN_NAME, dir, de->d_name);
		if (util_read_file(path, 64 * 1024, &text, &tlen) < 0)
			continue;
		memcpy(out[*n].unit, de->d_name, len - 2);
		out[*n].unit[len - 2] = '\0';
		env_value(text, "SM_GUARD_APP", out[*n].app, sizeof(out[*n].app));
		env_value(text, "SM_GUARD_LABELS", out[*n].labels, sizeof(out[*n].labels));
		free(text);
		(*n)++;
	}
	closedir(d);
	qsort(out, *n, sizeof(*out), cmp_info);
	return 0;
}
