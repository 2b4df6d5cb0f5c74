"""Simulation: the Verilator cluster simulator and the gateware only simulations use.

================  ==============================================================
``build.py``      the cluster simulator's build (Verilog, model, harness; cached)
``run.py``        starting and stopping it, reading its clock and trace records
``__main__.py``   ``python -m paranic.sim``: build and run it by hand
``cluster.py``    N NicCores cabled as a ring or torus (the simulated cluster's top)
``cable.py``      the simulated cable (delay, bit errors) where a board has a PHY
``channels.py``   WireChannel and LinkChannel joining two router ports
``testnet.py``    router-only test networks with traffic generators
``traffic.py``    the hardware traffic generator and checker
``hdl.py``        Migen -> Verilog -> Verilator + cocotb, cached builds
``paths.py``      where sources and builds are
================  ==============================================================

It sits above the gateware (``paranic.hw``) and the spec, below the tools.
See ``docs/simulator.md``.
"""
