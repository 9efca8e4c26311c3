/* modmap: loaded modules and their build ids, from dl_iterate_phdr (see modmap.h). */
#include "agent/guard/modmap.h"
#include "common/util.h"
#include "common/vec.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char argv0_name[256];   /* "" until captured */

void gmodmap_capture_argv0(void)
{
	char buf[4096];
	ssize_t n = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';   /* argv[0] ends at its own NUL, or here when longer than buf */
	{
		const char *slash = strrchr(buf, '/');
		const char *base = slash ? slash + 1 : buf;
		size_t len = strnlen(base, sizeof(argv0_name) - 1);

		/* a name a frame can carry: no '!' or '+' (they separate module and function) */
		if (!len || strpbrk(base, "!+"))
			return;
		memcpy(argv0_name, base, len);
		argv0_name[len] = '\0';
	}
}

struct collect {
	struct gmod *mods;
	size_t n, cap;
	int first;
	int oom;
};

/* The module's name: its file's base name, the executable's as started when known. */
static void module_name(struct gmod *g, const char *path, int is_main)
{
	const char *slash = strrchr(path, '/');
	const char *base = is_main && argv0_name[0] ? argv0_name : slash ? slash + 1 : path;
	size_t n = strnlen(base, sizeof(g->name) - 1);

	memcpy(g->name, base, n);
	g->name[n] = '\0';
}

static void note_build_id(const struct dl_phdr_info *info, const ElfW(Phdr) *ph, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
	size_t left = ph->p_memsz;

	while (left >= sizeof(ElfW(Nhdr))) {
		const ElfW(Nhdr) *nh = (const void *)p;
		size_t namesz = (nh->n_namesz + 3) & ~(size_t)3, descsz = (nh->n_descsz + 3) & ~(size_t)3;
		size_t total = sizeof(*nh) + namesz + descsz;

		if (total > left)
			return;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    memcmp(p + sizeof(*nh), "GNU", 4) == 0 && nh->n_descsz * 2 + 1 <= cap) {
			util_hex(p + sizeof(*nh) + namesz, nh->n_descsz, out);
			return;
		}
		p += total;
		left -= total;
	}
}

static int on_module(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct collect *c = ctx;
	struct gmod *g;
	const char *path = info->dlpi_name;
	char exe[1024];
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int is_main = c->first;

	(void)size;
	if (c->first) {
		/* the executable reports no name */
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		exe[n > 0 ? n : 0] = '\0';
		path = exe;
		c->first = 0;
	}
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < lo)
			lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
			hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	if (lo >= hi)
		return 0;
	if (vec_reserve(&c->mods, &c->cap, c->n + 1, sizeof(*c->mods)) < 0) {
		c->oom = 1;
		return 1;
	}
	g = &c->mods[c->n++];
	memset(g, 0, sizeof(*g));
	g->bias = info->dlpi_addr;
	g->lo = lo;
	g->hi = hi;
	if (path && *path && strncmp(path, "linux-vdso", 10) != 0 && strncmp(path, "linux-gate", 10) != 0) {
		snprintf(g->path, sizeof(g->path), "%s", path);
		module_name(g, path, is_main);
	} else {
		snprintf(g->name, sizeof(g->name), "[vdso]");
	}
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_NOTE)
			note_build_id(info, &info->dlpi_phdr[i], g->build_id, sizeof(g->build_id));
	return 0;
}

static int cmp_lo(const void *a, const void *b)
{
	const struct gmod *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The modules collected into *m: the executable first, for gmodmap_main(); the rest by address. */
static int finish(struct gmodmap *m, struct collect *c)
{
	if (c->oom) {
		free(c->mods);
		return -1;
	}
	if (c->n > 1)
		qsort(c->mods + 1, c->n - 1, sizeof(*c->mods), cmp_lo);
	gmodmap_release(m);
	m->mods = c->mods;
	m->n = c->n;
	return 0;
}

/* ---- another process's modules, from /proc/<pid>/maps and the files themselves ---- */

#define MAPS_MAX ((size_t)8 << 20)
#define PHDRS_MAX 256

/* The bias, extent and build id of the ELF file at path, mapped with its first page at base. 0 or -1. */
static int elf_facts(const char *path, uintptr_t base, struct gmod *g)
{
	ElfW(Ehdr) eh;
	ElfW(Phdr) ph[PHDRS_MAX];
	uintptr_t first = UINTPTR_MAX, lo = UINTPTR_MAX, hi = 0;
	size_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;

	if (fd < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
	    eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > PHDRS_MAX)
		goto out_close;
	n = eh.e_phnum;
	if (pread(fd, ph, n * sizeof(ph[0]), (off_t)eh.e_phoff) != (ssize_t)(n * sizeof(ph[0])))
		goto out_close;
	for (size_t i = 0; i < n; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (ph[i].p_vaddr < first)
			first = ph[i].p_vaddr;
	}
	if (first == UINTPTR_MAX)
		goto out_close;
	/* the first page of the file is mapped where the lowest segment's page starts */
	g->bias = base - (first & ~(uintptr_t)4095);
	for (size_t i = 0; i < n; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (g->bias + ph[i].p_vaddr < lo)
			lo = g->bias + ph[i].p_vaddr;
		if (g->bias + ph[i].p_vaddr + ph[i].p_memsz > hi)
			hi = g->bias + ph[i].p_vaddr + ph[i].p_memsz;
	}
	g->lo = lo;
	g->hi = hi;
	for (size_t i = 0; i < n && !g->build_id[0]; i++) {
		unsigned char notes[4096];
		size_t left, off = 0;

		if (ph[i].p_type != PT_NOTE)
			continue;
		left = ph[i].p_filesz < sizeof(notes) ? ph[i].p_filesz : sizeof(notes);
		if (pread(fd, notes, left, (off_t)ph[i].p_offset) != (ssize_t)left)
			continue;
		while (left - off >= sizeof(ElfW(Nhdr))) {
			ElfW(Nhdr) nh;
			size_t namesz, descsz, total;

			memcpy(&nh, notes + off, sizeof(nh));
			namesz = ((size_t)nh.n_namesz + 3) & ~(size_t)3;
			descsz = ((size_t)nh.n_descsz + 3) & ~(size_t)3;
			total = sizeof(nh) + namesz + descsz;
			if (total > left - off)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp(notes + off + sizeof(nh), "GNU", 4) == 0 && nh.n_descsz * 2 + 1 <= sizeof(g->build_id)) {
				util_hex(notes + off + sizeof(nh) + namesz, nh.n_descsz, g->build_id);
				break;
			}
			off += total;
		}
	}
	rc = lo < hi ? 0 : -1;
out_close:
	close(fd);
	return rc;
}

int gmodmap_load_pid(struct gmodmap *m, int pid, const char *exe_name)
{
	struct collect c = { NULL, 0, 0, 0, 0 };
	char path[64], exe[1024], *text = NULL, *save = NULL;
	size_t len = 0;
	ssize_t xn;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	xn = readlink(path, exe, sizeof(exe) - 1);
	exe[xn > 0 ? xn : 0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (util_read_file(path, MAPS_MAX, &text, &len) < 0)
		return -1;
	/* one module per file, at its mapping of offset 0 */
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long lo, hi, off;
		char perms[8], file[1024];
		struct gmod *g;
		int is_main;

		file[0] = '\0';
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %1023[^\n]", &lo, &hi, perms, &off, file) < 4 ||
		    off != 0 || file[0] != '/')
			continue;
		if (vec_reserve(&c.mods, &c.cap, c.n + 1, sizeof(*c.mods)) < 0) {
			c.oom = 1;
			break;
		}
		g = &c.mods[c.n];
		memset(g, 0, sizeof(*g));
		snprintf(g->file, sizeof(g->file), "%s", file);
		is_main = exe[0] && strcmp(file, exe) == 0;
		/* the very file mapped (a replaced one, another mount namespace), as the kernel keeps it */
		snprintf(g->path, sizeof(g->path), "/proc/%d/map_files/%llx-%llx", pid, lo, hi);
		if (elf_facts(g->path, (uintptr_t)lo, g) < 0) {
			int n = snprintf(g->path, sizeof(g->path), "/proc/%d/root", pid);

			/* (a path too long for it is not a module the collector can read) */
			if (n < 0 || strlen(file) >= sizeof(g->path) - (size_t)n)
				continue;
			memcpy(g->path + n, file, strlen(file) + 1);
			if (elf_facts(g->path, (uintptr_t)lo, g) < 0)
				continue;
		}
		{
			const char *slash = strrchr(file, '/');
			const char *base = is_main && exe_name && exe_name[0] ? exe_name : slash + 1;
			size_t n = strnlen(base, sizeof(g->name) - 1);

			memcpy(g->name, base, n);
			g->name[n] = '\0';
		}
		/* a file mapped twice at offset 0 is one module */
		if (c.n && strcmp(c.mods[c.n - 1].path, g->path) == 0)
			continue;
		if (is_main && c.n) {
			struct gmod t = c.mods[0];

			c.mods[0] = *g;
			*g = t;
		}
		c.n++;
	}
	free(text);
	return finish(m, &c);
}

void gmodmap_detach(struct gmodmap *m)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->mods[i].file[0])
			memcpy(m->mods[i].path, m->mods[i].file, sizeof(m->mods[i].path));
}

int gmodmap_copy(struct gmodmap *dst, const struct gmodmap *src)
{
	struct gmod *v = malloc(vec_bytes(src->n + 1, sizeof(*v)));

	if (!v)
		return -1;
	memcpy(v, src->mods, src->n * sizeof(*v));
	gmodmap_release(dst);
	dst->mods = v;
	dst->n = src->n;
	return 0;
}

int gmodmap_load(struct gmodmap *m)
{
	struct collect c = { NULL, 0, 0, 1, 0 };

	dl_iterate_phdr(on_module, &c);
	return finish(m, &c);
}

void gmodmap_release(struct gmodmap *m)
{
	free(m->mods);
	m->mods = NULL;
	m->n = 0;
}

const struct gmod *gmodmap_main(const struct gmodmap *m)
{
	return m->n ? &m->mods[0] : NULL;
}

const struct gmod *gmodmap_find(const struct gmodmap *m, uintptr_t addr)
{
	size_t lo = 1, hi = m->n;

	if (m->n && addr >= m->mods[0].lo && addr < m->mods[0].hi)
		return &m->mods[0];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < m->mods[mid].lo)
			hi = mid;
		else if (addr >= m->mods[mid].hi)
			lo = mid + 1;
		else
			return &m->mods[mid];
	}
	return NULL;
}
