/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The collectives' internals shared by coll.c (the path's choice, the software path) and
 * coll_unit.c (the NIC's collective unit): the kernel's header word, field by field
 * (PN_COLLHDR_* of the generated pn_coll_spec.h), and the calls between the two files.
 */
#ifndef PN_COLL_INT_H
#define PN_COLL_INT_H

#include <stdint.h>

#include "paranic/pn_coll.h"
#include "ports_int.h"

#define HGET(w, F) (((w) >> PN_COLLHDR_##F##_SHIFT) & PN_COLLHDR_##F##_MASK)
#define HSET(w, F, v) \
	(((w) & ~(PN_COLLHDR_##F##_MASK << PN_COLLHDR_##F##_SHIFT)) | \
	 (((uint64_t)(v) & PN_COLLHDR_##F##_MASK) << PN_COLLHDR_##F##_SHIFT))
#define HFIELD(w, F) ((w) & (PN_COLLHDR_##F##_MASK << PN_COLLHDR_##F##_SHIFT))
/* The fields every contribution of one operation, and its result, agree on. */
#define HKEY(w) (HFIELD(w, OP) | HFIELD(w, DTYPE) | HFIELD(w, RED) | HFIELD(w, NBYTES) | HFIELD(w, ROOT) | \
		 HFIELD(w, NODES) | HFIELD(w, EPISODE))

#pragma GCC visibility push(hidden)
/* coll.c: the header word of an operation (episode ep); *bad: the local checks failed. */
uint64_t pt_coll_header(const pn_port_t *p, int op, unsigned root, const void *in, const void *out, size_t nbytes,
			int dtype, int red, uint16_t ep, int *bad);
/* coll_unit.c: one operation on the unit (hdr from pt_coll_header). */
int pt_coll_unit_run(pn_port_t *p, uint64_t hdr, int bad, const void *in, void *out, size_t nbytes);
#pragma GCC visibility pop

#endif /* PN_COLL_INT_H */
