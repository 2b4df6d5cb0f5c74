# Vitis HLS flow of the `route` kernel: hls/flow.tcl (docs/hls.md).
source [file join [file dirname [file normalize [info script]]] .. flow.tcl]
pn_hls_flow route
