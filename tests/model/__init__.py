"""Python models of ParaNIC's surroundings for cocotb benches (host, ...)."""
