/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The checks of the simulator's client protocol (pn_sim_shm.h): every message and shared
 * layout one side takes from the other goes through one of these pure functions before
 * it is used. Compiled into libparanic (the client's side: hal_sim.c) and into the
 * simulator's harness (sim/harness: clients.cpp, device.cpp, faults.cpp; see
 * HARNESS_C_SOURCES in sim/python/build.py), and fuzzed by tests/fuzz/fuzz_sim_*.c.
 * Each returns 0 or a negative errno (-EPROTO: not this protocol; -EINVAL: a bad value).
 */
#ifndef PN_SIM_PROTO_H
#define PN_SIM_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "pn_sim_shm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the first message on a connection is (n bytes at msg, nfds descriptors with it). */
enum pn_sim_msg {
	PN_SIM_MSG_HELLO = 1,       /* a process's hello: one fd (its memfd) */
	PN_SIM_MSG_DEVICE = 2,      /* a device's hello: two fds (memfd, guest RAM) */
	PN_SIM_MSG_FAULT = 3,       /* a fault request: no fds needed (any are closed) */
};
/* PN_SIM_MSG_* or -EPROTO. */
int pn_sim_msg_kind(const void *msg, size_t n, int nfds);

/* The shape a process's hello describes, once checked. */
struct pn_sim_hello_layout {
	uint64_t rx_bytes, tx_bytes;   /* the rings' sizes */
	uint32_t rx_slots;
	uint32_t slot_bytes;
};
/* A process's hello (PN_SIM_MSG_HELLO) for a cluster of `nodes` nodes with n_ctx contexts
 * and the given MTU, its memfd memfd_bytes long: the magic and version, node, context and
 * job size, and that every region lies inside the memory, aligned and in order. */
int pn_sim_check_hello(const struct pn_sim_hello *h, uint64_t memfd_bytes, int nodes, int n_ctx, uint32_t mtu,
		       struct pn_sim_hello_layout *out);
/* A device's hello (PN_SIM_MSG_DEVICE): its memfd memfd_bytes long, the guest's RAM ram_bytes. */
int pn_sim_check_device_hello(const struct pn_sim_hello *h, uint64_t memfd_bytes, uint64_t ram_bytes, int nodes);
/* The control block at the start of a client's memory, its queue below `end` bytes:
 * *qmask = entries - 1. */
int pn_sim_check_ctl(const struct pn_sim_ctl *c, uint64_t end, uint32_t *qmask);
/* A fault request for a cluster of `cables` cables. */
int pn_sim_check_fault(const struct pn_sim_fault *f, uint32_t cables);

/* The client's side. The welcome (n bytes) answering a hello whose memory was laid out
 * for slots of max_mtu: -EPROTO unless it is one, else its status when that is an error,
 * else -EPROTO for a shape the client cannot use (MTU, contexts, node, job size). */
int pn_sim_check_welcome(const struct pn_sim_welcome *w, size_t n, uint32_t max_mtu);
/* The harness's global shared memory (bytes long, read-only for the client): every record
 * the client reads (header, traces of nodes x n_ctx contexts, node status records) lies
 * inside it, and its clock rate is not 0. */
int pn_sim_check_global(const struct pn_sim_global *g, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* PN_SIM_PROTO_H */
