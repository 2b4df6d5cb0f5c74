/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The context sequences: how a NIC context is handed to an owner, taken back, and
 * has its DMA window changed. The one description and the one implementation, run by
 * the Linux driver (driver/paranic_ctx.c), the simulator's harness
 * (sim/harness/contexts.cpp), the cocotb benches (tests/model/ctxseq.py, through
 * libparanic and cffi) and the SoC firmware. What each register does is in
 * docs/host-interface.md ("Driver: configuring a context").
 *
 * Registers. The sequences use the logical per-context registers of enum pn_ctxreg:
 * the CSRs host_ctx_<name> (pn_ctxreg_name() gives <name>; addresses and widths come
 * from a gateware build's pn_csr.h, PN_CTXREGS below builds a table of them), or the
 * HostInterface's cfg_* ports. SEL selects the context the others act on; a WRITE
 * strobe stores ENABLE .. WIN_SIZE into it (all of them, so every field is written
 * before it), a RESET strobe zeroes its pointers and counters, STATE reads its
 * PN_CTX_STATE_* bits (pn_protocol.h).
 *
 * The sequences, for a context and its configuration (struct pn_ctxseq_cfg):
 *
 *   disable   SEL, ENABLE=0, RX_BASE, RX_LOG2, TX_BASE, TX_LOG2, STATUS_ADDR=0,
 *             WIN_BASE, WIN_SIZE=0, WRITE: no new descriptor fetch, RX packet, status
 *             write or doorbell for it; packets arriving for it are dropped.
 *   program   the same with ENABLE=1, STATUS_ADDR and WIN_SIZE from the configuration.
 *   quiesce   SEL, read STATE until none of the bits of a mask is set (PN_CTX_STATE_BUSY:
 *             the NIC may still touch the context's memory). A read of 0xffffffff is
 *             the device gone: -ENODEV.
 *   settle    let the NIC's posted DMA writes land in memory (a CSR read completion
 *             never passes posted writes, so after quiesce this is a no-op for a
 *             driver; the simulator waits its DMA latencies).
 *   reset     SEL, RESET: zeroes the context's pointers and counters and starts zeroing
 *             its PIO buffer (STATE reads PN_CTX_STATE_PIO_BUSY until that is done).
 *
 *   PN_CTXSEQ_OPEN           disable, quiesce, reset, quiesce, program: hand-over to a
 *                            new owner, also when the last one crashed. The second
 *                            quiesce waits for the PIO buffer to be zero, so the new
 *                            owner never sends or sees the last owner's bytes. The
 *                            caller has zeroed the new rings and the status block.
 *   PN_CTXSEQ_CLOSE          disable, quiesce, settle, reset, quiesce: after it the
 *                            context's memory may be freed and its PIO buffer is zero.
 *                            A caller that does not know the configuration (every
 *                            context of a node) passes zeros.
 *   PN_CTXSEQ_WINDOW         program: a new DMA window for an enabled context.
 *   PN_CTXSEQ_WINDOW_SHRINK  program, quiesce on PN_CTX_STATE_TX_INFLIGHT: after it no
 *                            descriptor checked against the old window is in flight,
 *                            and the memory only the old window covered may be freed.
 *
 * A caller that runs the steps asynchronously may interleave other CSR accesses
 * between a READ and the next call (or around RETRY and SETTLE): the sequence writes
 * SEL again before its next access. Consecutive WRITEs must reach the device in order
 * and without others in between.
 *
 * Giving up. While the context stays busy, next() answers RETRY; the caller owns the
 * time and decides when it has waited long enough. Then pn_ctxseq_give_up() either
 * keeps the context as it is (PN_CTXSEQ_KEEP: no reset; the NIC may still write into
 * its memory, so the caller keeps the memory and the context out of use) or goes on
 * as if it were quiet (PN_CTXSEQ_RESET_ANYWAY). Either way DONE reports the error
 * passed in.
 *
 * Freestanding: no library calls, no allocation (kernel, firmware, user space).
 */
#ifndef PN_CTXSEQ_H
#define PN_CTXSEQ_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The per-context registers: X(NAME, name), NAME as in PN_CSR_HOST_CTX_<NAME>. */
#define PN_CTXREGS(X) \
	X(SEL, sel) X(ENABLE, enable) X(RX_BASE, rx_base) X(RX_LOG2, rx_log2) \
	X(TX_BASE, tx_base) X(TX_LOG2, tx_log2) X(STATUS_ADDR, status_addr) \
	X(WIN_BASE, win_base) X(WIN_SIZE, win_size) X(WRITE, write) X(RESET, reset) \
	X(STATE, state)

#define PN_CTXREG_ENUM_(NAME, name) PN_CTXREG_##NAME,
enum pn_ctxreg { PN_CTXREGS(PN_CTXREG_ENUM_) PN_CTXREG_COUNT };
#undef PN_CTXREG_ENUM_

/* "sel", "enable", ... "state" (the CSR is host_ctx_<name>); NULL when out of range. */
const char *pn_ctxreg_name(enum pn_ctxreg reg);

/* A context and the configuration an owner gives it. */
struct pn_ctxseq_cfg {
	uint32_t ctx;
	uint32_t rx_log2, tx_log2;   /* ring slots: 1 << log2 */
	uint64_t rx_base, tx_base;   /* ring bus addresses */
	uint64_t status_addr;        /* status block (0: none) */
	uint64_t win_base, win_size; /* the DMA window TX payloads must lie in */
};

enum pn_ctxseq_kind {
	PN_CTXSEQ_OPEN,
	PN_CTXSEQ_CLOSE,
	PN_CTXSEQ_WINDOW,
	PN_CTXSEQ_WINDOW_SHRINK,
};

/* What the caller does next. */
enum pn_ctxop_kind {
	PN_CTXOP_WRITE,   /* write value to reg */
	PN_CTXOP_READ,    /* read reg; pass the value to the next pn_ctxseq_next() */
	PN_CTXOP_RETRY,   /* still busy (value: the state read): wait, then next() or give up */
	PN_CTXOP_SETTLE,  /* let posted DMA writes land, then next() */
	PN_CTXOP_DONE,    /* finished: status 0 or a negative errno */
};

struct pn_ctxop {
	enum pn_ctxop_kind kind;
	enum pn_ctxreg reg;
	uint64_t value;
	int status;
};

enum pn_ctxseq_giveup {
	PN_CTXSEQ_KEEP,          /* no reset: the context stays as it is */
	PN_CTXSEQ_RESET_ANYWAY,  /* settle and reset (and program) as if it were quiet */
};

/* One run of a sequence. The fields are the step machine's own. */
struct pn_ctxseq {
	struct pn_ctxseq_cfg cfg;
	enum pn_ctxseq_kind kind;
	uint32_t phase;     /* index into the kind's list of phases */
	uint32_t pos;       /* step within the phase */
	uint32_t sel_ok;    /* SEL holds cfg.ctx for the coming WRITEs */
	int status;         /* what DONE reports */
};

void pn_ctxseq_init(struct pn_ctxseq *s, enum pn_ctxseq_kind kind, const struct pn_ctxseq_cfg *cfg);
/* The next operation into *op; returns op->kind. read_value: the value of the READ
 * handed out last (ignored after any other operation). After DONE it answers DONE. */
enum pn_ctxop_kind pn_ctxseq_next(struct pn_ctxseq *s, uint32_t read_value, struct pn_ctxop *op);
/* After RETRY: stop waiting. err (negative) is what DONE will report. */
void pn_ctxseq_give_up(struct pn_ctxseq *s, int err, enum pn_ctxseq_giveup how);

/* A synchronous run: register access through callbacks. */
struct pn_ctxseq_io {
	void (*write)(void *arg, enum pn_ctxreg reg, uint64_t value);
	uint32_t (*read)(void *arg, enum pn_ctxreg reg);
	/* The context is busy (state): wait and return 0 to poll again, or a negative
	 * errno to give up (how: give_up below). */
	int (*retry)(void *arg, uint32_t state);
	void (*settle)(void *arg);   /* NULL: nothing to wait for */
	enum pn_ctxseq_giveup give_up;
};

/* Run sequence kind on cfg to its end: 0, -ENODEV, or what retry() gave up with. */
int pn_ctxseq_run(enum pn_ctxseq_kind kind, const struct pn_ctxseq_cfg *cfg,
		  const struct pn_ctxseq_io *io, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* PN_CTXSEQ_H */
