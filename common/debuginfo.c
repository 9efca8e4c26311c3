/* debuginfo: function symbols of a build from its ELF debug file (see debuginfo.h). */
#include "common/debuginfo.h"
#include "common/util.h"
#include "common/vec.h"

#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct debuginfo {
	struct dsym *syms;
	size_t n, cap;
	char build_id[2 * DEBUGINFO_MAX_BUILD_ID + 1];
	char source[32];
	char path[2304];
	char err[512];
};

/* one symbol while reading: its binding ranks it among symbols of the same address */
struct cand {
	struct dsym s;
	int rank;
};

typedef char *demangle_fn(const char *, char *, size_t *, int *);
static demangle_fn *demangle;
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;

/* C++ names are demangled as the agent does, with the C++ runtime's __cxa_demangle, when present. */
static void find_demangler(void)
{
	void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);

	if (h)
		demangle = (demangle_fn *)dlsym(h, "__cxa_demangle");
}

__attribute__((format(printf, 2, 3)))
static int fail(struct debuginfo *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->err, sizeof(d->err), fmt, ap);
	va_end(ap);
	return -1;
}

struct debuginfo *debuginfo_open(void)
{
	return calloc(1, sizeof(struct debuginfo));
}

static void drop_symbols(struct debuginfo *d)
{
	for (size_t i = 0; i < d->n; i++)
		free((char *)d->syms[i].name);
	d->n = 0;
}

static void reset(struct debuginfo *d)
{
	drop_symbols(d);
	d->build_id[0] = '\0';
	d->err[0] = '\0';
}

void debuginfo_free(struct debuginfo *d)
{
	if (!d)
		return;
	reset(d);
	free(d->syms);
	free(d);
}

const char *debuginfo_error(const struct debuginfo *d) { return d->err; }
const char *debuginfo_build_id(const struct debuginfo *d) { return d->build_id; }
size_t debuginfo_count(const struct debuginfo *d) { return d->n; }
const struct dsym *debuginfo_symbols(const struct debuginfo *d) { return d->syms; }
const char *debuginfo_source(const struct debuginfo *d) { return d->source; }
const char *debuginfo_path(const struct debuginfo *d) { return d->path; }

/* The name as frames carry it: version cut, demangled, valid UTF-8 ('?' for bad bytes), bounded. */
static char *clean_name(const char *raw)
{
	char plain[DEBUGINFO_MAX_NAME + 1], *dem = NULL, *out;
	const char *at = strchr(raw, '@'), *name = raw;
	size_t n, o = 0;
	int status = -1;

	if (at) {
		n = (size_t)(at - raw) < DEBUGINFO_MAX_NAME ? (size_t)(at - raw) : DEBUGINFO_MAX_NAME;
		memcpy(plain, raw, n);
		plain[n] = '\0';
		name = plain;
	}
	pthread_once(&demangle_once, find_demangler);
	if (demangle && name[0] == '_' && name[1] == 'Z' && strlen(name) < 4096)
		dem = demangle(name, NULL, NULL, &status);
	if (dem && status == 0)
		name = dem;
	n = strnlen(name, 4 * DEBUGINFO_MAX_NAME);
	out = malloc(DEBUGINFO_MAX_NAME + 1);
	for (size_t i = 0; out && i < n;) {
		size_t k = util_utf8_seq((const unsigned char *)name + i, n - i);

		if (k == 0) {
			if (o + 1 > DEBUGINFO_MAX_NAME)
				break;
			out[o++] = '?';
			i++;
			continue;
		}
		if (o + k > DEBUGINFO_MAX_NAME)
			break;
		memcpy(out + o, name + i, k);
		o += k;
		i += k;
	}
	if (out)
		out[o] = '\0';
	free(dem);
	return out;
}

static int bind_rank(const GElf_Sym *sym, const char *name)
{
	int b = GELF_ST_BIND(sym->st_info);
	int r = b == STB_GLOBAL ? 0 : b == STB_WEAK ? 2 : 4;

	return r + (name[0] == '_');
}

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	size_t lx, ly;

	if (x->s.addr != y->s.addr)
		return x->s.addr < y->s.addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	lx = strlen(x->s.name);
	ly = strlen(y->s.name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->s.name, y->s.name);
}

/* Reads the function symbols of one symbol table section into cands. */
static int read_symtab(struct debuginfo *d, Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, size_t len,
		       struct cand **cands, size_t *n, size_t *cap)
{
	Elf_Data *data;
	size_t count;

	if (sh->sh_type == SHT_NOBITS)
		return 0;
	if (sh->sh_offset > len || sh->sh_size > len - sh->sh_offset)
		return fail(d, "symbol table beyond the end of the file (truncated?)");
	if (sh->sh_entsize == 0 || sh->sh_entsize > sh->sh_size + 1)
		return sh->sh_size ? fail(d, "symbol table with entries of %llu bytes",
					  (unsigned long long)sh->sh_entsize) : 0;
	count = sh->sh_size / sh->sh_entsize;
	if (count > DEBUGINFO_MAX_SYMBOLS || *n + count > DEBUGINFO_MAX_SYMBOLS)
		return fail(d, "%zu symbols, at most %d", *n + count, DEBUGINFO_MAX_SYMBOLS);
	if (!(data = elf_getdata(scn, NULL)))
		return fail(d, "symbol table: %s", elf_errmsg(-1));
	for (size_t i = 1; i < count; i++) {
		GElf_Sym sym;
		const char *name;
		int type;

		if (!gelf_getsym(data, (int)i, &sym))
			return fail(d, "symbol %zu: %s", i, elf_errmsg(-1));
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_size == 0 || sym.st_shndx == SHN_UNDEF ||
		    sym.st_value > INT64_MAX || sym.st_size > INT64_MAX - sym.st_value)
			continue;
		name = elf_strptr(e, sh->sh_link, sym.st_name);
		if (!name || !name[0])
			continue;
		if (vec_reserve(cands, cap, *n + 1, sizeof(**cands)) < 0)
			return fail(d, "out of memory");
		(*cands)[*n].s.addr = sym.st_value;
		(*cands)[*n].s.size = sym.st_size;
		(*cands)[*n].rank = bind_rank(&sym, name);
		if (!((*cands)[*n].s.name = clean_name(name)))
			return fail(d, "out of memory");
		(*n)++;
	}
	return 0;
}

static int load_any(struct debuginfo *d, const char *path, int depth);

/* A file with no function symbols of its own whose .gnu_debuglink names one beside it: that one. */
static int follow_debuglink(struct debuginfo *d, Elf *e, const char *path, int depth)
{
	GElf_Word crc;
	const char *link = dwelf_elf_gnu_debuglink(e, &crc);
	char dir[1024], cand[2200], want[sizeof(d->build_id)];
	const char *slash;

	if (!link || !path || depth > 0 || strchr(link, '/') || !(slash = strrchr(path, '/')) ||
	    (size_t)(slash - path) >= sizeof(dir))
		return -1;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	memcpy(want, d->build_id, sizeof(want));
	for (int k = 0; k < 3; k++) {
		static const char *const fmt[] = { "%s/%s", "%s/.debug/%s", "/usr/lib/debug%s/%s" };

		snprintf(cand, sizeof(cand), fmt[k], dir, link);
		if (strcmp(cand, path) == 0 || access(cand, R_OK) < 0)
			continue;
		if (load_any(d, cand, depth + 1) == 0 && d->n && (!want[0] || strcmp(want, d->build_id) == 0)) {
			snprintf(d->path, sizeof(d->path), "%s", cand);
			return 0;
		}
		reset(d);
		memcpy(d->build_id, want, sizeof(want));
	}
	return -1;
}

/* Parses data[0..len) (the caller's, writable); path: where it came from, for its debuglink. */
static int parse(struct debuginfo *d, char *data, size_t len, const char *path, int depth)
{
	struct cand *cands = NULL;
	size_t ncand = 0, capcand = 0, nsec = 0, shstr = 0;
	Elf *e = NULL;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	const void *id = NULL;
	ssize_t idlen;
	int rc = -1, have_symtab = 0;

	reset(d);
	if (len < EI_NIDENT || memcmp(data, ELFMAG, SELFMAG) != 0)
		return fail(d, "not an ELF file (no ELF magic)");
	elf_version(EV_CURRENT);
	if (!(e = elf_memory(data, len)) || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
		fail(d, "not a readable ELF file: %s", elf_errmsg(-1));
		goto out_end;
	}
	/* libelf reads a cut-off table as no sections: the header says how many there are */
	if (eh.e_shoff && (eh.e_shoff > len || (uint64_t)(eh.e_shnum ? eh.e_shnum : 1) * eh.e_shentsize >
					       len - eh.e_shoff)) {
		fail(d, "section headers beyond the end of the file (truncated?)");
		goto out_end;
	}
	if (elf_getshdrnum(e, &nsec) < 0 || elf_getshdrstrndx(e, &shstr) < 0) {
		fail(d, "unreadable section headers (truncated?): %s", elf_errmsg(-1));
		goto out_end;
	}
	if (nsec > DEBUGINFO_MAX_SECTIONS) {
		fail(d, "%zu sections, at most %d", nsec, DEBUGINFO_MAX_SECTIONS);
		goto out_end;
	}
	if (nsec && (eh.e_shoff > len || (uint64_t)nsec * eh.e_shentsize > len - eh.e_shoff)) {
		fail(d, "section headers beyond the end of the file (truncated?)");
		goto out_end;
	}
	idlen = dwelf_elf_gnu_build_id(e, &id);
	if (idlen > 0 && idlen <= DEBUGINFO_MAX_BUILD_ID)
		util_hex(id, (size_t)idlen, d->build_id);
	/* .symtab when there is one, else .dynsym */
	for (int pass = 0; pass < 2 && !have_symtab; pass++) {
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh)) {
				fail(d, "section header: %s", elf_errmsg(-1));
				goto out_free;
			}
			if (sh.sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB))
				continue;
			if (read_symtab(d, e, scn, &sh, len, &cands, &ncand, &capcand) < 0)
				goto out_free;
			have_symtab |= pass == 0 && ncand > 0;
		}
	}
	if (ncand == 0 && follow_debuglink(d, e, path, depth) == 0) {
		rc = 0;
		goto out_end;
	}
	if (ncand)
		qsort(cands, ncand, sizeof(*cands), cmp_cand);
	if (vec_reserve(&d->syms, &d->cap, ncand + 1, sizeof(*d->syms)) < 0) {
		fail(d, "out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < ncand; i++) {
		if (d->n && d->syms[d->n - 1].addr == cands[i].s.addr) {
			free((char *)cands[i].s.name);
			continue;
		}
		d->syms[d->n++] = cands[i].s;
	}
	ncand = 0;
	rc = 0;
out_free:
	for (size_t i = 0; i < ncand; i++)
		free((char *)cands[i].s.name);
	free(cands);
out_end:
	if (e)
		elf_end(e);
	return rc;
}

int debuginfo_load_mem(struct debuginfo *d, const void *data, size_t len)
{
	char *copy;
	int rc;

	if (len > DEBUGINFO_MAX_FILE)
		return fail(d, "%zu bytes, at most %zu", len, DEBUGINFO_MAX_FILE);
	if (!(copy = malloc(len ? len : 1)))
		return fail(d, "out of memory");
	memcpy(copy, data, len);
	d->path[0] = '\0';
	rc = parse(d, copy, len, NULL, 0);
	free(copy);
	return rc;
}

static int load_any(struct debuginfo *d, const char *path, int depth)
{
	struct stat st;
	char *data;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return fail(d, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(d, "%s: not a regular file", path);
	}
	if ((uint64_t)st.st_size > DEBUGINFO_MAX_FILE) {
		close(fd);
		return fail(d, "%s: %lld bytes, at most %zu", path, (long long)st.st_size, DEBUGINFO_MAX_FILE);
	}
	if (!(data = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return fail(d, "out of memory");
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, data + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	snprintf(d->path, sizeof(d->path), "%s", path);
	rc = parse(d, data, got, path, depth);
	free(data);
	if (rc < 0 && strncmp(d->err, path, strlen(path)) != 0) {
		char msg[sizeof(d->err)];

		snprintf(msg, sizeof(msg), "%s", d->err);
		fail(d, "%s: %s", path, msg);
	}
	return rc;
}

int debuginfo_load_file(struct debuginfo *d, const char *path)
{
	return load_any(d, path, 0);
}

struct dl_bounds {
	int64_t deadline_ns;
	long max_bytes;
	int over;
};

/* Called by libdebuginfod while it downloads: nonzero stops it. */
static int dl_progress(debuginfod_client *c, long a, long b)
{
	struct dl_bounds *bd = debuginfod_get_user_data(c);

	if (util_now_mono_ns() > bd->deadline_ns)
		bd->over = 1;
	else if (a > bd->max_bytes || b > bd->max_bytes)
		bd->over = 2;
	return bd->over;
}

static int find_debuginfod(struct debuginfo *d, const char *build_id, const struct debuginfo_opts *o)
{
	struct dl_bounds bd;
	debuginfod_client *c;
	char *path = NULL;
	const char *urls = getenv("DEBUGINFOD_URLS");
	int fd, rc;

	if (!urls || !urls[0])
		return fail(d, "DEBUGINFOD_URLS is not set");
	bd.deadline_ns = util_now_mono_ns() + (int64_t)(o->timeout_s > 0 ? o->timeout_s : 60) * 1000000000LL;
	bd.max_bytes = (long)(o->max_bytes && o->max_bytes < DEBUGINFO_MAX_FILE ? o->max_bytes : DEBUGINFO_MAX_FILE);
	bd.over = 0;
	if (!(c = debuginfod_begin()))
		return fail(d, "debuginfod: cannot start a client");
	debuginfod_set_user_data(c, &bd);
	debuginfod_set_progressfn(c, dl_progress);
	fd = debuginfod_find_debuginfo(c, (const unsigned char *)build_id, 0, &path);
	debuginfod_end(c);
	if (fd < 0) {
		free(path);
		if (bd.over)
			return fail(d, "debuginfod: %s", bd.over == 1 ? "took too long" : "file too large");
		return fail(d, "debuginfod (%s): %s", urls, strerror(-fd));
	}
	close(fd);
	rc = path ? load_any(d, path, 1) : fail(d, "debuginfod: no path");
	free(path);
	if (rc == 0)
		snprintf(d->source, sizeof(d->source), "debuginfod");
	return rc;
}

int debuginfo_find(struct debuginfo *d, const char *build_id, const struct debuginfo_opts *opts)
{
	static const struct debuginfo_opts none = { NULL, 0, 0, 0 };
	const struct debuginfo_opts *o = opts ? opts : &none;
	const char *dir = o->debug_dir ? o->debug_dir : "/usr/lib/debug";
	char path[1200], local[sizeof(d->err)] = "";
	size_t n = strlen(build_id);

	reset(d);
	d->source[0] = '\0';
	if (n < 2 || n > 2 * DEBUGINFO_MAX_BUILD_ID || strspn(build_id, "0123456789abcdef") != n)
		return fail(d, "build id: 2 to %d lower-case hex digits", 2 * DEBUGINFO_MAX_BUILD_ID);
	if (dir[0]) {
		snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", dir, build_id, build_id + 2);
		if (access(path, R_OK) == 0) {
			if (load_any(d, path, 0) == 0 && strcmp(d->build_id, build_id) == 0) {
				snprintf(d->source, sizeof(d->source), "build-id tree");
				return 0;
			}
			snprintf(local, sizeof(local), "%s", d->err[0] ? d->err : "its build id differs");
		} else {
			snprintf(local, sizeof(local), "not in %s/.build-id", dir);
		}
	}
	if (o->use_debuginfod) {
		if (find_debuginfod(d, build_id, o) == 0) {
			if (strcmp(d->build_id, build_id) == 0)
				return 0;
			fail(d, "debuginfod sent a file of build id %s", d->build_id[0] ? d->build_id : "(none)");
		}
		if (local[0]) {
			char msg[sizeof(d->err)];

			snprintf(msg, sizeof(msg), "%s", d->err);
			fail(d, "%s; %.200s", local, msg);
		}
		drop_symbols(d);
		return -1;
	}
	return fail(d, "%s", local[0] ? local : "no place to look");
}
