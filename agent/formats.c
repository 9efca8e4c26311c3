/* formats: the formats sm-agent imports, by name (see formats.h). */
#include "agent/formats.h"
#include "agent/folded.h"
#include "agent/perf.h"

#include <string.h>

static const struct import_format *const formats[] = { &import_perf, &import_folded };

const struct import_format *import_format_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(formats) / sizeof(formats[0]); i++)
		if (strcmp(formats[i]->name, name) == 0)
			return formats[i];
	return NULL;
}

const char *import_format_names(void)
{
	return "perf or folded";
}
