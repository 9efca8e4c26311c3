/* otlp: OpenTelemetry profiles (OTLP JSON) to events (see otlp.h and docs/import.md). */
#include "formats/otlp.h"
#include "formats/import.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/json.h"
#include "common/vec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OTLP_MAX_DEPTH 64
#define KEY_MAX 64

struct attr {
	uint32_t key;             /* string index */
	const char *value;        /* string, or an integer/bool/double written out */
	bool is_int;
	int64_t ival;
};

struct loc {
	int64_t mapping;          /* index, 0: none */
	uint64_t address;
	size_t line_off, nlines;  /* function indexes in fnidx */
	bool kernel;
};

struct otlp {
	struct importer *im;
	struct arena *a;
	struct json_reader r;
	const char *text;
	char key[KEY_MAX];
	struct buf fb;
	/* the dictionary */
	const char **str;
	size_t nstr, cap_str;
	int64_t *fn_name;         /* string index of each function's name */
	size_t nfn, cap_fn;
	int64_t *map_file;        /* string index of each mapping's file name */
	size_t nmap, cap_map;
	struct loc *locs;
	size_t nloc, cap_loc;
	int64_t *fnidx;
	size_t nfnidx, cap_fnidx;
	struct attr *attrs;
	size_t nattr, cap_attr;
	int64_t *stk_locs;        /* location indexes, leaf first */
	size_t nstk_locs, cap_stk_locs;
	size_t *stk_off, *stk_n;
	int64_t *stk_id;          /* stack entry -> stack id, -1 until made */
	size_t nstk, cap_stk, cap_stk2;
	int64_t *loc_frame;       /* location -> first frame id in lframes, -1 until made */
	uint32_t *lframes;
	size_t nlframes, cap_lframes;
	size_t *loc_nframes;
	uint32_t frames[WIRE_MAX_STACK_DEPTH];
};

static int bad(struct otlp *o, const char *what)
{
	return import_fail_input(o->im, "%s (at byte %zu)", what, json_offset(&o->r, o->text));
}

static bool key(struct otlp *o, const char *k)
{
	return strcmp(o->key, k) == 0;
}

static bool next_key(struct otlp *o)
{
	size_t len;
	bool trunc;

	return json_next_key(&o->r, o->key, sizeof(o->key), &len, &trunc);
}

/* An integer, as a JSON number or (proto3's int64 encoding) a string of digits. */
static int get_int(struct otlp *o, int64_t *v, const char *what)
{
	enum json_vtype t = json_peek(&o->r);

	if (t == JV_NUMBER) {
		if (json_int(&o->r, v) != 0)
			return import_fail_input(o->im, "%s: not an integer in range", what);
		return 0;
	}
	if (t == JV_STRING) {
		size_t n;
		const char *s = json_string(&o->r, o->a, &n);
		char *end;
		long long x;

		if (!s)
			return import_fail_input(o->im, "out of memory");
		errno = 0;
		x = strtoll(s, &end, 10);
		if (!n || *end || errno)
			return import_fail_input(o->im, "%s: \"%.40s\" is not an integer", what, s);
		*v = x;
		return 0;
	}
	return import_fail_input(o->im, "%s: expected an integer", what);
}

static int get_index(struct otlp *o, int64_t *v, size_t limit, const char *what)
{
	if (get_int(o, v, what) < 0)
		return -1;
	if (*v < 0 || (limit != SIZE_MAX && (uint64_t)*v >= limit))
		return import_fail_input(o->im, "%s: index %lld out of range (%zu entries)", what,
					 (long long)*v, limit);
	return 0;
}

/* Enters an array; false (with nothing consumed) for null. */
static int enter(struct otlp *o, enum json_vtype want, const char *what)
{
	enum json_vtype t = json_peek(&o->r);

	if (t == JV_NULL) {
		json_skip(&o->r);
		return 0;
	}
	if (t != want)
		return import_fail_input(o->im, "%s: expected an %s", what,
					 want == JV_ARRAY ? "array" : "object");
	json_enter(&o->r);
	return 1;
}

#define GROW(o, arr, n, cap) \
	(vec_reserve(&(arr), &(cap), (n) + 1, sizeof(*(arr))) < 0 ? import_fail_input((o)->im, "out of memory") : 0)

/* An array of integers into *out (appended); *n counts them. limit: indexes below it, or
 * SIZE_MAX for any integer (checked where it is used). */
static int int_array(struct otlp *o, int64_t **out, size_t *n, size_t *cap, size_t limit,
		     const char *what)
{
	int e = enter(o, JV_ARRAY, what);

	if (e <= 0)
		return e;
	while (json_next_item(&o->r)) {
		int64_t v;

		if ((limit == SIZE_MAX ? get_int(o, &v, what) : get_index(o, &v, limit, what)) < 0 ||
		    GROW(o, *out, *n, *cap) < 0)
			return -1;
		(*out)[(*n)++] = v;
	}
	return 0;
}

static int read_strings(struct otlp *o)
{
	int e = enter(o, JV_ARRAY, "dictionary.stringTable");

	if (e <= 0)
		return e;
	while (json_next_item(&o->r)) {
		size_t n;
		const char *s;

		if (json_peek(&o->r) != JV_STRING)
			return bad(o, "dictionary.stringTable: expected strings");
		if (!(s = json_string(&o->r, o->a, &n)) || GROW(o, o->str, o->nstr, o->cap_str) < 0)
			return import_fail_input(o->im, "out of memory");
		o->str[o->nstr++] = s;
	}
	return 0;
}

/* An object's "xxxStrindex" (or other integer) field named k, others skipped. */
static int obj_ints(struct otlp *o, const char *const *keys, int64_t *vals, size_t nkeys,
		    const char *what)
{
	int e = enter(o, JV_OBJECT, what);

	if (e <= 0)
		return e;
	while (next_key(o)) {
		size_t i;

		for (i = 0; i < nkeys; i++)
			if (key(o, keys[i]))
				break;
		if (i == nkeys) {
			json_skip(&o->r);
			continue;
		}
		if (get_int(o, &vals[i], what) < 0)
			return -1;
	}
	return 0;
}

static int read_functions(struct otlp *o)
{
	static const char *const keys[] = { "nameStrindex", "systemNameStrindex" };
	int e = enter(o, JV_ARRAY, "dictionary.functionTable");

	if (e <= 0)
		return e;
	while (json_next_item(&o->r)) {
		int64_t v[2] = { 0, 0 };

		if (obj_ints(o, keys, v, 2, "dictionary.functionTable") < 0 ||
		    GROW(o, o->fn_name, o->nfn, o->cap_fn) < 0)
			return -1;
		o->fn_name[o->nfn++] = v[0] ? v[0] : v[1];
	}
	return 0;
}

static int read_mappings(struct otlp *o)
{
	static const char *const keys[] = { "filenameStrindex" };
	int e = enter(o, JV_ARRAY, "dictionary.mappingTable");

	if (e <= 0)
		return e;
	while (json_next_item(&o->r)) {
		int64_t v[1] = { 0 };

		if (obj_ints(o, keys, v, 1, "dictionary.mappingTable") < 0 ||
		    GROW(o, o->map_file, o->nmap, o->cap_map) < 0)
			return -1;
		o->map_file[o->nmap++] = v[0];
	}
	return 0;
}

static int read_locations(struct otlp *o, int64_t **lattr, size_t *nlattr, size_t *cap_lattr,
			  size_t **lattr_off)
{
	int e = enter(o, JV_ARRAY, "dictionary.locationTable");
	size_t cap_off = 0;

	if (e <= 0)
		return e;
	while (json_next_item(&o->r)) {
		struct loc l = { .line_off = o->nfnidx };
		int e2;

		if (vec_reserve(lattr_off, &cap_off, o->nloc + 1, sizeof(**lattr_off)) < 0)
			return import_fail_input(o->im, "out of memory");
		(*lattr_off)[o->nloc] = SIZE_MAX;
		if ((e2 = enter(o, JV_OBJECT, "dictionary.locationTable")) < 0)
			return -1;
		while (e2 && next_key(o)) {
			int64_t v;

			if (key(o, "mappingIndex")) {
				if (get_index(o, &l.mapping, SIZE_MAX, "location.mappingIndex") < 0)
					return -1;
			} else if (key(o, "address")) {
				if (get_int(o, &v, "location.address") < 0)
					return -1;
				l.address = (uint64_t)v;
			} else if (key(o, "lines") || key(o, "line")) {   /* "line" until 1.9 */
				int e3 = enter(o, JV_ARRAY, "location.lines");

				if (e3 < 0)
					return -1;
				while (e3 && json_next_item(&o->r)) {
					static const char *const keys[] = { "functionIndex" };
					int64_t f[1] = { 0 };

					if (obj_ints(o, keys, f, 1, "location.lines") < 0 ||
					    GROW(o, o->fnidx, o->nfnidx, o->cap_fnidx) < 0)
						return -1;
					o->fnidx[o->nfnidx++] = f[0];
				}
			} else if (key(o, "attributeIndices")) {
				(*lattr_off)[o->nloc] = *nlattr;
				if (int_array(o, lattr, nlattr, cap_lattr, SIZE_MAX,
					      "location.attributeIndices") < 0)
					return -1;
				/* the end of this location's list, as a marker */
				if (GROW(o, *lattr, *nlattr, *cap_lattr) < 0)
					return -1;
				(*lattr)[(*nlattr)++] = -1;
				continue;
			} else {
				json_skip(&o->r);
			}
		}
		l.nlines = o->nfnidx - l.line_off;
		if (GROW(o, o->locs, o->nloc, o->cap_loc) < 0)
			return -1;
		o->locs[o->nloc++] = l;
	}
	return 0;
}

static int read_attrs(struct otlp *o)
{
	int e = enter(o, JV_ARRAY, "dictionary.attributeTable");

	if (e <= 0)
		return e;
	while (json_next_item(&o->r)) {
		struct attr at = { 0 };
		int e2 = enter(o, JV_OBJECT, "dictionary.attributeTable");

		if (e2 < 0)
			return -1;
		while (e2 && next_key(o)) {
			int64_t v;

			if (key(o, "keyStrindex")) {
				if (get_index(o, &v, SIZE_MAX, "attribute.keyStrindex") < 0)
					return -1;
				at.key = (uint32_t)(v > UINT32_MAX ? 0 : v);
			} else if (key(o, "value")) {
				int e3 = enter(o, JV_OBJECT, "attribute.value");

				if (e3 < 0)
					return -1;
				while (e3 && next_key(o)) {
					if (key(o, "stringValue") && json_peek(&o->r) == JV_STRING) {
						size_t n;

						if (!(at.value = json_string(&o->r, o->a, &n)))
							return import_fail_input(o->im, "out of memory");
					} else if (key(o, "intValue")) {
						char num[32], *cp;

						if (get_int(o, &at.ival, "attribute.intValue") < 0)
							return -1;
						snprintf(num, sizeof(num), "%lld", (long long)at.ival);
						if (!(cp = arena_strndup(o->a, num, strlen(num))))
							return import_fail_input(o->im, "out of memory");
						at.value = cp;
						at.is_int = true;
					} else if (key(o, "boolValue")) {
						at.value = json_peek(&o->r) == JV_TRUE ? "true" : "false";
						json_skip(&o->r);
					} else {
						json_skip(&o->r);   /* doubles, arrays, maps, bytes */
					}
				}
			} else {
				json_skip(&o->r);
			}
		}
		if (GROW(o, o->attrs, o->nattr, o->cap_attr) < 0)
			return -1;
		o->attrs[o->nattr++] = at;
	}
	return 0;
}

static int read_stacks(struct otlp *o)
{
	int e = enter(o, JV_ARRAY, "dictionary.stackTable");

	if (e <= 0)
		return e;
	while (json_next_item(&o->r)) {
		size_t start = o->nstk_locs;
		int e2 = enter(o, JV_OBJECT, "dictionary.stackTable");

		if (e2 < 0)
			return -1;
		while (e2 && next_key(o)) {
			if (!key(o, "locationIndices")) {
				json_skip(&o->r);
				continue;
			}
			if (int_array(o, &o->stk_locs, &o->nstk_locs, &o->cap_stk_locs, SIZE_MAX,
				      "stack.locationIndices") < 0)
				return -1;
		}
		if (vec_reserve(&o->stk_off, &o->cap_stk, o->nstk + 1, sizeof(*o->stk_off)) < 0 ||
		    vec_reserve(&o->stk_n, &o->cap_stk2, o->nstk + 1, sizeof(*o->stk_n)) < 0)
			return import_fail_input(o->im, "out of memory");
		o->stk_off[o->nstk] = start;
		o->stk_n[o->nstk++] = o->nstk_locs - start;
	}
	return 0;
}

static const char *sget(const struct otlp *o, int64_t i)
{
	return i >= 0 && (size_t)i < o->nstr ? o->str[i] : NULL;
}

/* Checks every index in the dictionary once, so that the samples can trust them. */
static int check_dictionary(struct otlp *o, const int64_t *lattr, size_t nlattr, const size_t *lattr_off)
{
	if (!o->nstr)
		return import_fail_input(o->im, "dictionary.stringTable: missing or empty "
					 "(an OTLP profiles draft without a dictionary is not read)");
	for (size_t i = 0; i < o->nfn; i++)
		if (!sget(o, o->fn_name[i]))
			return import_fail_input(o->im, "dictionary.functionTable[%zu]: string index %lld "
						 "out of range", i, (long long)o->fn_name[i]);
	for (size_t i = 0; i < o->nmap; i++)
		if (!sget(o, o->map_file[i]))
			return import_fail_input(o->im, "dictionary.mappingTable[%zu]: string index %lld "
						 "out of range", i, (long long)o->map_file[i]);
	for (size_t i = 0; i < o->nattr; i++)
		if (o->attrs[i].key >= o->nstr)
			return import_fail_input(o->im, "dictionary.attributeTable[%zu]: key out of range", i);
	for (size_t i = 0; i < o->nloc; i++) {
		struct loc *l = &o->locs[i];

		if (l->mapping < 0 || (l->mapping && (size_t)l->mapping >= o->nmap))
			return import_fail_input(o->im, "dictionary.locationTable[%zu].mappingIndex: %lld "
						 "out of range", i, (long long)l->mapping);
		for (size_t k = 0; k < l->nlines; k++)
			if ((size_t)o->fnidx[l->line_off + k] >= o->nfn)
				return import_fail_input(o->im, "dictionary.locationTable[%zu].lines[%zu]"
							 ".functionIndex out of range", i, k);
		/* profile.frame.type = kernel: the module is the kernel's, as perf names it */
		if (lattr_off && lattr_off[i] != SIZE_MAX)
			for (size_t k = lattr_off[i]; k < nlattr && lattr[k] >= 0; k++) {
				const struct attr *a;

				if ((size_t)lattr[k] >= o->nattr)
					return import_fail_input(o->im, "dictionary.locationTable[%zu]"
								 ".attributeIndices out of range", i);
				a = &o->attrs[lattr[k]];
				if (strcmp(o->str[a->key], "profile.frame.type") == 0 && a->value &&
				    strcmp(a->value, "kernel") == 0)
					l->kernel = true;
			}
	}
	for (size_t i = 0; i < o->nstk_locs; i++)
		if ((size_t)o->stk_locs[i] >= o->nloc)
			return import_fail_input(o->im, "dictionary.stackTable: location index %lld out "
						 "of range", (long long)o->stk_locs[i]);
	return 0;
}

static int read_dictionary(struct otlp *o)
{
	int64_t *lattr = NULL;
	size_t nlattr = 0, cap_lattr = 0, *lattr_off = NULL;
	int e = enter(o, JV_OBJECT, "dictionary"), rc = -1;

	if (e <= 0)
		return e;
	while (next_key(o)) {
		int r = 0;

		if (key(o, "stringTable"))
			r = read_strings(o);
		else if (key(o, "functionTable"))
			r = read_functions(o);
		else if (key(o, "mappingTable"))
			r = read_mappings(o);
		else if (key(o, "locationTable"))
			r = read_locations(o, &lattr, &nlattr, &cap_lattr, &lattr_off);
		else if (key(o, "attributeTable"))
			r = read_attrs(o);
		else if (key(o, "stackTable"))
			r = read_stacks(o);
		else
			json_skip(&o->r);
		if (r < 0)
			goto out_free;
	}
	rc = check_dictionary(o, lattr, nlattr, lattr_off);
out_free:
	free(lattr);
	free(lattr_off);
	return rc;
}

/* The frames of location li, outermost first. */
static int loc_frames(struct otlp *o, size_t li, size_t *off, size_t *n)
{
	const struct loc *l = &o->locs[li];
	const char *module = NULL;

	if (o->loc_frame[li] >= 0) {
		*off = (size_t)o->loc_frame[li];
		*n = o->loc_nframes[li];
		return 0;
	}
	if (l->kernel) {
		module = "[kernel.kallsyms]";
	} else if (l->mapping) {
		const char *f = o->str[o->map_file[l->mapping]], *slash = strrchr(f, '/');

		module = slash && slash[1] ? slash + 1 : f;
	}
	*off = o->nlframes;
	for (size_t k = l->nlines; k-- > 0;) {
		const char *name = o->str[o->fn_name[o->fnidx[l->line_off + k]]];
		int64_t f;

		buf_reset(&o->fb);
		if (module && *module && !strchr(name, '!'))
			buf_printf(&o->fb, "%s!%s", module, *name ? name : "[unknown]");
		else
			buf_puts(&o->fb, name);
		if (buf_error(&o->fb))
			return import_fail_input(o->im, "out of memory");
		if ((f = import_frame(o->im, o->fb.data ? o->fb.data : "", o->fb.len)) < 0 ||
		    GROW(o, o->lframes, o->nlframes, o->cap_lframes) < 0)
			return -1;
		o->lframes[o->nlframes++] = (uint32_t)f;
	}
	if (!l->nlines) {
		int64_t f;

		buf_reset(&o->fb);
		buf_printf(&o->fb, "%s+0x%llx", module && *module ? module : "[unknown]",
			   (unsigned long long)l->address);
		if (buf_error(&o->fb))
			return import_fail_input(o->im, "out of memory");
		if ((f = import_frame(o->im, o->fb.data, o->fb.len)) < 0 ||
		    GROW(o, o->lframes, o->nlframes, o->cap_lframes) < 0)
			return -1;
		o->lframes[o->nlframes++] = (uint32_t)f;
	}
	*n = o->nlframes - *off;
	o->loc_frame[li] = (int64_t)*off;
	o->loc_nframes[li] = *n;
	return 0;
}

/* The stack of stackTable entry si (outermost first, its innermost WIRE_MAX_STACK_DEPTH
 * frames), made once per entry. */
static int64_t stack_id(struct otlp *o, int64_t si)
{
	size_t nf = 0;
	int64_t id;

	if (o->stk_id[si] >= 0)
		return o->stk_id[si];
	/* locations are leaf first, each's frames outermost first: gather innermost first */
	for (size_t k = 0; k < o->stk_n[si] && nf < WIRE_MAX_STACK_DEPTH; k++) {
		size_t off = 0, n = 0;

		if (loc_frames(o, (size_t)o->stk_locs[o->stk_off[si] + k], &off, &n) < 0)
			return -1;
		for (size_t j = n; j-- > 0 && nf < WIRE_MAX_STACK_DEPTH;)
			o->frames[nf++] = o->lframes[off + j];
	}
	for (size_t i = 0, j = nf; i + 1 < j; i++, j--) {
		uint32_t t = o->frames[i];

		o->frames[i] = o->frames[j - 1];
		o->frames[j - 1] = t;
	}
	if (!nf) {
		int64_t f = import_frame(o->im, "[unknown]", 9);

		if (f < 0)
			return -1;
		o->frames[nf++] = (uint32_t)f;
	}
	if ((id = import_stack(o->im, o->frames, nf)) >= 0)
		o->stk_id[si] = id;
	return id;
}

struct prof {
	int64_t scale;            /* ns per value */
	enum wire_kind kind;
	int64_t start;            /* timeUnixNano */
	bool counted;             /* values are counts of samples, each one period */
	const char *prog;         /* for samples without a thread */
};

/* A thread.id attribute's value: an integer, or a string of digits, in [0, INT32_MAX]. */
static bool thread_id_of(const struct attr *a, int64_t *tid)
{
	char *end;
	long long x;

	if (a->is_int) {
		x = a->ival;
	} else {
		errno = 0;
		x = strtoll(a->value, &end, 10);
		if (errno || end == a->value || *end || a->value[0] == '-' || a->value[0] == '+')
			return false;
	}
	if (x < 0 || x > INT32_MAX)
		return false;
	*tid = x;
	return true;
}

static int read_sample(struct otlp *o, const struct prof *pf, struct wire_label *rlabels, size_t nr)
{
	int64_t stack = 0, *vals = NULL, *ts = NULL, *ai = NULL;
	size_t nv = 0, cv = 0, nt = 0, ct = 0, na = 0, ca = 0;
	int e = enter(o, JV_OBJECT, "sample"), rc = -1;
	struct wire_label labels[WIRE_MAX_LABELS];
	size_t nl = 0;
	int64_t tid = -1, st;
	const char *comm = NULL;

	if (e <= 0)
		return e;
	while (next_key(o)) {
		if (key(o, "stackIndex")) {
			if (get_index(o, &stack, o->nstk ? o->nstk : 1, "sample.stackIndex") < 0)
				goto out_free;
		} else if (key(o, "values")) {
			if (int_array(o, &vals, &nv, &cv, SIZE_MAX, "sample.values") < 0)
				goto out_free;
		} else if (key(o, "timestampsUnixNano")) {
			if (int_array(o, &ts, &nt, &ct, SIZE_MAX, "sample.timestampsUnixNano") < 0)
				goto out_free;
		} else if (key(o, "attributeIndices")) {
			if (int_array(o, &ai, &na, &ca, o->nattr, "sample.attributeIndices") < 0)
				goto out_free;
		} else {
			json_skip(&o->r);
		}
	}
	if (!o->nstk) {
		import_fail_input(o->im, "dictionary.stackTable: missing, but samples refer to it");
		goto out_free;
	}
	if (!nv) {
		/* timestamps without values: each is one sample when samples are counted; a
		 * time-valued sample without its value has nothing to cost it by */
		if (!pf->counted) {
			rc = 0;
			goto out_free;
		}
		for (size_t i = 0; i < nt; i++) {
			if (GROW(o, vals, nv, cv) < 0)
				goto out_free;
			vals[nv++] = 1;
		}
	}
	if (nt && nt != nv) {
		import_fail_input(o->im, "sample: %zu values but %zu timestamps", nv, nt);
		goto out_free;
	}
	memcpy(labels, rlabels, nr * sizeof(*labels));
	nl = nr;
	for (size_t i = 0; i < na; i++) {
		const struct attr *a = &o->attrs[ai[i]];
		const char *k = o->str[a->key];

		if (!a->value)
			continue;
		if (strcmp(k, "thread.id") == 0 && thread_id_of(a, &tid))
			continue;
		else if (strcmp(k, "thread.name") == 0)
			comm = a->value;
		else if (strncmp(k, "cpu.", 4) != 0 && *k && nl < WIRE_MAX_LABELS)
			labels[nl++] = (struct wire_label){ k, a->value };
	}
	if (import_group(o->im, labels, nl) < 0)
		goto out_free;
	if (tid >= 0) {
		if (import_thread(o->im, tid, comm ? comm : "", comm ? strlen(comm) : 0) < 0)
			goto out_free;
	} else {
		const char *c = comm ? comm : pf->prog;

		if ((tid = import_pseudo_tid(o->im, c, strlen(c))) < 0)
			goto out_free;
	}
	if ((st = stack_id(o, stack)) < 0)
		goto out_free;
	for (size_t i = 0; i < nv; i++) {
		struct wire_event ev = { .tid = tid, .stack = (uint32_t)st, .kind = (uint8_t)pf->kind };

		if (vals[i] < 0 || vals[i] > WIRE_MAX_TIME_NS / pf->scale) {
			import_fail_input(o->im, "sample value %lld out of range", (long long)vals[i]);
			goto out_free;
		}
		if (!vals[i])
			continue;
		ev.dur_ns = vals[i] * pf->scale;
		if (nt) {
			/* an off-CPU sample is taken when the thread runs again: it ends there */
			if (ts[i] < 0 || ts[i] > WIRE_MAX_TIME_NS ||
			    (pf->kind == WIRE_WAIT ? ts[i] < ev.dur_ns : ts[i] > WIRE_MAX_TIME_NS - ev.dur_ns)) {
				import_fail_input(o->im, "sample.timestampsUnixNano: %lld out of range for a "
						  "value of %lld ns", (long long)ts[i], (long long)ev.dur_ns);
				goto out_free;
			}
			ev.ts_ns = pf->kind == WIRE_WAIT ? ts[i] - ev.dur_ns : ts[i];
		} else if ((ev.ts_ns = import_lay(o->im, tid, ev.dur_ns)) < 0) {
			goto out_free;
		}
		if (import_event(o->im, &ev) < 0)
			goto out_free;
	}
	rc = 0;
out_free:
	free(vals);
	free(ts);
	free(ai);
	return rc;
}

static int read_value_type(struct otlp *o, const char **type, const char **unit, const char *what)
{
	static const char *const keys[] = { "typeStrindex", "unitStrindex" };
	int64_t v[2] = { 0, 0 };

	if (obj_ints(o, keys, v, 2, what) < 0)
		return -1;
	if (!(*type = sget(o, v[0])) || !(*unit = sget(o, v[1])))
		return import_fail_input(o->im, "%s: string index out of range", what);
	return 0;
}

static int read_profile(struct otlp *o, struct wire_label *rl, size_t nr, const char *prog)
{
	const char *type = "", *unit = "", *ptype = "", *punit = "";
	int64_t period = 0;
	struct prof pf = { .prog = prog };
	int e = enter(o, JV_OBJECT, "profile");
	struct json_reader samples = { NULL, NULL };

	if (e <= 0)
		return e;
	while (next_key(o)) {
		if (key(o, "sampleType")) {
			/* one ValueType (or, in older drafts, a list of them: the first) */
			if (json_peek(&o->r) == JV_ARRAY) {
				json_enter(&o->r);
				if (json_next_item(&o->r)) {
					if (read_value_type(o, &type, &unit, "profile.sampleType") < 0)
						return -1;
					while (json_next_item(&o->r))
						json_skip(&o->r);
				}
			} else if (read_value_type(o, &type, &unit, "profile.sampleType") < 0) {
				return -1;
			}
		} else if (key(o, "periodType")) {
			if (read_value_type(o, &ptype, &punit, "profile.periodType") < 0)
				return -1;
		} else if (key(o, "period")) {
			if (get_int(o, &period, "profile.period") < 0)
				return -1;
		} else if (key(o, "timeUnixNano")) {
			if (get_int(o, &pf.start, "profile.timeUnixNano") < 0)
				return -1;
		} else if (key(o, "samples") || key(o, "sample")) {   /* "sample" until 1.9 */
			samples = o->r;   /* read once the sample type is known */
			json_skip(&o->r);
		} else {
			json_skip(&o->r);
		}
	}
	if (!samples.p)
		return 0;
	if ((pf.scale = import_unit_ns(unit)) == 0) {
		int64_t ps = import_unit_ns(punit);
		const struct import_opts *io = import_opts_of(o->im);

		if (strcmp(unit, "count") != 0 && *unit)
			return import_fail_input(o->im, "profile.sampleType %s/%s: not a time, so it "
						 "cannot be imported", type, unit);
		pf.counted = true;
		pf.scale = io->sample_period_ns > 0 ? io->sample_period_ns
			   : ps && period > 0 && period <= WIRE_MAX_TIME_NS / ps ? period * ps
			   : IMPORT_DEFAULT_PERIOD_NS;
	}
	/* the eBPF profiler's off-CPU samples are "events" of blocked time */
	pf.kind = import_wait_type(type) || import_wait_type(ptype) ||
			  (strcmp(type, "events") == 0 && !pf.counted)
		  ? WIRE_WAIT
		  : WIRE_RUN;
	if (pf.start > 0 && pf.start < WIRE_MAX_TIME_NS / 2)
		import_lay_origin(o->im, pf.start);
	{
		struct json_reader after = o->r;
		int e2;

		o->r = samples;
		e2 = enter(o, JV_ARRAY, "profile.samples");
		while (e2 > 0 && json_next_item(&o->r))
			if (read_sample(o, &pf, rl, nr) < 0)
				return -1;
		if (e2 < 0)
			return -1;
		o->r = after;
	}
	return 0;
}

/* resource.attributes: stream labels (strings and integers); process.executable.name names
 * the pseudo thread of samples without a thread id. */
static int read_resource(struct otlp *o, struct wire_label *rl, size_t *nr, const char **prog)
{
	int e = enter(o, JV_OBJECT, "resource");

	if (e <= 0)
		return e;
	while (next_key(o)) {
		int e2;

		if (!key(o, "attributes")) {
			json_skip(&o->r);
			continue;
		}
		if ((e2 = enter(o, JV_ARRAY, "resource.attributes")) < 0)
			return -1;
		while (e2 && json_next_item(&o->r)) {
			const char *k = NULL, *v = NULL;
			int e3 = enter(o, JV_OBJECT, "resource.attributes");

			if (e3 < 0)
				return -1;
			while (e3 && next_key(o)) {
				if (key(o, "key") && json_peek(&o->r) == JV_STRING) {
					size_t n;

					if (!(k = json_string(&o->r, o->a, &n)))
						return import_fail_input(o->im, "out of memory");
				} else if (key(o, "value") && json_peek(&o->r) == JV_OBJECT) {
					json_enter(&o->r);
					while (next_key(o)) {
						int64_t x;
						char num[32];

						if (key(o, "stringValue") && json_peek(&o->r) == JV_STRING) {
							size_t n;

							if (!(v = json_string(&o->r, o->a, &n)))
								return import_fail_input(o->im, "out of memory");
						} else if (key(o, "intValue")) {
							if (get_int(o, &x, "resource attribute") < 0)
								return -1;
							snprintf(num, sizeof(num), "%lld", (long long)x);
							if (!(v = arena_strndup(o->a, num, strlen(num))))
								return import_fail_input(o->im, "out of memory");
						} else {
							json_skip(&o->r);
						}
					}
				} else {
					json_skip(&o->r);
				}
			}
			if (!k || !v || !*k)
				continue;
			if (strcmp(k, "process.executable.name") == 0)
				*prog = v;
			if (*nr < WIRE_MAX_LABELS)
				rl[(*nr)++] = (struct wire_label){ k, v };
		}
	}
	return 0;
}

static int read_resource_profiles(struct otlp *o)
{
	int e = enter(o, JV_ARRAY, "resourceProfiles");

	if (e <= 0)
		return e;
	while (json_next_item(&o->r)) {
		struct wire_label rl[WIRE_MAX_LABELS];
		size_t nr = 0;
		const char *prog = "otlp";
		struct json_reader scopes = { NULL, NULL };
		int e2 = enter(o, JV_OBJECT, "resourceProfiles[]");

		if (e2 < 0)
			return -1;
		while (e2 && next_key(o)) {
			if (key(o, "resource")) {
				if (read_resource(o, rl, &nr, &prog) < 0)
					return -1;
			} else if (key(o, "scopeProfiles")) {
				scopes = o->r;   /* after the resource, which may come later */
				json_skip(&o->r);
			} else {
				json_skip(&o->r);
			}
		}
		if (scopes.p) {
			struct json_reader after = o->r;
			int e3;

			o->r = scopes;
			if ((e3 = enter(o, JV_ARRAY, "scopeProfiles")) < 0)
				return -1;
			while (e3 && json_next_item(&o->r)) {
				int e4 = enter(o, JV_OBJECT, "scopeProfiles[]");

				if (e4 < 0)
					return -1;
				while (e4 && next_key(o)) {
					int e5;

					if (!key(o, "profiles")) {
						json_skip(&o->r);
						continue;
					}
					if ((e5 = enter(o, JV_ARRAY, "profiles")) < 0)
						return -1;
					while (e5 && json_next_item(&o->r))
						if (read_profile(o, rl, nr, prog) < 0)
							return -1;
				}
			}
			o->r = after;
		}
	}
	return 0;
}

static int otlp_import(struct importer *im)
{
	struct otlp o = { .im = im, .fb = BUF_INIT(4 * WIRE_MAX_FRAME) };
	const unsigned char *d;
	size_t len;
	char err[256];
	bool seen = false;
	int rc = -1;

	if (import_read_all(im, &d, &len) < 0)
		return -1;
	if (!len)
		return import_fail_input(im, "empty file");
	if (json_check((const char *)d, len, OTLP_MAX_DEPTH, err, sizeof(err)) < 0)
		return import_fail_input(im, "not JSON: %s", err);
	if (!(o.a = arena_open(0)))
		return import_fail_input(im, "out of memory");
	o.text = (const char *)d;
	/* the dictionary first: it may come after the profiles that use it */
	json_reader_init(&o.r, o.text, len);
	if (json_peek(&o.r) != JV_OBJECT) {
		import_fail_input(im, "expected a JSON object (OTLP ProfilesData)");
		goto out_free;
	}
	json_enter(&o.r);
	while (next_key(&o)) {
		if (key(&o, "dictionary")) {
			if (read_dictionary(&o) < 0)
				goto out_free;
			seen = true;
		} else {
			json_skip(&o.r);
		}
	}
	if (!seen) {
		import_fail_input(im, "no \"dictionary\": not OTLP profiles (ProfilesData), or a draft "
				  "of the format older than the dictionary");
		goto out_free;
	}
	o.loc_frame = malloc((o.nloc ? o.nloc : 1) * sizeof(*o.loc_frame));
	o.loc_nframes = calloc(o.nloc ? o.nloc : 1, sizeof(*o.loc_nframes));
	o.stk_id = malloc((o.nstk ? o.nstk : 1) * sizeof(*o.stk_id));
	if (!o.loc_frame || !o.loc_nframes || !o.stk_id) {
		import_fail_input(im, "out of memory");
		goto out_free;
	}
	memset(o.loc_frame, 0xff, (o.nloc ? o.nloc : 1) * sizeof(*o.loc_frame));
	memset(o.stk_id, 0xff, (o.nstk ? o.nstk : 1) * sizeof(*o.stk_id));
	json_reader_init(&o.r, o.text, len);
	json_enter(&o.r);
	seen = false;
	while (next_key(&o)) {
		if (key(&o, "resourceProfiles")) {
			if (read_resource_profiles(&o) < 0)
				goto out_free;
			seen = true;
		} else {
			json_skip(&o.r);
		}
	}
	if (!seen)
		import_fail_input(im, "no \"resourceProfiles\": not OTLP profiles");
	else
		rc = 0;
out_free:
	free(o.str);
	free(o.fn_name);
	free(o.map_file);
	free(o.locs);
	free(o.fnidx);
	free(o.attrs);
	free(o.stk_locs);
	free(o.stk_off);
	free(o.stk_n);
	free(o.loc_frame);
	free(o.loc_nframes);
	free(o.stk_id);
	free(o.lframes);
	buf_release(&o.fb);
	arena_free(o.a);
	return rc;
}

const struct import_format import_otlp = { "otlp", otlp_import };
