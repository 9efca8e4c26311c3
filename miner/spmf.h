/*
 * spmf: the SPMF sequence-database text format, so that the mining engine can
 * be compared with other implementations (SPMF, Fournier-Viger et al.).
 *
 * Input, one sequence per line: positive integer items, " -1 " after each
 * itemset, "-2" at the end of the sequence, e.g. "1 -1 3 -1 2 -1 -2". Lines
 * starting with '#', '%' or '@' (comments, metadata) and blank lines are
 * skipped. Only one item per itemset is supported (callstacks have one frame
 * per position): a larger itemset is refused, naming the line.
 *
 * Output, one pattern per line, items separated by spaces:
 * "1 2 #SUP: 4" (the spec's form; SPMF's tools put " -1" after each item).
 */
#ifndef SM_SPMF_H
#define SM_SPMF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "miner/bide.h"

/* Longest input line accepted, in bytes. */
#define SPMF_LINE_MAX (4u << 20)

struct spmf;   /* handle: the database read, its memory and the error message */

/* Returns a new handle, or NULL on out of memory. Caller frees with spmf_free(). */
struct spmf *spmf_open(void);
/* NULL-safe; frees the database read through it. */
void spmf_free(struct spmf *s);
/* Reads the file at path into *db (every weight 1). db points into the handle: valid until the next read or
 * spmf_free(). Returns 0, or -1 with spmf_error() set ("PATH:LINE: reason" for malformed input). */
int spmf_read(struct spmf *s, const char *path, struct seqdb *db);
/* The same from text[0..len); name stands for the path in messages. */
int spmf_parse(struct spmf *s, const char *name, const char *text, size_t len, struct seqdb *db);
/* The last error, "" if none. Owned by the handle. */
const char *spmf_error(const struct spmf *s);
/* Writes one pattern line "i1 i2 ... #SUP: support". Returns 0 or -1 (write error, errno set). */
int spmf_write_pattern(FILE *f, const uint32_t *items, size_t len, uint64_t support);

#endif
