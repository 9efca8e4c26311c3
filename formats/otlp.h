/*
 * otlp: the importer of OpenTelemetry profiles in OTLP's JSON encoding
 * (ProfilesData with its dictionary of strings, functions, locations and stacks,
 * as the OpenTelemetry eBPF profiler sends it). Samples with timestamps become
 * events at their time (off-CPU ones end there); each resource (a process) is
 * one stream. docs/import.md has the mapping and what is lost.
 */
#ifndef SM_OTLP_H
#define SM_OTLP_H

#include "formats/import.h"

/* "otlp": reads the importer's whole input. */
extern const struct import_format import_otlp;

#endif
