/*
 * pprof: the importer of pprof profiles: profile.proto (gzipped or not, decoded by
 * protobuf-c from code generated at build time), the legacy binary CPU profile
 * (gperftools, Java) and the legacy text contention profile. CPU samples become run
 * events, contention, block and off-CPU samples wait events; sample labels other than
 * the thread's split the profile into one stream per label set. docs/import.md has
 * the mapping and what is lost.
 */
#ifndef SM_PPROF_H
#define SM_PPROF_H

#include "formats/import.h"

/* "pprof": reads the importer's whole input. */
extern const struct import_format import_pprof;

/* Whether data[0..len) (decompressed) starts like one of the formats import_pprof reads:
 * a legacy CPU header, a legacy text profile, or a protobuf Profile's first field. */
bool pprof_sniff(const unsigned char *data, size_t len);

#endif
