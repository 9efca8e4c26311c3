/*
 * fuzz_profile: libFuzzer target for what the guard agent reads: performance
 * profiles (guardcore/profile.c) and its SM_GUARD_* settings
 * (guardcore/config.c). A profile that loads must cluster, write, and load
 * again to the same text. Built and run by `make fuzz`.
 */
#include "guardcore/config.h"
#include "guardcore/profile.h"
#include "common/buf.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char value[4096];

static const char *one_var(const char *name)
{
	/* every setting gets the same text: each parser sees it */
	return strcmp(name, "SM_GUARD_LOG") == 0 ? NULL : value;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gprofile *p, *q;
	struct buf a = BUF_INIT(0), b = BUF_INIT(0);

	if (size && data[0] == 'E') {
		struct guard_config c;
		char err[512];
		size_t n = size - 1 < sizeof(value) - 1 ? size - 1 : sizeof(value) - 1;

		memcpy(value, data + 1, n);
		value[n] = '\0';
		guard_config_defaults(&c);
		guard_config_load(&c, one_var, err, sizeof(err));
		return 0;
	}
	p = gp_new();
	if (!p)
		return 0;
	if (gp_load_text(p, (const char *)data, size) == 0 && gp_cluster(p, 0) == 0 && gp_write(p, &a) == 0) {
		q = gp_new();
		if (!q || gp_load_text(q, a.data, a.len) != 0 || gp_write(q, &b) != 0 || a.len != b.len ||
		    memcmp(a.data, b.data, a.len) != 0)
			abort();
		gp_free(q);
	}
	buf_release(&a);
	buf_release(&b);
	gp_free(p);
	return 0;
}
