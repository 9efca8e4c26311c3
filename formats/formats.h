/*
 * formats: the formats sm-agent and sm-ingest import, by name (perf.h, folded.h,
 * pprof.h, otlp.h, bcc.h), and "auto", which tells them apart from their first
 * bytes. The importer (import.h) knows none of them: a format is a parser
 * handed to it.
 */
#ifndef SM_FORMATS_H
#define SM_FORMATS_H

#include "formats/import.h"

/* The format called name, or NULL (unknown name, or NULL). */
const struct import_format *import_format_find(const char *name);
/* Reads the first 64 KiB and hands the input to the format it recognises (the pprof
 * formats by their bytes, OTLP JSON by its brace, bcc by its banners and block lines,
 * perf by its frame lines, folded by its records); a file it cannot tell is refused. */
extern const struct import_format import_auto;

/* "perf, folded, ... or auto": the names, for messages. */
const char *import_format_names(void);

#endif
