/* imap: the integer hash map of the project (see imap.h). */
#include "common/imap.h"
#include "common/vec.h"

#include <stdlib.h>

static int grow(struct imap *m, size_t ncap)
{
	uint64_t *nk = vec_alloc(ncap, sizeof(*nk)), *nv = vec_alloc(ncap, sizeof(*nv));
	struct imap n = { nk, nv, ncap, m->cnt, 64 };
	size_t j, i;

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -1;
	}
	while (((size_t)1 << (64 - n.shift)) < ncap)
		n.shift--;
	memset(nk, 0xff, ncap * sizeof(*nk));
	for (j = 0; j < m->cap; j++) {
		if (m->keys[j] == IMAP_EMPTY)
			continue;
		for (i = imap_home(&n, m->keys[j]); nk[i] != IMAP_EMPTY; i = (i + 1) & (ncap - 1))
			;
		nk[i] = m->keys[j];
		nv[i] = m->vals[j];
	}
	free(m->keys);
	free(m->vals);
	*m = n;
	return 0;
}

int imap_reserve(struct imap *m, size_t n)
{
	size_t ncap = m->cap ? m->cap : 8;

	if (n > SIZE_MAX / 4)
		return -1;
	while (ncap < 2 * n)
		ncap *= 2;
	return ncap > m->cap ? grow(m, ncap) : 0;
}

int imap_put(struct imap *m, uint64_t key, uint64_t val)
{
	size_t i;

	if ((m->cnt + 1) * 2 > m->cap && imap_reserve(m, m->cnt + 1) < 0)
		return -1;
	for (i = imap_home(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return 1;
		}
		if (m->keys[i] == IMAP_EMPTY)
			break;
	}
	m->keys[i] = key;
	m->vals[i] = val;
	m->cnt++;
	return 0;
}

bool imap_del(struct imap *m, uint64_t key)
{
	size_t i = imap_find(m, key), j, mask = m->cap - 1;

	if (i == SIZE_MAX)
		return false;
	/* shift back the entries of the run that probed past i */
	for (j = (i + 1) & mask; m->keys[j] != IMAP_EMPTY; j = (j + 1) & mask) {
		size_t home = imap_home(m, m->keys[j]);

		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = IMAP_EMPTY;
	m->cnt--;
	return true;
}

void imap_clear(struct imap *m)
{
	if (m->cap)
		memset(m->keys, 0xff, m->cap * sizeof(*m->keys));
	m->cnt = 0;
}

void imap_free(struct imap *m)
{
	if (!m)
		return;
	free(m->keys);
	free(m->vals);
	*m = (struct imap)IMAP_INIT;
}
