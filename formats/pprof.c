/* pprof: profile.proto and the legacy pprof formats to run and wait events (see pprof.h). */
#include "formats/pprof.h"
#include "formats/import.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/proto/profile.pb-c.h"
#include "common/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Function Function;
typedef Perftools__Profiles__Sample Sample;

#define MAX_LEGACY_MAPS 65536

/* A memory range of a legacy profile's map: addresses in it belong to module name. */
struct lmap {
	uint64_t start, end, offset;
	char name[256];
};

struct pp {
	struct importer *im;
	struct buf fb;                /* the frame string being built */
	uint32_t *stk;                /* a sample's frames, outermost first, before the cut */
	size_t nstk, cap_stk;
	uint32_t *lf;                 /* frames of every location, runs of lf_len */
	size_t nlf, cap_lf;
	struct imap loc_run;          /* location index -> (offset << 16 | count) in lf */
	struct imap by_id;            /* profile id -> index (locations, then functions, mappings) */
	struct imap fn_id, map_id;
	struct lmap *maps;            /* legacy: /proc/self/maps */
	size_t nmaps, cap_maps;
	struct imap syms;             /* legacy Java: address -> frame id */
	struct imap acache;           /* legacy: address -> frame id, once made */
	char prog[256];               /* legacy: the first map's file, the program */
	struct intern *lsets;         /* a sample's raw labels -> index in lset_* (most repeat) */
	uint32_t *lset_group;
	int64_t *lset_tid;
	size_t cap_lset_g, cap_lset_t;
	struct buf lkey;
};

static void pp_free(struct pp *p)
{
	buf_release(&p->fb);
	free(p->stk);
	free(p->lf);
	free(p->maps);
	imap_free(&p->loc_run);
	imap_free(&p->by_id);
	imap_free(&p->fn_id);
	imap_free(&p->map_id);
	imap_free(&p->syms);
	imap_free(&p->acache);
	intern_free(p->lsets);
	free(p->lset_group);
	free(p->lset_tid);
	buf_release(&p->lkey);
}

static const char *base_name(const char *s)
{
	const char *slash = strrchr(s, '/');

	return slash && slash[1] ? slash + 1 : s;
}

static int push_frame(struct pp *p, uint32_t f)
{
	if (vec_reserve(&p->stk, &p->cap_stk, p->nstk + 1, sizeof(*p->stk)) < 0)
		return import_fail_input(p->im, "out of memory");
	p->stk[p->nstk++] = f;
	return 0;
}

/* The stack in p->stk (outermost first), its innermost WIRE_MAX_STACK_DEPTH frames. */
static int64_t pp_stack(struct pp *p)
{
	size_t skip = p->nstk > WIRE_MAX_STACK_DEPTH ? p->nstk - WIRE_MAX_STACK_DEPTH : 0;

	if (!p->nstk) {
		int64_t f = import_frame(p->im, "[unknown]", 9);

		if (f < 0 || push_frame(p, (uint32_t)f) < 0)
			return -1;
	}
	return import_stack(p->im, p->stk + skip, p->nstk - skip);
}

/* Adds one event of dur ns laid end to end on thread tid's timeline. */
static int pp_event(struct pp *p, int64_t tid, enum wire_kind kind, int64_t stack, int64_t dur)
{
	struct wire_event e = { .tid = tid, .dur_ns = dur, .stack = (uint32_t)stack,
				.kind = (uint8_t)kind };

	if ((e.ts_ns = import_lay(p->im, tid, dur)) < 0)
		return -1;
	return import_event(p->im, &e) < 0 ? -1 : 0;
}

/* "module+0xOFFSET" for an address without a symbol. */
static int64_t addr_frame(struct pp *p, const char *module, uint64_t off)
{
	buf_reset(&p->fb);
	buf_printf(&p->fb, "%s+0x%llx", module && *module ? module : "[unknown]",
		   (unsigned long long)off);
	if (buf_error(&p->fb))
		return import_fail_input(p->im, "out of memory");
	return import_frame(p->im, p->fb.data, p->fb.len);
}

/* ---- profile.proto ---- */

/* String i of the table, or NULL (with the error set, naming what) when out of range. */
static const char *pstr(struct pp *p, const Profile *pr, int64_t i, const char *what, size_t idx)
{
	if (i < 0 || (uint64_t)i >= pr->n_string_table) {
		import_fail_input(p->im, "%s[%zu]: string index %lld out of range (%zu strings)", what,
				  idx, (long long)i, pr->n_string_table);
		return NULL;
	}
	return pr->string_table[i] ? pr->string_table[i] : "";
}

/* Which value of each sample is the cost, its scale to ns and its kind. */
struct choice {
	size_t n;             /* 1, or 2 when a profile has both a run and a wait column */
	size_t idx[2];
	int64_t scale[2];     /* ns per unit of the value */
	enum wire_kind kind[2];
};

static int describe_types(struct pp *p, const Profile *pr, struct buf *b)
{
	for (size_t i = 0; i < pr->n_sample_type; i++) {
		const char *t = pstr(p, pr, pr->sample_type[i]->type, "sample_type", i);
		const char *u = t ? pstr(p, pr, pr->sample_type[i]->unit, "sample_type", i) : NULL;

		if (!u)
			return -1;
		buf_printf(b, "%s%s/%s", i ? ", " : "", t, u);
	}
	return 0;
}

/* Which time-valued type to read when none is named: the default one, then by name. */
static int type_rank(const Profile *pr, size_t i)
{
	static const char *const prefer[] = { "cpu", "delay", "off_cpu", "wall", "time" };
	const char *t = pr->string_table[pr->sample_type[i]->type];

	if (pr->default_sample_type && pr->default_sample_type == pr->sample_type[i]->type)
		return 0;
	for (size_t k = 0; k < sizeof(prefer) / sizeof(prefer[0]); k++)
		if (strcmp(t, prefer[k]) == 0)
			return 1 + (int)k;
	return 100;
}

static int choose_value(struct pp *p, const Profile *pr, struct choice *c)
{
	const struct import_opts *o = import_opts_of(p->im);
	const char *want = o->sample_type, *ptype = "", *punit = "";
	struct buf types = BUF_INIT(4096);
	int64_t best = -1, count = -1, pscale = 0;
	bool memory = false, found = false;
	int rc = -1;

	if (!pr->n_sample_type)
		return import_fail_input(p->im, "no sample_type: not a pprof profile");
	if (pr->period_type) {
		if (!(ptype = pstr(p, pr, pr->period_type->type, "period_type", 0)) ||
		    !(punit = pstr(p, pr, pr->period_type->unit, "period_type", 0)))
			return -1;
		pscale = import_unit_ns(punit);
	}
	if (describe_types(p, pr, &types) < 0)
		goto out_types;
	if (buf_error(&types)) {
		import_fail_input(p->im, "out of memory");
		goto out_types;
	}
	for (size_t i = 0; i < pr->n_sample_type; i++) {
		const char *t = pr->string_table[pr->sample_type[i]->type];
		const char *u = pr->string_table[pr->sample_type[i]->unit];

		if (want && strcmp(t, want) != 0)
			continue;
		found = true;
		if (strcmp(u, "bytes") == 0 || strncmp(t, "alloc_", 6) == 0 ||
		    strncmp(t, "inuse_", 6) == 0)
			memory = true;
		if (import_unit_ns(u)) {
			if (best < 0 || type_rank(pr, i) < type_rank(pr, (size_t)best))
				best = (int64_t)i;
		} else if (strcmp(u, "count") == 0 && (count < 0 || strcmp(t, "samples") == 0)) {
			count = (int64_t)i;
		}
	}
	if (best >= 0) {
		const char *t = pr->string_table[pr->sample_type[best]->type];

		c->n = 1;
		c->idx[0] = (size_t)best;
		c->scale[0] = import_unit_ns(pr->string_table[pr->sample_type[best]->unit]);
		c->kind[0] = import_wait_type(t) || import_wait_type(ptype) ? WIRE_WAIT : WIRE_RUN;
		/* running and waiting in one profile (cpu and off_cpu, as sm-web exports): both */
		for (size_t i = 0; !want && i < pr->n_sample_type; i++) {
			const char *t2 = pr->string_table[pr->sample_type[i]->type];
			int64_t sc = import_unit_ns(pr->string_table[pr->sample_type[i]->unit]);

			if (i != (size_t)best && sc && import_wait_type(t2) != (c->kind[0] == WIRE_WAIT)) {
				c->n = 2;
				c->idx[1] = i;
				c->scale[1] = sc;
				c->kind[1] = import_wait_type(t2) ? WIRE_WAIT : WIRE_RUN;
				break;
			}
		}
		rc = 0;
	} else if (count >= 0 && pscale && !memory) {
		/* samples counted at a period of time: each count stands for one period */
		c->n = 1;
		c->idx[0] = (size_t)count;
		if (o->sample_period_ns > 0)
			c->scale[0] = o->sample_period_ns;
		else if (pr->period > 0 && pr->period <= WIRE_MAX_TIME_NS / pscale)
			c->scale[0] = pr->period * pscale;
		else
			c->scale[0] = IMPORT_DEFAULT_PERIOD_NS;
		c->kind[0] = import_wait_type(ptype) ||
			     import_wait_type(pr->string_table[pr->sample_type[count]->type]) ? WIRE_WAIT
											 : WIRE_RUN;
		rc = 0;
	} else if (want && !found) {
		import_fail_input(p->im, "sample type \"%s\" is not in the profile (it has %s)", want,
				  types.data);
	} else if (memory) {
		import_fail_input(p->im, "a memory profile (%s): stackmine's costs are time, "
				  "so it cannot be imported", types.data);
	} else {
		import_fail_input(p->im, "no sample type measures time (%s; period %s/%s)",
				  types.data, *ptype ? ptype : "-", *punit ? punit : "-");
	}
out_types:
	buf_release(&types);
	return rc;
}

/* Index the ids of one table (locations, functions or mappings): id -> position. */
static int index_table(struct pp *p, struct imap *m, size_t n, uint64_t (*id_at)(const Profile *, size_t),
		       const Profile *pr, const char *what)
{
	if (imap_reserve(m, n) < 0)
		return import_fail_input(p->im, "out of memory");
	for (size_t i = 0; i < n; i++) {
		uint64_t id = id_at(pr, i);

		if (id == 0 || id == IMAP_EMPTY)
			return import_fail_input(p->im, "%s[%zu].id: must be 1 or more", what, i);
		if (imap_put(m, id, i) != 0)
			return import_fail_input(p->im, "%s[%zu].id: %llu used twice", what, i,
						 (unsigned long long)id);
	}
	return 0;
}

static uint64_t location_id(const Profile *pr, size_t i)
{
	return pr->location[i]->id;
}

static uint64_t function_id(const Profile *pr, size_t i)
{
	return pr->function[i]->id;
}

static uint64_t mapping_id(const Profile *pr, size_t i)
{
	return pr->mapping[i]->id;
}

static int index_ids(struct pp *p, const Profile *pr)
{
	if (index_table(p, &p->by_id, pr->n_location, location_id, pr, "location") < 0 ||
	    index_table(p, &p->fn_id, pr->n_function, function_id, pr, "function") < 0 ||
	    index_table(p, &p->map_id, pr->n_mapping, mapping_id, pr, "mapping") < 0)
		return -1;
	return 0;
}

/* The frames of location li, outermost first (its last line is the caller of the others). */
static int location_frames(struct pp *p, const Profile *pr, size_t li, size_t *off, size_t *n)
{
	const Location *l = pr->location[li];
	const char *module = NULL;
	uint64_t v;
	size_t start = p->nlf;

	if (imap_get(&p->loc_run, li, &v)) {
		*off = (size_t)(v >> 16);
		*n = (size_t)(v & 0xffff);
		return 0;
	}
	if (l->mapping_id) {
		const Mapping *m;

		if (!imap_get(&p->map_id, l->mapping_id, &v))
			return import_fail_input(p->im, "location[%zu].mapping_id: no mapping %llu", li,
						 (unsigned long long)l->mapping_id);
		m = pr->mapping[v];
		if (!(module = pstr(p, pr, m->filename, "mapping.filename", (size_t)v)))
			return -1;
		module = base_name(module);
	}
	for (size_t k = l->n_line; k-- > 0;) {
		const Function *fn;
		const char *name;
		int64_t f;

		if (!imap_get(&p->fn_id, l->line[k]->function_id, &v))
			return import_fail_input(p->im, "location[%zu].line[%zu].function_id: no function %llu",
						 li, k, (unsigned long long)l->line[k]->function_id);
		fn = pr->function[v];
		if (!(name = pstr(p, pr, fn->name, "function.name", (size_t)v)))
			return -1;
		if (!*name && !(name = pstr(p, pr, fn->system_name, "function.system_name", (size_t)v)))
			return -1;
		if (module && *module && !strchr(name, '!')) {
			buf_reset(&p->fb);
			buf_puts(&p->fb, module);
			buf_putc(&p->fb, '!');
			buf_puts(&p->fb, *name ? name : "[unknown]");
			if (buf_error(&p->fb))
				return import_fail_input(p->im, "out of memory");
			f = import_frame(p->im, p->fb.data, p->fb.len);
		} else {
			f = import_frame(p->im, name, strlen(name));
		}
		if (f < 0)
			return -1;
		if (vec_reserve(&p->lf, &p->cap_lf, p->nlf + 1, sizeof(*p->lf)) < 0)
			return import_fail_input(p->im, "out of memory");
		p->lf[p->nlf++] = (uint32_t)f;
	}
	if (!l->n_line) {
		uint64_t addr = l->address;
		int64_t f;

		if (l->mapping_id && imap_get(&p->map_id, l->mapping_id, &v)) {
			const Mapping *m = pr->mapping[v];

			if (addr >= m->memory_start)
				addr = addr - m->memory_start + m->file_offset;
		}
		if ((f = addr_frame(p, module, addr)) < 0)
			return -1;
		if (vec_reserve(&p->lf, &p->cap_lf, p->nlf + 1, sizeof(*p->lf)) < 0)
			return import_fail_input(p->im, "out of memory");
		p->lf[p->nlf++] = (uint32_t)f;
	}
	if (p->nlf - start > 0xffff || start > (SIZE_MAX >> 17))
		return import_fail_input(p->im, "location[%zu]: too many lines", li);
	if (imap_put(&p->loc_run, li, (uint64_t)start << 16 | (p->nlf - start)) < 0)
		return import_fail_input(p->im, "out of memory");
	*off = start;
	*n = p->nlf - start;
	return 0;
}

static bool key_is(const char *k, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(k, names[i]) == 0)
			return true;
	return false;
}

/* The sample's thread (from its thread labels) and its stream (the other labels). */
static int sample_labels(struct pp *p, const Profile *pr, const Sample *s, size_t si,
			 const char *prog, int64_t *tid, int64_t *group)
{
	static const char *const tid_keys[] = { "thread_id", "tid", "thread.id", "thread" };
	static const char *const comm_keys[] = { "thread_name", "thread.name", "comm" };
	struct wire_label labels[WIRE_MAX_LABELS] = { { NULL, NULL } };
	char nums[WIRE_MAX_LABELS][48];
	const char *comm = NULL;
	int64_t t = -1;
	size_t n = 0;

	for (size_t i = 0; i < s->n_label; i++) {
		const Perftools__Profiles__Label *l = s->label[i];
		const char *k = pstr(p, pr, l->key, "sample.label.key", si), *v;

		if (!k || !(v = pstr(p, pr, l->str, "sample.label.str", si)))
			return -1;
		if (key_is(k, tid_keys, sizeof(tid_keys) / sizeof(tid_keys[0]))) {
			char *end;
			long long x = l->str ? strtoll(v, &end, 10) : l->num;

			if (!((l->str && (*end || end == v)) || x < 0 || x > INT32_MAX)) {
				t = x;
				continue;
			}
			/* not a thread id after all: it stays a label */
		}
		if (l->str && key_is(k, comm_keys, sizeof(comm_keys) / sizeof(comm_keys[0]))) {
			comm = v;
			continue;
		}
		if (!*k || n == WIRE_MAX_LABELS)
			continue;
		if (!l->str) {
			const char *u = pstr(p, pr, l->num_unit, "sample.label.num_unit", si);

			if (!u)
				return -1;
			snprintf(nums[n], sizeof(nums[n]), "%lld%s%s", (long long)l->num, *u ? " " : "", u);
			v = nums[n];
		}
		labels[n].key = k;
		labels[n].value = v;
		n++;
	}
	if ((*group = import_group(p->im, labels, n)) < 0)
		return -1;
	if (t >= 0) {
		if (import_thread(p->im, t, comm ? comm : "", comm ? strlen(comm) : 0) < 0)
			return -1;
		*tid = t;
		return 0;
	}
	if (!comm)
		comm = prog;
	*tid = import_pseudo_tid(p->im, comm, strlen(comm));
	return *tid < 0 ? -1 : 0;
}

/* sample_labels() once per distinct set of raw labels: a profile repeats a few sets. */
static int sample_labels_cached(struct pp *p, const Profile *pr, const Sample *s, size_t si,
				const char *prog, int64_t *tid)
{
	bool added;
	int64_t k, g;

	buf_reset(&p->lkey);
	for (size_t i = 0; i < s->n_label; i++) {
		const Perftools__Profiles__Label *l = s->label[i];
		int64_t raw[4] = { l->key, l->str, l->num, l->num_unit };

		buf_append(&p->lkey, raw, sizeof(raw));
	}
	if (buf_error(&p->lkey))
		return import_fail_input(p->im, "out of memory");
	k = intern_put(p->lsets, p->lkey.data ? p->lkey.data : "", p->lkey.len, &added);
	if (k < 0)
		return import_fail_input(p->im, "out of memory");
	if (!added) {
		import_use_group(p->im, p->lset_group[k]);
		*tid = p->lset_tid[k];
		return 0;
	}
	if (vec_reserve(&p->lset_group, &p->cap_lset_g, (size_t)k + 1, sizeof(*p->lset_group)) < 0 ||
	    vec_reserve(&p->lset_tid, &p->cap_lset_t, (size_t)k + 1, sizeof(*p->lset_tid)) < 0)
		return import_fail_input(p->im, "out of memory");
	if (sample_labels(p, pr, s, si, prog, tid, &g) < 0)
		return -1;
	p->lset_group[k] = (uint32_t)g;
	p->lset_tid[k] = *tid;
	return 0;
}

/* Reverses p->stk[0..nstk): stacks are gathered leaf first, to stop at the depth kept. */
static void reverse_stk(struct pp *p)
{
	for (size_t i = 0, j = p->nstk; i + 1 < j; i++, j--) {
		uint32_t t = p->stk[i];

		p->stk[i] = p->stk[j - 1];
		p->stk[j - 1] = t;
	}
}

/* The sample's stack (its locations' frames, outermost first; the innermost
 * WIRE_MAX_STACK_DEPTH) as a stack id in *st. */
static int sample_stack(struct pp *p, const Profile *pr, const Sample *s, size_t si, int64_t *st)
{
	p->nstk = 0;
	for (size_t k = 0; k < s->n_location_id; k++) {
		uint64_t li;
		size_t off = 0, n = 0;

		if (!imap_get(&p->by_id, s->location_id[k], &li))
			return import_fail_input(p->im, "sample[%zu].location_id[%zu]: no location %llu", si,
						 k, (unsigned long long)s->location_id[k]);
		if (p->nstk == WIRE_MAX_STACK_DEPTH)
			continue;   /* deeper than kept: only checked */
		if (location_frames(p, pr, (size_t)li, &off, &n) < 0)
			return -1;
		/* a location's frames are outermost first: its innermost is the last */
		for (size_t j = n; j-- > 0 && p->nstk < WIRE_MAX_STACK_DEPTH;)
			if (push_frame(p, p->lf[off + j]) < 0)
				return -1;
	}
	reverse_stk(p);
	return (*st = pp_stack(p)) < 0 ? -1 : 0;
}

/*
 * protobuf-c's allocations for one message come from an arena, held to a budget: a message
 * a few bytes a field long could otherwise unpack into many times its size; the arena also
 * spares the thousands of small mallocs and frees of a profile's messages.
 */
struct pb_budget {
	struct arena *a;
	size_t max;
	bool over;            /* an allocation was refused for the budget */
};

#define PB_EXPANSION 12   /* real profiles unpack into 5 to 7 times their size */
#define PB_SLACK ((size_t)16 << 20)

static void *pb_alloc(void *data, size_t size)
{
	struct pb_budget *b = data;
	void *p = arena_alloc(b->a, size);

	if (!p && (size > b->max || arena_used(b->a) > b->max - size))
		b->over = true;
	return p;
}

static void pb_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr;   /* the arena is freed whole */
}

static int import_proto(struct pp *p, const unsigned char *data, size_t len)
{
	struct pb_budget budget = { NULL, len > (SIZE_MAX - PB_SLACK) / PB_EXPANSION ? SIZE_MAX
					     : len * PB_EXPANSION + PB_SLACK, false };
	ProtobufCAllocator alloc = { pb_alloc, pb_free, &budget };
	Profile *pr;

	if (!(budget.a = arena_open(budget.max)))
		return import_fail_input(p->im, "out of memory");
	pr = perftools__profiles__profile__unpack(&alloc, len, data);
	const char *prog = "pprof";
	struct choice c = { 1, { 0, 0 }, { 1, 1 }, { WIRE_RUN, WIRE_RUN } };
	int rc = -1;

	if (!pr && budget.over) {
		arena_free(budget.a);
		import_mark_too_large(p->im);
		return import_fail_input(p->im, "the protobuf message unpacks into more than %zu bytes "
					 "(%d times its size)", budget.max, PB_EXPANSION);
	}
	if (!pr) {
		arena_free(budget.a);
		return import_fail_input(p->im, "not a pprof profile: the protobuf message does not "
					 "decode (or out of memory)");
	}
	if (pr->n_string_table == 0 || (pr->string_table[0] && pr->string_table[0][0])) {
		import_fail_input(p->im, "string_table[0]: must be \"\" (not a pprof profile?)");
		goto out_free;
	}
	if (choose_value(p, pr, &c) < 0 || index_ids(p, pr) < 0)
		goto out_free;
	/* samples have no time: each thread's are laid end to end from the profile's start */
	import_lay_origin(p->im, pr->time_nanos > 0 && pr->time_nanos < WIRE_MAX_TIME_NS / 2
				 ? pr->time_nanos : 0);
	if (pr->n_mapping) {
		const char *f = pstr(p, pr, pr->mapping[0]->filename, "mapping.filename", 0);

		if (!f)
			goto out_free;
		if (*f)
			prog = base_name(f);
	}
	for (size_t si = 0; si < pr->n_sample; si++) {
		const Sample *s = pr->sample[si];
		int64_t v, tid = -1, st, dur;

		if (s->n_value != pr->n_sample_type) {
			import_fail_input(p->im, "sample[%zu].value: %zu values for %zu sample types", si,
					  s->n_value, pr->n_sample_type);
			goto out_free;
		}
		p->nstk = 0;
		st = -1;
		for (size_t k = 0; k < c.n; k++) {
			v = s->value[c.idx[k]];
			if (v < 0) {
				import_fail_input(p->im, "sample[%zu].value[%zu]: negative (%lld): a difference "
						  "of two profiles cannot be imported", si, c.idx[k], (long long)v);
				goto out_free;
			}
			if (!v)
				continue;
			if (v > WIRE_MAX_TIME_NS / c.scale[k]) {
				import_fail_input(p->im, "sample[%zu].value[%zu]: %lld is too large", si,
						  c.idx[k], (long long)v);
				goto out_free;
			}
			dur = v * c.scale[k];
			if (st < 0 && (sample_stack(p, pr, s, si, &st) < 0 ||
				       sample_labels_cached(p, pr, s, si, prog, &tid) < 0))
				goto out_free;
			if (pp_event(p, tid, c.kind[k], st, dur) < 0)
				goto out_free;
		}
	}
	rc = 0;
out_free:
	arena_free(budget.a);   /* the message, whole */
	return rc;
}

/* ---- the legacy formats ---- */

/* Word i of a legacy binary profile of word size ws (4 or 8) and byte order be. */
static uint64_t word_at(const unsigned char *d, size_t i, int ws, bool be)
{
	uint64_t v = 0;

	for (int k = 0; k < ws; k++) {
		unsigned char b = d[i * (size_t)ws + (size_t)(be ? k : ws - 1 - k)];

		v = v << 8 | b;
	}
	return v;
}

/* A legacy CPU profile's header: words 0, 3, version (0 C++, 1 Java), period (us), 0. */
static bool legacy_cpu(const unsigned char *d, size_t len, int *ws, bool *be, bool *java,
		       uint64_t *period)
{
	for (int w = 4; w <= 8; w += 4)
		for (int b = 0; b < 2; b++) {
			if (len < 5 * (size_t)w)
				continue;
			if (word_at(d, 0, w, b) == 0 && word_at(d, 1, w, b) == 3 &&
			    word_at(d, 2, w, b) <= 1 && word_at(d, 3, w, b) > 0 &&
			    word_at(d, 4, w, b) == 0) {
				*ws = w;
				*be = b;
				*java = word_at(d, 2, w, b) == 1;
				*period = word_at(d, 3, w, b);
				return true;
			}
		}
	return false;
}

static bool text_prefix(const unsigned char *d, size_t len, const char *s)
{
	size_t n = strlen(s);

	while (len && (*d == ' ' || *d == '\t' || *d == '\r' || *d == '\n')) {
		d++;
		len--;
	}
	return len >= n && memcmp(d, s, n) == 0;
}

/* Whether the buffer holds a byte no text has. */
static bool binary_bytes(const unsigned char *d, size_t len)
{
	for (size_t i = 0; i < len && i < 4096; i++)
		if (d[i] < 0x09 || (d[i] > 0x0d && d[i] < 0x20))
			return true;
	return false;
}

bool pprof_sniff(const unsigned char *d, size_t len)
{
	static const unsigned char tags[] = { 0x0a, 0x12, 0x1a, 0x22, 0x2a, 0x32, 0x38, 0x40,
					      0x48, 0x50, 0x5a, 0x60, 0x68, 0x6a, 0x70, 0x7a };
	int ws;
	bool be, java;
	uint64_t period;

	if (legacy_cpu(d, len, &ws, &be, &java, &period))
		return true;
	if (text_prefix(d, len, "--- contention") || text_prefix(d, len, "--- heapz") ||
	    text_prefix(d, len, "heap profile:") || text_prefix(d, len, "--- heap"))
		return true;
	return len && memchr(tags, d[0], sizeof(tags)) && binary_bytes(d, len);
}

/* One line of data[*pos..len): returns its length, *line its start; -1 at the end. */
static ssize_t next_text_line(const unsigned char *d, size_t len, size_t *pos, const char **line)
{
	const unsigned char *nl;
	size_t n;

	if (*pos >= len)
		return -1;
	*line = (const char *)d + *pos;
	nl = memchr(d + *pos, '\n', len - *pos);
	n = nl ? (size_t)(nl - (d + *pos)) : len - *pos;
	*pos += n + (nl ? 1 : 0);
	if (n && (*line)[n - 1] == '\r')
		n--;
	return (ssize_t)n;
}

static const char *skip_ws(const char *s, const char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

/* A hexadecimal number (with or without 0x) at s; returns its end or NULL. */
static const char *parse_hex(const char *s, const char *end, uint64_t *v)
{
	const char *start;

	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	start = s;
	*v = 0;
	for (; s < end; s++) {
		int c = *s, h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (h < 0)
			break;
		if (s - start >= 16)
			return NULL;
		*v = *v << 4 | (uint64_t)h;
	}
	return s > start ? s : NULL;
}

static const char *parse_dec(const char *s, const char *end, int64_t *v)
{
	const char *start = s;

	*v = 0;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (s - start >= 18)
			return NULL;
		*v = *v * 10 + (*s - '0');
	}
	return s > start ? s : NULL;
}

/*
 * The text that follows a legacy profile's samples: /proc/self/maps lines
 * ("start-end perms offset dev inode path"), the "start-end: path" lines of a contention
 * profile's memory map, or a Java profile's symbols ("0xADDR name (file:line)").
 */
static int legacy_tail(struct pp *p, const unsigned char *d, size_t len, size_t pos)
{
	const char *line;
	ssize_t n;

	while ((n = next_text_line(d, len, &pos, &line)) >= 0) {
		const char *end = line + n, *s = skip_ws(line, end), *q;
		uint64_t a, b, off = 0;

		if ((q = parse_hex(s, end, &a)) && q < end && *q == '-' &&
		    (q = parse_hex(q + 1, end, &b)) && b > a) {
			/* a map line: the path is the last field (after the inode, or after ':') */
			struct lmap *m;
			const char *name = q, *e2 = end;
			int field = 0;

			if (q < end && *q == ':') {
				name = skip_ws(q + 1, end);
			} else {
				/* perms offset dev inode path */
				for (const char *t = skip_ws(q, end); t < end && field < 4; field++) {
					const char *te = t;

					while (te < end && *te != ' ' && *te != '\t')
						te++;
					if (field == 1)
						parse_hex(t, te, &off);
					t = skip_ws(te, end);
					name = t;
				}
			}
			while (e2 > name && (e2[-1] == ' ' || e2[-1] == '\t'))
				e2--;
			if (e2 == name || p->nmaps >= MAX_LEGACY_MAPS)
				continue;
			if (vec_reserve(&p->maps, &p->cap_maps, p->nmaps + 1, sizeof(*p->maps)) < 0)
				return import_fail_input(p->im, "out of memory");
			m = &p->maps[p->nmaps++];
			m->start = a;
			m->end = b;
			m->offset = off;
			{
				/* base name, at most 255 bytes */
				const char *bn = name;

				for (const char *t = name; t < e2; t++)
					if (*t == '/' && t + 1 < e2)
						bn = t + 1;
				snprintf(m->name, sizeof(m->name), "%.*s", (int)(e2 - bn), bn);
				if (p->nmaps == 1)
					memcpy(p->prog, m->name, sizeof(p->prog));
			}
			continue;
		}
		if (s + 2 < end && s[0] == '0' && s[1] == 'x' && (q = parse_hex(s, end, &a)) && q < end &&
		    (*q == ' ' || *q == '\t')) {
			/* a Java symbol: the name, without " (file:line)" */
			const char *name = skip_ws(q, end), *e2 = end;
			int64_t f;

			if (e2 > name && e2[-1] == ')') {
				const char *lp = e2 - 1;

				while (lp > name && *lp != '(')
					lp--;
				if (lp > name && lp[-1] == ' ')
					e2 = lp - 1;
			}
			while (e2 > name && (e2[-1] == ' ' || e2[-1] == '\t'))
				e2--;
			if ((f = import_frame(p->im, name, (size_t)(e2 - name))) < 0)
				return -1;
			if (imap_put(&p->syms, a, (uint64_t)f) < 0)
				return import_fail_input(p->im, "out of memory");
		}
	}
	return 0;
}

static int cmp_lmap(const void *a, const void *b)
{
	const struct lmap *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The frame of an address: a Java symbol, else module+0xOFFSET of the map holding it (the
 * maps sorted by start, searched by halves), else [unknown]+0xADDRESS; cached. */
static int64_t legacy_frame(struct pp *p, uint64_t addr)
{
	uint64_t f;
	size_t lo = 0, hi = p->nmaps;
	int64_t id;

	if (imap_get(&p->syms, addr, &f) || imap_get(&p->acache, addr, &f))
		return (int64_t)f;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->maps[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && addr < p->maps[lo - 1].end)
		id = addr_frame(p, p->maps[lo - 1].name, addr - p->maps[lo - 1].start + p->maps[lo - 1].offset);
	else
		id = addr_frame(p, NULL, addr);
	if (id >= 0 && addr != IMAP_EMPTY && imap_put(&p->acache, addr, (uint64_t)id) < 0)
		return import_fail_input(p->im, "out of memory");
	return id;
}

/* The program's name for the pseudo thread: the first mapping's, else "pprof". */
static const char *legacy_prog(const struct pp *p, bool java)
{
	if (java)
		return "java";
	return p->prog[0] ? p->prog : "pprof";
}

/* Legacy samples kept until the addresses can be named (the maps come after them). */
struct lsample {
	int64_t dur;
	size_t off, n;           /* addresses in the address vector, leaf first */
};

static int legacy_emit(struct pp *p, const struct lsample *ls, size_t nls, const uint64_t *addrs,
		       enum wire_kind kind, bool java)
{
	const char *prog = legacy_prog(p, java);
	int64_t tid = import_pseudo_tid(p->im, prog, strlen(prog));

	if (tid < 0)
		return -1;
	if (p->nmaps)
		qsort(p->maps, p->nmaps, sizeof(*p->maps), cmp_lmap);
	for (size_t i = 0; i < nls; i++) {
		int64_t st;

		/* leaf first, the innermost frames only, then outermost first */
		p->nstk = 0;
		for (size_t k = 0; k < ls[i].n && p->nstk < WIRE_MAX_STACK_DEPTH; k++) {
			int64_t f = legacy_frame(p, addrs[ls[i].off + k]);

			if (f < 0 || push_frame(p, (uint32_t)f) < 0)
				return -1;
		}
		reverse_stk(p);
		if ((st = pp_stack(p)) < 0 || pp_event(p, tid, kind, st, ls[i].dur) < 0)
			return -1;
	}
	return 0;
}

static int import_legacy_cpu(struct pp *p, const unsigned char *d, size_t len, int ws, bool be,
			     bool java, uint64_t period_us)
{
	size_t nw = len / (size_t)ws, i = 5, nls = 0, cap_ls = 0, na = 0, cap_a = 0;
	const struct import_opts *o = import_opts_of(p->im);
	int64_t period = o->sample_period_ns > 0 ? o->sample_period_ns
			 : period_us <= (uint64_t)(WIRE_MAX_TIME_NS / 1000) ? (int64_t)period_us * 1000 : -1;
	struct lsample *ls = NULL;
	uint64_t *addrs = NULL;
	bool ended = false;
	int rc = -1;

	if (period < 0)
		return import_fail_input(p->im, "legacy CPU profile: period %llu us out of range",
					 (unsigned long long)period_us);
	while (i + 2 <= nw) {
		uint64_t count = word_at(d, i, ws, be), depth = word_at(d, i + 1, ws, be);

		if (depth > nw - i - 2) {
			import_fail_input(p->im, "legacy CPU profile: sample at byte %zu has %llu frames, "
					  "past the end", i * (size_t)ws, (unsigned long long)depth);
			goto out_free;
		}
		if (count == 0 && depth == 1 && word_at(d, i + 2, ws, be) == 0) {
			i += 3;
			ended = true;
			break;
		}
		if (count > (uint64_t)(WIRE_MAX_TIME_NS / period)) {
			import_fail_input(p->im, "legacy CPU profile: count %llu at byte %zu is too large",
					  (unsigned long long)count, i * (size_t)ws);
			goto out_free;
		}
		if (count) {
			if (vec_reserve(&ls, &cap_ls, nls + 1, sizeof(*ls)) < 0 ||
			    vec_reserve(&addrs, &cap_a, na + depth + 1, sizeof(*addrs)) < 0) {
				import_fail_input(p->im, "out of memory");
				goto out_free;
			}
			ls[nls++] = (struct lsample){ .dur = (int64_t)count * period, .off = na, .n = depth };
			for (uint64_t k = 0; k < depth; k++) {
				uint64_t a = word_at(d, i + 2 + k, ws, be);

				/* return addresses point after the call: pprof takes one off */
				addrs[na++] = !java && k > 0 && a ? a - 1 : a;
			}
		}
		i += 2 + depth;
	}
	if (!ended) {
		import_fail_input(p->im, "legacy CPU profile: no end-of-samples marker (truncated?)");
		goto out_free;
	}
	if (legacy_tail(p, d, len, i * (size_t)ws) < 0 ||
	    legacy_emit(p, ls, nls, addrs, WIRE_RUN, java) < 0)
		goto out_free;
	rc = 0;
out_free:
	free(ls);
	free(addrs);
	return rc;
}

/* "--- contentionz 1 ---" (or "--- contention ---") and "key = value" lines, samples
 * "DELAY COUNT @ ADDR...", then the memory map or Java symbols. */
static int import_legacy_contention(struct pp *p, const unsigned char *d, size_t len)
{
	size_t pos = 0, nls = 0, cap_ls = 0, na = 0, cap_a = 0, lineno = 0, tail = len;
	int64_t cycles_per_s = 0, period = 1, res_ns = 0;
	struct lsample *ls = NULL;
	uint64_t *addrs = NULL;
	bool java = false, samples = false;
	const char *line;
	ssize_t n;
	int rc = -1;

	while ((n = next_text_line(d, len, &pos, &line)) >= 0) {
		const char *end = line + n, *s = skip_ws(line, end), *q, *eq;
		int64_t delay, count;

		lineno++;
		if (s == end)
			continue;
		if (lineno == 1 || (end - s >= 3 && memcmp(s, "---", 3) == 0)) {
			if (lineno > 1) {
				tail = pos;   /* "--- Memory map: ---" */
				break;
			}
			continue;
		}
		if (!samples && (eq = memchr(s, '=', (size_t)(end - s)))) {
			const char *ke = eq, *v = skip_ws(eq + 1, end);
			size_t kl;
			int64_t x = 0;

			while (ke > s && (ke[-1] == ' ' || ke[-1] == '\t'))
				ke--;
			kl = (size_t)(ke - s);
#define KEY(k) (kl == strlen(k) && memcmp(s, k, kl) == 0)
			if (KEY("format")) {
				java = end - v >= 4 && memcmp(v, "java", 4) == 0;
			} else if (KEY("resolution")) {
				char u[32];

				snprintf(u, sizeof(u), "%.*s", (int)(end - v), v);
				res_ns = import_unit_ns(u);
			} else if (parse_dec(v, end, &x)) {
				if (KEY("cycles/second"))
					cycles_per_s = x;
				else if (KEY("sampling period") && x > 0)
					period = x;
			}
#undef KEY
			continue;
		}
		if (!(q = parse_dec(s, end, &delay)) || !(q = parse_dec(skip_ws(q, end), end, &count)) ||
		    (q = skip_ws(q, end)) >= end || *q != '@') {
			/* symbols or the end of the samples */
			tail = (size_t)(line - (const char *)d);
			break;
		}
		samples = true;
		if (vec_reserve(&ls, &cap_ls, nls + 1, sizeof(*ls)) < 0) {
			import_fail_input(p->im, "out of memory");
			goto out_free;
		}
		ls[nls] = (struct lsample){ .off = na };
		for (q = skip_ws(q + 1, end); q < end; q = skip_ws(q, end)) {
			uint64_t a;

			if (!(q = parse_hex(q, end, &a))) {
				import_fail_input(p->im, "line %zu: expected DELAY COUNT @ ADDRESS...", lineno);
				goto out_free;
			}
			if (vec_reserve(&addrs, &cap_a, na + 1, sizeof(*addrs)) < 0) {
				import_fail_input(p->im, "out of memory");
				goto out_free;
			}
			addrs[na++] = a;
		}
		ls[nls].n = na - ls[nls].off;
		{
			/* the delay: cycles (C++) or the resolution's unit (Java), times the period */
			double ns = java ? (double)delay * (double)(res_ns ? res_ns : 1000)
				    : cycles_per_s > 0 ? (double)delay * 1e9 / (double)cycles_per_s
				    : (double)delay;

			ns *= (double)period;
			if (ns >= (double)WIRE_MAX_TIME_NS) {
				import_fail_input(p->im, "line %zu: delay %lld is too large", lineno,
						  (long long)delay);
				goto out_free;
			}
			ls[nls].dur = (int64_t)(ns + 0.5);
		}
		if (ls[nls].dur > 0)
			nls++;
		else
			na = ls[nls].off;
	}
	if (!samples) {
		import_fail_input(p->im, "legacy contention profile without samples");
		goto out_free;
	}
	if (legacy_tail(p, d, len, tail) < 0 || legacy_emit(p, ls, nls, addrs, WIRE_WAIT, java) < 0)
		goto out_free;
	rc = 0;
out_free:
	free(ls);
	free(addrs);
	return rc;
}

static int pprof_import(struct importer *im)
{
	struct pp p = { .im = im, .fb = BUF_INIT(4 * WIRE_MAX_FRAME), .loc_run = IMAP_INIT,
			.by_id = IMAP_INIT, .fn_id = IMAP_INIT, .map_id = IMAP_INIT,
			.syms = IMAP_INIT, .acache = IMAP_INIT, .lkey = BUF_INIT(0) };
	const unsigned char *d;
	size_t len;
	int ws, rc = -1;
	bool be, java;
	uint64_t period;

	if (import_read_all(im, &d, &len) < 0)
		return -1;
	if (!(p.lsets = intern_open(0))) {
		import_fail_input(im, "out of memory");
	} else if (!len) {
		import_fail_input(im, "empty file");
	} else if (legacy_cpu(d, len, &ws, &be, &java, &period)) {
		rc = import_legacy_cpu(&p, d, len, ws, be, java, period);
	} else if (text_prefix(d, len, "--- contention")) {
		rc = import_legacy_contention(&p, d, len);
	} else if (text_prefix(d, len, "--- heapz") || text_prefix(d, len, "heap profile:") ||
		   text_prefix(d, len, "--- heap")) {
		import_fail_input(im, "a legacy memory (heap) profile: stackmine's costs are time, "
				  "so it cannot be imported");
	} else if (!binary_bytes(d, len)) {
		import_fail_input(im, "text, but not a legacy pprof profile (\"--- contention\"): "
				  "not a pprof profile");
	} else {
		rc = import_proto(&p, d, len);
	}
	pp_free(&p);
	return rc;
}

const struct import_format import_pprof = { "pprof", pprof_import };
