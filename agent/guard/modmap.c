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

int gmodmap_load(struct gmodmap *m)
{
	struct collect c = { NULL, 0, 0, 1, 0 };

	dl_iterate_phdr(on_module, &c);
	if (c.oom) {
		free(c.mods);
		return -1;
	}
	/* the executable first, for gmodmap_main(); the rest by address */
	if (c.n > 1)
		qsort(c.mods + 1, c.n - 1, sizeof(*c.mods), cmp_lo);
	gmodmap_release(m);
	m->mods = c.mods;
	m->n = c.n;
	return 0;
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
