/*
 * perf: the importer of `perf script` text: on-CPU samples become run events,
 * sched_switch/sched_wakeup tracepoints become wait events with their wakers.
 * Line layouts and inference rules are in docs/import.md.
 */
#ifndef SM_PERF_H
#define SM_PERF_H

#include "formats/import.h"

/* "perf": reads the importer's input to its end, adding frames, stacks,
 * threads and events. */
extern const struct import_format import_perf;

#endif
