"""What runs beside an export, without JAX (numpy, mujoco, onnxruntime only): the contract's
reader (``contract``), the robot-side loop (``loop``), the MuJoCo test bench (``testbench``) and
what it records (``recording``). Its modules import only each other, relatively, so the folder
can be copied next to an export and imported as a package of any name."""
