/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The ParaNIC firmware's portable core: links, neighbours, topology and node ids,
 * routing tables, link faults (docs/firmware.md).
 *
 * The core never touches hardware itself: it calls the operations of struct fw_hw, which
 * the SoC implements with NicCore CSR accesses (firmware/hw_soc.c) and the native test
 * harness with a model of several NICs (tests/firmware/fwnet.c). fw_poll() does one
 * round of work and never waits, so several instances can run side by side in one
 * process. Freestanding: no library calls.
 */
#ifndef PN_FW_H
#define PN_FW_H

#include <errno.h>
#include <stdint.h>

#include "paranic/pn_protocol.h"
#include "pn_route.h"
#include "fw_msg.h"

/* Largest cluster the firmware's topology database holds. */
#define FW_MAX_NODES 64
/* Largest routing table the firmware writes (entries beyond the cluster are DROP). */
#define FW_MAX_TABLE 256
/* Link ports: PN_PORT_XP .. PN_PORT_YM. */
#define FW_PORTS 4

/* What the core needs from the NIC. `port` is a link port, PN_PORT_XP..PN_PORT_YM. */
struct fw_hw {
	void *ctx;
	uint64_t (*now)(void *ctx);                            /* cycles of the NIC clock */
	uint64_t (*dna)(void *ctx);                            /* unique device id, 0: none */
	uint32_t (*cfg_node)(void *ctx);                       /* bit 15: configured; 11..0 id */
	unsigned int (*link_ports)(void *ctx);                 /* 2 (ring) or 4 (torus) */
	unsigned int (*table_depth)(void *ctx);                /* routing-table entries */
	unsigned int (*link_state)(void *ctx, unsigned int port);   /* PN_LINK_STATE_* */
	void (*link_restart)(void *ctx, unsigned int port);
	void (*link_take_down)(void *ctx, unsigned int port);
	uint32_t (*rx_expect)(void *ctx, unsigned int port);
	uint32_t (*evac_first)(void *ctx, unsigned int port);
	uint32_t (*evac_end)(void *ctx, unsigned int port);
	unsigned int (*evac_len)(void *ctx, unsigned int port, uint32_t seq);   /* words */
	uint64_t (*evac_word)(void *ctx, unsigned int port, uint32_t seq, unsigned int i);
	void (*set_node)(void *ctx, unsigned int id);
	/* Routing tables: two sets; a packet is routed by the set in its header's `rt`. */
	void (*route_write)(void *ctx, unsigned int set, unsigned int dst, unsigned int port);
	void (*inject_set)(void *ctx, unsigned int set);       /* `rt` stamped on host/barrier packets */
	void (*inject_hold)(void *ctx, unsigned int hold);     /* 1: host/barrier injection paused */
	/* on: a packet of set `from` whose route is a link that is not up goes by the other
	 * set instead (its `rt` flipped) */
	void (*divert)(void *ctx, unsigned int on, unsigned int from);
	unsigned int (*tx_free)(void *ctx);                    /* words the mgmt TX FIFO takes */
	void (*tx_word)(void *ctx, uint64_t w);
	void (*tx_send)(void *ctx);
	/* where the mgmt TX injects: 0 the router's local input; p the router's input of link
	 * port p, whose link is DOWN (replayed packets enter as if they had arrived on it) */
	void (*tx_target)(void *ctx, unsigned int port);
	/* the mgmt TX FIFO is empty and, with a link port as target, that router input too */
	unsigned int (*tx_idle)(void *ctx);
	unsigned int (*rx_len)(void *ctx);                     /* words of the head packet, 0: none */
	uint64_t (*rx_word)(void *ctx);                        /* the head word; pops it */
	/* fw_* status register `reg` (PN_FW_REG_*, spec/fw.py's FW_STATUS order) */
	void (*status)(void *ctx, unsigned int reg, uint32_t value);
	void (*ctx_reset_all)(void *ctx);                      /* every context closed (ctxseq) */
};

/* Timing (cycles of the NIC clock, 8 ns at 125 MHz). */
#define FW_PROBATION_MIN   1000ull       /* a link that failed is used again after this long up */
#define FW_PROBATION_MAX   1000000ull    /* ... doubled for a flapping link, up to this */
#define FW_FLAP_WINDOW     2000000ull    /* down again within this time of coming up: flapping */
#define FW_EVAC_TIMEOUT    2000000ull    /* waiting for the far end's receive count */
#define FW_FLUSH_TIMEOUT   200000ull     /* waiting for FLUSH_ACKs, or for replayed packets to leave */

/* Route-change phases (fw_plan.c, docs/firmware.md "Route changes"). */
enum fw_phase {
	FW_PHASE_IDLE = 0,       /* injecting with the plan in use */
	FW_PHASE_ARMED,          /* the next plan's table written into the other set */
	FW_PHASE_EVAC,           /* every node armed: replaying what failed links held */
	FW_PHASE_FLUSH,          /* injection held, FLUSHes out, waiting for their ACKs */
	FW_PHASE_SWITCHED,       /* injecting with the new set; waiting for everyone */
};

/* A route plan: generation and the failed links (by node id) the tables avoid. */
struct fw_plan {
	uint32_t gen;            /* 0: none */
	uint8_t down[FW_MAX_NODES];
};

struct fw_port {
	unsigned int hw;         /* last PN_LINK_STATE_* read */
	uint8_t up;              /* link layer UP */
	uint8_t usable;          /* carries routes */
	uint8_t frozen;          /* went DOWN; not yet restarted */
	uint8_t replayed;        /* ... its replay buffer evacuated: restarts once idle */
	uint8_t nbr_known;
	uint64_t nbr_uid;        /* who is at the other end (kept while the link is down) */
	uint8_t nbr_port;
	uint16_t downs;          /* times this end went DOWN */
	uint16_t rx_expect;      /* receive count when it went DOWN */
	uint64_t up_since, down_at, probation;
	/* evacuation in progress */
	uint8_t evac_go;
	uint32_t evac_seq, evac_end;
	uint64_t evac_deadline;
	uint8_t hello_due;       /* HELLO to send on this port */
};

struct fw_node {             /* one entry of the topology database */
	struct fw_lsa lsa;
	uint64_t pend;           /* bit p-1: to be sent on port p (flooding) */
	int id;                  /* assigned node id, -1: none */
};

struct fw {
	const struct fw_hw *hw;
	uint64_t uid;
	uint32_t cfg;
	unsigned int nports, depth;
	struct fw_port port[FW_PORTS + 1];       /* [PN_PORT_XP .. PN_PORT_YM] */
	struct fw_node db[FW_MAX_NODES];
	unsigned int ndb;
	uint32_t seq;                            /* of our own LSA */
	uint8_t self_dirty, db_dirty, dirty_status;
	/* result of the last topology recognition */
	uint32_t state, error;
	unsigned int X, Y, id, cx, cy;
	uint8_t down[FW_MAX_NODES];              /* by node id: link ports out of service */
	uint8_t recognised;                      /* X, Y, ids, down valid */
	uint8_t by_id[FW_MAX_NODES];             /* database index of each node id */
	unsigned int leader;                     /* node id of the route plans' leader */
	/* route plans (fw_plan.c) */
	uint8_t live;                            /* the first plan is loaded */
	uint8_t phase;                           /* enum fw_phase */
	uint8_t cur_set;                         /* table set stamped on injected packets */
	struct fw_plan cur, arm, pub;            /* in use; in the other set; published (leader) */
	uint8_t table[FW_MAX_TABLE];             /* the table of the plan in use */
	uint8_t set_table[2][FW_MAX_TABLE];      /* what each set of the router holds */
	uint64_t flush_need, flush_sent;         /* by node id: ACK awaited; FLUSH sent */
	uint64_t ack_due;                        /* by node id: FLUSH_ACK to send */
	uint32_t ack_gen[FW_MAX_NODES];
	uint64_t deadline;
	unsigned int tx_port;                    /* mgmt TX target (0: the local input) */
	unsigned int evac_port;                  /* port being replayed, 0: none */
	uint32_t fingerprint;
	/* counters */
	uint32_t epoch, reroutes, link_downs, evacuated, lost, heartbeat, polls, flush_timeouts;
};

void fw_init(struct fw *f, const struct fw_hw *hw);
void fw_poll(struct fw *f);

/* Topology recognition over the database (fw_topo.c): 0 and f->X/Y/id/cx/cy/down set,
 * -EAGAIN when the database is not yet complete, or another negative FwError code. */
int fw_recognise(struct fw *f);

/* Route plans (fw_plan.c). */
void fw_plan_lead(struct fw *f);
void fw_plan_step(struct fw *f, uint64_t now);
void fw_plan_receive(struct fw *f, unsigned int kind, unsigned int src, uint32_t gen);
int fw_plan_transmit(struct fw *f);
/* Replay what failed link port p held (fw_main.c): 1 when done. */
int fw_evacuate(struct fw *f, unsigned int p, unsigned int set, uint64_t now);
void fw_publish_state(struct fw *f);

/* Database (fw_db.c). */
struct fw_node *fw_db_find(struct fw *f, uint64_t uid);
int fw_db_update(struct fw *f, const struct fw_lsa *l, unsigned int from_port);
void fw_db_self(struct fw *f);

#endif /* PN_FW_H */
