/*
 * threads: the agent's middle layer (hot.h draws the layers), what runs on
 * its own threads: the watchdog and the shipping thread (threads.c), the
 * trace streams they build and ship (report.c), and the settings the server
 * pushes in its answers (pushed.c). All [agent] in hot.h's terms: every
 * signal blocked, a descriptor table of their own; they may block, allocate
 * and do I/O, and call the layer below.
 */
#ifndef SM_GUARD_THREADS_H
#define SM_GUARD_THREADS_H

#include "agent/guard/rt.h"

/* ---- threads.c: their main functions, handed to guard_threads_init() at start-up ---- */
void *guard_watchdog_main(void *arg);
void *guard_ship_main(void *arg);

/* ---- report.c ---- */
/* Builds the violation's stream and ships it (shipping thread only). */
void guard_report(const struct gviol *v);
/* The process's shipping budget (G.budget), whose captures build_stream() and deliveries are this file's.
 * Start-up, before any thread. */
void guard_report_init(void);
/* At exit (shipping thread), around the shipping of the candidates: with begin, a connection of
 * their own to a server that answered the last request (EXIT_HELD_MS at most, then the spool);
 * without, closes it. */
void guard_report_exit_held(int begin);
/* Periodic work of the shipping thread: drain the spool, release idle symbol tables. */
void guard_report_tick(int64_t now);
/* The process's report to the server (docs/wire-format.md "Agent reports"); shipping thread only. */
void guard_report_self(void);
/* At exit (shipping thread): training's upload when upload is set, and the last report, but only to a
 * server that answered the last request, and within EXIT_NET_MS. */
void guard_report_exit(int upload);
/* At exit (shipping thread), first: when the program cleaned up the OpenSSL behind
 * libcurl (lazy_tls_stopped()) and a server is https, the exit uses no network, its streams go to the spool, and the
 * connections are left to the process's end. */
void guard_report_exit_begin(void);
/* The shipping thread ends: its connections and spool (in its own descriptor table) go with it. */
void guard_report_thread_end(void);
/* ---- pushed.c ---- */
struct gprofile;
struct gtab;
/* The guard table of profile p at this process's addresses; NULL with a message in err. Caller frees
 * with gtab_free(). */
struct gtab *guard_tab_build(const struct gprofile *p, char *err, size_t errlen);
/* A module loaded (dlopen): the table is built again if it resolves more of the profile. [program] */
void guard_on_dlopen(void);
/* Applies the settings in a report's answer ({"ok": true, "settings": {...}}, docs/fleet.md);
 * a setting absent is the one the process started with. Shipping thread only. */
void guard_apply_settings(const char *answer, size_t len);
/* The settings as the process started (indexed by enum guard_setting_id): what an absent one is. */
void guard_settings_started(double out[]);
/* Training: what this process learnt, uploaded to the server (POST /api/v1/profiles). Shipping thread only. */
void guard_profile_upload(void);
/* Guarding: the fleet's profile of this build fetched and, when it has the same loops, guarded with
 * from now on (pushed.c's guard_profile_swap). Shipping thread only. */
void guard_profile_refresh(void);
/* Takes a profile text as the one to guard with (same build, same loops), keeping the current k. */
void guard_profile_swap(const char *text, size_t len);
/* After fork, in the child: forget the parent's shipper and symbolizer (not freed: shared pages). */
void guard_report_reset_child(void);

#endif
