"""``bench.progress``: a tqdm bar on a terminal, plain rate-limited lines in a log."""

import io
import re
import subprocess
import sys

import pytest

from bench.progress import LogProgress, format_duration, progress
from bench.scene.bundle import save_scene
from bench.scene.sample import make_sample_scene


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_lines_are_few_and_carry_count_rate_and_eta():
    clock, stream = FakeClock(), io.StringIO()
    bar = progress(total=1000, desc="render", unit="view", file=stream, clock=clock)
    assert isinstance(bar, LogProgress)
    with bar:
        for _ in range(1000):
            clock.now += 0.035  # 1000 updates over 35 fake seconds
            bar.update(1)
    text = stream.getvalue()
    lines = text.splitlines()
    assert "\r" not in text
    assert 3 <= len(lines) <= 6, lines
    assert lines[0] == "[render] start: 1000 view"
    middle = lines[1:-1]
    assert middle
    for line in middle:
        assert re.fullmatch(r"\[render\] \d+/1000 view, [\d.]+ view/s, ETA \d+s", line), line
    assert middle[0].startswith("[render] 286/1000 view, 28.6 view/s, ETA 25s")
    assert lines[-1] == "[render] done: 1000 view in 35s"


def test_log_iteration_postfix_slow_rate_and_interval():
    clock, stream = FakeClock(), io.StringIO()
    bar = progress(range(4), desc="rollouts", unit="ep", file=stream, clock=clock, interval=60,
                   mininterval=5.0)  # tqdm-only options are accepted and ignored here
    seen = []
    for i in bar:
        seen.append(i)
        clock.now += 40
        bar.set_postfix(loss="0.1234")
    assert seen == [0, 1, 2, 3]
    lines = stream.getvalue().splitlines()
    assert lines == ["[rollouts] start: 4 ep",
                     "[rollouts] 2/4 ep, 40.0 s/ep, ETA 1m20s (loss=0.1234)",
                     "[rollouts] 4/4 ep, 40.0 s/ep, ETA 0s (loss=0.1234)",
                     "[rollouts] done: 4 ep in 2m40s"]
    bar.close()  # closing twice writes nothing more
    assert len(stream.getvalue().splitlines()) == 4


def test_log_unknown_total_stopped_early_and_disabled():
    clock, stream = FakeClock(), io.StringIO()
    with progress(desc="sharpness", file=stream, clock=clock, interval=1) as bar:
        clock.now += 2
        bar.set_postfix_str("a.mp4")
        bar.update(5)
    assert stream.getvalue().splitlines() == [
        "[sharpness] start: it", "[sharpness] 5 it, 2.5 it/s (a.mp4)",
        "[sharpness] done: 5 it in 2s"]
    stream = io.StringIO()
    with progress(total=10, desc="eval", unit="ep", file=stream, clock=clock) as bar:
        bar.update(3)
    assert stream.getvalue().splitlines()[-1] == "[eval] stopped: 3/10 ep after 0s"
    for disable in (True, None):  # None: only on a terminal, as tqdm's disable=None
        stream = io.StringIO()
        assert list(progress(range(3), desc="x", file=stream, disable=disable)) == [0, 1, 2]
        assert stream.getvalue() == ""


def test_terminal_gets_tqdm():
    from tqdm import tqdm

    stream = Terminal()
    bar = progress(range(3), desc="render", unit="view", file=stream, mininterval=0)
    assert isinstance(bar, tqdm)
    assert list(bar) == [0, 1, 2]
    assert "\r" in stream.getvalue() and "3/3" in stream.getvalue()
    assert isinstance(progress(total=2, file=Terminal(), disable=None), tqdm)


def test_format_duration():
    assert [format_duration(s) for s in (0, 59.4, 59.6, 193, 3599, 3600, 7500)] == [
        "0s", "59s", "1m00s", "3m13s", "59m59s", "1h00m", "2h05m"]


def test_importing_progress_does_not_import_tqdm():
    code = "import sys, bench.progress; print('tqdm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("scene") / "room"
    save_scene(make_sample_scene(seed=0, n_gaussians=2000), root)
    return root


def test_render_command_writes_plain_lines_to_a_piped_stderr(scene_dir, tmp_path):
    code = "import sys; from bench.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "render", "--scene", str(scene_dir), "--role", "obs_probe",
         "--out", str(tmp_path / "out"), "--backend", "cpu", "--width", "32"],
        capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    err = result.stderr.decode()
    assert "\r" not in err
    lines = [line for line in err.splitlines() if line.startswith("[render]")]
    assert lines[0] == "[render] start: 12 view" and lines[-1].startswith("[render] done: 12 view")
    assert len(lines) <= 4 and len(err.splitlines()) <= 20, err
