/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HAL's waiting: the round every wait loop makes (the NIC's progress, the upper
 * layer's wait hook, polite back-off), the send side's wait loop with its optional
 * deadline (pn_hal_wait), pn_progress, the backend's time base, and the
 * barrier (one doorbell, then wait for the status block's barrier_done to move).
 */
#define _GNU_SOURCE
#include <errno.h>

#include "hal_int.h"

/* ---- waiting, progress, time --------------------------------------------------------- */

/* One round of a wait loop: let the NIC work, let the upper layer drain, back off,
 * and now and then make sure there still is a NIC to wait for. 0, or the error of a NIC
 * that went away (-EIO, -ENODEV): the loop returns it. */
static int wait_step(pn_hal_t *h, struct pn_backoff *b)
{
	if (h->dead || (b->n % PN_ALIVE_EVERY == PN_ALIVE_EVERY - 1 && pn_alive(h) < 0))
		return h->dead;
	rx_flush(h);
	if (h->ops->progress)
		h->ops->progress(h);
	if (h->hook && !h->in_hook) {
		h->in_hook = 1;
		h->hook(h, h->hook_arg);
		h->in_hook = 0;
	}
	pn_backoff_step(b);
	return 0;
}

int pn_hal_wait_slow(pn_hal_t *h, enum pn_wait_for what, uint32_t count, int64_t stall_ns, pn_stall_fn stalled,
		     void *arg)
{
	struct pn_backoff b = {0};
	uint32_t last_tx = sts_load(h, PN_STS_TX_DONE_WORD) + 1, last_pio = 0;   /* "moved" at first */
	uint64_t t0 = 0;
	int r;

	while (!pn_hal_ready(h, what, count)) {
		if (stall_ns > 0 && stalled) {
			uint32_t tx = sts_load(h, PN_STS_TX_DONE_WORD), pio = sts_load(h, PN_STS_PIO_DONE_WORD);
			uint64_t now = pn_deadline_ns(h);
			if (tx != last_tx || pio != last_pio) {   /* progress: the clock starts again */
				last_tx = tx;
				last_pio = pio;
				t0 = now;
			} else if (now - t0 >= (uint64_t)stall_ns) {
				if ((r = stalled(arg)) < 0)
					return r;
				t0 = now;
			}
		}
		if ((r = wait_step(h, &b)) < 0)
			return r;   /* the simulator or device went away */
	}
	return 0;
}

int pn_alive(pn_hal_t *h)
{
	int r;
	PN_HAL_CHECK(h);
	if (h->dead || !h->ops->alive)
		return h->dead;
	if ((r = h->ops->alive(h)) < 0)
		h->dead = r;
	return h->dead;
}

int pn_progress(pn_hal_t *h)
{
	PN_HAL_CHECK(h);
	if (h->dead)
		return h->dead;
	rx_flush(h);
	return h->ops->progress ? h->ops->progress(h) : 0;
}

void pn_set_wait_hook(pn_hal_t *h, pn_wait_hook_t fn, void *arg)
{
	if (!h || h->magic != PN_HAL_MAGIC)
		return;
	h->hook = fn;
	h->hook_arg = arg;
}

uint64_t pn_now_ns(pn_hal_t *h)
{
	if (h && h->magic == PN_HAL_MAGIC && h->ops->now_ns)
		return h->ops->now_ns(h);
	return pn_monotonic_ns();
}

uint64_t pn_deadline_ns(pn_hal_t *h)
{
	if (h && h->magic == PN_HAL_MAGIC && h->ops->deadline_ns)
		return h->ops->deadline_ns(h);
	return pn_monotonic_ns();
}

uint64_t pn_cycles(pn_hal_t *h)
{
	if (h && h->magic == PN_HAL_MAGIC && h->ops->cycles)
		return h->ops->cycles(h);
	return pn_now_ns(h) * (PN_TARGET_CLK_HZ / 1000000) / 1000;
}

/* ---- barrier ------------------------------------------------------------------------------ */

int pn_barrier(pn_hal_t *h)
{
	struct pn_backoff b = {0};
	uint32_t b0;
	int r;

	PN_HAL_CHECK(h);
	if (h->dead)
		return h->dead;
	b0 = sts_load(h, PN_STS_BARRIER_DONE_WORD);
	rx_flush(h);
	pn_wmb();
	h->ops->mmio_write32(h, PN_REG_BARRIER, 1);
	while (sts_load(h, PN_STS_BARRIER_DONE_WORD) == b0)
		if ((r = wait_step(h, &b)) < 0)
			return r;
	return 0;
}
