"""Offscreen video of a trajectory: MuJoCo's renderer on the robot's MJCF, a caption per frame,
MP4 through imageio's bundled ffmpeg, GIF (Pillow) when that fails.

Frames are rendered in a child process (``python -m smoothloco.deploy.render``). MuJoCo picks
its OpenGL backend once, when it is imported, so trying EGL and then OSMesa takes a fresh
interpreter each; and a broken GL driver that crashes takes down the child, never a training
run. Set ``MUJOCO_GL`` to force one backend.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
from PIL import Image, ImageDraw, ImageFont

BACKENDS = ("egl", "osmesa")
WIDTH, HEIGHT = 640, 480  # MuJoCo's default offscreen buffer; both divisible by 16 for H.264
UNAVAILABLE_EXIT = 3  # the child's exit status when no GL context can be made


@dataclass(frozen=True)
class Clip:
    """What to draw: the model, one qpos and one caption per frame, and the frame rate."""

    xml: str
    qpos: np.ndarray  # (frames, nq)
    captions: Sequence[str]
    fps: float = 30.0

    def __post_init__(self) -> None:
        if self.qpos.ndim != 2 or len(self.qpos) != len(self.captions) or len(self.qpos) == 0:
            raise ValueError(f"a clip needs one caption per qpos row, got {self.qpos.shape} and {len(self.captions)}")


def render_video(clip: Clip, out: Path, timeout_s: float = 600.0) -> Path | None:
    """Write ``clip`` to ``out`` (``.mp4``; a ``.gif`` beside it if MP4 fails) and return the file.

    Returns None, after printing one line saying why, when no offscreen backend works.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    forced = os.environ.get("MUJOCO_GL")
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        frames_file = Path(tmp) / "clip.npz"
        np.savez(frames_file, xml=clip.xml, qpos=clip.qpos, captions=np.asarray(clip.captions), fps=clip.fps)
        for backend in [forced] if forced else BACKENDS:
            env = {**os.environ, "MUJOCO_GL": backend}
            env.pop("PYOPENGL_PLATFORM", None)  # let MuJoCo match PyOpenGL to the backend
            try:
                with warnings.catch_warnings():  # JAX warns on any fork; this child execs at once
                    warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
                    done = subprocess.run(
                        [sys.executable, "-m", "smoothloco.deploy.render", str(frames_file), str(out)],
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=timeout_s,
                    )
            except subprocess.TimeoutExpired:
                errors.append(f"{backend}: timed out after {timeout_s:.0f} s")
                continue
            if done.returncode == 0:
                return Path(done.stdout.strip().splitlines()[-1])
            last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            errors.append(f"{backend}: {last}")
    print(
        f"no video: offscreen rendering unavailable ({'; '.join(errors)}); see docs/usage.md, 'Rendering'", flush=True
    )
    return None


def render_frames(clip: Clip, width: int = WIDTH, height: int = HEIGHT) -> Iterator[np.ndarray]:
    """(height, width, 3) uint8 images one at a time, a camera following the base, captions drawn in."""
    model = mujoco.MjModel.from_xml_string(clip.xml)
    model.vis.global_.offwidth, model.vis.global_.offheight = max(width, 640), max(height, 480)
    data = mujoco.MjData(model)
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    camera.trackbodyid = 1  # the floating base
    # 2.5 m for the 1.2 m-extent ANYmal: every robot fills the frame alike
    camera.distance, camera.azimuth, camera.elevation = 2.1 * model.stat.extent, 135.0, -20.0
    font = ImageFont.load_default(size=max(12, height // 30))
    renderer = mujoco.Renderer(model, height, width)
    # Software GL (llvmpipe) spends 80% of a frame on shadows and reflections; a video needs neither.
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
    try:
        for qpos, caption in zip(clip.qpos, clip.captions):
            data.qpos[:] = qpos
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera)
            image = Image.fromarray(renderer.render())
            draw = ImageDraw.Draw(image)
            box = draw.textbbox((10, 8), caption, font=font)
            draw.rectangle((box[0] - 6, box[1] - 4, box[2] + 6, box[3] + 4), fill=(0, 0, 0))
            draw.text((10, 8), caption, font=font, fill=(255, 255, 255))
            yield np.asarray(image)
    finally:
        renderer.close()


def write_video(frames: Iterable[np.ndarray], out: Path, fps: float) -> Path:
    """MP4 (H.264 through imageio-ffmpeg's bundled binary), or a GIF when there is no ffmpeg."""
    try:
        # Late import: optional at run time; without imageio or an ffmpeg binary for this
        # platform the video is a GIF instead.
        import imageio.v2 as imageio
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()  # raises when no binary ships for this platform
    except (ImportError, RuntimeError) as exc:
        print(f"no ffmpeg ({exc}); writing a GIF", file=sys.stderr)
        gif = out.with_suffix(".gif")
        first, *rest = (Image.fromarray(f) for f in frames)
        first.save(gif, save_all=True, append_images=rest, duration=round(1000 / fps), loop=0)
        return gif
    mp4 = out.with_suffix(".mp4")
    with imageio.get_writer(mp4, fps=fps, codec="libx264", quality=7, macro_block_size=16) as writer:
        for frame in frames:
            writer.append_data(frame)
    return mp4


def _main(argv: list[str]) -> int:
    frames_file, out = argv
    saved = np.load(frames_file)
    clip = Clip(str(saved["xml"]), saved["qpos"], [str(c) for c in saved["captions"]], float(saved["fps"]))
    frames = render_frames(clip)
    try:
        first = next(frames)  # makes the GL context: the step that fails without a backend
    except Exception as exc:  # GL context creation raises backend-specific types
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return UNAVAILABLE_EXIT
    print(write_video(itertools.chain([first], frames), Path(out), clip.fps))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
