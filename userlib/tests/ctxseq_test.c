/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ctxseq_test: the context sequences (paranic/pn_ctxseq.h) against a model of the
 * per-context registers.
 *
 *   ctxseq_test [CASE]     every case, or one
 *
 * The model behaves like the HostInterface: SEL selects a context, field writes go to
 * shadow registers, the WRITE strobe stores all of them into the selected context,
 * RESET counts a reset of it, STATE reads its bits (a context can be told to stay
 * busy for a number of reads, or for ever, or to read as a device that is gone; a
 * RESET ends what kept it busy and zeroes its PIO buffer, which reads as PIO_BUSY for
 * clear_reads reads, as the HostInterface's PioClear does). It
 * records every access as text, so a case can compare the order of writes exactly,
 * and it counts what must never happen: a WRITE strobe with a field not written since
 * the last one, a reset of a busy or enabled context, a STATE read of the wrong
 * context, a context enabled while its PIO buffer is not yet zero. Prints "ok CASE ..." or "FAIL CASE: ..." and exits 0 only on success.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_ctxseq.h"
#include "paranic/pn_protocol.h"
#include "tutil.h"

#define NCTX 4
#define FIELDS_MASK                                                                              \
	((1u << PN_CTXREG_ENABLE) | (1u << PN_CTXREG_RX_BASE) | (1u << PN_CTXREG_RX_LOG2) |     \
	 (1u << PN_CTXREG_TX_BASE) | (1u << PN_CTXREG_TX_LOG2) | (1u << PN_CTXREG_STATUS_ADDR) | \
	 (1u << PN_CTXREG_WIN_BASE) | (1u << PN_CTXREG_WIN_SIZE))

struct mctx {
	uint64_t f[PN_CTXREG_COUNT];   /* stored configuration (ENABLE .. WIN_SIZE) */
	uint32_t busy;                 /* PN_CTX_STATE_* bits besides ENABLED */
	int busy_reads;                /* reads that still see `busy` (-1: for ever) */
	int resets;
	int reset_busy, reset_enabled; /* resets while busy / while enabled */
	int clearing;                  /* reads that still see the PIO buffer being zeroed */
};

struct model {
	uint32_t sel;
	uint64_t shadow[PN_CTXREG_COUNT];
	uint32_t written;              /* fields written since the last WRITE strobe */
	struct mctx c[NCTX];
	int gone;                      /* reads answer 0xffffffff */
	int stale_strobes;             /* WRITE with a field not written since the last one */
	int bad_sel;                   /* SEL beyond the contexts */
	int clear_reads;               /* a RESET's PIO buffer clear lasts this many STATE reads */
	int enabled_dirty;             /* a context enabled while its PIO buffer was being zeroed */
	char trace[8192];
	size_t tlen;
};

static void tr(struct model *m, const char *fmt, ...)
{
	va_list ap;

	if (m->tlen && m->tlen < sizeof(m->trace) - 1)
		m->trace[m->tlen++] = ' ';
	va_start(ap, fmt);
	int n = vsnprintf(m->trace + m->tlen, sizeof(m->trace) - m->tlen, fmt, ap);
	va_end(ap);
	if (n > 0)
		m->tlen = m->tlen + (size_t)n < sizeof(m->trace) ? m->tlen + (size_t)n : sizeof(m->trace) - 1;
}

static void m_write(struct model *m, enum pn_ctxreg reg, uint64_t v)
{
	tr(m, "%s=%#llx", pn_ctxreg_name(reg), (unsigned long long)v);
	if (reg == PN_CTXREG_SEL) {
		m->sel = (uint32_t)v;
		if (m->sel >= NCTX)
			m->bad_sel++;
		return;
	}
	if (m->sel >= NCTX)
		return;
	struct mctx *c = &m->c[m->sel];
	switch (reg) {
	case PN_CTXREG_WRITE:
		if (m->written != FIELDS_MASK)
			m->stale_strobes++;
		memcpy(c->f, m->shadow, sizeof(c->f));
		m->written = 0;
		if (c->f[PN_CTXREG_ENABLE] && c->clearing)
			m->enabled_dirty++;
		break;
	case PN_CTXREG_RESET:
		c->resets++;
		if (c->busy && c->busy_reads)
			c->reset_busy++;
		if (c->f[PN_CTXREG_ENABLE])
			c->reset_enabled++;
		c->busy = 0;           /* pointers and counters zero: nothing in flight */
		c->busy_reads = 0;
		c->clearing = m->clear_reads;
		break;
	case PN_CTXREG_STATE:
		break;   /* read-only */
	default:
		m->shadow[reg] = v;
		m->written |= 1u << reg;
		break;
	}
}

static uint32_t m_read(struct model *m, enum pn_ctxreg reg)
{
	uint32_t v = 0;

	if (m->gone) {
		v = 0xffffffffu;
	} else if (reg == PN_CTXREG_STATE && m->sel < NCTX) {
		struct mctx *c = &m->c[m->sel];
		v = c->f[PN_CTXREG_ENABLE] ? PN_CTX_STATE_ENABLED : 0;
		if (c->busy_reads) {
			v |= c->busy;
			if (c->busy_reads > 0)
				c->busy_reads--;
		}
		if (c->clearing) {
			v |= PN_CTX_STATE_PIO_BUSY;
			c->clearing--;
		}
	}
	tr(m, "%s?%u=%#x", pn_ctxreg_name(reg), m->sel, v);
	return v;
}

static void m_init(struct model *m)
{
	memset(m, 0, sizeof(*m));
	m->sel = 63;   /* whatever the last user left selected */
}

static const struct pn_ctxseq_cfg CFG2 = {
	.ctx = 2, .rx_log2 = 3, .tx_log2 = 4, .rx_base = 0x10000, .tx_base = 0x20000,
	.status_addr = 0x30000, .win_base = 0x40000, .win_size = 0x8000,
};

#define DISABLE2 "sel=0x2 enable=0 rx_base=0x10000 rx_log2=0x3 tx_base=0x20000 tx_log2=0x4 status_addr=0 " \
		 "win_base=0x40000 win_size=0 write=0x1"
#define PROGRAM2 "enable=0x1 rx_base=0x10000 rx_log2=0x3 tx_base=0x20000 tx_log2=0x4 status_addr=0x30000 " \
		 "win_base=0x40000 win_size=0x8000 write=0x1"

/* Run a sequence step by step: give up (how, with err) after max_retries RETRYs. */
struct drive {
	int max_retries;
	int err;
	enum pn_ctxseq_giveup how;
	int retries, settles, steps;
};

static int drive(struct model *m, enum pn_ctxseq_kind kind, const struct pn_ctxseq_cfg *cfg, struct drive *d)
{
	struct pn_ctxseq s;
	struct pn_ctxop op;
	uint32_t val = 0;

	pn_ctxseq_init(&s, kind, cfg);
	for (d->steps = 0; d->steps < 10000; d->steps++) {
		switch (pn_ctxseq_next(&s, val, &op)) {
		case PN_CTXOP_WRITE:
			m_write(m, op.reg, op.value);
			break;
		case PN_CTXOP_READ:
			val = m_read(m, op.reg);
			break;
		case PN_CTXOP_RETRY:
			tr(m, "retry");
			if (++d->retries >= d->max_retries)
				pn_ctxseq_give_up(&s, d->err, d->how);
			break;
		case PN_CTXOP_SETTLE:
			tr(m, "settle");
			d->settles++;
			break;
		case PN_CTXOP_DONE:
			tr(m, "done=%d", op.status);
			return op.status;
		default:
			tr(m, "op%d?", (int)op.kind);
			return -9999;
		}
	}
	return -9998;   /* never finished */
}

/* The model saw nothing that must not happen. */
#define CHECK_CLEAN(m)                                                                        \
	do {                                                                                  \
		CHECK((m)->stale_strobes == 0, "%d WRITE strobes with stale fields", (m)->stale_strobes); \
		CHECK((m)->bad_sel == 0, "SEL beyond the contexts");                          \
		CHECK((m)->enabled_dirty == 0, "enabled before its PIO buffer was zero");     \
	} while (0)

#define CHECK_TRACE(m, want) CHECK(strcmp((m)->trace, (want)) == 0, "trace\n  got  %s\n  want %s", (m)->trace, (want))

static int t_names(void)
{
	static const char *const want[] = { "sel", "enable", "rx_base", "rx_log2", "tx_base", "tx_log2",
					    "status_addr", "win_base", "win_size", "write", "reset", "state" };
	CHECK(PN_CTXREG_COUNT == 12, "%d registers", (int)PN_CTXREG_COUNT);
	for (int i = 0; i < PN_CTXREG_COUNT; i++)
		CHECK(pn_ctxreg_name((enum pn_ctxreg)i) && strcmp(pn_ctxreg_name((enum pn_ctxreg)i), want[i]) == 0,
		      "register %d is %s", i, pn_ctxreg_name((enum pn_ctxreg)i));
	CHECK(pn_ctxreg_name(PN_CTXREG_COUNT) == NULL, "a name beyond the registers");
	CHECK(pn_ctxreg_name((enum pn_ctxreg)-1) == NULL, "a name for -1");
	say("ok names 12 registers");
	return 0;
}

static int t_open_idle(void)
{
	struct model m;
	struct drive d = { .max_retries = 100, .err = -ETIMEDOUT };

	m_init(&m);
	EXPECT_RC(drive(&m, PN_CTXSEQ_OPEN, &CFG2, &d), 0);
	CHECK_TRACE(&m, DISABLE2 " state?2=0 sel=0x2 reset=0x1 state?2=0 sel=0x2 " PROGRAM2 " done=0");
	CHECK_CLEAN(&m);
	struct mctx *c = &m.c[2];
	CHECK(c->resets == 1 && c->reset_enabled == 0 && c->reset_busy == 0, "resets %d", c->resets);
	CHECK(c->f[PN_CTXREG_ENABLE] == 1 && c->f[PN_CTXREG_RX_BASE] == 0x10000 && c->f[PN_CTXREG_RX_LOG2] == 3 &&
	      c->f[PN_CTXREG_TX_BASE] == 0x20000 && c->f[PN_CTXREG_TX_LOG2] == 4 &&
	      c->f[PN_CTXREG_STATUS_ADDR] == 0x30000 && c->f[PN_CTXREG_WIN_BASE] == 0x40000 &&
	      c->f[PN_CTXREG_WIN_SIZE] == 0x8000, "context 2 not programmed as configured");
	for (int i = 0; i < NCTX; i++)
		CHECK(i == 2 || (m.c[i].resets == 0 && !m.c[i].f[PN_CTXREG_ENABLE]), "context %d touched", i);
	say("ok open_idle disable, poll, reset, program: %d steps", d.steps);
	return 0;
}

static int t_open_busy(void)
{
	struct model m;
	struct drive d = { .max_retries = 100, .err = -ETIMEDOUT };

	m_init(&m);
	m.c[2].f[PN_CTXREG_ENABLE] = 1;   /* the last owner left it enabled and busy */
	m.c[2].busy = PN_CTX_STATE_PIO_BUSY | PN_CTX_STATE_STATUS_DIRTY;
	m.c[2].busy_reads = 3;
	EXPECT_RC(drive(&m, PN_CTXSEQ_OPEN, &CFG2, &d), 0);
	CHECK_TRACE(&m, DISABLE2 " state?2=0x82 retry sel=0x2 state?2=0x82 retry sel=0x2 state?2=0x82 retry"
			" sel=0x2 state?2=0 sel=0x2 reset=0x1 state?2=0 sel=0x2 " PROGRAM2 " done=0");
	CHECK(d.retries == 3 && m.c[2].resets == 1 && m.c[2].reset_busy == 0 && m.c[2].reset_enabled == 0,
	      "retries %d resets %d", d.retries, m.c[2].resets);
	CHECK_CLEAN(&m);
	say("ok open_busy 3 polls while busy, each after SEL; reset once quiet");
	return 0;
}

/* Every bit of PN_CTX_STATE_BUSY holds OPEN and CLOSE; no other bit does. */
static int t_busy_bits(void)
{
	for (int bit = 1; bit < 8; bit++) {
		uint32_t b = 1u << bit;
		for (int k = 0; k < 2; k++) {
			struct model m;
			struct drive d = { .max_retries = 100, .err = -ETIMEDOUT };
			m_init(&m);
			m.c[2].busy = b;
			m.c[2].busy_reads = 2;
			EXPECT_RC(drive(&m, k ? PN_CTXSEQ_CLOSE : PN_CTXSEQ_OPEN, &CFG2, &d), 0);
			int want = (b & PN_CTX_STATE_BUSY) ? 2 : 0;
			CHECK(d.retries == want, "state bit %#x: %d retries, want %d", b, d.retries, want);
		}
	}
	CHECK(PN_CTX_STATE_BUSY == (PN_CTX_STATE_PIO_BUSY | PN_CTX_STATE_TX_INFLIGHT | PN_CTX_STATE_RX_ACTIVE |
				    PN_CTX_STATE_STATUS_DIRTY), "busy mask %#x", PN_CTX_STATE_BUSY);
	say("ok busy_bits pio_busy, tx_inflight, rx_active, status_dirty hold the hand-over; others do not");
	return 0;
}

static int t_close(void)
{
	struct model m;
	struct drive d = { .max_retries = 100, .err = -ETIMEDOUT };

	m_init(&m);
	m.c[2].f[PN_CTXREG_ENABLE] = 1;
	m.c[2].busy = PN_CTX_STATE_TX_INFLIGHT | PN_CTX_STATE_RX_ACTIVE;
	m.c[2].busy_reads = 1;
	EXPECT_RC(drive(&m, PN_CTXSEQ_CLOSE, &CFG2, &d), 0);
	CHECK_TRACE(&m, DISABLE2 " state?2=0x14 retry sel=0x2 state?2=0 settle sel=0x2 reset=0x1 state?2=0 done=0");
	struct mctx *c = &m.c[2];
	CHECK(c->f[PN_CTXREG_ENABLE] == 0 && c->f[PN_CTXREG_STATUS_ADDR] == 0 && c->f[PN_CTXREG_WIN_SIZE] == 0,
	      "context 2 left enabled, with a status block or a window");
	CHECK(c->resets == 1 && c->reset_busy == 0 && c->reset_enabled == 0, "resets %d", c->resets);
	CHECK(d.settles == 1, "%d settles", d.settles);
	CHECK_CLEAN(&m);
	say("ok close disable, poll until quiet, settle, reset");
	return 0;
}

/* The PIO buffer clear a RESET starts: OPEN enables the context only once it is done,
 * CLOSE returns only once it is done (a new owner never sees the last one's bytes). */
static int t_clear(void)
{
	for (int k = 0; k < 2; k++) {
		struct model m;
		struct drive d = { .max_retries = 100, .err = -ETIMEDOUT };
		m_init(&m);
		m.clear_reads = 3;
		EXPECT_RC(drive(&m, k ? PN_CTXSEQ_CLOSE : PN_CTXSEQ_OPEN, &CFG2, &d), 0);
		CHECK(d.retries == 3 && m.c[2].clearing == 0, "kind %d: %d retries, %d reads of clearing left", k,
		      d.retries, m.c[2].clearing);
		CHECK(strstr(m.trace, "reset=0x1 state?2=0x2 retry sel=0x2 state?2=0x2 retry sel=0x2 state?2=0x2 retry"
				      " sel=0x2 state?2=0") != NULL, "kind %d: %s", k, m.trace);
		CHECK(m.c[2].f[PN_CTXREG_ENABLE] == (k == 0), "kind %d: enable", k);
		CHECK_CLEAN(&m);
	}
	say("ok clear open programs, close returns, only once the PIO buffer is zero");
	return 0;
}

/* Giving up: KEEP leaves the context as it is, RESET_ANYWAY goes on. */
static int t_give_up(void)
{
	static const enum pn_ctxseq_kind kinds[] = { PN_CTXSEQ_OPEN, PN_CTXSEQ_CLOSE };

	for (int k = 0; k < 2; k++)
		for (int how = 0; how < 2; how++) {
			struct model m;
			struct drive d = { .max_retries = 5, .err = -ETIMEDOUT, .how = (enum pn_ctxseq_giveup)how };
			m_init(&m);
			m.c[2].f[PN_CTXREG_ENABLE] = 1;
			m.c[2].busy = PN_CTX_STATE_TX_INFLIGHT;
			m.c[2].busy_reads = -1;
			EXPECT_RC(drive(&m, kinds[k], &CFG2, &d), -ETIMEDOUT);
			struct mctx *c = &m.c[2];
			CHECK(d.retries == 5, "%d retries", d.retries);
			if (how == PN_CTXSEQ_KEEP) {
				CHECK(c->resets == 0 && d.settles == 0, "kind %d: reset or settle after giving up", k);
				CHECK(c->f[PN_CTXREG_ENABLE] == 0 && c->f[PN_CTXREG_STATUS_ADDR] == 0,
				      "kind %d: programmed after giving up", k);
				CHECK(strstr(m.trace, "retry done=-110") != NULL, "kind %d: %s", k, m.trace);
			} else {
				CHECK(c->resets == 1 && c->reset_busy == 1, "kind %d: %d resets", k, c->resets);
				CHECK(d.settles == (kinds[k] == PN_CTXSEQ_CLOSE), "kind %d: %d settles", k, d.settles);
				CHECK(c->f[PN_CTXREG_ENABLE] == (kinds[k] == PN_CTXSEQ_OPEN), "kind %d: enable", k);
			}
			CHECK_CLEAN(&m);
		}
	/* The error given is the one reported; a positive one reads as a timeout. */
	struct model m;
	struct drive d = { .max_retries = 1, .err = -EIO, .how = PN_CTXSEQ_KEEP };
	m_init(&m);
	m.c[2].busy = PN_CTX_STATE_PIO_BUSY;
	m.c[2].busy_reads = -1;
	EXPECT_RC(drive(&m, PN_CTXSEQ_CLOSE, &CFG2, &d), -EIO);
	m_init(&m);
	m.c[2].busy = PN_CTX_STATE_PIO_BUSY;
	m.c[2].busy_reads = -1;
	d = (struct drive){ .max_retries = 1, .err = 7, .how = PN_CTXSEQ_KEEP };
	EXPECT_RC(drive(&m, PN_CTXSEQ_CLOSE, &CFG2, &d), -ETIMEDOUT);
	say("ok give_up keep: no reset, no program; reset_anyway: settle, reset (and program); status the error");
	return 0;
}

/* A read of all ones: the device is gone; nothing more is written. */
static int t_gone(void)
{
	static const enum pn_ctxseq_kind kinds[] = { PN_CTXSEQ_OPEN, PN_CTXSEQ_CLOSE, PN_CTXSEQ_WINDOW_SHRINK };

	for (int k = 0; k < 3; k++) {
		struct model m;
		struct drive d = { .max_retries = 100, .err = -ETIMEDOUT };
		m_init(&m);
		m.gone = 1;
		EXPECT_RC(drive(&m, kinds[k], &CFG2, &d), -ENODEV);
		const char *rd = strstr(m.trace, "state?");
		CHECK(rd && strcmp(strchr(rd, ' '), " done=-19") == 0, "kind %d: after the read: %s", k, m.trace);
		CHECK(m.c[2].resets == 0 && d.retries == 0, "kind %d: reset or retried", k);
	}
	say("ok gone 0xffffffff ends open, close and window_shrink with -ENODEV, no access after it");
	return 0;
}

static int t_window(void)
{
	struct model m;
	struct drive d = { .max_retries = 100, .err = -ETIMEDOUT };

	m_init(&m);
	EXPECT_RC(drive(&m, PN_CTXSEQ_WINDOW, &CFG2, &d), 0);
	CHECK_TRACE(&m, "sel=0x2 " PROGRAM2 " done=0");
	CHECK(m.c[2].resets == 0, "window reset the context");
	CHECK_CLEAN(&m);

	/* Shrink: waits for descriptors in flight only (a busy PIO does not hold it). */
	struct pn_ctxseq_cfg small = CFG2;
	small.win_base = 0;
	small.win_size = 0;
	m_init(&m);
	m.c[2].f[PN_CTXREG_ENABLE] = 1;
	m.c[2].busy = PN_CTX_STATE_TX_INFLIGHT | PN_CTX_STATE_PIO_BUSY;
	m.c[2].busy_reads = 2;
	d = (struct drive){ .max_retries = 100, .err = -ETIMEDOUT };
	EXPECT_RC(drive(&m, PN_CTXSEQ_WINDOW_SHRINK, &small, &d), 0);
	CHECK(d.retries == 2 && m.c[2].resets == 0 && d.settles == 0, "retries %d", d.retries);
	CHECK(m.c[2].f[PN_CTXREG_WIN_SIZE] == 0 && m.c[2].f[PN_CTXREG_ENABLE] == 1, "window not emptied");
	m_init(&m);
	m.c[2].busy = PN_CTX_STATE_PIO_BUSY;
	m.c[2].busy_reads = -1;
	d = (struct drive){ .max_retries = 100, .err = -ETIMEDOUT };
	EXPECT_RC(drive(&m, PN_CTXSEQ_WINDOW_SHRINK, &small, &d), 0);
	CHECK(d.retries == 0, "pio_busy held a shrink");
	m_init(&m);
	m.c[2].busy = PN_CTX_STATE_TX_INFLIGHT;
	m.c[2].busy_reads = -1;
	d = (struct drive){ .max_retries = 3, .err = -ETIMEDOUT, .how = PN_CTXSEQ_KEEP };
	EXPECT_RC(drive(&m, PN_CTXSEQ_WINDOW_SHRINK, &small, &d), -ETIMEDOUT);
	say("ok window program only; shrink polls tx_inflight, times out with -ETIMEDOUT");
	return 0;
}

/* Two sequences on one device, interleaved wherever a caller may interleave them
 * (after READ, RETRY, SETTLE): each reads and writes its own context. */
static int t_interleave(void)
{
	struct model m;
	struct pn_ctxseq s[2];
	struct pn_ctxseq_cfg cfg[2] = { CFG2, CFG2 };
	uint32_t val[2] = { 0, 0 };
	int done[2] = { 0, 0 }, status[2] = { 1, 1 }, wrong_reads = 0;

	cfg[0].ctx = 1;
	cfg[1].ctx = 3;
	cfg[1].rx_base = 0x50000;
	m_init(&m);
	m.c[1].busy = PN_CTX_STATE_RX_ACTIVE;
	m.c[1].busy_reads = 2;
	m.c[3].f[PN_CTXREG_ENABLE] = 1;
	m.c[3].busy = PN_CTX_STATE_PIO_BUSY;
	m.c[3].busy_reads = 3;
	pn_ctxseq_init(&s[0], PN_CTXSEQ_OPEN, &cfg[0]);
	pn_ctxseq_init(&s[1], PN_CTXSEQ_CLOSE, &cfg[1]);
	for (int turn = 0, steps = 0; !(done[0] && done[1]) && steps < 1000; turn ^= 1) {
		if (done[turn])
			continue;
		for (; steps < 1000; steps++) {
			struct pn_ctxop op;
			enum pn_ctxop_kind k = pn_ctxseq_next(&s[turn], val[turn], &op);
			if (k == PN_CTXOP_WRITE) {
				m_write(&m, op.reg, op.value);
				continue;
			}
			if (k == PN_CTXOP_READ) {
				if (m.sel != cfg[turn].ctx)
					wrong_reads++;
				val[turn] = m_read(&m, op.reg);
			} else if (k == PN_CTXOP_DONE) {
				done[turn] = 1;
				status[turn] = op.status;
			}
			break;   /* the other one's turn */
		}
	}
	CHECK(done[0] && done[1] && status[0] == 0 && status[1] == 0, "status %d %d", status[0], status[1]);
	CHECK(wrong_reads == 0, "%d reads of another context", wrong_reads);
	CHECK(m.c[1].f[PN_CTXREG_ENABLE] == 1 && m.c[1].f[PN_CTXREG_RX_BASE] == 0x10000 && m.c[1].resets == 1,
	      "context 1 not opened");
	CHECK(m.c[3].f[PN_CTXREG_ENABLE] == 0 && m.c[3].f[PN_CTXREG_RX_BASE] == 0x50000 && m.c[3].resets == 1,
	      "context 3 not closed");
	CHECK(m.c[1].reset_busy + m.c[3].reset_busy + m.c[1].reset_enabled + m.c[3].reset_enabled == 0,
	      "a busy or enabled context reset");
	CHECK(m.c[0].resets + m.c[2].resets == 0 && !m.c[0].f[PN_CTXREG_ENABLE] && !m.c[2].f[PN_CTXREG_ENABLE],
	      "another context touched");
	CHECK_CLEAN(&m);
	say("ok interleave open of 1 and close of 3 alternating: each on its own context");
	return 0;
}

/* pn_ctxseq_run: the same accesses through callbacks. */
struct io_arg {
	struct model *m;
	int polls_left;   /* retry() gives up when it reaches 0 */
	int give_up_err;
	int settles;
};

static void io_write(void *arg, enum pn_ctxreg reg, uint64_t v)
{
	m_write(((struct io_arg *)arg)->m, reg, v);
}

static uint32_t io_read(void *arg, enum pn_ctxreg reg)
{
	return m_read(((struct io_arg *)arg)->m, reg);
}

static int io_retry(void *arg, uint32_t state)
{
	struct io_arg *a = arg;

	tr(a->m, "retry");
	(void)state;
	return --a->polls_left > 0 ? 0 : a->give_up_err;
}

static void io_settle(void *arg)
{
	struct io_arg *a = arg;

	tr(a->m, "settle");
	a->settles++;
}

static int t_run(void)
{
	struct model m1, m2;
	struct drive d = { .max_retries = 100, .err = -ETIMEDOUT };
	struct pn_ctxseq_io io = { io_write, io_read, io_retry, io_settle, PN_CTXSEQ_KEEP };
	struct io_arg a = { &m2, 100, -ETIMEDOUT, 0 };

	for (int kind = PN_CTXSEQ_OPEN; kind <= PN_CTXSEQ_WINDOW_SHRINK; kind++) {
		m_init(&m1);
		m_init(&m2);
		m1.c[2].busy = m2.c[2].busy = PN_CTX_STATE_TX_INFLIGHT;
		m1.c[2].busy_reads = m2.c[2].busy_reads = 2;
		d = (struct drive){ .max_retries = 100, .err = -ETIMEDOUT };
		a = (struct io_arg){ &m2, 100, -ETIMEDOUT, 0 };
		int r1 = drive(&m1, (enum pn_ctxseq_kind)kind, &CFG2, &d);
		int r2 = pn_ctxseq_run((enum pn_ctxseq_kind)kind, &CFG2, &io, &a);
		tr(&m2, "done=%d", r2);
		CHECK(r1 == 0 && r2 == 0, "kind %d: %d %d", kind, r1, r2);
		CHECK(strcmp(m1.trace, m2.trace) == 0, "kind %d:\n  steps %s\n  run   %s", kind, m1.trace, m2.trace);
	}
	/* Giving up through retry(): its error, the context kept or reset as asked. */
	m_init(&m2);
	m2.c[2].busy = PN_CTX_STATE_PIO_BUSY;
	m2.c[2].busy_reads = -1;
	a = (struct io_arg){ &m2, 3, -EIO, 0 };
	EXPECT_RC(pn_ctxseq_run(PN_CTXSEQ_CLOSE, &CFG2, &io, &a), -EIO);
	CHECK(m2.c[2].resets == 0 && a.settles == 0, "kept context reset");
	m_init(&m2);
	m2.c[2].busy = PN_CTX_STATE_PIO_BUSY;
	m2.c[2].busy_reads = -1;
	a = (struct io_arg){ &m2, 3, -ETIMEDOUT, 0 };
	io.give_up = PN_CTXSEQ_RESET_ANYWAY;
	io.settle = NULL;   /* nothing to wait for */
	EXPECT_RC(pn_ctxseq_run(PN_CTXSEQ_CLOSE, &CFG2, &io, &a), -ETIMEDOUT);
	CHECK(m2.c[2].resets == 1 && a.settles == 0, "forced close: %d resets", m2.c[2].resets);
	say("ok run callbacks give the same accesses as the steps; retry() gives up with its error");
	return 0;
}

static int t_edges(void)
{
	struct pn_ctxseq s;
	struct pn_ctxop op;

	/* DONE repeats. */
	pn_ctxseq_init(&s, PN_CTXSEQ_WINDOW, &CFG2);
	int n = 0;
	while (pn_ctxseq_next(&s, 0, &op) == PN_CTXOP_WRITE)
		n++;
	CHECK(op.kind == PN_CTXOP_DONE && op.status == 0 && n == 10, "window: %d writes, then %d", n, (int)op.kind);
	for (int i = 0; i < 3; i++)
		CHECK(pn_ctxseq_next(&s, 0, &op) == PN_CTXOP_DONE && op.status == 0, "DONE did not repeat");
	/* An unknown kind. */
	pn_ctxseq_init(&s, (enum pn_ctxseq_kind)7, &CFG2);
	CHECK(pn_ctxseq_next(&s, 0, &op) == PN_CTXOP_DONE && op.status == -EINVAL, "unknown kind: %d %d",
	      (int)op.kind, op.status);
	/* give_up outside a wait changes nothing. */
	pn_ctxseq_init(&s, PN_CTXSEQ_OPEN, &CFG2);
	pn_ctxseq_give_up(&s, -ETIMEDOUT, PN_CTXSEQ_KEEP);
	n = 0;
	while (pn_ctxseq_next(&s, 0, &op) == PN_CTXOP_WRITE)
		n++;
	CHECK(op.kind == PN_CTXOP_READ && n == 10, "give_up before the wait: %d writes, then %d", n, (int)op.kind);
	while (pn_ctxseq_next(&s, 0, &op) != PN_CTXOP_DONE)
		;
	CHECK(op.status == 0, "open after an early give_up: %d", op.status);
	say("ok edges DONE repeats; unknown kind -EINVAL; give_up outside a wait ignored");
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "names", t_names },     { "open_idle", t_open_idle }, { "open_busy", t_open_busy },
	{ "busy_bits", t_busy_bits }, { "close", t_close },       { "clear", t_clear },
	{ "give_up", t_give_up },
	{ "gone", t_gone },       { "window", t_window },       { "interleave", t_interleave },
	{ "run", t_run },         { "edges", t_edges },
};

int main(int argc, char **argv)
{
	int ran = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
			continue;
		t_case = cases[i].name;
		cases[i].fn();
		ran++;
	}
	if (!ran) {
		say("FAIL %s: no such case", argc > 1 ? argv[1] : "?");
		return 2;
	}
	return t_failures ? 1 : 0;
}
