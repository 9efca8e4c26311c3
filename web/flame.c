/* flame: icicle graph of weighted call stacks as SVG (see flame.h). */
#include "web/flame.h"
#include "common/fmt.h"
#include "common/hash.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/vec.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW_PX 18
#define BAR_PX 17      /* a 1 px gap between rows */
#define CHAR_PX 7      /* monospace 12 px, roughly */
#define TEXT_PAD 3
#define MIN_NODE_PX 1.0   /* thinner frames can be neither seen nor clicked: zoom in to see them */
#define NAME_BYTES_MAX ((size_t)256 << 20) /* bounds the names' bytes */
#define NONE UINT32_MAX

/* Distinct frame names, stored once (in the intern map): nodes refer to them by id. */
struct fname {
	const char *s;
	uint32_t len;
};

/* The tree's shape (and the self costs), kept small so that walking it stays in cache. */
struct fnode {
	uint32_t parent, nid, depth; /* root: depth 0 */
	/* The first child made: the nodes of a new stack's tail are made one after the other, so
	 * following first children walks memory in order instead of probing the table. */
	uint32_t fc;
	/* Costs are added to the leaf only, next to what the walk has just read. */
	uint64_t self_cost, self_events;
	uint64_t self_base;          /* a differential flame's "before" cost */
};

/* Inclusive costs, summed up from the leaves by flame_index(). */
struct fcost {
	uint64_t cost, events, base;
};


struct flame {
	/* Name id k > 0 is the intern map's key k - 1; names[] caches its bytes for the walk. */
	struct intern *ntable;
	struct fname *names;
	size_t nnames, cap_names, name_bytes;
	struct fnode *nodes;
	struct fcost *costs; /* parallel to nodes */
	size_t n, cap_nodes, cap_costs;
	struct imap children; /* parent << 32 | name id -> node (the root is nobody's child) */
	uint64_t total_cost, total_events;
	bool diff;                   /* colours by the change from the base (flame_set_diff()) */
	double scale_now, scale_base;
	const char *search;          /* flame_set_search(), NULL or "": none */
	const char *suffix;          /* after each link's id (flame_set_link_suffix()) */
	uint64_t matched, shown;     /* of the last render */
	/* The previous stack: consecutive stacks mostly share a prefix, found without the table. */
	uint32_t last_nid[FLAME_MAX_DEPTH], last_node[FLAME_MAX_DEPTH];
	size_t last_n;
	/* Built lazily by flame_index(): name order, children in name order (CSR), ids, totals. */
	bool dirty_tree, dirty_cost;
	uint32_t *rank;      /* name id -> position in byte order */
	uint32_t *kstart;    /* n + 1 */
	uint32_t *kids;      /* n - 1 */
	uint32_t *byid;      /* id - 1 -> node index */
	uint32_t *idof;      /* node index -> id */
	char err[96];
};

static void set_err(struct flame *f, const char *msg)
{
	snprintf(f->err, sizeof(f->err), "%s", msg);
}

static void index_free(struct flame *f)
{
	free(f->rank);
	free(f->kstart);
	free(f->kids);
	free(f->byid);
	free(f->idof);
	f->rank = f->kstart = f->kids = f->byid = f->idof = NULL;
}

void flame_free(struct flame *f)
{
	if (!f)
		return;
	index_free(f);
	intern_free(f->ntable);
	free(f->names);
	free(f->nodes);
	free(f->costs);
	imap_free(&f->children);
	free(f);
}

struct flame *flame_open(void)
{
	struct flame *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->ntable = intern_open(0);
	f->children = (struct imap)IMAP_INIT;
	if (!f->ntable || vec_reserve(&f->names, &f->cap_names, 64, sizeof(*f->names)) < 0 ||
	    vec_reserve(&f->nodes, &f->cap_nodes, 64, sizeof(*f->nodes)) < 0 ||
	    vec_reserve(&f->costs, &f->cap_costs, 64, sizeof(*f->costs)) < 0 || imap_reserve(&f->children, 64) < 0) {
		flame_free(f);
		return NULL;
	}
	/* name 0 is the root's, only ever shown (and not in the intern map) */
	f->names[0].s = "all";
	f->names[0].len = 3;
	f->nnames = 1;
	memset(&f->nodes[0], 0, sizeof(f->nodes[0]));
	f->n = 1;
	f->dirty_tree = f->dirty_cost = true;
	return f;
}

const char *flame_error(const struct flame *f)
{
	return f->err;
}

uint64_t flame_total_cost(const struct flame *f)
{
	return f->total_cost;
}

size_t flame_node_count(const struct flame *f)
{
	return f->n;
}

static uint32_t name_find(const struct flame *f, const char *s, uint32_t len, uint64_t h)
{
	int64_t id = intern_find_hashed(f->ntable, s, len, h);

	return id < 0 ? NONE : (uint32_t)id + 1;
}

static uint32_t child_find(const struct flame *f, uint32_t parent, uint32_t nid)
{
	uint64_t node;

	return imap_get(&f->children, (uint64_t)parent << 32 | nid, &node) ? (uint32_t)node : 0;
}

/* Room for `more` names and `more_nodes` nodes, tables included, so that adding them cannot fail
 * (but the intern map's own growth: add_names()). */
static int reserve(struct flame *f, size_t more, size_t more_nodes)
{
	size_t need = f->nnames + more, nneed = f->n + more_nodes;

	if (vec_reserve(&f->names, &f->cap_names, need, sizeof(*f->names)) < 0 ||
	    vec_reserve(&f->nodes, &f->cap_nodes, nneed, sizeof(*f->nodes)) < 0 ||
	    vec_reserve(&f->costs, &f->cap_costs, nneed, sizeof(*f->costs)) < 0 ||
	    imap_reserve(&f->children, nneed) < 0)
		return -1;
	return 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static int frame_key(struct flame *f, const char *s, uint32_t *len, uint64_t *h)
{
	size_t n = strlen(s);

	if (n > UINT32_MAX - 1) {
		set_err(f, "frame name too long");
		return -1;
	}
	*len = (uint32_t)n;
	*h = intern_hash(s, n);
	return 0;
}

/* Interns the names of frames found..n-1 new to the flame (nid NONE), room for them in names[]
 * reserved. A failure leaves the names added so far without nodes, which shows nowhere. */
static int add_names(struct flame *f, const char *const *names, size_t found, size_t n, const uint32_t *lens,
		     const uint64_t *hs, uint32_t *nid)
{
	for (size_t i = found; i < n; i++) {
		bool added;
		int64_t id;

		if (nid[i] != NONE)
			continue;
		/* a name new to the flame may recur further down (recursion): then it is known by now */
		id = intern_put_hashed(f->ntable, names[i], lens[i], hs[i], &added);
		if (id < 0)
			return -1;
		nid[i] = (uint32_t)id + 1;
		if (added) {
			f->names[f->nnames].s = intern_key(f->ntable, (uint32_t)id, NULL);
			f->names[f->nnames].len = lens[i];
			f->nnames++;
			f->name_bytes += (size_t)lens[i] + 1;
		}
	}
	return 0;
}

/* A stack's cost (base: its "before" cost, which draws nothing by itself). */
static int add(struct flame *f, const char *const *names, size_t n, uint64_t cost_ns, uint64_t events, bool base)
{
	uint32_t path[FLAME_MAX_DEPTH], lens[FLAME_MAX_DEPTH], nid[FLAME_MAX_DEPTH];
	uint64_t hs[FLAME_MAX_DEPTH];
	uint32_t p = 0, leaf;
	size_t i, found, missing = 0, bytes = 0;
	bool keyed = false;

	f->err[0] = '\0';
	if (n > FLAME_MAX_DEPTH) {
		set_err(f, "stack deeper than 1024 frames");
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (!names[i]) {
			set_err(f, "NULL frame name");
			return -1;
		}
	}
	/* The known prefix. Most frames are found by comparing the name with the previous stack's
	 * frame at that depth or with the parent's first child; only the others are hashed and looked
	 * up. Every frame after the first new one makes a new node. */
	for (i = 0; i < n; i++) {
		uint32_t c;

		if (i < f->last_n && (i == 0 || f->last_node[i - 1] == p) &&
		    strcmp(f->names[f->last_nid[i]].s, names[i]) == 0) {
			c = f->last_node[i];
		} else if (!(c = f->nodes[p].fc) || strcmp(f->names[f->nodes[c].nid].s, names[i]) != 0) {
			if (frame_key(f, names[i], &lens[i], &hs[i]) < 0)
				return -1;
			keyed = true;
			nid[i] = name_find(f, names[i], lens[i], hs[i]);
			if (nid[i] == NONE || !(c = child_find(f, p, nid[i])))
				break;
			keyed = false;
		}
		nid[i] = f->nodes[c].nid;
		path[i] = p = c;
	}
	found = i;
	if (n - found > FLAME_MAX_NODES - f->n) {
		set_err(f, "flame graph over 200000 nodes");
		return -1;
	}
	for (i = found; i < n; i++) {
		if (i > found || !keyed) {
			if (frame_key(f, names[i], &lens[i], &hs[i]) < 0)
				return -1;
			nid[i] = name_find(f, names[i], lens[i], hs[i]);
		}
		if (nid[i] == NONE) {
			missing++;
			bytes += (size_t)lens[i] + 1;
		}
	}
	/* All allocation happens before the first node: a refused stack leaves the tree as it was. */
	if (bytes > NAME_BYTES_MAX - f->name_bytes || reserve(f, missing, n - found) < 0 ||
	    add_names(f, names, found, n, lens, hs, nid) < 0) {
		set_err(f, "out of memory");
		return -1;
	}
	for (i = found; i < n; i++) {
		struct fnode *c;

		c = &f->nodes[f->n];
		memset(c, 0, sizeof(*c));
		c->parent = p;
		c->nid = nid[i];
		c->depth = (uint32_t)i + 1;
		path[i] = p = (uint32_t)f->n++;
		if (!f->nodes[c->parent].fc)
			f->nodes[c->parent].fc = p;
		imap_put(&f->children, (uint64_t)c->parent << 32 | c->nid, p);  /* reserved: cannot fail */
		f->dirty_tree = true;
	}
	leaf = n ? path[n - 1] : 0;
	if (base) {
		f->nodes[leaf].self_base = sat_add(f->nodes[leaf].self_base, cost_ns);
	} else {
		f->nodes[leaf].self_cost = sat_add(f->nodes[leaf].self_cost, cost_ns);
		f->nodes[leaf].self_events = sat_add(f->nodes[leaf].self_events, events);
		f->total_cost = sat_add(f->total_cost, cost_ns);
		f->total_events = sat_add(f->total_events, events);
	}
	f->dirty_cost = true;
	memcpy(f->last_nid, nid, n * sizeof(*nid));
	memcpy(f->last_node, path, n * sizeof(*path));
	f->last_n = n;
	return 0;
}

int flame_add(struct flame *f, const char *const *names, size_t n, uint64_t cost_ns, uint64_t events)
{
	return add(f, names, n, cost_ns, events, false);
}

int flame_add_base(struct flame *f, const char *const *names, size_t n, uint64_t cost_ns)
{
	return add(f, names, n, cost_ns, 0, true);
}

void flame_set_diff(struct flame *f, double scale_now, double scale_base)
{
	f->diff = true;
	f->scale_now = scale_now;
	f->scale_base = scale_base;
}

void flame_set_search(struct flame *f, const char *q)
{
	f->search = q && *q ? q : NULL;
}

void flame_set_link_suffix(struct flame *f, const char *suffix)
{
	f->suffix = suffix;
}

uint64_t flame_matched_cost(const struct flame *f)
{
	return f->matched;
}

uint64_t flame_shown_cost(const struct flame *f)
{
	return f->shown;
}

/* ASCII case-insensitive substring (the browser's search does the same). */
static bool name_matches(const char *s, size_t n, const char *q)
{
	size_t qn = strlen(q);

	for (size_t i = 0; i + qn <= n; i++) {
		size_t j = 0;

		while (j < qn) {
			unsigned char a = (unsigned char)s[i + j], b = (unsigned char)q[j];

			if (a >= 'A' && a <= 'Z')
				a = (unsigned char)(a + 32);
			if (b >= 'A' && b <= 'Z')
				b = (unsigned char)(b + 32);
			if (a != b)
				break;
			j++;
		}
		if (j == qn)
			return true;
	}
	return false;
}

static bool node_matches(const struct flame *f, uint32_t k)
{
	const struct fname *nm = &f->names[f->nodes[k].nid];

	return f->search && name_matches(nm->s, nm->len, f->search);
}

/* The cost of k's subtree in matching frames, each counted once (not again under a match). */
static uint64_t matched_below(const struct flame *f, uint32_t k)
{
	uint64_t sum = 0;

	if (node_matches(f, k))
		return f->costs[k].cost;
	for (uint32_t j = f->kstart[k]; j < f->kstart[k + 1]; j++)
		sum = sat_add(sum, matched_below(f, f->kids[j]));
	return sum;
}

struct sname {
	const char *s;
	uint32_t len, id;
};

static int sname_cmp(const void *a, const void *b)
{
	const struct sname *x = a, *y = b;
	int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

struct kid {
	uint32_t rank, idx;
};

static int kid_cmp(const void *a, const void *b)
{
	const struct kid *x = a, *y = b;

	/* siblings never share a name */
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Children in name order and depth-first ids (after adds that made nodes); inclusive costs. */
static int flame_index(struct flame *f)
{
	size_t n = f->n, top = 0, next = 0;
	struct sname *sn = NULL;
	struct kid *tmp = NULL;
	uint32_t *stack = NULL;

	if (f->dirty_tree) {
		index_free(f);
		f->rank = vec_alloc(f->nnames, sizeof(uint32_t));
		f->kstart = vec_calloc(n + 1, sizeof(uint32_t));
		f->kids = vec_alloc(n > 1 ? n - 1 : 1, sizeof(uint32_t));
		f->byid = vec_alloc(n, sizeof(uint32_t));
		f->idof = vec_alloc(n, sizeof(uint32_t));
		sn = vec_alloc(f->nnames, sizeof(*sn));
		tmp = vec_alloc(n > 1 ? n - 1 : 1, sizeof(*tmp));
		stack = vec_alloc(n, sizeof(uint32_t));
		if (!f->rank || !f->kstart || !f->kids || !f->byid || !f->idof || !sn || !tmp || !stack) {
			free(sn);
			free(tmp);
			free(stack);
			index_free(f);
			set_err(f, "out of memory");
			return -1;
		}
		/* Rank the names once, then sort siblings by rank. */
		for (size_t k = 0; k < f->nnames; k++) {
			sn[k].s = f->names[k].s;
			sn[k].len = f->names[k].len;
			sn[k].id = (uint32_t)k;
		}
		qsort(sn, f->nnames, sizeof(*sn), sname_cmp);
		for (size_t k = 0; k < f->nnames; k++)
			f->rank[sn[k].id] = (uint32_t)k;
		free(sn);
		for (size_t k = 1; k < n; k++)
			f->kstart[f->nodes[k].parent + 1]++;
		for (size_t k = 0; k < n; k++)
			f->kstart[k + 1] += f->kstart[k];
		/* kstart[p] is used as a fill cursor and then restored. */
		for (size_t k = 1; k < n; k++) {
			uint32_t at = f->kstart[f->nodes[k].parent]++;

			tmp[at].rank = f->rank[f->nodes[k].nid];
			tmp[at].idx = (uint32_t)k;
		}
		for (size_t k = n; k > 0; k--)
			f->kstart[k] = f->kstart[k - 1];
		f->kstart[0] = 0;
		for (size_t k = 0; k < n; k++) {
			uint32_t a = f->kstart[k], b = f->kstart[k + 1];

			if (b - a > 1)
				qsort(tmp + a, b - a, sizeof(*tmp), kid_cmp);
			for (uint32_t j = a; j < b; j++)
				f->kids[j] = tmp[j].idx;
		}
		free(tmp);
		/* Preorder: pop a node, number it, push its children last-first. */
		stack[top++] = 0;
		while (top) {
			uint32_t k = stack[--top];

			f->byid[next] = k;
			f->idof[k] = (uint32_t)++next;
			for (uint32_t j = f->kstart[k + 1]; j > f->kstart[k]; j--)
				stack[top++] = f->kids[j - 1];
		}
		free(stack);
		f->dirty_tree = false;
	}
	if (f->dirty_cost) {
		/* A child's index is above its parent's: one backward pass sums the subtrees. */
		for (size_t k = 0; k < n; k++) {
			f->costs[k].cost = f->nodes[k].self_cost;
			f->costs[k].events = f->nodes[k].self_events;
			f->costs[k].base = f->nodes[k].self_base;
		}
		for (size_t k = n - 1; k > 0; k--) {
			struct fcost *c = &f->costs[k], *p = &f->costs[f->nodes[k].parent];

			p->cost = sat_add(p->cost, c->cost);
			p->events = sat_add(p->events, c->events);
			p->base = sat_add(p->base, c->base);
		}
		f->dirty_cost = false;
	}
	return 0;
}


static int put_duration(struct buf *b, double ns)
{
	char t[FMT_LEN];

	return buf_puts(b, fmt_duration(t, ns));
}

static int put_share(struct buf *b, double pct)
{
	char t[FMT_LEN];

	return buf_puts(b, fmt_share(t, pct / 100));
}

static int put_hex_rgb(struct buf *b, const unsigned rgb[3])
{
	static const char hex[] = "0123456789abcdef";
	char out[8];

	out[0] = '#';
	for (int i = 0; i < 3; i++) {
		out[1 + 2 * i] = hex[(rgb[i] >> 4) & 15];
		out[2 + 2 * i] = hex[rgb[i] & 15];
	}
	return buf_append(b, out, 7);
}

size_t flame_module_len(const char *s, size_t n)
{
	const char *bang = memchr(s, '!', n);
	size_t last = 0, prev = 0, us = 0, i;

	if (bang)
		return (size_t)(bang - s) + 1; /* "libc.so.6!" */
	/* "Foo::Bar::baz": the namespace, up to the last "::" */
	for (i = 0; i + 1 < n && s[i] != '('; i++)
		if (s[i] == ':' && s[i + 1] == ':')
			last = i + 2;
	if (last)
		return last;
	/* "java.util.HashMap.get": the package, up to the dot before the class */
	for (i = 0; i < n && s[i] != '('; i++) {
		if (s[i] == '.') {
			prev = last;
			last = i + 1;
		}
	}
	if (prev)
		return prev;
	if (last)
		return last;
	/* "ngx_http_process_request": the first two words */
	for (i = 1; i < n; i++)
		if (s[i] == '_' && s[i - 1] != '_' && ++us == 2)
			return i;
	return n;
}

void flame_colour(const char *s, size_t n, char out[8])
{
	static const char hex[] = "0123456789abcdef";
	uint64_t h = 0xcbf29ce484222325ULL;
	unsigned rgb[3], hue, light;

	n = flame_module_len(s, n);
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	h = hash_mix64(h);
	/* warm hues (red to yellow, 0..55 degrees) at a few lightnesses, in integers: the same on
	 * every machine */
	hue = (unsigned)(h % 56);
	light = (unsigned)((h >> 16) % 3);
	rgb[0] = 235 - 12 * light;
	rgb[2] = 60 + 20 * light;
	rgb[1] = rgb[2] + (rgb[0] - rgb[2]) * hue / 60;
	out[0] = '#';
	for (int i = 0; i < 3; i++) {
		out[1 + 2 * i] = hex[(rgb[i] >> 4) & 15];
		out[2 + 2 * i] = hex[rgb[i] & 15];
	}
	out[7] = '\0';
}

/* The module's colour (flame_colour()). */
static int put_colour(struct buf *b, const char *s, size_t n)
{
	char c[8];

	flame_colour(s, n, c);
	return buf_append(b, c, 7);
}

/* The change of a node in a differential flame: -1 (all gone) .. 1 (all new), per stream. */
static double change_of(const struct flame *f, const struct fcost *nd, double *now, double *before)
{
	double m;

	*now = (double)nd->cost * f->scale_now;
	*before = (double)nd->base * f->scale_base;
	m = *now > *before ? *now : *before;
	return m > 0 ? (*now - *before) / m : 0;
}

/* Red where the cost per stream grew, blue where it shrank, white where it stayed. */
static int put_diff_colour(struct buf *b, const struct flame *f, const struct fcost *nd)
{
	double now, before, r = change_of(f, nd, &now, &before), t = r < 0 ? -r : r;
	unsigned v = (unsigned)(235 - 190 * t + 0.5), rgb[3];

	rgb[0] = r > 0 ? 255 : v;
	rgb[1] = v;
	rgb[2] = r < 0 ? 255 : v;
	return put_hex_rgb(b, rgb);
}

/* "\nper stream: before 1.23 ms, after 2.35 ms" */
static int put_change(struct buf *b, const struct flame *f, const struct fcost *nd)
{
	double now, before;

	change_of(f, nd, &now, &before);
	return buf_puts(b, "\nper stream: before ") || put_duration(b, before) || buf_puts(b, ", after ") ||
	       put_duration(b, now);
}

struct rctx {
	struct flame *f;
	struct buf *out;
	const char *href; /* escaped prefix, or NULL */
	size_t hreflen;
	const char *suffix; /* escaped, or NULL */
	uint64_t fcost;   /* the focused node's cost */
	double scale;     /* px per ns */
};

/* Characters that fit in w px; fewer than 3: no label. */
static size_t label_fit(double w)
{
	double fit = (w - 2 * TEXT_PAD) / CHAR_PX;

	return fit >= 3 ? (size_t)fit : 0;
}

/* Characters (not bytes) of s[0..n). */
static size_t utf8_chars(const char *s, size_t n)
{
	size_t chars = 0;

	for (size_t i = 0; i < n; i++)
		chars += ((unsigned char)s[i] & 0xc0) != 0x80;
	return chars;
}

/* The name cut to `fit` (>= 3) characters: all of it, or whole characters and "…". */
static int put_label(struct buf *b, const char *s, size_t n, size_t fit)
{
	size_t chars = 0, cut = 0;

	for (size_t i = 0; i < n; i++) {
		if (((unsigned char)s[i] & 0xc0) == 0x80)
			continue; /* continuation byte */
		if (chars == fit - 1)
			cut = i;
		chars++;
	}
	if (chars <= fit)
		return buf_put_html(b, s, n);
	if (buf_put_html(b, s, cut))
		return -1;
	return buf_puts(b, "\xe2\x80\xa6");
}

static int emit_node(struct rctx *c, uint32_t k, unsigned row, double x, double w, bool anc)
{
	const struct fcost *nd = &c->f->costs[k];
	const struct fname *nm = &c->f->names[c->f->nodes[k].nid];
	struct buf *b = c->out;
	double share = c->fcost ? 100.0 * (double)nd->cost / (double)c->fcost : 0;
	size_t fit = label_fit(w);
	bool hit = node_matches(c->f, k);
	char t[FMT_LEN];

	if (buf_puts(b, anc ? "<g class=\"fn anc" : "<g class=\"fn") || (hit && buf_puts(b, " hit")) ||
	    buf_puts(b, "\"><title>") ||
	    buf_put_html(b, nm->s, nm->len) || buf_putc(b, '\n') || put_duration(b, (double)nd->cost) ||
	    buf_puts(b, " (") || put_share(b, share) || buf_putc(b, ')') ||
	    /* a differential flame knows no events */
	    (!c->f->diff && (buf_puts(b, ", ") || buf_puts(b, fmt_count(t, (int64_t)(nd->events > INT64_MAX ? INT64_MAX : nd->events))) ||
			     buf_puts(b, nd->events == 1 ? " event" : " events"))) ||
	    (c->f->diff && put_change(b, c->f, nd)) || buf_puts(b, "</title>"))
		return -1;
	if (c->href && (buf_puts(b, "<a href=\"") || buf_append(b, c->href, c->hreflen) ||
			buf_put_i64(b, c->f->idof[k]) || (c->suffix && buf_puts(b, c->suffix)) || buf_puts(b, "\">")))
		return -1;
	if (buf_puts(b, "<rect x=\"") || buf_put_f1(b, x) || buf_puts(b, "\" y=\"") ||
	    buf_put_i64(b, (int64_t)row * ROW_PX) || buf_puts(b, "\" width=\"") || buf_put_f1(b, w) ||
	    buf_puts(b, "\" height=\"") || buf_put_i64(b, BAR_PX) || buf_puts(b, "\" fill=\"") ||
	    (c->f->diff ? put_diff_colour(b, c->f, nd) : put_colour(b, nm->s, nm->len)) || buf_puts(b, "\"/>"))
		return -1;
	/* a label that must be cut shows the function, not the module it starts with */
	const char *ls = nm->s;
	size_t ln = nm->len;
	const char *bang = memchr(ls, '!', ln);
	if (fit && bang && utf8_chars(ls, ln) > fit) {
		ln -= (size_t)(bang + 1 - ls);
		ls = bang + 1;
	}
	if (fit && (buf_puts(b, "<text x=\"") || buf_put_f1(b, x + TEXT_PAD) || buf_puts(b, "\" y=\"") ||
		    buf_put_i64(b, (int64_t)row * ROW_PX + 13) || buf_puts(b, "\">") ||
		    put_label(b, ls, ln, fit) || buf_puts(b, "</text>")))
		return -1;
	if (c->href && buf_puts(b, "</a>"))
		return -1;
	return buf_puts(b, "</g>\n");
}

/* Depth (rows below k) of the deepest descendant wide enough to draw. */
static unsigned measure(const struct rctx *c, uint32_t k)
{
	const struct flame *f = c->f;
	unsigned best = 0;

	for (uint32_t j = f->kstart[k]; j < f->kstart[k + 1]; j++) {
		uint32_t ch = f->kids[j];

		if ((double)f->costs[ch].cost * c->scale >= MIN_NODE_PX) {
			unsigned d = 1 + measure(c, ch);

			if (d > best)
				best = d;
		}
	}
	return best;
}

static int emit_below(struct rctx *c, uint32_t k, unsigned row, double x)
{
	const struct flame *f = c->f;
	uint64_t cum = 0;

	for (uint32_t j = f->kstart[k]; j < f->kstart[k + 1]; j++) {
		uint32_t ch = f->kids[j];
		uint64_t cost = f->costs[ch].cost;
		double cx = x + (double)cum * c->scale, w = (double)cost * c->scale;

		cum += cost;
		if (w < MIN_NODE_PX)
			continue;
		if (emit_node(c, ch, row, cx, w, false) || emit_below(c, ch, row + 1, cx))
			return -1;
	}
	return 0;
}

int flame_render_svg(struct flame *f, uint32_t focus, const char *href_prefix, int width, struct buf *out)
{
	uint32_t chain[FLAME_MAX_DEPTH + 1];
	struct buf href = BUF_INIT(0), suffix = BUF_INIT(0);
	struct rctx c;
	size_t start = out->len;
	uint32_t fk = 0, depth;
	unsigned rows;
	double w;
	int rc = -1;

	if (flame_index(f) < 0)
		return -1;
	f->err[0] = '\0';
	if (width < 100)
		width = 100;
	if (width > 100000)
		width = 100000;
	w = width;
	if (focus >= 1 && focus <= f->n)
		fk = f->byid[focus - 1];
	depth = f->nodes[fk].depth;
	for (uint32_t k = fk, d = depth + 1; d > 0; d--, k = f->nodes[k].parent)
		chain[d - 1] = k;
	memset(&c, 0, sizeof(c));
	c.f = f;
	c.out = out;
	c.fcost = f->costs[fk].cost;
	c.scale = c.fcost ? w / (double)c.fcost : 0;
	if (href_prefix) {
		if (buf_put_html(&href, href_prefix, strlen(href_prefix)) || buf_reserve(&href, 0))
			goto done;
		c.href = buf_cstr(&href);
		c.hreflen = href.len;
	}
	if (f->suffix) {
		if (buf_put_html(&suffix, f->suffix, strlen(f->suffix)) || buf_reserve(&suffix, 0))
			goto done;
		c.suffix = buf_cstr(&suffix);
	}
	f->shown = c.fcost;
	f->matched = f->search ? matched_below(f, fk) : 0;
	rows = depth + 1 + (c.fcost ? measure(&c, fk) : 0);
	if (buf_puts(out, f->search ? "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"flame searching\" width=\""
				    : "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"flame\" width=\"") ||
	    buf_put_i64(out, width) || buf_puts(out, "\" height=\"") ||
	    buf_put_i64(out, (int64_t)rows * ROW_PX) || buf_puts(out, "\" viewBox=\"0 0 ") ||
	    buf_put_i64(out, width) || buf_putc(out, ' ') || buf_put_i64(out, (int64_t)rows * ROW_PX) ||
	    buf_puts(out, "\" font-family=\"monospace\" font-size=\"12\">\n"))
		goto done;
	/* The focused node and its ancestors span the whole width. */
	for (uint32_t d = 0; d <= depth; d++)
		if (emit_node(&c, chain[d], d, 0, w, d < depth))
			goto done;
	if (c.fcost && emit_below(&c, fk, depth + 1, 0))
		goto done;
	if (buf_puts(out, "</svg>\n"))
		goto done;
	rc = 0;
done:
	buf_release(&href);
	buf_release(&suffix);
	if (rc) {
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
		set_err(f, "out of memory or output full");
	}
	return rc;
}
