/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The hardware-independent part of paranic.ko: argument checks of every ioctl,
 * the context allocation bitmap, ring geometry, mmap and registration bounds.
 * No kernel API beyond <linux/types.h> and <linux/errno.h>, so it compiles in the
 * module and in user space, where tests/driver/test_driver_logic.py drives it
 * with random and hostile inputs (driver/tests/logic_test.c).
 */
#ifndef PN_LOGIC_H
#define PN_LOGIC_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/types.h>
#else
#include <errno.h>
#include <stdint.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
#endif

#include "uapi/paranic.h"

/* ---- contexts ---- */

/* Claim context `want` (or the lowest free one when want < 0) in the bitmap of
 * n_ctx (1..64) contexts. Returns the context, -EBUSY (taken / none free) or -EINVAL. */
int pn_ctx_claim(u64 *map, u32 n_ctx, int want);
/* Give context ctx back: 0, or -EINVAL when it was not claimed (double free). */
int pn_ctx_free(u64 *map, u32 n_ctx, u32 ctx);

/* ---- ring geometry and mmap ---- */

struct pn_geom {
	u32 mtu;
	u32 rx_slots, rx_slot_bytes, tx_entries;
	u64 rx_bytes, tx_bytes, status_bytes; /* each rounded up to whole pages */
};

#define PN_RING_LOG2_MIN 1
#define PN_RING_LOG2_MAX 16
#define PN_RING_MAX_BYTES (64ULL << 20)   /* per ring: what one coherent buffer may take */

/* Shape the rings of a context: mtu a multiple of 8 in 8..PN_MAX_MTU, log2 sizes in
 * PN_RING_LOG2_MIN..MAX, page_size a power of two >= 4096. 0 or -EINVAL. */
int pn_geom_init(struct pn_geom *g, u32 mtu, u32 rx_log2, u32 tx_log2, u64 page_size);

/* Regions of a context's mmap (PARANIC_MMAP_* >> PARANIC_MMAP_REGION_SHIFT). */
enum pn_region { PN_R_CTX_PAGE, PN_R_RX, PN_R_TX, PN_R_STATUS, PN_R_WINDOW };

/* Check an mmap request: offset (bytes) must be the start of a region, len > 0 and
 * within the region (rounded to pages); window_bytes is the context's allocated window
 * (0: none); writable: the mapping asks for PROT_WRITE (RX ring and status block are
 * read-only). Returns the region or -EINVAL (bounds) / -EACCES (write to read-only) /
 * -ENXIO (no window). */
int pn_mmap_check(const struct pn_geom *g, u64 offset, u64 len, u64 window_bytes, int writable,
		  u64 page_size);

/* ---- memory registration ---- */

/* Check a MEM_REGISTER request. used: bytes the context has registered already (a
 * context has one window: anything > 0 is -EBUSY); limit: per-context cap; user_top:
 * the end of the user address space. For user memory, *first (page-aligned start) and
 * *npages (pages to pin) are set. 0 or -EINVAL / -EBUSY / -E2BIG / -EFAULT. */
int pn_mem_check(const struct paranic_mem *m, u64 used, u64 limit, u64 user_top, u64 page_size,
		 u64 *first, u64 *npages);

/* ---- administrator ioctls ---- */

int pn_node_check(const struct paranic_node *n);
/* table_nodes: routing-table entries; link_ports: 2 (ring) or 4 (torus). */
int pn_routes_check(const struct paranic_routes *r, u32 table_nodes);
int pn_route_port_check(u8 port, u32 link_ports);
int pn_barrier_check(const struct paranic_barrier *b, u32 n_ctx);

/* ---- semi-user-level mode ---- */

/* Check a SEND/write() record and build the 16-byte header (two little-endian
 * words; src fields are left 0: the NIC stamps them). 0, -EINVAL or -EMSGSIZE. */
int pn_send_build(const struct paranic_send *s, u32 mtu, u64 hdr[2]);
/* Registers a DOORBELL may write: 0 or -EINVAL. */
int pn_doorbell_check(const struct paranic_doorbell *d);

/* An ioctl command this ABI knows (number and argument size): 0 or -ENOTTY. */
int pn_ioctl_check(unsigned int cmd);

/* Modular count comparison: done has reached want. */
static inline int pn_count_reached(u32 done, u32 want)
{
	return (int32_t)(done - want) >= 0;
}

#endif /* PN_LOGIC_H */
