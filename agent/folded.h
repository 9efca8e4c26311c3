/*
 * folded: the importer of collapsed stacks (`frame;frame;frame COUNT`, as
 * stackcollapse-perf.pl, inferno and async-profiler write them). There are no
 * timestamps: each line becomes one run event laid end to end per thread.
 */
#ifndef SM_FOLDED_H
#define SM_FOLDED_H

struct importer;

/* Read the importer's input to its end. Returns 0, or -1 with the error set. */
int folded_import(struct importer *im);

#endif
