/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * paranic.ko's user-space ABI: /dev/paranic<N>, its ioctls, mmap offsets and the
 * write() record of the semi-user-level mode. Shared by the driver and libparanic's
 * `pci` backend (userlib/src/hal_pci.c). docs/driver.md describes every call.
 *
 * Versioning: PARANIC_ABI_VERSION changes when a structure or a command changes
 * meaning; GET_INFO reports the driver's version and libparanic refuses another
 * major. Structures only grow at their end (reserved fields are zero).
 */
#ifndef _UAPI_PARANIC_H
#define _UAPI_PARANIC_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define PARANIC_ABI_VERSION 1

/* mmap offsets: one region per 256 MiB of file offset; map a region from its start. */
#define PARANIC_MMAP_REGION_SHIFT 28
#define PARANIC_MMAP_CTX_PAGE (0ULL << PARANIC_MMAP_REGION_SHIFT) /* MMIO page, uncached */
#define PARANIC_MMAP_RX_RING  (1ULL << PARANIC_MMAP_REGION_SHIFT) /* coherent, read-only */
#define PARANIC_MMAP_TX_RING  (2ULL << PARANIC_MMAP_REGION_SHIFT) /* coherent */
#define PARANIC_MMAP_STATUS   (3ULL << PARANIC_MMAP_REGION_SHIFT) /* coherent, read-only */
#define PARANIC_MMAP_WINDOW   (4ULL << PARANIC_MMAP_REGION_SHIFT) /* MEM_ALLOC window */
#define PARANIC_MMAP_REGIONS  5

struct paranic_info {
	__u32 abi_version;     /* PARANIC_ABI_VERSION of the driver */
	__u32 node_id;         /* this board's node id (SET_NODE_ID) */
	__u32 num_nodes;       /* nodes in the cluster (SET_NODE_ID; 0 = not set) */
	__u32 topo_x, topo_y;  /* torus dimensions (ring: nodes x 1) */
	__u32 n_ctx;           /* hardware contexts (info_n_ctx CSR) */
	__u32 mtu;             /* payload bytes per packet (info_mtu CSR) */
	__u32 ctx_id;          /* the context this file holds */
	__u32 rx_slots;        /* RX ring slots (power of two) */
	__u32 rx_slot_bytes;   /* PN_RX_SLOT_BYTES(mtu) */
	__u32 tx_entries;      /* TX descriptors (power of two) */
	__u32 link_ports;      /* link ports of the gateware's map */
	__u32 irq_vectors;     /* MSI/MSI-X vectors (0: polled only) */
	__u32 window_max;      /* largest registration (bytes) */
	__u64 csr_map_id;      /* PN_CSR_MAP_ID the driver was built for */
	__u64 rx_bytes, tx_bytes; /* mmap lengths of the rings */
	__u64 reserved[4];
};

/* SET_NODE_ID (CAP_NET_ADMIN) */
struct paranic_node {
	__u32 node_id;         /* < PN_MAX_NODES */
	__u32 num_nodes;       /* 1..PN_MAX_NODES, > node_id */
	__u32 topo_x, topo_y;  /* topo_x * topo_y == num_nodes */
};

/* LOAD_ROUTES (CAP_NET_ADMIN): table[first + i] = ports[i] for i < count. */
struct paranic_routes {
	__u32 first;           /* first destination node */
	__u32 count;           /* entries; first + count <= the table's size */
	__u64 ports;           /* user pointer to count bytes (PN_PORT_* values) */
};

/* MEM_REGISTER / MEM_DEREGISTER: the context's one DMA window (docs/driver.md). */
#define PARANIC_MEM_ALLOC 0x1u /* the driver allocates the window (coherent memory) */
struct paranic_mem {
	__u64 addr;            /* in: user address (0 with PARANIC_MEM_ALLOC) */
	__u64 len;             /* in: bytes (> 0, <= window_max) */
	__u32 flags;           /* in: PARANIC_MEM_* */
	__u32 reserved;
	__u64 dma;             /* out: DMA address of the first byte (for descriptors) */
	__u64 mmap_offset;     /* out: PARANIC_MMAP_WINDOW with PARANIC_MEM_ALLOC, else 0 */
};

/* BARRIER_CONFIG (CAP_NET_ADMIN): the barrier unit, written while disabled. */
struct paranic_barrier {
	__u32 nodes;           /* participating nodes 1..PN_MAX_NODES */
	__u32 radix_log2;      /* tree fan-out 2^radix_log2, 0..3 */
	__u32 mode;            /* 0 tree, 1 all-to-all */
	__u32 reserved;
	__u64 participants;    /* context mask that must enter (0: any one) */
};

/* SEND and write(): one packet through the PIO window, checked by the driver. */
struct paranic_send {
	__u16 dst_node;
	__u8 dst_ctx;
	__u8 type;             /* PN_TYPE_DATA or an RMA type */
	__u32 length;          /* payload bytes <= min(mtu, PIO window - header) */
	__u64 tag;
	__u64 payload;         /* SEND: user pointer; write(): 0, payload follows */
};

/* DOORBELL: a checked register write for processes without the mapped page. */
struct paranic_doorbell {
	__u32 reg;             /* PN_REG_TX_TAIL, RX_HEAD, BARRIER or IRQ_ARM */
	__u32 value;
};

#define PARANIC_IOC_MAGIC 0xC5
#define PARANIC_IOC_GET_INFO       _IOR(PARANIC_IOC_MAGIC, 0x00, struct paranic_info)
#define PARANIC_IOC_SET_NODE_ID    _IOW(PARANIC_IOC_MAGIC, 0x01, struct paranic_node)
#define PARANIC_IOC_LOAD_ROUTES    _IOW(PARANIC_IOC_MAGIC, 0x02, struct paranic_routes)
#define PARANIC_IOC_MEM_REGISTER   _IOWR(PARANIC_IOC_MAGIC, 0x03, struct paranic_mem)
#define PARANIC_IOC_MEM_DEREGISTER _IOW(PARANIC_IOC_MAGIC, 0x04, struct paranic_mem)
#define PARANIC_IOC_BARRIER_CONFIG _IOW(PARANIC_IOC_MAGIC, 0x05, struct paranic_barrier)
#define PARANIC_IOC_SEND           _IOW(PARANIC_IOC_MAGIC, 0x06, struct paranic_send)
#define PARANIC_IOC_DOORBELL       _IOW(PARANIC_IOC_MAGIC, 0x07, struct paranic_doorbell)

#endif /* _UAPI_PARANIC_H */
