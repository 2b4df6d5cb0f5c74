/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd's client commands: `paranicd status|procs|jobs [--json]`, `job-start`,
 * `job-end`, through libparanic's query API (pn_daemon.h); tables or JSON on stdout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranicd.h"

/* ---- output ---------------------------------------------------------------------------- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static const char *ip4(uint32_t a, char *buf)
{
	sprintf(buf, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
	return buf;
}

int client_cmd(const char *cmd, const char *sock, int json, pn_daemon_job_t *job)
{
	int r;
	char ip[20];

	if (!strcmp(cmd, "status")) {
		pn_daemon_info_t in;
		pn_daemon_node_t *nodes = calloc(PN_MAX_NODES, sizeof(*nodes));
		if (!nodes)
			return 1;
		if ((r = pn_daemon_status(sock, &in, nodes, PN_MAX_NODES)) < 0)
			goto fail;
		if (json) {
			printf("{\"node\": %d, \"nodes\": %d, \"ctx\": %d, \"num_ctx\": %d, \"pid\": %u, \"abi\": %u, "
			       "\"hello_ms\": %u, \"down_ms\": %u, \"hellos_sent\": %llu, \"hellos_recv\": %llu, "
			       "\"notices_sent\": %llu, \"cleanups\": %llu, \"refused\": %llu, \"cluster\": ",
			       in.node, in.nodes, in.ctx, in.num_ctx, in.pid, in.abi, in.hello_ms, in.down_ms,
			       (unsigned long long)in.hellos_sent, (unsigned long long)in.hellos_recv,
			       (unsigned long long)in.notices_sent, (unsigned long long)in.cleanups,
			       (unsigned long long)in.refused);
			json_str(in.cluster);
			printf(", \"backend\": ");
			json_str(in.backend);
			printf(", \"members\": [");
			for (int i = 0; i < r && i < PN_MAX_NODES; i++) {
				printf("%s{\"node\": %d, \"state\": \"%s\", \"pid\": %u, \"addr\": \"%s\", \"age_ms\": %lld, "
				       "\"host\": ", i ? ", " : "", nodes[i].node, nodes[i].up ? "up" : "down", nodes[i].pid,
				       ip4(nodes[i].addr, ip), (long long)nodes[i].age_ms);
				json_str(nodes[i].host);
				printf("}");
			}
			printf("]}\n");
		} else {
			printf("cluster %s (%s), seen from node %d (paranicd pid %u, context %d)\n", in.cluster, in.backend,
			       in.node, in.pid, in.ctx);
			printf("%-5s %-16s %-15s %-5s %-8s %s\n", "node", "host", "address", "state", "pid", "heard");
			for (int i = 0; i < r && i < PN_MAX_NODES; i++) {
				char age[32];
				if (nodes[i].age_ms < 0)
					snprintf(age, sizeof(age), "never");
				else
					snprintf(age, sizeof(age), "%lld ms ago", (long long)nodes[i].age_ms);
				printf("%-5d %-16s %-15s %-5s %-8u %s\n", nodes[i].node, nodes[i].host[0] ? nodes[i].host : "-",
				       ip4(nodes[i].addr, ip), nodes[i].up ? "up" : "down", nodes[i].pid, age);
			}
		}
		free(nodes);
		return 0;
	fail:
		free(nodes);
	} else if (!strcmp(cmd, "procs")) {
		pn_daemon_proc_t p[PN_MAX_CONTEXTS];
		if ((r = pn_daemon_procs(sock, p, PN_MAX_CONTEXTS)) < 0)
			goto fail2;
		if (json)
			printf("[");
		else
			printf("%-5s %-4s %-8s %-6s %s\n", "node", "ctx", "pid", "uid", "job");
		for (int i = 0; i < r && i < PN_MAX_CONTEXTS; i++) {
			if (json) {
				printf("%s{\"node\": %d, \"ctx\": %d, \"pid\": %u, \"uid\": %u, \"abi\": %u, \"job\": ",
				       i ? ", " : "", p[i].node, p[i].ctx, p[i].pid, p[i].uid, p[i].abi);
				json_str(p[i].job);
				printf("}");
			} else {
				printf("%-5d %-4d %-8u %-6u %s\n", p[i].node, p[i].ctx, p[i].pid, p[i].uid,
				       p[i].job[0] ? p[i].job : "-");
			}
		}
		if (json)
			printf("]\n");
		return 0;
	} else if (!strcmp(cmd, "jobs")) {
		pn_daemon_job_t j[PN_DAEMON_MAX_JOBS];
		if ((r = pn_daemon_jobs(sock, j, PN_DAEMON_MAX_JOBS)) < 0)
			goto fail2;
		if (json)
			printf("[");
		else
			printf("%-20s %-6s %-5s %-4s %-5s %s\n", "job", "uid", "nodes", "ppn", "procs", "command");
		for (int i = 0; i < r && i < PN_DAEMON_MAX_JOBS; i++) {
			if (json) {
				printf("%s{\"id\": ", i ? ", " : "");
				json_str(j[i].id);
				printf(", \"uid\": %u, \"nodes\": %d, \"ppn\": %d, \"procs\": %d, \"start_unix_ms\": %llu, "
				       "\"command\": ",
				       j[i].uid, j[i].nodes, j[i].ppn, j[i].procs, (unsigned long long)j[i].start_unix_ms);
				json_str(j[i].command);
				printf("}");
			} else {
				printf("%-20s %-6u %-5d %-4d %-5d %s\n", j[i].id, j[i].uid, j[i].nodes, j[i].ppn, j[i].procs,
				       j[i].command);
			}
		}
		if (json)
			printf("]\n");
		return 0;
	} else if (!strcmp(cmd, "job-start")) {
		if ((r = pn_daemon_job_start(sock, job)) < 0)
			goto fail2;
		return 0;
	} else if (!strcmp(cmd, "job-end")) {
		if ((r = pn_daemon_job_end(sock, job->id)) < 0)
			goto fail2;
		return 0;
	} else {
		fprintf(stderr, "paranicd: unknown command %s\n", cmd);
		return 2;
	}
fail2:
	fprintf(stderr, "paranicd %s: %s%s%s\n", cmd, pn_strerror(r), pn_daemon_last_reason()[0] ? ": " : "",
		pn_daemon_last_reason());
	return r == -ENOTCONN ? 3 : 1;
}
