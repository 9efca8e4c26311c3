/* symbolize: frame names from ELF symbols, through libdwfl, with no descriptor kept (see symbolize.h). */
#include "agent/guard/symbolize.h"
#include "common/hash.h"
#include "common/util.h"
#include "common/vec.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_SLOTS 16384            /* names remembered; a full cache starts over */
#define MAX_FILE ((size_t)2 << 30)
#define FUNCTION_KEY ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1))

struct mapping {
	void *addr;
	size_t len;
};

struct cache_ent {
	uintptr_t addr;                  /* 0: free */
	uint32_t off, len;               /* into names */
};

typedef char *demangle_fn(const char *, char *, size_t *, int *);

struct gsym {
	Dwfl *dwfl;
	Dwfl_Callbacks cb;
	struct gmodmap map;
	struct mapping *maps;
	size_t nmaps, capmaps;
	struct cache_ent *cache;
	size_t cached;
	char *names;
	size_t nnames, capnames;
	demangle_fn *demangle;
};

/* Maps a whole file privately and closes it: libelf reads the mapping, no descriptor stays open. */
static Elf *map_elf(struct gsym *s, const char *path)
{
	struct stat st;
	void *p;
	Elf *elf;
	/* (a path another process named may be a FIFO: never wait on one) */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || (size_t)st.st_size > MAX_FILE ||
	    vec_reserve(&s->maps, &s->capmaps, s->nmaps + 1, sizeof(*s->maps)) < 0) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	elf = elf_memory(p, (size_t)st.st_size);
	if (!elf) {
		munmap(p, (size_t)st.st_size);
		return NULL;
	}
	s->maps[s->nmaps].addr = p;
	s->maps[s->nmaps].len = (size_t)st.st_size;
	s->nmaps++;
	return elf;
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, char **file_name,
		    Elf **elfp)
{
	struct gsym *s = *userdata;  /* set when the module was reported */

	(void)mod;
	(void)base;
	if (!s || !modname || modname[0] != '/')
		return -1;
	*elfp = map_elf(s, modname);
	if (*elfp)
		*file_name = strdup(modname);
	return -1;
}

/* A separate debug file by build id (/usr/lib/debug/.build-id/xx/rest.debug), when installed. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			  char **debuginfo_file_name)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	char hex[129], path[300];
	int n;

	(void)userdata;
	(void)modname;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	n = dwfl_module_build_id(mod, &bits, &vaddr);
	if (n < 2 || n > 64)
		return -1;
	util_hex(bits, (size_t)n, hex);
	snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	n = open(path, O_RDONLY | O_CLOEXEC);
	if (n >= 0)
		*debuginfo_file_name = strdup(path);
	return n;
}

struct gsym *gsym_open(const struct gmodmap *map, char *err, size_t errlen)
{
	struct gsym *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	elf_version(EV_CURRENT);
	s->cb.find_elf = find_elf;
	s->cb.find_debuginfo = find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->dwfl = dwfl_begin(&s->cb);
	s->cache = calloc(CACHE_SLOTS, sizeof(*s->cache));
	s->map.mods = malloc(vec_bytes(map->n + 1, sizeof(*map->mods)));
	if (!s->dwfl || !s->cache || !s->map.mods) {
		snprintf(err, errlen, "libdwfl: %s", s->dwfl ? "out of memory" : dwfl_errmsg(-1));
		gsym_free(s);
		return NULL;
	}
	memcpy(s->map.mods, map->mods, map->n * sizeof(*map->mods));
	s->map.n = map->n;
	dwfl_report_begin(s->dwfl);
	for (size_t i = 0; i < map->n; i++) {
		const struct gmod *g = &map->mods[i];
		Dwfl_Module *mod;
		void **ud;

		if (!g->path[0])
			continue;
		mod = dwfl_report_module(s->dwfl, g->path, g->lo, g->hi);
		if (!mod)
			continue;
		/* each module's userdata points back at us for the callbacks */
		dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
		*ud = s;
	}
	dwfl_report_end(s->dwfl, NULL, NULL);
	s->demangle = (demangle_fn *)dlsym(RTLD_DEFAULT, "__cxa_demangle");
	return s;
}

void gsym_load_files(struct gsym *s)
{
	for (size_t i = 0; i < s->map.n; i++) {
		const struct gmod *g = &s->map.mods[i];
		Dwfl_Module *mod = g->path[0] && g->lo < g->hi ? dwfl_addrmodule(s->dwfl, g->lo) : NULL;
		Dwarf_Addr bias;

		if (mod)
			dwfl_module_eh_cfi(mod, &bias);   /* (finds its file first) */
	}
}

void gsym_free(struct gsym *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	for (size_t i = 0; i < s->nmaps; i++)
		munmap(s->maps[i].addr, s->maps[i].len);
	free(s->maps);
	free(s->cache);
	free(s->names);
	free(s->map.mods);
	free(s);
}

const char *gsym_build_id(const struct gsym *s, const char *module, size_t len)
{
	for (size_t i = 0; i < s->map.n; i++) {
		const struct gmod *g = &s->map.mods[i];

		if (g->build_id[0] && strlen(g->name) == len && memcmp(g->name, module, len) == 0)
			return g->build_id;
	}
	return NULL;
}

/* Appends s[0..n) to out as valid UTF-8 (bad bytes become '?'), within cap. */
static size_t put_text(char *out, size_t at, size_t cap, const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && at + 1 < cap) {
		size_t k = util_utf8_seq((const unsigned char *)s + i, n - i);

		if (k == 0) {
			out[at++] = '?';
			i++;
			continue;
		}
		if (at + k >= cap)
			break;
		memcpy(out + at, s + i, k);
		at += k;
		i += k;
	}
	out[at] = '\0';
	return at;
}

/* The start of the function holding addr, from the module's unwind table (.eh_frame: every function
 * has its entry, stripped or not); addr when there is none. */
static uintptr_t function_start(Dwfl_Module *mod, uintptr_t addr)
{
	Dwarf_Addr bias, start, end;
	Dwarf_CFI *cfi = mod ? dwfl_module_eh_cfi(mod, &bias) : NULL;
	Dwarf_Frame *frame = NULL;
	uintptr_t at = addr;

	if (cfi && dwarf_cfi_addrframe(cfi, addr - bias, &frame) == 0 &&
	    dwarf_frame_info(frame, &start, &end, NULL) >= 0 && start + bias <= addr && addr < end + bias)
		at = (uintptr_t)(start + bias);
	free(frame);
	return at;
}

static size_t format_frame(struct gsym *s, uintptr_t addr, bool function, char *out, size_t cap)
{
	const struct gmod *g = gmodmap_find(&s->map, addr);
	Dwfl_Module *mod;
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name = NULL;
	size_t n;
	char hexbuf[40];

	if (!g) {
		n = (size_t)snprintf(hexbuf, sizeof(hexbuf), "[unknown]+0x%llx", (unsigned long long)addr);
		return put_text(out, 0, cap, hexbuf, n);
	}
	mod = g->path[0] ? dwfl_addrmodule(s->dwfl, addr) : NULL;
	if (mod)
		name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
	n = put_text(out, 0, cap, g->name, strlen(g->name));
	/* inside the symbol's extent only: a stripped static function must not take its neighbour's name */
	if (name && *name && sym.st_size > 0 && off < sym.st_size &&
	    (GELF_ST_TYPE(sym.st_info) == STT_FUNC || GELF_ST_TYPE(sym.st_info) == STT_GNU_IFUNC)) {
		char *dem = NULL, plain[512];
		const char *at = strchr(name, '@');
		int status = -1;

		/* .dynsym names carry their version ("__libc_start_main@@GLIBC_2.34"): the function is the name */
		if (at && (size_t)(at - name) < sizeof(plain)) {
			memcpy(plain, name, (size_t)(at - name));
			plain[at - name] = '\0';
			name = plain;
		}
		if (s->demangle && name[0] == '_' && name[1] == 'Z')
			dem = s->demangle(name, NULL, NULL, &status);
		n = put_text(out, n, cap, "!", 1);
		if (dem && status == 0)
			n = put_text(out, n, cap, dem, strlen(dem));
		else
			n = put_text(out, n, cap, name, strlen(name));
		free(dem);
		return n;
	}
	{
		uintptr_t at = function && mod ? function_start(mod, addr) : addr;
		int w = snprintf(hexbuf, sizeof(hexbuf), "+0x%llx", (unsigned long long)(at - g->bias));

		return put_text(out, n, cap, hexbuf, (size_t)w);
	}
}

/* A name of either kind, cached by addr with the kind in its top bit (no user-space address has it). */
static size_t name_of(struct gsym *s, uintptr_t addr, bool function, char *out, size_t cap)
{
	uintptr_t key = function ? addr | FUNCTION_KEY : addr;
	size_t h = hash_mix64(key) & (CACHE_SLOTS - 1), n;
	struct cache_ent *e;

	if (cap == 0)
		return 0;
	for (size_t probe = 0; probe < 16; probe++) {
		e = &s->cache[(h + probe) & (CACHE_SLOTS - 1)];
		if (e->addr == key) {
			n = e->len < cap ? e->len : cap - 1;
			memcpy(out, s->names + e->off, n);
			out[n] = '\0';
			return n;
		}
		if (!e->addr)
			break;
	}
	n = format_frame(s, addr, function, out, cap);
	if (s->cached >= CACHE_SLOTS / 2) {
		/* full: forget everything rather than grow */
		memset(s->cache, 0, CACHE_SLOTS * sizeof(*s->cache));
		s->cached = 0;
		s->nnames = 0;
	}
	if (addr && vec_reserve(&s->names, &s->capnames, s->nnames + n, 1) == 0) {
		for (size_t probe = 0; probe < 16; probe++) {
			e = &s->cache[(h + probe) & (CACHE_SLOTS - 1)];
			if (!e->addr) {
				e->addr = key;
				e->off = (uint32_t)s->nnames;
				e->len = (uint32_t)n;
				memcpy(s->names + s->nnames, out, n);
				s->nnames += n;
				s->cached++;
				break;
			}
		}
	}
	return n;
}

/* A register's rule: GSYM_AT (its place is CFA + *off), GSYM_SAME or GSYM_UNKNOWN; -1 for any other
 * shape (a value, an expression). */
static int reg_rule(Dwarf_Frame *frame, int reg, int64_t *off)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;

	if (dwarf_frame_register(frame, reg, mem, &ops, &nops) < 0)
		return -1;
	if (nops == 0)
		return ops ? GSYM_UNKNOWN : GSYM_SAME;
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return -1;
	*off = 0;
	if (nops == 2 && ops[1].atom == DW_OP_plus_uconst)
		*off = (int64_t)ops[1].number;   /* libdw puts a negative offset here, as its two's complement */
	else if (nops != 1)
		return -1;   /* a value (DW_OP_stack_value) or an expression */
	return GSYM_AT;
}

int gsym_rule(struct gsym *s, uintptr_t addr, struct gsym_rule *r)
{
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
	Dwarf_Addr bias;
	Dwarf_CFI *cfi = mod ? dwfl_module_eh_cfi(mod, &bias) : NULL;
	Dwarf_Frame *frame = NULL;
	Dwarf_Op *ops = NULL;
	size_t nops = 0;
	int ra, rc = -1;

	if (!cfi || dwarf_cfi_addrframe(cfi, addr - bias, &frame) < 0)
		return -1;
	if ((ra = dwarf_frame_info(frame, NULL, NULL, NULL)) < 0 || dwarf_frame_cfa(frame, &ops, &nops) < 0 ||
	    nops != 1)
		goto out_frame;
	if (ops[0].atom == DW_OP_bregx) {
		r->cfa_reg = (int)ops[0].number;
		r->cfa_off = (int64_t)ops[0].number2;
	} else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		r->cfa_reg = ops[0].atom - DW_OP_breg0;
		r->cfa_off = (int64_t)ops[0].number;
	} else {
		goto out_frame;
	}
	if ((r->cfa_reg != 6 && r->cfa_reg != 7) || reg_rule(frame, ra, &r->ra_off) != GSYM_AT ||
	    (r->rbp = reg_rule(frame, 6, &r->rbp_off)) < 0)
		goto out_frame;
	rc = 0;
out_frame:
	free(frame);
	return rc;
}

size_t gsym_frame(struct gsym *s, uintptr_t addr, char *out, size_t cap)
{
	return name_of(s, addr, false, out, cap);
}

size_t gsym_function(struct gsym *s, uintptr_t addr, char *out, size_t cap)
{
	return name_of(s, addr, true, out, cap);
}
