/* spmf: SPMF sequence databases in, sequential patterns out (see spmf.h). */
#include "miner/spmf.h"
#include "common/vec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct spmf {
	char err[512];
	const char *name;       /* file being parsed, for messages */
	uint32_t *items;        /* all sequences, concatenated */
	size_t nitems, cap_items;
	size_t *off;            /* start of each sequence in items, plus the end */
	size_t nseq, cap_off;
	const uint32_t **seqs;
	uint32_t *lens;
	uint64_t *weights;
};

static void seterr(struct spmf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void seterr(struct spmf *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
}

struct spmf *spmf_open(void)
{
	return calloc(1, sizeof(struct spmf));
}

static void reset(struct spmf *s)
{
	free(s->items);
	free(s->off);
	free(s->seqs);
	free(s->lens);
	free(s->weights);
	s->items = NULL;
	s->off = NULL;
	s->seqs = NULL;
	s->lens = NULL;
	s->weights = NULL;
	s->nitems = s->cap_items = s->nseq = s->cap_off = 0;
}

void spmf_free(struct spmf *s)
{
	if (!s)
		return;
	reset(s);
	free(s);
}

const char *spmf_error(const struct spmf *s)
{
	return s->err;
}

static int push_item(struct spmf *s, uint32_t v)
{
	if (vec_reserve(&s->items, &s->cap_items, s->nitems + 1, sizeof(*s->items)) < 0)
		return -1;
	s->items[s->nitems++] = v;
	return 0;
}

static int push_seq_end(struct spmf *s)
{
	if (vec_reserve(&s->off, &s->cap_off, s->nseq + 2, sizeof(*s->off)) < 0)
		return -1;
	if (!s->nseq)
		s->off[0] = 0;
	s->off[++s->nseq] = s->nitems;
	return 0;
}

/* Token for messages: at most 24 bytes, non-printable bytes as '?'. */
static void token_show(const char *t, size_t n, char out[32])
{
	size_t i;

	for (i = 0; i < n && i < 24; i++)
		out[i] = t[i] >= 0x20 && t[i] < 0x7f ? t[i] : '?';
	if (n > 24) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
}

/* One line (no newline). Returns 0 or -1 with the error set. */
static int parse_line(struct spmf *s, const char *p, size_t n, size_t lineno)
{
	size_t i = 0, inset = 0, start = s->nitems;
	bool ended = false;

	while (n && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	if (i == n || p[i] == '#' || p[i] == '%' || p[i] == '@')
		return 0;
	while (i < n) {
		size_t t = i, len;
		char show[32];

		while (i < n && p[i] != ' ' && p[i] != '\t')
			i++;
		len = i - t;
		while (i < n && (p[i] == ' ' || p[i] == '\t'))
			i++;
		if (ended) {
			token_show(p + t, len, show);
			seterr(s, "%s:%zu: '%s' after the end of the sequence (-2)", s->name, lineno, show);
			return -1;
		}
		if (len == 2 && p[t] == '-' && (p[t + 1] == '1' || p[t + 1] == '2')) {
			bool seq_end = p[t + 1] == '2';

			if (inset > 1) {
				seterr(s, "%s:%zu: itemset with %zu items; only one item per itemset is supported",
				       s->name, lineno, inset);
				return -1;
			}
			if (!inset && !seq_end) {
				seterr(s, "%s:%zu: empty itemset", s->name, lineno);
				return -1;
			}
			inset = 0;
			ended = seq_end;
			continue;
		}
		{
			uint64_t v = 0;
			size_t d;

			for (d = 0; d < len && p[t + d] >= '0' && p[t + d] <= '9' && v <= UINT32_MAX; d++)
				v = v * 10 + (uint64_t)(p[t + d] - '0');
			if (d < len || v == 0 || v > UINT32_MAX) {
				token_show(p + t, len, show);
				seterr(s, "%s:%zu: '%s' is not an item (a positive integer), -1 or -2", s->name,
				       lineno, show);
				return -1;
			}
			if (push_item(s, (uint32_t)v) < 0) {
				seterr(s, "%s:%zu: out of memory", s->name, lineno);
				return -1;
			}
			inset++;
		}
	}
	if (!ended) {
		seterr(s, "%s:%zu: the sequence does not end with -2", s->name, lineno);
		return -1;
	}
	if (s->nitems - start > UINT32_MAX || s->nseq + 1 >= UINT32_MAX) {
		seterr(s, "%s:%zu: too many items or sequences", s->name, lineno);
		return -1;
	}
	if (push_seq_end(s) < 0) {
		seterr(s, "%s:%zu: out of memory", s->name, lineno);
		return -1;
	}
	return 0;
}

/* Builds the seqdb view once every line is in. */
static int finish(struct spmf *s, struct seqdb *db)
{
	size_t n = s->nseq ? s->nseq : 1;

	s->seqs = malloc(n * sizeof(*s->seqs));
	s->lens = malloc(n * sizeof(*s->lens));
	s->weights = malloc(n * sizeof(*s->weights));
	if (!s->seqs || !s->lens || !s->weights) {
		seterr(s, "%s: out of memory", s->name);
		reset(s);
		return -1;
	}
	for (size_t i = 0; i < s->nseq; i++) {
		s->seqs[i] = s->items + s->off[i];
		s->lens[i] = (uint32_t)(s->off[i + 1] - s->off[i]);
		s->weights[i] = 1;
	}
	db->seqs = s->seqs;
	db->lens = s->lens;
	db->weights = s->weights;
	db->n = s->nseq;
	return 0;
}

int spmf_parse(struct spmf *s, const char *name, const char *text, size_t len, struct seqdb *db)
{
	size_t lineno = 0, i = 0;

	reset(s);
	s->err[0] = '\0';
	s->name = name;
	while (i < len) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;

		lineno++;
		if (end - i > SPMF_LINE_MAX) {
			seterr(s, "%s:%zu: line longer than %u bytes", name, lineno, SPMF_LINE_MAX);
			goto fail;
		}
		if (parse_line(s, text + i, end - i, lineno) < 0)
			goto fail;
		i = end + 1;
	}
	return finish(s, db);
fail:
	reset(s);
	return -1;
}

int spmf_read(struct spmf *s, const char *path, struct seqdb *db)
{
	FILE *f;
	char *buf;
	size_t cap = SPMF_LINE_MAX + 1, fill = 0, lineno = 0;
	bool eof = false;

	reset(s);
	s->err[0] = '\0';
	s->name = path;
	f = fopen(path, "r");
	if (!f) {
		seterr(s, "%s: %s", path, strerror(errno));
		return -1;
	}
	buf = malloc(cap);
	if (!buf) {
		seterr(s, "%s: out of memory", path);
		fclose(f);
		return -1;
	}
	/* buf[0..fill) holds the rest of the last read: whole lines are parsed as they come. */
	for (;;) {
		size_t start = 0;
		char *nl;

		if (!eof) {
			size_t got = fread(buf + fill, 1, cap - fill, f);

			fill += got;
			if (got == 0) {
				if (ferror(f)) {
					seterr(s, "%s: %s", path, strerror(errno));
					goto fail;
				}
				eof = true;
			}
		}
		while ((nl = memchr(buf + start, '\n', fill - start))) {
			lineno++;
			if (parse_line(s, buf + start, (size_t)(nl - buf) - start, lineno) < 0)
				goto fail;
			start = (size_t)(nl - buf) + 1;
		}
		if (eof) {
			if (fill > start && parse_line(s, buf + start, fill - start, ++lineno) < 0)
				goto fail;
			break;
		}
		if (start == 0 && fill == cap) {
			seterr(s, "%s:%zu: line longer than %u bytes", path, lineno + 1, SPMF_LINE_MAX);
			goto fail;
		}
		memmove(buf, buf + start, fill - start);
		fill -= start;
	}
	free(buf);
	fclose(f);
	return finish(s, db);
fail:
	free(buf);
	fclose(f);
	reset(s);
	return -1;
}

int spmf_write_pattern(FILE *f, const uint32_t *items, size_t len, uint64_t support)
{
	for (size_t i = 0; i < len; i++)
		if (fprintf(f, "%u ", items[i]) < 0)
			return -1;
	if (fprintf(f, "#SUP: %llu\n", (unsigned long long)support) < 0)
		return -1;
	return 0;
}
