// SPDX-License-Identifier: BSD-2-Clause
/*
 * fwnet: the firmware core (firmware/core) on a packet-level model of a ParaNIC cluster.
 *
 * Every node runs the real firmware core (fw_init/fw_poll) against a model of its NIC:
 * link ports with the link layer's states and replay buffers, a router that forwards
 * packets hop by hop by the routing table the firmware wrote, and the management port.
 * The router routes by the table set in a packet's `rt`, diverts as NicCore's does, and
 * host traffic enters through the injection gate (stamp, hold). The model is what the
 * tests need to check the firmware's decisions (ids, tables, reroutes, evacuation, the
 * order of every source's packets across a route change) quickly and exhaustively; the gateware itself is exercised by
 * the Verilator SoC cluster (tests/sim/test_soc_cluster.py).
 *
 * Time advances in ticks of TICK cycles. A frame handed to an UP link arrives at the far
 * end LINK_TICKS later and is acknowledged ACK_TICKS after that; until then it stays in
 * the sender's replay buffer, which is what the firmware evacuates when a cable is cut.
 *
 *   fwnet --topo ring:4|torus:XxY [--dna-seed S] [--cfg NODE=ID]... [--ticks T]
 *         [--traffic PACKETS] [--cut CABLE@TICK]... [--mend CABLE@TICK]...
 *         [--fail CABLE@TICK]... [--boot-twice]
 *
 * --fail takes cable CABLE's first end DOWN at TICK as its link layer does at the replay
 * limit, the cable staying whole: the far end then sees loss of signal, and a restarted
 * link trains again at once (a link taken out for its error rate).
 *
 * Prints one JSON object: per node (by index) its uid, id, coords, state, epoch, table;
 * traffic totals (sent, delivered once, duplicated, missing, out of order, evacuated, lost,
 * diverted, flush timeouts); the ticks
 * at which the cluster was first routed and rerouted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw.h"

#define TICK 100              /* cycles per tick */
#define LINK_TICKS 2
#define ACK_TICKS 3
#define TRAIN_TICKS 5
#define MAXN 64
#define MAXQ 4096
#define SEQM ((1u << PN_LINK_SEQ_BITS) - 1)
#define MAXW (2 + FW_LSA_WORDS)

struct pkt {
	uint64_t w[MAXW];
	unsigned int len;
	int id;                   /* traffic packet id, -1: a control packet */
	uint64_t due;             /* tick it arrives (in flight) / acked (delivered) */
	uint32_t seq;
};

struct fifo {
	struct pkt *p[MAXQ];
	unsigned int n;
};

static void push(struct fifo *q, struct pkt *p)
{
	if (q->n == MAXQ) {
		fprintf(stderr, "fwnet: queue overflow\n");
		exit(3);
	}
	q->p[q->n++] = p;
}

static struct pkt *pop_at(struct fifo *q, unsigned int i)
{
	struct pkt *p = q->p[i];

	memmove(&q->p[i], &q->p[i + 1], (q->n - i - 1) * sizeof(q->p[0]));
	q->n--;
	return p;
}

struct lport {
	unsigned int state;       /* PN_LINK_STATE_* */
	int restarted;            /* restart strobe seen: training */
	uint64_t train_at;
	uint32_t tx_seq, rx_expect;
	struct fifo flight;       /* sent, not yet at the far end */
	struct fifo unacked;      /* at the far end (or not), not yet acknowledged */
	uint32_t first;           /* oldest unacknowledged seq */
	struct fifo wait;         /* router: packets routed to this port, waiting for it */
};

struct nic {
	uint64_t dna;
	uint32_t cfg;
	unsigned int nports;
	struct lport port[FW_PORTS + 1];
	uint8_t table[2][FW_MAX_TABLE];
	int node_id;
	unsigned int inject_set, hold, divert_on, divert_from, tx_target;
	struct fifo host;         /* host packets not yet through the injection gate */
	uint64_t txw[MAXW + 1024];
	unsigned int txn;
	struct fifo rx;           /* management RX */
	unsigned int rx_pos;
	uint32_t reg[PN_FW_REGS];
	struct fifo local;        /* router input from the management port */
	struct fw fw;
	struct fw_hw hw;
};

static struct nic nic[MAXN];
static unsigned int N, X, Y, NPORTS;
static uint64_t tick;
static int *delivered;
static int sent, evac_seen, out_of_order, diverted;
static int last_id[MAXN][MAXN];   /* newest traffic id delivered per (src, dst) */
static unsigned long ctl_sent;   /* control packets the firmware sent (HELLO, LSA) */

struct cable { unsigned int a, pa, b, pb; int cut; };
static struct cable cables[2 * MAXN];
static unsigned int ncables;

/* -- the NIC model behind struct fw_hw --------------------------------------------- */

#define N_(c) ((struct nic *)(c))
static uint64_t h_now(void *c) { (void)c; return tick * TICK; }
static uint64_t h_dna(void *c) { return N_(c)->dna; }
static uint32_t h_cfg(void *c) { return N_(c)->cfg; }
static unsigned int h_ports(void *c) { return N_(c)->nports; }
static unsigned int h_depth(void *c) { (void)c; return 16; }
static unsigned int h_state(void *c, unsigned int p) { return N_(c)->port[p].state; }
static void h_restart(void *c, unsigned int p)
{
	struct lport *l = &N_(c)->port[p];

	if (l->state != PN_LINK_STATE_DOWN)
		return;
	l->state = PN_LINK_STATE_TRAINING;
	l->restarted = 1;
	l->tx_seq = l->rx_expect = l->first = 0;
	while (l->unacked.n)
		free(pop_at(&l->unacked, 0));
}
static uint32_t h_rx_expect(void *c, unsigned int p) { return N_(c)->port[p].rx_expect; }
static uint32_t h_first(void *c, unsigned int p) { return N_(c)->port[p].first; }
static uint32_t h_end(void *c, unsigned int p) { return N_(c)->port[p].tx_seq; }
static struct pkt *frame(struct nic *n, unsigned int p, uint32_t seq)
{
	struct lport *l = &n->port[p];
	unsigned int i;

	for (i = 0; i < l->unacked.n; i++)
		if (l->unacked.p[i]->seq == seq)
			return l->unacked.p[i];
	fprintf(stderr, "fwnet: evacuation read of a frame not in the replay buffer\n");
	exit(3);
}
static unsigned int h_elen(void *c, unsigned int p, uint32_t s) { return frame(N_(c), p, s)->len; }
static uint64_t h_eword(void *c, unsigned int p, uint32_t s, unsigned int i) { return frame(N_(c), p, s)->w[i]; }
static void h_node(void *c, unsigned int id) { N_(c)->node_id = (int)id; }
static void h_route(void *c, unsigned int s, unsigned int d, unsigned int p) { N_(c)->table[s & 1][d] = (uint8_t)p; }
static void h_inject_set(void *c, unsigned int s) { N_(c)->inject_set = s & 1; }
static void h_hold(void *c, unsigned int h) { N_(c)->hold = h; }
static void h_divert(void *c, unsigned int on, unsigned int from)
{
	N_(c)->divert_on = on;
	N_(c)->divert_from = from & 1;
	if (getenv("FWNET_DEBUG"))
		fprintf(stderr, "tick %llu: node %d divert %u from %u\n", (unsigned long long)tick,
			N_(c)->node_id, on, from);
}
static void h_take_down(void *c, unsigned int p)
{
	if (N_(c)->port[p].state == PN_LINK_STATE_UP)
		N_(c)->port[p].state = PN_LINK_STATE_DOWN;
}
static void h_tx_target(void *c, unsigned int p) { N_(c)->tx_target = p; }
static unsigned int h_tx_idle(void *c) { return N_(c)->local.n == 0; }
static unsigned int h_free(void *c) { return 1024 - N_(c)->txn; }
static void h_word(void *c, uint64_t w) { struct nic *n = N_(c); n->txw[n->txn++] = w; }
static void h_send(void *c)
{
	struct nic *n = N_(c);
	struct pkt *p = calloc(1, sizeof(*p));
	unsigned int i;

	p->len = n->txn;
	p->id = -1;
	for (i = 0; i < n->txn && i < MAXW; i++)
		p->w[i] = n->txw[i];
	if (n->tx_target && n->port[n->tx_target].state != PN_LINK_STATE_DOWN) {
		fprintf(stderr, "fwnet: mgmt TX into the input of port %u, which is not DOWN\n",
			n->tx_target);
		exit(3);
	}
	if (PN_GET(p->w, PN_HDR_TYPE) == PN_TYPE_DATA) {   /* a replayed data packet */
		p->id = (int)p->w[1];
		p->len = 2;
		evac_seen++;
		if (getenv("FWNET_DEBUG"))
			fprintf(stderr, "tick %llu: node %d replays packet %d (target %u)\n",
				(unsigned long long)tick, n->node_id, p->id, n->tx_target);
	}
	else
		ctl_sent++;
	n->txn = 0;
	push(&n->local, p);
}
static unsigned int h_rxlen(void *c)
{
	struct nic *n = N_(c);

	return n->rx.n ? n->rx.p[0]->len - n->rx_pos : 0;
}
static uint64_t h_rxword(void *c)
{
	struct nic *n = N_(c);
	uint64_t w = n->rx.p[0]->w[n->rx_pos++];

	if (n->rx_pos == n->rx.p[0]->len) {
		free(pop_at(&n->rx, 0));
		n->rx_pos = 0;
	}
	return w;
}
static void h_status(void *c, unsigned int r, uint32_t v) { N_(c)->reg[r] = v; }
static void h_ctx(void *c) { (void)c; }

/* -- network ------------------------------------------------------------------------- */

static unsigned int node_of(unsigned int x, unsigned int y) { return (x % X) + (y % Y) * X; }

static void far_of(unsigned int n, unsigned int p, unsigned int *m, unsigned int *q)
{
	unsigned int x = n % X, y = n / X;

	switch (p) {
	case PN_PORT_XP: *m = node_of(x + 1, y); *q = PN_PORT_XM; break;
	case PN_PORT_XM: *m = node_of(x + X - 1, y); *q = PN_PORT_XP; break;
	case PN_PORT_YP: *m = node_of(x, y + 1); *q = PN_PORT_YM; break;
	default: *m = node_of(x, y + Y - 1); *q = PN_PORT_YP; break;
	}
}

static struct cable *cable_of(unsigned int n, unsigned int p)
{
	unsigned int i;

	for (i = 0; i < ncables; i++)
		if ((cables[i].a == n && cables[i].pa == p) || (cables[i].b == n && cables[i].pb == p))
			return &cables[i];
	return NULL;
}

/* The output port of a routed packet at node n by the set in its `rt`; divert (NicCore's
 * router) moves a packet of set `divert_from` bound for a link that is not up to the
 * other set and flips its `rt`. */
static unsigned int pick(unsigned int n, struct pkt *p)
{
	struct nic *c = &nic[n];
	unsigned int dst = (unsigned int)PN_GET(p->w, PN_HDR_DST_NODE) & 15;
	unsigned int rt = (unsigned int)PN_GET(p->w, PN_HDR_RT);
	unsigned int port = c->table[rt][dst];

	if (c->divert_on && rt == c->divert_from && port >= PN_PORT_XP && port <= c->nports &&
	    c->port[port].state != PN_LINK_STATE_UP) {
		PN_SET(p->w, PN_HDR_RT, !rt);
		port = c->table[!rt][dst];
		diverted++;
	}
	return port;
}

/* A packet at node n's router, from a link (from_link) or the local input: deliver it
 * or queue it for a link port. A link-local packet leaves on its `direct` port and is
 * delivered locally by the router it reaches. */
static void route_at(unsigned int n, struct pkt *p, int from_link)
{
	unsigned int direct = (unsigned int)PN_GET(p->w, PN_HDR_DIRECT), port;

	if (direct)
		port = from_link ? PN_PORT_LOCAL : direct;
	else
		port = pick(n, p);
	if (port == PN_PORT_LOCAL) {
		if (p->id >= 0) {
			unsigned int s = (unsigned int)PN_GET(p->w, PN_HDR_SRC_NODE) % MAXN;

			delivered[p->id]++;
			if (p->id < last_id[s][n]) {
				out_of_order++;
				if (getenv("FWNET_DEBUG"))
					fprintf(stderr, "tick %llu: %u->%d packet %d after %d\n",
						(unsigned long long)tick, s, nic[n].node_id, p->id,
						last_id[s][n]);
			}
			else
				last_id[s][n] = p->id;
			free(p);
		} else {
			push(&nic[n].rx, p);
		}
		return;
	}
	if (port > nic[n].nports) {
		fprintf(stderr, "fwnet: node %u dropped a packet (route %u)\n", n, port);
		if (p->id >= 0)
			delivered[p->id] += 1000;   /* shows as an error in the totals */
		free(p);
		return;
	}
	push(&nic[n].port[port].wait, p);
}

static void step_links(void)
{
	unsigned int n, p, i;

	/* Packets waiting for a port that is not up: the router looks up their route again
	 * every cycle (a table write or divert moves them, in their order, ahead of anything
	 * that arrives after them). */
	for (n = 0; n < N; n++)
		for (p = 1; p <= nic[n].nports; p++) {
			struct lport *l = &nic[n].port[p];

			if (l->state == PN_LINK_STATE_UP)
				continue;
			for (i = 0; i < l->wait.n;) {
				struct pkt *w = l->wait.p[i];

				if (PN_GET(w->w, PN_HDR_DIRECT)) {
					free(pop_at(&l->wait, i));   /* the router drops it: port not up */
					continue;
				}
				if (pick(n, w) != p) {
					pop_at(&l->wait, i);
					route_at(n, w, 0);
				} else {
					i++;
				}
			}
		}

	for (n = 0; n < N; n++)
		for (p = 1; p <= nic[n].nports; p++) {
			struct lport *l = &nic[n].port[p];
			unsigned int m, q;
			struct cable *c = cable_of(n, p);

			far_of(n, p, &m, &q);
			struct lport *r = &nic[m].port[q];

			/* loss of signal on a cut cable */
			if (c->cut && l->state == PN_LINK_STATE_UP)
				l->state = PN_LINK_STATE_DOWN;
			/* the far end went DOWN: it stops sending, this end sees loss of signal */
			if (l->state == PN_LINK_STATE_UP && r->state != PN_LINK_STATE_UP)
				l->state = PN_LINK_STATE_DOWN;
			/* training: both ends restarted (or fresh), cable whole */
			if (l->state == PN_LINK_STATE_TRAINING && !c->cut &&
			    r->state == PN_LINK_STATE_TRAINING) {
				if (!l->train_at)
					l->train_at = tick + TRAIN_TICKS;
				else if (tick >= l->train_at) {
					l->state = r->state = PN_LINK_STATE_UP;
					l->train_at = r->train_at = 0;
				}
			}
			if (l->state != PN_LINK_STATE_UP)
				continue;
			/* frames arriving at the far end */
			for (i = 0; i < l->flight.n;) {
				struct pkt *f = l->flight.p[i];

				if (f->due > tick) {
					i++;
					continue;
				}
				pop_at(&l->flight, i);
				r->rx_expect = (r->rx_expect + 1) & SEQM;
				f->due = tick + ACK_TICKS;
				push(&l->unacked, f);
				{   /* the far router gets a copy; the replay buffer keeps the frame */
					struct pkt *cp = malloc(sizeof(*cp));

					*cp = *f;
					if (PN_GET(cp->w, PN_HDR_DIRECT))
						PN_SET(cp->w, PN_HDR_DIRECT, q);
					route_at(m, cp, 1);
				}
			}
			/* acknowledgements */
			while (l->unacked.n && l->unacked.p[0]->due <= tick &&
			       l->unacked.p[0]->seq == l->first) {
				free(pop_at(&l->unacked, 0));
				l->first = (l->first + 1) & SEQM;
			}
			/* the router hands waiting packets to the link */
			while (l->wait.n && ((l->tx_seq - l->first) & SEQM) < 64) {
				struct pkt *f = pop_at(&l->wait, 0);

				f->seq = l->tx_seq;
				l->tx_seq = (l->tx_seq + 1) & SEQM;
				f->due = tick + LINK_TICKS;
				push(&l->flight, f);
			}
		}
	/* A link that went DOWN: frames in flight never arrive; they stay in the replay
	 * buffer (unacknowledged), in sequence order. */
	for (n = 0; n < N; n++)
		for (p = 1; p <= nic[n].nports; p++) {
			struct lport *l = &nic[n].port[p];

			if (l->state != PN_LINK_STATE_DOWN)
				continue;
			while (l->flight.n) {
				struct pkt *f = pop_at(&l->flight, 0);
				unsigned int k = l->unacked.n;

				while (k && l->unacked.p[k - 1]->seq > f->seq)
					k--;
				push(&l->unacked, f);
				memmove(&l->unacked.p[k + 1], &l->unacked.p[k],
					(l->unacked.n - k - 1) * sizeof(f));
				l->unacked.p[k] = f;
			}
		}
	for (n = 0; n < N; n++) {
		while (nic[n].local.n)
			route_at(n, pop_at(&nic[n].local, 0), 0);
		/* the injection gate: stamps the set, holds while told to */
		while (!nic[n].hold && nic[n].host.n) {
			struct pkt *h = pop_at(&nic[n].host, 0);

			PN_SET(h->w, PN_HDR_RT, nic[n].inject_set);
			route_at(n, h, 0);
		}
	}
}

static int parse_topo(const char *s)
{
	if (sscanf(s, "ring:%u", &X) == 1) {
		Y = 1;
		NPORTS = 2;
	} else if (sscanf(s, "torus:%ux%u", &X, &Y) == 2) {
		NPORTS = 4;
	} else {
		return -1;
	}
	N = X * Y;
	return N >= 2 && N <= 16 ? 0 : -1;
}

static void boot(unsigned int n)
{
	struct nic *c = &nic[n];

	c->hw = (struct fw_hw){
		.ctx = c, .now = h_now, .dna = h_dna, .cfg_node = h_cfg, .link_ports = h_ports,
		.table_depth = h_depth, .link_state = h_state, .link_restart = h_restart,
		.rx_expect = h_rx_expect, .evac_first = h_first, .evac_end = h_end,
		.evac_len = h_elen, .evac_word = h_eword, .set_node = h_node, .route_write = h_route,
		.tx_free = h_free, .tx_word = h_word, .tx_send = h_send, .rx_len = h_rxlen,
		.rx_word = h_rxword, .status = h_status, .ctx_reset_all = h_ctx,
		.inject_set = h_inject_set, .inject_hold = h_hold, 
		.divert = h_divert, .link_take_down = h_take_down, .tx_target = h_tx_target,
		.tx_idle = h_tx_idle,
	};
	memset(c->table, PN_PORT_DROP, sizeof(c->table));
	c->inject_set = c->hold = c->divert_on = c->tx_target = 0;
	c->node_id = -1;
	fw_init(&c->fw, &c->hw);
}

int main(int argc, char **argv)
{
	uint64_t ticks = 3000, seed = 1, routed_at = 0, cut_at[16] = {0}, mend_at[16] = {0};
	uint64_t fail_at[16] = {0};
	int cut_k[16], mend_k[16], fail_k[16], ncut = 0, nmend = 0, nfail = 0, traffic = 0;
	int boot_twice = 0;
	uint64_t rerouted_at = 0, restored_at = 0;
	uint32_t cfgs[MAXN] = {0};
	unsigned int n, p, i;
	int a;

	for (a = 1; a < argc; a++) {
		const char *v = a + 1 < argc ? argv[a + 1] : "";
		unsigned int k, id;
		unsigned long long t;

		if (!strcmp(argv[a], "--topo") && !parse_topo(v)) a++;
		else if (!strcmp(argv[a], "--dna-seed")) { seed = strtoull(v, NULL, 0); a++; }
		else if (!strcmp(argv[a], "--ticks")) { ticks = strtoull(v, NULL, 0); a++; }
		else if (!strcmp(argv[a], "--traffic")) { traffic = atoi(v); a++; }
		else if (!strcmp(argv[a], "--boot-twice")) boot_twice = 1;
		else if (!strcmp(argv[a], "--cfg") && sscanf(v, "%u=%u", &k, &id) == 2 && k < MAXN) {
			cfgs[k] = PN_CFG_NODE_VALID | id; a++;
		} else if (!strcmp(argv[a], "--cut") && sscanf(v, "%u@%llu", &k, &t) == 2 && ncut < 16) {
			cut_k[ncut] = (int)k; cut_at[ncut++] = t; a++;
		} else if (!strcmp(argv[a], "--mend") && sscanf(v, "%u@%llu", &k, &t) == 2 && nmend < 16) {
			mend_k[nmend] = (int)k; mend_at[nmend++] = t; a++;
		} else if (!strcmp(argv[a], "--fail") && sscanf(v, "%u@%llu", &k, &t) == 2 && nfail < 16) {
			fail_k[nfail] = (int)k; fail_at[nfail++] = t; a++;
		} else {
			fprintf(stderr, "fwnet: bad argument %s\n", argv[a]);
			return 2;
		}
	}
	if (!N) {
		fprintf(stderr, "fwnet: --topo ring:N|torus:XxY (2..16 nodes) is required\n");
		return 2;
	}
	/* cables in paranic.spec.topo's order: every (node, XP) then (node, YP) */
	for (n = 0; n < N; n++)
		for (p = PN_PORT_XP; p <= NPORTS; p += 2) {
			unsigned int m, q;

			far_of(n, p, &m, &q);
			cables[ncables++] = (struct cable){n, p, m, q, 0};
		}
	for (a = 0; a < ncut + nfail; a++) {
		int c = a < ncut ? cut_k[a] : fail_k[a - ncut];

		if ((unsigned int)c >= ncables) {
			fprintf(stderr, "fwnet: no cable %d\n", c);
			return 2;
		}
	}
	srand((unsigned int)seed);
	for (n = 0; n < N; n++) {
		nic[n].dna = ((uint64_t)rand() << 32 | (uint64_t)rand()) | 1;
		nic[n].cfg = cfgs[n];
		nic[n].nports = NPORTS;
		for (p = 1; p <= NPORTS; p++)
			nic[n].port[p].state = PN_LINK_STATE_TRAINING;
	}
	delivered = calloc((size_t)traffic + 1, sizeof(int));
	for (int round = 0; round <= boot_twice; round++) {
		if (round) {   /* reboot every node: links retrain, databases start empty */
			printf("\"first_ids\": [");
			for (n = 0; n < N; n++)
				printf("%s%d", n ? ", " : "", nic[n].node_id);
			printf("],\n");
			for (n = 0; n < N; n++)
				for (p = 1; p <= NPORTS; p++)
					nic[n].port[p].state = PN_LINK_STATE_TRAINING;
		} else {
			printf("{\n");
		}
		for (n = 0; n < N; n++)
			boot(n);
		routed_at = 0;
		for (tick = 1; tick <= ticks; tick++) {
			int all = 1, agree = 1;

			for (a = 0; a < ncut; a++)
				if (cut_at[a] == tick)
					cables[cut_k[a]].cut = 1;
			for (a = 0; a < nmend; a++)
				if (mend_at[a] == tick)
					cables[mend_k[a]].cut = 0;
			for (a = 0; a < nfail; a++) {
				struct lport *l = &nic[cables[fail_k[a]].a].port[cables[fail_k[a]].pa];

				if (fail_at[a] == tick && l->state == PN_LINK_STATE_UP)
					l->state = PN_LINK_STATE_DOWN;
			}
			step_links();
			for (n = 0; n < N; n++)
				fw_poll(&nic[n].fw);
			for (n = 0; n < N; n++) {
				all &= nic[n].reg[PN_FW_REG_STATE] == PN_FW_STATE_ROUTED;
				agree &= nic[n].reg[PN_FW_REG_FINGERPRINT] == nic[0].reg[PN_FW_REG_FINGERPRINT];
			}
			if (all && agree && !routed_at)
				routed_at = tick;
			/* traffic: once routed, every node sends to every other in turn */
			if (routed_at && sent < traffic && tick > routed_at && tick + 200 < ticks)
				for (n = 0; n < N && sent < traffic; n++) {
					struct pkt *pk = calloc(1, sizeof(*pk));
					unsigned int dst = (n + 1 + (unsigned int)sent % (N - 1)) % N;

					PN_SET(pk->w, PN_HDR_DST_NODE, dst);
					PN_SET(pk->w, PN_HDR_SRC_NODE, nic[n].node_id);
					PN_SET(pk->w, PN_HDR_TYPE, PN_TYPE_DATA);
					pk->w[1] = (uint64_t)sent;
					pk->len = 2;
					pk->id = sent++;
					push(&nic[n].host, pk);
				}
			if (ncut && tick > cut_at[0] && !rerouted_at) {
				int deg = 1;

				for (n = 0; n < N; n++)
					deg &= nic[n].reg[PN_FW_REG_STATE] == PN_FW_STATE_DEGRADED &&
						nic[n].reg[PN_FW_REG_FINGERPRINT] == nic[0].reg[PN_FW_REG_FINGERPRINT];
				if (deg)
					rerouted_at = tick;
			}
			if (nmend && tick > mend_at[0] && all && agree && !restored_at)
				restored_at = tick;
		}
	}
	{
		int once = 0, dup = 0, missing = 0, dropped = 0;
		unsigned int evac = 0, lost = 0, fto = 0;

		for (a = 0; a < sent; a++) {
			once += delivered[a] == 1;
			dup += delivered[a] > 1 && delivered[a] < 1000;
			missing += delivered[a] == 0;
			dropped += delivered[a] >= 1000;
		}
		for (n = 0; n < N; n++) {
			evac += nic[n].reg[PN_FW_REG_EVACUATED];
			lost += nic[n].reg[PN_FW_REG_LOST];
			fto += nic[n].reg[PN_FW_REG_FLUSH_TIMEOUTS];
		}
		printf("\"control_packets\": %lu,\n", ctl_sent);
		printf("\"cables\": %u, \"routed_at\": %llu, \"rerouted_at\": %llu, \"restored_at\": %llu,\n",
		       ncables, (unsigned long long)routed_at, (unsigned long long)rerouted_at,
		       (unsigned long long)restored_at);
		printf("\"tick_cycles\": %d, \"traffic\": {\"sent\": %d, \"once\": %d, \"duplicated\": %d, "
		       "\"missing\": %d, \"dropped\": %d, \"out_of_order\": %d, \"evacuated\": %u, "
		       "\"lost\": %u, \"diverted\": %d, \"flush_timeouts\": %u},\n",
		       TICK, sent, once, dup, missing, dropped, out_of_order, evac, lost, diverted, fto);
	}
	if (getenv("FWNET_DEBUG")) for (n = 0; n < N; n++) for (p = 1; p <= NPORTS; p++) fprintf(stderr, "n%u p%u st=%u up=%u us=%u nbr=%u ndb=%u\n", n, p, nic[n].port[p].state, nic[n].fw.port[p].up, nic[n].fw.port[p].usable, nic[n].fw.port[p].nbr_known, nic[n].fw.ndb);
	printf("\"nodes\": [\n");
	for (n = 0; n < N; n++) {
		struct nic *c = &nic[n];

		printf("  {\"dna\": \"%016llx\", \"id\": %d, \"coords\": [%u, %u], \"state\": %u, \"error\": %u, "
		       "\"epoch\": %u, \"links_in\": %u, \"link_downs\": %u, \"fingerprint\": %u, \"table\": [",
		       (unsigned long long)c->dna, c->node_id, c->reg[PN_FW_REG_COORDS] & 0xffff,
		       c->reg[PN_FW_REG_COORDS] >> 16, c->reg[PN_FW_REG_STATE], c->reg[PN_FW_REG_ERROR],
		       c->reg[PN_FW_REG_EPOCH], c->reg[PN_FW_REG_LINKS_IN], c->reg[PN_FW_REG_LINK_DOWNS],
		       c->reg[PN_FW_REG_FINGERPRINT]);
		for (i = 0; i < N; i++)
			printf("%s%u", i ? ", " : "", c->table[c->inject_set][i]);
		printf("]}%s\n", n + 1 < N ? "," : "");
	}
	printf("]}\n");
	return 0;
}
