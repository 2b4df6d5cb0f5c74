// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The context sequences as a step machine (paranic/pn_ctxseq.h describes them).
 * Compiled into libparanic, paranic.ko, the simulator's harness and the SoC
 * firmware: freestanding, no library calls.
 */
#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/stddef.h>
#include <linux/types.h>
#else
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#endif

#include "paranic/pn_protocol.h"
#include "paranic/pn_ctxseq.h"

#define PN_CTXREG_NAME_(NAME, name) #name,
static const char *const pn_ctxreg_names[PN_CTXREG_COUNT] = { PN_CTXREGS(PN_CTXREG_NAME_) };
#undef PN_CTXREG_NAME_

const char *pn_ctxreg_name(enum pn_ctxreg reg)
{
	return (unsigned int)reg < PN_CTXREG_COUNT ? pn_ctxreg_names[reg] : NULL;
}

/* The phases the sequences are made of (pn_ctxseq.h). PH_DONE is 0: a kind's list
 * below ends with it, and so does the rest of its row. */
enum {
	PH_DONE,
	PH_DISABLE,
	PH_PROGRAM,
	PH_QUIESCE,        /* on PN_CTX_STATE_BUSY (after RESET: the PIO buffer being zeroed) */
	PH_QUIESCE_TX,     /* on PN_CTX_STATE_TX_INFLIGHT */
	PH_SETTLE,
	PH_RESET,
};

static const unsigned char pn_ctxseq_phases[][6] = {
	[PN_CTXSEQ_OPEN] = { PH_DISABLE, PH_QUIESCE, PH_RESET, PH_QUIESCE, PH_PROGRAM, PH_DONE },
	[PN_CTXSEQ_CLOSE] = { PH_DISABLE, PH_QUIESCE, PH_SETTLE, PH_RESET, PH_QUIESCE, PH_DONE },
	[PN_CTXSEQ_WINDOW] = { PH_PROGRAM, PH_DONE },
	[PN_CTXSEQ_WINDOW_SHRINK] = { PH_PROGRAM, PH_QUIESCE_TX, PH_DONE },
};

/* The registers a disable or program writes, in order; SEL comes first when needed. */
static const enum pn_ctxreg pn_ctxseq_fields[] = {
	PN_CTXREG_ENABLE, PN_CTXREG_RX_BASE, PN_CTXREG_RX_LOG2, PN_CTXREG_TX_BASE,
	PN_CTXREG_TX_LOG2, PN_CTXREG_STATUS_ADDR, PN_CTXREG_WIN_BASE, PN_CTXREG_WIN_SIZE,
	PN_CTXREG_WRITE,
};
#define PN_CTXSEQ_NFIELDS (sizeof(pn_ctxseq_fields) / sizeof(pn_ctxseq_fields[0]))

static uint64_t pn_ctxseq_field(const struct pn_ctxseq_cfg *c, enum pn_ctxreg reg, int enable)
{
	switch (reg) {
	case PN_CTXREG_ENABLE:
		return enable ? 1 : 0;
	case PN_CTXREG_RX_BASE:
		return c->rx_base;
	case PN_CTXREG_RX_LOG2:
		return c->rx_log2;
	case PN_CTXREG_TX_BASE:
		return c->tx_base;
	case PN_CTXREG_TX_LOG2:
		return c->tx_log2;
	case PN_CTXREG_STATUS_ADDR:
		return enable ? c->status_addr : 0;
	case PN_CTXREG_WIN_BASE:
		return c->win_base;
	case PN_CTXREG_WIN_SIZE:
		return enable ? c->win_size : 0;
	default:
		return 1;   /* the WRITE and RESET strobes */
	}
}

static unsigned int pn_ctxseq_cur(const struct pn_ctxseq *s)
{
	return pn_ctxseq_phases[s->kind][s->phase];
}

static void pn_ctxseq_advance(struct pn_ctxseq *s)
{
	s->phase++;
	s->pos = 0;
}

/* Skip what is left: DONE reports status. */
static void pn_ctxseq_finish(struct pn_ctxseq *s, int status)
{
	s->status = status;
	while (pn_ctxseq_cur(s) != PH_DONE)
		pn_ctxseq_advance(s);
}

void pn_ctxseq_init(struct pn_ctxseq *s, enum pn_ctxseq_kind kind, const struct pn_ctxseq_cfg *cfg)
{
	s->cfg = *cfg;
	s->kind = kind;
	s->phase = 0;
	s->pos = 0;
	s->sel_ok = 0;
	s->status = 0;
	if ((unsigned int)kind > PN_CTXSEQ_WINDOW_SHRINK) {
		s->kind = PN_CTXSEQ_WINDOW;
		pn_ctxseq_finish(s, -EINVAL);
	}
}

static enum pn_ctxop_kind pn_ctxop_set(struct pn_ctxop *op, enum pn_ctxop_kind kind, enum pn_ctxreg reg,
				       uint64_t value, int status)
{
	op->kind = kind;
	op->reg = reg;
	op->value = value;
	op->status = status;
	return kind;
}

/* A WRITE, preceded by SEL when another access may have moved it. */
static enum pn_ctxop_kind pn_ctxseq_write(struct pn_ctxseq *s, struct pn_ctxop *op, enum pn_ctxreg reg,
					  uint64_t value)
{
	if (!s->sel_ok) {
		s->sel_ok = 1;
		return pn_ctxop_set(op, PN_CTXOP_WRITE, PN_CTXREG_SEL, s->cfg.ctx, 0);
	}
	s->pos++;
	return pn_ctxop_set(op, PN_CTXOP_WRITE, reg, value, 0);
}

enum pn_ctxop_kind pn_ctxseq_next(struct pn_ctxseq *s, uint32_t read_value, struct pn_ctxop *op)
{
	for (;;) {
		unsigned int ph = pn_ctxseq_cur(s);
		uint32_t mask;

		switch (ph) {
		case PH_DISABLE:
		case PH_PROGRAM:
			if (s->pos < PN_CTXSEQ_NFIELDS) {
				enum pn_ctxreg reg = pn_ctxseq_fields[s->pos];

				return pn_ctxseq_write(s, op, reg, pn_ctxseq_field(&s->cfg, reg, ph == PH_PROGRAM));
			}
			break;
		case PH_RESET:
			if (s->pos == 0)
				return pn_ctxseq_write(s, op, PN_CTXREG_RESET, 1);
			break;
		case PH_QUIESCE:
		case PH_QUIESCE_TX:
			mask = ph == PH_QUIESCE ? PN_CTX_STATE_BUSY : PN_CTX_STATE_TX_INFLIGHT;
			if (s->pos == 0) {
				/* SEL (when needed), then read STATE. */
				if (!s->sel_ok) {
					s->sel_ok = 1;
					return pn_ctxop_set(op, PN_CTXOP_WRITE, PN_CTXREG_SEL, s->cfg.ctx, 0);
				}
				s->pos = 1;
				s->sel_ok = 0;   /* the caller may run other accesses before the next call */
				return pn_ctxop_set(op, PN_CTXOP_READ, PN_CTXREG_STATE, 0, 0);
			}
			if (read_value == 0xffffffffu) {
				pn_ctxseq_finish(s, -ENODEV);   /* the device fell off the bus */
				continue;
			}
			if (read_value & mask) {
				s->pos = 0;
				return pn_ctxop_set(op, PN_CTXOP_RETRY, PN_CTXREG_STATE, read_value, 0);
			}
			break;
		case PH_SETTLE:
			if (s->pos == 0) {
				s->pos = 1;
				s->sel_ok = 0;
				return pn_ctxop_set(op, PN_CTXOP_SETTLE, PN_CTXREG_COUNT, 0, 0);
			}
			break;
		default:
			return pn_ctxop_set(op, PN_CTXOP_DONE, PN_CTXREG_COUNT, 0, s->status);
		}
		pn_ctxseq_advance(s);
	}
}

void pn_ctxseq_give_up(struct pn_ctxseq *s, int err, enum pn_ctxseq_giveup how)
{
	unsigned int ph = pn_ctxseq_cur(s);

	if (ph != PH_QUIESCE && ph != PH_QUIESCE_TX)
		return;   /* only a wait can be given up */
	if (how == PN_CTXSEQ_RESET_ANYWAY) {
		s->status = err < 0 ? err : -ETIMEDOUT;
		pn_ctxseq_advance(s);
	} else {
		pn_ctxseq_finish(s, err < 0 ? err : -ETIMEDOUT);
	}
}

int pn_ctxseq_run(enum pn_ctxseq_kind kind, const struct pn_ctxseq_cfg *cfg,
		  const struct pn_ctxseq_io *io, void *arg)
{
	struct pn_ctxseq s;
	struct pn_ctxop op;
	uint32_t val = 0;
	int r;

	pn_ctxseq_init(&s, kind, cfg);
	for (;;) {
		switch (pn_ctxseq_next(&s, val, &op)) {
		case PN_CTXOP_WRITE:
			io->write(arg, op.reg, op.value);
			break;
		case PN_CTXOP_READ:
			val = io->read(arg, op.reg);
			break;
		case PN_CTXOP_RETRY:
			r = io->retry(arg, (uint32_t)op.value);
			if (r)
				pn_ctxseq_give_up(&s, r, io->give_up);
			break;
		case PN_CTXOP_SETTLE:
			if (io->settle)
				io->settle(arg);
			break;
		default:
			return op.status;
		}
	}
}
