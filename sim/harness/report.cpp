/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the log (stderr and --log), the ready file tools wait for, the
 * statistics line. See docs/simulator.md.
 */
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <string>

#include <unistd.h>

#include "harness.h"

int sim_verbose;
static FILE *log_fp;

void sim_log(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "paranic-sim: %s\n", buf);
	if (log_fp) {
		fprintf(log_fp, "%s\n", buf);
		fflush(log_fp);
	}
}

void sim_open_log(const char *path)
{
	log_fp = fopen(path, "a");
	if (!log_fp)
		fprintf(stderr, "paranic-sim: cannot open %s: %s\n", path, strerror(errno));
}

void Harness::write_ready()
{
	/* What tools need to find and describe this simulator; the shared memory's layout
	 * is the spec's (paranic.spec.sim), so it is not repeated here. */
	std::string j = "{";
	char buf[512];
	snprintf(buf, sizeof(buf),
		 "\"socket\": \"%s\", \"shm\": \"%s\", \"pid\": %d, \"topo\": \"%s\", \"nodes\": %d, "
		 "\"n_ctx\": %d, \"mtu\": %d, \"clk_hz\": %d, \"links_up_cycle\": %llu, ",
		 cfg.socket.c_str(), cfg.shm_path.c_str(), (int)getpid(), SIM_TOPO, SIM_NODES, SIM_N_CTX, SIM_MTU,
		 PN_TARGET_CLK_HZ, (unsigned long long)cycle);
	j += buf;
	/* The latency model (docs/simulator.md, "Latency model"): dma_write is what the
	 * harness applies (to the polling CPU: dma_write_pcie + poll_miss), cable the build's. */
	snprintf(buf, sizeof(buf),
		 "\"latency_cycles\": {\"mmio_write\": %u, \"mmio_read\": %u, \"dma_read\": %u, \"dma_write\": %u, "
		 "\"dma_write_pcie\": %u, \"poll_miss\": %u, \"cable\": %d}, \"ber_threshold\": %u, ",
		 cfg.c_mmio_w, cfg.c_mmio_r, cfg.c_dma_r, cfg.c_dma_w, cfg.c_dma_w_pcie, cfg.c_poll_miss, SIM_PHY_DELAY,
		 cfg.ber_threshold);
	j += buf;
	snprintf(buf, sizeof(buf),
		 "\"model\": \"%s\", \"latency_ns\": {\"mmio_write\": %g, \"mmio_read\": %g, \"dma_read\": %g, "
		 "\"dma_write\": %g, \"poll_miss\": %g, \"cable\": %g}, \"model_cable_cycles\": %u, ",
		 cfg.model.c_str(), cfg.mmio_write_ns, cfg.mmio_read_ns, cfg.dma_read_ns, cfg.dma_write_ns, cfg.poll_miss_ns,
		 SIM_PHY_DELAY * 1e9 / PN_TARGET_CLK_HZ, cfg.c_model_cable);
	j += buf;
	/* Firmware mode: the cycles from reset to a routed cluster, and node ids by index. */
#ifdef SIM_SOC
	j += "\"soc\": true, ";
#else
	j += "\"soc\": false, ";
#endif
	snprintf(buf, sizeof(buf), "\"bringup_cycles\": %llu, \"node_ids\": [", (unsigned long long)bringup_cycles);
	j += buf;
	for (int n = 0; n < SIM_NODES; n++)
		j += std::to_string(node_id[n]) + (n + 1 < SIM_NODES ? ", " : "]}\n");
	if (!cfg.ready_file.empty()) {
		std::string tmp = cfg.ready_file + ".tmp";
		FILE *f = fopen(tmp.c_str(), "w");
		if (!f || fwrite(j.data(), 1, j.size(), f) != j.size() || fclose(f) != 0 ||
		    rename(tmp.c_str(), cfg.ready_file.c_str()) != 0)
			sim_log("cannot write %s: %s", cfg.ready_file.c_str(), strerror(errno));
	}
	printf("paranic-sim ready: %s, %d nodes, %d contexts, MTU %d, links up at cycle %llu, socket %s\n", SIM_TOPO,
	       SIM_NODES, SIM_N_CTX, SIM_MTU, (unsigned long long)cycle, cfg.socket.c_str());
	fflush(stdout);
}

void Harness::print_stats(double wall)
{
	uint64_t r = 0, w = 0, wb = 0;
	for (Host *h : hosts) {
		r += h->reads;
		w += h->writes;
		wb += h->wb_ops;
	}
	sim_log("cycle %llu (%.0f us simulated) after %.1f s: %.0f cycles/s; %u clients; %llu MMIO ops, %llu bus "
		"accesses, %llu DMA reads, %llu DMA writes, %llu refused, %llu rule errors, %llu bad client entries",
		(unsigned long long)cycle, cycle * 1e6 / PN_TARGET_CLK_HZ, wall, wall > 0 ? cycle / wall : 0.0,
		g->clients, (unsigned long long)g->mmio_ops, (unsigned long long)wb, (unsigned long long)r,
		(unsigned long long)w, (unsigned long long)g->dma_refused, (unsigned long long)errors,
		(unsigned long long)client_errors);
	sim_log("route kernel: %llu routing decisions by its C++ (DPI-C, sim/harness/route_dpi.cpp)",
		(unsigned long long)sim_route_dpi_calls());
	if (g->pauses)
		sim_log("paused %llu times for clients to look (%.3f s of wall time; %llu ended by the cap)",
			(unsigned long long)g->pauses, pause_wall, (unsigned long long)g->pause_caps);
}
