/*
 * spool: the agent's on-disk queue of streams the server has not taken yet.
 *
 * One file per stream, <stream_id>.json (the stream as one line of JSON),
 * written atomically (temporary file, fsync, rename, fsync of the directory)
 * so a crash leaves either the whole stream or nothing. Streams the server
 * rejected are moved to rejected/<stream_id>.json with the server's message
 * in rejected/<stream_id>.error beside them. The spool is bounded: a put that
 * would take it past its maximum size is refused, the spool never grows
 * past it. docs/agent.md describes the layout for operators.
 */
#ifndef SM_SPOOL_H
#define SM_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#define SPOOL_DEFAULT_MAX ((uint64_t)1 << 30)  /* 1 GiB */

enum spool_result {
	SPOOL_OK = 0,
	SPOOL_EIO = -1,     /* a file system call failed; the message says which */
	SPOOL_EFULL = -2,   /* the put would take the spool past its maximum */
	SPOOL_EINVAL = -3,  /* not a stream id (a UUID) */
};

struct spool_entry {
	char id[37];        /* stream id, the file name without ".json" */
	uint64_t size;      /* bytes on disk */
	int64_t mtime_ns;
};

struct spool;

/*
 * Opens the spool in `dir`, creating it (and its parents) when `create` is
 * set, and counts the bytes it holds (rejected/ included). Temporary files
 * that a crashed writer left behind more than an hour ago are removed.
 * Returns NULL with the reason in err. Caller frees with spool_free().
 */
struct spool *spool_open(const char *dir, uint64_t max_bytes, int create, char *err,
			 size_t errlen);
/* NULL-safe. */
void spool_free(struct spool *sp);
const char *spool_error(const struct spool *sp);
/* Bytes held, as counted at open and changed by this handle since. */
uint64_t spool_used(const struct spool *sp);

/* Store json[0..len) (a newline is added) as <id>.json, replacing an older copy. */
int spool_put(struct spool *sp, const char *id, const char *json, size_t len);
/*
 * The streams waiting (rejected/ excluded), oldest first, into *out (caller
 * frees with free()). Files whose name is not <uuid>.json are skipped.
 */
int spool_list(struct spool *sp, struct spool_entry **out, size_t *n);
/* The streams waiting in the spool in dir (what spool_list() lists), 0 when it cannot be read. */
size_t spool_count(const char *dir, uint64_t max_bytes);
/* The contents of <id>.json (at most max bytes) into *data (caller frees). */
int spool_read(struct spool *sp, const char *id, size_t max, char **data, size_t *len);
/* Removes <id>.json; a file already gone is not an error. */
int spool_remove(struct spool *sp, const char *id);
/* Moves <id>.json to rejected/ and writes rejected/<id>.error with `why` and a newline. */
int spool_reject(struct spool *sp, const char *id, const char *why);

#endif
