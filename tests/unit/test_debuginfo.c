/* debuginfo: function symbols from ELF files, and hostile files refused with the reason. */
#include "check.h"
#include "common/debuginfo.h"
#include "common/util.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a static function of this file: in .symtab only */
__attribute__((noinline)) static int local_fn(int x)
{
	return x * 3 + 1;
}

static char *self(size_t *len)
{
	FILE *f = fopen("/proc/self/exe", "rb");
	char *data = malloc(64u << 20);

	*len = f && data ? fread(data, 1, 64u << 20, f) : 0;
	if (f)
		fclose(f);
	return data;
}

static const struct dsym *find(const struct debuginfo *d, const char *name)
{
	for (size_t i = 0; i < debuginfo_count(d); i++)
		if (strcmp(debuginfo_symbols(d)[i].name, name) == 0)
			return &debuginfo_symbols(d)[i];
	return NULL;
}

static void test_self(void)
{
	struct debuginfo *d = debuginfo_open();
	const struct dsym *s;
	size_t n;
	char *data = self(&n);

	CHECK_INT(debuginfo_load_file(d, "/proc/self/exe"), 0);
	CHECK(strlen(debuginfo_build_id(d)) == 40);
	CHECK(debuginfo_count(d) > 20);
	s = find(d, "local_fn");
	CHECK(s != NULL && s->size > 0);
	CHECK(local_fn(2) == 7);
	for (size_t i = 1; i < debuginfo_count(d); i++)
		CHECK(debuginfo_symbols(d)[i - 1].addr < debuginfo_symbols(d)[i].addr);
	/* the same from memory */
	CHECK_INT(debuginfo_load_mem(d, data, n), 0);
	CHECK(find(d, "local_fn") != NULL);
	free(data);
	debuginfo_free(d);
}

static void test_hostile(void)
{
	struct debuginfo *d = debuginfo_open();
	size_t n, fails = 0;
	char *data = self(&n), *copy = malloc(n);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)copy;

	CHECK_INT(debuginfo_load_mem(d, "garbage", 7), -1);
	CHECK_STR(debuginfo_error(d), "not an ELF file (no ELF magic)");
	CHECK_INT(debuginfo_load_mem(d, "", 0), -1);
	/* cut anywhere: refused or read, never a crash (ASan watches) */
	for (size_t cut = 0; cut < n; cut += cut < 8192 ? 61 : 7919) {
		fails += debuginfo_load_mem(d, data, cut) < 0;
		CHECK(debuginfo_load_mem(d, data, cut) == 0 || debuginfo_error(d)[0]);
	}
	CHECK(fails > 10);
	CHECK_INT(debuginfo_load_mem(d, data, 200), -1);
	CHECK_STR(debuginfo_error(d), "section headers beyond the end of the file (truncated?)");
	/* a huge section count */
	memcpy(copy, data, n);
	eh->e_shnum = 0xffff;
	CHECK_INT(debuginfo_load_mem(d, copy, n), -1);
	CHECK_STR(debuginfo_error(d), "section headers beyond the end of the file (truncated?)");
	/* the table far beyond the file */
	memcpy(copy, data, n);
	eh->e_shoff = (Elf64_Off)1 << 60;
	CHECK_INT(debuginfo_load_mem(d, copy, n), -1);
	CHECK_STR(debuginfo_error(d), "section headers beyond the end of the file (truncated?)");
	/* a symbol table larger than the file */
	memcpy(copy, data, n);
	{
		Elf64_Shdr *sh = (Elf64_Shdr *)(copy + eh->e_shoff);

		for (int i = 0; i < eh->e_shnum; i++)
			if (sh[i].sh_type == SHT_SYMTAB)
				sh[i].sh_size = (Elf64_Xword)1 << 40;
	}
	CHECK_INT(debuginfo_load_mem(d, copy, n), -1);
	CHECK(strstr(debuginfo_error(d), "beyond the end of the file") != NULL);
	/* random bytes over the section headers */
	for (int round = 0; round < 200; round++) {
		uint64_t r;

		memcpy(copy, data, n);
		for (int k = 0; k < 16; k++) {
			util_random(&r, sizeof(r));
			copy[eh->e_shoff + r % (n - eh->e_shoff)] = (char)(r >> 32);
		}
		CHECK(debuginfo_load_mem(d, copy, n) == 0 || debuginfo_error(d)[0]);
	}
	/* a build id that is not hex is refused before any search */
	CHECK_INT(debuginfo_find(d, "../../etc", NULL), -1);
	CHECK_STR(debuginfo_error(d), "build id: 2 to 80 lower-case hex digits");
	free(copy);
	free(data);
	debuginfo_free(d);
}

int main(void)
{
	RUN(test_self);
	RUN(test_hostile);
	return CHECK_DONE();
}
