/*
 * wirebench: the wire parser on one core (common/wire.h), for `make bench` (tests/bench/run.sh,
 * section "ingest"). Reads NDJSON files of streams (genfleet's), keeps their lines in memory and
 * reads them again and again for at least a second: the JSON check alone (json_check_members_spans(),
 * as wire_parse() calls it), the whole parse in place (what sm-ingest does with a body it
 * decompressed) and the copying one (sm-agent's, validating what it ships). Prints MB per second,
 * µs per stream and ns per event of each, the best of five timings. Usage: wirebench FILE...
 */
#include "common/arena.h"
#include "common/json.h"
#include "common/vec.h"
#include "common/wire.h"
#include "tests/tools/benchutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lines {
	char **text;     /* each line, its own copy (parsed in place: a copy per reading) */
	char **work;     /* the copies parsed in place */
	size_t *len;
	size_t n, bytes, events;
};

static void load(const char *path, struct lines *l)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f) {
		perror(path);
		exit(1);
	}
	memset(l, 0, sizeof(*l));
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			n--;
		l->text = realloc(l->text, (l->n + 1) * sizeof(*l->text));
		l->work = realloc(l->work, (l->n + 1) * sizeof(*l->work));
		l->len = realloc(l->len, (l->n + 1) * sizeof(*l->len));
		if (!l->text || !l->work || !l->len || !(l->text[l->n] = malloc((size_t)n)) ||
		    !(l->work[l->n] = malloc((size_t)n))) {
			fprintf(stderr, "wirebench: out of memory\n");
			exit(1);
		}
		memcpy(l->text[l->n], line, (size_t)n);
		l->len[l->n] = (size_t)n;
		l->bytes += (size_t)n;
		l->n++;
	}
	free(line);
	fclose(f);
	if (!l->n) {
		fprintf(stderr, "wirebench: %s: no streams\n", path);
		exit(1);
	}
}

enum mode { CHECK, IN_PLACE, COPYING };

/* One reading of every line. Returns its seconds. */
static double pass(struct lines *l, struct wire_parser *p, const struct wire_limits *wl, struct arena *a,
		   struct vec *spans, enum mode mode)
{
	/* the check's limits as wire_parse() sets them */
	const struct json_limits lim = { wl->max_nesting, 2, 0 };
	struct json_members top;
	char err[256];
	double t0;

	for (size_t i = 0; i < l->n; i++)
		memcpy(l->work[i], l->text[i], l->len[i]);
	l->events = 0;
	t0 = now_s();
	for (size_t i = 0; i < l->n; i++) {
		struct wire_stream s;

		if (mode == CHECK) {
			if (json_check_members_spans(l->work[i], l->len[i], &lim, &top, "frames", spans, wl->max_frames,
						     err, sizeof(err)) < 0) {
				fprintf(stderr, "wirebench: line %zu: %s\n", i + 1, err);
				exit(1);
			}
			continue;
		}
		arena_reset(a);
		if ((mode == IN_PLACE ? wire_parse_in_place(p, l->work[i], l->len[i], a, &s)
				      : wire_parse(p, l->work[i], l->len[i], a, &s)) != WIRE_OK) {
			fprintf(stderr, "wirebench: line %zu: %s\n", i + 1, wire_parser_error(p));
			exit(1);
		}
		l->events += s.nevents;
	}
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	struct wire_limits lim;
	struct wire_parser *p;
	struct arena *a = arena_open(0);
	struct vec spans = VEC_INIT(struct json_span);

	if (argc < 2) {
		fprintf(stderr, "usage: wirebench FILE...\n");
		return 2;
	}
	wire_limits_default(&lim);
	lim.max_events = (size_t)1 << 24;   /* a study's streams: 200,000 events each */
	if (!(p = wire_parser_open(&lim)) || !a) {
		fprintf(stderr, "wirebench: out of memory\n");
		return 1;
	}
	for (int f = 1; f < argc; f++) {
		struct lines l;
		double best[3] = { 1e30, 1e30, 1e30 };
		size_t events;

		load(argv[f], &l);
		pass(&l, p, &lim, a, &spans, IN_PLACE);
		events = l.events;
		for (int k = CHECK; k <= COPYING; k++) {
			double spent = 0;

			for (int round = 0; round < 5 || spent < 1.0; round++) {
				double t = pass(&l, p, &lim, a, &spans, (enum mode)k);

				spent += t;
				if (t < best[k])
					best[k] = t;
			}
		}
		const char *name = strrchr(argv[f], '/') ? strrchr(argv[f], '/') + 1 : argv[f];

		printf("wire_parse %s: %zu streams, %zu events, %.1f MB: check %.0f MB/s (%.0f ns an event); "
		       "check and parse in place %.0f MB/s (%.1f us a stream, %.0f ns an event), copying %.0f MB/s "
		       "(%.1f us, %.0f ns)\n",
		       name, l.n, events, l.bytes / 1e6, l.bytes / 1e6 / best[0], best[0] * 1e9 / (double)events,
		       l.bytes / 1e6 / best[1], best[1] * 1e6 / (double)l.n, best[1] * 1e9 / (double)events,
		       l.bytes / 1e6 / best[2], best[2] * 1e6 / (double)l.n, best[2] * 1e9 / (double)events);
		for (size_t i = 0; i < l.n; i++) {
			free(l.text[i]);
			free(l.work[i]);
		}
		free(l.text);
		free(l.work);
		free(l.len);
	}
	vec_free(&spans);
	arena_free(a);
	wire_parser_free(p);
	return 0;
}
