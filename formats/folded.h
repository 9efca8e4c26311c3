/*
 * folded: the importer of collapsed stacks (`frame;frame;frame COUNT`, as
 * stackcollapse-perf.pl, inferno and async-profiler write them). There are no
 * timestamps: each line becomes one run event laid end to end per thread.
 */
#ifndef SM_FOLDED_H
#define SM_FOLDED_H

#include "formats/import.h"

/* "folded": reads the importer's input to its end. */
extern const struct import_format import_folded;

#endif
