/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Counters that show where the traffic went: the provider's operations, the ports'
 * message counters split into the NIC and the intra-node shared-memory path
 * (pn_port_stats), and the NIC's own packet counters (pn_status). Summed over the
 * endpoints as they close; written when the domain closes if PARANIC_FI_STATS is set:
 * "stderr" (or "-"), or a path (a file per process: "%p" in it becomes the pid, "%n"
 * the node; the line is appended). One line, "paranic-fi:" then key=value pairs.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pfi.h"

void pfi_stats_add_port(struct pfi_counters *c, pn_port_t *port)
{
	pn_port_stats_t ps;
	pn_status_t hs;
	if (pn_port_stats(port, &ps) == 0) {
		c->sent_msgs += ps.sent_msgs;
		c->sent_bytes += ps.sent_bytes;
		c->recv_msgs += ps.recv_msgs;
		c->recv_bytes += ps.recv_bytes;
		c->shm_msgs += ps.shm_msgs;
		c->shm_bytes += ps.shm_bytes;
		c->shm_recv_msgs += ps.shm_recv_msgs;
		c->shm_recv_bytes += ps.shm_recv_bytes;
		c->eager_msgs += ps.eager_msgs;
		c->rndv_msgs += ps.rndv_msgs;
	}
	if (pn_status(pn_port_hal(port), &hs) == 0) {
		c->nic_tx_packets += hs.sent_packets;
		c->nic_tx_bytes += hs.sent_bytes;
		c->nic_rx_packets += hs.recv_packets;
		c->nic_rx_bytes += hs.recv_bytes;
	}
}

static void path_of(const char *spec, int node, char *out, size_t cap)
{
	size_t k = 0;
	for (const char *s = spec; *s && k + 24 < cap; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			k += (size_t)snprintf(out + k, cap - k, "%d", (int)getpid());
			s++;
		} else if (s[0] == '%' && s[1] == 'n') {
			k += (size_t)snprintf(out + k, cap - k, "%d", node);
			s++;
		} else {
			out[k++] = *s;
		}
	}
	out[k] = 0;
}

void pfi_stats_report(const struct pfi_domain *dom)
{
	const char *spec = getenv("PARANIC_FI_STATS");
	const struct pfi_counters *c = &dom->cnt;
	char path[4096];
	FILE *f;
	if (!spec || !*spec)
		return;
	if (!strcmp(spec, "stderr") || !strcmp(spec, "-")) {
		f = stderr;
	} else {
		path_of(spec, dom->node, path, sizeof(path));
		if (!(f = fopen(path, "a"))) {
			fprintf(stderr, "paranic-fi: PARANIC_FI_STATS: cannot open %s\n", path);
			return;
		}
	}
	fprintf(f,
		"paranic-fi: pid=%d node=%d eps=%llu"
		" tsend=%llu trecv=%llu tinject=%llu send=%llu recv=%llu inject=%llu"
		" peek=%llu peek_found=%llu claim=%llu discard=%llu cancelled=%llu truncated=%llu errors=%llu"
		" cq_entries=%llu cq_errors=%llu"
		" sent_msgs=%llu sent_bytes=%llu recv_msgs=%llu recv_bytes=%llu"
		" nic_sent_msgs=%llu nic_sent_bytes=%llu nic_recv_msgs=%llu nic_recv_bytes=%llu"
		" shm_sent_msgs=%llu shm_sent_bytes=%llu shm_recv_msgs=%llu shm_recv_bytes=%llu"
		" eager_msgs=%llu rndv_msgs=%llu"
		" nic_tx_packets=%llu nic_tx_bytes=%llu nic_rx_packets=%llu nic_rx_bytes=%llu\n",
		(int)getpid(), dom->node, (unsigned long long)c->eps, (unsigned long long)c->tsend,
		(unsigned long long)c->trecv, (unsigned long long)c->tinject, (unsigned long long)c->send,
		(unsigned long long)c->recv, (unsigned long long)c->inject, (unsigned long long)c->peek,
		(unsigned long long)c->peek_found, (unsigned long long)c->claim, (unsigned long long)c->discard,
		(unsigned long long)c->cancelled, (unsigned long long)c->truncated, (unsigned long long)c->errors,
		(unsigned long long)c->cq_entries, (unsigned long long)c->cq_errors, (unsigned long long)c->sent_msgs,
		(unsigned long long)c->sent_bytes, (unsigned long long)c->recv_msgs, (unsigned long long)c->recv_bytes,
		(unsigned long long)(c->sent_msgs - c->shm_msgs), (unsigned long long)(c->sent_bytes - c->shm_bytes),
		(unsigned long long)(c->recv_msgs - c->shm_recv_msgs),
		(unsigned long long)(c->recv_bytes - c->shm_recv_bytes), (unsigned long long)c->shm_msgs,
		(unsigned long long)c->shm_bytes, (unsigned long long)c->shm_recv_msgs,
		(unsigned long long)c->shm_recv_bytes, (unsigned long long)c->eager_msgs,
		(unsigned long long)c->rndv_msgs, (unsigned long long)c->nic_tx_packets,
		(unsigned long long)c->nic_tx_bytes, (unsigned long long)c->nic_rx_packets,
		(unsigned long long)c->nic_rx_bytes);
	if (f != stderr)
		fclose(f);
	else
		fflush(f);
}
