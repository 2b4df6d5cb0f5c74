"""Python models of ParaNIC's surroundings for the Migen and cocotb benches: the PC's
PCIe side (``pcie``, ``hostmem`` and a driver per simulator), its software (``host``),
CSR access (``csr``)."""
