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

#include <generated/csr.h>
#include <generated/mem.h>

#include "paranic/pn_protocol.h"
#include "pn_csr.h"
#include "probe_gen.h"

#ifndef PN_FW_STATE_ROUTED   /* TEMPORARY: spec/fw.py's FwState (mgmt helper) once merged */
#define PN_FW_STATE_BOOT 1
#define PN_FW_STATE_ROUTED 3
#define PN_FW_STATE_ERROR 5
#endif
#define CFG_NODE_VALID 0x8000u

static volatile uint32_t *const nic = (volatile uint32_t *)PARANIC_BASE;

static uint32_t nic_read(uint32_t off)
{
	return nic[off / 4];
}

static void nic_write(uint32_t off, uint32_t v)
{
	nic[off / 4] = v;
}

/* Firmware status and identity: NicCore's CSRs (hw/mgmt.py) when present, else the SoC
 * node's TEMPORARY simtmp_* CSRs (hw/socnode.py: SimIdTemp). */
static void set_state(uint32_t state, uint32_t fingerprint)
{
#ifdef PN_CSR_FW_STATE
	nic_write(PN_CSR_FW_FINGERPRINT, fingerprint);
	nic_write(PN_CSR_FW_STATE, state);
#else
	simtmp_fw_fingerprint_write(fingerprint);
	simtmp_fw_state_write(state);
#endif
}

static uint32_t cfg_node(void)
{
#ifdef PN_CSR_ID_CFG_NODE
	return nic_read(PN_CSR_ID_CFG_NODE);
#else
	return simtmp_cfg_node_read();
#endif
}

static uint64_t dna(void)
{
#ifdef PN_CSR_ID_DNA
	return (uint64_t)nic_read(PN_CSR_ID_DNA) << 32 | nic_read(PN_CSR_ID_DNA + 4);
#else
	return simtmp_dna_read();
#endif
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
	uint32_t id = (cfg & CFG_NODE_VALID) ? cfg & 0xfffu : (uint32_t)(dna() & 0xfffu);
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
