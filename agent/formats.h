/*
 * formats: the formats sm-agent imports, by name (perf.h, folded.h). The
 * importer (import.h) knows none of them: a format is a parser handed to it.
 */
#ifndef SM_FORMATS_H
#define SM_FORMATS_H

#include "agent/import.h"

/* The format called name, or NULL (unknown name, or NULL). */
const struct import_format *import_format_find(const char *name);
/* "perf or folded": the names, for messages. */
const char *import_format_names(void);

#endif
