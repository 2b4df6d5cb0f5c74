// SPDX-License-Identifier: BSD-2-Clause
// paranic-sim: the route kernel's C++ in place of its RTL (docs/simulator.md, "The route
// kernel"). Module `route_dpi` has the kernel's ports: route_dpi_ports.svh, which the
// build generates from paranic.spec.kernels.ROUTE_PORTS (paranic.spec.cgen.route_ports_svh),
// and every width below is taken from them. It has the same ap_ctrl_hs behaviour as the
// Migen twin's short path: ap_start with the inputs (cycle 0) reads the table through the
// real ap_memory port (table_address0/table_ce0); table_q0 comes back in cycle 1, when
// the C++ route() runs on it (route_dpi.cpp: the entry put in place in its table) and
// answers combinationally: ap_done and ap_return in cycle 1. One request per cycle.
// The combinational call may be evaluated several times in a cycle: route() has no
// side effect that differs between calls, and the routing decision is counted once per
// request, in the clocked block.
module route_dpi (
`include "route_dpi_ports.svh"
);
    import "DPI-C" function int pn_route_dpi(input int dst, input int node_x, input int node_y,
                                             input int dim_x, input int dim_y, input int entry);
    import "DPI-C" function void pn_route_dpi_count();

    reg                     s_valid;
    reg [$bits(dst)-1:0]    s_dst;
    reg [$bits(node_x)-1:0] s_nx;
    reg [$bits(node_y)-1:0] s_ny;
    reg [$bits(dim_x)-1:0]  s_dx;
    reg [$bits(dim_y)-1:0]  s_dy;
    // verilator lint_off UNUSEDSIGNAL
    int                     r;   // the C++ answer; its low bits are ap_return
    // verilator lint_on UNUSEDSIGNAL

    assign table_address0 = dst[$bits(table_address0)-1:0];
    assign table_ce0 = ap_start;
    assign ap_ready = 1'b1;
    assign ap_idle = ~(ap_start | s_valid);
    assign ap_done = s_valid;
    assign ap_return = r[$bits(ap_return)-1:0];

    // Cycle 1: the C++ on the registered request and the table entry, combinational.
    always_comb begin
        r = 0;
        if (s_valid)
            r = pn_route_dpi(int'(s_dst), int'(s_nx), int'(s_ny), int'(s_dx), int'(s_dy),
                             int'(table_q0));   // unsigned: zero-extended
    end

    always @(posedge ap_clk) begin
        if (ap_rst)
            s_valid <= 1'b0;
        else
            s_valid <= ap_start;
        if (ap_start) begin
            s_dst <= dst;
            s_nx <= node_x;
            s_ny <= node_y;
            s_dx <= dim_x;
            s_dy <= dim_y;
        end
        if (s_valid && !ap_rst)
            pn_route_dpi_count();   // one routing decision per request
    end
endmodule
