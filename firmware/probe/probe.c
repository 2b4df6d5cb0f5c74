/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The bring-up probe: the smallest firmware that proves the path from the SoC's CPU to
 * its NicCore and to the host, on the simulated SoC cluster (tests/sim/test_soc_cluster.py).
 * Not the real firmware (firmware/fw_*.c): it discovers nothing. It
 *   1. reports BOOT, checks NicCore's `ident` at PARANIC_BASE + PN_CSR_IDENT (the BAR0
 *      offsets, the same as the host's);
 *   2. takes its node id from the configured id (`id_cfg_node`, bit 15 = configured),
 *      else from the low 12 bits of its DNA (`id_dna`; a probe's rule, not the real
 *      firmware's, which ranks the DNAs it discovers), and writes `node`; an id outside
 *      the topology: ERROR;
 *   3. loads the routing table of the topology it was built for (probe_gen.h, from
 *      paranic.spec.topo), waits for its links, and reports ROUTED with the topology's
 *      fingerprint.
 */
#include <stdint.h>

#include <generated/mem.h>

#include "paranic/pn_protocol.h"
#include "pn_csr.h"
#include "probe_gen.h"


static volatile uint32_t *const nic = (volatile uint32_t *)PARANIC_BASE;

static uint32_t nic_read(uint32_t off)
{
	return nic[off / 4];
}

static void nic_write(uint32_t off, uint32_t v)
{
	nic[off / 4] = v;
}

/* Firmware status and identity: NicCore's CSRs (hw/mgmt.py). The state last: a reader
 * that sees it sees the fingerprint that goes with it. */
static void set_state(uint32_t state, uint32_t fingerprint)
{
	nic_write(PN_CSR_FW_FINGERPRINT, fingerprint);
	nic_write(PN_CSR_FW_STATE, state);
}

static uint32_t cfg_node(void)
{
	return nic_read(PN_CSR_ID_CFG_NODE);
}

static uint64_t dna(void)
{
	return (uint64_t)nic_read(PN_CSR_ID_DNA) << 32 | nic_read(PN_CSR_ID_DNA + 4);
}

static int links_up(void)
{
	int up = 1;
#define LINK_UP(port, csr) up &= nic_read(csr) == PN_LINK_STATE_UP;
	PN_CSR_LINK_STATES(LINK_UP)
#undef LINK_UP
	return up;
}

int main(void);
int main(void)
{
	set_state(PN_FW_STATE_BOOT, 0);
	if (nic_read(PN_CSR_IDENT) != PN_NIC_IDENT)
		goto fail;
	uint32_t cfg = cfg_node();
	uint32_t id = (cfg & PN_CFG_NODE_VALID) ? cfg & 0xfffu : (uint32_t)(dna() & 0xfffu);
	if (id >= PROBE_NODES)
		goto fail;
	nic_write(PN_CSR_NODE, id);
	for (uint32_t d = 0; d < PROBE_TABLE_NODES; d++) {
		nic_write(PN_CSR_ROUTER_ROUTE_ADR, d);
		nic_write(PN_CSR_ROUTER_ROUTE_PORT, PROBE_ROUTES[id][d]);
		nic_write(PN_CSR_ROUTER_ROUTE_WRITE, 1);
	}
	while (!links_up())
		;
	set_state(PN_FW_STATE_ROUTED, PROBE_FINGERPRINT);
	for (;;)
		;
fail:
	set_state(PN_FW_STATE_ERROR, 0);
	for (;;)
		;
}
