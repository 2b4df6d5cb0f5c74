/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd's NIC side: the outbox (nothing the daemon sends over the NIC ever waits:
 * packets queue here and go while the PIO window is free), HELLOs to and from the
 * other nodes' daemons, PEER-DEAD notices, and membership from the HELLOs' ages.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "paranicd.h"
#include "ports_wire.h"

/* ---- outbox -------------------------------------------------------------------------------------- */

static void out_push(struct paranicd *d, unsigned node, unsigned ctx, uint64_t tag, const void *data, size_t len)
{
	struct outpkt *o;
	if (d->out_tail - d->out_head >= OUTBOX) {
		d->out_lost++;
		return;
	}
	o = &d->out[d->out_tail++ & (OUTBOX - 1)];
	o->node = (uint16_t)node;
	o->ctx = (uint8_t)ctx;
	o->len = (uint8_t)len;
	o->tag = tag;
	memcpy(o->data, data, len);
}

void out_flush(struct paranicd *d)
{
	pn_progress(d->h);
	while (d->out_head != d->out_tail && pn_hal_pio_free(d->h)) {
		struct outpkt *o = &d->out[d->out_head++ & (OUTBOX - 1)];
		int r = pn_send_pio(d->h, o->node, o->ctx, o->tag, o->data, o->len);
		if (r < 0)
			dlog(d, "send to %u.%u: %s", o->node, o->ctx, pn_strerror(r));
		pn_progress(d->h);
	}
}

/* ---- HELLOs, notices, membership ----------------------------------------------------------------- */

void send_hellos(struct paranicd *d)
{
	struct pnd_hello hello = {.magic = PND_HELLO_MAGIC, .pid = (uint32_t)getpid(),
				  .addr = sk_node_addr(&d->net, (unsigned)d->node), .abi = PN_ABI_VERSION};
	snprintf(hello.host, sizeof(hello.host), "%s", d->host);
	for (int n = 0; n < d->nodes; n++) {
		if (n == d->node)
			continue;
		hello.seq = ++d->hellos_sent;
		out_push(d, (unsigned)n, (unsigned)d->ctx, PND_TAG_HELLO, &hello, sizeof(hello));
	}
}

/* PEER-DEAD {node, ctx} to every other context of every node. */
void send_notices(struct paranicd *d, int32_t ctx, pid_t pid)
{
	struct pw_dead dead = {.node = (uint32_t)d->node, .ctx = (uint32_t)ctx, .pid = (uint32_t)pid};
	for (int n = 0; n < d->nodes; n++)
		for (int c = 0; c < d->num_ctx; c++) {
			if (c == d->ctx || (n == d->node && c == ctx))
				continue;
			out_push(d, (unsigned)n, (unsigned)c, PW_TAG(PW_PEER_DEAD, 0, 0), &dead, sizeof(dead));
			d->notices_sent++;
		}
}

void nic_poll(struct paranicd *d, uint64_t now)
{
	pn_header_t hd;
	for (int k = 0; k < 256 && pn_recv_header(d->h, &hd) > 0; k++) {
		struct pnd_hello w;
		const void *pl = NULL;
		pn_recv_payload(d->h, &pl);
		/* A HELLO from another node's daemon? (daemon_proto.c, fuzzed by tests/fuzz/fuzz_daemon.c) */
		int bad = pnd_parse_hello(&hd, pl, d->nodes, d->ctx, &w);
		pn_recv_skip(d->h);
		if (bad)
			continue;
		struct member *m = &d->mem[hd.src_node];
		if (m->pid != w.pid)
			dlog(d, "node %u: daemon pid %u on %s", hd.src_node, w.pid, w.host);
		if ((w.abi >> 16) != PN_ABI_VERSION_MAJOR && m->abi != w.abi)
			dlog(d, "node %u runs ABI %u.%u, this daemon %u.%u", hd.src_node, w.abi >> 16, w.abi & 0xffff,
			     PN_ABI_VERSION_MAJOR, PN_ABI_VERSION_MINOR);
		m->last_ns = now;
		m->pid = w.pid;
		m->addr = w.addr;
		m->abi = w.abi;
		memcpy(m->host, w.host, sizeof(m->host));
		d->hellos_recv++;
	}
}

void membership(struct paranicd *d, uint64_t now)
{
	for (int n = 0; n < d->nodes; n++) {
		struct member *m = &d->mem[n];
		int up = n == d->node || (m->last_ns && now - m->last_ns < (uint64_t)d->down_ms * 1000000ull);
		if (up != m->up)
			dlog(d, "node %d %s", n, up ? "up" : "down");
		m->up = up;
	}
}
