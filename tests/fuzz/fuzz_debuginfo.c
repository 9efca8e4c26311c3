/*
 * fuzz_debuginfo: libFuzzer target for the ELF debug-file reader (common/debuginfo.h), which reads
 * files operators upload (POST /api/v1/debuginfo). Any input is refused with a reason or read;
 * what is read has its symbols sorted by address, each a name of valid UTF-8 within the bound.
 * Seeded with small ELF files (build/fuzz/corpus-debuginfo). Built and run by `make fuzz`.
 */
#include "common/debuginfo.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct debuginfo *d = debuginfo_open();

	if (!d)
		return 0;
	if (debuginfo_load_mem(d, data, size) < 0) {
		if (!debuginfo_error(d)[0])
			abort();
	} else {
		const struct dsym *s = debuginfo_symbols(d);

		for (size_t i = 0; i < debuginfo_count(d); i++) {
			size_t n = strlen(s[i].name);

			if (n > DEBUGINFO_MAX_NAME || !util_utf8_valid(s[i].name, n) || (i && s[i - 1].addr >= s[i].addr))
				abort();
		}
	}
	debuginfo_free(d);
	return 0;
}
