"""ParaNIC: an FPGA cluster interconnect in the spirit of ParaStation."""

__version__ = "0.1.0"
