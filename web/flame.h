/*
 * flame: an icicle graph (a flame graph with the root at the top) of call
 * stacks weighted by cost, rendered server-side as SVG for the dashboard.
 *
 * Stacks are merged into a tree (children interned by name under their
 * parent); a node's cost is the total of the stacks that pass through it.
 * Rendering is a pure function of the tree: no script, no style attributes
 * (the pages run under a strict Content-Security-Policy), every name escaped,
 * and the same input gives the same bytes.
 */
#ifndef SM_FLAME_H
#define SM_FLAME_H

#include "common/buf.h"

#include <stddef.h>
#include <stdint.h>

#define FLAME_MAX_NODES 200000  /* root included */
#define FLAME_MAX_DEPTH 1024    /* frames per stack */

struct flame;

/* Returns an empty flame (just the root), or NULL on out of memory. Caller frees with flame_free(). */
struct flame *flame_open(void);
/* NULL-safe. */
void flame_free(struct flame *f);
/* The last error, "" if none; owned by f, valid until the next call on f. */
const char *flame_error(const struct flame *f);
/* Add one stack: names[0..n) outermost first (copied; n may be 0 = cost at the root) with its cost
 * and event count. Returns 0, or -1 with an error (out of memory, n > FLAME_MAX_DEPTH, a NULL name,
 * or the tree would grow past FLAME_MAX_NODES); a refused stack leaves the flame unchanged. */
int flame_add(struct flame *f, const char *const *names, size_t n, uint64_t cost_ns, uint64_t events);
/* A differential flame (before and after): the "before" cost of a stack, summed into its frames like
 * flame_add()'s but drawing nothing (widths are the "after" costs). Returns 0 or -1 as flame_add(). */
int flame_add_base(struct flame *f, const char *const *names, size_t n, uint64_t cost_ns);
/* Colours the frames by their change per stream (cost x scale_now against base x scale_base): red
 * where it grew, blue where it shrank, white where it stayed; titles say both. */
void flame_set_diff(struct flame *f, double scale_now, double scale_base);
/* Marks the frames whose name holds q (ASCII case-insensitive) with class "hit", the <svg> with
 * class "searching", and sums their cost (flame_matched_cost()); NULL or "": no search. q is kept,
 * not copied: it must outlive the renders. */
void flame_set_search(struct flame *f, const char *q);
/* Appended (escaped) to every link after the id, e.g. "#flame"; NULL: nothing. Kept, not copied. */
void flame_set_link_suffix(struct flame *f, const char *suffix);
/* After a render: the cost of the matching frames under the focus (each counted once, not again
 * under a matching caller), and the focused frame's cost (the graph's 100 %). */
uint64_t flame_matched_cost(const struct flame *f);
uint64_t flame_shown_cost(const struct flame *f);
/* Append the icicle graph as one <svg class="flame"> element to out. width in px (clamped to
 * [100, 100000]); focus = node id to zoom into (0 or an unknown id: the root). Node ids are given
 * after all adds: root = 1, then depth-first with children in name (byte) order, so the same stacks
 * give the same ids whatever the order they were added in. Each drawn node links to
 * "{href_prefix}{id}" (href_prefix NULL: no links). Returns 0, or -1 (out of memory, out full)
 * with out left as it was. */
int flame_render_svg(struct flame *f, uint32_t focus, const char *href_prefix, int width, struct buf *out);
/* The length of the module or package that a frame name starts with: up to and with the '!' of
 * "libc.so.6!read", the last "::" of "Foo::Bar::baz", the dot before the class of
 * "java.util.HashMap.get" ("java.util."), the first two words of "ngx_http_process_request"
 * ("ngx_http"); else the whole name. */
size_t flame_module_len(const char *s, size_t n);
/* A frame's fill: "#rrggbb" and a NUL in out, a warm colour from a stable (byte-wise FNV-1a) hash of
 * its module (flame_module_len()), so a module has the same colour on every page and run. */
void flame_colour(const char *s, size_t n, char out[8]);
/* Total cost of all stacks added (the root's cost, saturating). */
uint64_t flame_total_cost(const struct flame *f);
/* Number of nodes, the root included. */
size_t flame_node_count(const struct flame *f);

#endif
