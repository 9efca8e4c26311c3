/*
 * bcc: the importers of what bcc's tools print: offcputime (off-CPU stacks),
 * offwaketime (off-CPU stacks with their wakers' stacks), wakeuptime (wakers'
 * stacks) and profile (on-CPU samples), in their multi-line and folded (-f)
 * forms. The tools aggregate: events are laid end to end per thread. Lines that
 * are not part of the output (banners, ^C, prose around it) are skipped.
 * docs/import.md has the mapping.
 */
#ifndef SM_BCC_H
#define SM_BCC_H

#include "formats/import.h"

extern const struct import_format import_bcc_offcpu;
extern const struct import_format import_bcc_offwaketime;
extern const struct import_format import_bcc_wakeuptime;
extern const struct import_format import_bcc_profile;

#endif
