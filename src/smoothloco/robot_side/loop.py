"""The robot-side loop: read the sensors, call the controller graph, hand its joint targets to
the drives' PD. ``control_loop`` is the whole of it (docs/usage.md shows it as it is here);
everything between sensors and targets (observation, memory, gait clock, trim) is inside the
graph, so a port writes only the sensor reading and the drive command."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import onnxruntime

from .contract import COMMAND_INPUT, STATE_INPUT, Contract


class Controller:
    """The exported controller graph and its state; an episode starts from the all-zero state."""

    def __init__(self, contract: Contract):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # a small graph: threads cost more than they save
        self.session = onnxruntime.InferenceSession(
            str(contract.onnx_file), options, providers=["CPUExecutionProvider"]
        )
        self.sensors = contract.inputs[:-2]  # the sensor inputs, in the graph's order
        self.state = np.zeros(contract.state_size, np.float32)

    def reset(self) -> None:
        """Start a new episode (the robot put down, the controller switched on)."""
        self.state = np.zeros_like(self.state)

    def __call__(self, sensors: Mapping[str, np.ndarray], command: Sequence[float]) -> np.ndarray:
        """Joint position targets (rad) for one control period; the state moves on."""
        feed = {name: np.asarray(sensors[name], np.float32) for name in self.sensors}
        feed[COMMAND_INPUT[0]] = np.asarray(command, np.float32)
        feed[STATE_INPUT] = self.state
        targets, self.state = self.session.run(None, feed)
        return targets


class Robot(Protocol):
    """What the loop needs of a robot (or of the MuJoCo test bench's ``SimulatedRobot``)."""

    def sensors(self) -> Mapping[str, np.ndarray]:
        """The current readings, by the contract's sensor input names (SI units, base frame)."""
        ...

    def drive(self, targets: np.ndarray, seconds: float) -> None:
        """Hold the joints' PD on ``targets`` for ``seconds`` (blocking until the next period)."""
        ...


def control_loop(export_dir: str | Path, robot: Robot, joystick: Callable[[], Sequence[float]], periods: int) -> None:
    """Drive ``robot`` with the export in ``export_dir`` for ``periods`` control periods."""
    contract = Contract(export_dir)
    controller = Controller(contract)
    for _ in range(periods):
        targets = controller(robot.sensors(), joystick())
        robot.drive(targets, contract.control_dt)
