# The Vitis HLS flow of one kernel (docs/hls.md): C simulation, C synthesis, C/RTL
# co-simulation and IP export of hls/<kernel>/<kernel>.cpp with its testbench
# <kernel>_tb.cpp. Each kernel's run_hls.tcl sources this file and calls pn_hls_flow.
# `make hls` (python -m paranic.hls) runs it when vitis_hls or vitis-run is on PATH, from
# build/hls/<kernel>, with the environment:
#   PN_TREE         the source tree
#   PN_HLS_VECTORS  the testbench's self-checking vectors (written by paranic.hls)
#   PN_HLS_PROJECT, PN_HLS_SOLUTION  the project's and the solution's names (one
#                   definition: paranic.sim.hlsenv; board builds read the export there)
#   PN_HLS_PART     the FPGA part (default: the KC705's xc7k325tffg900-2)
#   PN_HLS_CLOCK_NS the clock period (default 8: the NIC's 125 MHz)
proc pn_hls_flow {kernel} {
    set tree $::env(PN_TREE)
    set vectors $::env(PN_HLS_VECTORS)
    set project $::env(PN_HLS_PROJECT)
    set solution $::env(PN_HLS_SOLUTION)
    set part [expr {[info exists ::env(PN_HLS_PART)] ? $::env(PN_HLS_PART) : "xc7k325tffg900-2"}]
    set period [expr {[info exists ::env(PN_HLS_CLOCK_NS)] ? $::env(PN_HLS_CLOCK_NS) : 8}]
    set cflags "-I$tree/hls/include -I$tree/userlib/include"

    open_project -reset $project
    set_top $kernel
    add_files $tree/hls/$kernel/$kernel.cpp -cflags $cflags
    add_files -tb $tree/hls/$kernel/${kernel}_tb.cpp -cflags $cflags
    open_solution -reset $solution -flow_target vivado
    set_part $part
    create_clock -period $period -name default

    csim_design -argv $vectors
    csynth_design
    cosim_design -argv $vectors -rtl verilog
    export_design -format ip_catalog -rtl verilog -vendor paranic.org -library hls -version 1.0 \
        -ipname $project
    exit
}
