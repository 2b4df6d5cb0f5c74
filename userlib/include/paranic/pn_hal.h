/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic hardware abstraction layer (HAL).
 *
 * One API for every ParaNIC backend: "sw" (a software NIC in shared memory for
 * processes on one machine), "sim" (the Verilator cluster simulator) and "pci"
 * (the driver's mapping of a real board). The ring protocol of the host interface
 * (docs/protocol.md) is implemented once, in the hal*.c files; a backend only
 * supplies the context's memory and what a doorbell does (src/hal_backend.h).
 *
 * Conventions: every function returns 0 or a positive count on success and a
 * negative errno code on failure (-EINVAL, -EAGAIN, -EMSGSIZE, -ENOENT, -ENOMEM,
 * -EHOSTUNREACH, -EBUSY, -EFAULT ...). Nothing aborts or exits. A handle is used
 * by one thread at a time (open one context per thread). See docs/userlib.md.
 */
#ifndef PN_HAL_H
#define PN_HAL_H

#include <stddef.h>
#include <stdint.h>

#include "pn_protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pn_hal pn_hal_t;

/* The library's ABI version, checked by paranicd at attach (docs/paranicd.md): the
 * major number must match the daemon's; the minor one grows with compatible additions. */
#define PN_ABI_VERSION_MAJOR 1
#define PN_ABI_VERSION_MINOR 0
#define PN_ABI_VERSION 0x00010000 /* (MAJOR << 16) | MINOR */

/* "any free context" for pn_open_opts_t.ctx */
#define PN_CTX_ANY (-1)
/* PIO below or at this many payload bytes, DMA above (pn_send); EPOS used 256. */
#define PN_DEFAULT_PIO_THRESHOLD 256
/* Defaults of the sw backend's rings (per context). */
#define PN_SW_DEFAULT_RX_SLOTS 256
#define PN_SW_DEFAULT_TX_ENTRIES 64

typedef struct pn_open_opts {
	const char *backend;  /* NULL: $PARANIC_BACKEND, else "sw" */
	const char *cluster;  /* NULL: $PARANIC_CLUSTER, else "default" */
	int node;             /* -1: $PARANIC_NODE, else 0 */
	int nodes;            /* 0: $PARANIC_NODES, else the existing cluster's, else 1 */
	int ctx;              /* PN_CTX_ANY: any free context; else that context */
	/* Cluster shape, used by the process that creates a sw cluster (0: $PARANIC_<NAME>
	 * or the default); a process attaching to an existing cluster must leave them 0
	 * or give the same values. */
	int contexts;         /* PARANIC_CONTEXTS, default PN_DEFAULT_CONTEXTS */
	int mtu;              /* PARANIC_MTU, default PN_DEFAULT_MTU */
	int rx_slots;         /* PARANIC_RX_SLOTS, default PN_SW_DEFAULT_RX_SLOTS (power of 2) */
	int tx_entries;       /* PARANIC_TX_ENTRIES, default PN_SW_DEFAULT_TX_ENTRIES (power of 2) */
	long pio_threshold;   /* -1: $PARANIC_PIO_THRESHOLD, else PN_DEFAULT_PIO_THRESHOLD */
} pn_open_opts_t;

/* Fill opts with "unset" values (everything from the environment or defaults). */
void pn_open_opts_init(pn_open_opts_t *opts);

/* Open a context. opts may be NULL (all from the environment). When the node's paranicd
 * runs (its socket exists; $PARANIC_DAEMON=require: must run, else -ENOTCONN), the
 * context is announced to it and may be refused: -EACCES (user not allowed, context not
 * the caller's) or -EPROTO (ABI version); pn_daemon_last_reason() gives its words. */
int pn_open(pn_hal_t **out, const pn_open_opts_t *opts);
/* Release the context. Posted but unfinished sends are abandoned: call pn_tx_wait first.
 * A closed handle stays poisoned (not freed) for the next 256 closes of the process:
 * using it, or closing it again, returns -EBADF meanwhile (docs/userlib.md). */
int pn_close(pn_hal_t *h);
/* 0 while the NIC answers; -EIO once the simulator went away (sim), -ENODEV once the
 * device fell off the bus (pci: registers read all-ones). Every wait loop of the
 * library asks this now and then and returns the error instead of waiting for ever;
 * once failed, every call that needs the NIC fails with it. */
int pn_alive(pn_hal_t *h);

/* Information (negative errno on a NULL handle). */
int pn_node_id(const pn_hal_t *h);
int pn_num_nodes(const pn_hal_t *h);
int pn_ctx_id(const pn_hal_t *h);
int pn_num_ctx(const pn_hal_t *h);
int pn_mtu(const pn_hal_t *h);
int pn_pio_max(const pn_hal_t *h);        /* largest PIO payload: min(MTU, window - header) */
const char *pn_backend_name(const pn_hal_t *h);
/* Set the pn_send PIO/DMA threshold (payload bytes); returns the old one. */
long pn_set_pio_threshold(pn_hal_t *h, long bytes);

typedef struct pn_status {
	/* The context's status block in host memory (absolute counters, mod 2^32). */
	uint32_t pio_done;      /* PIO doorbells whose packet left the window */
	uint32_t tx_done;       /* DMA descriptors completed or refused */
	uint32_t barrier_done;  /* barrier episodes completed */
	uint32_t errors;        /* operations refused by the NIC (bad PIO header, descriptor) */
	/* Registers (an MMIO read each: about 1 us on PCIe; not for the fast path). */
	uint32_t status_reg;    /* PN_STATUS_* bits */
	uint32_t rx_tail;       /* packets written into the RX ring */
	/* Derived / kept by the HAL. */
	uint32_t rx_slots;      /* RX ring size */
	uint32_t rx_fill;       /* packets in the RX ring not yet released (rx_tail - consumed) */
	uint32_t tx_entries;    /* TX descriptor ring size */
	uint32_t tx_pending;    /* descriptors posted and not completed */
	uint64_t sent_packets;  /* packets handed to the NIC (PIO + DMA, DMA counted at post) */
	uint64_t sent_bytes;    /* payload bytes handed to the NIC */
	uint64_t recv_packets;  /* packets released from the RX ring */
	uint64_t recv_bytes;    /* payload bytes of those */
	uint64_t refused;       /* calls refused by the HAL itself (bad arguments, -EFAULT ...) */
	/* Backend counters (0 where a backend has none). */
	uint64_t node_dropped;  /* packets for a closed/dead context of this node, dropped */
} pn_status_t;

int pn_status(pn_hal_t *h, pn_status_t *st);

/* ---- Send ------------------------------------------------------------------------ */

/* One packet (SOM|EOM) through the PIO window: len <= pn_pio_max(). Waits for the
 * previous PIO packet to leave the window first; buf is reusable on return. */
int pn_send_pio(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
		const void *buf, size_t len);
/* One message of 0..PN_MAX_DMA_LENGTH bytes by DMA: buf must lie in memory from
 * pn_dma_alloc or pn_mem_register (else -EFAULT). Returns once the descriptor is
 * queued; buf belongs to the NIC until the send completes (pn_tx_wait*). */
int pn_send_dma(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
		const void *buf, size_t len);
/* PIO at or below the threshold, DMA above. An unregistered buffer above the
 * threshold is copied into the HAL's bounce buffer (buf reusable on return);
 * a registered one is sent in place as by pn_send_dma. */
int pn_send(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
	    const void *buf, size_t len);
/* DMA descriptors posted on this context so far (mod 2^32). */
uint32_t pn_tx_posted(const pn_hal_t *h);
/* Wait until the first `count` descriptors (pn_tx_posted() after a send) completed. */
int pn_tx_wait_until(pn_hal_t *h, uint32_t count);
/* Wait until every posted DMA descriptor and PIO packet has completed. */
int pn_tx_wait(pn_hal_t *h);

/* Low-level (conformance tests, upper layers): stage an arbitrary 16-byte header
 * (two little-endian words, PN_HDR_* fields) and payload in the PIO window and ring
 * the doorbell; the NIC validates it and stamps src_node/src_ctx. */
int pn_pio_raw(pn_hal_t *h, const uint64_t hdr[2], const void *payload, size_t len);
/* Low-level: post one raw 32-byte descriptor (PN_DESC_* fields, addr a DMA address). */
int pn_tx_post_raw(pn_hal_t *h, const uint64_t desc[4]);

/* ---- DMA-able memory ---------------------------------------------------------------- */

/* Memory the NIC may read: allocated by the backend (zeroed), or registered.
 * pn_dma_free and pn_mem_deregister return -EBUSY (and keep the region, valid and
 * mapped) while a posted DMA send that is not yet done reads from it: wait with
 * pn_tx_wait first. */
int pn_dma_alloc(pn_hal_t *h, size_t len, void **out);
int pn_dma_free(pn_hal_t *h, void *buf);
int pn_mem_register(pn_hal_t *h, void *buf, size_t len);
int pn_mem_deregister(pn_hal_t *h, void *buf);
/* 1 if [buf, buf+len) lies in one registered region or DMA buffer, else 0. */
int pn_mem_is_registered(const pn_hal_t *h, const void *buf, size_t len);
/* The DMA address the NIC uses for buf (-EFAULT if not registered). */
int pn_mem_dma_addr(const pn_hal_t *h, const void *buf, size_t len, uint64_t *dma);

/* ---- Receive (zero copy: header first, then the body into the caller's buffer) -------- */

typedef struct pn_header {
	uint16_t dst_node;
	uint16_t src_node;   /* stamped by the sending NIC */
	uint8_t dst_ctx;
	uint8_t src_ctx;     /* stamped by the sending NIC */
	uint8_t type;        /* PN_TYPE_* */
	uint8_t flags;       /* PN_FLAG_* */
	uint32_t length;     /* payload bytes */
	uint64_t tag;
} pn_header_t;

/* 1 and the header of the next packet if there is one, 0 if none (never blocks).
 * Calling it again before pn_recv_body/pn_recv_skip returns the same packet. */
int pn_recv_header(pn_hal_t *h, pn_header_t *hdr);
/* Copy the current packet's payload into buf and release its slot; returns the
 * payload length. -ENOENT: no current packet; -EMSGSIZE: len too small (the packet
 * stays current). */
int pn_recv_body(pn_hal_t *h, void *buf, size_t len);
/* Release the current packet without copying (returns its length). */
int pn_recv_skip(pn_hal_t *h);
/* Zero copy: *payload points into the RX slot, valid until pn_recv_skip/body. */
int pn_recv_payload(pn_hal_t *h, const void **payload);
/* Poll for a header for up to timeout_ns (<0: forever): 1, or 0 on timeout. */
int pn_recv_wait(pn_hal_t *h, pn_header_t *hdr, int64_t timeout_ns);

/* ---- Barrier, time, progress -------------------------------------------------------- */

/* Enter the cluster barrier and wait until barrier_done advances. */
int pn_barrier(pn_hal_t *h);
/* Time base of the backend: wall clock for sw, simulated time for sim. */
uint64_t pn_now_ns(pn_hal_t *h);
/* Cycles of the target clock (PN_TARGET_CLK_HZ) on the backend's time base. */
uint64_t pn_cycles(pn_hal_t *h);
/* Let a software backend do pending NIC work (the sw NIC runs in its callers). */
int pn_progress(pn_hal_t *h);
/* Called repeatedly while the HAL waits (PIO window, TX ring, completion, barrier),
 * e.g. by rawdata to drain its RX ring so that peers sending to it can finish. The
 * hook may use the non-blocking receive calls, nothing that waits. */
typedef void (*pn_wait_hook_t)(pn_hal_t *h, void *arg);
void pn_set_wait_hook(pn_hal_t *h, pn_wait_hook_t fn, void *arg);

/* ---- Cluster status (docs/userlib.md, "Cluster status") ----------------------------------- */

/* Link ports a pn_node_status_t has room for (a torus router has 4). */
#define PN_STATUS_LINKS 4
/* pn_link_status_t.flags */
#define PN_LINK_HAVE_FAULTS 0x1u   /* down_reason and downs come from the gateware */

typedef struct pn_link_status {
	uint32_t port;          /* router port: 1 XP, 2 XM, 3 YP, 4 YM (PN_PORT_*) */
	uint32_t state;         /* PN_LINK_STATE_* */
	uint32_t down_reason;   /* why it last went down: 0 none, 1 loss of signal, 2 replay
	                         * limit, 3 taken down by software (docs/link-layer.md) */
	uint32_t downs;         /* times it went down */
	uint32_t tx_packets;    /* link-layer counters (32-bit, wrapping) */
	uint32_t rx_packets;
	uint32_t crc_errors;
	uint32_t replays;
	uint32_t timeouts;
	uint32_t flags;         /* PN_LINK_HAVE_* */
} pn_link_status_t;

/* pn_node_status_t.flags */
#define PN_NODE_HAVE_FW 0x1u       /* the firmware-status registers were read */

typedef struct pn_node_status {
	uint32_t index;         /* the index asked for */
	uint32_t node_id;       /* the node CSR: this node's id on the network */
	uint64_t dna;           /* unique device id (0: none) */
	uint32_t cfg_node;      /* configured id: PN_CFG_NODE_VALID | id, or 0 */
	uint32_t fw_state;      /* PN_FW_STATE_* (NONE: no firmware) */
	uint32_t fw_error;      /* PN_FW_ERROR_* */
	uint32_t topo_x, topo_y;   /* the topology the firmware found (ring: topo_y = 1) */
	uint32_t coord_x, coord_y; /* this node's coordinates in it */
	uint32_t epoch;         /* routing-table generation */
	uint32_t links_in;      /* bit p-1: link port p carries routes */
	uint32_t reroutes, link_downs, evacuated, lost, heartbeat, fingerprint;
	uint32_t flush_timeouts;  /* route changes whose flush gave up (order not guaranteed) */
	uint32_t phase;           /* route change under way (docs/firmware.md), 0: none */
	uint32_t n_links;       /* link ports (0: the sw backend has none) */
	uint32_t flags;         /* PN_NODE_HAVE_* */
	uint64_t cycle;         /* sim: the simulator cycle the values were read at; else 0 */
	pn_link_status_t links[PN_STATUS_LINKS];
} pn_node_status_t;

/* The status of node `index` of what this backend can see: sim, every node of the
 * simulated cluster (index = the simulator's node index; the snapshot the simulator
 * refreshes, waiting for one taken after the call began); pci, this board only
 * (index 0); sw, every node of the sw cluster (no firmware, no links). Returns 0,
 * -ENOENT past the last node, -ENOTSUP where the backend cannot tell, -EIO. */
int pn_cluster_status(pn_hal_t *h, unsigned index, pn_node_status_t *out);

/* ---- sw backend ------------------------------------------------------------------------ */

/* Remove a sw cluster's shared-memory segment (processes attached keep their mapping). */
int pn_sw_cluster_destroy(const char *cluster);

/* Short text for a (negative) return code. */
const char *pn_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* PN_HAL_H */
