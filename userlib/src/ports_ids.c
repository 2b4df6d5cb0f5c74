/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: the id tables. A send waiting for its CTS and a rendezvous receive waiting for
 * its data are named on the wire by an id (a table index and a 12-bit generation), so
 * that a late or forged CTS or RDATA packet of a finished request finds nothing rather
 * than freed memory. The lookup (id_get) runs for every RDATA packet: it is static
 * inline in ports_int.h. Design of the layer: ports_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ports_int.h"

/* A new id for ptr in *id: a free entry's index and its next generation; the table
 * doubles when full, up to 2^ID_IDX_BITS entries (else -ENOMEM). */
int pt_id_alloc(struct idtab *t, void *ptr, uint32_t *id)
{
	uint32_t i;
	if (!t->nfree) {
		uint32_t ncap = t->cap ? t->cap * 2 : 64;
		if (ncap > (1u << ID_IDX_BITS))
			return -ENOMEM;
		void **np = realloc(t->ptr, ncap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		t->ptr = np;
		uint16_t *ng = realloc(t->gen, ncap * sizeof(*ng));
		if (!ng)
			return -ENOMEM;
		t->gen = ng;
		uint32_t *nf = realloc(t->free, ncap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		t->free = nf;
		for (i = t->cap; i < ncap; i++) {
			t->ptr[i] = NULL;
			t->gen[i] = (uint16_t)(i * 7u + 1u);
		}
		for (i = ncap; i > t->cap; i--)
			t->free[t->nfree++] = i - 1;
		t->cap = ncap;
	}
	i = t->free[--t->nfree];
	t->gen[i] = (uint16_t)((t->gen[i] + 1) & 0xfff);
	t->ptr[i] = ptr;
	*id = i | ((uint32_t)t->gen[i] << ID_IDX_BITS);
	return 0;
}

/* Free id (nothing when it names no entry). */
void pt_id_free(struct idtab *t, uint32_t id)
{
	uint32_t i = id & ID_IDX_MASK;
	if (i < t->cap && t->ptr[i] && t->gen[i] == (id >> ID_IDX_BITS)) {
		t->ptr[i] = NULL;
		t->free[t->nfree++] = i;
	}
}

void pt_id_destroy(struct idtab *t)
{
	free(t->ptr);
	free(t->gen);
	free(t->free);
	memset(t, 0, sizeof(*t));
}
