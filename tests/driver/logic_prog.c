// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * User-space harness of driver/pn_logic.c (the driver's hardware-independent part,
 * the very file the module links). One command per line on stdin, one answer per
 * line on stdout: "<return code> [outputs...]". Driven by test_driver_logic.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pn_logic.h"

#define PAGE 4096ULL

static int nums(char *s, unsigned long long *v, int n)
{
	int i;
	char *tok, *end;

	for (i = 0; i < n; i++) {
		tok = strtok(i ? NULL : s, " \t\n");
		if (!tok)
			return -1;
		v[i] = strtoull(tok, &end, 0);
		if (*end)
			return -1;
	}
	return 0;
}

int main(void)
{
	char line[4096], cmd[32];
	unsigned long long v[12];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		char *rest;
		int r;

		if (sscanf(line, "%31s", cmd) != 1)
			continue;
		rest = strstr(line, cmd) + strlen(cmd);
		if (!strcmp(cmd, "claim") && !nums(rest, v, 3)) {
			u64 map = v[0];
			r = pn_ctx_claim(&map, (u32)v[1], (int)(long long)v[2]);
			printf("%d %llu\n", r, (unsigned long long)map);
		} else if (!strcmp(cmd, "free") && !nums(rest, v, 3)) {
			u64 map = v[0];
			r = pn_ctx_free(&map, (u32)v[1], (u32)v[2]);
			printf("%d %llu\n", r, (unsigned long long)map);
		} else if (!strcmp(cmd, "geom") && !nums(rest, v, 4)) {
			struct pn_geom g;
			memset(&g, 0, sizeof(g));
			r = pn_geom_init(&g, (u32)v[0], (u32)v[1], (u32)v[2], v[3]);
			printf("%d %u %u %u %llu %llu %llu\n", r, g.rx_slots, g.rx_slot_bytes, g.tx_entries,
			       (unsigned long long)g.rx_bytes, (unsigned long long)g.tx_bytes,
			       (unsigned long long)g.status_bytes);
		} else if (!strcmp(cmd, "mmap") && !nums(rest, v, 7)) {
			struct pn_geom g;
			r = pn_geom_init(&g, (u32)v[0], (u32)v[1], (u32)v[2], PAGE);
			if (!r)
				r = pn_mmap_check(&g, v[3], v[4], v[5], (int)v[6], PAGE);
			printf("%d\n", r);
		} else if (!strcmp(cmd, "mem") && !nums(rest, v, 7)) {
			struct paranic_mem m = {.addr = v[0], .len = v[1], .flags = (u32)v[2],
						.reserved = (u32)v[3]};
			u64 first = 0, np = 0;
			r = pn_mem_check(&m, v[4], v[5], v[6], PAGE, &first, &np);
			printf("%d %llu %llu\n", r, (unsigned long long)first, (unsigned long long)np);
		} else if (!strcmp(cmd, "node") && !nums(rest, v, 4)) {
			struct paranic_node n = {(u32)v[0], (u32)v[1], (u32)v[2], (u32)v[3]};
			printf("%d\n", pn_node_check(&n));
		} else if (!strcmp(cmd, "routes") && !nums(rest, v, 4)) {
			struct paranic_routes rt = {(u32)v[0], (u32)v[1], v[2]};
			printf("%d\n", pn_routes_check(&rt, (u32)v[3]));
		} else if (!strcmp(cmd, "port") && !nums(rest, v, 2)) {
			printf("%d\n", pn_route_port_check((u8)v[0], (u32)v[1]));
		} else if (!strcmp(cmd, "barrier") && !nums(rest, v, 6)) {
			struct paranic_barrier b = {(u32)v[0], (u32)v[1], (u32)v[2], (u32)v[3], v[4]};
			printf("%d\n", pn_barrier_check(&b, (u32)v[5]));
		} else if (!strcmp(cmd, "send") && !nums(rest, v, 6)) {
			struct paranic_send s = {.dst_node = (u16)v[0], .dst_ctx = (u8)v[1], .type = (u8)v[2],
						 .length = (u32)v[3], .tag = v[4]};
			u64 h[2] = {0, 0};
			r = pn_send_build(&s, (u32)v[5], h);
			printf("%d %llu %llu\n", r, (unsigned long long)h[0], (unsigned long long)h[1]);
		} else if (!strcmp(cmd, "db") && !nums(rest, v, 1)) {
			struct paranic_doorbell d = {(u32)v[0], 0};
			printf("%d\n", pn_doorbell_check(&d));
		} else if (!strcmp(cmd, "ioctl") && !nums(rest, v, 1)) {
			printf("%d\n", pn_ioctl_check((unsigned int)v[0]));
		} else if (!strcmp(cmd, "ioctls") && !nums(rest, v, 0)) {
			/* The command numbers, for the Python side. */
			static const unsigned long cmds[] = {
				PARANIC_IOC_GET_INFO, PARANIC_IOC_SET_NODE_ID, PARANIC_IOC_LOAD_ROUTES,
				PARANIC_IOC_MEM_REGISTER, PARANIC_IOC_MEM_DEREGISTER,
				PARANIC_IOC_BARRIER_CONFIG, PARANIC_IOC_SEND, PARANIC_IOC_DOORBELL};
			for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
				printf("%lu%c", cmds[i], i + 1 < sizeof(cmds) / sizeof(cmds[0]) ? ' ' : '\n');
		} else {
			printf("bad %s", line);
		}
	}
	return 0;
}
